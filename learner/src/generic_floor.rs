//! The generic floor: on each decode cell, the regret of the best *generic-legal* candidate
//! (one a fallback tree may use) against the best of all. A tree can never do better than this
//! on shapes no overlay covers, so a large floor means the candidate space, not the learner,
//! limits how well a policy generalizes (literal-KB winners without a generic twin).

use std::collections::BTreeMap;

use vnni_kernels::Surface;

use crate::corpus::Corpus;
use crate::regret_stats::{geomean, p95};

/// Per (codebook, mode): the floors of the development decode cells.
pub fn generic_floor(corpus: &Corpus) -> BTreeMap<(String, String), Vec<f64>> {
    let decode = corpus.candidates(Surface::Decode);
    let generic: Vec<usize> = (0..decode.len()).filter(|&i| decode[i].generic_legal()).collect();
    let mut out: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for cell in corpus.cells.iter().filter(|c| c.m == 1 && !c.sealed) {
        let floor = generic.iter().map(|&i| cell.regret[i]).fold(f64::INFINITY, f64::min);
        if floor.is_finite() {
            out.entry((cell.codebook.name().to_string(), cell.mode.name().to_string())).or_default().push(floor);
        }
    }
    out
}

/// The Markdown section: per (codebook, mode) and overall, cells / geomean / p95 / max.
pub fn section(corpus: &Corpus) -> String {
    let floors = generic_floor(corpus);
    let mut md = String::from(
        "## Generic floor (decode)\n\nRegret of the best generic-legal candidate against the best of all on each \
         development decode cell: what a fallback tree cannot beat. A large floor means winners without a \
         generic twin (literal KB).\n\n| codebook | mode | cells | geomean | p95 | max |\n|---|---|---|---|---|---|\n",
    );
    let row = |md: &mut String, cb: &str, mode: &str, v: &[f64]| {
        let max = v.iter().copied().fold(0.0, f64::max);
        md.push_str(&format!(
            "| {cb} | {mode} | {} | {:.2}% | {:.2}% | {:.2}% |\n",
            v.len(),
            geomean(v) * 100.0,
            p95(v) * 100.0,
            max * 100.0
        ));
    };
    for ((cb, mode), v) in &floors {
        row(&mut md, cb, mode, v);
    }
    let all: Vec<f64> = floors.values().flatten().copied().collect();
    if !all.is_empty() {
        row(&mut md, "all", "all", &all);
    }
    md.push('\n');
    md
}
