//! `bench --chain`: the layers of one model timed end to end per (codebook, mode), each with
//! its best decode candidate of the run, launched plainly and programmatically
//! (`vnni_measure::chain`), against the time the chain's weight bytes take at the copy
//! bandwidth.

use anyhow::{Context, Result};
use vnni_corpus::{SampleRow, TimingRow};
use vnni_kernels::registry::find;
use vnni_kernels::SourceFormat;
use vnni_measure::chain::{time_chain, ChainLayer};
use vnni_measure::stats::summarize;

use super::{samples_as, Bench};

/// One chain timing (chain.csv).
#[derive(serde::Serialize)]
pub(super) struct ChainRow {
    mode: String,
    codebook: String,
    /// `plain` or `programmatic`.
    launch: String,
    /// The layers' N x K, joined by `+`.
    layers: String,
    /// The layers' candidates, joined by `+`.
    candidates: String,
    weight_bytes: usize,
    weight_copies: usize,
    samples: usize,
    median_us: f64,
    p95_us: f64,
    /// The sum of the layers' medians timed alone, without the activation quantization the
    /// chain runs before each layer: this run's best decode rows (launched
    /// programmatically under `bench --programmatic`, else plainly), of the codebook's first
    /// source format as every bench row.
    alone_us: f64,
    /// The weight bytes at the copy bandwidth.
    copy_us: f64,
    /// median_us / copy_us.
    x_copy: f64,
}

/// Every (codebook, mode) of the run: its chain, plain and programmatic; samples join
/// `samples` (candidate `chain.plain` / `chain.programmatic`, N = K = 0).
pub(super) fn run(bench: &Bench, best: &[TimingRow], samples: &mut Vec<SampleRow>) -> Result<Vec<ChainRow>> {
    let (gpu, s) = (&bench.session.gpu, bench.session);
    let shapes = &bench.args.chain.0;
    let layers_text = shapes.iter().map(|(n, k)| format!("{n}x{k}")).collect::<Vec<_>>().join("+");
    let mut rows = Vec::new();
    for &cb in &s.codebooks {
        let format = SourceFormat::aliases_of(cb)[0];
        for &mode in &s.modes {
            let mut layers = Vec::new();
            let mut alone_us = 0.0;
            for &(n, k) in shapes {
                let b = best
                    .iter()
                    .find(|r| r.m == 1 && r.mode == mode && r.n == n && r.k == k && r.codebook == Some(cb))
                    .with_context(|| format!("no eligible decode row for {cb} {n}x{k} in {mode} mode"))?;
                let candidate = find(b.candidate.as_str())
                    .with_context(|| format!("{} is not a registry candidate", b.candidate))?
                    .clone();
                alone_us += b.median_us;
                layers.push(ChainLayer { format, n, k, candidate });
            }
            let t = time_chain(gpu, &layers, mode, &s.protocol)?;
            let copy_us = t.weight_bytes as f64 / (bench.copy_gbps * 1e3);
            for (launch, timed) in [("plain", &t.plain), ("programmatic", &t.programmatic)] {
                let stats = summarize(&timed.measured()).context("a chain form has no samples")?;
                rows.push(ChainRow {
                    mode: mode.to_string(),
                    codebook: cb.to_string(),
                    launch: launch.into(),
                    layers: layers_text.clone(),
                    candidates: layers.iter().map(|l| l.candidate.id.to_string()).collect::<Vec<_>>().join("+"),
                    weight_bytes: t.weight_bytes,
                    weight_copies: t.copies,
                    samples: timed.measured().len(),
                    median_us: stats.median,
                    p95_us: stats.p95,
                    alone_us,
                    copy_us,
                    x_copy: stats.median / copy_us,
                });
                samples.extend(samples_as(mode, Some(format), &format!("chain.{launch}"), 1, 0, 0, timed));
            }
        }
    }
    Ok(rows)
}

pub(super) fn print(rows: &[ChainRow]) {
    if rows.is_empty() {
        return;
    }
    println!(
        "\n{:<6} {:<6} {:<13} {:>6} {:>9} {:>9} {:>8} {:>7}  layers {}",
        "mode", "cb", "launch", "MB", "chain_us", "alone_us", "copy_us", "xcopy", rows[0].layers
    );
    for r in rows {
        println!(
            "{:<6} {:<6} {:<13} {:>6.1} {:>9.2} {:>9.2} {:>8.2} {:>7.3}",
            r.mode,
            r.codebook,
            r.launch,
            r.weight_bytes as f64 / 1e6,
            r.median_us,
            r.alone_us,
            r.copy_us,
            r.x_copy
        );
    }
}
