//! `vnni-dispatch report --corpus DIR [--policy policy.json] --out DIR`: the corpus report
//! (Markdown, PNG and SVG charts): decode bandwidth vs the measured copy roofline, regret CDFs of the
//! policy and the baselines per domain group, decision maps. `report --dense-m CSV,.. --out
//! DIR`: the dense-M report of `bench --dense-m` runs (cliffs, time per row against M). With
//! `--evidence` (profiler evidence of the corpus, `profile`), `evidence.md` beside the report:
//! every record authenticated, one line each.

use std::path::PathBuf;

use anyhow::Result;
use vnni_learner::corpus_report::write_corpus_report;
use vnni_policy::Policy;

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// A sealed corpus directory (authenticated before anything is read).
    #[arg(long, required_unless_present = "dense_m", conflicts_with = "dense_m")]
    pub corpus: Option<PathBuf>,
    /// `dense-m.csv` files of `bench --dense-m` runs (comma-separated): their cliffs and charts,
    /// and with the `dense-rows.csv.zst` beside each, the M buckets learned from them (beside
    /// the sweep's default M values and --policy's buckets).
    #[arg(long, value_delimiter = ',')]
    pub dense_m: Vec<PathBuf>,
    /// A fitted policy: its in-sample regret is plotted and its decision maps drawn
    /// (without it, the maps are of the policy the learner fits from this corpus).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Profiler evidence of --corpus (`profile`): authenticated and written as evidence.md.
    #[arg(long, requires = "corpus")]
    pub evidence: Option<PathBuf>,
    /// Where report.md and the charts (PNG and SVG) go (created if missing).
    #[arg(long)]
    pub out: PathBuf,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("report")
            .opt_path("corpus", self.corpus.as_deref())
            .list("dense-m", &self.dense_m.iter().map(|p| p.display()).collect::<Vec<_>>())
            .opt_path("policy", self.policy.as_deref())
            .opt_path("evidence", self.evidence.as_deref())
            .path("out", &self.out)
            .done()
    }
}

pub fn run(a: &Args) -> Result<()> {
    // Its codebook and mode words name the report's files: only a checked policy passes.
    let policy = a.policy.as_deref().map(super::load_policy).transpose()?;
    let Some(corpus) = &a.corpus else { return dense_m(a, policy.as_ref()) };
    let files = write_corpus_report(corpus, policy.as_ref(), &a.out)?;
    let count = |ext: &str| files.iter().filter(|f| f.extension().is_some_and(|e| e == ext)).count();
    println!("report {} ({} charts, PNG and SVG each)", a.out.join("report.md").display(), count("png"));
    debug_assert_eq!(count("png"), count("svg"));
    if let Some(dir) = &a.evidence {
        let id = super::profile::corpus_id(corpus)?;
        let timing = vnni_corpus::collection::read_corpus_rows(corpus)?;
        let (requests, rows) = super::profile::authenticate(dir, &id, &timing)?;
        let text = format!(
            "# Profiler evidence\n\n{} requests, {} records from {} (Nsight Compute, one extra launch each, never timed); every registry claim holds (no local-memory instruction, IMMA instructions exactly in the tensor-core candidates).\n\n{}",
            requests.len(),
            super::profile::record_count(&rows),
            dir.display(),
            super::profile::summary(&rows)
        );
        let path = a.out.join("evidence.md");
        vnni_corpus::write_bytes(&path, text.as_bytes())?;
        println!("evidence {}", path.display());
    }
    Ok(())
}

/// `--dense-m`: every file's rows read (and checked) together, then one report.
fn dense_m(a: &Args, policy: Option<&Policy>) -> Result<()> {
    let mut rows = Vec::new();
    let mut seen = std::collections::BTreeMap::new();
    for path in &a.dense_m {
        for r in vnni_corpus::read::read_dense_m(path)? {
            let key = (r.mode.to_string(), r.source_format.to_string(), r.n, r.k, r.m);
            if let Some(first) = seen.insert(key, path.clone()) {
                anyhow::bail!(
                    "{}: {} {} {}x{} M = {} is also in {}: one measurement per M",
                    path.display(),
                    r.mode,
                    r.source_format,
                    r.n,
                    r.k,
                    r.m,
                    first.display()
                );
            }
            rows.push(r);
        }
    }
    // Every candidate's rows, where the bench left them beside its dense-m.csv.
    let mut timing = Vec::new();
    for path in &a.dense_m {
        let beside = path.with_file_name(vnni_corpus::schema::DENSE_ROWS_FILE);
        if beside.is_file() {
            timing.extend(vnni_corpus::read::read_timing(&beside)?);
        }
    }
    let maps = vnni_learner::dense_m::bucket_maps(policy);
    let files = vnni_learner::dense_m::write_report(&rows, &timing, &maps, &a.dense_m, &a.out)?;
    let cliffs = vnni_learner::dense_m::cliffs(&rows).len();
    println!(
        "report {} ({} rows, {cliffs} cliffs, {} charts)",
        a.out.join("dense-m.md").display(),
        rows.len(),
        files.iter().filter(|f| f.extension().is_some_and(|e| e == "png")).count()
    );
    Ok(())
}
