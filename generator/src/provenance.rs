//! What the generated header says about where its tables came from. Floats of the gate
//! record are formatted here, as text, so no floating-point value reaches generated code.

use serde::Serialize;
use vnni_kernels::digest::Sha256Hex;
use vnni_policy::Policy;

use crate::templates::TEMPLATES;

#[derive(Debug, Serialize)]
pub struct ProvenanceCtx {
    pub corpus_id: String,
    pub registry_digest: String,
    pub inventory_digest: String,
    pub policy_digest: String,
    pub backend: String,
    pub arch: String,
    pub profile: String,
    pub learner_version: String,
    pub gates: String,
    /// Crate version plus a digest of the templates, so edited templates say so.
    pub generator: String,
}

impl ProvenanceCtx {
    pub fn new(policy: &Policy) -> ProvenanceCtx {
        let p = &policy.provenance;
        ProvenanceCtx {
            corpus_id: p.corpus_id.clone(),
            registry_digest: p.registry_digest.clone(),
            inventory_digest: p.inventory_digest.clone(),
            policy_digest: policy.digest(),
            backend: p.backend.clone(),
            arch: p.arch.clone(),
            profile: p.profile.clone(),
            learner_version: p.learner_version.clone(),
            gates: gate_summary(policy),
            generator: generator_version(),
        }
    }
}

/// `vnni-generator X.Y.Z templates <16 hex>`.
pub fn generator_version() -> String {
    let mut h = Sha256Hex::new();
    for (name, text) in TEMPLATES {
        h.update_parts(&[name.as_bytes(), text.as_bytes()]);
    }
    let digest = &h.finish()[..16];
    format!("vnni-generator {} templates {digest}", env!("CARGO_PKG_VERSION"))
}

fn percent(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// One line: outcome, thresholds, domain counts, sealed certification.
pub fn gate_summary(policy: &Policy) -> String {
    let g = &policy.gates;
    let sealed = match &g.sealed {
        Some(s) => {
            let parts: Vec<String> = s
                .surfaces
                .iter()
                .map(|(k, v)| {
                    format!("{k} {} rows p95 {} geomean {}", v.rows, percent(v.p95_regret), percent(v.geomean_regret))
                })
                .collect();
            format!(
                "sealed certification {} on {} rows (p95 regret {}, geomean {}{}{})",
                if s.passed { "passed" } else { "FAILED" },
                s.rows,
                percent(s.p95_regret),
                percent(s.geomean_regret),
                if parts.is_empty() { "" } else { "; " },
                parts.join("; ")
            )
        }
        None => "sealed certification not run".into(),
    };
    format!(
        "gates {}: {}/{} domains with data pass p95 regret < {} and UCB < {} (need {}); {sealed}",
        if g.passed { "passed" } else { "NOT passed" },
        g.domains_passing,
        g.domains_with_data,
        percent(g.p95_max),
        percent(g.ucb_max),
        percent(g.min_pass_fraction),
    )
}
