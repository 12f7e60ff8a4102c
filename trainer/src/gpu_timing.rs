//! GPU timing: the shared GPU command options and session (device, on-device preflight),
//! and the CUDA clock for the protocol of `timing.rs`: events on the explicit non-blocking
//! stream, weight copies rotated across launches, eager launches or one CUDA graph per
//! candidate replayed.

use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::CudaGraph;
use vnni_kernels::cuda::device::Gpu;
use vnni_kernels::cuda::CudaError;

use crate::timing::{parse_modes, replays_for, run_rounds, Mode, Protocol, Timed};

/// Command-line options shared by every GPU timing command (bench, sweep).
#[derive(clap::Args, Debug, Clone)]
pub struct GpuTimingArgs {
    /// Codebooks (default: all).
    #[arg(long, value_delimiter = ',')]
    pub codebooks: Vec<vnni_kernels::Codebook>,
    /// Timing modes.
    #[arg(long, value_delimiter = ',', default_value = "eager,graph")]
    pub modes: Vec<String>,
    #[arg(long, default_value_t = 12)]
    pub samples: usize,
    #[arg(long, default_value_t = 2)]
    pub warmups: usize,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Cubin cache directory.
    #[arg(long)]
    pub cache: Option<std::path::PathBuf>,
}

impl GpuTimingArgs {
    pub fn codebooks(&self) -> Vec<vnni_kernels::Codebook> {
        if self.codebooks.is_empty() {
            vnni_kernels::Codebook::ALL.to_vec()
        } else {
            self.codebooks.clone()
        }
    }

    pub fn protocol(&self) -> Protocol {
        Protocol { warmups: self.warmups, samples: self.samples, ..Protocol::default() }
    }
}

/// What every GPU timing command starts from: the device, its preflight verdicts and the
/// parsed timing options.
pub struct GpuSession {
    pub gpu: Gpu,
    pub codebooks: Vec<vnni_kernels::Codebook>,
    pub modes: Vec<Mode>,
    pub protocol: Protocol,
    /// On-device preflight rows of every registry kernel.
    pub resources: Vec<vnni_corpus::ResourceRow>,
    /// Kernels preflight rejected (symbol -> why): never timed.
    pub rejected: std::collections::BTreeMap<String, String>,
}

impl GpuTimingArgs {
    /// Open the device and run the on-device preflight once.
    pub fn open(&self) -> anyhow::Result<GpuSession> {
        use anyhow::Context;
        let modes = parse_modes(&self.modes)?;
        let gpu = Gpu::open(self.device, self.cache.as_deref()).context("opening the CUDA device")?;
        let resources = crate::preflight::rows(&gpu.info.arch, &gpu.static_resources, Some(&gpu))?;
        let rejected = crate::preflight::rejected(&resources);
        for (k, why) in &rejected {
            eprintln!("preflight rejected {k}: {why}");
        }
        Ok(GpuSession { codebooks: self.codebooks(), modes, protocol: self.protocol(), gpu, resources, rejected })
    }
}

fn err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> CudaError + '_ {
    move |e| CudaError::Driver { what: what.to_string(), message: format!("{e:?}") }
}

/// Time `count` candidates. `launch(candidate, copy)` enqueues one launch of a candidate on
/// weight copy `copy`; consecutive launches always use the next copy (of `copies`).
pub fn time_candidates(
    gpu: &Gpu,
    mode: Mode,
    protocol: &Protocol,
    count: usize,
    copies: usize,
    launch: &mut dyn FnMut(usize, usize) -> Result<(), CudaError>,
) -> Result<Vec<Timed>, CudaError> {
    let stream = &gpu.stream;
    let start = gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(err("creating an event"))?;
    let end = gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(err("creating an event"))?;
    let mut next_copy = 0usize;
    let mut timed = vec![Timed::default(); count];

    // Calibrate: replays per sample so one sample lasts at least min_sample_us.
    for (c, t) in timed.iter_mut().enumerate() {
        launch(c, next_copy % copies)?;
        next_copy += 1;
        start.record(stream).map_err(err("recording an event"))?;
        for _ in 0..3 {
            launch(c, next_copy % copies)?;
            next_copy += 1;
        }
        end.record(stream).map_err(err("recording an event"))?;
        end.synchronize().map_err(err("waiting for an event"))?;
        let per = f64::from(start.elapsed_ms(&end).map_err(err("reading an event"))?) * 1000.0 / 3.0;
        t.replays = replays_for(protocol, per, copies);
    }

    let graphs: Vec<Option<CudaGraph>> = match mode {
        Mode::Eager => (0..count).map(|_| None).collect(),
        Mode::Graph => {
            let mut g = Vec::with_capacity(count);
            for (c, t) in timed.iter().enumerate() {
                stream
                    .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
                    .map_err(err("beginning a graph capture"))?;
                for i in 0..t.replays {
                    launch(c, i % copies)?;
                }
                let graph = stream
                    .end_capture(CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
                    .map_err(err("ending a graph capture"))?;
                let graph = graph
                    .ok_or_else(|| CudaError::Driver { what: "graph capture".into(), message: "empty graph".into() })?;
                graph.upload().map_err(err("uploading a graph"))?;
                g.push(Some(graph));
            }
            g
        }
    };

    let mut sample = |c: usize, replays: usize| -> Result<f64, CudaError> {
        start.record(stream).map_err(err("recording an event"))?;
        match &graphs[c] {
            Some(g) => g.launch().map_err(err("launching a graph"))?,
            None => {
                for _ in 0..replays {
                    launch(c, next_copy % copies)?;
                    next_copy += 1;
                }
            }
        }
        end.record(stream).map_err(err("recording an event"))?;
        end.synchronize().map_err(err("waiting for an event"))?;
        Ok(f64::from(start.elapsed_ms(&end).map_err(err("reading an event"))?) * 1000.0 / replays as f64)
    };
    run_rounds(protocol, mode, &mut timed, &mut sample)?;
    Ok(timed)
}
