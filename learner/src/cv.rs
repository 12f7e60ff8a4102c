//! Grouped cross-validation: a fold holds out whole (N, K) geometries, across every M, mode
//! and source format, so no geometry is ever in both the training and the test rows. It picks
//! each domain's hyperparameters and yields the held-out rows the gates and the report use.

use std::collections::{BTreeMap, BTreeSet};

use vnni_kernels::fixture::splitmix64;

use crate::baselines::{auto, Log2Table, NearestShape};
use crate::domains::Sample;
use crate::features::FeatureSet;
use crate::regret::pick_banded;
use crate::regret_stats::Summary;
use crate::tree::{Fitted, Hyper, Trainer};

pub const FOLDS: usize = 5;

/// Hyperparameters within 0.1% of the best held-out (p95, geomean) lose to the simpler one.
const SIMPLER_BAND: f64 = 0.001;

/// The fold of every development geometry.
#[derive(Debug, Clone)]
pub struct Folds {
    fold: BTreeMap<(u64, u64), usize>,
    pub count: usize,
}

impl Folds {
    /// Geometries in a fixed pseudo-random order (a hash of N and K, so folds do not follow
    /// size), dealt round-robin.
    pub fn new(geometries: impl IntoIterator<Item = (u64, u64)>, count: usize) -> Folds {
        let set: BTreeSet<(u64, u64)> = geometries.into_iter().collect();
        let mut order: Vec<(u64, (u64, u64))> =
            set.into_iter().map(|(n, k)| (splitmix64(n.rotate_left(32) ^ k, 0x5eed), (n, k))).collect();
        order.sort();
        let fold = order.into_iter().enumerate().map(|(i, (_, g))| (g, i % count)).collect();
        Folds { fold, count }
    }

    pub fn of(&self, geometry: (u64, u64)) -> usize {
        self.fold[&geometry]
    }

    /// (train, test) keys of fold `f`.
    pub fn split<'s>(&self, samples: &[&'s Sample], f: usize) -> (Vec<&'s Sample>, Vec<&'s Sample>) {
        samples.iter().partition(|s| self.of(s.geometry()) != f)
    }
}

/// The hyperparameter grid, simplest first. Distilled trees (hundreds of labelled grid rows
/// per domain) take deeper trees and small leaves; a min leaf of 1 would let one grid point
/// carve a leaf.
pub fn grid(distilled: bool) -> Vec<Hyper> {
    let mut out = Vec::new();
    if distilled {
        for set in [FeatureSet::Dims, FeatureSet::Launch] {
            for depth in [4, 6, 8, 10, 12] {
                out.push(Hyper { set, depth, min_leaf: 2.0 });
            }
        }
        return out;
    }
    for set in FeatureSet::ALL {
        for depth in [1, 2, 3, 4, 6] {
            for min_leaf in [4.0, 2.0, 1.0] {
                out.push(Hyper { set, depth, min_leaf });
            }
        }
    }
    out
}

/// The methods compared on the same held-out rows.
pub const METHODS: [&str; METHOD_COUNT] = ["policy", "best single", "log2 lookup", "nearest shape", "auto"];
pub const METHOD_COUNT: usize = 5;

/// One domain's cross-validation outcome: the chosen hyperparameters and, per method, the
/// (regret, UCB) of every held-out alias cell.
#[derive(Debug, Clone)]
pub struct Heldout {
    pub hyper: Hyper,
    pub rows: [Vec<(f64, f64)>; METHOD_COUNT],
    /// The policy's held-out choices, aligned with `rows[0]`: (corpus cell index, candidate).
    pub picks: Vec<(usize, usize)>,
}

impl Heldout {
    pub fn summary(&self, method: usize) -> Summary {
        Summary::of(&self.rows[method])
    }
}

/// The baselines of [`METHODS`] (all but the policy), trained on `train` and scored on `test`:
/// per method, the (regret, UCB) of every alias cell of the test keys.
pub fn baseline_rows(t: &Trainer, train: &[&Sample], test: &[&Sample]) -> [Vec<(f64, f64)>; METHOD_COUNT - 1] {
    let fallback = fallback(t);
    let best = if train.is_empty() { fallback } else { t.best_for(train) };
    let table = Log2Table::fit(t, train);
    let near = NearestShape::fit(t, train);
    [
        rows_of(t, test, |_| best),
        rows_of(t, test, |s| table.predict(s.n, s.k).unwrap_or(fallback)),
        rows_of(t, test, |s| near.predict(s.n, s.k).unwrap_or(fallback)),
        rows_of(t, test, |s| auto(t, s.m, s.n, s.k)),
    ]
}

/// What a method without training rows answers: the first generic candidate.
fn fallback(t: &Trainer) -> usize {
    (0..t.corpus.candidates(t.surface).len()).find(|&c| t.generic(c)).expect("a generic candidate")
}

fn rows_of(t: &Trainer, test: &[&Sample], pick: impl Fn(&Sample) -> usize) -> Vec<(f64, f64)> {
    scores(t, &picks_of(test, pick))
}

/// The (regret, UCB) of each (cell index, candidate) choice.
fn scores(t: &Trainer, picks: &[(usize, usize)]) -> Vec<(f64, f64)> {
    picks.iter().map(|&(i, c)| (t.corpus.cells[i].scored(c), t.corpus.cells[i].ucb[c])).collect()
}

/// (cell index, candidate) of every alias cell of the test keys.
fn picks_of(test: &[&Sample], pick: impl Fn(&Sample) -> usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for s in test {
        let c = pick(s);
        out.extend(s.cells.iter().map(|&i| (i, c)));
    }
    out
}

/// Cross-validate every grid point, choose one, and score the baselines on the same rows.
pub fn cross_validate(t: &Trainer, samples: &[Sample], folds: &Folds) -> Result<Heldout, String> {
    let samples: Vec<&Sample> = samples.iter().collect();
    let (hyper, picks) = choose(t, &samples, folds)?;
    let mut rows: [Vec<(f64, f64)>; METHOD_COUNT] = Default::default();
    rows[0] = scores(t, &picks);
    for f in 0..folds.count {
        let (train, test) = folds.split(&samples, f);
        for (m, r) in baseline_rows(t, &train, &test).into_iter().enumerate() {
            rows[m + 1].extend(r);
        }
    }
    Ok(Heldout { hyper, rows, picks })
}

/// Cross-validate every grid point on `samples` and choose one: the chosen hyperparameters
/// and their held-out picks, (cell index, candidate), of what ships (the cost models' argmin where they
/// answer, else the tree). The hyperparameters shape only the tree, so they are chosen on the
/// trees' own held-out picks (where models answer nearly every row, scoring what ships would
/// tie every grid point and always pick the simplest tree).
pub fn choose(t: &Trainer, samples: &[&Sample], folds: &Folds) -> Result<(Hyper, Vec<(usize, usize)>), String> {
    let splits: Vec<(Vec<&Sample>, Vec<&Sample>)> = (0..folds.count).map(|f| folds.split(samples, f)).collect();
    let fallback = fallback(t);
    let mut per_hyper = Vec::new();
    let hypers = grid(t.distills());
    // Per split, every hyperparameter's fit (one training set, trees grown once and cut).
    let fits: Vec<Option<Vec<Fitted>>> = splits
        .iter()
        .map(|(train, _)| (!train.is_empty()).then(|| t.fit_each(train, &hypers)).transpose())
        .collect::<Result<_, _>>()?;
    for (h, &hyper) in hypers.iter().enumerate() {
        let (mut tree_rows, mut rows) = (Vec::new(), Vec::new());
        for ((_, test), fits) in splits.iter().zip(&fits) {
            let Some(fits) = fits else {
                tree_rows.extend(rows_of(t, test, |_| fallback));
                rows.extend(picks_of(test, |_| fallback));
                continue;
            };
            let fitted = &fits[h];
            tree_rows.extend(rows_of(t, test, |s| t.walk(&fitted.tree, s.n, s.k)));
            rows.extend(picks_of(test, |s| t.predict(fitted, s.n, s.k)));
        }
        per_hyper.push((hyper, tree_rows, rows));
    }
    let scores: Vec<(f64, f64)> = per_hyper
        .iter()
        .map(|(_, tree_rows, _)| {
            let s = Summary::of(tree_rows);
            (s.p95_regret, s.geomean_regret)
        })
        .collect();
    let chosen = pick_banded(&scores, |_| true, SIMPLER_BAND).expect("the grid is not empty");
    let (hyper, _, rows) = per_hyper.swap_remove(chosen);
    Ok((hyper, rows))
}
