//! One cell on the GPU (decode M = 1, or grouped M rows): fixtures, GPU activation quantization checked
//! against the CPU, every applicable candidate checked byte for byte against the CPU
//! reference for its bpp, then the eligible ones timed under the protocol.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use cudarc::driver::CudaSlice;
use vnni_corpus::schema::hex_f64;
use vnni_corpus::{SampleRow, TimingRow};
use vnni_kernels::cuda::device::{DeviceMatrix, Gpu};
use vnni_kernels::fixture::{self, derive_seed, splitmix64};
use vnni_kernels::reference::gemm_columns;
use vnni_kernels::registry::{Candidate, Plan};
use vnni_kernels::{quantize_activations, Codebook, PackedMatrix};

use crate::stats::summarize;
use crate::timing::{time_candidates, Mode, Protocol};

/// Columns compared with the CPU reference: all of them up to this N, else a seeded sample this large.
pub const FULL_CHECK_MAX_N: usize = 8192;
pub const SAMPLED_COLUMNS: usize = 4096;

pub struct CellResult {
    pub rows: Vec<TimingRow>,
    pub samples: Vec<SampleRow>,
}

/// Distinct sorted columns to check.
pub fn check_columns(n: usize, seed: u64) -> Vec<usize> {
    if n <= FULL_CHECK_MAX_N {
        return (0..n).collect();
    }
    let mut cols: Vec<usize> =
        (0..SAMPLED_COLUMNS as u64 * 2).map(|i| (splitmix64(seed, i) % n as u64) as usize).collect();
    cols.push(0);
    cols.push(n - 1);
    cols.sort_unstable();
    cols.dedup();
    cols.truncate(SAMPLED_COLUMNS.max(2));
    cols
}

/// Weight copies so that the bytes touched between two uses of one copy exceed 3 x L2.
pub fn copies_for(bytes: usize, l2: usize) -> usize {
    if bytes >= 3 * l2 {
        1
    } else {
        (3 * l2).div_ceil(bytes) + 1
    }
}

/// Weights of one (codebook, N, K): the host matrix (for the CPU reference) and rotated
/// device copies (more than 3 x L2 touched between two uses of one copy).
pub struct CellFixture {
    pub w: PackedMatrix,
    pub mats: Vec<DeviceMatrix>,
}

impl CellFixture {
    pub fn new(gpu: &Gpu, codebook: Codebook, n: usize, k: usize, seed: u64) -> Result<Self> {
        let w = fixture::packed_matrix(codebook, n, k, seed).with_context(|| format!("fixture {codebook} {n}x{k}"))?;
        let first = gpu.upload_matrix(&w)?;
        let copies = copies_for(first.bytes(), gpu.info.l2_bytes);
        let mut mats = vec![first];
        for _ in 1..copies {
            mats.push(gpu.duplicate_matrix(&mats[0])?);
        }
        Ok(CellFixture { w, mats })
    }
}

/// Which surface a cell times.
#[derive(Debug, Clone)]
pub enum Surface {
    /// M = 1: every decode candidate with its own bpp.
    Decode,
    /// M rows: grouped candidates at the bpp inherited from `m1_candidate`.
    Grouped { m: usize, m1_candidate: String, bpp: usize },
}

pub struct CellInputs<'a> {
    pub surface: Surface,
    pub seed: u64,
    pub candidates: &'a [Candidate],
    pub modes: &'a [Mode],
    pub protocol: &'a Protocol,
    /// Kernels rejected by preflight (symbol -> why): never timed.
    pub rejected: &'a BTreeMap<String, String>,
    pub copy_gbps: f64,
}

/// The fixture seed of every GPU cell (bench, sweep): same seed, same weights and rows.
pub const FIXTURE_SEED: u64 = 0xC0DA;

impl<'a> CellInputs<'a> {
    /// A decode (M = 1) cell over `candidates`.
    pub fn decode(
        candidates: &'a [Candidate],
        modes: &'a [Mode],
        protocol: &'a Protocol,
        rejected: &'a BTreeMap<String, String>,
        copy_gbps: f64,
    ) -> CellInputs<'a> {
        CellInputs { surface: Surface::Decode, seed: FIXTURE_SEED, candidates, modes, protocol, rejected, copy_gbps }
    }

    /// The same protocol and preflight verdicts for another surface and candidate set.
    pub fn retarget(&self, surface: Surface, candidates: &'a [Candidate], modes: &'a [Mode]) -> CellInputs<'a> {
        CellInputs { surface, candidates, modes, ..*self }
    }
}

/// One cell: GPU activation quantization checked against the CPU, every applicable candidate
/// checked bit for bit against the CPU reference for its bpp (every row), then the eligible
/// ones timed under the protocol in each mode.
pub fn run_cell(gpu: &Gpu, fx: &CellFixture, c: &CellInputs) -> Result<CellResult> {
    let w = &fx.w;
    let (cb, n, k) = (w.codebook, w.n, w.k);
    let (m, m1_candidate) = match &c.surface {
        Surface::Decode => (1, String::new()),
        Surface::Grouped { m, m1_candidate, .. } => (*m, m1_candidate.clone()),
    };
    let x = fixture::activations(m, k, c.seed);
    let a_cpu = quantize_activations(&x, m, k)?;
    let mats = &fx.mats;
    let copies = mats.len();
    let mut act = gpu.upload_activations(&x, m, k)?;
    gpu.quantize(&mut act)?;
    gpu.synchronize()?;
    if gpu.download_activations(&act)? != a_cpu {
        bail!("GPU activation quantization differs from the CPU contract ({cb} M={m} K={k}): a structural failure");
    }
    let plan_of = |cand: &Candidate| match &c.surface {
        Surface::Decode => cand.plan(n, k, gpu.info.sms),
        Surface::Grouped { bpp, .. } => cand.plan_grouped(n, k, m, *bpp),
    };
    let launch =
        |cand: &Candidate, plan: &Plan, mat: &DeviceMatrix, y: &mut CudaSlice<f32>, ws: &mut CudaSlice<f32>| match &c
            .surface
        {
            Surface::Decode => gpu.launch_decode(cand, plan, mat, &act, 0, y, ws),
            Surface::Grouped { .. } => gpu.launch_grouped(cand, plan, mat, &act, y, ws),
        };

    let cols = check_columns(n, derive_seed(c.seed, "columns"));
    let mut reference: BTreeMap<usize, Vec<f32>> = BTreeMap::new();
    let mut y = gpu.stream.alloc_zeros::<f32>(m * n).context("allocating outputs")?;
    struct Run<'c> {
        cand: &'c Candidate,
        plan: Plan,
        mismatches: usize,
        first: String,
        registers: u32,
        occupancy: u32,
    }
    let mut runs: Vec<Run> = Vec::new();
    let max_ws = c.candidates.iter().filter_map(&plan_of).map(|p| p.workspace).max().unwrap_or(0);
    let mut ws = gpu.stream.alloc_zeros::<f32>(max_ws.max(1)).context("allocating the workspace")?;
    for cand in c.candidates {
        let Some(plan) = plan_of(cand) else { continue };
        let spec = cand.kernel(cb);
        if c.rejected.contains_key(&spec.symbol()) {
            continue;
        }
        let res = gpu.resources(&spec, plan.threads, plan.shared as usize)?;
        if res.local_bytes > 0 || res.occupancy_blocks_per_sm == 0 {
            continue;
        }
        gpu.poison(&mut y)?;
        gpu.poison(&mut ws)?;
        launch(cand, &plan, &mats[0], &mut y, &mut ws)?;
        gpu.synchronize()?;
        let got = gpu.download(&y)?;
        let want = match reference.get(&plan.bpp) {
            Some(r) => r,
            None => {
                let r = gemm_columns(w, &a_cpu, plan.bpp, &cols)?;
                reference.entry(plan.bpp).or_insert(r)
            }
        };
        let mut mismatches = 0;
        let mut first = String::new();
        for r in 0..m {
            for (i, &col) in cols.iter().enumerate() {
                let (g, want) = (got[r * n + col], want[r * cols.len() + i]);
                if g.to_bits() != want.to_bits() {
                    if mismatches == 0 {
                        first = format!("row {r} col {col}: got {:#010x} want {:#010x}", g.to_bits(), want.to_bits());
                    }
                    mismatches += 1;
                }
            }
        }
        runs.push(Run {
            cand,
            plan,
            mismatches,
            first,
            registers: res.registers as u32,
            occupancy: res.occupancy_blocks_per_sm,
        });
    }

    let mut rows = Vec::new();
    let mut samples = Vec::new();
    let eligible: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].mismatches == 0).collect();
    for &mode in c.modes {
        let protocol = Protocol { seed: derive_seed(c.seed, &format!("{cb} {m} {n} {k}")), ..c.protocol.clone() };
        let timed = if eligible.is_empty() {
            Vec::new()
        } else {
            let mut timed_launch = |i: usize, copy: usize| {
                let r = &runs[eligible[i]];
                launch(r.cand, &r.plan, &mats[copy], &mut y, &mut ws)
            };
            time_candidates(gpu, mode, &protocol, eligible.len(), copies, &mut timed_launch)?
        };
        for (ri, run) in runs.iter().enumerate() {
            let t = eligible.iter().position(|&e| e == ri).map(|p| &timed[p]);
            let measured = t.map(|t| t.measured()).unwrap_or_default();
            let s = summarize(&measured);
            let median = s.map_or(f64::NAN, |s| s.median);
            let bytes = mats[0].bytes();
            let gbps = bytes as f64 / (median * 1e-6) / 1e9;
            rows.push(TimingRow {
                backend: "cuda".into(),
                arch: gpu.info.arch.clone(),
                device: gpu.info.name.clone(),
                mode: mode.name().into(),
                codebook: cb.name().into(),
                m,
                n,
                k,
                candidate: run.cand.id.clone(),
                m1_candidate: m1_candidate.clone(),
                bpp: run.plan.bpp,
                warmups: protocol.warmups,
                samples: measured.len(),
                replays: t.map_or(0, |t| t.replays),
                weight_copies: copies,
                seed: protocol.seed,
                min_us: s.map_or(f64::NAN, |s| s.min),
                median_us: median,
                p95_us: s.map_or(f64::NAN, |s| s.p95),
                mad_us: s.map_or(f64::NAN, |s| s.mad),
                cv: s.map_or(f64::NAN, |s| s.cv),
                weight_bytes: bytes,
                gbps,
                pct_copy_bw: 100.0 * gbps / c.copy_gbps,
                checked: cols.len(),
                mismatches: run.mismatches,
                first_mismatch: run.first.clone(),
                eligible: run.mismatches == 0,
                dropped: t.is_some_and(|t| t.dropped),
                registers: run.registers,
                occupancy_blocks_per_sm: run.occupancy,
            });
            if let Some(t) = t {
                samples.extend(t.samples.iter().map(|s| SampleRow {
                    mode: mode.name().into(),
                    codebook: cb.name().into(),
                    m,
                    n,
                    k,
                    candidate: run.cand.id.clone(),
                    round: s.round,
                    order: s.order,
                    warmup: s.warmup,
                    latency_us_hex: hex_f64(s.latency_us),
                }));
            }
        }
    }
    Ok(CellResult { rows, samples })
}

/// The fastest eligible, not dropped row of `mode` among `rows` (ties: registry order, i.e.
/// the first one), with a finite median.
pub fn best_row<'r>(rows: &'r [TimingRow], mode: &str) -> Option<&'r TimingRow> {
    rows.iter().filter(|r| r.mode == mode && r.eligible && !r.dropped && r.median_us.is_finite()).fold(
        None,
        |best: Option<&TimingRow>, r| match best {
            Some(b) if b.median_us <= r.median_us => Some(b),
            _ => Some(r),
        },
    )
}
