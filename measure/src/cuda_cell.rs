//! One cell on the GPU (decode M = 1, or M rows of grouped or prefill candidates): fixtures,
//! GPU activation quantization checked against the CPU, every applicable candidate checked
//! byte for byte against the CPU reference for its bpp, then the eligible ones timed under
//! the protocol.

use std::collections::BTreeMap;
use std::time::Instant;

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
use crate::cuda_clock::{time_candidates, Copies};
use crate::phases::{self, Phase};
use crate::protocol::Protocol;
use crate::protocol::Rotation;
use crate::rows::{compare, gather, mode_rows, CellContext, Checked, ModeTimings};
use vnni_corpus::staged::InheritedPick;

/// Weights of one (source format, N, K): the host matrix (for the CPU reference) and rotated
/// device copies (more than 3 x L2 touched between two uses of one copy: `copies` apart), a
/// set for each pass of the protocol: a later pass reads memory of its own.
pub struct CellFixture {
    pub format: SourceFormat,
    pub w: PackedMatrix,
    /// The reuse distance in copies (what rows record as `weight_copies`).
    pub copies: usize,
    /// Copies of one pass ([`Rotation::allocated`]).
    pub per_pass: usize,
    /// `per_pass x passes` device copies, pass p's at `p * per_pass ..`.
    pub mats: Vec<DeviceMatrix>,
}

impl CellFixture {
    pub fn new(gpu: &Gpu, format: SourceFormat, n: usize, k: usize, seed: u64, passes: usize) -> Result<Self> {
        let started = Instant::now();
        let w = cell_weights(format, n, k, seed)?;
        let first = gpu.upload_matrix(&w)?;
        let copies = copies_for(first.bytes(), gpu.info.l2_bytes);
        let per_pass = Rotation::allocated(copies);
        let mut mats = vec![first];
        for _ in 1..per_pass * passes.max(1) {
            mats.push(gpu.duplicate_matrix(&mats[0])?);
        }
        gpu.synchronize()?;
        phases::add(Phase::Fixture, started);
        Ok(CellFixture { format, w, copies, per_pass, mats })
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
/// checked bit for bit against the CPU reference for its bpp (every row), the eligible ones
/// timed under the protocol in each mode. The CPU reference runs on other threads while the
/// GPU times: every runnable candidate is timed, then compared; a mismatch (a kernel bug)
/// voids the timings, which are taken again over the eligible candidates only, so a wrong
/// candidate never races a right one out.
pub fn run_cell(gpu: &Gpu, fx: &CellFixture, c: &CellInputs) -> Result<CellResult> {
    let w = &fx.w;
    let (cb, n, k) = (w.codebook, w.n, w.k);
    let (m, m1_candidate) = match &c.target {
        CellTarget::Decode => (1, None),
        CellTarget::Inherited { m, m1_candidate, .. } => (*m, Some(m1_candidate)),
    };
    let checking = Instant::now();
    let (a_cpu, act) = activations(gpu, cb, m, k, c.seed)?;
    let mats = &fx.mats;
    let copies = fx.copies;
    if mats.len() < fx.per_pass * c.protocol.passes.max(1) {
        return Err(MeasureError::Structural(format!(
            "the fixture holds {} weight copies, {} passes of {} need more: make it with the protocol's passes",
            mats.len(),
            c.protocol.passes,
            fx.per_pass
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
            CellTarget::Decode => Launch::decode(cand, plan, mat, &act, 0).programmatic(c.protocol.programmatic),
            CellTarget::Inherited { .. } => Launch::batched(cand, plan, mat, &act),
        };
        gpu.launch(&l, y, ws)
    };

    let cols = check_columns(n, m, derive_seed(c.seed, "columns"));
    // Sampled columns are gathered on the device: only they cross the bus.
    let sampled = (cols.len() < n).then(|| gpu.gather_index(&cols, n)).transpose()?;
    let mut y = gpu.alloc_zeros::<f32>(m * n).context("allocating outputs")?;
    // (candidate, plan, resources, its outputs on the checked columns)
    let mut cands: Vec<(&Candidate, LaunchPlan, DeviceResources, Vec<f32>)> = Vec::new();
    let max_ws = c.candidates.iter().filter_map(&plan_of).map(|p| p.workspace).max().unwrap_or(0);
    let mut ws = gpu.alloc_zeros::<f32>(max_ws.max(1)).context("allocating the workspace")?;
    for cand in c.candidates {
        let Some(plan) = plan_of(cand) else { continue };
        let Some(res) = runnable(gpu, cand, cb, &plan, c.rejected)? else { continue };
        gpu.poison(&mut y)?;
        gpu.poison(&mut ws)?;
        launch(cand, &plan, &mats[0], &mut y, &mut ws)?;
        gpu.synchronize()?;
        let got = match &sampled {
            Some(index) => gpu.download_columns(&y, index, m, n)?,
            None => gather(&gpu.download(&y)?, &cols, m, n),
        };
        cands.push((cand, plan, res, got));
    }
    let bpps: std::collections::BTreeSet<usize> = cands.iter().map(|c| c.1.bpp).collect();
    phases::add(Phase::Check, checking);

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
    let time = |eligible: &[usize], y: &mut DeviceBuffer<f32>, ws: &mut DeviceBuffer<f32>| -> Result<Vec<_>> {
        let mut by_mode = Vec::new();
        // one calibration for every mode (it launches eagerly in each)
        let mut calibration = None;
        for &mode in c.modes {
            let protocol = Protocol { seed: derive_seed(c.seed, &format!("{cb} {m} {n} {k}")), ..c.protocol.clone() };
            let timed = if eligible.is_empty() {
                Vec::new()
            } else {
                let mut timed_launch = |i: usize, copy: usize| {
                    let (cand, plan, ..) = &cands[eligible[i]];
                    launch(cand, plan, &mats[copy], y, ws)
                };
                let rotation = Copies { distance: copies, allocated: fx.per_pass };
                time_candidates(gpu, mode, &protocol, eligible.len(), rotation, &mut calibration, &mut timed_launch)?
            };
            by_mode.push((mode, protocol, timed));
        }
        Ok(by_mode)
    };
    let all: Vec<usize> = (0..cands.len()).collect();
    let reference = || {
        reference_pool().install(|| {
            bpps.iter().map(|&bpp| Ok((bpp, gemm_columns(w, &a_cpu, bpp, &cols)?))).collect::<Result<BTreeMap<_, _>>>()
        })
    };
    let (timings, references) = if c.protocol.whole_rotations {
        // the older protocol, as it was: the reference first, nothing overlapped
        let started = Instant::now();
        let references = reference();
        phases::add(Phase::Check, started);
        (time(&all, &mut y, &mut ws), references)
    } else {
        std::thread::scope(|s| {
            let references = s.spawn(reference);
            let timings = time(&all, &mut y, &mut ws);
            let waiting = Instant::now();
            let references = references.join().expect("the CPU reference does not panic");
            phases::add(Phase::Check, waiting);
            (timings, references)
        })
    };
    let (mut timings, references) = (timings?, references?);
    let runs: Vec<Checked> = cands
        .iter()
        .map(|(cand, plan, res, got)| {
            let (mismatches, first_mismatch) = compare(got, &references[&plan.bpp], &cols, m);
            Checked {
                id: cand.id.clone(),
                bpp: plan.bpp,
                mismatches,
                first_mismatch,
                registers: res.registers as u32,
                occupancy: res.occupancy_blocks_per_sm,
            }
        })
        .collect();
    let eligible: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].mismatches == 0).collect();
    if eligible.len() < all.len() {
        timings = time(&eligible, &mut y, &mut ws)?;
    }
    let mut out = CellResult::default();
    for (mode, protocol, timed) in &timings {
        let t = ModeTimings { mode: *mode, protocol, runs: &runs, eligible: &eligible, timed };
        mode_rows(&ctx, &t, &mut out);
    }
    Ok(out)
}

/// The threads the CPU reference runs on while the GPU times: all cores but two, so the
/// thread that launches (eager mode is host bound on small shapes) keeps a core of its own.
fn reference_pool() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores.saturating_sub(2).max(1))
            .thread_name(|i| format!("vnni-reference-{i}"))
            .build()
            .expect("a thread pool for the CPU reference")
    })
}

/// M activation rows quantized on the CPU (the contract) and on the GPU, which must agree.
pub(crate) fn activations(
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
