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
/// weight copy `copy`: pass p of the protocol launches on copies `p * copies .. (p + 1) *
/// copies` (a cell's fixture holds `copies x passes` of them; the vendor baselines hold one
/// set and wrap the index, so their later passes reuse the first pass's memory), consecutive
/// launches always on the next copy of the pass. Graphs are captured again for every pass, on
/// its copies.
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

    // Calibrate on the first pass's copies: replays per sample so one sample lasts at least
    // min_sample_us (every pass uses these replays).
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
    let replays: Vec<usize> = timed.iter().map(|t| t.replays).collect();

    // (pass, one graph per candidate) in graph mode, captured when a pass starts
    let mut graphs: Option<(usize, Vec<Graph>)> = None;
    let mut sample = |pass: usize, c: usize, n: usize| -> Result<f64, CudaError> {
        let base = pass * copies;
        if mode == Mode::Graph && graphs.as_ref().is_none_or(|(p, _)| *p != pass) {
            graphs = None; // the previous pass's graphs go before this pass's are made
            let mut g = Vec::with_capacity(count);
            for (cand, &r) in replays.iter().enumerate() {
                g.push(gpu.capture(&mut || {
                    for i in 0..r {
                        launch(cand, base + i % copies)?;
                    }
                    Ok(())
                })?);
            }
            graphs = Some((pass, g));
        }
        clock.start()?;
        match &graphs {
            Some((_, g)) => g[c].launch()?,
            None => {
                for _ in 0..n {
                    launch(c, base + next_copy % copies)?;
                    next_copy += 1;
                }
            }
        }
        Ok(clock.stop_ms()? * 1000.0 / n as f64)
    };
    run_rounds(protocol, mode, &mut timed, &mut sample)?;
    Ok(timed)
}
