//! What every backend's cell does after running its candidates: compare outputs with the
//! reference bit for bit, and turn timed candidates into aggregate rows and raw samples.

use vnni_corpus::schema::hex_f64;
use vnni_corpus::{SampleRow, TimingRow};
use vnni_kernels::{Backend, CandidateId, Mode, SourceFormat};

use crate::cell::CellResult;
use crate::protocol::{Protocol, Timed};
use crate::stats::summarize;

/// The fixed facts of one cell surface (one M).
pub struct CellContext<'a> {
    pub backend: Backend,
    pub arch: &'a str,
    pub device: &'a str,
    pub format: SourceFormat,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Grouped and prefill rows: the M = 1 candidate whose bpp they inherit (none for decode).
    pub m1_candidate: Option<&'a CandidateId>,
    pub weight_bytes: usize,
    pub weight_copies: usize,
    /// Outputs compared per row.
    pub checked: usize,
    pub copy_gbps: f64,
}

/// One candidate after its correctness check.
pub struct Checked {
    pub id: CandidateId,
    pub bpp: usize,
    pub mismatches: usize,
    pub first_mismatch: String,
    pub registers: u32,
    pub occupancy: u32,
}

/// Compare `got` with `want`, both `[M][cols]` on `cols` ([`gather`]): (mismatches, first one).
pub fn compare(got: &[f32], want: &[f32], cols: &[usize], m: usize) -> (usize, String) {
    let mut mismatches = 0;
    let mut first = String::new();
    for r in 0..m {
        for (i, &col) in cols.iter().enumerate() {
            let (g, w) = (got[r * cols.len() + i], want[r * cols.len() + i]);
            if g.to_bits() != w.to_bits() {
                if mismatches == 0 {
                    first = format!("row {r} col {col}: got {:#010x} want {:#010x}", g.to_bits(), w.to_bits());
                }
                mismatches += 1;
            }
        }
    }
    (mismatches, first)
}

/// The checked columns of M output rows of width `n`, `[M][cols]`: what [`compare`] takes.
pub fn gather(y: &[f32], cols: &[usize], m: usize, n: usize) -> Vec<f32> {
    (0..m).flat_map(|r| cols.iter().map(move |&col| y[r * n + col])).collect()
}

/// The candidates of one mode after timing: `timed[i]` belongs to `runs[eligible[i]]`.
pub struct ModeTimings<'a> {
    pub mode: Mode,
    pub protocol: &'a Protocol,
    pub runs: &'a [Checked],
    pub eligible: &'a [usize],
    pub timed: &'a [Timed],
}

/// Rows and samples of one mode; ineligible candidates get a row (with their mismatch) and
/// no samples.
pub fn mode_rows(ctx: &CellContext, t: &ModeTimings, out: &mut CellResult) {
    let ModeTimings { mode, protocol, runs, eligible, timed } = *t;
    let (rows, samples) = (&mut out.rows, &mut out.samples);
    let codebook = ctx.format.codebook();
    for (ri, run) in runs.iter().enumerate() {
        let t = eligible.iter().position(|&e| e == ri).map(|p| &timed[p]);
        let measured = t.map(|t| t.measured()).unwrap_or_default();
        let s = summarize(&measured);
        let median = s.map_or(f64::NAN, |s| s.median);
        let gbps = ctx.weight_bytes as f64 / (median * 1e-6) / 1e9;
        rows.push(TimingRow {
            backend: ctx.backend,
            arch: ctx.arch.into(),
            device: ctx.device.into(),
            mode,
            source_format: Some(ctx.format),
            codebook: Some(codebook),
            m: ctx.m,
            n: ctx.n,
            k: ctx.k,
            candidate: run.id.clone(),
            m1_candidate: ctx.m1_candidate.cloned(),
            bpp: run.bpp,
            warmups: protocol.warmups,
            samples: measured.len(),
            replays: t.map_or(0, |t| t.replays),
            weight_copies: ctx.weight_copies,
            seed: protocol.seed,
            min_us: s.map_or(f64::NAN, |s| s.min),
            median_us: median,
            p95_us: s.map_or(f64::NAN, |s| s.p95),
            mad_us: s.map_or(f64::NAN, |s| s.mad),
            cv: s.map_or(f64::NAN, |s| s.cv),
            weight_bytes: ctx.weight_bytes,
            gbps,
            pct_copy_bw: 100.0 * gbps / ctx.copy_gbps,
            checked: ctx.checked,
            mismatches: run.mismatches,
            first_mismatch: run.first_mismatch.clone(),
            eligible: run.mismatches == 0,
            dropped: t.is_some_and(|t| t.dropped),
            registers: run.registers,
            occupancy_blocks_per_sm: run.occupancy,
        });
        if let Some(t) = t {
            samples.extend(t.samples.iter().map(|s| SampleRow {
                mode,
                source_format: Some(ctx.format),
                codebook: Some(codebook),
                m: ctx.m,
                n: ctx.n,
                k: ctx.k,
                candidate: run.id.clone(),
                pass: s.pass,
                round: s.round,
                order: s.order,
                warmup: s.warmup,
                latency_us_hex: hex_f64(s.latency_us),
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{compare, gather};

    /// Gathered columns keep every row in order, and a mismatch names its row and column.
    #[test]
    fn gathered_columns_compare_by_row_and_column() {
        let (m, n) = (3, 5);
        let y: Vec<f32> = (0..m * n).map(|i| i as f32).collect();
        let cols = [0, 3, 4];
        let got = gather(&y, &cols, m, n);
        assert_eq!(got, [0.0, 3.0, 4.0, 5.0, 8.0, 9.0, 10.0, 13.0, 14.0]);
        assert_eq!(compare(&got, &got, &cols, m), (0, String::new()));
        let mut want = got.clone();
        want[4] = -1.0;
        let (mismatches, first) = compare(&got, &want, &cols, m);
        assert_eq!(mismatches, 1);
        assert!(first.starts_with("row 1 col 3:"), "{first}");
    }
}
