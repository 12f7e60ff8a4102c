//! The frozen M = 1 stage of a staged fit. A staged corpus's batched rows were timed at the M = 1
//! picks of a frozen policy (its plan binds that policy's M = 1 digest), so its fit must carry
//! exactly that policy's M = 1 part: the decode domains (models, trees, statistics) and decode
//! overlays are copied, not refitted; only the batched buckets are fitted from the corpus.

use vnni_corpus::inventory::InventoryPlan;
use vnni_corpus::staged::InheritedPick;
use vnni_policy::{short, Domain, FrozenStage, Overlay, Policy};

use crate::corpus::Corpus;
use crate::domains::DomainKey;
use crate::error::{FitError, Result};

/// The frozen stage a fit of `corpus` must use: `None` for a one-stage corpus fitted without
/// one; an error when one is missing, not the corpus's, or does not fit its skeleton.
pub fn check<'p>(
    corpus: &Corpus,
    skeleton: &Policy,
    frozen: Option<&'p Policy>,
) -> Result<Option<(&'p Policy, FrozenStage)>> {
    let err = |message: String| FitError::Frozen { dir: corpus.dir.clone(), message };
    let (bound, policy) = match (&corpus.plan.frozen_m1, frozen) {
        (None, None) => return Ok(None),
        (Some(b), Some(p)) => (b, p),
        (Some(b), None) => {
            return Err(err(format!(
                "is the batched stage of a staged refresh (its batched rows were timed at the M = 1 picks of a frozen policy, M = 1 digest {}, fitted on corpus {}): fit it with that policy (`fit --frozen-m1`; `report --policy` takes the staged policy)",
                short(&b.m1_digest),
                b.m1_corpus_id
            )))
        }
        (None, Some(_)) => {
            return Err(err(
                "was not collected at a frozen policy's M = 1 picks (a one-stage corpus): fit it without --frozen-m1".into(),
            ))
        }
    };
    let digest = policy.m1_digest();
    if digest != bound.m1_digest {
        return Err(err(format!(
            "its batched rows were timed at the M = 1 picks of a policy with M = 1 digest {}, but the given frozen policy's is {}: pass the policy the batched sweep was given (--m1-policy)",
            short(&bound.m1_digest),
            short(&digest)
        )));
    }
    // The digest binds the frozen policy's data; the picks bind what this binary makes of it
    // (the cost-model and bpp formulas): both must be what the batched rows were timed at.
    let now = picks(policy, &corpus.plan.inventory).map_err(err)?;
    if let Some((p, q)) = bound.picks.iter().zip(&now).find(|(p, q)| p != q) {
        return Err(err(format!(
            "its batched rows of {} {}x{} {} were timed at the frozen pick {} (bpp {}), but this binary evaluates the frozen policy to {} (bpp {}): the cost-model or bpp rules changed since the batched sweep; sweep the batched stage again",
            p.format.name(),
            p.n,
            p.k,
            p.mode,
            p.candidate,
            p.bpp,
            q.candidate,
            q.bpp
        )));
    }
    if bound.picks.len() != now.len() {
        return Err(err(format!(
            "its plan binds {} frozen picks, but the frozen policy answers {} (format, N, K, mode) points of it",
            bound.picks.len(),
            now.len()
        )));
    }
    let same = [
        ("units", policy.units == skeleton.units),
        ("codebooks", policy.codebooks == skeleton.codebooks),
        ("modes", policy.modes == skeleton.modes),
        ("aspect edges", policy.aspect_edges == skeleton.aspect_edges),
        ("backend", policy.provenance.backend == skeleton.provenance.backend),
        ("arch", policy.provenance.arch == skeleton.provenance.arch),
    ];
    if let Some((what, _)) = same.iter().find(|(_, ok)| !ok) {
        return Err(err(format!("the frozen M = 1 policy's {what} differ from this corpus's")));
    }
    Ok(Some((
        policy,
        FrozenStage {
            m1_corpus_id: bound.m1_corpus_id.clone(),
            m1_digest: digest,
            m1_pairs: policy.provenance.pairs.clone(),
        },
    )))
}

/// A policy's M = 1 pick (and that pick's bpp) for every planned (format, N, K) in every mode
/// it answers, sorted: what the batched stage of a staged collection binds and is timed at.
pub fn picks(policy: &Policy, plan: &InventoryPlan) -> std::result::Result<Vec<InheritedPick>, String> {
    let mut out = Vec::new();
    for s in &plan.shapes {
        for &format in &s.formats {
            for mode in &policy.modes {
                let sel = policy
                    .select(format.codebook().name(), mode, 1, s.n as u64, s.k as u64)
                    .map_err(|e| format!("no M = 1 pick for {format} {}x{} {mode}: {e}", s.n, s.k))?;
                out.push(InheritedPick {
                    format,
                    n: s.n,
                    k: s.k,
                    mode: mode.parse().map_err(|e: vnni_kernels::vocab::UnknownWord| e.to_string())?,
                    candidate: sel
                        .candidate
                        .id
                        .parse()
                        .map_err(|e: vnni_kernels::vocab::BadCandidateId| e.to_string())?,
                    bpp: usize::try_from(sel.bpp).map_err(|e| e.to_string())?,
                });
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The frozen policy's domain for decode domain `key` of the new policy (its M bucket index).
pub fn domain(frozen: &Policy, key: &DomainKey) -> Option<Domain> {
    frozen
        .domains
        .iter()
        .find(|d| {
            frozen.is_decode_bucket(d.m_bucket)
                && d.codebook == key.codebook
                && d.mode == key.mode
                && d.aspect == key.aspect
        })
        .map(|d| Domain { m_bucket: key.bucket, ..d.clone() })
}

/// The frozen policy's decode overlays, in the new policy's decode bucket.
pub fn overlays(frozen: &Policy, decode_bucket: usize) -> Vec<Overlay> {
    frozen
        .overlays
        .iter()
        .filter(|o| frozen.is_decode_bucket(o.m_bucket))
        .map(|o| Overlay { m_bucket: decode_bucket, ..o.clone() })
        .collect()
}
