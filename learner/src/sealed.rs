//! The one certification on the sealed partition: the finished policy, overlays off, on
//! every sealed alias cell; nearest-rank p95 regret below the p95 threshold passes.

use std::collections::BTreeMap;

use vnni_kernels::registry::Surface;
use vnni_policy::{Policy, PolicyError, SealedCertification};

use crate::corpus::Corpus;
use crate::domains::{DomainKey, Sample};
use crate::regret::REGRET_CAP;
use crate::regret_stats::{geomean, p95};

/// The regret of the policy's choice (overlays as given) in every alias cell of `samples`.
pub fn policy_regrets(
    policy: &Policy,
    corpus: &Corpus,
    samples: &BTreeMap<DomainKey, Vec<Sample>>,
    overlays: bool,
) -> Result<Vec<f64>, PolicyError> {
    let mut out = Vec::new();
    for (d, keys) in samples {
        for s in keys {
            let sel = policy.select_with(&d.codebook, &d.mode, s.m, s.n, s.k, overlays)?;
            let surface = if s.m == 1 { Surface::Decode } else { Surface::Grouped };
            let c = corpus.candidates(surface).iter().position(|c| c.id == sel.candidate.id);
            out.extend(s.cells.iter().map(|&i| c.map_or(REGRET_CAP, |c| corpus.cells[i].regret[c])));
        }
    }
    Ok(out)
}

/// `None` when the corpus has no sealed rows (nothing to certify on).
pub fn certify(
    policy: &Policy,
    corpus: &Corpus,
    sealed: &BTreeMap<DomainKey, Vec<Sample>>,
    p95_max: f64,
) -> Result<Option<SealedCertification>, PolicyError> {
    let r = policy_regrets(policy, corpus, sealed, false)?;
    if r.is_empty() {
        return Ok(None);
    }
    let p = p95(&r);
    Ok(Some(SealedCertification {
        rows: r.len() as u64,
        p95_regret: p,
        geomean_regret: geomean(&r),
        passed: p < p95_max,
    }))
}
