//! `vnni-dispatch sweep`: the decode (M = 1) sweep over a list of shapes, cell by cell.
//! A cell (codebook x N x K, all candidates, all modes) is published atomically into
//! `<out>/cells/`; a rerun of the same command skips published cells and ignores any
//! `.inprogress` leftovers, so a killed sweep resumes where it stopped. When every cell is
//! there, the aggregate CSVs are assembled in plan order.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Serialize;
use vnni_corpus::read::{read_samples, read_timing};
use vnni_corpus::{SampleRow, TimingRow};
use vnni_kernels::cuda::source::kernel_source_digest;
use vnni_kernels::registry::{decode_candidates, grouped_candidates, registry_digest, GROUPED_M};
use vnni_kernels::Codebook;

use crate::baselines::copy_bandwidth;
use crate::cell::{best_row, run_cell, CellFixture, CellInputs, Surface, FIXTURE_SEED};
use crate::shapes::parse_shapes;
use crate::timing::{GpuSession, GpuTimingArgs, Mode};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_parser = ["cuda"], default_value = "cuda")]
    backend: String,
    /// N x K shapes, comma-separated (the small built-in inventory by default).
    #[arg(long, default_value = "4096x4096,4096x12288,12288x4096,24576x4096,151936x4096")]
    shapes: String,
    #[command(flatten)]
    gpu: GpuTimingArgs,
    #[arg(long, default_value = "target/sweep")]
    out: PathBuf,
}

#[derive(Serialize)]
struct Plan<'a> {
    surface: &'static str,
    backend: &'a str,
    arch: &'a str,
    device: &'a str,
    shapes: &'a [(usize, usize)],
    codebooks: Vec<&'static str>,
    modes: &'a [String],
    warmups: usize,
    samples: usize,
    registry_digest: String,
    kernel_source_digest: String,
}

/// A cell's aggregate rows and raw samples. One cell = one (codebook, N, K): the M = 1
/// candidates and the grouped rows (M = 2..16, 31) at the best M = 1 candidate's bpp.
fn cell_paths(out: &Path, cb: Codebook, n: usize, k: usize) -> (PathBuf, PathBuf) {
    let dir = out.join("cells");
    (dir.join(format!("{cb}-{n}x{k}.csv")), dir.join(format!("{cb}-{n}x{k}.timing.csv.zst")))
}

pub fn run(args: &Args) -> Result<()> {
    let shapes = parse_shapes(&args.shapes)?;
    let GpuSession { gpu, codebooks, modes, protocol, resources, rejected } = args.gpu.open()?;
    let plan = Plan {
        surface: "decode_m1+grouped",
        backend: &args.backend,
        arch: &gpu.info.arch,
        device: &gpu.info.name,
        shapes: &shapes,
        codebooks: codebooks.iter().map(|c| c.name()).collect(),
        modes: &args.gpu.modes,
        warmups: args.gpu.warmups,
        samples: args.gpu.samples,
        registry_digest: registry_digest(),
        kernel_source_digest: kernel_source_digest(),
    };
    let plan_json = serde_json::to_string_pretty(&plan)?;
    let plan_path = args.out.join("plan.json");
    match std::fs::read_to_string(&plan_path) {
        Ok(old) if old != plan_json => bail!(
            "{} holds another plan (different shapes, candidates or kernels); use a new --out or delete it",
            plan_path.display()
        ),
        Ok(_) => {}
        Err(_) => vnni_corpus::write_bytes(&plan_path, plan_json.as_bytes())?,
    }
    vnni_corpus::write_csv(&args.out.join("resources.csv"), &resources)?;
    let (copy_gbps, ..) = copy_bandwidth(&gpu, &protocol)?;
    let candidates = decode_candidates();
    let grouped = grouped_candidates();
    let (mut done, mut skipped) = (0, 0);
    for &(n, k) in &shapes {
        for &cb in &codebooks {
            let (rows_path, samples_path) = cell_paths(&args.out, cb, n, k);
            if rows_path.exists() && samples_path.exists() {
                skipped += 1;
                continue;
            }
            let fx = CellFixture::new(&gpu, cb, n, k, FIXTURE_SEED)?;
            let inputs = CellInputs::decode(&candidates, &modes, &protocol, &rejected, copy_gbps);
            let mut cell = run_cell(&gpu, &fx, &inputs)?;
            // Grouped rows inherit the bpp of the best graph-mode M = 1 candidate (what the
            // policy would pick), timed in every mode.
            if let Some(m1) =
                best_row(&cell.rows, Mode::Graph.name()).or_else(|| best_row(&cell.rows, Mode::Eager.name())).cloned()
            {
                for m in GROUPED_M {
                    let surface = Surface::Grouped { m, m1_candidate: m1.candidate.clone(), bpp: m1.bpp };
                    let g = run_cell(&gpu, &fx, &inputs.retarget(surface, &grouped, &modes))?;
                    cell.rows.extend(g.rows);
                    cell.samples.extend(g.samples);
                }
            }
            // Samples first: a cell counts as published once its aggregate exists.
            vnni_corpus::write_csv(&samples_path, &cell.samples)?;
            vnni_corpus::write_csv(&rows_path, &cell.rows)?;
            done += 1;
            eprintln!("cell {cb} {n}x{k}: {} rows, {} samples", cell.rows.len(), cell.samples.len());
        }
    }
    let mut rows: Vec<TimingRow> = Vec::new();
    let mut samples: Vec<SampleRow> = Vec::new();
    for &(n, k) in &shapes {
        for &cb in &codebooks {
            let (rows_path, samples_path) = cell_paths(&args.out, cb, n, k);
            // The validating readers: a torn or edited cell file stops the aggregate here.
            rows.extend(read_timing(&rows_path)?);
            samples.extend(read_samples(&samples_path)?);
        }
    }
    let (m1_rows, grouped_rows): (Vec<TimingRow>, Vec<TimingRow>) = rows.iter().cloned().partition(|r| r.m == 1);
    let (m1_samples, grouped_samples): (Vec<SampleRow>, Vec<SampleRow>) =
        samples.iter().cloned().partition(|r| r.m == 1);
    vnni_corpus::write_csv(&args.out.join("decode_m1.csv"), &m1_rows)?;
    vnni_corpus::write_csv(&args.out.join("decode_m1.timing.csv.zst"), &m1_samples)?;
    vnni_corpus::write_csv(&args.out.join("grouped.csv"), &grouped_rows)?;
    vnni_corpus::write_csv(&args.out.join("grouped.timing.csv.zst"), &grouped_samples)?;
    let mismatched = rows.iter().filter(|r| r.mismatches > 0).count();
    let eligible = rows.iter().filter(|r| r.eligible).count();
    println!(
        "sweep: {} cells ({done} run, {skipped} already published), {} rows ({eligible} eligible, {mismatched} mismatched), {} samples -> {}",
        shapes.len() * codebooks.len(),
        rows.len(),
        samples.len(),
        args.out.display()
    );
    if mismatched > 0 {
        bail!("{mismatched} candidate rows differ from the CPU reference (see first_mismatch in decode_m1.csv)");
    }
    Ok(())
}
