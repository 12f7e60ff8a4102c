//! `vnni-dispatch sweep`: collect a profile's cells on a backend into a work directory
//! (`vnni_measure::collect`). With `--devices`, one worker process per device shares the
//! directory (started with this command's own arguments plus `--worker i`), then this
//! process assembles and seals the corpus. A staged refresh sweeps twice: `--m1-only`, then
//! (after fitting and freezing the M = 1 policy) `--m1-policy P --m1-corpus C`, which times
//! the batched rows at P's M = 1 picks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use vnni_corpus::collection::{CellStore, CollectionPlan, LearnedBuckets, Shard};
use vnni_corpus::inventory::Inventory;
use vnni_corpus::schema::DENSE_ROWS_FILE;
use vnni_corpus::seal::SourceFile;
use vnni_corpus::staged::FrozenM1;
use vnni_kernels::{Backend, BackendChoice};
use vnni_measure::collect::{collect, finish, threads_per_worker, CollectOptions, PruneRequest, Stage};

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct Args {
    /// `cuda`, `cpu`, or `auto` (cuda when a GPU opens, else cpu).
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    /// The inventory profile to collect (family-smoke, core, mtp-head, all).
    #[arg(long, default_value = "family-smoke")]
    pub profile: String,
    #[arg(long, default_value = "corpus/inventory")]
    pub inventory: PathBuf,
    /// The work directory (plan.json, cells/, locks/; the sealed corpus lands in corpus/).
    #[arg(long, default_value = "target/sweep")]
    pub out: PathBuf,
    /// One worker process per device (CUDA ordinals; for cpu, worker indices).
    #[arg(long, value_delimiter = ',')]
    pub devices: Vec<usize>,
    /// Collect only cells i, i + n, ... of the plan (`i/n`); default from SLURM_ARRAY_TASK_ID/COUNT.
    #[arg(long)]
    pub shard: Option<Shard>,
    /// CPU worker threads per process (0: every core, shared among --devices workers).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// CUDA device ordinal (single-process runs).
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Cubin cache directory.
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Staged refresh, first stage: collect M = 1 rows only (fit them, and freeze the policy).
    #[arg(long, conflicts_with = "m1_policy")]
    pub m1_only: bool,
    /// Staged refresh, second stage: time the batched rows (grouped, prefill) at the M = 1
    /// picks of this frozen policy; needs --m1-corpus, the sealed corpus it was fitted on,
    /// whose decode rows are copied.
    #[arg(long, requires = "m1_corpus")]
    pub m1_policy: Option<PathBuf>,
    /// The sealed M = 1 corpus of --m1-policy.
    #[arg(long, requires = "m1_policy")]
    pub m1_corpus: Option<PathBuf>,
    /// Samples replay whole rotations of the weight copies, as before windows (recorded in
    /// the plan): to measure what the windows change, not for tables.
    #[arg(long)]
    pub whole_rotations: bool,
    /// Decode candidates launch with programmatic dependent launch (CUDA, sm_90; recorded in
    /// the plan): tables for callers that launch the decode kernels so.
    #[arg(long)]
    pub programmatic: bool,
    /// `dense-m.csv` files of `bench --dense-m` runs (comma-separated): time the grouped rows
    /// at the M buckets learned from every candidate's rows beside them (where the fastest
    /// candidate changes), instead of at the profile's grouped M; recorded in the plan, and
    /// the policy's grouped buckets start at them.
    #[arg(long, value_delimiter = ',')]
    pub m_buckets_from: Vec<PathBuf>,
    #[command(flatten)]
    pub prune: PruneArgs,
    /// Internal: this process is worker i of --devices.
    #[arg(long, hide = true)]
    pub worker: Option<usize>,
}

/// `--prune-with` and its thresholds: `sweep`'s, and `refresh`'s for its M = 1 stage.
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct PruneArgs {
    /// A fitted CUDA policy of this machine kind whose cost models prune the M = 1 decode
    /// candidates: one predicted above --prune-above x the least prediction in every mode is
    /// not timed (the policy's own pick and sealed cells always are; recorded in the plan, and
    /// the corpus's pruning.csv scores the audit).
    #[arg(long)]
    pub prune_with: Option<PathBuf>,
    /// The ratio over a cell's least prediction above which --prune-with skips a candidate.
    #[arg(long, default_value_t = 1.25, requires = "prune_with")]
    pub prune_above: f64,
    /// The share of cells --prune-with times in full (chosen by a digest of the policy and the
    /// cell), whose rows measure what pruning would have lost.
    #[arg(long, default_value_t = 0.125, requires = "prune_with")]
    pub prune_audit: f64,
}

impl Default for PruneArgs {
    /// No pruning, with clap's default thresholds.
    fn default() -> PruneArgs {
        PruneArgs { prune_with: None, prune_above: 1.25, prune_audit: 0.125 }
    }
}

impl PruneArgs {
    /// The flags, rendered only with --prune-with (the thresholds require it).
    pub fn argv(&self, a: Argv) -> Argv {
        let on = |v: f64| self.prune_with.as_ref().map(|_| v);
        a.opt_path("prune-with", self.prune_with.as_deref())
            .opt("prune-above", on(self.prune_above))
            .opt("prune-audit", on(self.prune_audit))
    }

    pub fn request(&self) -> Option<PruneRequest> {
        let policy = self.prune_with.clone()?;
        Some(PruneRequest { policy, above: self.prune_above, audit: self.prune_audit })
    }
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("sweep")
            .val("backend", self.backend)
            .val("profile", &self.profile)
            .path("inventory", &self.inventory)
            .path("out", &self.out)
            .list("devices", &self.devices)
            .opt("shard", self.shard.map(|s| format!("{}/{}", s.index, s.count)))
            .val("threads", self.threads)
            .val("device", self.device)
            .opt_path("cache", self.cache.as_deref())
            .flag("m1-only", self.m1_only)
            .opt_path("m1-policy", self.m1_policy.as_deref())
            .opt_path("m1-corpus", self.m1_corpus.as_deref())
            .flag("whole-rotations", self.whole_rotations)
            .flag("programmatic", self.programmatic)
            .list("m-buckets-from", &self.m_buckets_from.iter().map(|p| p.display()).collect::<Vec<_>>())
            .then(|a| self.prune.argv(a))
            .opt("worker", self.worker)
            .done()
    }
}

impl Args {
    /// The options of the collecting process (a worker's device is its entry of --devices).
    pub fn options(&self) -> Result<CollectOptions> {
        // Inside a Slurm array the array is the shard; an explicit --shard must agree with it.
        let slurm = Shard::from_slurm(|k| std::env::var(k).ok()).map_err(anyhow::Error::msg)?;
        let shard = match (self.shard, slurm) {
            (Some(s), Some(t)) if s != t => bail!(
                "--shard {}/{} disagrees with this Slurm array task ({}/{} from SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT): drop --shard inside an array job, or submit --array=0-{}",
                s.index,
                s.count,
                t.index,
                t.count,
                s.count - 1
            ),
            (Some(s), _) => Some(s),
            (None, t) => t,
        };
        let device = match self.worker {
            Some(w) => *self.devices.get(w).with_context(|| format!("--worker {w} has no entry in --devices"))?,
            None => self.device,
        };
        Ok(CollectOptions {
            backend: self.backend,
            profile: self.profile.clone(),
            inventory: self.inventory.clone(),
            out: self.out.clone(),
            shard,
            threads: threads_per_worker(self.threads, self.devices.len()),
            device,
            cache: self.cache.clone(),
            worker: self.worker,
            version: crate::commands::version(),
            stage: self.stage()?,
            whole_rotations: self.whole_rotations,
            programmatic: self.programmatic,
            learned_buckets: learned_buckets(&self.m_buckets_from)?,
            prune: self.prune.request(),
        })
    }

    /// The stage this collection is, from --m1-only / --m1-policy.
    fn stage(&self) -> Result<Stage> {
        Ok(match (&self.m1_policy, &self.m1_corpus) {
            (Some(p), Some(c)) => {
                Stage::Batched { frozen: frozen_stage(p, &self.inventory, &self.profile)?, m1_corpus: c.clone() }
            }
            (None, None) if self.m1_only => Stage::M1,
            (None, None) => Stage::Whole,
            _ => bail!(
                "--m1-policy and --m1-corpus go together (the frozen M = 1 policy and the corpus it was fitted on)"
            ),
        })
    }
}

/// `--m-buckets-from`: the grouped bucket starts learned from `bench --dense-m` runs (every
/// candidate's rows, beside each `dense-m.csv` given), with the files they came from; `None`
/// without any.
pub fn learned_buckets(dense_m: &[PathBuf]) -> Result<Option<LearnedBuckets>> {
    if dense_m.is_empty() {
        return Ok(None);
    }
    let mut timing = Vec::new();
    let mut sources = Vec::new();
    // Where each (mode, format, N, K, M, candidate) was read first: one measurement each.
    let mut seen: BTreeMap<(String, String, usize, usize, usize, String), PathBuf> = BTreeMap::new();
    let mut machine: Option<((Backend, String), PathBuf)> = None;
    for path in dense_m {
        if !path.is_file() {
            bail!("{}: not a file (give the dense-m.csv of a bench --dense-m run)", path.display());
        }
        let rows_path = path.with_file_name(DENSE_ROWS_FILE);
        let bytes = std::fs::read(&rows_path).with_context(|| {
            format!(
                "{}: reading {} beside it (bench --dense-m writes every candidate's rows there; the buckets are learned from them)",
                path.display(),
                rows_path.display()
            )
        })?;
        let rows = vnni_corpus::read::read_timing(&rows_path)?;
        for r in &rows {
            let on = (r.backend, r.arch.clone());
            match &machine {
                None => machine = Some((on, rows_path.clone())),
                Some((first, from)) if *first != on => bail!(
                    "{}: rows of {} {} beside rows of {} {} in {}: learn buckets from one machine's measurements",
                    rows_path.display(),
                    on.0.name(),
                    on.1,
                    first.0.name(),
                    first.1,
                    from.display()
                ),
                Some(_) => {}
            }
            let key = (
                r.mode.to_string(),
                r.source_format.map(|f| f.to_string()).unwrap_or_default(),
                r.n,
                r.k,
                r.m,
                r.candidate.to_string(),
            );
            if let Some(first) = seen.get(&key) {
                let (mode, format, n, k, m, candidate) = &key;
                bail!(
                    "{}: {mode} {format} {n}x{k} M = {m} {candidate} is also in {}: one measurement each",
                    rows_path.display(),
                    first.display()
                );
            }
            seen.insert(key, rows_path.clone());
        }
        timing.extend(rows);
        sources.push(SourceFile {
            path: rows_path.display().to_string(),
            sha256: vnni_kernels::digest::sha256_hex(&bytes),
        });
    }
    let names = sources.iter().map(|s| s.path.clone()).collect::<Vec<_>>().join(", ");
    let Some((machine, _)) = machine else { bail!("{names}: no rows to learn buckets from") };
    let starts = vnni_learner::dense_m::grouped_starts(&timing);
    let tolerance = (vnni_learner::dense_m::BEHIND_LIMIT * 100.0).round() as u32;
    LearnedBuckets::new(starts, tolerance, machine, sources).map(Some).map_err(|e| anyhow::anyhow!("{names}: {e}"))
}

/// The frozen M = 1 stage of a policy for a profile: its M = 1 pick (and that pick's bpp) for
/// every planned (format, N, K) in every mode the policy answers, and the digests that bind it.
pub fn frozen_stage(policy_path: &Path, inventory: &Path, profile: &str) -> Result<FrozenM1> {
    let (policy, bytes) = super::load_policy_bytes(policy_path)?;
    policy
        .check_registry()
        .with_context(|| format!("{}: names candidates this registry does not hold", policy_path.display()))?;
    let plan = Inventory::load(inventory)?.resolve(profile)?;
    let picks =
        vnni_learner::frozen::picks(&policy, &plan).map_err(|e| anyhow::anyhow!("{}: {e}", policy_path.display()))?;
    Ok(FrozenM1 {
        m1_corpus_id: policy.provenance.corpus_id.clone(),
        policy_digest: vnni_kernels::digest::sha256_hex(&bytes),
        m1_digest: policy.m1_digest(),
        units: u32::try_from(policy.units).context("the policy's units")?,
        picks,
    })
}

pub fn run(args: &Args) -> Result<()> {
    if !args.devices.is_empty() && args.worker.is_none() {
        return coordinate(args);
    }
    collect(&args.options()?)?;
    Ok(())
}

/// `--devices`: one worker process per device over the same work directory, then finish.
fn coordinate(args: &Args) -> Result<()> {
    let exe = std::env::current_exe().context("locating the vnni-dispatch binary")?;
    let mut children = Vec::new();
    for (w, d) in args.devices.iter().enumerate() {
        let worker =
            Args { worker: Some(w), threads: threads_per_worker(args.threads, args.devices.len()), ..args.clone() };
        let child = std::process::Command::new(&exe)
            .args(worker.to_argv())
            .spawn()
            .with_context(|| format!("starting the worker for device {d}"))?;
        children.push((w, *d, child));
    }
    let mut failed = Vec::new();
    for (w, d, mut child) in children {
        let status = child.wait().with_context(|| format!("waiting for worker {w}"))?;
        if !status.success() {
            failed.push(format!("worker {w} (device {d}): {status}"));
        }
    }
    if !failed.is_empty() {
        bail!("{}; rerun the same command to resume (published cells are kept)", failed.join("; "));
    }
    let store = CellStore::new(&args.out);
    let plan = CollectionPlan::read(&store.plan_path())?;
    finish(&store, &plan)?;
    Ok(())
}
