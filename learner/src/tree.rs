//! One domain's fit, converted to the IR: a CART on the exact winners, or, for CUDA decode
//! domains, the cost models (which answer first) and a summed-regret tree distilled from them
//! (`distill.rs`) for where they do not answer.
//!
//! The tree is grown by `cart.rs` (deterministic weighted Gini CART over the integer
//! features; its module comment says why not linfa-trees), then canonicalized: each split is
//! rewritten to the first feature that divides the node's rows the same way, so of several
//! equivalent features the policy always names the same one. Leaves are relabelled with the
//! generic-legal candidate of lowest p95 regret over the rows reaching them, and sibling
//! leaves with one label merge.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use vnni_kernels::registry::{Backend, Surface};
use vnni_policy::{Feature, Node, Policy};

use crate::cart;
use crate::corpus::Corpus;
use crate::distill::{self, Labelled, Models};
use crate::domains::Sample;
use crate::features::FeatureSet;
use crate::regret::{alias_scores, pick_banded, tied_winner, TIE_BAND};
use crate::regret_stats::{mean, p95};
use crate::regret_tree;

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
    /// Cost models and distillation data per training set (keyed by its alias cells):
    /// cross-validation grows several trees on one set, the cost models are fitted once.
    distilled: DistillCache,
}

/// The cost models of a training set and the grid they label (each `None` where it does not apply).
type Distilled = (Option<Rc<Models>>, Option<Rc<Labelled>>);
type DistillCache = RefCell<BTreeMap<Vec<usize>, Distilled>>;

/// The labelled points of a distillation under one feature set: the features and each
/// point's values.
struct Distillation {
    features: Vec<Feature>,
    values: Vec<Vec<i64>>,
}

impl Distillation {
    /// The summed-regret tree's training rows: these values, `data`'s regrets and weights.
    fn rows<'a>(&'a self, data: &'a Labelled, allowed: &'a [bool]) -> regret_tree::Rows<'a> {
        regret_tree::Rows { values: &self.values, regret: &data.regret, weights: &data.weights, allowed }
    }
}

/// What one fit of a domain yields: its tree and, for CUDA decode domains, the cost models
/// that answer before it (as the policy's evaluator and the tables do).
#[derive(Debug, Clone)]
pub struct Fitted {
    pub tree: Node,
    pub models: Option<Rc<Models>>,
}

impl Fitted {
    /// The models as the policy stores them (none: the tree answers everywhere).
    pub fn policy_models(&self) -> Vec<vnni_policy::CostModel> {
        self.models.as_ref().map(|m| m.to_policy()).unwrap_or_default()
    }

    /// The anchors of the models' residuals (none without a correction).
    pub fn policy_anchors(&self) -> Vec<[u64; 2]> {
        self.models.as_ref().map(|m| m.anchors().to_vec()).unwrap_or_default()
    }
}

/// A tree in training-side form: feature indices into the set, leaves unlabelled.
#[derive(Debug, Clone, PartialEq)]
pub enum Grown {
    Leaf,
    Split { feature: usize, le: i64, left: Box<Grown>, right: Box<Grown> },
}

impl Grown {
    /// Split rows `at` on `values[.][feature] <= le` and grow each side with `grow`.
    pub fn split(
        at: &[usize],
        values: &[Vec<i64>],
        feature: usize,
        le: i64,
        mut grow: impl FnMut(&[usize]) -> Grown,
    ) -> Grown {
        let (l, r): (Vec<usize>, Vec<usize>) = at.iter().partition(|&&i| values[i][feature] <= le);
        Grown::Split { feature, le, left: Box::new(grow(&l)), right: Box::new(grow(&r)) }
    }

    /// This tree cut to at most `depth` levels. The growers decide each node from its rows
    /// alone (depth is only a cutoff), so a tree grown deep and cut is the tree grown to
    /// `depth`: cross-validation grows once per feature set and cuts for every depth.
    pub fn truncated(&self, depth: usize) -> Grown {
        match self {
            Grown::Split { feature, le, left, right } if depth > 0 => Grown::Split {
                feature: *feature,
                le: *le,
                left: Box::new(left.truncated(depth - 1)),
                right: Box::new(right.truncated(depth - 1)),
            },
            _ => Grown::Leaf,
        }
    }
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

impl<'a> Trainer<'a> {
    pub fn new(corpus: &'a Corpus, skeleton: &'a Policy, surface: Surface, widths: Vec<u64>) -> Trainer<'a> {
        Trainer { corpus, skeleton, surface, widths, distilled: RefCell::default() }
    }

    /// Whether this domain's trees are distilled from the cost model (CUDA decode domains of
    /// a corpus with preflight resources) rather than grown as a CART on the measured winners.
    pub fn distills(&self) -> bool {
        self.surface == Surface::Decode && self.corpus.backend == Backend::Cuda && !self.corpus.resources.is_empty()
    }

    fn distilled(&self, samples: &[&Sample]) -> Distilled {
        // The alias cells identify the training set whatever domain the samples are of.
        let key: Vec<usize> = samples.iter().flat_map(|s| s.cells.iter().copied()).collect();
        let fit = || {
            let models = Models::fit(self, samples);
            let labelled = models.as_ref().and_then(|m| distill::labelled(self, samples, m));
            (models.map(Rc::new), labelled.map(Rc::new))
        };
        self.distilled.borrow_mut().entry(key).or_insert_with(fit).clone()
    }

    pub fn generic(&self, c: usize) -> bool {
        self.corpus.candidates(self.surface)[c].generic_legal()
    }

    /// The scored regrets (inside the noise band: tied with the best) of each alias cell.
    fn alias_regrets(&self, s: &Sample) -> Vec<Vec<f64>> {
        let width = self.corpus.candidates(self.surface).len();
        s.cells.iter().map(|&i| (0..width).map(|c| self.corpus.cells[i].scored(c)).collect()).collect()
    }

    /// The generic-legal exact winner of a runtime key (the training label): tied inside the
    /// noise band, the measured fastest.
    pub fn label(&self, s: &Sample) -> Option<usize> {
        let regrets = self.alias_regrets(s);
        let scored: Vec<&[f64]> = regrets.iter().map(Vec::as_slice).collect();
        let measured: Vec<&[f64]> = s.cells.iter().map(|&i| self.corpus.cells[i].regret.as_slice()).collect();
        tied_winner(&scored, &measured, |c| self.generic(c))
    }

    /// What a wrong choice costs at this key: the mean excess max-regret of the other generic
    /// candidates over the label's, each capped at 100%, floored so every row counts.
    fn weight(&self, s: &Sample, label: usize) -> f32 {
        let regrets = self.alias_regrets(s);
        let scores = alias_scores(&regrets.iter().map(Vec::as_slice).collect::<Vec<_>>());
        let others: Vec<f64> = (0..scores.len())
            .filter(|&c| c != label && self.generic(c))
            .map(|c| (scores[c].0 - scores[label].0).clamp(0.0, 1.0))
            .collect();
        mean(&others).max(1e-3) as f32
    }

    /// The generic-legal candidate of lowest p95 regret (scored: ties inside the noise band;
    /// then the mean as measured) over the alias cells of `samples`, 1% tie band to registry
    /// order.
    pub fn best_for(&self, samples: &[&Sample]) -> usize {
        let cells: Vec<usize> = samples.iter().flat_map(|s| s.cells.iter().copied()).collect();
        let width = self.corpus.candidates(self.surface).len();
        let scores: Vec<(f64, f64)> = (0..width)
            .map(|c| {
                let r: Vec<f64> = cells.iter().map(|&i| self.corpus.cells[i].scored(c)).collect();
                let measured: Vec<f64> = cells.iter().map(|&i| self.corpus.cells[i].regret[c]).collect();
                (p95(&r), mean(&measured))
            })
            .collect();
        pick_banded(&scores, |c| self.generic(c), TIE_BAND).expect("every surface has a generic-legal candidate")
    }

    pub fn id(&self, c: usize) -> &str {
        &self.corpus.candidates(self.surface)[c].id
    }

    /// The candidate index a fit picks for N x K: its models' argmin where they answer, else
    /// its tree's leaf (the policy evaluator's order after overlays).
    pub fn predict(&self, fitted: &Fitted, n: u64, k: u64) -> usize {
        fitted.models.as_ref().and_then(|m| m.argmin(n, k)).unwrap_or_else(|| self.walk(&fitted.tree, n, k))
    }

    /// The candidate index a tree picks for N x K (through the policy evaluator's walk).
    pub fn walk(&self, tree: &Node, n: u64, k: u64) -> usize {
        let id = self.skeleton.walk(tree, n, k).expect("learned trees are complete");
        self.corpus.candidates(self.surface).iter().position(|c| c.id == id).expect("trees name surface candidates")
    }

    /// Integer feature values of a key.
    pub fn values(&self, features: &[Feature], s: &Sample) -> Vec<i64> {
        features.iter().map(|f| f.value(s.n, s.k, self.skeleton.units)).collect()
    }

    /// Fit the cost models (CUDA decode domains) and the tree: a summed-regret tree distilled
    /// from the models, else a CART on the exact winners.
    pub fn fit(&self, samples: &[&Sample], hyper: Hyper) -> Result<Fitted, String> {
        let (models, data) = if self.distills() { self.distilled(samples) } else { (None, None) };
        let tree = match data {
            Some(data) => self.fit_distilled(&data, hyper),
            None => self.fit_cart(samples, hyper)?,
        };
        Ok(Fitted { tree, models })
    }

    /// Fit, convert, verify, canonicalize, relabel.
    fn fit_cart(&self, samples: &[&Sample], hyper: Hyper) -> Result<Node, String> {
        let features = hyper.set.features(&self.widths);
        let labelled: Vec<(&Sample, usize)> = samples.iter().filter_map(|s| self.label(s).map(|l| (*s, l))).collect();
        let distinct: std::collections::BTreeSet<usize> = labelled.iter().map(|x| x.1).collect();
        if labelled.len() < 2 || distinct.len() < 2 {
            return Ok(Node::Leaf { candidate: self.id(self.best_for(samples)).into() });
        }
        let values: Vec<Vec<i64>> = labelled.iter().map(|(s, _)| self.values(&features, s)).collect();
        let labels: Vec<usize> = labelled.iter().map(|x| x.1).collect();
        let weights: Vec<f64> = labelled.iter().map(|(s, l)| f64::from(self.weight(s, *l))).collect();
        let norm = weights.len() as f64 / weights.iter().sum::<f64>();
        let weights: Vec<f64> = weights.iter().map(|w| w * norm).collect();
        let classes = labels.iter().max().map_or(1, |m| m + 1);
        let grown = cart::grow(
            &cart::Rows { values: &values, labels: &labels, weights: &weights, classes },
            hyper.depth,
            f64::from(hyper.min_leaf),
        );
        let rows: Vec<usize> = (0..values.len()).collect();
        let canonical = canonicalize(&grown, &rows, &values);
        for v in &values {
            debug_assert_eq!(grown_path(&grown, v), grown_path(&canonical, v));
        }
        let keys: Vec<&Sample> = labelled.iter().map(|x| x.0).collect();
        Ok(self.label_tree(&canonical, &rows, &keys, &values, &features))
    }

    /// Fit one training set with every hyperparameter of `hypers`, in their order (what
    /// cross-validation does per fold). A distilled tree is grown once per feature set and
    /// minimum leaf, to the deepest depth asked for, and cut for the others
    /// ([`Grown::truncated`]: the same trees as growing each); the grid's feature values are
    /// computed once per feature set.
    pub fn fit_each(&self, samples: &[&Sample], hypers: &[Hyper]) -> Result<Vec<Fitted>, String> {
        let (models, Some(data)) = (if self.distills() { self.distilled(samples) } else { (None, None) }) else {
            return hypers.iter().map(|&h| self.fit(samples, h)).collect();
        };
        let allowed = self.allowed();
        let mut sets: Vec<(FeatureSet, Distillation)> = Vec::new();
        let mut grown: Vec<(FeatureSet, f32, Grown)> = Vec::new();
        let mut out = Vec::with_capacity(hypers.len());
        for h in hypers {
            if !sets.iter().any(|(s, _)| *s == h.set) {
                sets.push((h.set, self.distillation(&data, h.set)));
            }
            let d = &sets.iter().find(|(s, _)| *s == h.set).expect("pushed above").1;
            if !grown.iter().any(|(s, m, _)| *s == h.set && *m == h.min_leaf) {
                let deepest = hypers
                    .iter()
                    .filter(|o| o.set == h.set && o.min_leaf == h.min_leaf)
                    .map(|o| o.depth)
                    .max()
                    .expect("h itself");
                let tree = regret_tree::grow(&d.rows(&data, &allowed), deepest, f64::from(h.min_leaf));
                grown.push((h.set, h.min_leaf, tree));
            }
            let deep = &grown.iter().find(|(s, m, _)| *s == h.set && *m == h.min_leaf).expect("pushed above").2;
            let tree = self.label_distilled(d, &d.rows(&data, &allowed), &deep.truncated(h.depth));
            out.push(Fitted { tree, models: models.clone() });
        }
        Ok(out)
    }

    /// A summed-regret tree over the labelled grid and training rows.
    fn fit_distilled(&self, data: &Labelled, hyper: Hyper) -> Node {
        let d = self.distillation(data, hyper.set);
        let allowed = self.allowed();
        let rows = d.rows(data, &allowed);
        let grown = regret_tree::grow(&rows, hyper.depth, f64::from(hyper.min_leaf));
        self.label_distilled(&d, &rows, &grown)
    }

    /// The labelled points' feature values under `set`.
    fn distillation(&self, data: &Labelled, set: FeatureSet) -> Distillation {
        let features = set.features(&self.widths);
        let units = self.skeleton.units;
        let values =
            data.points.iter().map(|&(n, k)| features.iter().map(|f| f.value(n, k, units)).collect()).collect();
        Distillation { features, values }
    }

    /// Which candidates may label a leaf: the generic-legal ones.
    fn allowed(&self) -> Vec<bool> {
        (0..self.corpus.candidates(self.surface).len()).map(|c| self.generic(c)).collect()
    }

    /// Canonicalize a grown summed-regret tree over `rows` and label its leaves.
    fn label_distilled(&self, d: &Distillation, rows: &regret_tree::Rows, grown: &Grown) -> Node {
        let all: Vec<usize> = (0..d.values.len()).collect();
        let canonical = canonicalize(grown, &all, &d.values);
        let dense = regret_tree::Dense::of(rows);
        self.label_by(&canonical, &all, &d.values, &d.features, &|at: &[usize]| dense.label(at))
    }

    /// Convert a grown tree, each leaf labelled by `label` of the rows reaching it; merge
    /// sibling leaves with one label.
    fn label_by(
        &self,
        node: &Grown,
        rows: &[usize],
        values: &[Vec<i64>],
        features: &[Feature],
        label: &dyn Fn(&[usize]) -> usize,
    ) -> Node {
        match node {
            Grown::Leaf => Node::Leaf { candidate: self.id(label(rows)).into() },
            Grown::Split { feature, le, left, right } => {
                let (l, r): (Vec<usize>, Vec<usize>) = rows.iter().partition(|&&i| values[i][*feature] <= *le);
                let left = self.label_by(left, &l, values, features, label);
                let right = self.label_by(right, &r, values, features, label);
                match (&left, &right) {
                    (Node::Leaf { candidate: a }, Node::Leaf { candidate: b }) if a == b => left,
                    _ => Node::Split {
                        feature: features[*feature],
                        le: *le,
                        left: Some(Box::new(left)),
                        right: Some(Box::new(right)),
                    },
                }
            }
        }
    }

    /// Relabel every leaf from the keys reaching it; merge sibling leaves with one label.
    fn label_tree(
        &self,
        node: &Grown,
        rows: &[usize],
        keys: &[&Sample],
        values: &[Vec<i64>],
        features: &[Feature],
    ) -> Node {
        let label = |at: &[usize]| {
            let reach: Vec<&Sample> = at.iter().map(|&r| keys[r]).collect();
            self.best_for(&reach)
        };
        self.label_by(node, rows, values, features, &label)
    }
}

/// Replace every split by the first feature that separates the node's rows identically, with
/// the integer-midpoint threshold rule of `cart.rs` for that feature. Routing of `rows` is kept.
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

    #[test]
    fn canonical_splits_use_the_first_equivalent_feature() {
        // Feature 1 splits rows {0, 1} | {2, 3}; feature 0 does too (values 1, 3 | 5, 7), so the
        // canonical split is on feature 0 with the midpoint rule: le = floor((3 + 5 - 1) / 2) = 3.
        let values = vec![vec![1, 10], vec![3, 11], vec![5, 40], vec![7, 41]];
        let g = Grown::Split { feature: 1, le: 20, left: Box::new(Grown::Leaf), right: Box::new(Grown::Leaf) };
        let c = canonicalize(&g, &[0, 1, 2, 3], &values);
        assert_eq!(c, Grown::Split { feature: 0, le: 3, left: Box::new(Grown::Leaf), right: Box::new(Grown::Leaf) });
        for v in &values {
            assert_eq!(grown_path(&g, v), grown_path(&c, v));
        }
    }
}
