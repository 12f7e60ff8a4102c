//! The GPU timing protocol (DESIGN.md section 5): events on the explicit non-blocking
//! stream, calibrated back-to-back replays of at least `min_sample_us`, weight copies
//! rotated across launches, warmup rounds then sample rounds in which every candidate runs
//! once in a seeded shuffled order, optional racing, every raw sample kept.

use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::CudaGraph;
use vnni_kernels::cuda::device::Gpu;
use vnni_kernels::cuda::CudaError;
use vnni_kernels::fixture::{derive_seed, splitmix64};

use crate::stats::summarize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Plain launches.
    Eager,
    /// The launches of one sample captured once into a CUDA graph and replayed.
    Graph,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Eager => "eager",
            Mode::Graph => "graph",
        }
    }
}

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

/// `eager`/`graph` names from the command line.
pub fn parse_modes(names: &[String]) -> anyhow::Result<Vec<Mode>> {
    names
        .iter()
        .map(|m| match m.as_str() {
            "eager" => Ok(Mode::Eager),
            "graph" => Ok(Mode::Graph),
            other => anyhow::bail!("unknown mode {other:?} (eager, graph)"),
        })
        .collect()
}

#[derive(Debug, Clone)]
pub struct Protocol {
    pub warmups: usize,
    pub samples: usize,
    pub min_sample_us: f64,
    /// After this many sample rounds, drop candidates slower than `race_ratio` x the leader's median.
    pub race_after: Option<usize>,
    pub race_ratio: f64,
    pub seed: u64,
}

impl Default for Protocol {
    fn default() -> Self {
        Protocol { warmups: 2, samples: 12, min_sample_us: 100.0, race_after: Some(4), race_ratio: 1.3, seed: 0x5EED }
    }
}

/// One raw sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub round: usize,
    pub order: usize,
    pub warmup: bool,
    pub latency_us: f64,
}

#[derive(Debug, Clone, Default)]
pub struct Timed {
    pub replays: usize,
    pub samples: Vec<Sample>,
    pub dropped: bool,
}

impl Timed {
    pub fn measured(&self) -> Vec<f64> {
        self.samples.iter().filter(|s| !s.warmup).map(|s| s.latency_us).collect()
    }
}

/// Seeded Fisher-Yates shuffle of 0..n.
pub fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (splitmix64(seed, i as u64) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
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

    // Calibrate: replays per sample so one sample lasts at least min_sample_us, a multiple of
    // the copy count so a replayed sequence never reuses a copy early.
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
        let r = (protocol.min_sample_us / per.max(0.01)).ceil().clamp(1.0, 4000.0) as usize;
        t.replays = r.div_ceil(copies) * copies;
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

    for round in 0..protocol.warmups + protocol.samples {
        let warmup = round < protocol.warmups;
        let order = shuffled(count, derive_seed(protocol.seed, &format!("{} round {round}", mode.name())));
        for (pos, &c) in order.iter().enumerate() {
            if timed[c].dropped {
                continue;
            }
            start.record(stream).map_err(err("recording an event"))?;
            match &graphs[c] {
                Some(g) => g.launch().map_err(err("launching a graph"))?,
                None => {
                    for _ in 0..timed[c].replays {
                        launch(c, next_copy % copies)?;
                        next_copy += 1;
                    }
                }
            }
            end.record(stream).map_err(err("recording an event"))?;
            end.synchronize().map_err(err("waiting for an event"))?;
            let us =
                f64::from(start.elapsed_ms(&end).map_err(err("reading an event"))?) * 1000.0 / timed[c].replays as f64;
            timed[c].samples.push(Sample { round, order: pos, warmup, latency_us: us });
        }
        if let Some(after) = protocol.race_after {
            if !warmup && round + 1 == protocol.warmups + after {
                let medians: Vec<f64> =
                    timed.iter().map(|t| summarize(&t.measured()).map_or(f64::INFINITY, |s| s.median)).collect();
                let best = medians.iter().copied().fold(f64::INFINITY, f64::min);
                for (t, m) in timed.iter_mut().zip(medians) {
                    t.dropped = m > protocol.race_ratio * best;
                }
            }
        }
    }
    Ok(timed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn shuffles_are_seeded_permutations() {
        let a = super::shuffled(40, 7);
        assert_eq!(a, super::shuffled(40, 7));
        assert_ne!(a, super::shuffled(40, 8));
        let mut s = a.clone();
        s.sort();
        assert_eq!(s, (0..40).collect::<Vec<_>>());
    }
}
