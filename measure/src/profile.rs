//! The profiling pass's launches (feature `cuda`): for each request, in order, the cell's
//! weights and activations are built and uploaded, the candidate is launched once and its
//! outputs compared bit for bit with the CPU reference, a graph-mode request's graph is
//! captured, and only then does the profiler range open, around exactly one production launch
//! (the graph replayed, or the kernels launched on the stream). Nothing here is timed: what
//! ncu measures stays evidence.

use vnni_corpus::evidence::ProfileRequest;
use vnni_kernels::cuda::device::{DeviceMatrix, Gpu, Launch};
use vnni_kernels::fixture::derive_seed;
use vnni_kernels::reference::gemm_columns;
use vnni_kernels::{Mode, PackedMatrix, SourceFormat};

use crate::cell::{cell_weights, check_columns, FIXTURE_SEED};
use crate::cuda_cell::activations;
use crate::error::{MeasureError, Result};
use crate::rows::{compare, gather};

/// Profile every request in order.
pub fn profile_requests(gpu: &Gpu, requests: &[ProfileRequest]) -> Result<()> {
    let mut weights: Option<((SourceFormat, usize, usize), PackedMatrix, DeviceMatrix)> = None;
    for req in requests {
        let cell = (req.source_format, req.n, req.k);
        if weights.as_ref().is_none_or(|w| w.0 != cell) {
            drop(weights.take()); // free the previous cell's device copy first
            let w = cell_weights(req.source_format, req.n, req.k, FIXTURE_SEED)?;
            let mat = gpu.upload_matrix(&w)?;
            weights = Some((cell, w, mat));
        }
        let (_, w, mat) = weights.as_ref().expect("built above");
        profile_one(gpu, req, w, mat)?;
    }
    Ok(())
}

fn profile_one(gpu: &Gpu, req: &ProfileRequest, w: &PackedMatrix, mat: &DeviceMatrix) -> Result<()> {
    let refuse = |why: String| MeasureError::Invalid(format!("request {} ({}): {why}", req.request, req.key()));
    let cand = vnni_kernels::registry::find(req.candidate.as_str())
        .ok_or_else(|| refuse("the candidate is not in this checkout's registry".into()))?;
    let plan = if req.m == 1 {
        cand.plan(req.n, req.k, gpu.info.sms)
    } else {
        cand.plan_batched(req.codebook, req.n, req.k, req.m, req.bpp)
    }
    .ok_or_else(|| refuse("the candidate has no launch for this cell".into()))?;
    if plan.bpp != req.bpp {
        return Err(refuse(format!(
            "this device plans bpp {}, the corpus measured bpp {} (another device or registry)",
            plan.bpp, req.bpp
        )));
    }
    let symbols = cand.launched_symbols(req.codebook, plan.kb);
    if symbols.join(";") != req.kernels {
        return Err(refuse(format!("the launch runs {}, the request names {}", symbols.join(";"), req.kernels)));
    }
    let (a_cpu, act) = activations(gpu, req.codebook, req.m, req.k, FIXTURE_SEED)?;
    let mut y = gpu.alloc_zeros::<f32>(req.m * req.n)?;
    let mut ws = gpu.alloc_zeros::<f32>(plan.workspace.max(1))?;
    let launch = if req.m == 1 {
        Launch::decode(cand, &plan, mat, &act, 0).programmatic(req.programmatic)
    } else {
        Launch::batched(cand, &plan, mat, &act)
    };
    // outside the range: the check (which is also the warmup)
    gpu.poison(&mut y)?;
    gpu.poison(&mut ws)?;
    gpu.launch(&launch, &mut y, &mut ws)?;
    gpu.synchronize()?;
    let cols = check_columns(req.n, req.m, derive_seed(FIXTURE_SEED, "columns"));
    let got = gather(&gpu.download(&y)?, &cols, req.m, req.n);
    let want = gemm_columns(w, &a_cpu, req.bpp, &cols)?;
    let (mismatches, first) = compare(&got, &want, &cols, req.m);
    if mismatches > 0 {
        return Err(refuse(format!("{mismatches} outputs differ from the CPU reference ({first}): not profiled")));
    }
    match req.mode {
        Mode::Graph => {
            let graph = gpu.capture(&mut || gpu.launch(&launch, &mut y, &mut ws))?;
            gpu.profiled(&mut || graph.launch())?;
        }
        Mode::Eager => gpu.profiled(&mut || gpu.launch(&launch, &mut y, &mut ws))?,
    }
    Ok(())
}
