//! Development cells that failed cross-validation, timed again as pairs (issue 16, item 4):
//! each request's two candidates (the held-out pick and the cell's fastest) in the request's
//! source format and mode at M = 1, on the machine the corpus was collected on, under the
//! corpus's protocol. The learner applies the samples (`vnni_learner::pairs`); `refresh`
//! (its M = 1 stage), `remeasure` and `bench --pairs` time them here.

use std::path::Path;

use vnni_corpus::collection::CollectionPlan;
use vnni_corpus::schema::PairRequest;
use vnni_kernels::{Backend, BackendChoice};

use crate::cell::CellResult;
use crate::error::{invalid, Context, MeasureError, Result};
use crate::protocol::{Protocol, TimingOptions};
use crate::runner::CellRunner;

/// Open the backend the corpus of `plan` was collected on (CPU: as many threads as its
/// `units`), and refuse another machine: a pair's ratio is only evidence on the corpus's.
pub fn open_for(plan: &CollectionPlan, device: usize, cache: Option<&Path>) -> Result<CellRunner> {
    let timing = TimingOptions {
        modes: plan.modes.clone(),
        samples: plan.inventory.samples,
        warmups: plan.inventory.warmups,
        passes: plan.inventory.passes,
        whole_rotations: plan.whole_rotations,
        programmatic: plan.programmatic,
        l2_prefetch: plan.decode_l2_prefetch(),
        device,
        cache: cache.map(Path::to_path_buf),
    };
    let choice = match plan.backend {
        Backend::Cuda => BackendChoice::Cuda,
        Backend::Cpu => BackendChoice::Cpu,
    };
    let runner = CellRunner::open(choice, &timing, plan.units as usize)?;
    let info = runner.info();
    if (info.device.as_str(), info.units) != (plan.device.as_str(), plan.units) {
        invalid!(
            "the corpus was collected on {} ({} units), this is {} ({} units): pairs are timed on the corpus's machine",
            plan.device,
            plan.units,
            info.device,
            info.units
        );
    }
    Ok(runner)
}

/// Time every request of `requests` (read from `source`, named in errors with the pair's
/// place) on `runner` under `protocol`: both candidates of a pair in one cell, so they share
/// the cell's rounds, passes and weight copies.
pub fn time_pairs(
    runner: &CellRunner,
    requests: &[PairRequest],
    protocol: &Protocol,
    source: &Path,
) -> Result<CellResult> {
    let modes = runner.info().modes;
    let mut out = CellResult::default();
    for (i, r) in requests.iter().enumerate() {
        let at = || {
            format!(
                "{}: pair {} of {} ({} {} {}x{})",
                source.display(),
                i + 1,
                requests.len(),
                r.source_format,
                r.mode,
                r.n,
                r.k
            )
        };
        if r.m != 1 {
            invalid!("{}: M = {} (pairs are decode cells, M = 1)", at(), r.m);
        }
        if !modes.contains(&r.mode) {
            invalid!("{}: this backend does not time {} launches", at(), r.mode);
        }
        if r.pick == r.best {
            invalid!("{}: pick and best are both {}", at(), r.pick);
        }
        let ids = [r.pick.clone(), r.best.clone()];
        let cell = runner.run_decode(r.source_format, r.n, r.k, r.mode, &ids, protocol).with_context(at)?;
        let timed = cell.rows.iter().filter(|row| row.mismatches == 0).count();
        if timed != 2 {
            return Err(MeasureError::Structural(format!(
                "{}: {timed} of the pair's 2 candidates ran and matched the reference",
                at()
            )));
        }
        out.rows.extend(cell.rows);
        out.samples.extend(cell.samples);
    }
    Ok(out)
}
