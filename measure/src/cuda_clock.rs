//! GPU timing: the GPU session (device, on-device preflight, options) and the CUDA clock for
//! the protocol of `protocol.rs`: events on the explicit non-blocking stream, weight copies
//! rotated across launches in windows, eager launches or captured graphs replayed.

use vnni_kernels::cuda::clock::{EventClock, Graph};
use vnni_kernels::cuda::device::Gpu;
use vnni_kernels::cuda::CudaError;

use vnni_kernels::Mode;

use std::collections::btree_map::{BTreeMap, Entry};
use std::time::Instant;

use crate::phases::{self, Phase};
use crate::protocol::{calibrated_replays, run_rounds, Protocol, Rotation, Timed, TimingOptions};

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
        let mut gpu = Gpu::open(opts.device, opts.cache.as_deref()).context("opening the CUDA device")?;
        gpu.l2_prefetch = opts.l2_prefetch;
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

/// A pass's weight copies as the launches see them: `distance` copies must lie between two
/// uses of one copy; each pass holds `allocated` (a cell's fixture: [`Rotation::allocated`];
/// the vendor baselines: `distance`, so whole rotations).
#[derive(Debug, Clone, Copy)]
pub struct Copies {
    pub distance: usize,
    pub allocated: usize,
}

/// Time `count` candidates. `launch(candidate, copy)` enqueues one launch of a candidate on
/// weight copy `copy`: pass p of the protocol launches on copies `p * allocated ..` (a cell's
/// fixture holds `allocated x passes` of them; the vendor baselines hold one set and wrap the
/// index, so their later passes reuse the first pass's memory), every launch on the copy after
/// the previous one's ([`Rotation`]). Graphs are captured per (candidate, first window) when a
/// sample first needs them, again for every pass, on its copies. `calibration` holds the
/// candidates' launches per sample: calibrated here when `None` and kept there, so the next
/// mode of the same candidates reuses it (calibration launches eagerly in every mode).
pub fn time_candidates(
    gpu: &Gpu,
    mode: Mode,
    protocol: &Protocol,
    count: usize,
    copies: Copies,
    calibration: &mut Option<Vec<usize>>,
    launch: &mut dyn FnMut(usize, usize) -> Result<(), CudaError>,
) -> Result<Vec<Timed>, CudaError> {
    let clock = gpu.clock()?;
    let distance = copies.distance.max(1);
    let mut timed = vec![Timed::default(); count];
    if calibration.as_ref().is_none_or(|raw| raw.len() != count) {
        *calibration = Some(calibrate(&clock, protocol, count, distance, launch)?);
    }
    let raw = calibration.as_deref().unwrap_or_default();
    let rot = Rotation::plan(protocol.whole_rotations, distance, copies.allocated, raw);
    for (t, r) in timed.iter_mut().zip(raw) {
        t.replays = rot.replays(*r);
    }

    // graph mode: (pass, graphs by (candidate, first window)), captured on first use
    let mut graphs: (usize, BTreeMap<(usize, usize), Graph>) = (0, BTreeMap::new());
    let mut first = 0usize; // the window the next sample starts at
    let mut capture_nanos = 0u64;
    let mut lead = Lead::default();
    let mut sample = |pass: usize, c: usize, n: usize| -> Result<f64, CudaError> {
        let base = pass * copies.allocated;
        let window = first % rot.windows;
        first += n / rot.window;
        let mut run = |i: usize| launch(c, base + rot.copy(window, i));
        if mode == Mode::Graph {
            if graphs.0 != pass {
                graphs = (pass, BTreeMap::new()); // the previous pass's graphs go first
            }
            let graph = match graphs.1.entry((c, window)) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let t = Instant::now();
                    let g = gpu.capture(&mut || (0..n).try_for_each(&mut run))?;
                    capture_nanos += t.elapsed().as_nanos() as u64;
                    e.insert(g)
                }
            };
            lead.start(&clock, protocol)?;
            let submitted = Instant::now();
            graph.launch()?;
            lead.submitted(submitted);
        } else {
            clock.start()?;
            (0..n).try_for_each(&mut run)?;
        }
        Ok(clock.stop_ms()? * 1000.0 / n as f64)
    };
    let started = Instant::now();
    run_rounds(protocol, mode, &mut timed, &mut sample)?;
    // graph capture happened inside the rounds: it is counted apart from the sampling
    let rounds = started.elapsed().as_nanos() as u64;
    phases::add_nanos(Phase::Sample, rounds.saturating_sub(capture_nanos));
    phases::add_nanos(Phase::Capture, capture_nanos);
    Ok(timed)
}

/// Launches per sample for each candidate, on the first pass's copies, so one sample lasts at
/// least `min_sample_us` (`min_window_us` for samples of windows, see [`Lead`]): one warm
/// launch, then [`calibrated_replays`].
fn calibrate(
    clock: &EventClock,
    protocol: &Protocol,
    count: usize,
    distance: usize,
    launch: &mut dyn FnMut(usize, usize) -> Result<(), CudaError>,
) -> Result<Vec<usize>, CudaError> {
    let started = Instant::now();
    let min_us = match distance > 1 && !protocol.whole_rotations {
        true => protocol.min_window_us,
        false => protocol.min_sample_us,
    };
    // every launch on the copy after the previous one's
    let mut next = 0usize;
    let mut launch_next = |c: usize| {
        let copy = next % distance;
        next += 1;
        launch(c, copy)
    };
    let mut raw = Vec::with_capacity(count);
    for c in 0..count {
        launch_next(c)?;
        raw.push(calibrated_replays(min_us, &mut |n| -> Result<f64, CudaError> {
            clock.start()?;
            for _ in 0..n {
                launch_next(c)?;
            }
            Ok(clock.stop_ms()? * 1000.0)
        })?);
    }
    phases::add(Phase::Calibrate, started);
    Ok(raw)
}

/// The graph clock's lead-in (whole rotations start cold, as before): the stream waits about
/// three times what the host has been taking to submit a sample's graph before the start
/// event, so the submission latency stays out of the timed region; a sample of windows lasts
/// only a few hundred microseconds, and a few of them would bias every candidate by a few
/// percent (measured on the H200: docs/PERF.md). Eager samples keep it: the host's launch
/// cost is what eager mode measures. (Event nodes inside the graph were tried instead: they
/// cost more than they hide.)
struct Lead {
    /// Moving average of the host's submission time (ns).
    submit_ns: f64,
}

impl Default for Lead {
    fn default() -> Self {
        Lead { submit_ns: Lead::MIN_NS as f64 / 3.0 }
    }
}

impl Lead {
    const MIN_NS: u64 = 10_000;
    const MAX_NS: u64 = 200_000;

    fn start(&self, clock: &EventClock, protocol: &Protocol) -> Result<(), CudaError> {
        if protocol.whole_rotations {
            return clock.start();
        }
        clock.start_after(((3.0 * self.submit_ns) as u64).clamp(Lead::MIN_NS, Lead::MAX_NS))
    }

    fn submitted(&mut self, since: Instant) {
        self.submit_ns += (since.elapsed().as_nanos() as f64 - self.submit_ns) / 4.0;
    }
}
