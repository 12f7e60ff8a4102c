//! The generic tree of a CUDA decode domain, distilled from the cost model: fit one
//! [`CandidateModel`] per candidate on the training rows, label a dense log-spaced grid of
//! shapes of the domain with every candidate's predicted regret, add the measured training
//! rows with their measured regrets, and grow the integer tree on summed regret
//! (`regret_tree.rs`). The tree stays what the tables can carry (integer thresholds on shape
//! features); the model is what lets it place boundaries between measured shapes.

use std::collections::BTreeMap;

use crate::cost_model::{CandidateModel, KernelResources, Launch};
use crate::domains::{domain_of, DomainKey, Sample};
use crate::regret::REGRET_CAP;
use crate::tree::Trainer;

/// Regrets above this count as this much: one hopeless candidate must not outweigh many
/// close calls in a leaf's sum.
pub const REGRET_CLIP: f64 = 1.0;

/// The weight of a measured training key against a grid point's 1.
pub const MEASURED_WEIGHT: f64 = 4.0;

/// The dense grid: N = 2^(8 + i/4) rounded to a multiple of 16 (256 .. 262144) and
/// K = 2^(8 + j/4) rounded to a multiple of 256 (256 .. 32768): the span of LLM projections
/// and vocabularies, four points an octave.
pub fn grid() -> Vec<(u64, u64)> {
    let round = |x: f64, m: u64| ((x / m as f64).round() as u64).max(1) * m;
    let ns: Vec<u64> = (0..=40).map(|i| round(2f64.powf(8.0 + f64::from(i) / 4.0), 16)).collect();
    let ks: Vec<u64> = (0..=28).map(|j| round(2f64.powf(8.0 + f64::from(j) / 4.0), 256)).collect();
    let mut out: Vec<(u64, u64)> = ns.iter().flat_map(|&n| ks.iter().map(move |&k| (n, k))).collect();
    out.sort();
    out.dedup();
    out
}

/// Shapes with a regret row each: grid points first, then the measured training keys.
#[derive(Debug, Clone)]
pub struct Labelled {
    pub points: Vec<(u64, u64)>,
    pub regret: Vec<Vec<f64>>,
    pub weights: Vec<f64>,
}

/// The kernel resources of every candidate of the surface for `codebook` (from the corpus's
/// preflight rows; `None` for a kernel without any, which then gets no model).
fn resources(t: &Trainer, codebook: vnni_kernels::Codebook) -> Vec<Option<KernelResources>> {
    let corpus = t.corpus;
    corpus.candidates(t.surface).iter().map(|c| corpus.resources.get(&c.kernel(codebook).symbol()).copied()).collect()
}

/// Label the grid and the training keys of one decode domain, the cost models fitted on
/// those keys alone (a model pooled over both aspect buckets fitted each worse in
/// cross-validation: the form is too rigid to span both); `None` where the cost model does
/// not apply (no preflight resources in the corpus, or no samples).
pub fn labelled(t: &Trainer, samples: &[&Sample]) -> Option<Labelled> {
    let first = samples.first()?;
    let cell = &t.corpus.cells[*first.cells.first()?];
    let (codebook, mode) = (cell.codebook, cell.mode);
    let key: DomainKey = domain_of(t.skeleton, codebook.name(), mode.name(), 1, first.n, first.k)?;
    let res = resources(t, codebook);
    let units = t.skeleton.units as u32;
    let cands = t.corpus.candidates(t.surface);

    // One model per generic candidate, fitted on the measured alias cells of the samples.
    let mut models: BTreeMap<usize, CandidateModel> = BTreeMap::new();
    for (c, cand) in cands.iter().enumerate() {
        let Some(r) = res[c] else { continue };
        if !t.generic(c) {
            continue;
        }
        let mut rows = Vec::new();
        for s in samples {
            for &i in &s.cells {
                let cell = &t.corpus.cells[i];
                if cell.regret[c] >= REGRET_CAP {
                    continue;
                }
                if let Some(l) = Launch::of(cand, cell.codebook, s.n, s.k, units, r) {
                    rows.push((l, cell.best_us * (1.0 + cell.regret[c])));
                }
            }
        }
        if let Some(m) = CandidateModel::fit(&rows, units) {
            models.insert(c, m);
        }
    }
    if models.is_empty() {
        return None;
    }

    let mut out = Labelled { points: Vec::new(), regret: Vec::new(), weights: Vec::new() };
    for (n, k) in grid() {
        if domain_of(t.skeleton, codebook.name(), mode.name(), 1, n, k).as_ref() != Some(&key) {
            continue;
        }
        let mut pred = vec![f64::INFINITY; cands.len()];
        for (&c, m) in &models {
            if let Some(l) = Launch::of(&cands[c], codebook, n, k, units, res[c].expect("modelled")) {
                pred[c] = m.predict(&l, units);
            }
        }
        let best = pred.iter().copied().filter(|p| *p > 0.0).fold(f64::INFINITY, f64::min);
        if !best.is_finite() {
            continue;
        }
        out.points.push((n, k));
        out.regret.push(
            pred.iter()
                .map(|&p| if p.is_finite() && p > 0.0 { (p / best - 1.0).clamp(0.0, REGRET_CLIP) } else { REGRET_CLIP })
                .collect(),
        );
        out.weights.push(1.0);
    }
    for s in samples {
        let mut r = vec![0.0; cands.len()];
        for &i in &s.cells {
            for (c, v) in r.iter_mut().enumerate() {
                // A candidate that gave wrong bits (or was never measured) at a measured key
                // keeps its prohibitive regret: no leaf those rows reach may pick it.
                let regret = t.corpus.cells[i].regret[c];
                let cost = if regret >= REGRET_CAP { REGRET_CAP } else { regret.min(REGRET_CLIP) };
                *v += cost / s.cells.len() as f64;
            }
        }
        out.points.push((s.n, s.k));
        out.regret.push(r);
        out.weights.push(MEASURED_WEIGHT);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_spans_the_projections_four_points_an_octave() {
        let g = grid();
        assert_eq!(g.first(), Some(&(256, 256)));
        assert_eq!(g.last(), Some(&(262_144, 32_768)));
        // Rounding K to 256 merges five small-K points: 41 N x 24 K.
        assert_eq!(g.len(), 41 * 24);
        assert!(g.iter().all(|&(n, k)| n % 16 == 0 && k % 256 == 0));
    }
}
