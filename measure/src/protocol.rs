//! The timing protocol shared by every backend (DESIGN.md section 5): calibrated
//! back-to-back replays of at least `min_sample_us`, warmup rounds then sample rounds in
//! which every candidate runs once in a seeded shuffled order, optional racing, every raw
//! sample kept. The clocks are the runners': CUDA events (`cuda_clock.rs`), the host's
//! monotonic clock (`cpu_cell.rs`).

use vnni_kernels::fixture::{derive_seed, splitmix64};
use vnni_kernels::Mode;

use crate::stats::summarize;

/// How a session times (bench, sweep, refresh): the protocol's counts, the modes, and on a
/// GPU the device and the cubin cache.
#[derive(Debug, Clone)]
pub struct TimingOptions {
    pub modes: Vec<Mode>,
    pub samples: usize,
    pub warmups: usize,
    /// CUDA device ordinal.
    pub device: usize,
    /// Cubin cache directory.
    pub cache: Option<std::path::PathBuf>,
}

impl TimingOptions {
    pub fn protocol(&self) -> Protocol {
        Protocol { warmups: self.warmups, samples: self.samples, ..Protocol::default() }
    }
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

/// How many back-to-back launches make one sample last at least `min_sample_us`: a multiple
/// of the weight-copy count so a replayed sequence never reuses a copy early.
pub fn replays_for(protocol: &Protocol, per_launch_us: f64, copies: usize) -> usize {
    let r = (protocol.min_sample_us / per_launch_us.max(0.01)).ceil().clamp(1.0, 4000.0) as usize;
    r.div_ceil(copies) * copies
}

/// Warmup rounds, then sample rounds; in each round every candidate not dropped is sampled
/// once, in an order shuffled by a seed derived from the protocol seed, the mode and the
/// round. `sample(c)` times `timed[c].replays` launches and returns microseconds per launch.
/// Racing drops candidates slower than `race_ratio` x the leader after `race_after` rounds;
/// they keep their samples.
pub fn run_rounds<E>(
    protocol: &Protocol,
    mode: Mode,
    timed: &mut [Timed],
    sample: &mut dyn FnMut(usize, usize) -> Result<f64, E>,
) -> Result<(), E> {
    for round in 0..protocol.warmups + protocol.samples {
        let warmup = round < protocol.warmups;
        let order = shuffled(timed.len(), derive_seed(protocol.seed, &format!("{} round {round}", mode.name())));
        for (pos, &c) in order.iter().enumerate() {
            if timed[c].dropped {
                continue;
            }
            let us = sample(c, timed[c].replays)?;
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
    Ok(())
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
