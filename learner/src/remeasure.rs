//! Development cells that fail cross-validation (issue 16, item 4): in a decode domain that
//! fails its gate, every held-out alias cell whose pick is not the measured fastest and whose regret, or
//! only its upper confidence bound, reaches the gate's threshold. Each becomes a pair request
//! (the pick against the cell's fastest) for a paired re-measurement before cross-validation
//! repeats; `fit --report` writes them to `remeasure.csv` and counts them in the report, so the
//! share a re-measurement could settle (`bound`: the regret is under the threshold, only the
//! bound is not) is measured, not guessed.

use std::fmt::Write;

use vnni_corpus::schema::PairRequest;

use crate::cv::Heldout;
use crate::report::pct;
use crate::tree::Trainer;
use crate::DomainFit;

/// What keeps a held-out cell from passing.
pub const REGRET: &str = "regret";
pub const BOUND: &str = "bound";

/// The pair requests of one decode domain's held-out picks against the gate's thresholds
/// (grouped cells are timed at an inherited bpp; their pairs would need it: not yet).
pub fn failing(t: &Trainer, heldout: &Heldout, p95_max: f64, ucb_max: f64) -> Vec<PairRequest> {
    if t.surface != vnni_kernels::registry::Surface::Decode {
        return Vec::new();
    }
    let cands = t.corpus.candidates(t.surface);
    let mut out = Vec::new();
    for &(i, pick) in &heldout.picks {
        let cell = &t.corpus.cells[i];
        let (regret, ucb) = (cell.scored(pick), cell.ucb[pick]);
        let limit = if regret >= p95_max {
            REGRET
        } else if ucb >= ucb_max {
            BOUND
        } else {
            continue;
        };
        // The measured fastest (the first of equal medians, registry order).
        let Some(best) = (0..cands.len()).find(|&c| cell.regret[c] == 0.0) else { continue };
        if best == pick {
            continue;
        }
        out.push(PairRequest {
            source_format: cell.format,
            codebook: cell.codebook,
            mode: cell.mode,
            m: cell.m as usize,
            n: cell.n as usize,
            k: cell.k as usize,
            pick: cands[pick].id.clone(),
            best: cands[best].id.clone(),
            regret: cell.regret[pick],
            ucb,
            limit: limit.into(),
        });
    }
    out
}

/// Every domain's pair requests, in domain order (each domain's in the order of its held-out
/// cells), the same cell once.
pub fn all(domains: &[DomainFit]) -> Vec<PairRequest> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for r in domains.iter().flat_map(|d| &d.remeasure) {
        if seen.insert((r.source_format, r.mode, r.m, r.n, r.k)) {
            out.push(r.clone());
        }
    }
    out
}

/// The report section: per failing domain, its held-out cells, those limited by regret and
/// those limited by their bound alone.
pub fn section(domains: &[DomainFit]) -> String {
    let failing: Vec<&DomainFit> = domains.iter().filter(|d| !d.remeasure.is_empty()).collect();
    let mut md = String::from(
        "## Cells that fail cross-validation\n\nIn each decode domain that fails its gate, the held-out cells whose pick is \
         not the measured fastest and whose regret (`regret`) or only its upper confidence bound (`bound`) reaches the \
         gate's threshold: pairs to time again (`remeasure.csv`: the pick against the cell's fastest).\n\n",
    );
    if failing.is_empty() {
        md.push_str("None.\n\n");
        return md;
    }
    md.push_str("| domain | held-out cells | regret | bound | bound share |\n|---|---|---|---|---|\n");
    let (mut cells, mut regret, mut bound) = (0, 0, 0);
    for d in failing {
        let held = d.heldout.as_ref().map_or(0, |h| h.picks.len());
        let r = d.remeasure.iter().filter(|p| p.limit == REGRET).count();
        let b = d.remeasure.len() - r;
        let share = pct(b as f64 / d.remeasure.len() as f64);
        let _ = writeln!(md, "| {} | {held} | {r} | {b} | {share} |", d.key);
        (cells, regret, bound) = (cells + held, regret + r, bound + b);
    }
    let share = pct(bound as f64 / (regret + bound).max(1) as f64);
    let _ = writeln!(md, "| **all failing domains** | {cells} | {regret} | {bound} | {share} |\n");
    md
}
