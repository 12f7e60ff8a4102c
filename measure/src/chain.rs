//! A chain of decode layers timed end to end, as a model runs them: the layers of one
//! decoder block in order, each on its own weights and its own activation row, quantized on
//! the device right before the layer (as a model quantizes each layer's input), one launch
//! after the other in a sample, with plain launches and with programmatic dependent launch
//! (Hopper) interleaved in the same rounds. Each layer's outputs must be the same bytes
//! either way.

use std::time::Instant;

use crate::cell::{cell_weights, copies_for, FIXTURE_SEED};
use crate::cuda_clock::{time_candidates, Copies};
use crate::error::{MeasureError, Result};
use crate::phases::{self, Phase};
use crate::protocol::{Protocol, Rotation, Timed};
use vnni_kernels::cuda::device::{DeviceActivations, DeviceBuffer, DeviceMatrix, Gpu, Launch};
use vnni_kernels::fixture;
use vnni_kernels::registry::{Candidate, LaunchPlan};
use vnni_kernels::{Mode, SourceFormat};

/// One layer of a chain: a decode candidate on an N x K weight of `format`.
#[derive(Debug, Clone)]
pub struct ChainLayer {
    pub format: SourceFormat,
    pub n: usize,
    pub k: usize,
    pub candidate: Candidate,
}

/// What [`time_chain`] measured: the whole chain per sample, plain and programmatic.
#[derive(Debug, Clone)]
pub struct ChainTiming {
    pub plain: Timed,
    pub programmatic: Timed,
    /// Weight bytes one pass of the chain reads.
    pub weight_bytes: usize,
    /// Copies of the chain's weights in the rotation (the reuse distance).
    pub copies: usize,
}

/// A layer's device state: its weight copies, activation row, output and partials.
struct Bound {
    candidate: Candidate,
    plan: LaunchPlan,
    mats: Vec<DeviceMatrix>,
    act: DeviceActivations,
    y: DeviceBuffer<f32>,
    ws: DeviceBuffer<f32>,
}

impl Bound {
    /// The layer's activation quantization, then its decode candidate.
    fn launch(
        &mut self,
        gpu: &Gpu,
        copy: usize,
        programmatic: bool,
    ) -> std::result::Result<(), vnni_kernels::cuda::CudaError> {
        gpu.quantize_launch(&mut self.act, programmatic)?;
        let l = Launch::decode(&self.candidate, &self.plan, &self.mats[copy], &self.act, 0).programmatic(programmatic);
        gpu.launch(&l, &mut self.y, &mut self.ws)
    }
}

/// Time `layers` as one chain in `mode`: first every layer once plainly and once
/// programmatically (quantized activations, outputs and partials poisoned before each, so a
/// kernel that read its producer's output before waiting for it would read poison), refusing
/// a chain whose outputs differ in one bit; then both forms under `protocol` (without racing:
/// neither may drop out), the weights rotated over enough copies of the whole chain that L2
/// never holds a layer between two of its uses.
pub fn time_chain(gpu: &Gpu, layers: &[ChainLayer], mode: Mode, protocol: &Protocol) -> Result<ChainTiming> {
    if layers.is_empty() {
        return Err(MeasureError::Invalid("a chain needs at least one layer".into()));
    }
    let started = Instant::now();
    let weights: Vec<_> =
        layers.iter().map(|l| cell_weights(l.format, l.n, l.k, FIXTURE_SEED)).collect::<Result<_>>()?;
    let weight_bytes: usize = weights.iter().map(|w| w.bytes()).sum();
    let copies = copies_for(weight_bytes, gpu.info.l2_bytes);
    let allocated = Rotation::allocated(copies);
    let mut bound = Vec::with_capacity(layers.len());
    for (l, w) in layers.iter().zip(&weights) {
        let plan = l
            .candidate
            .plan(l.n, l.k, gpu.info.sms)
            .ok_or_else(|| MeasureError::Invalid(format!("{} has no launch for {} x {}", l.candidate.id, l.n, l.k)))?;
        let first = gpu.upload_matrix(w)?;
        let mut mats = vec![first];
        for _ in 1..allocated {
            mats.push(gpu.duplicate_matrix(&mats[0])?);
        }
        let x = fixture::activations(1, l.k, FIXTURE_SEED);
        let act = gpu.upload_activations(&x, 1, l.k)?;
        let y = gpu.alloc_zeros::<f32>(l.n)?;
        let ws = gpu.alloc_zeros::<f32>(plan.workspace.max(1))?;
        bound.push(Bound { candidate: l.candidate.clone(), plan, mats, act, y, ws });
    }
    gpu.synchronize()?;
    phases::add(Phase::Fixture, started);

    let outputs = |gpu: &Gpu, bound: &mut [Bound], programmatic: bool| -> Result<Vec<Vec<f32>>> {
        for b in bound.iter_mut() {
            gpu.poison(&mut b.y)?;
            gpu.poison(&mut b.ws)?;
            gpu.poison(&mut b.act.q)?;
            gpu.poison(&mut b.act.d)?;
            gpu.poison(&mut b.act.sum)?;
        }
        for b in bound.iter_mut() {
            b.launch(gpu, 0, programmatic)?;
        }
        gpu.synchronize()?;
        Ok(bound.iter().map(|b| gpu.download(&b.y)).collect::<std::result::Result<_, _>>()?)
    };
    let checking = Instant::now();
    let plain = outputs(gpu, &mut bound, false)?;
    let programmatic = outputs(gpu, &mut bound, true)?;
    for ((l, a), b) in layers.iter().zip(&plain).zip(&programmatic) {
        if let Some(col) = a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits()) {
            return Err(MeasureError::Structural(format!(
                "{} on {} x {}: column {col} is {:e} launched plainly, {:e} launched programmatically",
                l.candidate.id, l.n, l.k, a[col], b[col]
            )));
        }
    }
    phases::add(Phase::Check, checking);

    let no_race = Protocol { race: Vec::new(), passes: 1, ..protocol.clone() };
    let mut launch = |form: usize, copy: usize| -> std::result::Result<(), vnni_kernels::cuda::CudaError> {
        bound.iter_mut().try_for_each(|b| b.launch(gpu, copy % allocated, form == 1))
    };
    let mut calibration = None;
    let timed =
        time_candidates(gpu, mode, &no_race, 2, Copies { distance: copies, allocated }, &mut calibration, &mut launch)?;
    let [plain, programmatic]: [Timed; 2] =
        timed.try_into().map_err(|_| MeasureError::Structural("two chain forms timed, not two results".into()))?;
    Ok(ChainTiming { plain, programmatic, weight_bytes, copies })
}
