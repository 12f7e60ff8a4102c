//! Regret and the deterministic choice rules. Regret of candidate c in one alias cell is
//! `median_c / min eligible median - 1`; an ineligible (wrong bits) or unmeasured candidate
//! gets [`REGRET_CAP`] so it can never win and keeps every statistic finite (policy JSON has no
//! infinities). A runtime key's exact winner is the minimax over its aliases.

/// Regret of a candidate that must never be chosen (ineligible or not measured): 1000x.
pub const REGRET_CAP: f64 = 1000.0;

/// Candidates whose scores are within 1% (in time, `(1 + r)` ratios) of the best tie, and the
/// earliest in registry order among them wins: reruns give the same bytes.
pub const TIE_BAND: f64 = 0.01;

/// One candidate's measurement in a cell: median latency (us) and whether its bits matched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub median_us: f64,
    pub eligible: bool,
}

/// The least eligible median of a cell (us); infinite when nothing is eligible.
pub fn best_median(entries: &[Option<Measured>]) -> f64 {
    entries.iter().flatten().filter(|e| e.eligible).map(|e| e.median_us).fold(f64::INFINITY, f64::min)
}

/// Regrets of every candidate of a cell (index = registry order of the surface).
pub fn regrets(entries: &[Option<Measured>]) -> Vec<f64> {
    let best = best_median(entries);
    entries
        .iter()
        .map(|e| match e {
            Some(e) if e.eligible && best.is_finite() => (e.median_us / best - 1.0).min(REGRET_CAP),
            _ => REGRET_CAP,
        })
        .collect()
}

/// Whether `(1 + a)` is within `band` of `(1 + best)`.
fn within(a: f64, best: f64, band: f64) -> bool {
    1.0 + a <= (1.0 + best) * (1.0 + band)
}

/// The choice rule shared by exact winners, leaf labels and baselines. `scores[i]` is
/// (primary, secondary) of candidate i (registry order); only `allowed` ones compete. The best
/// is the lexicographic minimum of (primary, secondary, index); the winner is the earliest
/// allowed candidate whose primary and secondary are both within `band` of the best's.
pub fn pick_banded(scores: &[(f64, f64)], allowed: impl Fn(usize) -> bool, band: f64) -> Option<usize> {
    let idx: Vec<usize> = (0..scores.len()).filter(|&i| allowed(i)).collect();
    let best = idx.iter().copied().min_by(|&a, &b| {
        scores[a].0.total_cmp(&scores[b].0).then(scores[a].1.total_cmp(&scores[b].1)).then(a.cmp(&b))
    })?;
    let (p, s) = scores[best];
    idx.into_iter().find(|&i| within(scores[i].0, p, band) && within(scores[i].1, s, band))
}

/// (max, mean) regret of each candidate across the aliases of one runtime key.
pub fn alias_scores(per_alias: &[&[f64]]) -> Vec<(f64, f64)> {
    let width = per_alias.first().map_or(0, |a| a.len());
    (0..width)
        .map(|c| {
            let max = per_alias.iter().map(|a| a[c]).fold(0.0, f64::max);
            let mean = per_alias.iter().map(|a| a[c]).sum::<f64>() / per_alias.len() as f64;
            (max, mean)
        })
        .collect()
}

/// The exact winner of a runtime key: minimax over its aliases (max regret, then mean, then
/// registry order, with the 1% tie band); `None` if no allowed candidate is eligible in every alias.
pub fn minimax_winner(per_alias: &[&[f64]], allowed: impl Fn(usize) -> bool) -> Option<usize> {
    tied_winner(per_alias, per_alias, allowed)
}

/// The exact winner when regrets are scored with noise-band ties: the minimax of the scored
/// regrets first, then the mean of the regrets as measured, so that among candidates tied
/// inside the band the measured fastest wins (with the 1% tie band), not merely the earliest.
/// Without ties (`scored == measured`) it is [`minimax_winner`], which calls it so.
pub fn tied_winner(scored: &[&[f64]], measured: &[&[f64]], allowed: impl Fn(usize) -> bool) -> Option<usize> {
    let (s, m) = (alias_scores(scored), alias_scores(measured));
    let scores: Vec<(f64, f64)> = s.iter().zip(&m).map(|(s, m)| (s.0, m.1)).collect();
    pick_banded(&scores, allowed, TIE_BAND).filter(|&w| scores[w].0 < REGRET_CAP)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(median_us: f64) -> Option<Measured> {
        Some(Measured { median_us, eligible: true })
    }

    #[test]
    fn regret_is_relative_to_the_fastest_eligible() {
        let bad = Some(Measured { median_us: 1.0, eligible: false });
        let r = regrets(&[m(10.0), bad, m(12.0), None]);
        assert_eq!(r, vec![0.0, REGRET_CAP, 0.19999999999999996, REGRET_CAP]);
    }
}
