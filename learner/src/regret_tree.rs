//! A decision tree that splits on summed regret: every row carries the regret of every
//! candidate, a leaf's cost is the least weighted regret sum one allowed candidate achieves on
//! its rows, and a split is taken when it lowers the summed cost of the children. Unlike Gini
//! on argmin labels, near-ties cost nothing and a candidate that is second everywhere can win
//! a leaf, which is what a fallback for shapes nobody measured should pick.
//!
//! Deterministic: features in order, rows sorted by (value, index), sums in that order, a
//! later split replaces the best only when strictly cheaper, ties between candidates go to
//! the lowest index (registry order). Thresholds follow `cart.rs`: `x <= le` with
//! `le = floor((a + b - 1) / 2)` between neighbours `a < b`.

use crate::tree::Grown;

/// The least cost decrease, relative to the node's total weight, that justifies a split.
pub const MIN_DECREASE: f64 = 1e-6;

/// Training rows: integer feature values, per-candidate regrets and a weight per row; only
/// `allowed` candidates may label a leaf.
pub struct Rows<'a> {
    pub values: &'a [Vec<i64>],
    pub regret: &'a [Vec<f64>],
    pub weights: &'a [f64],
    pub allowed: &'a [bool],
}

/// Grow a tree of at most `depth` levels whose leaves keep at least `min_leaf` weight.
pub fn grow(rows: &Rows, depth: usize, min_leaf: f64) -> Grown {
    let all: Vec<usize> = (0..rows.values.len()).collect();
    let features = rows.values.first().map_or(0, Vec::len);
    let sorted: Vec<Vec<usize>> = (0..features)
        .map(|f| {
            let mut order = all.clone();
            order.sort_by_key(|&r| (rows.values[r][f], r));
            order
        })
        .collect();
    node(&Dense::of(rows), &all, &sorted, depth, min_leaf)
}

/// The allowed candidates' regrets alone, row-major in one contiguous buffer: the split search
/// and the leaf labels read nothing else, and with the others left out (about half of a decode domain's) its
/// inner loops are shorter and vectorize. Each sum adds the same products in the same order as
/// over every candidate, and the least allowed sum is found in the same order, so the trees
/// are the same bit for bit.
pub struct Dense<'a> {
    values: &'a [Vec<i64>],
    weights: &'a [f64],
    regret: Vec<f64>,
    width: usize,
    /// The allowed candidates, in index order: column i of `regret` is candidate `allowed[i]`.
    allowed: Vec<usize>,
}

impl<'a> Dense<'a> {
    pub fn of(rows: &Rows<'a>) -> Dense<'a> {
        let allowed: Vec<usize> = (0..rows.allowed.len()).filter(|&c| rows.allowed[c]).collect();
        let regret = rows.regret.iter().flat_map(|r| allowed.iter().map(|&c| r[c])).collect();
        Dense { values: rows.values, weights: rows.weights, regret, width: allowed.len(), allowed }
    }

    /// The label of a leaf holding rows `at`: the allowed candidate of least weighted regret
    /// sum, the lowest index on ties (`usize::MAX` with none allowed).
    pub fn label(&self, at: &[usize]) -> usize {
        let sums = self.sums(at);
        let least = Dense::least(&sums);
        sums.iter().position(|&v| v == least).map_or(usize::MAX, |i| self.allowed[i])
    }

    fn row(&self, r: usize) -> &[f64] {
        &self.regret[r * self.width..(r + 1) * self.width]
    }

    fn sums(&self, at: &[usize]) -> Vec<f64> {
        let mut s = vec![0.0; self.width];
        for &r in at {
            for (v, reg) in s.iter_mut().zip(self.row(r)) {
                *v += self.weights[r] * reg;
            }
        }
        s
    }

    /// The least sum (infinite with no allowed candidate).
    fn least(s: &[f64]) -> f64 {
        s.iter().fold(f64::INFINITY, |best, &v| if v < best { v } else { best })
    }
}

/// Grow the node holding rows `at` (ascending), which `sorted[f]` lists in (value of feature
/// f, index) order: sorted once for the whole tree and split stably at each node, so every
/// node sees the order a sort of its own rows would give.
fn node(rows: &Dense, at: &[usize], sorted: &[Vec<usize>], depth: usize, min_leaf: f64) -> Grown {
    let total: f64 = at.iter().map(|&r| rows.weights[r]).sum();
    if depth == 0 || at.len() < 2 || total < 2.0 * min_leaf {
        return Grown::Leaf;
    }
    let parent = rows.sums(at);
    let parent_cost = Dense::least(&parent);
    // (cost, feature, le)
    let mut best: Option<(f64, usize, i64)> = None;
    let mut left = vec![0.0; parent.len()];
    let mut right = vec![0.0; parent.len()];
    for (f, sorted) in sorted.iter().enumerate() {
        left.iter_mut().for_each(|v| *v = 0.0);
        right.copy_from_slice(&parent);
        let mut wl = 0.0;
        for i in 0..sorted.len() - 1 {
            let r = sorted[i];
            let w = rows.weights[r];
            for ((l, rt), reg) in left.iter_mut().zip(right.iter_mut()).zip(rows.row(r)) {
                *l += w * reg;
                *rt -= w * reg;
            }
            wl += w;
            let (a, b) = (rows.values[r][f], rows.values[sorted[i + 1]][f]);
            if a == b || wl < min_leaf || total - wl < min_leaf {
                continue;
            }
            let cost = Dense::least(&left) + Dense::least(&right);
            if best.is_none_or(|(s, ..)| cost < s) {
                best = Some((cost, f, (a + b - 1).div_euclid(2)));
            }
        }
    }
    match best {
        Some((cost, f, le)) if parent_cost - cost > MIN_DECREASE * total => {
            let goes_left = |r: &&usize| rows.values[**r][f] <= le;
            let (left, right): (Vec<usize>, Vec<usize>) = at.iter().partition(goes_left);
            let (sorted_left, sorted_right): (Vec<Vec<usize>>, Vec<Vec<usize>>) =
                sorted.iter().map(|order| order.iter().partition::<Vec<usize>, _>(goes_left)).unzip();
            Grown::Split {
                feature: f,
                le,
                left: Box::new(node(rows, &left, &sorted_left, depth - 1, min_leaf)),
                right: Box::new(node(rows, &right, &sorted_right, depth - 1, min_leaf)),
            }
        }
        _ => Grown::Leaf,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::grown_path;

    #[test]
    fn splits_where_the_cheapest_candidate_changes() {
        // Candidate 0 is free below 10, candidate 1 above; candidate 2 is never allowed.
        let values: Vec<Vec<i64>> = [1, 3, 5, 12, 14, 16].iter().map(|&v| vec![v]).collect();
        let regret: Vec<Vec<f64>> =
            values.iter().map(|v| if v[0] < 10 { vec![0.0, 0.3, 0.0] } else { vec![0.4, 0.0, 0.0] }).collect();
        let w = vec![1.0; 6];
        let rows = Rows { values: &values, regret: &regret, weights: &w, allowed: &[true, true, false] };
        let g = grow(&rows, 3, 1.0);
        assert_eq!(g, Grown::Split { feature: 0, le: 8, left: Box::new(Grown::Leaf), right: Box::new(Grown::Leaf) });
        let dense = Dense::of(&rows);
        assert_eq!(dense.label(&[0, 1, 2]), 0);
        assert_eq!(dense.label(&[3, 4, 5]), 1);
    }

    #[test]
    fn a_safe_second_best_beats_a_risky_winner_and_ties_do_not_split() {
        // Candidate 0 wins two rows by 1% and loses one by 50%; candidate 1 is 1% behind
        // everywhere: one leaf, labelled 1. The rows differ in value, but no split pays.
        let values: Vec<Vec<i64>> = vec![vec![1], vec![2], vec![3]];
        let regret = vec![vec![0.0, 0.01], vec![0.0, 0.01], vec![0.5, 0.0]];
        let w = vec![1.0; 3];
        let rows = Rows { values: &values, regret: &regret, weights: &w, allowed: &[true, true] };
        assert_eq!(Dense::of(&rows).label(&[0, 1, 2]), 1);
        let tied = vec![vec![0.0, 0.0]; 3];
        let flat = Rows { values: &values, regret: &tied, weights: &w, allowed: &[true, true] };
        assert_eq!(grow(&flat, 4, 1.0), Grown::Leaf);
        assert_eq!(Dense::of(&flat).label(&[0, 1, 2]), 0, "ties go to the lowest index");
    }

    #[test]
    fn candidates_that_may_not_label_a_leaf_do_not_steer_the_splits() {
        // Candidate 1 is disallowed and would win everywhere; the tree over {0, 1, 2} with 1
        // disallowed is the tree over {0, 2} alone, split where 0 and 2 trade places.
        let values: Vec<Vec<i64>> = (0..12).map(|v| vec![v, 11 - v]).collect();
        let three: Vec<Vec<f64>> = values
            .iter()
            .map(|v| vec![if v[0] < 7 { 0.0 } else { 0.2 }, 0.0, if v[0] < 7 { 0.1 } else { 0.0 }])
            .collect();
        let two: Vec<Vec<f64>> = three.iter().map(|r| vec![r[0], r[2]]).collect();
        let w = vec![1.0; values.len()];
        let with = Rows { values: &values, regret: &three, weights: &w, allowed: &[true, false, true] };
        let without = Rows { values: &values, regret: &two, weights: &w, allowed: &[true, true] };
        let g = grow(&with, 3, 1.0);
        assert_eq!(g, grow(&without, 3, 1.0));
        assert_eq!(g, Grown::Split { feature: 0, le: 6, left: Box::new(Grown::Leaf), right: Box::new(Grown::Leaf) });
    }

    #[test]
    fn a_deep_tree_cut_is_the_tree_grown_to_that_depth() {
        // Pseudo-random regrets over a 2-D grid: deep, irregular trees.
        let mut values = Vec::new();
        let mut regret = Vec::new();
        for n in 0..16i64 {
            for k in 0..12i64 {
                values.push(vec![n, k, n - k]);
                let i = (n * 12 + k) as u64;
                regret.push(
                    (0..5u64)
                        .map(|c| (vnni_kernels::fixture::splitmix64(3, i * 5 + c) % 1000) as f64 / 4000.0)
                        .collect::<Vec<f64>>(),
                );
            }
        }
        let w = vec![1.0; values.len()];
        let rows = Rows { values: &values, regret: &regret, weights: &w, allowed: &[true, true, false, true, true] };
        let deep = grow(&rows, 12, 2.0);
        fn depth(g: &Grown) -> usize {
            match g {
                Grown::Leaf => 0,
                Grown::Split { left, right, .. } => 1 + depth(left).max(depth(right)),
            }
        }
        assert!(depth(&deep) >= 6, "the rows grow a deep tree ({})", depth(&deep));
        for d in 0..=12 {
            assert_eq!(deep.truncated(d), grow(&rows, d, 2.0), "depth {d}");
        }
    }

    #[test]
    fn the_same_rows_give_the_same_tree() {
        let mut values = Vec::new();
        let mut regret = Vec::new();
        for n in 0..10i64 {
            for k in 0..10i64 {
                values.push(vec![n, k, n * k]);
                let best = usize::from(n > 4) + 2 * usize::from(k > 6);
                regret.push((0..4).map(|c| if c == best { 0.0 } else { 0.05 * (1 + c) as f64 }).collect::<Vec<f64>>());
            }
        }
        let w = vec![1.0; values.len()];
        let rows = Rows { values: &values, regret: &regret, weights: &w, allowed: &[true; 4] };
        let g = grow(&rows, 5, 1.0);
        assert_eq!(g, grow(&rows, 5, 1.0));
        for (v, r) in values.iter().zip(&regret) {
            let path = grown_path(&g, v);
            let reach: Vec<usize> = (0..values.len()).filter(|&i| grown_path(&g, &values[i]) == path).collect();
            assert_eq!(r[Dense::of(&rows).label(&reach)], 0.0, "every row reaches a leaf labelled with its winner");
        }
    }
}
