//! Runtime keys and domains. A runtime key is (codebook, mode, M, N, K): what the run time
//! knows, with the source aliases of the codebook collapsed. A domain is (codebook, mode,
//! M bucket) plus, for decode, the aspect bucket of N/K; each owns one tree.

use std::collections::{BTreeMap, BTreeSet};

use vnni_kernels::Codebook;
use vnni_policy::{Gates, MBucket, Policy, Provenance, Ratio, Surface, SCHEMA};

use crate::corpus::Corpus;

/// One aspect edge, N/K >= 8: projections (every model's attention and FFN matrices, MTP
/// fusions) against vocabulary heads. Finer buckets split a corpus of a few dozen geometries
/// into domains too small to cross-validate; the trees split on aspect (`AspectQ10`)
/// themselves where the data supports it.
pub const ASPECT_EDGES: [Ratio; 1] = [Ratio { num: 8, den: 1 }];

/// M buckets from the measured M values: {1}, then each measured M >= 2 covers up to the next
/// one minus 1 (the first starts at 2 so every M reaches a bucket), the last unbounded. Without
/// any measured M >= 2 there is still one grouped bucket {2..} (its domains borrow).
pub fn m_buckets(measured: &[usize]) -> Vec<MBucket> {
    let grouped: BTreeSet<u64> = measured.iter().map(|&m| m as u64).filter(|&m| m >= 2).collect();
    let starts: Vec<u64> = if grouped.is_empty() {
        vec![2]
    } else {
        grouped.iter().enumerate().map(|(i, &m)| if i == 0 { 2 } else { m }).collect()
    };
    let mut out = vec![MBucket { lo: 1, hi: Some(1), surface: Surface::Decode }];
    for (i, &lo) in starts.iter().enumerate() {
        let hi = starts.get(i + 1).map(|next| next - 1);
        out.push(MBucket { lo, hi, surface: Surface::Grouped });
    }
    out
}

/// One domain's identity, ordered as `Policy::domains` is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DomainKey {
    pub codebook: String,
    pub mode: String,
    pub bucket: usize,
    pub aspect: Option<usize>,
}

impl std::fmt::Display for DomainKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.aspect {
            Some(a) => write!(f, "{} {} M-bucket {} aspect {a}", self.codebook, self.mode, self.bucket),
            None => write!(f, "{} {} M-bucket {}", self.codebook, self.mode, self.bucket),
        }
    }
}

/// One runtime key of a domain and the alias cells (indices into `Corpus::cells`) it collapses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub cells: Vec<usize>,
}

impl Sample {
    pub fn geometry(&self) -> (u64, u64) {
        (self.n, self.k)
    }
}

/// The policy without domains, candidates or overlays: buckets, edges, codebooks and modes
/// of the plan, provenance from the manifest.
pub fn skeleton(corpus: &Corpus) -> Policy {
    let inputs = &corpus.manifest.identity.inputs;
    let mut codebooks: Vec<String> = corpus
        .plan
        .inventory
        .shapes
        .iter()
        .flat_map(|s| s.formats.iter().map(|f| f.codebook().name().to_string()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if codebooks.is_empty() {
        codebooks = Codebook::ALL.iter().map(|c| c.name().to_string()).collect();
        codebooks.sort();
    }
    let modes: Vec<String> =
        corpus.plan.modes.iter().map(|m| m.name().to_string()).collect::<BTreeSet<_>>().into_iter().collect();
    Policy {
        schema: SCHEMA.into(),
        provenance: Provenance {
            corpus_id: corpus.manifest.corpus_id.clone(),
            registry_digest: inputs.registry_digest.clone(),
            inventory_digest: inputs.inventory_digest.clone(),
            backend: corpus.backend.name().into(),
            arch: inputs.arch.clone(),
            profile: inputs.profile.clone(),
            learner_version: env!("CARGO_PKG_VERSION").into(),
            frozen_m1: None,
            m1_only: corpus.plan.m1_only,
            pairs: None,
            programmatic: corpus.plan.programmatic,
            development_only: false,
            focus: None,
            twins_pooled: false,
            reduce_term: false,
        },
        units: corpus.plan.units as u64,
        codebooks,
        modes,
        m_buckets: m_buckets(&corpus.plan.planned_m()),
        aspect_edges: ASPECT_EDGES.to_vec(),
        correction: None,
        candidates: Vec::new(),
        domains: Vec::new(),
        overlays: Vec::new(),
        gates: Gates {
            p95_max: 0.0,
            ucb_max: 0.0,
            min_pass_fraction: 0.0,
            domains_passing: 0,
            domains_with_data: 0,
            passed: false,
            sealed: None,
        },
    }
}

/// Every domain the policy must own, sorted.
pub fn all_domains(skeleton: &Policy) -> Vec<DomainKey> {
    let mut out = Vec::new();
    for codebook in &skeleton.codebooks {
        for mode in &skeleton.modes {
            for (bucket, b) in skeleton.m_buckets.iter().enumerate() {
                let aspects: Vec<Option<usize>> = match b.surface {
                    Surface::Decode => (0..=skeleton.aspect_edges.len()).map(Some).collect(),
                    _ => vec![None],
                };
                for aspect in aspects {
                    out.push(DomainKey { codebook: codebook.clone(), mode: mode.clone(), bucket, aspect });
                }
            }
        }
    }
    out.sort();
    out
}

/// The domain a runtime key belongs to.
pub fn domain_of(skeleton: &Policy, codebook: &str, mode: &str, m: u64, n: u64, k: u64) -> Option<DomainKey> {
    let bucket = skeleton.m_bucket(m)?;
    let aspect = (skeleton.m_buckets[bucket].surface == Surface::Decode).then(|| skeleton.aspect_bucket(n, k));
    Some(DomainKey { codebook: codebook.into(), mode: mode.into(), bucket, aspect })
}

/// The runtime keys of one partition, by domain; keys sorted by (M, N, K), aliases in cell order.
pub fn samples(corpus: &Corpus, skeleton: &Policy, sealed: bool) -> BTreeMap<DomainKey, Vec<Sample>> {
    let mut keys: BTreeMap<(DomainKey, u64, u64, u64), Vec<usize>> = BTreeMap::new();
    for (i, c) in corpus.cells.iter().enumerate().filter(|(_, c)| c.sealed == sealed) {
        if let Some(d) = domain_of(skeleton, c.codebook.name(), c.mode.name(), c.m, c.n, c.k) {
            keys.entry((d, c.m, c.n, c.k)).or_default().push(i);
        }
    }
    let mut out: BTreeMap<DomainKey, Vec<Sample>> = BTreeMap::new();
    for ((d, m, n, k), cells) in keys {
        out.entry(d).or_default().push(Sample { m, n, k, cells });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_m() {
        let b = m_buckets(&[1, 4, 8, 16]);
        let spans: Vec<(u64, Option<u64>)> = b.iter().map(|b| (b.lo, b.hi)).collect();
        assert_eq!(spans, vec![(1, Some(1)), (2, Some(7)), (8, Some(15)), (16, None)]);
        assert_eq!(m_buckets(&[1]).len(), 2);
    }
}
