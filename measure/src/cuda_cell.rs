//! One cell on the GPU (decode M = 1, or M rows of grouped or prefill candidates): fixtures,
//! GPU activation quantization checked against the CPU, every applicable candidate checked
//! byte for byte against the CPU reference for its bpp, then the eligible ones timed under
//! the protocol.

use std::collections::BTreeMap;

use crate::error::{Context, MeasureError, Result};
use vnni_kernels::cuda::device::Launch;
use vnni_kernels::cuda::device::{DeviceActivations, DeviceBuffer, DeviceMatrix, DeviceResources, Gpu};
use vnni_kernels::fixture::{self, derive_seed};
use vnni_kernels::reference::gemm_columns;
use vnni_kernels::registry::{Candidate, LaunchPlan, PREFILL_MIN_M};
use vnni_kernels::{
    quantize_activations, Backend, CandidateId, Codebook, Mode, PackedMatrix, QuantizedActivations, SourceFormat,
};

use crate::cell::{best_row, cell_weights, check_columns, copies_for, CellResult, FIXTURE_SEED};
use crate::cuda_clock::time_candidates;
use crate::protocol::Protocol;
use crate::rows::{compare, mode_rows, CellContext, Checked, ModeTimings};
use vnni_corpus::staged::InheritedPick;

/// Weights of one (source format, N, K): the host matrix (for the CPU reference) and rotated
/// device copies (more than 3 x L2 touched between two uses of one copy), `copies` for each
/// pass of the protocol: a later pass reads memory of its own.
pub struct CellFixture {
    pub format: SourceFormat,
    pub w: PackedMatrix,
    /// Copies of one pass.
    pub copies: usize,
    /// `copies x passes` device copies, pass p's at `p * copies ..`.
    pub mats: Vec<DeviceMatrix>,
}

impl CellFixture {
    pub fn new(gpu: &Gpu, format: SourceFormat, n: usize, k: usize, seed: u64, passes: usize) -> Result<Self> {
        let w = cell_weights(format, n, k, seed)?;
        let first = gpu.upload_matrix(&w)?;
        let copies = copies_for(first.bytes(), gpu.info.l2_bytes);
        let mut mats = vec![first];
        for _ in 1..copies * passes.max(1) {
            mats.push(gpu.duplicate_matrix(&mats[0])?);
        }
        Ok(CellFixture { format, w, copies, mats })
    }
}

/// What a cell times: decode candidates with their own bpp, or batched ones at an inherited bpp.
#[derive(Debug, Clone)]
pub enum CellTarget {
    /// M = 1: every decode candidate with its own bpp.
    Decode,
    /// M rows: grouped (M <= 31) or prefill (M >= 32) candidates at the bpp inherited from
    /// `m1_candidate`.
    Inherited { m: usize, m1_candidate: CandidateId, bpp: usize },
}

pub struct CellInputs<'a> {
    pub target: CellTarget,
    pub seed: u64,
    pub candidates: &'a [Candidate],
    pub modes: &'a [Mode],
    pub protocol: &'a Protocol,
    /// Kernels rejected by preflight (symbol -> why): never timed.
    pub rejected: &'a BTreeMap<String, String>,
    pub copy_gbps: f64,
}

impl<'a> CellInputs<'a> {
    /// A decode (M = 1) cell over `candidates`.
    pub fn decode(
        candidates: &'a [Candidate],
        modes: &'a [Mode],
        protocol: &'a Protocol,
        rejected: &'a BTreeMap<String, String>,
        copy_gbps: f64,
    ) -> CellInputs<'a> {
        CellInputs { target: CellTarget::Decode, seed: FIXTURE_SEED, candidates, modes, protocol, rejected, copy_gbps }
    }

    /// The same protocol and preflight verdicts for another surface and candidate set.
    pub fn retarget(&self, target: CellTarget, candidates: &'a [Candidate], modes: &'a [Mode]) -> CellInputs<'a> {
        CellInputs { target, candidates, modes, ..*self }
    }
}

/// One cell: GPU activation quantization checked against the CPU, every applicable candidate
/// checked bit for bit against the CPU reference for its bpp (every row), then the eligible
/// ones timed under the protocol in each mode.
pub fn run_cell(gpu: &Gpu, fx: &CellFixture, c: &CellInputs) -> Result<CellResult> {
    let w = &fx.w;
    let (cb, n, k) = (w.codebook, w.n, w.k);
    let (m, m1_candidate) = match &c.target {
        CellTarget::Decode => (1, None),
        CellTarget::Inherited { m, m1_candidate, .. } => (*m, Some(m1_candidate)),
    };
    let (a_cpu, act) = activations(gpu, cb, m, k, c.seed)?;
    let mats = &fx.mats;
    let copies = fx.copies;
    if mats.len() < copies * c.protocol.passes.max(1) {
        return Err(MeasureError::Structural(format!(
            "the fixture holds {} weight copies, {} passes of {copies} need more: make it with the protocol's passes",
            mats.len(),
            c.protocol.passes
        )));
    }
    let plan_of = |cand: &Candidate| match &c.target {
        CellTarget::Decode => cand.plan(n, k, gpu.info.sms),
        CellTarget::Inherited { bpp, .. } => cand.plan_batched(cb, n, k, m, *bpp),
    };
    let launch = |cand: &Candidate,
                  plan: &LaunchPlan,
                  mat: &DeviceMatrix,
                  y: &mut DeviceBuffer<f32>,
                  ws: &mut DeviceBuffer<f32>| {
        let l = match &c.target {
            CellTarget::Decode => Launch::decode(cand, plan, mat, &act, 0),
            CellTarget::Inherited { .. } => Launch::batched(cand, plan, mat, &act),
        };
        gpu.launch(&l, y, ws)
    };

    let cols = check_columns(n, m, derive_seed(c.seed, "columns"));
    let mut reference = References { w, a: &a_cpu, cols: &cols, by_bpp: BTreeMap::new() };
    let mut y = gpu.alloc_zeros::<f32>(m * n).context("allocating outputs")?;
    let mut cands: Vec<(&Candidate, LaunchPlan)> = Vec::new();
    let mut runs: Vec<Checked> = Vec::new();
    let max_ws = c.candidates.iter().filter_map(&plan_of).map(|p| p.workspace).max().unwrap_or(0);
    let mut ws = gpu.alloc_zeros::<f32>(max_ws.max(1)).context("allocating the workspace")?;
    for cand in c.candidates {
        let Some(plan) = plan_of(cand) else { continue };
        let Some(res) = runnable(gpu, cand, cb, &plan, c.rejected)? else { continue };
        gpu.poison(&mut y)?;
        gpu.poison(&mut ws)?;
        launch(cand, &plan, &mats[0], &mut y, &mut ws)?;
        gpu.synchronize()?;
        let got = gpu.download(&y)?;
        let (mismatches, first_mismatch) = compare(&got, reference.at(plan.bpp)?, &cols, m, n);
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

    let mut out = CellResult::default();
    let eligible: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].mismatches == 0).collect();
    let ctx = CellContext {
        backend: Backend::Cuda,
        arch: &gpu.info.arch,
        device: &gpu.info.name,
        format: fx.format,
        m,
        n,
        k,
        m1_candidate,
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
        let t = ModeTimings { mode, protocol: &protocol, runs: &runs, eligible: &eligible, timed: &timed };
        mode_rows(&ctx, &t, &mut out);
    }
    Ok(out)
}

/// M activation rows quantized on the CPU (the contract) and on the GPU, which must agree.
fn activations(
    gpu: &Gpu,
    cb: Codebook,
    m: usize,
    k: usize,
    seed: u64,
) -> Result<(QuantizedActivations, DeviceActivations)> {
    let x = fixture::activations(m, k, seed);
    let a_cpu = quantize_activations(&x, m, k)?;
    let mut act = gpu.upload_activations(&x, m, k)?;
    gpu.quantize(&mut act)?;
    gpu.synchronize()?;
    if gpu.download_activations(&act)? != a_cpu {
        return Err(MeasureError::Structural(format!(
            "GPU activation quantization differs from the CPU contract ({cb} M={m} K={k}): a structural failure"
        )));
    }
    Ok((a_cpu, act))
}

/// The device resources of a candidate's kernel at its launch, unless preflight rejected the
/// kernel or the launch would use local memory or reach no occupancy (never timed).
fn runnable(
    gpu: &Gpu,
    cand: &Candidate,
    cb: Codebook,
    plan: &LaunchPlan,
    rejected: &BTreeMap<String, String>,
) -> Result<Option<DeviceResources>> {
    let spec = cand.kernel(cb);
    if rejected.contains_key(&spec.symbol()) {
        return Ok(None);
    }
    let res = gpu.resources(&spec, plan.threads, plan.shared as usize)?;
    Ok((res.local_bytes == 0 && res.occupancy_blocks_per_sm > 0).then_some(res))
}

/// The CPU reference on the checked columns, computed once per bpp.
struct References<'a> {
    w: &'a PackedMatrix,
    a: &'a QuantizedActivations,
    cols: &'a [usize],
    by_bpp: BTreeMap<usize, Vec<f32>>,
}

impl References<'_> {
    fn at(&mut self, bpp: usize) -> Result<&[f32]> {
        if !self.by_bpp.contains_key(&bpp) {
            let r = gemm_columns(self.w, self.a, bpp, self.cols)?;
            self.by_bpp.insert(bpp, r);
        }
        Ok(&self.by_bpp[&bpp])
    }
}

/// One sweep cell on the GPU: every decode candidate at M = 1, then the grouped candidates at
/// each M = 2..31 and the prefill candidates at each M >= 32 of `m_values`, with the bpp of
/// the fastest eligible graph-mode (else eager) decode candidate (what a policy fitted on
/// these rows would most likely pick), in every mode. Given the frozen M = 1 picks of a
/// staged collection (`inherit`, one per mode), no decode rows: the batched candidates of
/// each mode at the bpp of that mode's pick.
pub fn sweep_cell(
    gpu: &Gpu,
    fx: &CellFixture,
    inputs: &CellInputs,
    batched: (&[Candidate], &[Candidate]),
    m_values: &[usize],
    inherit: Option<&[&InheritedPick]>,
) -> Result<CellResult> {
    let (grouped, prefill) = batched;
    let mut cell = CellResult::default();
    // (modes, M = 1 candidate, bpp) the batched rows inherit from
    let targets: Vec<(&[Mode], CandidateId, usize)> = match inherit {
        Some(picks) => picks.iter().map(|p| (std::slice::from_ref(&p.mode), p.candidate.clone(), p.bpp)).collect(),
        None => {
            cell = run_cell(gpu, fx, inputs)?;
            let best = best_row(&cell.rows, Mode::Graph).or_else(|| best_row(&cell.rows, Mode::Eager));
            best.map(|m1| (inputs.modes, m1.candidate.clone(), m1.bpp)).into_iter().collect()
        }
    };
    for (modes, m1_candidate, bpp) in targets {
        for &m in m_values.iter().filter(|&&m| m >= 2) {
            let target = CellTarget::Inherited { m, m1_candidate: m1_candidate.clone(), bpp };
            let candidates = if m >= PREFILL_MIN_M { prefill } else { grouped };
            let g = run_cell(gpu, fx, &inputs.retarget(target, candidates, modes))?;
            cell.rows.extend(g.rows);
            cell.samples.extend(g.samples);
        }
    }
    Ok(cell)
}
