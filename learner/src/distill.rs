//! The cost models of a CUDA decode domain and the tree distilled from them: fit one
//! quantized [`CostModel`] per candidate on the training rows ([`Models`]; the domain carries
//! them and answers with their argmin), label a dense grid of round shapes of the domain with
//! every candidate's predicted regret, add the measured training rows with their measured
//! regrets, and grow the integer tree on summed regret (`regret_tree.rs`). The tree answers
//! where the models do not (beyond their element limit, or no modelled candidate legal).

use vnni_kernels::Mode;
use vnni_policy::cost::Corrector;
use vnni_policy::{correction, CandidateDesc, Correction, CostModel, Residual};

use crate::cost_model::{self, KernelResources, Observation};
use crate::domains::{domain_of, DomainKey, Sample};
use crate::regret::REGRET_CAP;
use crate::tree::Trainer;

/// Regrets above this count as this much: one hopeless candidate must not outweigh many
/// close calls in a leaf's sum.
pub const REGRET_CLIP: f64 = 1.0;

/// The weight of a measured training key against a grid point's 1.
pub const MEASURED_WEIGHT: f64 = 4.0;

/// The dense grid: N on 16 round values an octave (`(16 + i) * 2^(e - 4)`, multiples of 16,
/// 256 .. 262144) and K on 4 an octave (multiples of 256, 256 .. 32768). Round values
/// because model dimensions are round (5120, 14336, 3584): a waves rule's partition count,
/// hence its occupancy cliff, is decided at exactly those N, and a log grid rounded to 16
/// walked past them (leave-one-family-out decode regret p95 17.7% with it, 9.4% with this).
pub fn grid() -> Vec<(u64, u64)> {
    let round = |lo: u32, hi: u32, per: u64, multiple: u64| -> Vec<u64> {
        let mut v: Vec<u64> = (lo..hi)
            .flat_map(|e| (0..per).map(move |i| (((per + i) << e) / per).max(multiple) / multiple * multiple))
            .collect();
        v.push(1 << hi);
        v
    };
    let ns = round(8, 18, 16, 16);
    let ks = round(8, 15, 4, 256);
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

/// The cost models of one domain's training keys: quantized [`CostModel`]s (one per size
/// regime) of every generic candidate with enough measured rows, in candidate-id order (the policy's order, so ties
/// break alike), each with its corpus candidate index and descriptor.
#[derive(Debug, Clone)]
pub struct Models {
    models: Vec<(usize, CandidateDesc, CostModel)>,
    units: u64,
    /// The policy's correction rule (`vnni_policy::correction`), if it carries one; then
    /// every model holds its residuals at `anchors`, the training keys (sorted).
    rule: Option<Correction>,
    anchors: Vec<[u64; 2]>,
    anchor_logs: Vec<(i64, i64)>,
}

impl Models {
    /// Fit on the measured alias cells of `samples`; `None` where the cost model does not
    /// apply (no preflight resources in the corpus, no samples, no candidate with enough rows).
    pub fn fit(t: &Trainer, samples: &[&Sample]) -> Option<Models> {
        let codebook = t.corpus.cells[*samples.first()?.cells.first()?].codebook;
        let resources = resources(t, codebook);
        let units = t.skeleton.units;
        let focus = t.skeleton.provenance.focus;
        // Graph domains only: in eager ones the term raised leave-one-family-out regret on
        // every committed corpus (docs/PERF.md). Candidates that write no partials have no
        // reduce (a zero column no subset can use), so their fits leave it out.
        let reduce =
            t.skeleton.provenance.reduce_term && t.corpus.cells[*samples[0].cells.first()?].mode == Mode::Graph;
        let mut models = Vec::new();
        for (c, cand) in t.corpus.candidates(t.surface).iter().enumerate() {
            let Some(r) = resources[c] else { continue };
            if !t.generic(c) {
                continue;
            }
            let desc = vnni_policy::descriptor(cand);
            let mut rows = Vec::new();
            for s in samples {
                for &i in &s.cells {
                    let cell = &t.corpus.cells[i];
                    if cell.regret[c] >= REGRET_CAP {
                        continue;
                    }
                    if let Some(launch) = desc.model_launch(s.n, s.k, units) {
                        let weight = focus.map_or(1.0, |f| f.weight(cell.regret[c]));
                        let us = cell.best_us * (1.0 + cell.regret[c]);
                        rows.push(Observation { launch, n: s.n, k: s.k, us, weight });
                    }
                }
            }
            for m in cost_model::fit_regimes(&desc.id, &rows, units, r, reduce && desc.writes_partials()) {
                models.push((c, desc.clone(), m));
            }
        }
        // By id, a candidate's regimes in the order fitted (ascending).
        models.sort_by(|a, b| a.1.id.cmp(&b.1.id));
        if models.is_empty() {
            return None;
        }
        let rule = t.skeleton.correction.clone();
        let mut anchors: Vec<[u64; 2]> = Vec::new();
        if rule.is_some() {
            anchors = samples.iter().map(|s| [s.n, s.k]).collect();
            anchors.sort();
            anchors.dedup();
            if anchors.len() <= correction::MAX_ANCHORS {
                for (c, desc, m) in &mut models {
                    m.residuals = residuals(t, samples, &anchors, *c, desc, m, units);
                }
            } else {
                // More development shapes than a table may carry: this domain goes uncorrected.
                anchors.clear();
            }
        }
        let anchor_logs = correction::anchor_logs(&anchors);
        Some(Models { models, units, rule, anchors, anchor_logs })
    }

    /// The quantized models as the policy stores them (sorted by candidate id).
    pub fn to_policy(&self) -> Vec<CostModel> {
        self.models.iter().map(|(_, _, m)| m.clone()).collect()
    }

    /// The anchors the models' residuals refer to (the domain's `anchors`).
    pub fn anchors(&self) -> &[[u64; 2]] {
        &self.anchors
    }

    fn corrector(&self, n: u64, k: u64) -> Option<Corrector<'_>> {
        Corrector::new(self.rule.as_ref(), &self.anchor_logs, n, k)
    }

    /// Every candidate's predicted latency at (n, k), in 2^-16 us, corrected where the policy
    /// carries a correction (infinite where unmodelled, illegal or beyond the model's limit;
    /// the integer evaluation the tables run).
    pub fn predict(&self, t: &Trainer, n: u64, k: u64) -> Vec<f64> {
        let mut pred = vec![f64::INFINITY; t.corpus.candidates(t.surface).len()];
        let corrector = self.corrector(n, k);
        for (c, desc, m) in &self.models {
            if let Some(p) = vnni_policy::cost::corrected(m, Some(desc), n, k, self.units, corrector.as_ref()) {
                pred[*c] = p as f64;
            }
        }
        pred
    }

    /// How far the shipped (quantized) predictions are from the measured medians on `samples`:
    /// |predicted / measured - 1| of every modelled candidate in every alias cell (in-sample
    /// when `samples` are the rows the models were fitted on).
    pub fn relative_errors(&self, t: &Trainer, samples: &[Sample]) -> Vec<f64> {
        let mut out = Vec::new();
        for s in samples {
            for (c, desc, m) in &self.models {
                let Some(p) = m.predict(desc, s.n, s.k, self.units) else { continue };
                for &i in &s.cells {
                    let cell = &t.corpus.cells[i];
                    if cell.regret[*c] < REGRET_CAP {
                        out.push(
                            (p as f64 / vnni_policy::cost::UNITS_PER_US / (cell.best_us * (1.0 + cell.regret[*c]))
                                - 1.0)
                                .abs(),
                        );
                    }
                }
            }
        }
        out
    }

    /// The number of models (a candidate has one per size regime it was fitted for).
    pub fn len(&self) -> usize {
        self.models.len()
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// The candidate of least positive predicted latency, the first in id order on ties
    /// (`vnni_policy::cost::argmin`, as the policy breaks them); `None` where no model answers.
    pub fn argmin(&self, n: u64, k: u64) -> Option<usize> {
        let pairs = self.models.iter().map(|(_, desc, m)| (m, Some(desc)));
        let corrector = self.corrector(n, k);
        vnni_policy::cost::argmin(pairs, n, k, self.units, corrector.as_ref()).map(|(i, _)| self.models[i].0)
    }
}

/// Model `m`'s (of corpus candidate `c`) log residuals ln(measured / predicted) at each
/// anchor where it answers and the candidate was measured (the mean over the key's alias
/// cells), in 2^-16, clamped to the policy's bound.
fn residuals(
    t: &Trainer,
    samples: &[&Sample],
    anchors: &[[u64; 2]],
    c: usize,
    desc: &CandidateDesc,
    m: &CostModel,
    units: u64,
) -> Vec<Residual> {
    let mut out = Vec::new();
    for s in samples {
        let Some(p) = m.predict(desc, s.n, s.k, units).filter(|&p| p > 0) else { continue };
        let predicted_us = p as f64 / vnni_policy::cost::UNITS_PER_US;
        let logs: Vec<f64> = s
            .cells
            .iter()
            .map(|&i| &t.corpus.cells[i])
            .filter(|cell| cell.regret[c] < REGRET_CAP)
            .map(|cell| (cell.best_us * (1.0 + cell.regret[c]) / predicted_us).ln())
            .collect();
        if logs.is_empty() {
            continue;
        }
        let mean = logs.iter().sum::<f64>() / logs.len() as f64;
        let bound = f64::from(correction::MAX_RESIDUAL);
        let value = (mean * correction::ONE as f64).round().clamp(-bound, bound) as i32;
        let anchor = anchors.binary_search(&[s.n, s.k]).expect("every sample is an anchor") as u32;
        out.push(Residual { anchor, value });
    }
    // One sample per key in a decode domain (M = 1), hence one residual per anchor.
    out.sort();
    debug_assert!(out.windows(2).all(|w| w[0].anchor < w[1].anchor), "two samples share an anchor");
    out
}

/// Label the grid and the training keys of one decode domain with `models`, fitted on those
/// keys alone (a model pooled over both aspect buckets fitted each worse in cross-validation:
/// the form is too rigid to span both); `None` where the cost model does not apply.
pub fn labelled(t: &Trainer, samples: &[&Sample], models: &Models) -> Option<Labelled> {
    let first = samples.first()?;
    let cell = &t.corpus.cells[*first.cells.first()?];
    let (codebook, mode) = (cell.codebook, cell.mode);
    let key: DomainKey = domain_of(t.skeleton, codebook.name(), mode.name(), 1, first.n, first.k)?;
    let cands = t.corpus.candidates(t.surface);

    let mut out = Labelled { points: Vec::new(), regret: Vec::new(), weights: Vec::new() };
    for (n, k) in grid() {
        if domain_of(t.skeleton, codebook.name(), mode.name(), 1, n, k).as_ref() != Some(&key) {
            continue;
        }
        let pred = models.predict(t, n, k);
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
                // inside the noise band of the best: a tie, no cost
                let regret = t.corpus.cells[i].scored(c);
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
    fn the_grid_spans_the_projections_on_round_values() {
        let g = grid();
        assert_eq!(g.first(), Some(&(256, 256)));
        assert_eq!(g.last(), Some(&(262_144, 32_768)));
        // 10 octaves x 16 + 1 N; K: 7 octaves x 4 + 1 less the values rounding to 256 merges
        // (three in the first octave, two in the second).
        assert_eq!(g.len(), 161 * 24);
        assert!(g.iter().all(|&(n, k)| n % 16 == 0 && k % 256 == 0));
        // Model dimensions are on it.
        for (n, k) in [(5120, 5120), (14_336, 4096), (3584, 3584), (2048, 14_336)] {
            assert!(g.contains(&(n, k)), "{n} x {k}");
        }
    }
}
