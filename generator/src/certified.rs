//! The batch-invariance matrix an install needs. At run time a grouped launch inherits the bpp
//! of the policy's own M = 1 pick for its (codebook, N, K), not of the fastest candidate a
//! sweep happened to measure, so what must be certified is every planned (source format,
//! N, K) of the policy's profile x every M the grouped surface serves (2..16 and 31, not only
//! the plan's, and the first, last and one inner M of every grouped bucket: [`certified_m`]) x mode: the policy's grouped pick, at the bpp of its M = 1 pick, byte-identical
//! to M single-row decodes of that pick (zero mismatches, also on repeat), on the policy's
//! backend. `vnni-dispatch certify --policy` produces exactly that set; a plan with no
//! shapes is an empty matrix, which [`gaps`] refuses.

use std::collections::{BTreeMap, BTreeSet};

use vnni_corpus::inventory::InventoryPlan;
use vnni_corpus::Certificate;
use vnni_kernels::registry::GROUPED_M;
use vnni_kernels::{CandidateId, SourceFormat, Surface};
use vnni_policy::{Policy, PolicyError};

/// Why a policy's matrix cannot be checked.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("profile {profile} plans no (format, shape) for this policy: its batch-invariance matrix is empty")]
    Empty { profile: String },
}

/// One planned (format, N, K, M, mode) the certificates do not cover, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    pub format: SourceFormat,
    pub n: usize,
    pub k: usize,
    pub m: usize,
    pub mode: String,
    pub why: String,
}

impl std::fmt::Display for Gap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}x{} M={} {}: {}", self.format.name(), self.n, self.k, self.m, self.mode, self.why)
    }
}

/// Per planned (source format, N, K): the M = 1 candidates a policy picks there.
pub type Identities = BTreeMap<(SourceFormat, usize, usize), Vec<CandidateId>>;

/// A certificate's coordinates: (format, N, K, M, M = 1 identity, batched candidate).
type CertKey<'a> = (SourceFormat, usize, usize, usize, &'a str, &'a str);

/// The row counts the matrix covers: every M the grouped surface serves (2..16 and 31), not
/// only those a plan timed (its buckets dispatch the others too), and the edges of the policy's
/// grouped buckets: each bucket's first and last M and one inside, so a bucket whose edges a
/// sweep placed anywhere is certified where its candidate starts and stops serving. An
/// unbounded last bucket is sampled up to twice its first M (its candidate slices the rows the
/// same way beyond it).
pub fn certified_m(policy: &Policy) -> Vec<usize> {
    let mut ms: BTreeSet<usize> = GROUPED_M.iter().copied().collect();
    for b in policy.m_buckets.iter().filter(|b| b.surface == Surface::Grouped) {
        let lo = b.lo as usize;
        let hi = b.hi.map_or(2 * lo, |hi| hi as usize);
        ms.extend([lo, lo + (hi - lo) / 2, hi]);
    }
    ms.into_iter().collect()
}

/// Per planned (format, N, K): the M = 1 candidates the policy picks in its modes (sorted,
/// distinct): the identities `certify --policy` certifies against.
pub fn m1_identities(policy: &Policy, plan: &InventoryPlan) -> Result<Identities, PolicyError> {
    let mut out = BTreeMap::new();
    for s in &plan.shapes {
        for &f in &s.formats {
            let mut ids = BTreeSet::new();
            for mode in &policy.modes {
                let sel = policy.select(f.codebook().name(), mode, 1, s.n as u64, s.k as u64)?;
                ids.insert(sel.candidate.id.clone());
            }
            let ids: Vec<CandidateId> = ids.into_iter().map(|id| id.parse().expect("registry ids are valid")).collect();
            out.insert((f, s.n, s.k), ids);
        }
    }
    Ok(out)
}

/// Every planned (format, N, K, grouped M, mode) whose policy pick is not certified at the
/// bpp of the policy's M = 1 pick with zero mismatches; empty when the matrix is complete.
pub fn gaps(policy: &Policy, plan: &InventoryPlan, certs: &[Certificate]) -> Result<Vec<Gap>, MatrixError> {
    // (format, n, k, m, m1, candidate) -> (bpp, clean), of the policy's backend only
    let mut have: BTreeMap<CertKey, Vec<(usize, bool)>> = BTreeMap::new();
    for c in certs.iter().filter(|c| c.backend.name() == policy.provenance.backend) {
        let clean = c.mismatches == 0 && c.repeat_mismatches == 0;
        have.entry((c.source_format, c.n, c.k, c.m, c.m1_candidate.as_str(), c.candidate.as_str()))
            .or_default()
            .push((c.bpp, clean));
    }
    let mut out = Vec::new();
    if plan.shapes.iter().all(|s| s.formats.is_empty()) || policy.modes.is_empty() {
        return Err(MatrixError::Empty { profile: plan.profile.clone() });
    }
    for s in &plan.shapes {
        for &f in &s.formats {
            for mode in &policy.modes {
                let cb = f.codebook().name();
                let one = policy.select(cb, mode, 1, s.n as u64, s.k as u64)?;
                for m in certified_m(policy) {
                    let sel = policy.select(cb, mode, m as u64, s.n as u64, s.k as u64)?;
                    let key = (f, s.n, s.k, m, one.candidate.id.as_str(), sel.candidate.id.as_str());
                    let found =
                        have.get(&key).map(|v| v.iter().filter(|(bpp, _)| *bpp as u64 == one.bpp).collect::<Vec<_>>());
                    let why = match found.as_deref() {
                        None | Some([]) => Some(format!(
                            "no certificate of {} inheriting {} at bpp {}",
                            sel.candidate.id, one.candidate.id, one.bpp
                        )),
                        Some(v) if v.iter().any(|(_, clean)| !clean) => Some(format!(
                            "{} differs from single-row decodes of {} at bpp {}",
                            sel.candidate.id, one.candidate.id, one.bpp
                        )),
                        Some(_) => None,
                    };
                    if let Some(why) = why {
                        out.push(Gap { format: f, n: s.n, k: s.k, m, mode: mode.clone(), why });
                    }
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vnni_kernels::Backend;
    use vnni_policy::example::example_policy;

    #[test]
    fn every_grouped_bucket_is_certified_at_its_edges_and_inside() {
        let mut p = example_policy(Backend::Cpu);
        // buckets {2..8}, {9..}: 2..16 and 31 as always, plus 5, 8, 9, 13 and 18
        assert_eq!(certified_m(&p), [(2..=16).collect::<Vec<_>>(), vec![18, 31]].concat());
        // learned edges far from the default M values: 33..79 and 80.. get 33, 56, 79, 80, 120, 160
        p.m_buckets[2].hi = Some(32);
        p.m_buckets.push(vnni_policy::ir::MBucket { lo: 33, hi: Some(79), surface: Surface::Grouped });
        p.m_buckets.push(vnni_policy::ir::MBucket { lo: 80, hi: None, surface: Surface::Grouped });
        let ms = certified_m(&p);
        for m in [9, 20, 32, 33, 56, 79, 80, 120, 160] {
            assert!(ms.contains(&m), "{m} not in {ms:?}");
        }
        assert!(ms.windows(2).all(|w| w[0] < w[1]));
        assert!(!ms.contains(&1), "M = 1 is the decode bucket");
    }
}
