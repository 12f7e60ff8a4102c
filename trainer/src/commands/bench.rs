//! `vnni-dispatch bench --backend cuda`: the copy roofline, cuBLAS fp16 GEMV and every
//! decode candidate per codebook on the same shapes, in one run; grouped rows and prefill
//! tiles at the bpp of the best decode candidate, the prefill tiles beside cuBLAS fp16 GEMM
//! (dequantized weights) and cuBLASLt int8 GEMM; writes CSVs and prints the best candidate per
//! (shape, codebook) against the copy bandwidth, and per prefill shape in TOPS.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use vnni_corpus::schema::hex_f64;
use vnni_corpus::{SampleRow, TimingRow};
use vnni_kernels::cuda::device::Gpu;
use vnni_kernels::registry::{
    decode_candidates, grouped_candidates, prefill_auto, prefill_candidates, Candidate, PREFILL_MIN_M,
};
use vnni_kernels::{Backend, CandidateId, Codebook, L2Prefetch, Mode, SourceFormat};
use vnni_measure::cell::{best_row, CellResult, FIXTURE_SEED};
use vnni_measure::cuda_cell::{run_cell, CellFixture, CellInputs, CellTarget};
use vnni_measure::cuda_clock::GpuSession;
use vnni_measure::protocol::{Protocol, Timed, TimingOptions};
use vnni_measure::runner::CellRunner;
use vnni_measure::shapes::{MValues, Shapes};
use vnni_measure::stats::summarize;
use vnni_measure::vendor::{copy_bandwidth, cublas_f16_gemm, cublas_f16_gemv, cublaslt_i8_gemm};

use crate::argv::{Argv, ToArgv};

mod chain;
mod dense_m;

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    #[arg(long, default_value = "cuda", value_parser = ["cuda"])]
    pub backend: String,
    /// N x K shapes, comma-separated.
    #[arg(long, default_value = "151936x4096,248320x5120,24576x4096,4096x12288,4096x4096")]
    pub shapes: Shapes,
    /// Codebooks (default: all).
    #[arg(long, value_delimiter = ',')]
    pub codebooks: Vec<Codebook>,
    /// Timing modes.
    #[arg(long, value_delimiter = ',', default_value = "eager,graph")]
    pub modes: Vec<Mode>,
    #[arg(long, default_value_t = 12)]
    pub samples: usize,
    #[arg(long, default_value_t = 2)]
    pub warmups: usize,
    /// Independent timing passes per cell (each `--warmups` + `--samples` rounds, on weight
    /// copies of its own); two give every candidate a replicate.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=8))]
    pub passes: u64,
    /// Samples replay whole rotations of the weight copies, as before windows: to measure
    /// what the windows change.
    #[arg(long)]
    pub whole_rotations: bool,
    /// Decode candidates launch with programmatic dependent launch (sm_90): each launch of a
    /// sample may start its weight loads while the previous one drains, as consecutive layers
    /// of a model can. Grouped and prefill rows launch plainly.
    #[arg(long)]
    pub programmatic: bool,
    /// Which decode launches ask L2 for their first weight rows before the grid-dependency
    /// wait: `programmatic` (only launches with programmatic dependent launch, what sweeps
    /// time now) or `always` (plain launches too, as the corpora collected between 1175bcd
    /// and this option were): to measure what the prefetch costs a plain launch.
    #[arg(long, default_value = "programmatic")]
    pub l2_prefetch: L2Prefetch,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Cubin cache directory.
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Shapes that also get grouped rows (M > 1) at the bpp of the best M = 1 candidate.
    #[arg(long, default_value = "151936x4096,24576x4096,4096x12288")]
    pub grouped_shapes: Shapes,
    /// Row counts for the grouped rows (empty: none).
    #[arg(long, default_value = "2,4,8,16,31")]
    pub grouped_m: MValues,
    /// Shapes that also get prefill tiles (M >= 32) at the bpp of the best M = 1 candidate,
    /// beside cuBLAS fp16 and cuBLASLt int8 GEMMs (each must be in --shapes).
    #[arg(long, default_value = "24576x4096,4096x12288")]
    pub prefill_shapes: Shapes,
    /// Row counts for the prefill tiles (empty: none).
    #[arg(long, default_value = "512,2048")]
    pub prefill_m: MValues,
    /// Layers of one model in the order it runs them (each must be in --shapes), timed end to
    /// end per codebook and mode with each layer's best decode candidate of this run, plain
    /// and with programmatic dependent launch in the same rounds; writes chain.csv (empty:
    /// none). A Llama-3-8B decoder layer: 4096x4096,1024x4096,1024x4096,4096x4096,
    /// 14336x4096,14336x4096,4096x14336.
    #[arg(long, default_value = "")]
    pub chain: Shapes,
    /// Time only the pairs a fit listed (`fit --report R` writes `R/remeasure.csv`): each
    /// cell's held-out pick against its fastest candidate, in the cell's source format and
    /// mode, instead of --shapes; writes decode.csv, samples.csv and resources.csv.
    #[arg(long)]
    pub pairs: Option<PathBuf>,
    /// Instead of the tables above: every M of the dense grid (1 to 64, multiples of 16 to 512,
    /// powers of two to --dense-m-max) for each of --shapes x --codebooks x --modes, the
    /// fastest batched candidate at the inherited bpp beside --policy's pick; writes
    /// dense-m.csv, dense-rows.csv.zst, samples.csv.zst and report/ (cliffs, charts).
    #[arg(long, conflicts_with = "pairs")]
    pub dense_m: bool,
    /// The largest M of the dense grid.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(2..=65536))]
    pub dense_m_max: u64,
    /// The policy whose picks the dense grid times beside the fastest (its units must be this
    /// device's SMs); without it the M = 1 identity is the fastest decode candidate.
    #[arg(long, requires = "dense_m")]
    pub policy: Option<PathBuf>,
    /// Output directory for decode.csv, samples.csv, resources.csv, best.csv, grouped.csv,
    /// prefill.csv.
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("bench")
            .val("backend", &self.backend)
            .val("shapes", &self.shapes)
            .list("codebooks", &self.codebooks)
            .list("modes", &self.modes)
            .val("samples", self.samples)
            .val("warmups", self.warmups)
            .val("passes", self.passes)
            .flag("whole-rotations", self.whole_rotations)
            .flag("programmatic", self.programmatic)
            .val("l2-prefetch", self.l2_prefetch)
            .val("device", self.device)
            .opt_path("cache", self.cache.as_deref())
            .val("grouped-shapes", &self.grouped_shapes)
            .val("grouped-m", &self.grouped_m)
            .val("prefill-shapes", &self.prefill_shapes)
            .val("prefill-m", &self.prefill_m)
            .val("chain", &self.chain)
            .opt_path("pairs", self.pairs.as_deref())
            .flag("dense-m", self.dense_m)
            .val("dense-m-max", self.dense_m_max)
            .opt_path("policy", self.policy.as_deref())
            .path("out", &self.out)
            .done()
    }
}

/// A baseline measurement to report beside the candidates.
struct Baseline<'a> {
    mode: Mode,
    name: &'a str,
    n: usize,
    k: usize,
    bytes: usize,
    copies: usize,
}

fn baseline_id(name: &str) -> CandidateId {
    CandidateId::new(name).expect("baseline ids are valid")
}

fn baseline_row(gpu: &Gpu, b: &Baseline, t: &Timed, copy_gbps: f64, p: &Protocol) -> TimingRow {
    let Baseline { mode, name, n, k, bytes, copies } = *b;
    let s = summarize(&t.measured()).expect("baseline has samples");
    let gbps = bytes as f64 / (s.median * 1e-6) / 1e9;
    TimingRow {
        backend: Backend::Cuda,
        arch: gpu.info.arch.clone(),
        device: gpu.info.name.clone(),
        mode,
        source_format: None,
        codebook: None,
        m: 1,
        n,
        k,
        candidate: baseline_id(name),
        m1_candidate: None,
        bpp: 0,
        warmups: p.warmups,
        samples: t.measured().len(),
        replays: t.replays,
        weight_copies: copies,
        seed: p.seed,
        min_us: s.min,
        median_us: s.median,
        p95_us: s.p95,
        mad_us: s.mad,
        cv: s.cv,
        weight_bytes: bytes,
        gbps,
        pct_copy_bw: 100.0 * gbps / copy_gbps,
        checked: 0,
        mismatches: 0,
        first_mismatch: String::new(),
        eligible: true,
        dropped: false,
        registers: 0,
        occupancy_blocks_per_sm: 0,
    }
}

fn samples_of(mode: Mode, name: &str, m: usize, n: usize, k: usize, t: &Timed) -> Vec<SampleRow> {
    samples_as(mode, None, name, m, n, k, t)
}

/// A measurement's raw samples under `name` (a baseline, or a chain with its codebook's
/// first source format).
fn samples_as(
    mode: Mode,
    format: Option<SourceFormat>,
    name: &str,
    m: usize,
    n: usize,
    k: usize,
    t: &Timed,
) -> Vec<SampleRow> {
    t.samples
        .iter()
        .map(|s| SampleRow {
            mode,
            source_format: format,
            codebook: format.map(SourceFormat::codebook),
            m,
            n,
            k,
            candidate: baseline_id(name),
            pass: s.pass,
            round: s.round,
            order: s.order,
            warmup: s.warmup,
            latency_us_hex: hex_f64(s.latency_us),
        })
        .collect()
}

/// Everything one bench run measured.
#[derive(Default)]
struct Measured {
    rows: Vec<TimingRow>,
    samples: Vec<SampleRow>,
    grouped: Vec<GroupedBest>,
    prefill: Vec<PrefillRow>,
}

impl Measured {
    /// decode.csv, samples.csv and resources.csv into `dir`; the rows with mismatches.
    fn write(&self, dir: &Path, session: &GpuSession) -> Result<usize> {
        std::fs::create_dir_all(dir)?;
        vnni_corpus::write_csv(&dir.join("decode.csv"), &self.rows)?;
        vnni_corpus::write_csv(&dir.join("samples.csv"), &self.samples)?;
        vnni_corpus::write_csv(&dir.join("resources.csv"), &session.resources)?;
        Ok(self.rows.iter().filter(|r| r.mismatches > 0).count())
    }
}

/// The fixed inputs of one bench run.
struct Bench<'a> {
    args: &'a Args,
    session: &'a GpuSession,
    copy_gbps: f64,
    decode: Vec<Candidate>,
    grouped: Vec<Candidate>,
    prefill: Vec<Candidate>,
}

impl Bench<'_> {
    /// The cuBLAS GEMM baselines of a prefill shape, at each prefill M and mode.
    fn prefill_baselines(&self, n: usize, k: usize, out: &mut Measured) -> Result<()> {
        let (gpu, protocol) = (&self.session.gpu, &self.session.protocol);
        for &m in self.args.prefill_m.0.iter().filter(|&&m| m >= PREFILL_MIN_M) {
            for &mode in &self.session.modes {
                let ops = 2.0 * (m * n * k) as f64;
                let (t, _) = cublas_f16_gemm(gpu, m, n, k, mode, protocol)?;
                out.prefill.push(PrefillRow::baseline(mode, "cublas.f16.gemm", m, n, k, &t, ops));
                out.samples.extend(samples_of(mode, "cublas.f16.gemm", m, n, k, &t));
                let (t, _) = cublaslt_i8_gemm(gpu, m, n, k, mode, protocol)?;
                out.prefill.push(PrefillRow::baseline(mode, "cublaslt.i8.gemm", m, n, k, &t, ops));
                out.samples.extend(samples_of(mode, "cublaslt.i8.gemm", m, n, k, &t));
            }
        }
        Ok(())
    }

    /// Batched candidates on `m` rows at the bpp of the best decode row of `mode`.
    fn batched(
        &self,
        fx: &CellFixture,
        inputs: &CellInputs,
        m1: &TimingRow,
        m: usize,
        mode: Mode,
        cands: &[Candidate],
    ) -> Result<CellResult> {
        let target = CellTarget::Inherited { m, m1_candidate: m1.candidate.clone(), bpp: m1.bpp };
        let one_mode = [mode];
        Ok(run_cell(&self.session.gpu, fx, &inputs.retarget(target, cands, &one_mode))?)
    }

    /// Every decode candidate of one (shape, codebook), then grouped and prefill rows where asked.
    fn codebook(&self, n: usize, k: usize, cb: Codebook, out: &mut Measured) -> Result<()> {
        let (gpu, s) = (&self.session.gpu, self.session);
        let started = std::time::Instant::now();
        let phases = vnni_measure::phases::snapshot();
        // The codebook's first source format stands for it (aliases share the kernels).
        let fx = CellFixture::new(gpu, SourceFormat::aliases_of(cb)[0], n, k, FIXTURE_SEED, s.protocol.passes)?;
        let inputs = CellInputs::decode(&self.decode, &s.modes, &s.protocol, &s.rejected, self.copy_gbps);
        let cell = run_cell(gpu, &fx, &inputs)?;
        let mut cell_rows = cell.rows;
        // The M = 1 rows the batched surfaces inherit from (before grouped rows join them).
        let decode_rows = cell_rows.clone();
        out.samples.extend(cell.samples);
        for &mode in &s.modes {
            let Some(m1) = best_row(&decode_rows, mode).cloned() else { continue };
            if self.args.grouped_shapes.0.contains(&(n, k)) {
                for &m in &self.args.grouped_m.0 {
                    let g = self.batched(&fx, &inputs, &m1, m, mode, &self.grouped)?;
                    out.grouped.extend(best_row(&g.rows, mode).map(|b| GroupedBest::new(b, &m1)));
                    cell_rows.extend(g.rows);
                    out.samples.extend(g.samples);
                }
            }
            if self.args.prefill_shapes.0.contains(&(n, k)) {
                for &m in self.args.prefill_m.0.iter().filter(|&&m| m >= PREFILL_MIN_M) {
                    let p = self.batched(&fx, &inputs, &m1, m, mode, &self.prefill)?;
                    let auto = prefill_auto(n, m, gpu.info.sms).id;
                    // Raced-out tiles keep their (partial) medians: `auto` may be one of them.
                    out.prefill.extend(p.rows.iter().filter(|r| r.eligible).map(|r| PrefillRow::kernel(r, &auto)));
                    cell_rows.extend(p.rows);
                    out.samples.extend(p.samples);
                }
            }
        }
        for r in cell_rows.iter().filter(|r| r.mismatches > 0) {
            eprintln!(
                "MISMATCH {} {cb} M={} {n}x{k}: {} of {} ({})",
                r.candidate, r.m, r.mismatches, r.checked, r.first_mismatch
            );
        }
        eprintln!(
            "{cb} {n}x{k}: {} rows in {:.1}s ({})",
            cell_rows.len(),
            started.elapsed().as_secs_f64(),
            vnni_measure::phases::describe(&phases, &vnni_measure::phases::snapshot())
        );
        out.rows.extend(cell_rows);
        Ok(())
    }
}

/// Best eligible candidate per (mode, M, shape, codebook).
fn best_rows(rows: &[TimingRow]) -> Vec<TimingRow> {
    let mut best: Vec<TimingRow> = Vec::new();
    for r in rows.iter().filter(|r| r.eligible && !r.dropped && r.median_us.is_finite()) {
        match best
            .iter_mut()
            .find(|b| b.mode == r.mode && b.m == r.m && b.n == r.n && b.k == r.k && b.codebook == r.codebook)
        {
            Some(b) if b.median_us <= r.median_us => {}
            Some(b) => *b = r.clone(),
            None => best.push(r.clone()),
        }
    }
    best
}

fn open(args: &Args) -> Result<GpuSession> {
    let opts = TimingOptions {
        modes: args.modes.clone(),
        samples: args.samples,
        warmups: args.warmups,
        passes: args.passes as usize,
        whole_rotations: args.whole_rotations,
        programmatic: args.programmatic,
        l2_prefetch: args.l2_prefetch,
        device: args.device,
        cache: args.cache.clone(),
    };
    let session = GpuSession::open(&opts, &args.codebooks)?;
    let info = &session.gpu.info;
    eprintln!(
        "device {} ({}, {} SMs, L2 {} MiB, driver {}), L2 prefetch: {}",
        info.name,
        info.arch,
        info.sms,
        info.l2_bytes >> 20,
        info.driver_version,
        args.l2_prefetch
    );
    Ok(session)
}

/// `--pairs`: each requested cell's two candidates, in its source format and mode
/// (`vnni_measure::pairs`, as `refresh` and `remeasure` time them).
fn run_pairs(args: &Args, path: &Path) -> Result<()> {
    let requests = vnni_corpus::read::read_pair_requests(path)?;
    let session = open(args)?;
    if let Some(r) = requests.iter().find(|r| !session.codebooks.contains(&r.codebook)) {
        bail!(
            "{}: codebook {} ({} {}x{}) is not among --codebooks",
            path.display(),
            r.codebook,
            r.source_format,
            r.n,
            r.k
        );
    }
    if let Some(r) = requests.iter().find(|r| !session.modes.contains(&r.mode)) {
        bail!(
            "{}: mode {} ({} {}x{}) is not among --modes {:?}",
            path.display(),
            r.mode,
            r.source_format,
            r.n,
            r.k,
            session.modes
        );
    }
    let protocol = session.protocol.clone();
    let device = session.gpu.info.name.clone();
    let runner = CellRunner::cuda(session)?;
    let timed = vnni_measure::pairs::time_pairs(&runner, &requests, &protocol, path)?;
    std::fs::create_dir_all(&args.out)?;
    vnni_corpus::write_csv(&args.out.join("decode.csv"), &timed.rows)?;
    vnni_corpus::write_csv(&args.out.join("samples.csv"), &timed.samples)?;
    vnni_corpus::write_csv(&args.out.join("resources.csv"), runner.resources())?;
    println!("{device} | {} pairs, {} candidate rows", requests.len(), timed.rows.len());
    Ok(())
}

pub fn run(args: &Args) -> Result<()> {
    if let Some(pairs) = &args.pairs {
        return run_pairs(args, pairs);
    }
    let shapes = &args.shapes.0;
    if args.dense_m && !args.chain.0.is_empty() {
        bail!("--dense-m and --chain are separate runs");
    }
    // A dense run times its own grid: the grouped and prefill shape lists do not apply.
    if let Some((n, k)) = args.prefill_shapes.0.iter().find(|s| !shapes.contains(s) && !args.dense_m) {
        bail!("--prefill-shapes {n}x{k} is not in --shapes: prefill inherits the bpp of that shape's best decode candidate");
    }
    if let Some((n, k)) = args.chain.0.iter().find(|s| !shapes.contains(s)) {
        bail!("--chain {n}x{k} is not in --shapes: a chain layer launches that shape's best decode candidate");
    }
    // The policy is read (and checked) before the GPU is opened.
    let policy = args.policy.as_deref().map(super::load_policy).transpose()?;
    let session = open(args)?;
    let (gpu, protocol) = (&session.gpu, &session.protocol);
    let mut out = Measured::default();
    let (copy_gbps, _, copy_t, copy_bytes) = copy_bandwidth(gpu, protocol)?;
    eprintln!("copy bandwidth {copy_gbps:.0} GB/s (read + write)");
    let copy = Baseline { mode: Mode::Eager, name: "copy", n: 0, k: 0, bytes: 2 * copy_bytes, copies: 1 };
    out.rows.push(baseline_row(gpu, &copy, &copy_t, copy_gbps, protocol));
    out.samples.extend(samples_of(Mode::Eager, "copy", 1, 0, 0, &copy_t));
    let bench = Bench {
        args,
        session: &session,
        copy_gbps,
        decode: decode_candidates(),
        grouped: grouped_candidates(),
        prefill: prefill_candidates(),
    };
    if args.dense_m {
        return dense_m::run(&bench, policy.as_ref());
    }
    for &(n, k) in shapes {
        if args.prefill_shapes.0.contains(&(n, k)) {
            bench.prefill_baselines(n, k, &mut out)?;
        }
        for &mode in &session.modes {
            let (t, bytes, copies) = cublas_f16_gemv(gpu, n, k, mode, protocol)?;
            let b = Baseline { mode, name: "cublas.f16.gemv", n, k, bytes, copies };
            out.rows.push(baseline_row(gpu, &b, &t, copy_gbps, protocol));
            out.samples.extend(samples_of(mode, "cublas.f16.gemv", 1, n, k, &t));
        }
        for &cb in &session.codebooks {
            bench.codebook(n, k, cb, &mut out)?;
        }
    }
    let best = best_rows(&out.rows);
    let chains = if args.chain.0.is_empty() { Vec::new() } else { chain::run(&bench, &best, &mut out.samples)? };
    let mismatched = out.write(&args.out, &session)?;
    vnni_corpus::write_csv(&args.out.join("best.csv"), &best)?;
    vnni_corpus::write_csv(&args.out.join("grouped.csv"), &out.grouped)?;
    vnni_corpus::write_csv(&args.out.join("prefill.csv"), &out.prefill)?;
    if !chains.is_empty() {
        vnni_corpus::write_csv(&args.out.join("chain.csv"), &chains)?;
    }
    println!(
        "\n{} | copy {copy_gbps:.0} GB/s | {} candidate rows, {mismatched} with mismatches",
        gpu.info.name,
        out.rows.len()
    );
    print_decode(&best);
    print_grouped(&out.grouped);
    print_prefill(&out.prefill);
    chain::print(&chains);
    if mismatched > 0 {
        bail!("{mismatched} candidate rows differ from the CPU reference");
    }
    Ok(())
}

fn word<T: std::fmt::Display>(w: Option<T>) -> String {
    w.map_or_else(|| "-".into(), |w| w.to_string())
}

fn print_decode(best: &[TimingRow]) {
    println!(
        "{:<6} {:<14} {:<6} {:<34} {:>9} {:>8} {:>7}",
        "mode", "shape", "cb", "best candidate", "median_us", "GB/s", "%copy"
    );
    for b in best.iter().filter(|b| b.m == 1) {
        println!(
            "{:<6} {:<14} {:<6} {:<34} {:>9.2} {:>8.0} {:>6.1}%",
            b.mode.name(),
            format!("{}x{}", b.n, b.k),
            word(b.codebook),
            b.candidate.as_str(),
            b.median_us,
            b.gbps,
            b.pct_copy_bw
        );
    }
}

fn print_grouped(grouped: &[GroupedBest]) {
    if grouped.is_empty() {
        return;
    }
    println!(
        "\n{:<6} {:<14} {:<6} {:>3} {:<18} {:>9} {:>7}  inherits",
        "mode", "shape", "cb", "M", "best grouped", "median_us", "xM=1"
    );
    for g in grouped {
        println!(
            "{:<6} {:<14} {:<6} {:>3} {:<18} {:>9.2} {:>7.2}  {} (bpp {})",
            g.mode,
            format!("{}x{}", g.n, g.k),
            g.codebook,
            g.m,
            g.candidate,
            g.median_us,
            g.ratio_to_m1,
            g.m1_candidate,
            g.bpp
        );
    }
}

/// One prefill timing in TOPS (2 M N K / median): a tile at its inherited bpp, or a cuBLAS
/// baseline (codebook `-`). `auto` marks the tile the hand heuristic would pick.
#[derive(serde::Serialize)]
struct PrefillRow {
    mode: String,
    codebook: String,
    source_format: String,
    n: usize,
    k: usize,
    m: usize,
    candidate: String,
    median_us: f64,
    p95_us: f64,
    tops: f64,
    bpp: usize,
    m1_candidate: String,
    auto: bool,
    /// Dropped by racing (clearly slower than the leader after a few rounds).
    dropped: bool,
}

impl PrefillRow {
    fn kernel(r: &TimingRow, auto: &CandidateId) -> Self {
        PrefillRow {
            mode: r.mode.to_string(),
            codebook: word(r.codebook),
            source_format: word(r.source_format),
            n: r.n,
            k: r.k,
            m: r.m,
            candidate: r.candidate.to_string(),
            median_us: r.median_us,
            p95_us: r.p95_us,
            tops: 2.0 * (r.m * r.n * r.k) as f64 / (r.median_us * 1e-6) / 1e12,
            bpp: r.bpp,
            m1_candidate: r.m1_candidate.as_ref().map_or_else(String::new, |c| c.to_string()),
            auto: r.candidate == *auto,
            dropped: r.dropped,
        }
    }

    fn baseline(mode: Mode, name: &str, m: usize, n: usize, k: usize, t: &Timed, ops: f64) -> Self {
        let s = summarize(&t.measured()).expect("baseline has samples");
        PrefillRow {
            mode: mode.name().into(),
            codebook: "-".into(),
            source_format: "-".into(),
            n,
            k,
            m,
            candidate: name.into(),
            median_us: s.median,
            p95_us: s.p95,
            tops: ops / (s.median * 1e-6) / 1e12,
            bpp: 0,
            m1_candidate: String::new(),
            auto: false,
            dropped: false,
        }
    }
}

/// Per (mode, shape, M, codebook): the best tile and the `auto` tile in TOPS, beside the
/// cuBLAS baselines of that (mode, shape, M).
fn print_prefill(rows: &[PrefillRow]) {
    if rows.is_empty() {
        return;
    }
    println!(
        "\n{:<6} {:<11} {:>5} {:<5} {:<24} {:>9} {:>6} {:>6} {:>9} {:>8}",
        "mode", "shape", "M", "cb", "best prefill tile", "median_us", "TOPS", "auto", "cuBLASf16", "LtInt8"
    );
    let mut keys: Vec<(&str, usize, usize, usize, &str)> = rows
        .iter()
        .filter(|r| r.codebook != "-")
        .map(|r| (r.mode.as_str(), r.n, r.k, r.m, r.codebook.as_str()))
        .collect();
    keys.dedup();
    for (mode, n, k, m, cb) in keys {
        let same = |r: &&PrefillRow| r.mode == mode && r.n == n && r.k == k && r.m == m;
        let tops_of = |name: &str| rows.iter().filter(same).find(|r| r.candidate == name).map_or(f64::NAN, |r| r.tops);
        let mine: Vec<&PrefillRow> = rows.iter().filter(same).filter(|r| r.codebook == cb).collect();
        let Some(best) = mine.iter().copied().filter(|r| !r.dropped).min_by(|a, b| a.median_us.total_cmp(&b.median_us))
        else {
            continue;
        };
        let auto = mine.iter().find(|r| r.auto).map_or(f64::NAN, |r| r.tops);
        println!(
            "{:<6} {:<11} {:>5} {:<5} {:<24} {:>9.1} {:>6.0} {:>6.0} {:>9.0} {:>8.0}",
            mode,
            format!("{n}x{k}"),
            m,
            cb,
            best.candidate,
            best.median_us,
            best.tops,
            auto,
            tops_of("cublas.f16.gemm"),
            tops_of("cublaslt.i8.gemm")
        );
    }
}

/// The best grouped candidate for one (mode, shape, codebook, M) against the best M = 1.
#[derive(serde::Serialize)]
struct GroupedBest {
    mode: String,
    codebook: String,
    n: usize,
    k: usize,
    m: usize,
    candidate: String,
    median_us: f64,
    ratio_to_m1: f64,
    m1_candidate: String,
    m1_median_us: f64,
    bpp: usize,
}

impl GroupedBest {
    fn new(g: &TimingRow, m1: &TimingRow) -> Self {
        GroupedBest {
            mode: g.mode.to_string(),
            codebook: word(g.codebook),
            n: g.n,
            k: g.k,
            m: g.m,
            candidate: g.candidate.to_string(),
            median_us: g.median_us,
            ratio_to_m1: g.median_us / m1.median_us,
            m1_candidate: m1.candidate.to_string(),
            m1_median_us: m1.median_us,
            bpp: g.bpp,
        }
    }
}
