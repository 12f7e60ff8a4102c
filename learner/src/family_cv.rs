//! Leave-one-family-out evaluation of the decode trees: for each model family with
//! development shapes in a domain, fit with the domain's chosen hyperparameters on every other
//! key and score that family's alias cells. It asks what issue 16 asks of a policy (how well
//! does it serve a model it never saw?) on the development rows, where grouped folds of
//! geometries mix a family's shapes into both sides. Reported, not gated. The hyperparameters
//! are either the domain's (chosen by grouped folds that saw the family's rows) or, nested,
//! chosen again per left-out family by the same grouped folds over the other rows only (what
//! `fit --report --nested-family-cv` reports: the family never informs its own evaluation).
//! Beside the tree, the same folds score the cost model's own argmin (where it applies: the
//! gap between the two is what distillation into integer trees loses) and the baselines of
//! `cv::METHODS`, trained on the same keys.

use std::collections::{BTreeMap, BTreeSet};

use vnni_corpus::schema::FamilyCvRow;

use crate::corpus::Corpus;
use crate::cv::{baseline_rows, choose, Folds, METHOD_COUNT};
use crate::domains::Sample;
use crate::tree::{Hyper, Trainer};

/// Where a planned shape comes from, by its first name: the name without its last
/// dot-separated part (`qwen2.5-7b.attn_q` -> `qwen2.5-7b`, `mtp.fuse.h2048` -> `mtp.fuse`,
/// `grid.384x24576` -> `grid`).
pub fn source_of(names: &[String]) -> String {
    let name = names.first().map_or("", String::as_str);
    name.rsplit_once('.').map_or(name, |(family, _)| family).to_string()
}

/// Where each planned shape comes from ([`source_of`]: a model family, or `grid`).
pub fn sources(corpus: &Corpus) -> BTreeMap<(u64, u64), String> {
    corpus.plan.inventory.shapes.iter().map(|s| ((s.n as u64, s.k as u64), source_of(&s.names))).collect()
}

/// The family of each planned shape; grid points belong to no family.
pub fn families(corpus: &Corpus) -> BTreeMap<(u64, u64), String> {
    sources(corpus).into_iter().filter(|(_, f)| f != "grid").collect()
}

/// One family's alias cells scored when left out: by the tree, by the cost model's argmin
/// (empty where the cost model does not apply) and by each baseline (`cv::METHODS[1..]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FamilyRegrets {
    pub tree: Vec<f64>,
    pub model: Vec<f64>,
    /// `model` as measured (no noise-band ties).
    pub model_measured: Vec<f64>,
    pub baselines: [Vec<f64>; METHOD_COUNT - 1],
    /// Every candidate with a prediction (or picked) in every cell, for `family-cv.csv.zst`.
    pub rows: Vec<FamilyCvRow>,
}

impl FamilyRegrets {
    /// Pool `other`'s regrets into these (the report's per-family and overall rows). The
    /// per-candidate `rows` are not copied: `family-cv.csv.zst` is written from each domain's own.
    pub fn extend(&mut self, other: &FamilyRegrets) {
        self.tree.extend(&other.tree);
        self.model.extend(&other.model);
        self.model_measured.extend(&other.model_measured);
        for (a, b) in self.baselines.iter_mut().zip(&other.baselines) {
            a.extend(b);
        }
    }
}

/// The hyperparameters of each left-out family's tree.
#[derive(Debug, Clone, Copy)]
pub enum HyperChoice<'a> {
    /// The domain's own (chosen by grouped folds over every development key).
    Domain(Hyper),
    /// Chosen again by these grouped folds over the other families' keys and the grid points.
    Nested(&'a Folds),
}

/// Per family of the domain's samples, the regret of every alias cell of its keys when the
/// tree (and the cost model, and the baselines) is fitted without them.
pub fn leave_one_family_out(
    t: &Trainer,
    samples: &[Sample],
    hyper: HyperChoice,
    families: &BTreeMap<(u64, u64), String>,
) -> Result<BTreeMap<String, FamilyRegrets>, String> {
    let present: BTreeSet<&String> = samples.iter().filter_map(|s| families.get(&s.geometry())).collect();
    let mut out = BTreeMap::new();
    for family in present {
        let (test, train): (Vec<&Sample>, Vec<&Sample>) =
            samples.iter().partition(|s| families.get(&s.geometry()) == Some(family));
        if train.is_empty() {
            continue;
        }
        let hyper = match hyper {
            HyperChoice::Domain(h) => h,
            HyperChoice::Nested(folds) => choose(t, &train, folds)?.0,
        };
        let fitted = t.fit(&train, hyper)?;
        let mut r = FamilyRegrets {
            baselines: baseline_rows(t, &train, &test).map(|rows| rows.into_iter().map(|(regret, _)| regret).collect()),
            ..FamilyRegrets::default()
        };
        for s in test {
            let c = t.walk(&fitted.tree, s.n, s.k);
            r.tree.extend(s.cells.iter().map(|&i| t.corpus.cells[i].scored(c)));
            // What ships: the models' argmin, the tree's pick where they do not answer (so
            // both columns score the same cells).
            let shipped = t.predict(&fitted, s.n, s.k);
            if fitted.models.is_some() {
                r.model.extend(s.cells.iter().map(|&i| t.corpus.cells[i].scored(shipped)));
                r.model_measured.extend(s.cells.iter().map(|&i| t.corpus.cells[i].regret[shipped]));
            }
            let predicted = fitted.models.as_ref().map(|m| m.predict(t, s.n, s.k));
            for &i in &s.cells {
                let cell = &t.corpus.cells[i];
                for (candidate, cand) in t.corpus.candidates(t.surface).iter().enumerate() {
                    let predicted_us = predicted
                        .as_ref()
                        .map(|p| p[candidate])
                        .filter(|p| p.is_finite() && *p > 0.0)
                        .map(|p| p / vnni_policy::cost::UNITS_PER_US);
                    let (is_shipped, is_tree) = (candidate == shipped, candidate == c);
                    if predicted_us.is_none() && !is_shipped && !is_tree {
                        continue;
                    }
                    r.rows.push(FamilyCvRow {
                        family: family.clone(),
                        source_format: cell.format,
                        codebook: cell.codebook,
                        mode: cell.mode,
                        n: s.n as usize,
                        k: s.k as usize,
                        candidate: cand.id.clone(),
                        predicted_us,
                        regret: cell.regret[candidate],
                        scored: cell.scored(candidate),
                        shipped: is_shipped,
                        tree: is_tree,
                    });
                }
            }
        }
        out.insert(family.clone(), r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_keep_dotted_family_names() {
        let s = |n: &str| source_of(&[n.to_string()]);
        assert_eq!(s("qwen2.5-7b.attn_q"), "qwen2.5-7b");
        assert_eq!(s("llama3-8b.lm_head"), "llama3-8b");
        assert_eq!(s("grid.384x24576"), "grid");
        assert_eq!(s("mtp.fuse.h2048"), "mtp.fuse");
        assert_eq!(source_of(&[]), "");
    }
}
