//! Paired evidence fed back into a fit (issue 16, item 4): development cells that failed
//! cross-validation, timed again as pairs (`vnni-dispatch bench --pairs remeasure.csv`; its
//! `samples.csv` is the input here), replace what the corpus says of those two candidates
//! before cross-validation repeats.
//!
//! A pair run is another machine and another hour than the corpus, so only ratios travel: of
//! the two candidates, the one the corpus ranked faster stays where the corpus put it (the
//! anchor), the other's median becomes the anchor's times the pair's median ratio, and the
//! cell's regrets follow from the new medians. Both candidates' confidence bounds come from
//! the pair alone (one comparison, each bound at level alpha / 2): the pair settles the
//! comparison that decides the cell, which the corpus's bounds (Bonferroni over every
//! candidate, a few samples each) could not. Sealed cells are never touched. In a corpus a sweep
//! pruned (`sweep --prune-with`), a held-out pick may be a candidate the cell never timed: the
//! pair is then its only record, placed beside the anchor by the same ratio.

use std::collections::BTreeMap;
use std::path::Path;

use vnni_corpus::read::read_samples;
use vnni_corpus::schema::parse_hex_f64;
use vnni_kernels::{Mode, SourceFormat};

use crate::corpus::Corpus;
use crate::error::{FitError, Result};
use crate::regret::{best_median, regrets, Measured, REGRET_CAP};
use crate::ucb::{median_bounds, ALPHA};

/// What a pair file changed: its sha256 (the policy's provenance records it) and the cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub sha256: String,
    pub cells: u64,
}

type CellKey = (&'static str, Mode, usize, usize);

/// Apply the pair samples of `path` to the development M = 1 cells of `corpus`. Refused, with
/// the file and cell named: a sample that is not M = 1, a cell with other than two
/// candidates, a cell or candidate the corpus does not have at M = 1 as development rows.
pub fn apply(corpus: &mut Corpus, path: &Path) -> Result<Applied> {
    let bad = |message: String| FitError::Corpus { path: path.into(), message };
    let bytes = std::fs::read(path).map_err(|e| bad(format!("cannot read: {e}")))?;
    let mut pairs: BTreeMap<CellKey, BTreeMap<usize, Vec<f64>>> = BTreeMap::new();
    for r in read_samples(path)?.into_iter().filter(|r| !r.warmup) {
        let name = |f: Option<SourceFormat>| f.map_or("-", |f| f.name());
        let at = format!("{} {} M={} {}x{} {}", name(r.source_format), r.mode, r.m, r.n, r.k, r.candidate);
        let format = r.source_format.ok_or_else(|| bad(format!("{at}: a pair sample without a source format")))?;
        if r.m != 1 {
            return Err(bad(format!("{at}: pairs are decode cells, M = 1")));
        }
        let c = corpus
            .decode
            .iter()
            .position(|c| c.id == r.candidate)
            .ok_or_else(|| bad(format!("{at}: not a decode candidate of the corpus")))?;
        let v = parse_hex_f64(&r.latency_us_hex)
            .ok_or_else(|| bad(format!("{at}: {:?} is not a hex latency", r.latency_us_hex)))?;
        pairs.entry((format.name(), r.mode, r.n, r.k)).or_default().entry(c).or_default().push(v);
    }
    let mut cells = 0;
    for ((format, mode, n, k), pair) in &pairs {
        let at = format!("{format} {mode} M=1 {n}x{k}");
        let [(&a, sa), (&b, sb)] = pair.iter().collect::<Vec<_>>()[..] else {
            return Err(bad(format!("{at}: {} candidates timed, a pair is two", pair.len())));
        };
        let cell = corpus
            .cells
            .iter_mut()
            .find(|c| {
                c.m == 1
                    && !c.sealed
                    && c.format.name() == *format
                    && c.mode == *mode
                    && (c.n, c.k) == (*n as u64, *k as u64)
            })
            .ok_or_else(|| bad(format!("{at}: not a development cell of the corpus")))?;
        if cell.regret[a] >= REGRET_CAP && cell.regret[b] >= REGRET_CAP {
            return Err(bad(format!("{at}: the corpus has no eligible row of either candidate")));
        }
        // The anchor: the one the corpus ranked faster (the first on ties). A candidate a
        // pruned sweep never timed (capped regret) is never the anchor: the pair gives it a
        // median, the anchor's times the ratio.
        let (anchor, sa, other, so) = if cell.regret[a] <= cell.regret[b] { (a, sa, b, sb) } else { (b, sb, a, sa) };
        // The cell's medians again (a capped regret: ineligible or unmeasured), the other's
        // replaced, and the regrets by the corpus reader's own rule.
        let mut entries: Vec<Option<Measured>> = cell
            .regret
            .iter()
            .map(|&r| (r < REGRET_CAP).then_some(Measured { median_us: cell.best_us * (1.0 + r), eligible: true }))
            .collect();
        let anchor_us = cell.best_us * (1.0 + cell.regret[anchor]);
        entries[other] = Some(Measured { median_us: anchor_us * median(so) / median(sa), eligible: true });
        cell.best_us = best_median(&entries);
        cell.regret = regrets(&entries);
        let level = ALPHA / 2.0;
        let ((la, ua), (lo, uo)) = (median_bounds(sa, level), median_bounds(so, level));
        cell.ucb[anchor] = (ua / lo - 1.0).clamp(0.0, REGRET_CAP);
        cell.ucb[other] = (uo / la - 1.0).clamp(0.0, REGRET_CAP);
        // timed again: their records are the pair's now
        cell.stalled[anchor] = false;
        cell.stalled[other] = false;
        cells += 1;
    }
    Ok(Applied { sha256: vnni_kernels::digest::sha256_hex(&bytes), cells })
}

/// The median of the timing protocol (`vnni_measure::stats`, the one definition).
fn median(v: &[f64]) -> f64 {
    vnni_measure::stats::summarize(v).map_or(f64::NAN, |s| s.median)
}
