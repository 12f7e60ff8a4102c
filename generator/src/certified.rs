//! The batch-invariance matrix an install needs. At run time a grouped launch inherits the bpp
//! of the policy's own M = 1 pick for its (codebook, N, K), not of the fastest candidate a
//! sweep happened to measure, so what must be certified is every planned (source format,
//! N, K) x grouped M x mode of the policy's profile: the policy's grouped pick, at the bpp of
//! its M = 1 pick, byte-identical to M single-row decodes of that pick (zero mismatches, also
//! on repeat). `vnni-dispatch certify --policy` produces exactly that set.

use std::collections::{BTreeMap, BTreeSet};

use vnni_corpus::inventory::InventoryPlan;
use vnni_corpus::Certificate;
use vnni_kernels::{CandidateId, SourceFormat, Surface};
use vnni_policy::{Policy, PolicyError};

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

/// The grouped row counts of a plan (2..31).
pub fn grouped_m(plan: &InventoryPlan) -> Vec<usize> {
    plan.m.iter().copied().filter(|&m| Surface::of_m(m) == Surface::Grouped).collect()
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
pub fn gaps(policy: &Policy, plan: &InventoryPlan, certs: &[Certificate]) -> Result<Vec<Gap>, PolicyError> {
    // (format, n, k, m, m1, candidate) -> (bpp, clean)
    let mut have: BTreeMap<CertKey, Vec<(usize, bool)>> = BTreeMap::new();
    for c in certs {
        let clean = c.mismatches == 0 && c.repeat_mismatches == 0;
        have.entry((c.source_format, c.n, c.k, c.m, c.m1_candidate.as_str(), c.candidate.as_str()))
            .or_default()
            .push((c.bpp, clean));
    }
    let mut out = Vec::new();
    for s in &plan.shapes {
        for &f in &s.formats {
            for mode in &policy.modes {
                let cb = f.codebook().name();
                let one = policy.select(cb, mode, 1, s.n as u64, s.k as u64)?;
                for m in grouped_m(plan) {
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
