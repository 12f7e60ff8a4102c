//! A given policy's regret on the cells of the corpus it was fitted on ("in-sample"), as
//! deployed (overlays on) or by its trees alone: the corpus report plots it, and the proxy
//! verdict of a workflow profile is judged on it.

use std::collections::BTreeMap;

use vnni_policy::{Policy, Via};

use crate::corpus::Corpus;
use crate::regret::REGRET_CAP;

/// A domain group: (codebook, `decode` or `grouped`).
pub type Group = (String, &'static str);

pub fn surface_name(decode: bool) -> &'static str {
    if decode {
        "decode"
    } else {
        "grouped"
    }
}

/// A policy's in-sample regret on every cell of a corpus, by group.
pub struct InSample {
    pub by_group: BTreeMap<Group, Vec<f64>>,
    /// Cells it cannot answer (another corpus's codebooks or modes).
    pub unanswered: usize,
    /// Cells an exact overlay answered.
    pub via_overlay: usize,
    /// Cells where it picks a candidate that was not measured or not eligible there (regret
    /// at the cap).
    pub unmeasured_picks: usize,
    /// The sealed cells' regrets per surface (`decode`, `grouped`), also in `by_group`: a
    /// policy fitted elsewhere (another stage, another corpus) scored on what it never saw.
    pub sealed: BTreeMap<&'static str, Vec<f64>>,
}

impl InSample {
    pub fn all(&self) -> Vec<f64> {
        self.by_group.values().flatten().copied().collect()
    }
}

pub fn in_sample(policy: &Policy, corpus: &Corpus, overlays: bool) -> InSample {
    let mut out = InSample {
        by_group: BTreeMap::new(),
        unanswered: 0,
        via_overlay: 0,
        unmeasured_picks: 0,
        sealed: BTreeMap::new(),
    };
    for cell in &corpus.cells {
        let Ok(sel) = policy.select_with(cell.codebook.name(), cell.mode.name(), cell.m, cell.n, cell.k, overlays)
        else {
            out.unanswered += 1;
            continue;
        };
        out.via_overlay += usize::from(sel.via == Via::Overlay);
        let list = corpus.candidates(cell.surface());
        let regret = list.iter().position(|c| c.id == sel.candidate.id).map_or(REGRET_CAP, |i| cell.scored(i));
        out.unmeasured_picks += usize::from(regret >= REGRET_CAP);
        out.by_group.entry((cell.codebook.name().to_string(), surface_name(cell.m == 1))).or_default().push(regret);
        if cell.sealed {
            out.sealed.entry(surface_name(cell.m == 1)).or_default().push(regret);
        }
    }
    out
}
