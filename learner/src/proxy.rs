//! The proxy verdict of a workflow profile (family-smoke): not production acceptance (its
//! few small shapes cannot show that a policy generalizes, and its timings are few), but a gate
//! that a healthy pipeline passes and a broken stage fails. Every check is on the files the
//! refresh wrote:
//! - the corpus: every planned (source format, N, K) x M x mode has rows, at least one eligible
//!   candidate, and no candidate whose output differed from the reference;
//! - the certificates: present, and not one mismatch;
//! - the policy: total (it was checked when fitted), and in-sample, as deployed, it answers
//!   every cell with a candidate measured there, at a geomean regret within [`PROXY_GEOMEAN_MAX`].

use std::collections::BTreeMap;
use std::path::Path;

use vnni_corpus::collection::{read_corpus_rows, CollectionPlan, PLAN_FILE};
use vnni_corpus::Certificate;
use vnni_policy::Policy;

use crate::error::Result;
use crate::in_sample::in_sample;
use crate::regret_stats::{geomean, p95};

/// The largest in-sample geomean regret of a healthy pipeline's proxy policy. Proxy timings
/// are a few samples on small shapes (on a shared CPU, noisy), so this only catches a learner
/// or evaluator that picks badly, not a policy that is merely unpolished.
pub const PROXY_GEOMEAN_MAX: f64 = 0.25;

/// What the proxy checks found; `failures` empty means a pass.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyVerdict {
    pub cells: usize,
    pub certificates: usize,
    pub in_sample_geomean: f64,
    pub in_sample_p95: f64,
    pub failures: Vec<String>,
}

impl ProxyVerdict {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Judge a workflow profile's refresh: its sealed corpus, its certificates and its policy.
pub fn proxy_verdict(corpus_dir: &Path, certificates: &[Certificate], policy: &Policy) -> Result<ProxyVerdict> {
    let plan = CollectionPlan::read(&corpus_dir.join(PLAN_FILE))?;
    let rows = read_corpus_rows(corpus_dir)?;
    let mut failures = Vec::new();

    // Every planned key has rows and an eligible candidate; no row differs from the reference.
    let mut eligible: BTreeMap<(String, usize, usize, usize, String), bool> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.source_format.is_some()) {
        let key = (r.source_format.map_or_else(String::new, |f| f.to_string()), r.m, r.n, r.k, r.mode.to_string());
        *eligible.entry(key).or_default() |= r.eligible && r.median_us.is_finite();
    }
    let mismatched = rows.iter().filter(|r| r.mismatches > 0).count();
    if mismatched > 0 {
        failures.push(format!("{mismatched} corpus rows differ from the CPU reference"));
    }
    let measurable = plan.measured_m();
    let mut missing = Vec::new();
    for cell in plan.cells() {
        for &m in &measurable {
            for mode in &plan.modes {
                let key = (cell.format.to_string(), m, cell.n, cell.k, mode.to_string());
                match eligible.get(&key) {
                    Some(true) => {}
                    Some(false) => failures.push(format!("{} M={m} {mode}: no eligible candidate", cell.stem())),
                    None => missing.push(format!("{} M={m} {mode}", cell.stem())),
                }
            }
        }
    }
    if !missing.is_empty() {
        failures.push(format!("{} planned keys have no rows (first: {})", missing.len(), missing[0]));
    }

    // Batch invariance was certified, without a mismatch.
    let bad = certificates.iter().filter(|c| c.mismatches > 0 || c.repeat_mismatches > 0).count();
    if certificates.is_empty() {
        failures.push("no batch-invariance certificates".into());
    } else if bad > 0 {
        failures.push(format!("{bad} of {} certificates have mismatches", certificates.len()));
    }

    // The policy as deployed, on the cells it was fitted on, read as its fit read them.
    let corpus = crate::corpus::load_with(corpus_dir, crate::corpus::Twins::of(policy))?;
    let s = in_sample(policy, &corpus, true);
    let all = s.all();
    let (g, p) = (geomean(&all), p95(&all));
    if s.unanswered > 0 {
        failures.push(format!("the policy cannot answer {} cells of its own corpus", s.unanswered));
    }
    if s.unmeasured_picks > 0 {
        failures
            .push(format!("the policy picks an unmeasured or ineligible candidate in {} cells", s.unmeasured_picks));
    }
    if g > PROXY_GEOMEAN_MAX {
        failures.push(format!(
            "in-sample geomean regret {:.1}% is above the proxy bound {:.0}%",
            g * 100.0,
            PROXY_GEOMEAN_MAX * 100.0
        ));
    }
    Ok(ProxyVerdict {
        cells: plan.cells().len(),
        certificates: certificates.len(),
        in_sample_geomean: g,
        in_sample_p95: p,
        failures,
    })
}
