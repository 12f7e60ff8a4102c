//! `vnni-dispatch sweep`: collect a profile's cells on a backend into a work directory
//! (`plan.json`, `cells/`, `locks/`). Every cell (source format x N x K, all candidates, the
//! profile's M values and modes) is claimed with a lock file, measured, and published
//! atomically, so a killed sweep resumes where it stopped and several workers (`--devices`)
//! or hosts (`--shard i/n`, also from SLURM array variables) share the plan. When every
//! planned cell is published, the corpus is assembled into `<out>/corpus` and sealed.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use vnni_corpus::collection::{
    assemble, inventory_sources, CellProvenance, CellStore, Claim, CollectionPlan, Shard, COLLECTION_SCHEMA,
};
use vnni_corpus::inventory::Inventory;
use vnni_corpus::provenance::git_state;
use vnni_corpus::seal::{seal, verify, Expected, MANIFEST};
use vnni_kernels::cuda::source::kernel_source_digest;
use vnni_kernels::registry::registry_digest_for;

use crate::backend::SweepBackend;
use crate::gpu_timing::GpuTimingArgs;
use crate::timing::{Mode, Protocol};

#[derive(clap::Args, Clone)]
pub struct Args {
    /// `cuda`, `cpu`, or `auto` (cuda when a GPU opens, else cpu).
    #[arg(long, default_value = "auto", value_parser = ["cuda", "cpu", "auto"])]
    pub backend: String,
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
    /// Internal: this process is worker i of --devices.
    #[arg(long, hide = true)]
    pub worker: Option<usize>,
}

impl Args {
    fn shard(&self) -> Result<Option<Shard>> {
        match self.shard {
            Some(s) => Ok(Some(s)),
            None => Shard::from_slurm(|k| std::env::var(k).ok()).map_err(anyhow::Error::msg),
        }
    }

    /// The CPU threads of one process: explicit, or the cores split among the workers.
    fn threads(&self) -> usize {
        if self.threads > 0 {
            return self.threads;
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores / self.devices.len().max(1)).max(1)
    }
}

pub fn run(args: &Args) -> Result<()> {
    if !args.devices.is_empty() && args.worker.is_none() {
        return coordinate(args);
    }
    let store = CellStore::new(&args.out);
    let (plan, backend, modes) = bind(args, &store)?;
    let shard = args.shard()?;
    let protocol = Protocol { warmups: plan.inventory.warmups, samples: plan.inventory.samples, ..Protocol::default() };
    let device = args.worker.map_or(args.device, |w| args.devices[w]);
    let shard_name = shard.map_or("-".to_string(), |s| format!("{}/{}", s.index, s.count));
    let (mut done, mut skipped, mut busy) = (0, 0, 0);
    let cells = plan.shard_cells(shard);
    let progress = crate::progress::Progress::new(cells.len() as u64, "cells");
    for key in &cells {
        match store.claim(key)? {
            Claim::Published => {
                skipped += 1;
                progress.step(format!("cell {}: already published", key.stem()));
            }
            Claim::Busy => {
                busy += 1;
                progress.step(format!("cell {}: held by another worker", key.stem()));
            }
            Claim::Claimed => {
                let cell = backend
                    .run_cell(key, &plan.inventory.m, &modes, &protocol)
                    .with_context(|| format!("cell {}", key.stem()))?;
                let prov = CellProvenance {
                    cell: key.stem(),
                    host: vnni_corpus::collection::host(),
                    pid: std::process::id(),
                    device,
                    device_name: plan.device.clone(),
                    shard: shard_name.clone(),
                };
                store.publish(key, &cell.rows, &cell.samples, &prov)?;
                store.release(key)?;
                done += 1;
                progress.step(format!("cell {}: {} rows, {} samples", key.stem(), cell.rows.len(), cell.samples.len()));
            }
        }
    }
    progress.finish();
    let who = args.worker.map_or(String::new(), |w| format!("worker {w} (device {device}): "));
    println!(
        "{who}sweep {}: {} cells in this {} ({done} measured, {skipped} already published, {busy} held by other workers)",
        plan.inventory.profile,
        cells.len(),
        if shard.is_some() { "shard" } else { "plan" },
    );
    if args.worker.is_some() {
        return Ok(());
    }
    finish(&store, &plan)
}

/// Open the backend and bind the work directory to this collection plan.
fn bind(args: &Args, store: &CellStore) -> Result<(CollectionPlan, SweepBackend, Vec<Mode>)> {
    let inv = Inventory::load(&args.inventory)?;
    let iplan = inv.resolve(&args.profile)?;
    let device = args.worker.map_or(args.device, |w| args.devices[w]);
    let gpu = GpuTimingArgs {
        codebooks: Vec::new(),
        modes: iplan.modes.clone(),
        samples: iplan.samples,
        warmups: iplan.warmups,
        device,
        cache: args.cache.clone(),
    };
    let backend = SweepBackend::open(&args.backend, &gpu, args.threads())?;
    let info = backend.info();
    let modes: Vec<Mode> = info.modes.iter().copied().filter(|m| iplan.modes.iter().any(|p| p == m.name())).collect();
    if modes.is_empty() {
        bail!(
            "profile {} asks for modes {:?}, none of which the {} backend measures ({:?})",
            args.profile,
            iplan.modes,
            info.backend.name(),
            info.modes.iter().map(|m| m.name()).collect::<Vec<_>>()
        );
    }
    let (git_commit, git_dirty) = git_state(Path::new("."));
    let plan = CollectionPlan {
        schema: COLLECTION_SCHEMA.into(),
        backend: info.backend.name().into(),
        arch: info.arch,
        device: info.device,
        driver: info.driver,
        nvrtc: info.nvrtc,
        units: info.units,
        registry_digest: registry_digest_for(&iplan.m),
        kernel_source_digest: kernel_source_digest(),
        version: format!("vnni-dispatch {} ({})", env!("CARGO_PKG_VERSION"), env!("VNNI_RUSTC_VERSION")),
        git_commit,
        git_dirty,
        inventory_digest: iplan.digest(),
        inventory_sources: inventory_sources(&args.inventory)?,
        modes: modes.iter().map(|m| m.name().to_string()).collect(),
        inventory: iplan,
    };
    store.bind_plan(&plan)?;
    if !backend.resources().is_empty() {
        vnni_corpus::write_csv(&args.out.join("resources.csv"), backend.resources())?;
    }
    Ok((plan, backend, modes))
}

/// `--devices`: one worker process per device over the same work directory, then finish.
fn coordinate(args: &Args) -> Result<()> {
    let exe = std::env::current_exe().context("locating the vnni-dispatch binary")?;
    let devices = args.devices.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",");
    let threads = args.threads().to_string();
    let mut children = Vec::new();
    for (w, d) in args.devices.iter().enumerate() {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["sweep", "--backend", &args.backend, "--profile", &args.profile])
            .arg("--inventory")
            .arg(&args.inventory)
            .arg("--out")
            .arg(&args.out)
            .args(["--devices", &devices, "--threads", &threads, "--worker", &w.to_string()]);
        if let Some(s) = args.shard {
            cmd.args(["--shard", &format!("{}/{}", s.index, s.count)]);
        }
        if let Some(c) = &args.cache {
            cmd.arg("--cache").arg(c);
        }
        let child = cmd.spawn().with_context(|| format!("starting the worker for device {d}"))?;
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
    finish(&store, &plan)
}

/// When every planned cell is published: assemble `<out>/corpus`, seal it and verify it.
pub fn finish(store: &CellStore, plan: &CollectionPlan) -> Result<()> {
    let missing = store.missing(&plan.cells());
    if !missing.is_empty() {
        println!(
            "{} of {} cells still to collect (first: {}); run the remaining shards, or `vnni-dispatch merge` their work directories",
            missing.len(),
            plan.cells().len(),
            missing[0].stem()
        );
        return Ok(());
    }
    let corpus = store.root.join("corpus");
    let expected = Expected {
        registry_digest: Some(plan.registry_digest.clone()),
        inventory_digests: [(plan.inventory.profile.clone(), plan.inventory_digest.clone())].into(),
        ..Default::default()
    };
    if corpus.join(MANIFEST).is_file() && verify(&corpus, &expected).is_ok() {
        println!("corpus already sealed: {}", corpus.display());
        return Ok(());
    }
    // Assemble and seal in a directory of this process, then move it into place: two shards
    // finishing at once never write into one directory, and no reader sees half a corpus.
    let staging = store.root.join(format!("corpus.{}.inprogress", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).with_context(|| format!("clearing {}", staging.display()))?;
    }
    let rows = assemble(store, plan, &staging)?;
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
        verify(&corpus, &expected).with_context(|| format!("moving the sealed corpus into {}: {e}", corpus.display()))?;
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
        bail!("{mismatched} candidate rows differ from the CPU reference (see first_mismatch in the corpus CSVs)");
    }
    Ok(())
}
