//! `vnni-dispatch bench --backend cuda`: the copy roofline, cuBLAS fp16 GEMV and every
//! decode candidate per codebook on the same shapes, in one run; grouped rows and prefill
//! tiles at the bpp of the best decode candidate, the prefill tiles beside cuBLAS fp16 GEMM
//! (dequantized weights) and cuBLASLt int8 GEMM; writes CSVs and prints the best candidate per
//! (shape, codebook) against the copy bandwidth, and per prefill shape in TOPS.

use std::path::PathBuf;

use anyhow::{bail, Result};
use vnni_corpus::schema::hex_f64;
use vnni_corpus::{SampleRow, TimingRow};
use vnni_kernels::cuda::device::Gpu;
use vnni_kernels::registry::{decode_candidates, grouped_candidates, prefill_auto, prefill_candidates, PREFILL_MIN_M};
use vnni_kernels::SourceFormat;

use crate::baselines::{copy_bandwidth, cublas_f16_gemm, cublas_f16_gemv, cublaslt_i8_gemm};
use crate::cell::{best_row, run_cell, CellFixture, CellInputs, Surface, FIXTURE_SEED};
use crate::shapes::parse_shapes;
use crate::gpu_timing::{GpuSession, GpuTimingArgs};
use crate::stats::summarize;
use crate::timing::{Mode, Protocol, Timed};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_parser = ["cuda"], default_value = "cuda")]
    backend: String,
    /// N x K shapes, comma-separated.
    #[arg(long, default_value = "151936x4096,248320x5120,24576x4096,4096x12288,4096x4096")]
    shapes: String,
    #[command(flatten)]
    gpu: GpuTimingArgs,
    /// Shapes that also get grouped rows (M > 1) at the bpp of the best M = 1 candidate.
    #[arg(long, default_value = "151936x4096,24576x4096,4096x12288")]
    grouped_shapes: String,
    /// Row counts for the grouped rows (empty: none).
    #[arg(long, value_delimiter = ',', default_value = "2,4,8,16,31")]
    grouped_m: Vec<usize>,
    /// Shapes that also get prefill tiles (M >= 32) at the bpp of the best M = 1 candidate,
    /// beside cuBLAS fp16 and cuBLASLt int8 GEMMs (each must be in --shapes).
    #[arg(long, default_value = "24576x4096,4096x12288")]
    prefill_shapes: String,
    /// Row counts for the prefill tiles (empty: none).
    #[arg(long, value_delimiter = ',', default_value = "512,2048")]
    prefill_m: Vec<usize>,
    /// Output directory for decode.csv, samples.csv, resources.csv, best.csv, grouped.csv,
    /// prefill.csv.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
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

fn baseline_row(gpu: &Gpu, b: &Baseline, t: &Timed, copy_gbps: f64, p: &Protocol) -> TimingRow {
    let Baseline { mode, name, n, k, bytes, copies } = *b;
    let s = summarize(&t.measured()).expect("baseline has samples");
    let gbps = bytes as f64 / (s.median * 1e-6) / 1e9;
    TimingRow {
        backend: "cuda".into(),
        arch: gpu.info.arch.clone(),
        device: gpu.info.name.clone(),
        mode: mode.name().into(),
        source_format: "-".into(),
        codebook: "-".into(),
        m: 1,
        n,
        k,
        candidate: name.into(),
        m1_candidate: String::new(),
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
    t.samples
        .iter()
        .map(|s| SampleRow {
            mode: mode.name().into(),
            source_format: "-".into(),
            codebook: "-".into(),
            m,
            n,
            k,
            candidate: name.into(),
            round: s.round,
            order: s.order,
            warmup: s.warmup,
            latency_us_hex: hex_f64(s.latency_us),
        })
        .collect()
}

pub fn run(args: &Args) -> Result<()> {
    let shapes = parse_shapes(&args.shapes)?;
    let GpuSession { gpu, codebooks, modes, protocol, resources, rejected } = args.gpu.open()?;
    eprintln!(
        "device {} ({}, {} SMs, L2 {} MiB, driver {})",
        gpu.info.name,
        gpu.info.arch,
        gpu.info.sms,
        gpu.info.l2_bytes >> 20,
        gpu.info.driver_version
    );

    let mut rows: Vec<TimingRow> = Vec::new();
    let mut samples: Vec<SampleRow> = Vec::new();
    let (copy_gbps, _, copy_t, copy_bytes) = copy_bandwidth(&gpu, &protocol)?;
    eprintln!("copy bandwidth {copy_gbps:.0} GB/s (read + write)");
    let copy = Baseline { mode: Mode::Eager, name: "copy", n: 0, k: 0, bytes: 2 * copy_bytes, copies: 1 };
    rows.push(baseline_row(&gpu, &copy, &copy_t, copy_gbps, &protocol));
    samples.extend(samples_of(Mode::Eager, "copy", 1, 0, 0, &copy_t));

    let candidates = decode_candidates();
    let grouped = grouped_candidates();
    let grouped_shapes = parse_shapes(&args.grouped_shapes)?;
    let mut grouped_summary: Vec<GroupedBest> = Vec::new();
    let prefill = prefill_candidates();
    let prefill_shapes = parse_shapes(&args.prefill_shapes)?;
    if let Some((n, k)) = prefill_shapes.iter().find(|s| !shapes.contains(s)) {
        bail!("--prefill-shapes {n}x{k} is not in --shapes: prefill inherits the bpp of that shape's best decode candidate");
    }
    let mut prefill_rows: Vec<PrefillRow> = Vec::new();
    for &(n, k) in &shapes {
        if prefill_shapes.contains(&(n, k)) {
            for &m in args.prefill_m.iter().filter(|&&m| m >= PREFILL_MIN_M) {
                for &mode in &modes {
                    let ops = 2.0 * (m * n * k) as f64;
                    let (t, _) = cublas_f16_gemm(&gpu, m, n, k, mode, &protocol)?;
                    prefill_rows.push(PrefillRow::baseline(mode, "cublas.f16.gemm", m, n, k, &t, ops));
                    samples.extend(samples_of(mode, "cublas.f16.gemm", m, n, k, &t));
                    let (t, _) = cublaslt_i8_gemm(&gpu, m, n, k, mode, &protocol)?;
                    prefill_rows.push(PrefillRow::baseline(mode, "cublaslt.i8.gemm", m, n, k, &t, ops));
                    samples.extend(samples_of(mode, "cublaslt.i8.gemm", m, n, k, &t));
                }
            }
        }
        for &mode in &modes {
            let (t, bytes, copies) = cublas_f16_gemv(&gpu, n, k, mode, &protocol)?;
            let b = Baseline { mode, name: "cublas.f16.gemv", n, k, bytes, copies };
            rows.push(baseline_row(&gpu, &b, &t, copy_gbps, &protocol));
            samples.extend(samples_of(mode, "cublas.f16.gemv", 1, n, k, &t));
        }
        for &cb in &codebooks {
            let started = std::time::Instant::now();
            // The codebook's first source format stands for it (aliases share the kernels).
            let fx = CellFixture::new(&gpu, SourceFormat::aliases_of(cb)[0], n, k, FIXTURE_SEED)?;
            let inputs = CellInputs::decode(&candidates, &modes, &protocol, &rejected, copy_gbps);
            let cell = run_cell(&gpu, &fx, &inputs)?;
            let mut cell_rows = cell.rows;
            // The M = 1 rows the batched surfaces inherit from (before grouped rows join them).
            let decode_rows = cell_rows.clone();
            samples.extend(cell.samples);
            if grouped_shapes.contains(&(n, k)) {
                for &mode in &modes {
                    let Some(m1) = best_row(&decode_rows, mode.name()).cloned() else { continue };
                    for &m in &args.grouped_m {
                        let surface = Surface::Inherited { m, m1_candidate: m1.candidate.clone(), bpp: m1.bpp };
                        let one_mode = [mode];
                        let g = run_cell(&gpu, &fx, &inputs.retarget(surface, &grouped, &one_mode))?;
                        grouped_summary.extend(best_row(&g.rows, mode.name()).map(|b| GroupedBest::new(b, &m1)));
                        cell_rows.extend(g.rows);
                        samples.extend(g.samples);
                    }
                }
            }
            if prefill_shapes.contains(&(n, k)) {
                for &mode in &modes {
                    let Some(m1) = best_row(&decode_rows, mode.name()).cloned() else { continue };
                    for &m in args.prefill_m.iter().filter(|&&m| m >= PREFILL_MIN_M) {
                        let surface = Surface::Inherited { m, m1_candidate: m1.candidate.clone(), bpp: m1.bpp };
                        let one_mode = [mode];
                        let p = run_cell(&gpu, &fx, &inputs.retarget(surface, &prefill, &one_mode))?;
                        let auto = prefill_auto(n, m, gpu.info.sms).id;
                        // Raced-out tiles keep their (partial) medians: `auto` may be one of them.
                        prefill_rows.extend(p.rows.iter().filter(|r| r.eligible).map(|r| PrefillRow::kernel(r, &auto)));
                        cell_rows.extend(p.rows);
                        samples.extend(p.samples);
                    }
                }
            }
            for r in cell_rows.iter().filter(|r| r.mismatches > 0) {
                eprintln!(
                    "MISMATCH {} {cb} M={} {n}x{k}: {} of {} ({})",
                    r.candidate, r.m, r.mismatches, r.checked, r.first_mismatch
                );
            }
            eprintln!("{cb} {n}x{k}: {} rows in {:.1}s", cell_rows.len(), started.elapsed().as_secs_f64());
            rows.extend(cell_rows);
        }
    }

    // Best eligible candidate per (mode, shape, codebook).
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
    std::fs::create_dir_all(&args.out)?;
    vnni_corpus::write_csv(&args.out.join("decode.csv"), &rows)?;
    vnni_corpus::write_csv(&args.out.join("best.csv"), &best)?;
    vnni_corpus::write_csv(&args.out.join("samples.csv"), &samples)?;
    vnni_corpus::write_csv(&args.out.join("resources.csv"), &resources)?;
    vnni_corpus::write_csv(&args.out.join("grouped.csv"), &grouped_summary)?;
    vnni_corpus::write_csv(&args.out.join("prefill.csv"), &prefill_rows)?;
    let mismatched = rows.iter().filter(|r| r.mismatches > 0).count();
    println!(
        "\n{} | copy {copy_gbps:.0} GB/s | {} candidate rows, {mismatched} with mismatches",
        gpu.info.name,
        rows.len()
    );
    println!(
        "{:<6} {:<14} {:<6} {:<34} {:>9} {:>8} {:>7}",
        "mode", "shape", "cb", "best candidate", "median_us", "GB/s", "%copy"
    );
    for b in best.iter().filter(|b| b.m == 1) {
        println!(
            "{:<6} {:<14} {:<6} {:<34} {:>9.2} {:>8.0} {:>6.1}%",
            b.mode,
            format!("{}x{}", b.n, b.k),
            b.codebook,
            b.candidate,
            b.median_us,
            b.gbps,
            b.pct_copy_bw
        );
    }
    if !grouped_summary.is_empty() {
        println!(
            "\n{:<6} {:<14} {:<6} {:>3} {:<18} {:>9} {:>7}  inherits",
            "mode", "shape", "cb", "M", "best grouped", "median_us", "xM=1"
        );
        for g in &grouped_summary {
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
    print_prefill(&prefill_rows);
    if mismatched > 0 {
        bail!("{mismatched} candidate rows differ from the CPU reference");
    }
    Ok(())
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
    fn kernel(r: &TimingRow, auto: &str) -> Self {
        PrefillRow {
            mode: r.mode.clone(),
            codebook: r.codebook.clone(),
            source_format: r.source_format.clone(),
            n: r.n,
            k: r.k,
            m: r.m,
            candidate: r.candidate.clone(),
            median_us: r.median_us,
            p95_us: r.p95_us,
            tops: 2.0 * (r.m * r.n * r.k) as f64 / (r.median_us * 1e-6) / 1e12,
            bpp: r.bpp,
            m1_candidate: r.m1_candidate.clone(),
            auto: r.candidate == auto,
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
            mode: g.mode.clone(),
            codebook: g.codebook.clone(),
            n: g.n,
            k: g.k,
            m: g.m,
            candidate: g.candidate.clone(),
            median_us: g.median_us,
            ratio_to_m1: g.median_us / m1.median_us,
            m1_candidate: m1.candidate.clone(),
            m1_median_us: m1.median_us,
            bpp: g.bpp,
        }
    }
}
