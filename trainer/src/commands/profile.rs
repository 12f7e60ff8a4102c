//! `vnni-dispatch profile --corpus C --out DIR [--top K]`: Nsight Compute evidence beside a
//! sealed CUDA corpus (issue 22). The requests (per cell and mode the `top` fastest eligible
//! candidates, every one by default) are written and bound to the corpus id first; then this
//! binary runs again under `ncu --profile-from-start off` as the worker (`--worker`), which
//! builds, checks and warms each launch outside the profiler range and opens the range around
//! exactly one production launch per request; last, ncu's CSV is parsed (units normalised),
//! bound to the requests in launch order and written as `evidence.csv` with its manifest.
//! ncu runs once per chunk of requests (`--chunk`) and pass (hardware counters, then the
//! SASS-instrumented counts: each one replay pass), each into its own file, so a cut run
//! started again with the same arguments profiles only the files it has not finished. `--reparse`
//! only derives the evidence again from the kept ncu files.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use vnni_corpus::collection::{read_corpus_rows, CollectionPlan, PLAN_FILE};
use vnni_corpus::evidence::{self, EvidenceRow, ProfileRequest, RequestManifest, Selection, DEFAULT_CHUNK, NCU_DIR};
use vnni_corpus::ncu::Pass;
use vnni_corpus::seal::{verify, Expected};

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// A sealed CUDA corpus.
    #[arg(long)]
    pub corpus: PathBuf,
    /// Where requests.csv, ncu/ (ncu's CSV per chunk and pass), evidence.csv and their
    /// manifests go.
    #[arg(long)]
    pub out: PathBuf,
    /// Profile the fastest K eligible candidates of every cell and mode (default: every one).
    #[arg(long)]
    pub top: Option<usize>,
    /// Also the installed pick and runner-up of every cell under this policy (fitted on
    /// --corpus), whatever their rank: what `generate --install` asks of the evidence.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Requests per chunk (one ncu process and file of ncu/ per chunk and pass; a cut run
    /// resumes by file).
    #[arg(long, default_value_t = DEFAULT_CHUNK)]
    pub chunk: usize,
    /// The Nsight Compute command line profiler.
    #[arg(long, default_value = "ncu")]
    pub ncu: PathBuf,
    /// How ncu replays a launch for metrics that need several passes: `kernel` (the launch
    /// again, device memory saved and restored: fixtures are built once) or `application` (the
    /// worker runs again per pass: no memory backup, but every pass builds the fixtures again;
    /// 1.25x faster on family-smoke's small shapes, docs/PERF.md). The evidence is the same.
    #[arg(long, default_value = "kernel", value_parser = ["kernel", "application"])]
    pub replay: String,
    /// Derive evidence.csv again from the kept ncu/ files (no GPU).
    #[arg(long)]
    pub reparse: bool,
    /// CUDA device ordinals: chunks are shared out among them, one ncu at a time per device
    /// (each device's ncu gets the machine's lock directory of that device as `TMPDIR`, so
    /// devices profile at once and two runs on one device still wait for each other). The
    /// worker gets one.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub devices: Vec<usize>,
    /// Cubin cache directory.
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Internal: run the requests of --out from --first, --count of them (what ncu starts).
    #[arg(long, hide = true)]
    pub worker: bool,
    #[arg(long, hide = true, default_value_t = 0)]
    pub first: usize,
    #[arg(long, hide = true, default_value_t = 0)]
    pub count: usize,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("profile")
            .path("corpus", &self.corpus)
            .path("out", &self.out)
            .opt("top", self.top)
            .opt_path("policy", self.policy.as_deref())
            .val("chunk", self.chunk)
            .path("ncu", &self.ncu)
            .val("replay", &self.replay)
            .flag("reparse", self.reparse)
            .list("devices", &self.devices)
            .opt_path("cache", self.cache.as_deref())
            .flag("worker", self.worker)
            .val("first", self.first)
            .val("count", self.count)
            .done()
    }
}

/// The sealed corpus's id (its seal checked).
pub fn corpus_id(corpus: &Path) -> Result<String> {
    let manifest = verify(corpus, &Expected::default())
        .with_context(|| format!("{}: profiler evidence needs a sealed corpus", corpus.display()))?;
    Ok(manifest.corpus_id)
}

pub fn run(a: &Args) -> Result<()> {
    let id = corpus_id(&a.corpus)?;
    if a.worker {
        return worker(a, &id);
    }
    let rows = read_corpus_rows(&a.corpus)?;
    if !a.reparse {
        std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
        let plan = CollectionPlan::read(&a.corpus.join(PLAN_FILE))?;
        let build = vnni_kernels::cuda::source::kernel_source_digest();
        if plan.kernel_source_digest != build {
            bail!(
                "{}: collected with other kernel sources ({}) than this build's ({build}): its timings describe other kernels; collect the corpus again",
                a.corpus.display(),
                plan.kernel_source_digest
            );
        }
        let also = match &a.policy {
            Some(p) => {
                let policy = super::load_policy(p)?;
                if policy.provenance.corpus_id != id {
                    bail!(
                        "{}: fitted on corpus {}, not on {} ({id})",
                        p.display(),
                        policy.provenance.corpus_id,
                        a.corpus.display()
                    );
                }
                evidence::installed_keys(&rows, policy_pick(&policy))?
            }
            None => Default::default(),
        };
        let selection = Selection { top: a.top, also, programmatic: plan.programmatic };
        let requests = evidence::plan_requests(&a.corpus, &rows, &selection)?;
        if requests.is_empty() {
            bail!("{}: no eligible CUDA row to profile", a.corpus.display());
        }
        let target = evidence::Target {
            device: plan.device.clone(),
            arch: plan.arch.clone(),
            kernel_source_digest: build,
            l2_prefetch: plan.decode_l2_prefetch(),
        };
        let (manifest, _) = evidence::request_manifest(&a.out, &id, &requests, a.chunk, &target)?;
        let same = evidence::read_requests(&a.out, &id).is_ok_and(|(m, _)| m == manifest);
        if !same {
            // other requests, device or build (or none yet): nothing profiled before belongs here
            match std::fs::remove_dir_all(a.out.join(NCU_DIR)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("removing {}", a.out.join(NCU_DIR).display()));
                }
                _ => {}
            }
            evidence::write_requests(&a.out, &id, &requests, a.chunk, &target)?;
        }
        println!("{} requests, {} kernel records expected: {}", manifest.requests, manifest.records, a.out.display());
        profile_chunks(a, &manifest, &requests)?;
    }
    evidence::write_evidence(&a.out, &id)?;
    let (requests, records) = authenticate(&a.out, &id, &rows)?;
    print!("{}", summary(&records));
    println!(
        "evidence: {} records ({} rows with the modes they stand for), {} requests, every claim held: {}",
        record_count(&records),
        records.len(),
        requests.len(),
        a.out.display()
    );
    Ok(())
}

/// The evidence of `dir`, authenticated for the sealed corpus `corpus_id` (its seal checked by
/// the caller) whose timing rows are `timing`: both manifests bind its id, every file its
/// digest, every request an eligible row of the corpus, and every registry claim (no spill,
/// IMMA exactly where the registry says) holds.
pub fn authenticate(
    dir: &Path,
    corpus_id: &str,
    timing: &[vnni_corpus::TimingRow],
) -> Result<(Vec<ProfileRequest>, Vec<EvidenceRow>)> {
    let (requests, rows) = evidence::verify(dir, corpus_id)?;
    evidence::check_requests_against(&dir.join(evidence::REQUESTS), &requests, timing)?;
    let violations = evidence::check_claims(&requests, &rows);
    for v in &violations {
        eprintln!("claim not held: {v}");
    }
    if !violations.is_empty() {
        bail!("{}: {} of the registry's claims do not hold on the evidence", dir.display(), violations.len());
    }
    Ok((requests, rows))
}

/// Each chunk not yet profiled, shared out among `--devices` (the next chunk goes to the first
/// device free): this binary again as the worker, under ncu with collection off until the
/// first range, once per pass ([`Pass::PROFILED`]: each fits one replay pass, a merged set
/// would need three at several times the cost), each writing its file through a temporary
/// name. A pass whose file already holds the chunk's records is not run again. A failed chunk
/// stops the others after their current chunk; what finished is kept.
fn profile_chunks(a: &Args, manifest: &RequestManifest, requests: &[ProfileRequest]) -> Result<()> {
    if a.devices.is_empty() {
        bail!("--devices names no device");
    }
    let exe = std::env::current_exe().context("finding this binary to run it under ncu")?;
    std::fs::create_dir_all(a.out.join(NCU_DIR))?;
    let chunks = manifest.chunks();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
    let errors: Vec<anyhow::Error> = std::thread::scope(|s| {
        let workers: Vec<_> = a
            .devices
            .iter()
            .map(|&device| {
                let (exe, chunks, next, failed) = (&exe, &chunks, &next, &failed);
                s.spawn(move || -> Result<()> {
                    use std::sync::atomic::Ordering::SeqCst;
                    // whatever ends this thread early (an error, a panic) stops the others
                    // after their current chunk
                    struct StopOthers<'a>(&'a std::sync::atomic::AtomicBool, bool);
                    impl Drop for StopOthers<'_> {
                        fn drop(&mut self) {
                            if !self.1 {
                                self.0.store(true, SeqCst);
                            }
                        }
                    }
                    let mut guard = StopOthers(failed, false);
                    let on = Device { ordinal: device, of: a.devices.len() };
                    while !failed.load(SeqCst) {
                        let i = next.fetch_add(1, SeqCst);
                        let Some(range) = chunks.get(i) else { break };
                        let line = profile_chunk(a, exe, on, range.clone(), requests)
                            .with_context(|| format!("chunk {}/{} on device {device}", i + 1, chunks.len()))?;
                        println!("chunk {}/{}{}: {line}", i + 1, chunks.len(), on.label());
                    }
                    guard.1 = true;
                    Ok(())
                })
            })
            .collect();
        workers.into_iter().filter_map(|w| w.join().expect("a profiling thread panicked").err()).collect()
    });
    let mut errors = errors.into_iter();
    match errors.next() {
        None => Ok(()),
        Some(first) => {
            for e in errors {
                eprintln!("error: {e:#}");
            }
            Err(first)
        }
    }
}

/// The machine's ncu lock directory for CUDA device `ordinal` (ncu's `TMPDIR`): shared by every
/// `profile` run on this machine, whatever its output directory.
fn lock_dir(ordinal: usize) -> PathBuf {
    std::env::temp_dir().join(format!("vnni-ncu-lock-device-{ordinal}"))
}

/// The device a chunk is profiled on, and among how many.
#[derive(Clone, Copy)]
struct Device {
    ordinal: usize,
    of: usize,
}

impl Device {
    fn label(self) -> String {
        if self.of > 1 {
            format!(" (device {})", self.ordinal)
        } else {
            String::new()
        }
    }
}

/// Profile one chunk's missing passes on `on`; the line that says what they cost.
fn profile_chunk(
    a: &Args,
    exe: &Path,
    on: Device,
    range: std::ops::Range<usize>,
    requests: &[ProfileRequest],
) -> Result<String> {
    // which passes' files already hold the chunk's records
    let mut whole = Pass::PROFILED.map(|p| evidence::read_pass(&a.out, requests, range.clone(), p).is_ok());
    if whole.iter().all(|&w| w) {
        match evidence::read_chunk(&a.out, requests, range.clone()) {
            Ok(_) => return Ok("profiled before".into()),
            Err(e) => {
                // each pass's file is whole, but they do not describe the same launches:
                // neither can be trusted, both are profiled again
                eprintln!("profiling requests {}..{} again: {e}", range.start, range.end);
                for pass in Pass::PROFILED {
                    let path = evidence::chunk_path(&a.out, range.start, pass);
                    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
                }
                whole = [false; Pass::PROFILED.len()];
            }
        }
    }
    let worker = Args {
        worker: true,
        reparse: false,
        first: range.start,
        count: range.len(),
        devices: vec![on.ordinal],
        ..a.clone()
    };
    let mut costs = Vec::new();
    for (pass, done) in Pass::PROFILED.into_iter().zip(whole) {
        if done {
            costs.push(format!("{} profiled before", pass.name()));
            continue;
        }
        let path = evidence::chunk_path(&a.out, range.start, pass);
        let partial = path.with_extension("csv.inprogress");
        // ncu serializes every instance through one lock file in TMPDIR: a lock directory per
        // device lets devices profile at once, still one ncu at a time on each device
        let lock = lock_dir(on.ordinal);
        std::fs::create_dir_all(&lock).with_context(|| format!("creating {}", lock.display()))?;
        let started = std::time::Instant::now();
        let status = Command::new(&a.ncu)
            .env("TMPDIR", &lock)
            .args(["--profile-from-start", "off", "--clock-control", "none", "--csv", "--page", "raw"])
            .args(["--replay-mode", &a.replay])
            .arg("--metrics")
            .arg(vnni_corpus::ncu::metrics_argument(pass))
            .arg("--log-file")
            .arg(&partial)
            .arg(exe)
            .args(worker.to_argv())
            .status()
            .with_context(|| format!("starting {} (Nsight Compute; give its path with --ncu)", a.ncu.display()))?;
        if !status.success() {
            bail!("{} exited with {status} ({} holds what it wrote)", a.ncu.display(), partial.display());
        }
        std::fs::rename(&partial, &path).with_context(|| format!("publishing {}", path.display()))?;
        let (records, _) = evidence::read_pass(&a.out, requests, range.clone(), pass)?;
        let passes: Vec<_> = records.iter().map(|r| r.replay_passes).collect();
        costs.push(format!("{} {}", pass.name(), cost(&passes, started.elapsed().as_secs_f64())));
    }
    evidence::read_chunk(&a.out, requests, range.clone())?;
    Ok(format!("requests {}..{}: {}", range.start, range.end, costs.join("; ")))
}

/// What a pass's records cost: seconds, ms a record and ncu's replay passes per record (one
/// pass is several times cheaper than two or more, whatever their number: docs/PERF.md).
fn cost(replay_passes: &[Option<u32>], secs: f64) -> String {
    let passes: std::collections::BTreeSet<u32> = replay_passes.iter().flatten().copied().collect();
    let per_record = 1e3 * secs / replay_passes.len().max(1) as f64;
    let head = format!("{secs:.1} s, {per_record:.0} ms a record");
    match (passes.first(), passes.last()) {
        (Some(lo), Some(hi)) if lo == hi => format!("{head}, replay passes: {lo}"),
        (Some(lo), Some(hi)) => format!("{head}, replay passes: {lo}-{hi}"),
        _ => head,
    }
}

/// The policy's pick for a corpus row's cell (the candidate id).
pub fn policy_pick(policy: &vnni_policy::Policy) -> impl Fn(&vnni_corpus::TimingRow) -> Result<String> + '_ {
    move |r| {
        let cb = r.codebook.map(|c| c.to_string()).unwrap_or_default();
        Ok(policy.select(&cb, &r.mode.to_string(), r.m as u64, r.n as u64, r.k as u64)?.candidate.id.clone())
    }
}

fn worker(a: &Args, id: &str) -> Result<()> {
    let (manifest, requests) = evidence::read_requests(&a.out, id)?;
    let Some(requests) = requests.get(a.first..a.first + a.count) else {
        bail!("requests {}..{} of {}: there are {}", a.first, a.first + a.count, a.out.display(), requests.len());
    };
    let build = vnni_kernels::cuda::source::kernel_source_digest();
    if build != manifest.kernel_source_digest {
        bail!(
            "this build's kernel sources ({build}) are not the ones the requests name ({})",
            manifest.kernel_source_digest
        );
    }
    let [device] = a.devices[..] else {
        bail!("a worker profiles on one device, not on {:?}", a.devices);
    };
    let mut gpu = vnni_kernels::cuda::device::Gpu::open(device, a.cache.as_deref())?;
    // the kernels as the corpus timed them
    gpu.l2_prefetch = manifest.decode_l2_prefetch();
    if (gpu.info.name.as_str(), gpu.info.arch.as_str()) != (manifest.device.as_str(), manifest.arch.as_str()) {
        bail!(
            "device {} is a {} ({}); the corpus was measured on a {} ({}): profile it there",
            device,
            gpu.info.name,
            gpu.info.arch,
            manifest.device,
            manifest.arch
        );
    }
    vnni_measure::profile::profile_requests(&gpu, requests)?;
    Ok(())
}

/// ncu records among evidence rows (a record has a row per mode its launch stands for).
pub fn record_count(rows: &[EvidenceRow]) -> usize {
    rows.iter().filter(|r| r.is_record()).count()
}

/// One line per record, with every mode it stands for: what a user asks when a choice looks
/// wrong.
pub fn summary(rows: &[EvidenceRow]) -> String {
    let mut out = String::from(
        "| request | cell | mode | candidate | kernel | regs | occupancy % | DRAM % | L2 % | spills | ld128 | B/sector | IMMA |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    // a record's rows are adjacent (evidence::bind), one per mode
    for same in rows.chunk_by(|a, b| (a.request, a.record) == (b.request, b.record)) {
        let r = &same[0];
        out.push_str(&format!(
            "| {} | {} M={} {}x{} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {} |\n",
            r.request,
            r.source_format,
            r.m,
            r.n,
            r.k,
            same.iter().map(|r| r.mode.to_string()).collect::<Vec<_>>().join(";"),
            r.candidate,
            if r.record == 0 { "main" } else { "reduce" },
            r.registers,
            r.achieved_occupancy_pct,
            r.dram_pct,
            r.l2_pct,
            r.spill_insts(),
            opt(r.ld128_share),
            opt(r.bytes_per_sector),
            r.imma_insts
        ));
    }
    out
}
