//! The fit report: `report.md` (gates, per-domain held-out regret of the policy and the three
//! baselines on the same rows, the sealed certification, legends) and decision maps (PNG and SVG).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use vnni_corpus::write_bytes;

use crate::cv::METHODS;
use crate::error::Result;
use crate::map::write_maps;
use crate::regret_stats::{geomean, p95};
use crate::{DomainFit, Fit};

/// What the baselines of `cv::METHODS` are (the fit and corpus reports print it).
pub(crate) const BASELINES_LEGEND: &str = "Baselines: *best single* = the generic candidate of lowest p95 regret on the training folds; \
     *log2 lookup* = the best generic candidate per (round(log2 N), round(log2 K)) bucket of the training folds, nearest bucket when unseen; \
     *nearest shape* = the best generic candidate of the nearest training geometry in (log2 N, log2 K); \
     *auto* = the hand heuristic `vnni_learner::baselines::auto` (wide tiles when N fills every unit twice, else the waves formula; grouped by rows per block).";

/// Every held-out prediction of leave-one-family-out, beside `report.md`
/// ([`vnni_corpus::schema::FamilyCvRow`]; `scripts/perf/family_cv.py` replays selection rules on it).
pub const FAMILY_CV_FILE: &str = "family-cv.csv.zst";

/// A regret or fraction as a percentage with two decimals.
pub(crate) fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// Write the report into `dir`; returns the files written.
pub fn write_report(fit: &Fit, dir: &Path) -> Result<Vec<PathBuf>> {
    let p = &fit.policy;
    let g = &p.gates;
    let mut md = String::new();
    let _ = writeln!(md, "# Fit report\n");
    let _ = writeln!(
        md,
        "Corpus `{}` ({} backend, arch {}, {} units, profile {}).\n",
        p.provenance.corpus_id, p.provenance.backend, p.provenance.arch, p.units, p.provenance.profile
    );
    let _ = writeln!(md, "## Gates\n");
    let _ = writeln!(
        md,
        "A domain passes when its held-out nearest-rank p95 regret < {} and the p95 of its per-cell regret upper confidence bounds < {}. \
         Domains passing: **{} of {}** with data (needed: {}): **{}**.\n",
        pct(g.p95_max),
        pct(g.ucb_max),
        g.domains_passing,
        g.domains_with_data,
        pct(g.min_pass_fraction),
        if g.passed { "passed" } else { "FAILED" }
    );
    match &g.sealed {
        Some(s) => {
            let _ = writeln!(
                md,
                "Sealed certification (once, overlays off): {} rows, p95 regret {}, geomean {}: **{}** \
                 (each surface gated on its own).\n",
                s.rows,
                pct(s.p95_regret),
                pct(s.geomean_regret),
                if s.passed { "passed" } else { "FAILED" }
            );
            if !s.surfaces.is_empty() {
                let tied = s.named_scores().any(|(_, v)| v.as_measured.is_some());
                let _ = writeln!(
                    md,
                    "| sealed rows | rows | p95 | geomean | max |{}\n|---|---|---|---|---|{}",
                    if tied { " as measured (p95 / geomean / max) |" } else { "" },
                    if tied { "---|" } else { "" }
                );
                for (name, v) in s.named_scores() {
                    let measured = match (tied, v.as_measured) {
                        (false, _) => String::new(),
                        (true, None) => " same |".into(),
                        (true, Some(m)) => {
                            format!(" {} / {} / {} |", pct(m.p95_regret), pct(m.geomean_regret), pct(m.max_regret))
                        }
                    };
                    let _ = writeln!(
                        md,
                        "| {name} | {} | {} | {} | {} |{measured}",
                        v.rows,
                        pct(v.p95_regret),
                        pct(v.geomean_regret),
                        pct(v.max_regret)
                    );
                }
                let _ = writeln!(md);
            }
        }
        None => {
            let _ = writeln!(
                md,
                "Sealed certification: not run (the corpus has no sealed rows, or the fit was development only).\n"
            );
        }
    }
    let _ = writeln!(md, "## Held-out regret per domain\n");
    let _ = writeln!(
        md,
        "Rows are alias cells of geometries held out by grouped cross-validation; every method is scored on the same rows. \
         Each entry is p95 / UCB p95 / geomean.\n"
    );
    let mut header = String::from("| domain | chosen (features, depth, min leaf) | rows |");
    for m in METHODS {
        let _ = write!(header, " {m} |");
    }
    let _ = writeln!(md, "{header}\n|{}", "---|".repeat(3 + METHODS.len()));
    for d in &fit.domains {
        let (Some(h), Some(s)) = (&d.heldout, d.summaries()) else { continue };
        let mut line =
            format!("| {} | {:?}, {}, {} | {} |", d.key, h.hyper.set, h.hyper.depth, h.hyper.min_leaf, s[0].rows);
        for m in s {
            let _ = write!(line, " {} / {} / {} |", pct(m.p95_regret), pct(m.ucb_p95_regret), pct(m.geomean_regret));
        }
        let _ = writeln!(md, "{line}");
    }
    let borrowed: Vec<String> = fit
        .domains
        .iter()
        .filter(|d| d.heldout.is_none() && !d.frozen)
        .map(|d| match &d.borrowed_from {
            Some(from) => format!("- {} borrows the tree of {from}", d.key),
            None => format!("- {} has a single best-generic leaf (no neighbour with data)", d.key),
        })
        .collect();
    if !borrowed.is_empty() {
        let _ = writeln!(md, "\nDomains without data:\n\n{}", borrowed.join("\n"));
    }
    if let Some(f) = &fit.policy.provenance.frozen_m1 {
        let count = fit.domains.iter().filter(|d| d.frozen).count();
        let _ = writeln!(
            md,
            "\nThe {count} M = 1 domains are frozen: copied from the staged refresh's M = 1 policy (M = 1 digest {}, \
             fitted on corpus {}), whose picks the batched rows were timed at; their held-out regret is in that fit's report.",
            vnni_policy::short(&f.m1_digest),
            f.m1_corpus_id
        );
    }
    let _ = writeln!(md, "\n{BASELINES_LEGEND}\n");
    md.push_str(&crate::remeasure::section(&fit.domains));
    md.push_str(&crate::noise::bands_section(fit.passes, &fit.bands));
    let modelled: Vec<&DomainFit> = fit.domains.iter().filter(|d| d.model_errors.is_some()).collect();
    if !modelled.is_empty() {
        let _ = writeln!(
            md,
            "## Cost models (decode)\n\nPer decode domain, the latency models (what the tables evaluate, \
             quantized; a candidate has one per size regime) and how far their predictions are from the \
             measured medians on the domain's development cells, in sample: |predicted / measured - 1| over \
             every modelled candidate and cell.\n\n\
             | domain | models | predictions | median error | p95 error | max error |\n|---|---|---|---|---|---|"
        );
        for d in modelled {
            let (count, errors) = d.model_errors.as_ref().expect("filtered");
            let median = crate::regret_stats::nearest_rank(errors, 0.5).unwrap_or(0.0);
            let max = errors.iter().copied().fold(0.0, f64::max);
            let _ = writeln!(
                md,
                "| {} | {count} | {} | {} | {} | {} |",
                d.key,
                errors.len(),
                pct(median),
                pct(p95(errors)),
                pct(max)
            );
        }
        let _ = writeln!(md);
    }
    let mut by_family: std::collections::BTreeMap<&str, crate::family_cv::FamilyRegrets> =
        std::collections::BTreeMap::new();
    for d in &fit.domains {
        for (family, r) in &d.family_heldout {
            by_family.entry(family).or_default().extend(r);
        }
    }
    if !by_family.is_empty() {
        let tied = !fit.bands.is_empty();
        let _ = writeln!(
            md,
            "## Leave one family out (decode)\n\nEach model family's development cells, scored by what the \
             policy ships when fitted without that family's shapes ({}; every codebook and aspect pooled; \
             grid points stay in training): the argmin of the quantized cost models, the tree where they do \
             not answer (`-` where no cost model applies, and its own row count where that differs); beside \
             it the fallback trees alone (distilled from the models) and the baselines \
             trained on the same rows. Each entry is p95 / geomean / max{}.\n\n| family | rows | trees alone | cost models (shipped) |{} {} |\n|---|---|---|---|{}",
            if fit.nested_family_cv {
                "nested: hyperparameters chosen again by grouped folds over the other rows"
            } else {
                "the domain's chosen hyperparameters"
            },
            if tied {
                "; a pick inside its cell's noise band scores 0, and the shipped picks are also given as measured"
            } else {
                ""
            },
            if tied { " shipped, as measured |" } else { "" },
            METHODS[1..].join(" | "),
            "---|".repeat(METHODS.len() - 1 + usize::from(tied))
        );
        let mut all = crate::family_cv::FamilyRegrets::default();
        for r in by_family.values() {
            all.extend(r);
        }
        let three = |r: &[f64]| {
            if r.is_empty() {
                return "-".to_string();
            }
            let max = r.iter().copied().fold(0.0, f64::max);
            format!("{} / {} / {}", pct(p95(r)), pct(geomean(r)), pct(max))
        };
        for (family, r) in by_family.iter().map(|(f, r)| (*f, r)).chain([("**all families**", &all)]) {
            let baselines: Vec<String> = r.baselines.iter().map(|b| three(b)).collect();
            let _ = writeln!(
                md,
                "| {family} | {} | {} | {} |{} {} |",
                r.tree.len(),
                three(&r.tree),
                if r.model.is_empty() || r.model.len() == r.tree.len() {
                    three(&r.model)
                } else {
                    format!("{} ({} rows)", three(&r.model), r.model.len())
                },
                if tied { format!(" {} |", three(&r.model_measured)) } else { String::new() },
                baselines.join(" | ")
            );
        }
        let _ = writeln!(md);
    }
    let codebooks = &p.codebooks[..p.codebooks.len().min(2)];
    let mut files = write_maps(p, codebooks, &fit.geometries, dir, &mut md)?;
    let path = dir.join("report.md");
    write_bytes(&path, md.as_bytes())?;
    let pairs = dir.join("remeasure.csv");
    vnni_corpus::write::write_csv(&pairs, &crate::remeasure::all(&fit.domains))?;
    files.insert(0, pairs);
    let held_out: Vec<&vnni_corpus::schema::FamilyCvRow> =
        fit.domains.iter().flat_map(|d| d.family_heldout.values().flat_map(|r| &r.rows)).collect();
    if !held_out.is_empty() {
        let path = dir.join(FAMILY_CV_FILE);
        vnni_corpus::write::write_csv(&path, &held_out)?;
        files.insert(0, path);
    }
    files.insert(0, path);
    Ok(files)
}
