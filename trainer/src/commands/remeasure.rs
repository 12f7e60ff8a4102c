//! `vnni-dispatch remeasure --corpus C --out DIR`: the measuring half of the pair loop (issue
//! 16, item 4). A development fit of the sealed corpus (its sealed rows not looked at, the
//! ledger not written) lists the held-out cells of failing domains whose pick is not the
//! measured fastest (`DIR/remeasure.csv`); each pair is timed again on this machine, which
//! must be the corpus's, under the corpus's protocol (`DIR/pairs.samples.csv`, the file `fit
//! --pairs` applies; `DIR/pairs.decode.csv` their rows). `refresh` runs it between its M = 1
//! collection and the frozen M = 1 fit.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use vnni_corpus::collection::{CollectionPlan, PLAN_FILE};
use vnni_learner::FitOptions;
use vnni_measure::protocol::Protocol;

use super::fit::{fraction, resolve_ledger, DEFAULT_LEDGER};
use crate::argv::{Argv, ToArgv};

/// The pair samples a fit applies: in a remeasure directory, and beside a table set fitted
/// with them (`m1-` before the name for the M = 1 stage a staged policy froze).
pub const PAIR_SAMPLES: &str = "pairs.samples.csv";
/// The pairs a development fit listed.
pub const PAIR_REQUESTS: &str = "remeasure.csv";

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// A sealed corpus of M = 1 rows (one stage, or the M = 1 stage of a staged refresh).
    #[arg(long)]
    pub corpus: PathBuf,
    /// Where remeasure.csv, pairs.samples.csv and pairs.decode.csv go.
    #[arg(long)]
    pub out: PathBuf,
    /// The development fit's gates (as `fit`'s): the failing domains' cells are listed.
    #[arg(long, default_value_t = 0.05, value_parser = fraction)]
    pub p95_max: f64,
    #[arg(long, default_value_t = 0.05, value_parser = fraction)]
    pub ucb_max: f64,
    /// The sealed ledger: a corpus whose sealed certification failed is not worth timing.
    #[arg(long, default_value = DEFAULT_LEDGER)]
    pub ledger: PathBuf,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Cubin cache directory.
    #[arg(long)]
    pub cache: Option<PathBuf>,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("remeasure")
            .path("corpus", &self.corpus)
            .path("out", &self.out)
            .val("p95-max", self.p95_max)
            .val("ucb-max", self.ucb_max)
            .path("ledger", &self.ledger)
            .val("device", self.device)
            .opt_path("cache", self.cache.as_deref())
            .done()
    }
}

/// What a remeasure did: the pairs listed, and the samples file when any were timed.
pub struct Remeasured {
    pub pairs: usize,
    pub samples: Option<PathBuf>,
}

pub fn run(a: &Args) -> Result<()> {
    let r = remeasure(a)?;
    match &r.samples {
        Some(s) => println!("{} pairs timed again: {} (give it to `fit --pairs`)", r.pairs, s.display()),
        None => println!("no failing domain lists a pair: nothing to time"),
    }
    Ok(())
}

/// List and time the pairs; a previous run's samples in `out` are replaced (or removed when
/// nothing is listed now), so `out` never holds evidence of another fit.
pub fn remeasure(a: &Args) -> Result<Remeasured> {
    let plan_path = a.corpus.join(PLAN_FILE);
    let plan = CollectionPlan::read(&plan_path)?;
    if plan.frozen_m1.is_some() {
        bail!(
            "{}: the batched stage of a staged refresh (its M = 1 part is frozen): remeasure its M = 1 stage",
            a.corpus.display()
        );
    }
    if !a.corpus.join(vnni_corpus::seal::MANIFEST).is_file() {
        bail!("{} is not sealed: seal the collection first", a.corpus.display());
    }
    let opts = FitOptions {
        p95_max: a.p95_max,
        ucb_max: a.ucb_max,
        ledger: Some(resolve_ledger(&a.ledger, &a.out.join("policy.json"))),
        certify_sealed: false,
        family_cv: false,
        ..FitOptions::default()
    };
    let f = vnni_learner::fit(&a.corpus, &opts)
        .with_context(|| format!("the development fit of {}", a.corpus.display()))?;
    let requests = vnni_learner::remeasure::all(&f.domains);
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let listed = a.out.join(PAIR_REQUESTS);
    vnni_corpus::write_csv(&listed, &requests)?;
    let samples = a.out.join(PAIR_SAMPLES);
    remove_stale(&samples)?;
    if requests.is_empty() {
        return Ok(Remeasured { pairs: 0, samples: None });
    }
    let runner = vnni_measure::pairs::open_for(&plan, a.device, a.cache.as_deref()).with_context(|| {
        format!("opening the {} backend {} was collected on", plan.backend.name(), a.corpus.display())
    })?;
    let protocol = Protocol::of_plan(&plan);
    let timed = vnni_measure::pairs::time_pairs(&runner, &requests, &protocol, &listed)?;
    vnni_corpus::write_csv(&a.out.join("pairs.decode.csv"), &timed.rows)?;
    vnni_corpus::write_csv(&samples, &timed.samples)?;
    Ok(Remeasured { pairs: requests.len(), samples: Some(samples) })
}

fn remove_stale(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing the stale {}", path.display()))
        }
        _ => Ok(()),
    }
}
