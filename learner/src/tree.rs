//! One domain's generic tree: linfa-trees on the exact winners, then the conversion to the IR.
//!
//! Threshold semantics: linfa predicts with `x < t` (and routes training rows with `x <= t`,
//! which agrees because t is always the midpoint of two distinct training values). Features
//! are integers, so `x < t` is exactly `x <= ceil(t) - 1`; the converted tree is re-walked on
//! every training row and must reach the same leaf as linfa's.
//!
//! Determinism: linfa sums class weights in `HashMap` order, so of two features that split a
//! node's rows identically either may win in a given process. Each split is therefore
//! canonicalized: the first feature of the set that separates the node's rows the same way,
//! with the threshold linfa would have given it (midpoint of the largest left value and the
//! next training value above it). Leaves are then relabelled from the data (lowest p95 regret,
//! generic-legal only), which also removes linfa's random modal-class ties, and sibling leaves
//! with one label merge.

use linfa::prelude::*;
use linfa_trees::{DecisionTree, SplitQuality, TreeNode};
use ndarray::{Array1, Array2};
use vnni_kernels::registry::Surface;
use vnni_policy::{Feature, Node, Policy};

use crate::corpus::Corpus;
use crate::domains::Sample;
use crate::features::{FeatureSet, EXACT_F64};
use crate::regret::{alias_scores, minimax_winner, pick_banded, TIE_BAND};
use crate::stats::{mean, p95};

/// Hyperparameters chosen by cross-validation.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Hyper {
    pub set: FeatureSet,
    pub depth: usize,
    /// Minimum leaf weight, in rows (weights are normalized to mean 1).
    pub min_leaf: f32,
}

/// Everything a domain's trees are fitted against.
pub struct Trainer<'a> {
    pub corpus: &'a Corpus,
    /// The policy being built (buckets, edges, units): its evaluator walks the trees.
    pub skeleton: &'a Policy,
    pub surface: Surface,
    pub widths: Vec<u64>,
}

/// A tree in training-side form: feature indices into the set, leaves unlabelled.
#[derive(Debug, Clone, PartialEq)]
pub enum Grown {
    Leaf,
    Split { feature: usize, le: i64, left: Box<Grown>, right: Box<Grown> },
}

/// Convert linfa's tree exactly: `x < t` becomes `x <= ceil(t) - 1`.
pub fn convert(node: &TreeNode<f64, usize>) -> Grown {
    if node.is_leaf() {
        return Grown::Leaf;
    }
    let (feature, t, _) = node.split();
    let children = node.children();
    let child = |i: usize| Box::new(convert(children[i].as_deref().expect("linfa split nodes have both children")));
    Grown::Split { feature, le: t.ceil() as i64 - 1, left: child(0), right: child(1) }
}

/// The left/right path linfa's prediction takes for record `x`.
pub fn linfa_path(mut node: &TreeNode<f64, usize>, x: &[f64]) -> Vec<bool> {
    let mut path = Vec::new();
    while !node.is_leaf() {
        let (f, t, _) = node.split();
        let right = x[f] >= t;
        path.push(right);
        node = node.children()[right as usize].as_deref().expect("linfa split nodes have both children");
    }
    path
}

/// The path the integer tree takes for feature values `x`.
pub fn grown_path(mut node: &Grown, x: &[i64]) -> Vec<bool> {
    let mut path = Vec::new();
    while let Grown::Split { feature, le, left, right } = node {
        let go_right = x[*feature] > *le;
        path.push(go_right);
        node = if go_right { right } else { left };
    }
    path
}

impl Trainer<'_> {
    pub fn generic(&self, c: usize) -> bool {
        self.corpus.candidates(self.surface)[c].generic_legal()
    }

    fn alias_regrets<'s>(&'s self, s: &Sample) -> Vec<&'s [f64]> {
        s.cells.iter().map(|&i| self.corpus.cells[i].regret.as_slice()).collect()
    }

    /// The generic-legal exact winner of a runtime key (the training label).
    pub fn label(&self, s: &Sample) -> Option<usize> {
        minimax_winner(&self.alias_regrets(s), |c| self.generic(c))
    }

    /// What a wrong choice costs at this key: the mean excess max-regret of the other generic
    /// candidates over the label's, each capped at 100%, floored so every row counts.
    fn weight(&self, s: &Sample, label: usize) -> f32 {
        let scores = alias_scores(&self.alias_regrets(s));
        let others: Vec<f64> = (0..scores.len())
            .filter(|&c| c != label && self.generic(c))
            .map(|c| (scores[c].0 - scores[label].0).clamp(0.0, 1.0))
            .collect();
        mean(&others).max(1e-3) as f32
    }

    /// The generic-legal candidate of lowest p95 regret (then mean) over the alias cells of
    /// `samples`, 1% tie band to registry order.
    pub fn best_for(&self, samples: &[&Sample]) -> usize {
        let cells: Vec<usize> = samples.iter().flat_map(|s| s.cells.iter().copied()).collect();
        let width = self.corpus.candidates(self.surface).len();
        let scores: Vec<(f64, f64)> = (0..width)
            .map(|c| {
                let r: Vec<f64> = cells.iter().map(|&i| self.corpus.cells[i].regret[c]).collect();
                (p95(&r), mean(&r))
            })
            .collect();
        pick_banded(&scores, |c| self.generic(c), TIE_BAND).expect("every surface has a generic-legal candidate")
    }

    pub fn id(&self, c: usize) -> &str {
        &self.corpus.candidates(self.surface)[c].id
    }

    /// The candidate index a tree picks for N x K (through the policy evaluator's walk).
    pub fn predict(&self, tree: &Node, n: u64, k: u64) -> usize {
        let id = self.skeleton.walk(tree, n, k).expect("learned trees are complete");
        self.corpus.candidates(self.surface).iter().position(|c| c.id == id).expect("trees name surface candidates")
    }

    /// Integer feature values of a key.
    pub fn values(&self, features: &[Feature], s: &Sample) -> Vec<i64> {
        features.iter().map(|f| f.value(s.n, s.k, self.skeleton.units)).collect()
    }

    /// Fit, convert, verify, canonicalize, relabel.
    pub fn fit(&self, samples: &[&Sample], hyper: Hyper) -> Result<Node, String> {
        let features = hyper.set.features(&self.widths);
        let labelled: Vec<(&Sample, usize)> = samples.iter().filter_map(|s| self.label(s).map(|l| (*s, l))).collect();
        let distinct: std::collections::BTreeSet<usize> = labelled.iter().map(|x| x.1).collect();
        if labelled.len() < 2 || distinct.len() < 2 {
            return Ok(Node::Leaf { candidate: self.id(self.best_for(samples)).into() });
        }
        let values: Vec<Vec<i64>> = labelled.iter().map(|(s, _)| self.values(&features, s)).collect();
        if let Some(v) = values.iter().flatten().find(|v| v.abs() >= EXACT_F64) {
            return Err(format!("feature value {v} is not exact as an f64"));
        }
        let records = Array2::from_shape_fn((labelled.len(), features.len()), |(r, f)| values[r][f] as f64);
        let targets = Array1::from_iter(labelled.iter().map(|x| x.1));
        let weights: Vec<f32> = labelled.iter().map(|(s, l)| self.weight(s, *l)).collect();
        let norm = weights.len() as f32 / weights.iter().sum::<f32>();
        let dataset = Dataset::new(records.clone(), targets).with_weights(Array1::from_iter(weights.iter().map(|w| w * norm)));
        let model = DecisionTree::params()
            .split_quality(SplitQuality::Gini)
            .max_depth(Some(hyper.depth))
            .min_weight_split(2.0)
            .min_weight_leaf(hyper.min_leaf)
            .fit(&dataset)
            .map_err(|e| format!("linfa-trees: {e}"))?;
        let grown = convert(model.root_node());
        for (r, v) in values.iter().enumerate() {
            let x = records.row(r).to_vec();
            if linfa_path(model.root_node(), &x) != grown_path(&grown, v) {
                return Err(format!("converted thresholds route key {}x{} unlike linfa", labelled[r].0.n, labelled[r].0.k));
            }
        }
        let rows: Vec<usize> = (0..values.len()).collect();
        let canonical = canonicalize(&grown, &rows, &values);
        for v in &values {
            debug_assert_eq!(grown_path(&grown, v), grown_path(&canonical, v));
        }
        let keys: Vec<&Sample> = labelled.iter().map(|x| x.0).collect();
        Ok(self.label_tree(&canonical, &rows, &keys, &values, &features))
    }

    /// Relabel every leaf from the keys reaching it; merge sibling leaves with one label.
    fn label_tree(&self, node: &Grown, rows: &[usize], keys: &[&Sample], values: &[Vec<i64>], features: &[Feature]) -> Node {
        match node {
            Grown::Leaf => {
                let reach: Vec<&Sample> = rows.iter().map(|&r| keys[r]).collect();
                Node::Leaf { candidate: self.id(self.best_for(&reach)).into() }
            }
            Grown::Split { feature, le, left, right } => {
                let (l, r): (Vec<usize>, Vec<usize>) = rows.iter().partition(|&&i| values[i][*feature] <= *le);
                let left = self.label_tree(left, &l, keys, values, features);
                let right = self.label_tree(right, &r, keys, values, features);
                match (&left, &right) {
                    (Node::Leaf { candidate: a }, Node::Leaf { candidate: b }) if a == b => left,
                    _ => Node::Split { feature: features[*feature], le: *le, left: Some(Box::new(left)), right: Some(Box::new(right)) },
                }
            }
        }
    }
}

/// Replace every split by the first feature that separates the node's rows identically, with
/// linfa's threshold rule for that feature (see the module comment). Routing of `rows` is kept.
pub fn canonicalize(node: &Grown, rows: &[usize], values: &[Vec<i64>]) -> Grown {
    let Grown::Split { feature, le, left, right } = node else { return Grown::Leaf };
    let (l, r): (Vec<usize>, Vec<usize>) = rows.iter().partition(|&&i| values[i][*feature] <= *le);
    let (mut chosen, mut chosen_le) = (*feature, *le);
    if !l.is_empty() && !r.is_empty() {
        for f in 0..values[0].len() {
            let max_left = l.iter().map(|&i| values[i][f]).max().expect("non-empty");
            let min_right = r.iter().map(|&i| values[i][f]).min().expect("non-empty");
            if max_left < min_right {
                let next = values.iter().map(|v| v[f]).filter(|&v| v > max_left).min().expect("min_right is above");
                chosen = f;
                chosen_le = (max_left + next - 1).div_euclid(2);
                break;
            }
        }
    }
    Grown::Split {
        feature: chosen,
        le: chosen_le,
        left: Box::new(canonicalize(left, &l, values)),
        right: Box::new(canonicalize(right, &r, values)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vnni_kernels::fixture::splitmix64;

    fn linfa_tree(x: &[Vec<i64>], y: &[usize], depth: usize) -> DecisionTree<f64, usize> {
        let records = Array2::from_shape_fn((x.len(), x[0].len()), |(r, f)| x[r][f] as f64);
        let ds = Dataset::new(records, Array1::from_iter(y.iter().copied()));
        DecisionTree::params().max_depth(Some(depth)).fit(&ds).unwrap()
    }

    #[test]
    fn integer_midpoints_convert_to_predict_semantics() {
        // Training values 2 and 4: linfa's threshold is exactly 3.0 and it predicts `x < 3`,
        // so x = 3 (never seen in training) goes right: `x <= 2` is the exact integer form.
        let t = linfa_tree(&[vec![2], vec![2], vec![4], vec![4]], &[0, 0, 1, 1], 1);
        assert_eq!(t.root_node().split().1, 3.0);
        let g = convert(t.root_node());
        assert!(matches!(g, Grown::Split { le: 2, .. }), "{g:?}");
        for x in 0..8 {
            assert_eq!(linfa_path(t.root_node(), &[x as f64]), grown_path(&g, &[x]), "x = {x}");
        }
        // A half-integer midpoint (2 and 3 -> 2.5) converts to `x <= 2`.
        let t = linfa_tree(&[vec![2], vec![3]], &[0, 1], 1);
        assert!(matches!(convert(t.root_node()), Grown::Split { le: 2, .. }));
    }

    #[test]
    fn converted_trees_route_every_integer_like_linfa() {
        // Random integer records (even values, so midpoints are often integers never seen in
        // training; and large values), random labels, a deep tree: every integer point of a
        // grid, seen in training or not, takes linfa's path.
        let rows = 200;
        let x: Vec<Vec<i64>> = (0..rows as u64)
            .map(|i| vec![(splitmix64(1, i) % 20) as i64 * 2, (splitmix64(2, i) % 9) as i64 * 1_000_000_007])
            .collect();
        let y: Vec<usize> = (0..rows as u64).map(|i| (splitmix64(3, i) % 3) as usize).collect();
        let t = linfa_tree(&x, &y, 8);
        let g = convert(t.root_node());
        assert!(matches!(g, Grown::Split { .. }));
        for a in -1..42 {
            for b in -1..10 {
                let v = [a, b * 1_000_000_007];
                let f = [v[0] as f64, v[1] as f64];
                assert_eq!(linfa_path(t.root_node(), &f), grown_path(&g, &v), "at {v:?}");
            }
        }
    }

    #[test]
    fn canonical_splits_use_the_first_equivalent_feature() {
        // Feature 1 = 10 x feature 0: identical partitions. A split on feature 1 becomes a split
        // on feature 0 with linfa's rule (midpoint of 3 and the next value 5, as an integer <=).
        let values: Vec<Vec<i64>> = [1, 3, 5, 7].iter().map(|&v| vec![v, 10 * v]).collect();
        let split = Grown::Split { feature: 1, le: 40, left: Box::new(Grown::Leaf), right: Box::new(Grown::Leaf) };
        let c = canonicalize(&split, &[0, 1, 2, 3], &values);
        assert_eq!(c, Grown::Split { feature: 0, le: 3, left: Box::new(Grown::Leaf), right: Box::new(Grown::Leaf) });
        for v in &values {
            assert_eq!(grown_path(&split, v), grown_path(&c, v));
        }
    }
}
