//! Development cells that fail cross-validation (issue 16, item 4): in a decode domain that
//! fails its gate, every held-out alias cell whose pick is not the measured fastest and whose regret, or
//! only its upper confidence bound, reaches the gate's threshold. Each becomes a pair request
//! (the pick against the cell's fastest) for a paired re-measurement before cross-validation
//! repeats; `fit --report` writes them to `remeasure.csv` and counts them in the report, so the
//! share a re-measurement could settle (`bound`: the regret is under the threshold, only the
//! bound is not) is measured, not guessed. Cells whose record is suspect (`stalled`) are
//! listed too, in every decode domain.

use std::fmt::Write;

use vnni_corpus::schema::{PairRequest, PAIR_LIMITS};
use vnni_kernels::registry::Candidate;

use crate::corpus::Cell;
use crate::cv::Heldout;
use crate::domains::Sample;
use crate::report::pct;
use crate::tree::Trainer;
use crate::DomainFit;

/// What keeps a held-out cell from passing ([`PAIR_LIMITS`]) ...
pub const REGRET: &str = PAIR_LIMITS[0];
pub const BOUND: &str = PAIR_LIMITS[1];
/// ... and what makes a development cell's record suspect (`corpus::Cell::stalled`).
pub const STALLED: &str = PAIR_LIMITS[2];

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
        let Some(best) = fastest(cell) else { continue };
        if best == pick {
            continue;
        }
        out.push(request(cell, cands, pick, best, limit));
    }
    out
}

/// The pair requests of a decode domain's development cells with a suspect record, whatever
/// the gate: per cell, its stalled candidate of least recorded regret against the cell's
/// measured fastest (a record is data, and a fit on it is only as good as it).
pub fn stalled(t: &Trainer, samples: &[Sample]) -> Vec<PairRequest> {
    if t.surface != vnni_kernels::registry::Surface::Decode {
        return Vec::new();
    }
    let cands = t.corpus.candidates(t.surface);
    let mut out = Vec::new();
    for &i in samples.iter().flat_map(|s| &s.cells) {
        let cell = &t.corpus.cells[i];
        let Some(best) = fastest(cell) else { continue };
        // the least recorded regret first: the one most likely to change the cell's winner
        let suspect = (0..cands.len())
            .filter(|&c| cell.stalled[c] && c != best)
            .min_by(|&a, &b| cell.regret[a].total_cmp(&cell.regret[b]));
        let Some(pick) = suspect else { continue };
        out.push(request(cell, cands, pick, best, STALLED));
    }
    out
}

/// The cell's measured fastest candidate (the first of equal medians, registry order).
fn fastest(cell: &Cell) -> Option<usize> {
    cell.regret.iter().position(|&r| r == 0.0)
}

/// A cell's pair: `pick` against `best`, with the pick's recorded regret and bound.
fn request(cell: &Cell, cands: &[Candidate], pick: usize, best: usize, limit: &str) -> PairRequest {
    PairRequest {
        source_format: cell.format,
        codebook: cell.codebook,
        mode: cell.mode,
        m: cell.m as usize,
        n: cell.n as usize,
        k: cell.k as usize,
        pick: cands[pick].id.clone(),
        best: cands[best].id.clone(),
        regret: cell.regret[pick],
        ucb: cell.ucb[pick],
        limit: limit.into(),
    }
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

/// The report section: per decode domain with pairs, its held-out cells, those limited by
/// regret, by their bound alone, and the cells listed for a suspect record.
pub fn section(domains: &[DomainFit]) -> String {
    let listed: Vec<&DomainFit> = domains.iter().filter(|d| !d.remeasure.is_empty()).collect();
    let mut md = String::from(
        "## Cells to time again\n\nIn each decode domain that fails its gate, the held-out cells whose pick is \
         not the measured fastest and whose regret (`regret`) or only its upper confidence bound (`bound`) reaches the \
         gate's threshold; in every decode domain, the development cells where racing dropped a candidate one of \
         whose own first-pass launches came within racing's tightest ratio of the cell's best, or whose samples \
         lasted under half the protocol's shortest (`stalled`: its record says less than its launches). Each is a \
         pair to time again (`remeasure.csv`: that candidate against the cell's fastest; a cell once).\n\n",
    );
    if listed.is_empty() {
        md.push_str("None.\n\n");
        return md;
    }
    md.push_str("| domain | held-out cells | regret | bound | bound share | stalled |\n|---|---|---|---|---|---|\n");
    let count = |d: &DomainFit, limit: &str| d.remeasure.iter().filter(|p| p.limit == limit).count();
    let (mut cells, mut regret, mut bound, mut stalled) = (0, 0, 0, 0);
    for d in listed {
        let held = d.heldout.as_ref().map_or(0, |h| h.picks.len());
        let (r, b, s) = (count(d, REGRET), count(d, BOUND), count(d, STALLED));
        let share = pct(b as f64 / (r + b).max(1) as f64);
        let _ = writeln!(md, "| {} | {held} | {r} | {b} | {share} | {s} |", d.key);
        (cells, regret, bound, stalled) = (cells + held, regret + r, bound + b, stalled + s);
    }
    let share = pct(bound as f64 / (regret + bound).max(1) as f64);
    let _ = writeln!(md, "| **all** | {cells} | {regret} | {bound} | {share} | {stalled} |\n");
    md
}
