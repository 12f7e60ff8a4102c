//! Where a measuring process spends its time: wall time per phase of a cell (fixtures, bit
//! checks, calibration, graph capture, sampling), summed over the process. `bench` prints it
//! per cell and `sweep` at the end: the evidence behind the sweep's throughput work.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Fixture weights on the host, their upload and the device copies.
    Fixture,
    /// Activations, CPU references and the byte-for-byte check of every candidate.
    Check,
    /// Launches that size each candidate's samples.
    Calibrate,
    /// CUDA graph capture, instantiation and upload.
    Capture,
    /// Warmup and sample rounds (without capture).
    Sample,
}

const PHASES: [(Phase, &str); 5] = [
    (Phase::Fixture, "fixtures"),
    (Phase::Check, "checks"),
    (Phase::Calibrate, "calibration"),
    (Phase::Capture, "graph capture"),
    (Phase::Sample, "sampling"),
];

static NANOS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

fn slot(phase: Phase) -> &'static AtomicU64 {
    &NANOS[PHASES.iter().position(|(p, _)| *p == phase).expect("every phase has a slot")]
}

/// Add the time since `since` to `phase`.
pub fn add(phase: Phase, since: Instant) {
    slot(phase).fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

/// Add `nanos` to `phase`.
pub fn add_nanos(phase: Phase, nanos: u64) {
    slot(phase).fetch_add(nanos, Ordering::Relaxed);
}

/// Nanoseconds counted so far, per phase in `PHASES` order.
pub fn snapshot() -> [u64; 5] {
    std::array::from_fn(|i| NANOS[i].load(Ordering::Relaxed))
}

/// "fixtures 1.2 s, checks 0.3 s, ..." for the time between two snapshots.
pub fn describe(before: &[u64; 5], after: &[u64; 5]) -> String {
    PHASES
        .iter()
        .enumerate()
        .map(|(i, (_, name))| format!("{name} {:.2} s", after[i].saturating_sub(before[i]) as f64 / 1e9))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_between_snapshots() {
        let before = snapshot();
        let t = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(3));
        add(Phase::Capture, t);
        add_nanos(Phase::Capture, 1_000_000);
        let after = snapshot();
        let capture = after[3] - before[3];
        assert!((2_000_000..100_000_000).contains(&capture), "{capture}");
        assert!(describe(&before, &after).contains("graph capture 0.0"), "{}", describe(&before, &after));
    }
}
