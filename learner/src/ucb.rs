//! Upper confidence bounds of a cell's regret from the raw timing samples.
//!
//! Method (distribution-free): for n samples of one candidate, P(x_(l) > median) =
//! P(Binomial(n, 1/2) <= l - 1). The largest l with that probability <= a makes x_(l) a
//! one-sided lower bound of the median at level a, and x_(n+1-l) the matching upper bound.
//! A candidate's regret is max_j median_c / median_j - 1 over the other eligible candidates j
//! of the cell (c against itself gives 0): J - 1 comparisons, each using one upper and one
//! lower bound, so Bonferroni spends a = alpha / (2 (J - 1)) on every bound and
//! UCB_c = max(0, U_c / min_j L_j - 1) covers the true regret with probability >= 1 - alpha
//! per cell. When 2^-n > a (too few samples for the level) the sample extremes are used: the
//! bound is then the sample range, which is the widest the data can say.

use crate::regret::REGRET_CAP;

/// Family-wise level of each cell's bounds.
pub const ALPHA: f64 = 0.05;

/// The order-statistic rank l (1-based) for a one-sided bound at level `a` with `n` samples.
fn rank(n: usize, a: f64) -> usize {
    let mut ln_pmf = -(n as f64) * std::f64::consts::LN_2;
    let mut cdf = 0.0;
    let mut l = 1;
    for i in 0..n / 2 {
        cdf += ln_pmf.exp();
        if cdf > a {
            break;
        }
        l = i + 1;
        ln_pmf += ((n - i) as f64 / (i + 1) as f64).ln();
    }
    // x_(l) with cdf(l - 1) <= a; l = 1 (the minimum) when even that is above a.
    l.min(n.div_ceil(2))
}

/// (lower, upper) one-sided bounds of the median of `samples` at level `a` each.
pub fn median_bounds(samples: &[f64], a: f64) -> (f64, f64) {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let l = rank(v.len(), a);
    (v[l - 1], v[v.len() - l])
}

/// UCB of regret for every candidate of a cell; `None` entries (ineligible, unmeasured) get
/// [`REGRET_CAP`].
pub fn cell_ucb(samples: &[Option<&[f64]>], alpha: f64) -> Vec<f64> {
    let eligible = samples.iter().flatten().count();
    if eligible < 2 {
        return samples.iter().map(|s| if s.is_some() { 0.0 } else { REGRET_CAP }).collect();
    }
    let a = alpha / (2 * (eligible - 1)) as f64;
    let bounds: Vec<Option<(f64, f64)>> = samples.iter().map(|s| s.map(|s| median_bounds(s, a))).collect();
    bounds
        .iter()
        .enumerate()
        .map(|(c, b)| {
            let Some((_, upper)) = b else { return REGRET_CAP };
            let lowest_other = bounds
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != c)
                .filter_map(|(_, b)| b.map(|b| b.0))
                .fold(f64::INFINITY, f64::min);
            (upper / lowest_other - 1.0).clamp(0.0, REGRET_CAP)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_the_binomial_tail() {
        // n = 20: P(Bin <= 5) = 0.0207 <= 0.025 < P(Bin <= 6) = 0.0577, so l = 6.
        assert_eq!(rank(20, 0.025), 6);
        // Too few samples for the level: the extremes.
        assert_eq!(rank(3, 0.01), 1);
        let s: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(median_bounds(&s, 0.025), (6.0, 15.0));
    }

    #[test]
    fn more_comparisons_widen_the_bound() {
        let fast: Vec<f64> = (0..15).map(|i| 10.0 + i as f64 * 0.01).collect();
        let slow: Vec<f64> = (0..15).map(|i| 10.5 + i as f64 * 0.01).collect();
        let two = cell_ucb(&[Some(&fast), Some(&slow)], ALPHA);
        let many = cell_ucb(&[Some(&fast), Some(&slow), Some(&slow), Some(&slow), Some(&slow), Some(&slow)], ALPHA);
        assert!(two[1] > 0.04 && two[1] < 0.07, "{two:?}");
        assert!(many[1] >= two[1]);
        assert!(two[0] < 0.02);
    }
}
