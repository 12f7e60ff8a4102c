//! The collection driver: bind a work directory (`plan.json`, `cells/`, `locks/`) to one
//! collection plan, then claim, measure and publish every cell of it (or of one shard), and
//! when every planned cell is published, assemble `<out>/corpus`, seal and verify it. A
//! killed collection resumes where it stopped; several workers (one per device) or hosts
//! (shards) share the plan through lock files.

use std::path::{Path, PathBuf};

use crate::error::{invalid, Context, MeasureError, Result};
use vnni_corpus::collection::{
    assemble, inventory_sources, CellProvenance, CellStore, Claim, CollectionPlan, LearnedBuckets, Shard,
    COLLECTION_SCHEMA,
};
use vnni_corpus::inventory::Inventory;
use vnni_corpus::provenance::git_state;
use vnni_corpus::seal::{seal, verify, Expected, MANIFEST};
use vnni_corpus::staged::{FrozenM1, InheritedPick, M1Rows};
use vnni_kernels::cuda::source::kernel_source_digest;
use vnni_kernels::registry::registry_digest_for;
use vnni_kernels::{BackendChoice, Mode, Surface};

use crate::protocol::{Protocol, TimingOptions};
use crate::prune::{score_cell, summary, Pruner};
use crate::runner::CellRunner;
use vnni_corpus::collection::Pruning;
use vnni_corpus::schema::PRUNING_FILE;

/// What one collecting process does.
#[derive(Debug, Clone)]
pub struct CollectOptions {
    pub backend: BackendChoice,
    pub profile: String,
    pub inventory: PathBuf,
    /// The work directory (plan.json, cells/, locks/; the sealed corpus lands in corpus/).
    pub out: PathBuf,
    /// This process's share of the plan (`None`: all of it).
    pub shard: Option<Shard>,
    /// CPU worker threads (0: every core).
    pub threads: usize,
    /// CUDA device ordinal.
    pub device: usize,
    /// Cubin cache directory.
    pub cache: Option<PathBuf>,
    /// `Some(i)`: this process is worker i of several sharing the directory; it measures and
    /// returns, and the coordinator assembles.
    pub worker: Option<usize>,
    /// The binary's version line, recorded in the plan.
    pub version: String,
    /// Which rows this collection measures (one stage, or a stage of a staged refresh).
    pub stage: Stage,
    /// Samples replay whole rotations of the weight copies (the older protocol).
    pub whole_rotations: bool,
    /// Decode candidates launch programmatically (CUDA only; recorded in the plan).
    pub programmatic: bool,
    /// Grouped M values learned from dense-M measurements, in place of the profile's
    /// (recorded in the plan).
    pub learned_buckets: Option<LearnedBuckets>,
    /// Skip the decode candidates a policy predicts far from the best (recorded in the plan).
    pub prune: Option<PruneRequest>,
}

/// `sweep --prune-with P --prune-above R --prune-audit S` ([`crate::prune`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PruneRequest {
    pub policy: PathBuf,
    pub above: f64,
    pub audit: f64,
}

/// Which rows a collection measures.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Stage {
    /// Every M of the profile; batched rows at the bpp of each cell's fastest decode candidate.
    #[default]
    Whole,
    /// M = 1 only: the first stage of a staged refresh.
    M1,
    /// The profile's batched M at the frozen M = 1 picks (the second stage); the decode rows
    /// are copied from the sealed M = 1 corpus the frozen policy was fitted on.
    Batched { frozen: FrozenM1, m1_corpus: PathBuf },
}

/// What one collecting process did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectSummary {
    pub cells: usize,
    pub measured: usize,
    pub already_published: usize,
    pub held_elsewhere: usize,
}

/// Measure every cell of this process's share that no one has published, then (unless this
/// is a worker) assemble and seal when the plan is complete.
pub fn collect(opts: &CollectOptions) -> Result<CollectSummary> {
    let store = CellStore::new(&opts.out);
    let (plan, runner, modes, m1_rows, pruner) = bind(opts, &store)?;
    let protocol = Protocol::of_plan(&plan);
    let shard_name = opts.shard.map_or("-".to_string(), |s| format!("{}/{}", s.index, s.count));
    let cells = plan.shard_cells(opts.shard);
    let mut summary = CollectSummary { cells: cells.len(), measured: 0, already_published: 0, held_elsewhere: 0 };
    let progress = crate::progress::Progress::new(cells.len() as u64, "cells");
    let phases_before = crate::phases::snapshot();
    for key in &cells {
        match store.claim(key)? {
            Claim::Published => {
                summary.already_published += 1;
                progress.step(format!("cell {}: already published", key.stem()));
            }
            Claim::Busy => {
                summary.held_elsewhere += 1;
                progress.step(format!("cell {}: held by another worker", key.stem()));
            }
            Claim::Claimed => {
                let inherit: Option<Vec<&InheritedPick>> = plan
                    .frozen_m1
                    .as_ref()
                    .map(|f| f.picks_of(key).into_iter().filter(|p| modes.contains(&p.mode)).collect());
                let started = std::time::Instant::now();
                let phases = crate::phases::snapshot();
                let skip = pruner.as_ref().map(|p| p.decide(key, &modes).skipped()).unwrap_or_default();
                let mut cell = runner
                    .run_cell(key, &plan.collected_m(), &modes, &protocol, inherit.as_deref(), &skip)
                    .with_context(|| format!("cell {}", key.stem()))?;
                let millis = started.elapsed().as_millis() as u64;
                if let Some(m1) = &m1_rows {
                    // The frozen stage's decode rows, as its collection published them.
                    let (rows, samples) = m1.cell(key)?;
                    cell.rows.splice(0..0, rows);
                    cell.samples.splice(0..0, samples);
                }
                let prov = CellProvenance {
                    cell: key.stem(),
                    host: vnni_corpus::collection::host(),
                    pid: std::process::id(),
                    device: opts.device,
                    device_name: plan.device.clone(),
                    shard: shard_name.clone(),
                    // Filled in by `publish` from the bytes it writes.
                    rows: None,
                    rows_sha256: None,
                    samples: None,
                    samples_sha256: None,
                    millis: Some(millis),
                };
                store.publish(key, &cell.rows, &cell.samples, &prov)?;
                store.release(key)?;
                summary.measured += 1;
                progress.step(format!(
                    "cell {}: {} rows, {} samples in {:.1} s ({})",
                    key.stem(),
                    cell.rows.len(),
                    cell.samples.len(),
                    millis as f64 / 1000.0,
                    crate::phases::describe(&phases, &crate::phases::snapshot())
                ));
            }
        }
    }
    progress.finish();
    if summary.measured > 0 {
        eprintln!("time by phase: {}", crate::phases::describe(&phases_before, &crate::phases::snapshot()));
    }
    let who = opts.worker.map_or(String::new(), |w| format!("worker {w} (device {}): ", opts.device));
    println!(
        "{who}sweep {}: {} cells in this {} ({} measured, {} already published, {} held by other workers)",
        plan.inventory.profile,
        cells.len(),
        if opts.shard.is_some() { "shard" } else { "plan" },
        summary.measured,
        summary.already_published,
        summary.held_elsewhere,
    );
    if opts.worker.is_none() {
        finish(&store, &plan)?;
    }
    Ok(summary)
}

/// What `bind` opens: the plan, the backend, the modes it times, the frozen stage's decode
/// rows (batched stage) and the pruner (`--prune-with`).
type Bound = (CollectionPlan, CellRunner, Vec<Mode>, Option<M1Rows>, Option<Pruner>);

/// Open the backend and bind the work directory to this collection plan (and, for the
/// batched stage, read the frozen stage's decode rows).
fn bind(opts: &CollectOptions, store: &CellStore) -> Result<Bound> {
    let inv = Inventory::load(&opts.inventory)?;
    let iplan = inv.resolve(&opts.profile)?;
    let gpu = TimingOptions {
        modes: iplan.modes.clone(),
        samples: iplan.samples,
        warmups: iplan.warmups,
        passes: iplan.passes,
        whole_rotations: opts.whole_rotations,
        programmatic: opts.programmatic,
        l2_prefetch: vnni_kernels::L2Prefetch::default(),
        device: opts.device,
        cache: opts.cache.clone(),
    };
    let runner = CellRunner::open(opts.backend, &gpu, opts.threads)?;
    let info = runner.info();
    let modes: Vec<Mode> = info.modes.iter().copied().filter(|m| iplan.modes.contains(m)).collect();
    if modes.is_empty() {
        invalid!(
            "profile {} asks for modes {:?}, none of which the {} backend measures ({:?})",
            opts.profile,
            iplan.modes.iter().map(|m| m.name()).collect::<Vec<_>>(),
            info.backend.name(),
            info.modes.iter().map(|m| m.name()).collect::<Vec<_>>()
        );
    }
    if opts.programmatic && info.backend != vnni_kernels::Backend::Cuda {
        invalid!("--programmatic is a CUDA launch (sm_90); the {} backend has none", info.backend.name());
    }
    if opts.programmatic && !vnni_kernels::cuda::launch::programmatic_arch(&info.arch) {
        invalid!("--programmatic needs sm_90 or later (programmatic dependent launch); this device is {}", info.arch);
    }
    let (git_commit, git_dirty) = git_state(Path::new("."));
    let mut plan = CollectionPlan {
        schema: COLLECTION_SCHEMA.into(),
        backend: info.backend,
        arch: info.arch,
        device: info.device,
        driver: info.driver,
        nvrtc: info.nvrtc,
        units: info.units,
        registry_digest: registry_digest_for(&iplan.m),
        kernel_source_digest: kernel_source_digest(),
        version: opts.version.clone(),
        git_commit,
        git_dirty,
        inventory_digest: iplan.digest(),
        inventory_sources: inventory_sources(&opts.inventory)?,
        modes: modes.clone(),
        inventory: iplan,
        frozen_m1: None,
        m1_only: opts.stage == Stage::M1,
        whole_rotations: opts.whole_rotations,
        programmatic: opts.programmatic,
        l2_prefetch: (info.backend == vnni_kernels::Backend::Cuda).then_some(gpu.l2_prefetch),
        learned_buckets: opts.learned_buckets.clone(),
        pruning: None,
    };
    let pruner = match &opts.prune {
        Some(_) if matches!(opts.stage, Stage::Batched { .. }) => {
            invalid!("--prune-with prunes M = 1 decode candidates; the batched stage times none (its decode rows are the frozen stage's)")
        }
        Some(r) => Some(Pruner::load(&r.policy, r.above, r.audit, (plan.backend, &plan.arch), plan.units)?),
        None => None,
    };
    plan.pruning = pruner.as_ref().map(|p| p.plan.clone());
    if let Some(learned) = &plan.learned_buckets {
        let files = learned.sources.iter().map(|s| s.path.as_str()).collect::<Vec<_>>().join(", ");
        if !plan.inventory.m.iter().any(|&m| Surface::of_m(m) == Surface::Grouped) {
            invalid!(
                "profile {} of {} measures no grouped M (2..32), so the bucket starts learned from {files} have nothing to replace: drop --m-buckets-from",
                opts.profile,
                opts.inventory.display()
            );
        }
        if (learned.backend, learned.arch.as_str()) != (plan.backend, plan.arch.as_str()) {
            invalid!(
                "the bucket starts were learned from {} {} measurements ({files}); this collection runs on {} {}: bench --dense-m on this machine first",
                learned.backend.name(),
                learned.arch,
                plan.backend.name(),
                plan.arch
            );
        }
    }
    let m1_rows = match &opts.stage {
        Stage::Batched { frozen, m1_corpus } => {
            check_frozen(frozen, &plan)?;
            plan.frozen_m1 = Some(frozen.clone());
            Some(M1Rows::load(m1_corpus, &frozen.m1_corpus_id, &plan)?)
        }
        Stage::Whole | Stage::M1 => None,
    };
    store.bind_plan(&plan)?;
    if !runner.resources().is_empty() {
        vnni_corpus::write_csv(&opts.out.join("resources.csv"), runner.resources())?;
    }
    Ok((plan, runner, modes, m1_rows, pruner))
}

/// The frozen M = 1 stage must answer every planned cell in every mode on this device.
fn check_frozen(frozen: &FrozenM1, plan: &CollectionPlan) -> Result<()> {
    if frozen.units != plan.units {
        invalid!(
            "the frozen M = 1 policy was fitted for {} units (SMs or threads) and this {} device has {}: its picks' bpp do not hold here",
            frozen.units,
            plan.backend.name(),
            plan.units
        );
    }
    for key in plan.cells() {
        let picks = frozen.picks_of(&key);
        for mode in &plan.modes {
            if !picks.iter().any(|p| p.mode == *mode) {
                invalid!(
                    "the frozen M = 1 stage has no {mode} pick for cell {}: it was made for another profile or backend",
                    key.stem()
                );
            }
        }
    }
    Ok(())
}

/// When every planned cell is published: assemble `<out>/corpus`, seal it and verify it.
/// Returns whether the corpus is sealed.
pub fn finish(store: &CellStore, plan: &CollectionPlan) -> Result<bool> {
    let missing = store.missing(&plan.cells());
    if !missing.is_empty() {
        println!(
            "{} of {} cells still to collect (first: {}); run the remaining shards, or `vnni-dispatch merge` their work directories",
            missing.len(),
            plan.cells().len(),
            missing[0].stem()
        );
        return Ok(false);
    }
    let corpus = store.root.join("corpus");
    let expected = Expected {
        registry_digest: vec![plan.registry_digest.clone()],
        inventory_digests: [(plan.inventory.profile.clone(), plan.inventory_digest.clone())].into(),
        ..Default::default()
    };
    if corpus.join(MANIFEST).is_file() && verify(&corpus, &expected).is_ok() {
        println!("corpus already sealed: {}", corpus.display());
        return Ok(true);
    }
    // Assemble and seal in a directory of this process, then move it into place: two shards
    // finishing at once never write into one directory, and no reader sees half a corpus.
    // Staging directories of processes that died (a SIGKILL during assembly) are removed.
    remove_dead_staging(&store.root);
    let staging = store.root.join(staging_name(&vnni_corpus::collection::host(), std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).with_context(|| format!("clearing {}", staging.display()))?;
    }
    let rows = assemble(store, plan, &staging)?;
    if let Some(pruning) = &plan.pruning {
        score_pruning(store, plan, pruning, &staging)?;
    }
    let resources = store.root.join("resources.csv");
    if resources.is_file() {
        std::fs::copy(&resources, staging.join("resources.csv")).context("copying resources.csv")?;
    }
    let manifest = seal(&staging, &plan.seal_inputs())?;
    verify(&staging, &expected)?;
    if corpus.exists() {
        std::fs::remove_dir_all(&corpus).with_context(|| format!("clearing the unverifiable {}", corpus.display()))?;
    }
    if let Err(e) = std::fs::rename(&staging, &corpus) {
        // Another process moved its corpus into place first: keep that one if it verifies.
        let _ = std::fs::remove_dir_all(&staging);
        verify(&corpus, &expected)
            .with_context(|| format!("moving the sealed corpus into {}: {e}", corpus.display()))?;
    }
    let mismatched = vnni_corpus::collection::read_corpus_rows(&corpus)?.iter().filter(|r| r.mismatches > 0).count();
    println!(
        "corpus sealed: {} ({} cells, {rows} rows, {} payloads, corpus id {})",
        corpus.display(),
        plan.cells().len(),
        manifest.identity.payloads.len(),
        manifest.corpus_id
    );
    if mismatched > 0 {
        return Err(MeasureError::Structural(format!(
            "{mismatched} candidate rows differ from the CPU reference (see first_mismatch in the corpus CSVs)"
        )));
    }
    Ok(true)
}

/// A pruned collection's `pruning.csv`: every cell's decision made again from the recorded
/// policy, audited cells scored from their published rows; the summary printed.
fn score_pruning(store: &CellStore, plan: &CollectionPlan, pruning: &Pruning, out: &Path) -> Result<()> {
    let pruner = Pruner::of_plan(pruning, (plan.backend, &plan.arch), plan.units)?;
    let mut rows = Vec::new();
    for key in plan.cells() {
        let timing = vnni_corpus::read::read_timing(&store.rows_path(&key))?;
        rows.extend(score_cell(&key, &pruner.decide(&key, &plan.modes), &plan.modes, &timing));
    }
    vnni_corpus::write_csv(&out.join(PRUNING_FILE), &rows)?;
    println!("{}", summary(&rows));
    Ok(())
}

/// The staging directory of one process: host and pid, so shards of several hosts sharing
/// a work directory never share (or remove) one another's.
pub fn staging_name(host: &str, pid: u32) -> String {
    format!("corpus.{host}.{pid}.inprogress")
}

/// Remove staging directories of this host whose process is gone (other hosts' are theirs).
fn remove_dead_staging(root: &Path) {
    let Ok(rd) = std::fs::read_dir(root) else { return };
    let host = vnni_corpus::collection::host();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let owner =
            name.strip_prefix("corpus.").and_then(|r| r.strip_suffix(".inprogress")).and_then(|r| r.rsplit_once('.'));
        let Some((h, pid)) = owner else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if h == host && pid != std::process::id() && !vnni_corpus::collection::process_running(pid) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The CPU threads of one of `workers` processes: explicit, or the cores split among them.
pub fn threads_per_worker(threads: usize, workers: usize) -> usize {
    if threads > 0 {
        return threads;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / workers.max(1)).max(1)
}
