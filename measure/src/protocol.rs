//! The timing protocol shared by every backend (DESIGN.md section 5): calibrated
//! back-to-back replays of at least `min_sample_us`; one or more independent passes, each of
//! warmup rounds then sample rounds in which every candidate runs once in a seeded shuffled
//! order; optional racing; every raw sample kept with its pass. Two passes of one candidate
//! are a replicate of an identical kernel on identical bytes (on a GPU on weight copies of
//! their own): their difference is the run-to-run noise the learner's band is made of. The
//! clocks are the runners': CUDA events (`cuda_clock.rs`), the host's monotonic clock
//! (`cpu_cell.rs`).

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
    /// Independent passes (each `warmups` + `samples` rounds).
    pub passes: usize,
    /// Every sample replays whole rotations of the weight copies (the protocol before
    /// 2026-12-02; `bench` and `sweep` keep it to measure what the windows change).
    pub whole_rotations: bool,
    /// Decode launches carry Hopper's programmatic stream serialization attribute
    /// ([`Protocol::programmatic`]).
    pub programmatic: bool,
    /// Which decode launches issue the L2 prefetch (CUDA; [`vnni_kernels::L2Prefetch`]).
    pub l2_prefetch: vnni_kernels::L2Prefetch,
    /// CUDA device ordinal.
    pub device: usize,
    /// Cubin cache directory.
    pub cache: Option<std::path::PathBuf>,
}

impl TimingOptions {
    pub fn protocol(&self) -> Protocol {
        Protocol {
            warmups: self.warmups,
            samples: self.samples,
            passes: self.passes.max(1),
            whole_rotations: self.whole_rotations,
            programmatic: self.programmatic,
            ..Protocol::default()
        }
    }
}

#[derive(Debug, Clone)]
pub struct Protocol {
    /// Warmup and sample rounds per pass.
    pub warmups: usize,
    pub samples: usize,
    /// Independent passes: the second starts after the first has finished every candidate and
    /// (on a GPU) launches on weight copies of its own. Racing happens in the first pass only.
    pub passes: usize,
    pub min_sample_us: f64,
    /// A sample of windows ([`Rotation`], shapes with more than one weight copy) lasts at
    /// least this: each sample carries a few microseconds of start-up that a whole rotation
    /// (milliseconds on a small shape) hid (measured on the H200: docs/PERF.md).
    pub min_window_us: f64,
    /// Racing in the first pass ([`RACE`]; empty: none).
    pub race: Vec<RaceStep>,
    /// Settling in every pass ([`SETTLE`]; none: every round runs).
    pub settle: Option<Settle>,
    pub seed: u64,
    /// Samples replay whole rotations of the weight copies instead of windows of them
    /// ([`Rotation`]): the older, slower protocol, kept to measure the difference.
    pub whole_rotations: bool,
    /// Decode candidates launch with programmatic dependent launch (sm_90): each may start
    /// its weight loads while the previous launch of the sample drains (`bench
    /// --programmatic`, `sweep --programmatic`, recorded in the plan).
    pub programmatic: bool,
}

impl Protocol {
    /// The protocol a collection plan times with (its profile's counts).
    pub fn of_plan(plan: &vnni_corpus::collection::CollectionPlan) -> Protocol {
        Protocol {
            warmups: plan.inventory.warmups,
            samples: plan.inventory.samples,
            passes: plan.inventory.passes,
            whole_rotations: plan.whole_rotations,
            programmatic: plan.programmatic,
            ..Protocol::default()
        }
    }
}

impl Default for Protocol {
    fn default() -> Self {
        Protocol {
            warmups: 2,
            samples: 12,
            passes: 1,
            min_sample_us: 100.0,
            min_window_us: 250.0,
            race: RACE.to_vec(),
            settle: Some(SETTLE),
            seed: 0x5EED,
            whole_rotations: false,
            programmatic: false,
        }
    }
}

/// One step of racing: after `after` sample rounds of the first pass, a candidate whose
/// `bound` over its samples so far is slower than `ratio` x the leader's median (the fastest
/// median of the candidates still running) sits out the rest; it keeps its samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RaceStep {
    pub after: usize,
    pub ratio: f64,
    pub bound: RaceBound,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaceBound {
    /// The candidate's fastest sample: an optimistic bound on its median (below it with
    /// probability 1 - 2^-k after k samples), so a drop needs every sample to be slow.
    Fastest,
    /// The candidate's median.
    Median,
}

/// Successive halving with optimistic bounds: hopeless candidates stop after one to three
/// sample rounds, the old rule (median above 1.3 x the leader after four) stays last.
/// Replayed on the recorded samples of four H200 corpora (docs/PERF.md), it saves 43-50% of
/// the samples and changes no pick beyond one grouped cell in 3,710 (by 2%).
pub const RACE: [RaceStep; 4] = [
    RaceStep { after: 1, ratio: 1.5, bound: RaceBound::Fastest },
    RaceStep { after: 2, ratio: 1.2, bound: RaceBound::Fastest },
    RaceStep { after: 3, ratio: 1.1, bound: RaceBound::Fastest },
    RaceStep { after: 4, ratio: 1.3, bound: RaceBound::Median },
];

/// Settling: after `after` sample rounds of a pass, the pass stops its rounds once every
/// candidate still running has settled, its samples in this pass spread (max - min) over at
/// most `spread` x their median. Whole rounds stop, so the candidates keep the same
/// interleaved rounds; the next pass still runs (its replicate is the noise band's evidence).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settle {
    pub after: usize,
    pub spread: f64,
}

/// Four rounds within 1%: long launches (prefill tiles at large M, hundreds of microseconds
/// to milliseconds) repeat to well under 1% and need no twelve rounds. Replayed on the
/// recorded samples of an H200 `core` shard (docs/PERF.md): 45% of the sampling time saved,
/// no pick more than 0.4% off, the pass-replicate noise unchanged (p95 2.84% -> 2.85%).
pub const SETTLE: Settle = Settle { after: 4, spread: 0.01 };

/// One raw sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub pass: usize,
    /// Round within the pass.
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
    /// Every non-warmup sample of every pass.
    pub fn measured(&self) -> Vec<f64> {
        self.samples.iter().filter(|s| !s.warmup).map(|s| s.latency_us).collect()
    }

    /// The fastest of every sample taken, warmups too: racing's optimistic bound. A warmup
    /// times the same launches, so a drop needs all of them slow; over the sample rounds alone
    /// one stalled first eager sample dropped the fastest candidate of a cell, recorded
    /// 2.2x slow with both its warmups at the cell's best (docs/PERF.md).
    pub fn fastest_launched(&self) -> f64 {
        self.samples.iter().map(|s| s.latency_us).fold(f64::INFINITY, f64::min)
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

/// How many back-to-back launches make one sample last at least `min_us`.
pub fn replays_for(min_us: f64, per_launch_us: f64) -> usize {
    (min_us / per_launch_us.max(0.01)).ceil().clamp(1.0, 4000.0) as usize
}

/// Launches per sample from calibration: `time(n)` times `n` back-to-back launches after a
/// warm one and returns microseconds in all. One launch first; if it alone lasts twice
/// `min_us` one more confirms it, else two more; the faster per-launch estimate counts. A
/// stall inside one timed launch then raises the replays, never lowers them:
/// calibrated by one stalled launch, a 5 us kernel got one replay a sample where its cell's
/// others got 16-24, and its one-launch samples measured it 1.6-2.1x slow, in both modes
/// (they share the calibration; docs/PERF.md).
pub fn calibrated_replays<E>(min_us: f64, time: &mut dyn FnMut(usize) -> Result<f64, E>) -> Result<usize, E> {
    let first = time(1)?;
    let per_launch = match first >= 2.0 * min_us {
        true => first.min(time(1)?),
        false => first.min(time(2)? / 2.0),
    };
    Ok(replays_for(min_us, per_launch))
}

/// How the launches of a cell's samples walk one pass's weight copies. Every launch reads the
/// copy after the previous launch's, whichever candidate made it, so two uses of one copy are
/// always `copies()` launches apart: at least the fixture's reuse distance (more than 3 x L2
/// touched in between), as when a sample replayed whole rotations. But a sample is only a
/// whole number of `window`s of consecutive copies, sized to the cell's slowest candidate's
/// calibrated replays: on a small shape (hundreds of copies) a sample lasts about
/// `min_sample_us` instead of a whole rotation. In graph mode each (candidate, first window)
/// is one captured graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    pub window: usize,
    pub windows: usize,
}

impl Rotation {
    /// The rotation for candidates calibrated at `replays` (launches per sample each), copies
    /// `distance` apart at least, from `allocated` copies per pass. A fixture of
    /// [`Rotation::allocated`] copies always fits windows; one of only `distance` copies (the
    /// vendor baselines), or `whole`, gets whole rotations.
    pub fn plan(whole: bool, distance: usize, allocated: usize, replays: &[usize]) -> Rotation {
        let d = distance.max(1);
        let slowest = replays.iter().copied().min().unwrap_or(d).max(1);
        let window = if whole { d } else { slowest.min(d) };
        let windows = d.div_ceil(window);
        if windows * window > allocated {
            return Rotation { window: d, windows: 1 };
        }
        Rotation { window, windows }
    }

    /// Copies a fixture allocates per pass for reuse distance `distance`: room for windows of
    /// any size up to a whole rotation (`windows x window < distance + window`).
    pub fn allocated(distance: usize) -> usize {
        if distance <= 1 {
            1
        } else {
            2 * distance - 1
        }
    }

    /// Copies in one turn of the rotation (>= the distance).
    pub fn copies(&self) -> usize {
        self.window * self.windows
    }

    /// Launches per sample of a candidate calibrated at `replays`: whole windows.
    pub fn replays(&self, replays: usize) -> usize {
        replays.max(1).div_ceil(self.window) * self.window
    }

    /// The copy read by launch `i` of a sample whose first window is `first`.
    pub fn copy(&self, first: usize, i: usize) -> usize {
        (first * self.window + i) % self.copies()
    }
}

/// The racing steps due after `done` sample rounds of the first pass.
fn race(protocol: &Protocol, done: usize, timed: &mut [Timed]) {
    for step in protocol.race.iter().filter(|s| s.after == done) {
        let median = |t: &Timed| summarize(&t.measured()).map_or(f64::INFINITY, |s| s.median);
        let lead = timed.iter().filter(|t| !t.dropped).map(median).fold(f64::INFINITY, f64::min);
        for t in timed.iter_mut().filter(|t| !t.dropped) {
            let bound = match step.bound {
                RaceBound::Fastest => t.fastest_launched(),
                RaceBound::Median => median(t),
            };
            t.dropped = bound > step.ratio * lead;
        }
    }
}

/// Whether every candidate still running has settled after `done` sample rounds of `pass`.
fn settled(settle: Settle, pass: usize, done: usize, timed: &[Timed]) -> bool {
    done >= settle.after
        && timed.iter().filter(|t| !t.dropped).all(|t| {
            let v: Vec<f64> = t.samples.iter().filter(|s| s.pass == pass && !s.warmup).map(|s| s.latency_us).collect();
            let (lo, hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            summarize(&v).is_some_and(|s| hi - lo <= settle.spread * s.median)
        })
}

/// Per pass: warmup rounds, then sample rounds; in each round every candidate not dropped is
/// sampled once, in an order shuffled by a seed derived from the protocol seed, the mode, the
/// pass and the round (pass 0 keeps the seeds of one-pass protocols). `sample(pass, c,
/// replays)` times `timed[c].replays` launches and returns microseconds per launch. Racing
/// ([`RaceStep`]) drops candidates in the first pass; they keep their samples and sit out the
/// later passes. Settling ([`Settle`]) ends a pass's rounds early.
pub fn run_rounds<E>(
    protocol: &Protocol,
    mode: Mode,
    timed: &mut [Timed],
    sample: &mut dyn FnMut(usize, usize, usize) -> Result<f64, E>,
) -> Result<(), E> {
    let rounds = protocol.warmups + protocol.samples;
    for pass in 0..protocol.passes.max(1) {
        for round in 0..rounds {
            let warmup = round < protocol.warmups;
            let label = match pass {
                0 => format!("{} round {round}", mode.name()),
                p => format!("{} pass {p} round {round}", mode.name()),
            };
            let order = shuffled(timed.len(), derive_seed(protocol.seed, &label));
            for (pos, &c) in order.iter().enumerate() {
                if timed[c].dropped {
                    continue;
                }
                let us = sample(pass, c, timed[c].replays)?;
                timed[c].samples.push(Sample { pass, round, order: pos, warmup, latency_us: us });
            }
            if !warmup {
                let done = round + 1 - protocol.warmups;
                if pass == 0 {
                    race(protocol, done, timed);
                }
                if protocol.settle.is_some_and(|s| settled(s, pass, done, timed)) {
                    break;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Rotation;

    /// Samples chained window after window never reuse a copy before `distance` launches,
    /// whatever each candidate's replays; windows fit the allocation; a sample lasts at least
    /// its calibrated replays and less than one window more; whole rotations and one-copy
    /// fixtures are the old protocol.
    #[test]
    fn windows_keep_the_reuse_distance_and_shorten_samples() {
        for (distance, replays) in
            [(721, vec![34, 60, 400, 34]), (85, vec![7, 1, 300]), (3, vec![2, 5]), (10, vec![4]), (1, vec![9, 30])]
        {
            let rot = Rotation::plan(false, distance, Rotation::allocated(distance), &replays);
            assert!(rot.copies() >= distance && rot.copies() <= Rotation::allocated(distance), "{rot:?}");
            let mut last_use = std::collections::BTreeMap::new();
            let (mut launch, mut first) = (0usize, 0usize);
            for round in 0..50 {
                let r = rot.replays(replays[round % replays.len()]);
                assert!(r >= replays[round % replays.len()] && r < replays[round % replays.len()] + rot.window);
                for i in 0..r {
                    let copy = rot.copy(first, i);
                    if let Some(prev) = last_use.insert(copy, launch) {
                        assert!(launch - prev >= distance, "copy {copy} reused after {} launches", launch - prev);
                    }
                    launch += 1;
                }
                first += r / rot.window;
            }
        }
        assert_eq!(Rotation::plan(false, 721, 1441, &[34, 60]).window, 34);
        assert_eq!(Rotation::plan(true, 721, 1441, &[34, 60]), Rotation { window: 721, windows: 1 });
        assert_eq!(Rotation::plan(false, 721, 721, &[34, 60]), Rotation { window: 721, windows: 1 });
        assert_eq!(Rotation::plan(true, 721, 721, &[34]).replays(34), 721);
        assert_eq!(Rotation::plan(false, 1, 1, &[9, 30]).replays(30), 30);
    }

    /// The default racing: a candidate 1.6x slower stops after one sample round, one 1.15x
    /// slower after three (its fastest sample is still above 1.1x the leader), one 1.05x
    /// slower runs every round; a slow first sample alone does not drop a fast candidate.
    #[test]
    fn racing_stops_hopeless_candidates_early_and_keeps_close_ones() {
        use super::{run_rounds, Protocol, Timed};
        use vnni_kernels::Mode;
        let p = Protocol { warmups: 1, samples: 6, ..Protocol::default() };
        let mut timed = vec![Timed { replays: 1, ..Timed::default() }; 5];
        let mut calls = [0usize; 5];
        let mut sample = |_pass: usize, c: usize, _r: usize| -> Result<f64, ()> {
            calls[c] += 1;
            // candidate 4 is the fastest but its first sample round is 1.4x slow
            Ok(match c {
                4 if calls[c] == 2 => 14.0,
                _ => [10.0, 16.0, 11.5, 10.5, 9.9][c],
            })
        };
        run_rounds(&p, Mode::Graph, &mut timed, &mut sample).unwrap();
        let rounds: Vec<usize> = timed.iter().map(|t| t.measured().len()).collect();
        assert_eq!(rounds, [6, 1, 3, 6, 6]);
        assert!(timed[1].dropped && timed[2].dropped && !timed[3].dropped && !timed[4].dropped);
    }

    /// One stalled first sample round (2x) no longer drops the cell's fastest candidate: its
    /// warmup is the optimistic bound too; a candidate slow in every launch still stops.
    #[test]
    fn racing_counts_warmups_in_the_optimistic_bound() {
        use super::{run_rounds, Protocol, Timed};
        use vnni_kernels::Mode;
        let p = Protocol { warmups: 2, samples: 6, settle: None, ..Protocol::default() };
        let mut timed = vec![Timed { replays: 1, ..Timed::default() }; 3];
        let mut calls = [0usize; 3];
        let mut sample = |_pass: usize, c: usize, _r: usize| -> Result<f64, ()> {
            calls[c] += 1;
            // candidate 0 is the fastest but its first sample round stalls (2.1x)
            Ok(match (c, calls[c]) {
                (0, 3) => 21.0,
                _ => [9.9, 10.2, 16.0][c],
            })
        };
        run_rounds(&p, Mode::Eager, &mut timed, &mut sample).unwrap();
        let rounds: Vec<usize> = timed.iter().map(|t| t.measured().len()).collect();
        assert_eq!(rounds, [6, 6, 1]);
        assert!(!timed[0].dropped && timed[2].dropped);
        assert_eq!(timed[0].fastest_launched(), 9.9);
    }

    /// Calibration: a stalled timed launch raises the replays instead of lowering them; a
    /// kernel slow in every launch gets one replay after one confirming launch.
    #[test]
    fn calibration_takes_the_faster_estimate() {
        use super::calibrated_replays;
        let calibrate = |times: &[f64]| {
            let mut it = times.iter();
            let mut asked = Vec::new();
            let r = calibrated_replays::<()>(250.0, &mut |n| {
                asked.push(n);
                Ok(*it.next().unwrap() * n as f64)
            })
            .unwrap();
            (r, asked)
        };
        // steady 5 us launches: 50 replays
        assert_eq!(calibrate(&[5.0, 5.0]), (50, vec![1, 2]));
        // the first timed launch stalled for 600 us: confirmed at 5 us, still 50 (was 1)
        assert_eq!(calibrate(&[600.0, 5.0]), (50, vec![1, 1]));
        // the pair stalled: the single launch counts
        assert_eq!(calibrate(&[5.0, 300.0]), (50, vec![1, 2]));
        // a 1 ms kernel: one replay, two timed launches
        assert_eq!(calibrate(&[1000.0, 990.0]), (1, vec![1, 1]));
    }

    /// Settling: steady candidates end each pass after `after` sample rounds, every candidate
    /// together; one noisy candidate keeps the whole pass going; without settling every round
    /// runs.
    #[test]
    fn settled_passes_stop_their_rounds_together() {
        use super::{run_rounds, Protocol, Settle, Timed};
        use vnni_kernels::Mode;
        let run = |noisy: bool, settle: Option<Settle>| {
            let p = Protocol { warmups: 1, samples: 10, passes: 2, race: Vec::new(), settle, ..Protocol::default() };
            let mut timed = vec![Timed { replays: 1, ..Timed::default() }; 3];
            let mut calls = [0usize; 3];
            let mut sample = |_pass: usize, c: usize, _r: usize| -> Result<f64, ()> {
                calls[c] += 1;
                let wobble = if noisy && c == 2 && calls[c] % 2 == 0 { 1.05 } else { 1.0 };
                // within 0.5% otherwise
                Ok([100.0, 200.0, 300.0][c] * wobble * (1.0 + 0.001 * (calls[c] % 5) as f64))
            };
            run_rounds(&p, Mode::Graph, &mut timed, &mut sample).unwrap();
            timed.iter().map(|t| t.measured().len()).collect::<Vec<_>>()
        };
        let settle = Some(Settle { after: 4, spread: 0.01 });
        assert_eq!(run(false, settle), [8, 8, 8], "4 sample rounds in each of 2 passes");
        assert_eq!(run(true, settle), [20, 20, 20], "a 5% wobble keeps every round");
        assert_eq!(run(false, None), [20, 20, 20]);
        assert_eq!(run(false, Some(Settle { after: 6, spread: 0.01 })), [12, 12, 12]);
    }

    #[test]
    fn shuffles_are_seeded_permutations() {
        let a = super::shuffled(40, 7);
        assert_eq!(a, super::shuffled(40, 7));
        assert_ne!(a, super::shuffled(40, 8));
        let mut s = a.clone();
        s.sort();
        assert_eq!(s, (0..40).collect::<Vec<_>>());
    }

    /// Two passes: every candidate sampled in both, the second pass after the first has
    /// finished, racing only in the first, and pass 0 in the order a one-pass protocol uses.
    #[test]
    fn passes_follow_each_other_and_racing_stays_in_the_first() {
        use super::{run_rounds, Protocol, RaceBound, RaceStep, Timed};
        use vnni_kernels::Mode;
        let run = |passes: usize| {
            let race = vec![RaceStep { after: 2, ratio: 1.3, bound: RaceBound::Median }];
            let p = Protocol { warmups: 1, samples: 5, passes, race, settle: None, ..Protocol::default() };
            let mut timed = vec![Timed { replays: 1, ..Timed::default() }; 3];
            let mut log = Vec::new();
            let mut sample = |pass: usize, c: usize, _r: usize| -> Result<f64, ()> {
                log.push((pass, c));
                Ok([10.0, 10.2, 20.0][c])
            };
            run_rounds(&p, Mode::Graph, &mut timed, &mut sample).unwrap();
            (timed, log)
        };
        let (one, log1) = run(1);
        let (two, log2) = run(2);
        assert_eq!(log2[..log1.len()], log1[..], "pass 0 is the one-pass protocol");
        assert!(log2[log1.len()..].iter().all(|&(p, _)| p == 1), "pass 1 starts after pass 0");
        // candidate 2 (2x slower) is dropped after 1 warmup + 2 sample rounds of pass 0
        assert!(two[2].dropped && two[2].samples.iter().all(|s| s.pass == 0) && two[2].samples.len() == 3);
        for c in 0..2 {
            assert_eq!(one[c].measured().len(), 5);
            assert_eq!(two[c].measured().len(), 10);
            assert_eq!(two[c].samples.iter().filter(|s| s.pass == 1 && !s.warmup).count(), 5);
        }
    }
}
