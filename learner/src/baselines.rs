//! The baselines the report scores beside the policy on the same held-out rows: the best
//! single candidate per domain (in `tree::Trainer::best_for`), a log2-bucketed exact lookup
//! (CubeCL-style autotune cache), the nearest training shape in log(N, K) and `auto`, a hand
//! heuristic.

use std::collections::BTreeMap;

use vnni_kernels::registry::{Family, KbRule, Surface};

use crate::domains::Sample;
use crate::tree::Trainer;

/// (round(log2 N), round(log2 K)).
fn bucket(n: u64, k: u64) -> (i64, i64) {
    ((n as f64).log2().round() as i64, (k as f64).log2().round() as i64)
}

/// The best generic candidate per log2 bucket of the training keys; an unseen bucket takes
/// the nearest seen one (L1 distance in octaves, then the smaller bucket).
#[derive(Debug, Clone)]
pub struct Log2Table {
    entries: BTreeMap<(i64, i64), usize>,
}

impl Log2Table {
    pub fn fit(t: &Trainer, train: &[&Sample]) -> Log2Table {
        let mut groups: BTreeMap<(i64, i64), Vec<&Sample>> = BTreeMap::new();
        for s in train {
            groups.entry(bucket(s.n, s.k)).or_default().push(s);
        }
        Log2Table { entries: groups.into_iter().map(|(b, g)| (b, t.best_for(&g))).collect() }
    }

    pub fn predict(&self, n: u64, k: u64) -> Option<usize> {
        let (bn, bk) = bucket(n, k);
        self.entries.iter().min_by_key(|((en, ek), _)| ((en - bn).abs() + (ek - bk).abs(), (*en, *ek))).map(|(_, &c)| c)
    }
}

/// The best generic candidate of the nearest training geometry in (log2 N, log2 K) (squared
/// Euclidean distance; ties to the smaller (N, K)): what a lookup table of measured shapes
/// answers for a shape it never saw.
#[derive(Debug, Clone)]
pub struct NearestShape {
    entries: Vec<((u64, u64), usize)>,
}

impl NearestShape {
    pub fn fit(t: &Trainer, train: &[&Sample]) -> NearestShape {
        let mut groups: BTreeMap<(u64, u64), Vec<&Sample>> = BTreeMap::new();
        for s in train {
            groups.entry((s.n, s.k)).or_default().push(s);
        }
        NearestShape { entries: groups.into_iter().map(|(g, ss)| (g, t.best_for(&ss))).collect() }
    }

    pub fn predict(&self, n: u64, k: u64) -> Option<usize> {
        let (ln, lk) = ((n as f64).log2(), (k as f64).log2());
        let dist = |(en, ek): (u64, u64)| ((en as f64).log2() - ln).powi(2) + ((ek as f64).log2() - lk).powi(2);
        self.entries.iter().min_by(|a, b| dist(a.0).total_cmp(&dist(b.0)).then(a.0.cmp(&b.0))).map(|&(_, c)| c)
    }
}

/// `auto`, the hand heuristic (no training). Decode: if N gives every unit (SM or thread) at
/// least two column tiles of some wide candidate, the wide candidate with the largest such tile
/// (first in registry order); otherwise split K with the waves formula: the kpar `waves2`
/// candidate of the smallest tile (else any kpar waves candidate). Grouped: `mma16` from M >= 16
/// where it exists; otherwise the row-blocked candidates with the fewest rows per block that
/// still hold M (all of them if none does), the largest tile that gives every unit two tiles,
/// else the smallest tile.
pub fn auto(t: &Trainer, m: u64, n: u64, _k: u64) -> usize {
    let list = t.corpus.candidates(t.surface);
    let units = t.skeleton.units.max(1);
    let fills = |tile: u32| n.div_ceil(tile as u64) >= 2 * units;
    let generic: Vec<usize> = (0..list.len()).filter(|&c| t.generic(c)).collect();
    // The largest tile that still fills every unit twice (first in registry order).
    let filling = |pool: &[usize]| {
        pool.iter().copied().filter(|&c| fills(list[c].tile)).max_by_key(|&c| (list[c].tile, std::cmp::Reverse(c)))
    };
    let pick = |pool: Vec<usize>| filling(&pool).or_else(|| pool.iter().copied().min_by_key(|&c| (list[c].tile, c)));
    let chosen = match t.surface {
        Surface::Decode => {
            let wide: Vec<usize> = generic.iter().copied().filter(|&c| list[c].family == Family::Wide).collect();
            filling(&wide).or_else(|| {
                let waves = |w: Option<u32>| {
                    generic
                        .iter()
                        .copied()
                        // The two-phase kpar family: a fused kernel with the same formula
                        // folds in one CTA of `tile` x KB threads, a poor default.
                        .filter(|&c| list[c].family == Family::Kpar)
                        .filter(|&c| matches!(list[c].kb, KbRule::Waves(x) if w.is_none_or(|w| w == x)))
                        .min_by_key(|&c| (list[c].tile, c))
                };
                waves(Some(2)).or_else(|| waves(None))
            })
        }
        Surface::Grouped => {
            let mma = generic.iter().copied().find(|&c| list[c].family == Family::Mma16);
            match mma {
                Some(c) if m >= 16 => Some(c),
                _ => {
                    let rows: Vec<usize> =
                        generic.iter().copied().filter(|&c| list[c].family == Family::Rows).collect();
                    let holding: Vec<usize> = rows.iter().copied().filter(|&c| list[c].rows as u64 >= m).collect();
                    let pool = if holding.is_empty() { rows } else { holding };
                    let fewest = pool.iter().map(|&c| list[c].rows).min();
                    pick(pool.into_iter().filter(|&c| Some(list[c].rows) == fewest).collect())
                }
            }
        }
        // Corpora hold no prefill cells yet (the prefill surface has no candidates there).
        Surface::Prefill => pick(generic.clone()),
    };
    chosen.or_else(|| generic.first().copied()).expect("every surface has a generic candidate")
}
