//! vnni-measure: everything that measures, as a library the CLI, the learner's synthetic
//! corpora and the tests all call.
//!
//! - [`stats`]: sample statistics (median, nearest-rank percentiles, MAD, CV): the one owner.
//! - [`protocol`]: the timing protocol (replays, warmup and sample rounds in seeded order, racing).
//! - [`rows`]: bit comparison with the reference; aggregate rows and raw samples of a mode.
//! - [`cell`]: what every backend's cell shares (fixtures, checked columns, best row).
//! - [`cpu_cell`]: the CPU cell runner; [`cuda_cell`], [`cuda_clock`] (feature `cuda`): the GPU ones.
//! - [`chain`] (feature `cuda`): the layers of a model timed end to end, plain and programmatic.
//! - [`runner`]: the backends behind one `CellRunner` (open once, describe, run a cell).
//! - [`collect`]: the collection driver (claim, measure, publish, assemble, seal).
//! - [`pairs`]: cells that failed cross-validation, their two candidates timed again.
//! - [`prune`]: decode candidates a policy's cost models predict far from the best, skipped;
//!   an audit share of cells timed in full scores the loss.
//! - [`invariance`], [`invariance_sides`], [`invariance_plan`]: batch-invariance certificates.
//! - [`phases`]: wall time per phase of a cell (fixtures, checks, calibration, capture, sampling).
//! - [`vendor`] (feature `cuda`): copy bandwidth and cuBLAS/cuBLASLt baselines.
//! - [`preflight`] (feature `cuda`): resources of every kernel specialization.
//! - [`profile`] (feature `cuda`): one launch per request inside the profiler range (ncu evidence).
//! - [`shapes`]: `NxK` lists from the command line, bounded.
//! - [`error`]: `MeasureError`, typed, with context lines.

pub mod cell;
#[cfg(feature = "cuda")]
pub mod chain;
pub mod collect;
pub mod cpu_cell;
#[cfg(feature = "cuda")]
pub mod cuda_cell;
#[cfg(feature = "cuda")]
pub mod cuda_clock;
pub mod error;
pub mod invariance;
pub mod invariance_plan;
pub mod invariance_sides;
pub mod pairs;
pub mod phases;
#[cfg(feature = "cuda")]
pub mod preflight;
#[cfg(feature = "cuda")]
pub mod profile;
pub mod progress;
pub mod protocol;
pub mod prune;
pub mod rows;
pub mod runner;
pub mod shapes;
pub mod stats;
#[cfg(feature = "cuda")]
pub mod vendor;

pub use error::{MeasureError, Result};
