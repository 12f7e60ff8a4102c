//! A weighted Gini decision tree (CART) over integer features, grown deterministically.
//!
//! Why not linfa-trees: linfa-trees 0.8 keeps class weights in a `HashMap` with the standard
//! library's per-process random hasher and sums them in its iteration order, so two splits
//! whose impurities differ only in the last bits of an f32 sum can swap between processes. On
//! the 700-cell H200 corpus one fit in four produced another policy. Here every sum runs over
//! classes in label order in f64, candidate splits are visited in a fixed order (feature, then
//! value), and a later split replaces the best one only when strictly better, so the same rows
//! give the same tree on every machine and in every process.
//!
//! Rules (those of the CART family linfa implements): a node splits when it holds two labels,
//! at least `2` weight and depth remains; a split leaves at least `min_leaf` weight on each
//! side; the best split minimizes the weighted Gini impurity of its children and must lower
//! the node's impurity by at least [`MIN_DECREASE`]. Thresholds fall between consecutive
//! distinct values: `x <= le` with `le = floor((a + b - 1) / 2)` for neighbours `a < b`.

use crate::tree::Grown;

/// The least impurity decrease that justifies a split.
pub const MIN_DECREASE: f64 = 1e-5;

/// Training rows: integer feature values, a label per row (`< labels`), a weight per row.
pub struct Rows<'a> {
    pub values: &'a [Vec<i64>],
    pub labels: &'a [usize],
    pub weights: &'a [f64],
    pub classes: usize,
}

fn gini(class: &[f64], total: f64) -> f64 {
    if total <= 0.0 {
        return 0.0;
    }
    1.0 - class.iter().map(|w| (w / total) * (w / total)).sum::<f64>()
}

/// Grow a tree of at most `depth` levels.
pub fn grow(rows: &Rows, depth: usize, min_leaf: f64) -> Grown {
    let all: Vec<usize> = (0..rows.labels.len()).collect();
    node(rows, &all, depth, min_leaf)
}

fn node(rows: &Rows, at: &[usize], depth: usize, min_leaf: f64) -> Grown {
    let mut class = vec![0.0f64; rows.classes];
    for &r in at {
        class[rows.labels[r]] += rows.weights[r];
    }
    let total: f64 = class.iter().sum();
    let labels_present = class.iter().filter(|&&w| w > 0.0).count();
    if depth == 0 || at.len() < 2 || labels_present < 2 || total < 2.0 {
        return Grown::Leaf;
    }
    let parent = gini(&class, total);
    let features = rows.values.first().map_or(0, |v| v.len());
    // (score, feature, le)
    let mut best: Option<(f64, usize, i64)> = None;
    for f in 0..features {
        let mut sorted = at.to_vec();
        sorted.sort_by_key(|&r| (rows.values[r][f], r));
        let mut left = vec![0.0f64; rows.classes];
        let mut right = class.clone();
        let (mut wl, mut wr) = (0.0f64, total);
        for i in 0..sorted.len() - 1 {
            let r = sorted[i];
            left[rows.labels[r]] += rows.weights[r];
            right[rows.labels[r]] -= rows.weights[r];
            wl += rows.weights[r];
            wr -= rows.weights[r];
            let (a, b) = (rows.values[r][f], rows.values[sorted[i + 1]][f]);
            if a == b || wl < min_leaf || wr < min_leaf {
                continue;
            }
            let score = (wl / total) * gini(&left, wl) + (wr / total) * gini(&right, wr);
            if best.is_none_or(|(s, ..)| score < s) {
                best = Some((score, f, (a + b - 1).div_euclid(2)));
            }
        }
    }
    match best {
        Some((score, f, le)) if parent - score >= MIN_DECREASE => {
            Grown::split(at, rows.values, f, le, |side| node(rows, side, depth - 1, min_leaf))
        }
        _ => Grown::Leaf,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::grown_path;

    fn rows_of<'a>(values: &'a [Vec<i64>], labels: &'a [usize], weights: &'a [f64]) -> Rows<'a> {
        Rows { values, labels, weights, classes: labels.iter().max().map_or(1, |m| m + 1) }
    }

    #[test]
    fn a_clean_threshold_is_found_at_the_integer_midpoint() {
        let values: Vec<Vec<i64>> = [1, 2, 3, 10, 11, 12].iter().map(|&v| vec![v]).collect();
        let labels = [0, 0, 0, 1, 1, 1];
        let w = [1.0; 6];
        let g = grow(&rows_of(&values, &labels, &w), 3, 1.0);
        // Neighbours 3 and 10: le = floor(12 / 2) = 6.
        assert_eq!(g, Grown::Split { feature: 0, le: 6, left: Box::new(Grown::Leaf), right: Box::new(Grown::Leaf) });
    }

    #[test]
    fn limits_stop_growth() {
        let values: Vec<Vec<i64>> = (0..8).map(|v| vec![v]).collect();
        let labels = [0, 1, 0, 1, 0, 1, 0, 1];
        let w = [1.0; 8];
        assert_eq!(grow(&rows_of(&values, &labels, &w), 0, 1.0), Grown::Leaf);
        // A leaf must keep 5 of 8 rows on each side: impossible.
        assert_eq!(grow(&rows_of(&values, &labels, &w), 4, 5.0), Grown::Leaf);
        let pure = [1; 8];
        assert_eq!(grow(&rows_of(&values, &pure, &w), 4, 1.0), Grown::Leaf);
    }

    #[test]
    fn training_rows_reach_pure_leaves_and_the_tree_is_the_same_every_time() {
        // Labels from two features with a tie-prone layout (equal weights, symmetric classes).
        let mut values = Vec::new();
        let mut labels = Vec::new();
        for n in 0..12i64 {
            for k in 0..12i64 {
                values.push(vec![n, k, n * k, n - k]);
                labels.push(usize::from(n > 5) + 2 * usize::from(k > 7));
            }
        }
        let w = vec![1.0; labels.len()];
        let r = rows_of(&values, &labels, &w);
        let g = grow(&r, 6, 1.0);
        assert_eq!(g, grow(&r, 6, 1.0));
        // Every leaf is pure on its training rows.
        let mut by_path: std::collections::BTreeMap<Vec<bool>, std::collections::BTreeSet<usize>> = Default::default();
        for (v, &l) in values.iter().zip(&labels) {
            by_path.entry(grown_path(&g, v)).or_default().insert(l);
        }
        assert!(by_path.values().all(|s| s.len() == 1), "{by_path:?}");
    }
}
