//! vnni-policy: the dispatch policy IR (`policy.json`), its evaluator and its totality
//! checks. The learner writes this IR, the generator renders it; the evaluator here is the
//! single statement of the run-time decision that generated tables must agree with.
//!
//! - [`ir`]: the types and their canonical bytes and digest.
//! - [`eval`]: integer features, bpp formulas, `select` (overlay, then the domain's cost
//!   models, then its tree; grouped rows inherit the decode selection's bpp).
//! - [`cost`]: the integer cost model of CUDA decode domains; [`correction`] the local
//!   correction of its predictions by residuals at development shapes.
//! - [`check`]: totality and structure.
//! - [`example`]: a small total policy for tests of every consumer.

pub mod check;
pub mod correction;
pub mod cost;
pub mod eval;
pub mod example;
pub mod explain;
pub mod ir;

pub use eval::{Selection, Step, Via, MAX_DIM};
pub use explain::{Decision, Explanation};
pub use ir::*;

use vnni_kernels::registry::{self, Backend, Family, KbRule};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("query M={m} N={n} K={k} is not a legal shape (positive, K a multiple of 32, each < 2^31)")]
    BadQuery { m: u64, n: u64, k: u64 },
    #[error("codebook {codebook:?} is not in this policy")]
    UnknownCodebook { codebook: String },
    #[error("mode {mode:?} is not in this policy")]
    UnknownMode { mode: String },
    #[error("M = {m} reaches no M bucket")]
    NoBucket { m: u64 },
    #[error("no domain for {codebook} {mode} bucket {m_bucket} aspect {aspect:?}")]
    NoDomain { codebook: String, mode: String, m_bucket: usize, aspect: Option<usize> },
    #[error("candidate {id:?} is not in the policy's candidate table")]
    UnknownCandidate { id: String },
    #[error("candidate {id:?} is illegal for {n} x {k}")]
    Illegal { id: String, n: u64, k: u64 },
    #[error("a tree split lacks a branch (reached by N={n} K={k})")]
    MissingBranch { n: u64, k: u64 },
    #[error("policy is not total: {what}")]
    NotTotal { what: String },
    #[error("candidate {id:?}: {what}")]
    Registry { id: String, what: String },
}

/// The IR descriptor of a registry candidate.
pub fn descriptor(c: &registry::Candidate) -> CandidateDesc {
    let surface = c.surface;
    let kb = match c.kb {
        KbRule::Wide => KbFormula::Wide,
        KbRule::Literal(kb) => KbFormula::Literal { kb: kb as u64 },
        KbRule::Waves(w) => KbFormula::Waves { waves: w as u64 },
        KbRule::Capped(kb) => KbFormula::Capped { kb: kb as u64 },
        KbRule::Inherited => KbFormula::Inherited,
    };
    let family = family_name(c.family);
    CandidateDesc {
        id: c.id.to_string(),
        backend: c.backend.name().into(),
        surface,
        family,
        tile: c.tile as u64,
        cpt: c.cpt as u64,
        rows: c.rows as u64,
        kb,
        max_kb: c.max_kb().map(|m| m as u64),
        generic_legal: c.generic_legal(),
    }
}

/// The descriptors of every decode and grouped registry candidate of `backend`, sorted by id.
/// Prefill candidates are not fitted yet (the policy's prefill surface is served by its
/// grouped bucket), so they stay out of policies and of the digest those bind.
pub fn descriptors(backend: Backend) -> Vec<CandidateDesc> {
    let mut v: Vec<CandidateDesc> = registry::all_candidates()
        .iter()
        .filter(|c| c.backend == backend && c.surface != registry::Surface::Prefill)
        .map(descriptor)
        .collect();
    v.sort_by(|a, b| a.id.cmp(&b.id));
    v
}

impl Policy {
    /// Every candidate the policy names exists in this checkout's registry with the same
    /// descriptor (so a policy from another registry is refused).
    pub fn check_registry(&self) -> Result<(), PolicyError> {
        for d in &self.candidates {
            let Some(c) = registry::find(&d.id) else {
                return Err(PolicyError::Registry { id: d.id.clone(), what: "not in this registry".into() });
            };
            if &descriptor(c) != d {
                return Err(PolicyError::Registry {
                    id: d.id.clone(),
                    what: "its parameters differ from this registry's".into(),
                });
            }
        }
        Ok(())
    }
}

/// Family names as the IR spells them (`wide`, `kpar`, ...).
pub fn family_name(f: Family) -> String {
    serde_json::to_value(f).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

#[cfg(test)]
mod tests;
