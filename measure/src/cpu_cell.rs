//! The `cpu` backend: the CPU kernels (`vnni_kernels::cpu`) timed on the host's monotonic
//! clock under the shared protocol, checked bit for bit against the reference, in a rayon
//! pool of a fixed thread count (the `units` of the waves formulas).

use std::collections::BTreeMap;
use std::time::Instant;

use crate::error::{MeasureError, Result};
use vnni_corpus::staged::InheritedPick;
use vnni_kernels::fixture::{self, derive_seed};
use vnni_kernels::reference::gemm_columns;
use vnni_kernels::registry::{candidates, PREFILL_MIN_M};
use vnni_kernels::{cpu, quantize_activations, Backend, CandidateId, Mode, PackedMatrix, SourceFormat, Surface};

use crate::cell::{best_row, cell_weights, check_columns, CellResult, FIXTURE_SEED};
use crate::protocol::{calibrated_replays, run_rounds, Protocol, Timed};
use crate::rows::{compare, gather, mode_rows, CellContext, Checked, ModeTimings};

pub struct CpuSession {
    pool: rayon::ThreadPool,
    pub threads: usize,
    pub device: String,
    pub arch: String,
    /// Host memcpy bandwidth measured at open, the roofline of `pct_copy_bw`.
    pub copy_gbps: f64,
}

/// The CPU model name (`/proc/cpuinfo`), else the architecture.
fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// Best of five 64 MiB copies, in GB/s (bytes read + written).
fn host_copy_gbps() -> f64 {
    let src = vec![1u8; 64 << 20];
    let mut dst = vec![0u8; 64 << 20];
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        best = best.min(t.elapsed().as_secs_f64());
        std::hint::black_box(&dst);
    }
    2.0 * src.len() as f64 / best / 1e9
}

impl CpuSession {
    /// A pool of `threads` workers (0: every available core).
    pub fn open(threads: usize) -> Result<CpuSession> {
        let threads = if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads };
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
        Ok(CpuSession {
            pool,
            threads,
            device: format!("{} ({threads} threads)", cpu_name()),
            arch: std::env::consts::ARCH.to_string(),
            copy_gbps: host_copy_gbps(),
        })
    }

    /// One cell: every CPU decode candidate at M = 1, then the grouped candidates at each
    /// M >= 2 of `m_values` with the bpp of the fastest eligible decode candidate; or, given
    /// the frozen M = 1 pick of a staged collection (`inherit`: the eager pick), no decode
    /// rows and the grouped candidates at that pick's bpp.
    pub fn run_cell(
        &self,
        format: SourceFormat,
        n: usize,
        k: usize,
        m_values: &[usize],
        protocol: &Protocol,
        inherit: Option<&InheritedPick>,
    ) -> Result<CellResult> {
        self.pool.install(|| self.cell(format, n, k, m_values, protocol, inherit))
    }

    /// The decode candidates `ids` alone at M = 1, each with its own bpp (a pair timed again,
    /// `crate::pairs`); an id the CPU backend does not have is an error.
    pub fn run_decode(
        &self,
        format: SourceFormat,
        n: usize,
        k: usize,
        ids: &[CandidateId],
        protocol: &Protocol,
    ) -> Result<CellResult> {
        let all = candidates(Backend::Cpu, Surface::Decode);
        if let Some(id) = ids.iter().find(|id| !all.iter().any(|c| &c.id == *id)) {
            return Err(MeasureError::Invalid(format!("{id} is not a decode candidate of the cpu backend")));
        }
        self.pool.install(|| {
            let w = cell_weights(format, n, k, FIXTURE_SEED)?;
            let cols = check_columns(n, 1, derive_seed(FIXTURE_SEED, "columns"));
            let ctx = self.context(format, n, k, &w, cols.len());
            let mut out = CellResult::default();
            self.decode_rows(&ctx, &w, &cols, protocol, Some(ids), &mut out)?;
            Ok(out)
        })
    }

    /// What the rows of a cell of `format` n x k share (M = 1 until a grouped M sets it).
    fn context<'s>(
        &'s self,
        format: SourceFormat,
        n: usize,
        k: usize,
        w: &PackedMatrix,
        checked: usize,
    ) -> CellContext<'s> {
        CellContext {
            backend: Backend::Cpu,
            arch: &self.arch,
            device: &self.device,
            format,
            m: 1,
            n,
            k,
            m1_candidate: None,
            weight_bytes: w.bytes(),
            weight_copies: 1,
            checked,
            copy_gbps: self.copy_gbps,
        }
    }

    fn cell(
        &self,
        format: SourceFormat,
        n: usize,
        k: usize,
        m_values: &[usize],
        protocol: &Protocol,
        inherit: Option<&InheritedPick>,
    ) -> Result<CellResult> {
        let w = cell_weights(format, n, k, FIXTURE_SEED)?;
        let max_m = m_values.iter().copied().filter(|&m| m < PREFILL_MIN_M).max().unwrap_or(1);
        let cols = check_columns(n, max_m, derive_seed(FIXTURE_SEED, "columns"));
        let mut out = CellResult::default();
        let mut ctx = self.context(format, n, k, &w, cols.len());

        let (m1, bpp) = match inherit {
            Some(p) => (p.candidate.clone(), p.bpp),
            None => {
                self.decode_rows(&ctx, &w, &cols, protocol, None, &mut out)?;
                // Grouped rows inherit the fastest decode candidate's bpp.
                match best_row(&out.rows, Mode::Eager) {
                    Some(best) => (best.candidate.clone(), best.bpp),
                    None => return Ok(out),
                }
            }
        };
        // The CPU backend has no prefill surface: M >= 32 gets no rows.
        let grouped = candidates(Backend::Cpu, Surface::Grouped);
        for &m in m_values.iter().filter(|&&m| (2..PREFILL_MIN_M).contains(&m)) {
            let a = quantize_activations(&fixture::activations(m, k, FIXTURE_SEED), m, k)?;
            let want = gemm_columns(&w, &a, bpp, &cols)?;
            let mut runs = Vec::new();
            for g in &grouped {
                let got = cpu::grouped(g, &w, &a, bpp)?;
                let (mismatches, first_mismatch) = compare(&gather(&got, &cols, m, n), &want, &cols, m);
                runs.push(Checked { id: g.id.clone(), bpp, mismatches, first_mismatch, registers: 0, occupancy: 0 });
            }
            let eligible: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].mismatches == 0).collect();
            let pm = Protocol { seed: timing_seed(format, m, n, k), ..protocol.clone() };
            let timed = time_cpu(&pm, eligible.len(), &mut |i| {
                cpu::grouped(&grouped[eligible[i]], &w, &a, bpp).map(|r| drop(std::hint::black_box(r)))
            })?;
            ctx.m = m;
            ctx.m1_candidate = Some(&m1);
            let t = ModeTimings { mode: Mode::Eager, protocol: &pm, runs: &runs, eligible: &eligible, timed: &timed };
            mode_rows(&ctx, &t, &mut out);
        }
        Ok(out)
    }

    /// M = 1: every decode candidate (or those of `only`) with its own bpp.
    fn decode_rows(
        &self,
        ctx: &CellContext,
        w: &PackedMatrix,
        cols: &[usize],
        protocol: &Protocol,
        only: Option<&[CandidateId]>,
        out: &mut CellResult,
    ) -> Result<()> {
        let (n, k, units) = (ctx.n, ctx.k, self.threads as u32);
        let a = quantize_activations(&fixture::activations(1, k, FIXTURE_SEED), 1, k)?;
        let decode: Vec<_> = candidates(Backend::Cpu, Surface::Decode)
            .into_iter()
            .filter(|c| only.is_none_or(|ids| ids.contains(&c.id)) && c.plan(n, k, units).is_some())
            .collect();
        let mut reference: BTreeMap<usize, Vec<f32>> = BTreeMap::new();
        let mut runs = Vec::new();
        for c in &decode {
            let (bpp, got) = cpu::decode(c, w, &a, units)?;
            let want = match reference.entry(bpp) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => e.insert(gemm_columns(w, &a, bpp, cols)?),
            };
            let (mismatches, first_mismatch) = compare(&gather(&got, cols, 1, n), want, cols, 1);
            runs.push(Checked { id: c.id.clone(), bpp, mismatches, first_mismatch, registers: 0, occupancy: 0 });
        }
        let eligible: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].mismatches == 0).collect();
        let p1 = Protocol { seed: timing_seed(ctx.format, 1, n, k), ..protocol.clone() };
        let timed = time_cpu(&p1, eligible.len(), &mut |i| {
            cpu::decode(&decode[eligible[i]], w, &a, units).map(|r| drop(std::hint::black_box(r)))
        })?;
        let t = ModeTimings { mode: Mode::Eager, protocol: &p1, runs: &runs, eligible: &eligible, timed: &timed };
        mode_rows(ctx, &t, out);
        Ok(())
    }
}

/// The seed of the timing order of `format`'s n x k rows at M = m: the same for a cell and
/// for a pair of its candidates timed again.
fn timing_seed(format: SourceFormat, m: usize, n: usize, k: usize) -> u64 {
    derive_seed(FIXTURE_SEED, &format!("{format} {m} {n} {k}"))
}

/// The protocol on the host clock: calibrate replays, then the shared rounds.
fn time_cpu<E: Into<MeasureError>>(
    protocol: &Protocol,
    count: usize,
    run: &mut dyn FnMut(usize) -> Result<(), E>,
) -> Result<Vec<Timed>> {
    let mut timed = vec![Timed::default(); count];
    for (c, t) in timed.iter_mut().enumerate() {
        run(c).map_err(Into::into)?;
        t.replays = calibrated_replays(protocol.min_sample_us, &mut |n| -> Result<f64> {
            let start = Instant::now();
            for _ in 0..n {
                run(c).map_err(Into::into)?;
            }
            Ok(start.elapsed().as_secs_f64() * 1e6)
        })?;
    }
    // One weight copy: a later pass is independent in time only.
    let mut sample = |_pass: usize, c: usize, replays: usize| -> Result<f64> {
        let start = Instant::now();
        for _ in 0..replays {
            run(c).map_err(Into::into)?;
        }
        Ok(start.elapsed().as_secs_f64() * 1e6 / replays as f64)
    };
    run_rounds(protocol, Mode::Eager, &mut timed, &mut sample)?;
    Ok(timed)
}
