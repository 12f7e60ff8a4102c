//! GPU timing: the GPU session (device, on-device preflight, options) and the CUDA clock for the protocol of `timing.rs`: events on the explicit non-blocking
//! stream, weight copies rotated across launches, eager launches or one CUDA graph per
//! candidate replayed.

use vnni_kernels::cuda::clock::Graph;
use vnni_kernels::cuda::device::Gpu;
use vnni_kernels::cuda::CudaError;

use vnni_kernels::Mode;

use crate::protocol::{replays_for, run_rounds, Protocol, Timed, TimingOptions};

/// What every GPU timing command starts from: the device, its preflight verdicts and the
/// timing options.
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

impl GpuSession {
    /// Open the device and run the on-device preflight once; `codebooks` empty means all.
    pub fn open(opts: &TimingOptions, codebooks: &[vnni_kernels::Codebook]) -> crate::error::Result<GpuSession> {
        use crate::error::Context;
        let gpu = Gpu::open(opts.device, opts.cache.as_deref()).context("opening the CUDA device")?;
        let resources = crate::preflight::rows(&gpu.info.arch, &gpu.static_resources, Some(&gpu))?;
        let rejected = crate::preflight::rejected(&resources);
        for (k, why) in &rejected {
            eprintln!("preflight rejected {k}: {why}");
        }
        Ok(GpuSession {
            codebooks: if codebooks.is_empty() { vnni_kernels::Codebook::ALL.to_vec() } else { codebooks.to_vec() },
            modes: opts.modes.clone(),
            protocol: opts.protocol(),
            gpu,
            resources,
            rejected,
        })
    }
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
    let clock = gpu.clock()?;
    let mut next_copy = 0usize;
    let mut timed = vec![Timed::default(); count];

    // Calibrate: replays per sample so one sample lasts at least min_sample_us.
    for (c, t) in timed.iter_mut().enumerate() {
        launch(c, next_copy % copies)?;
        next_copy += 1;
        clock.start()?;
        for _ in 0..3 {
            launch(c, next_copy % copies)?;
            next_copy += 1;
        }
        t.replays = replays_for(protocol, clock.stop_ms()? * 1000.0 / 3.0, copies);
    }

    let graphs: Vec<Option<Graph>> = match mode {
        Mode::Eager => (0..count).map(|_| None).collect(),
        Mode::Graph => {
            let mut g = Vec::with_capacity(count);
            for (c, t) in timed.iter().enumerate() {
                let graph = gpu.capture(&mut || {
                    for i in 0..t.replays {
                        launch(c, i % copies)?;
                    }
                    Ok(())
                })?;
                g.push(Some(graph));
            }
            g
        }
    };

    let mut sample = |c: usize, replays: usize| -> Result<f64, CudaError> {
        clock.start()?;
        match &graphs[c] {
            Some(g) => g.launch()?,
            None => {
                for _ in 0..replays {
                    launch(c, next_copy % copies)?;
                    next_copy += 1;
                }
            }
        }
        Ok(clock.stop_ms()? * 1000.0 / replays as f64)
    };
    run_rounds(protocol, mode, &mut timed, &mut sample)?;
    Ok(timed)
}
