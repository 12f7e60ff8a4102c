//! One cell on the GPU (decode M = 1, or grouped M rows): fixtures, GPU activation quantization checked
//! against the CPU, every applicable candidate checked byte for byte against the CPU
//! reference for its bpp, then the eligible ones timed under the protocol.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use cudarc::driver::CudaSlice;
use vnni_corpus::{SampleRow, TimingRow};
use vnni_kernels::cuda::device::{DeviceMatrix, Gpu};
use vnni_kernels::fixture::{self, derive_seed, splitmix64};
use vnni_kernels::reference::gemm_columns;
use vnni_kernels::registry::{Candidate, Plan, PREFILL_MIN_M};
use vnni_kernels::{quantize_activations, PackedMatrix, SourceFormat};

use crate::gpu_timing::time_candidates;
use crate::rows::{compare, mode_rows, CellContext, Checked};
use crate::timing::{Mode, Protocol};

/// Columns compared with the CPU reference: all of them up to this N, else a seeded sample this large.
pub const FULL_CHECK_MAX_N: usize = 8192;
pub const SAMPLED_COLUMNS: usize = 4096;

pub struct CellResult {
    pub rows: Vec<TimingRow>,
    pub samples: Vec<SampleRow>,
}

/// Outputs (rows x columns) checked per candidate of a batched (M > 1) cell at most: every
/// row is checked, over fewer sampled columns as M grows (the CPU reference costs M x
/// columns x K). Grouped cells (M <= 31) stay within it at up to 8192 columns.
pub const BATCHED_CHECK_OUTPUTS: usize = 1 << 18;

/// Distinct sorted columns to check for M rows: all of them for small outputs, else the first
/// and the last column (tails of the last tile) plus seeded columns spread over all of N,
/// at most `sampled` in all.
pub fn check_columns(n: usize, m: usize, seed: u64) -> Vec<usize> {
    if n <= FULL_CHECK_MAX_N && n * m <= BATCHED_CHECK_OUTPUTS {
        return (0..n).collect();
    }
    let sampled = SAMPLED_COLUMNS.min((BATCHED_CHECK_OUTPUTS / m).max(64)).min(n);
    let mut cols: std::collections::BTreeSet<usize> = [0, n - 1].into();
    // Draws in stream order (not sorted first, which would keep only the low columns).
    let mut i = 0;
    while cols.len() < sampled {
        cols.insert((splitmix64(seed, i) % n as u64) as usize);
        i += 1;
    }
    cols.into_iter().collect()
}

/// Weight copies so that the bytes touched between two uses of one copy exceed 3 x L2.
pub fn copies_for(bytes: usize, l2: usize) -> usize {
    if bytes >= 3 * l2 {
        1
    } else {
        (3 * l2).div_ceil(bytes) + 1
    }
}

/// The packed weights of one (source format, N, K) cell: the format's codebook, seeded by
/// the format so aliases are measured on their own bytes.
pub fn cell_weights(format: SourceFormat, n: usize, k: usize, seed: u64) -> Result<PackedMatrix> {
    fixture::packed_matrix(format.codebook(), n, k, derive_seed(seed, format.name()))
        .with_context(|| format!("fixture {format} {n}x{k}"))
}

/// Weights of one (source format, N, K): the host matrix (for the CPU reference) and rotated
/// device copies (more than 3 x L2 touched between two uses of one copy).
pub struct CellFixture {
    pub format: SourceFormat,
    pub w: PackedMatrix,
    pub mats: Vec<DeviceMatrix>,
}

impl CellFixture {
    pub fn new(gpu: &Gpu, format: SourceFormat, n: usize, k: usize, seed: u64) -> Result<Self> {
        let w = cell_weights(format, n, k, seed)?;
        let first = gpu.upload_matrix(&w)?;
        let copies = copies_for(first.bytes(), gpu.info.l2_bytes);
        let mut mats = vec![first];
        for _ in 1..copies {
            mats.push(gpu.duplicate_matrix(&mats[0])?);
        }
        Ok(CellFixture { format, w, mats })
    }
}

/// Which surface a cell times.
#[derive(Debug, Clone)]
pub enum Surface {
    /// M = 1: every decode candidate with its own bpp.
    Decode,
    /// M rows: grouped (M <= 31) or prefill (M >= 32) candidates at the bpp inherited from
    /// `m1_candidate`.
    Inherited { m: usize, m1_candidate: String, bpp: usize },
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
        Surface::Inherited { m, m1_candidate, .. } => (*m, m1_candidate.clone()),
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
        Surface::Inherited { bpp, .. } => cand.plan_batched(cb, n, k, m, *bpp),
    };
    let launch =
        |cand: &Candidate, plan: &Plan, mat: &DeviceMatrix, y: &mut CudaSlice<f32>, ws: &mut CudaSlice<f32>| match &c
            .surface
        {
            Surface::Decode => gpu.launch_decode(cand, plan, mat, &act, 0, y, ws),
            Surface::Inherited { .. } => gpu.launch_batched(cand, plan, mat, &act, y, ws),
        };

    let cols = check_columns(n, m, derive_seed(c.seed, "columns"));
    let mut reference: BTreeMap<usize, Vec<f32>> = BTreeMap::new();
    let mut y = gpu.stream.alloc_zeros::<f32>(m * n).context("allocating outputs")?;
    let mut cands: Vec<(&Candidate, Plan)> = Vec::new();
    let mut runs: Vec<Checked> = Vec::new();
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
        let (mismatches, first_mismatch) = compare(&got, want, &cols, m, n);
        runs.push(Checked {
            id: cand.id.clone(),
            bpp: plan.bpp,
            mismatches,
            first_mismatch,
            registers: res.registers as u32,
            occupancy: res.occupancy_blocks_per_sm,
        });
        cands.push((cand, plan));
    }

    let mut rows = Vec::new();
    let mut samples = Vec::new();
    let eligible: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].mismatches == 0).collect();
    let ctx = CellContext {
        backend: "cuda",
        arch: &gpu.info.arch,
        device: &gpu.info.name,
        format: fx.format,
        m,
        n,
        k,
        m1_candidate: &m1_candidate,
        weight_bytes: mats[0].bytes(),
        weight_copies: copies,
        checked: cols.len(),
        copy_gbps: c.copy_gbps,
    };
    for &mode in c.modes {
        let protocol = Protocol { seed: derive_seed(c.seed, &format!("{cb} {m} {n} {k}")), ..c.protocol.clone() };
        let timed = if eligible.is_empty() {
            Vec::new()
        } else {
            let mut timed_launch = |i: usize, copy: usize| {
                let (cand, plan) = &cands[eligible[i]];
                launch(cand, plan, &mats[copy], &mut y, &mut ws)
            };
            time_candidates(gpu, mode, &protocol, eligible.len(), copies, &mut timed_launch)?
        };
        mode_rows(&ctx, mode, &protocol, &runs, &eligible, &timed, &mut rows, &mut samples);
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

/// One sweep cell on the GPU: every decode candidate at M = 1, then the grouped candidates at
/// each M = 2..31 and the prefill candidates at each M >= 32 of `m_values`, with the bpp of
/// the fastest eligible graph-mode (else eager) decode candidate (what the policy would
/// pick), in every mode.
pub fn sweep_cell(
    gpu: &Gpu,
    fx: &CellFixture,
    inputs: &CellInputs,
    grouped: &[Candidate],
    prefill: &[Candidate],
    m_values: &[usize],
) -> Result<CellResult> {
    let mut cell = run_cell(gpu, fx, inputs)?;
    let best = best_row(&cell.rows, Mode::Graph.name()).or_else(|| best_row(&cell.rows, Mode::Eager.name())).cloned();
    if let Some(m1) = best {
        for &m in m_values.iter().filter(|&&m| m >= 2) {
            let surface = Surface::Inherited { m, m1_candidate: m1.candidate.clone(), bpp: m1.bpp };
            let candidates = if m >= PREFILL_MIN_M { prefill } else { grouped };
            let g = run_cell(gpu, fx, &inputs.retarget(surface, candidates, inputs.modes))?;
            cell.rows.extend(g.rows);
            cell.samples.extend(g.samples);
        }
    }
    Ok(cell)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_columns_cover_both_ends_and_the_whole_width() {
        for (n, m) in [(151_936, 1), (24_576, 512), (24_576, 4096), (9_000, 31)] {
            let cols = check_columns(n, m, 7);
            let want = SAMPLED_COLUMNS.min((BATCHED_CHECK_OUTPUTS / m).max(64));
            assert_eq!(cols.len(), want, "{n} x M={m}");
            assert!(cols.windows(2).all(|w| w[0] < w[1]));
            assert_eq!((cols[0], *cols.last().unwrap()), (0, n - 1));
            // Spread: some sampled column lies in the top tenth of N (not only low columns).
            assert!(cols.iter().filter(|&&c| c >= n - n / 10 && c < n - 1).count() > want / 20, "{n} x M={m}");
        }
        assert_eq!(check_columns(4096, 31, 7), (0..4096).collect::<Vec<_>>());
    }
}
