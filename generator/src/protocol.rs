//! The text both harnesses print and the evaluator's side of it: a `candidate ...` line per
//! table entry, then one answer line per query. Comparing text keeps the first disagreement
//! readable in an error message.

use vnni_policy::{CandidateDesc, KbFormula, Policy, PolicyError, Via};

use crate::context::surface_name;
use crate::error::{GenerateError, Result};
use crate::queries::Query;

/// `candidate id family surface tile cpt rows kb_kind kb_param max_kb generic_legal`.
pub fn candidate_line(c: &CandidateDesc) -> String {
    let (kind, param) = match c.kb {
        KbFormula::Wide => ("wide", 0),
        KbFormula::Literal { kb } => ("literal", kb),
        KbFormula::Waves { waves } => ("waves", waves),
        KbFormula::Capped { kb } => ("capped", kb),
        KbFormula::Inherited => ("inherited", 0),
    };
    let max_kb = c.max_kb.map_or(-1, |m| m as i128);
    format!(
        "candidate {} {} {} {} {} {} {kind} {param} {max_kb} {}",
        c.id,
        c.family,
        surface_name(c.surface),
        c.tile,
        c.cpt,
        c.rows,
        u8::from(c.generic_legal)
    )
}

/// The evaluator's answer: `ok id family surface bpp partitions via domain`, or the status
/// of an illegal query. A legal query without a selection is a totality failure.
pub fn expected_answer(policy: &Policy, q: &Query) -> Result<String> {
    let (codebook, mode) = q.names(policy);
    match policy.select(codebook, mode, q.m, q.n, q.k) {
        Ok(s) => Ok(format!(
            "ok {} {} {} {} {} {} {}",
            s.candidate.id,
            s.candidate.family,
            surface_name(s.candidate.surface),
            s.bpp,
            s.kb,
            match s.via {
                Via::Overlay => "overlay",
                Via::Model => "model",
                Via::Tree => "tree",
            },
            s.domain
        )),
        Err(PolicyError::BadQuery { .. }) => Ok("bad_shape".into()),
        Err(PolicyError::UnknownCodebook { .. }) => Ok("unknown_codebook".into()),
        Err(PolicyError::UnknownMode { .. }) => Ok("unknown_mode".into()),
        Err(e) => Err(GenerateError::NotTotal { query: q.describe(policy), reason: e.to_string() }),
    }
}
