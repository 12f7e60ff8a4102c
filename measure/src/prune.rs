//! Pruning a sweep by a policy's cost models (issue 17): the decode candidates a fitted
//! policy predicts far from a cell's best are not timed, and an audit share of cells, timed in
//! full, measures what that lost.
//!
//! Why it is safe to skip them: replayed on 371 held-out cells of families no policy was fitted
//! on, the measured best always lay within 1.25x of the least prediction (docs/PERF.md,
//! "Pruning by the cost models"), while about 63% of the decode candidates lay above it. The
//! audit keeps that claim measured on every corpus pruned this way.
//!
//! A decision depends only on the policy's bytes, the thresholds and the cell, so every worker,
//! shard and resumed process makes the same one, and `finish` can make it again to score the
//! audit.

use std::collections::BTreeSet;
use std::path::Path;

use vnni_corpus::collection::{CellKey, Pruning};
use vnni_corpus::inventory::Partition;
use vnni_corpus::schema::{PruningRow, TimingRow};
use vnni_corpus::seal::SourceFile;
use vnni_kernels::digest::sha256_hex;
use vnni_kernels::{Backend, CandidateId, Mode};
use vnni_policy::Policy;

use crate::error::{invalid, Result};

/// A loaded pruning rule: the plan's record and the policy it names.
#[derive(Debug, Clone)]
pub struct Pruner {
    pub plan: Pruning,
    policy: Policy,
}

/// What pruning does to one cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Timed in full: the audit share.
    pub audited: bool,
    /// Predicted above the threshold in every mode: skipped, or for an audited cell, what
    /// would have been skipped.
    pub pruned: BTreeSet<CandidateId>,
}

impl Decision {
    /// The candidates the cell does not time.
    pub fn skipped(&self) -> BTreeSet<CandidateId> {
        if self.audited {
            BTreeSet::new()
        } else {
            self.pruned.clone()
        }
    }
}

impl Pruner {
    /// Read the policy at `path` for a sweep on `backend` with `units` SMs; `above` is the
    /// ratio over the least prediction above which a candidate is skipped (> 1), `audit` the
    /// share of cells timed in full (0..=1).
    pub fn load(path: &Path, above: f64, audit: f64, (backend, arch): (Backend, &str), units: u32) -> Result<Pruner> {
        let bytes = std::fs::read(path).map_err(crate::error::io(path))?;
        let policy = parse(path, &bytes)?;
        if !(above > 1.0 && above <= 100.0) {
            invalid!("--prune-above {above}: a ratio over the least prediction, above 1 (1.25 was measured safe)");
        }
        if !(0.0..=1.0).contains(&audit) {
            invalid!("--prune-audit {audit}: the share of cells timed in full, 0 to 1");
        }
        let plan = Pruning {
            policy: SourceFile { path: path.display().to_string(), sha256: sha256_hex(&bytes) },
            above_permille: (above * 1000.0).round() as u32,
            audit_permille: (audit * 1000.0).round() as u32,
        };
        Pruner::new(plan, policy, (backend, arch), units)
    }

    /// The pruner of a plan, its policy read again from the recorded path and checked against
    /// the recorded digest.
    pub fn of_plan(plan: &Pruning, (backend, arch): (Backend, &str), units: u32) -> Result<Pruner> {
        let path = Path::new(&plan.policy.path);
        let bytes = std::fs::read(path).map_err(|e| {
            crate::MeasureError::Invalid(format!(
                "{}: {e}: the plan prunes with this policy, its path as given to the sweep (relative to where the sweep ran): run this from there, or put the policy there",
                path.display()
            ))
        })?;
        if sha256_hex(&bytes) != plan.policy.sha256 {
            invalid!(
                "{}: the plan prunes with the policy of sha256 {}, this file's is {}: restore it, or start a new --out",
                path.display(),
                plan.policy.sha256,
                sha256_hex(&bytes)
            );
        }
        Pruner::new(plan.clone(), parse(path, &bytes)?, (backend, arch), units)
    }

    fn new(plan: Pruning, policy: Policy, (backend, arch): (Backend, &str), units: u32) -> Result<Pruner> {
        let path = &plan.policy.path;
        // Its candidates must be this registry's: a cut-off measured from a kernel this build
        // does not have would prune against a candidate that is never timed.
        policy.check_registry().map_err(|e| {
            crate::MeasureError::Invalid(format!("--prune-with {path}: not a policy of this registry: {e}"))
        })?;
        if backend != Backend::Cuda {
            invalid!(
                "--prune-with {path}: only CUDA policies carry cost models, and this sweep runs on the {} backend",
                backend.name()
            );
        }
        let p = &policy.provenance;
        if p.backend != Backend::Cuda.name() || p.arch != arch || policy.units != u64::from(units) {
            invalid!(
                "--prune-with {path}: the policy was fitted for {} {} with {} units (SMs), this device is {} {arch} with {units}: its predictions do not hold here",
                p.backend,
                p.arch,
                policy.units,
                backend.name()
            );
        }
        if policy.domains.iter().all(|d| d.models.is_empty()) {
            invalid!("--prune-with {path}: the policy carries no cost models, so it predicts nothing to prune by");
        }
        Ok(Pruner { plan, policy })
    }

    /// Whether `key` is among the cells timed in full: the first 32 bits of a digest of the
    /// policy and the cell, against the audit share.
    pub fn audited(&self, key: &CellKey) -> bool {
        let d = sha256_hex(format!("{} {}", self.plan.policy.sha256, key.stem()).as_bytes());
        let draw = u64::from_str_radix(&d[..8], 16).expect("hex digest");
        draw * 1000 < u64::from(self.plan.audit_permille) << 32
    }

    /// The decision for `key` in `modes`: a candidate is pruned where every mode's models
    /// predict it above the threshold (a mode without models prunes nothing); the policy's
    /// own M = 1 pick (an overlay's measured winner included) is always timed, and so is every
    /// candidate of a sealed cell: the sealed rows score policies, so they stay complete.
    pub fn decide(&self, key: &CellKey, modes: &[Mode]) -> Decision {
        if key.partition == Partition::Sealed {
            return Decision { audited: false, pruned: BTreeSet::new() };
        }
        let codebook = key.format.codebook().name();
        let (n, k) = (key.n as u64, key.k as u64);
        let mut pruned: Option<BTreeSet<CandidateId>> = None;
        for mode in modes {
            let predictions = self.policy.decode_predictions(codebook, mode.name(), n, k);
            let Some(&(_, least)) = predictions.first() else {
                pruned = Some(BTreeSet::new());
                break;
            };
            let limit = u128::from(least) * u128::from(self.plan.above_permille);
            let above: BTreeSet<CandidateId> = predictions
                .iter()
                .filter(|(_, t)| u128::from(*t) * 1000 > limit)
                .filter_map(|(id, _)| id.parse().ok())
                .collect();
            pruned = Some(match pruned {
                None => above,
                Some(p) => p.intersection(&above).cloned().collect(),
            });
        }
        let mut pruned = pruned.unwrap_or_default();
        for mode in modes {
            if let Ok(pick) = self.policy.select(codebook, mode.name(), 1, n, k) {
                pruned.retain(|id| id.as_str() != pick.candidate.id);
            }
        }
        Decision { audited: self.audited(key), pruned }
    }
}

/// The policy in `bytes`, read from `path`.
fn parse(path: &Path, bytes: &[u8]) -> Result<Policy> {
    Policy::from_bytes(bytes)
        .map_err(|e| crate::MeasureError::Invalid(format!("--prune-with {}: not a policy: {e}", path.display())))
}

/// The pruning rows of one cell from its published rows.
pub fn score_cell(key: &CellKey, decision: &Decision, modes: &[Mode], rows: &[TimingRow]) -> Vec<PruningRow> {
    modes
        .iter()
        .map(|&mode| {
            let decode: Vec<&TimingRow> = rows
                .iter()
                .filter(|r| r.m == 1 && r.mode == mode && r.codebook.is_some() && r.m1_candidate.is_none())
                .collect();
            let fastest = |keep: &dyn Fn(&TimingRow) -> bool| {
                decode.iter().filter(|r| r.eligible && keep(r)).map(|r| r.median_us).min_by(f64::total_cmp)
            };
            let (best, kept) = if decision.audited {
                (fastest(&|_| true), fastest(&|r| !decision.pruned.contains(&r.candidate)))
            } else {
                (None, None)
            };
            PruningRow {
                cell: key.stem(),
                mode,
                audited: decision.audited,
                timed: decode.len(),
                pruned: decision.pruned.len(),
                best_us: best,
                best_kept_us: kept,
                loss: best.zip(kept).map(|(b, k)| k / b - 1.0),
            }
        })
        .collect()
}

/// The audit's summary line: cells, candidates skipped, and the loss over audited (cell, mode).
pub fn summary(rows: &[PruningRow]) -> String {
    let losses: Vec<f64> = rows.iter().filter_map(|r| r.loss).collect();
    // Audited (cell, mode) where pruning would have kept no eligible candidate at all: the
    // worst outcome, which a loss cannot express.
    let emptied = rows.iter().filter(|r| r.best_us.is_some() && r.best_kept_us.is_none()).count();
    let skipped: usize = rows.iter().filter(|r| !r.audited).map(|r| r.pruned).sum();
    let timed: usize = rows.iter().filter(|r| !r.audited).map(|r| r.timed).sum();
    let share = if timed + skipped == 0 { 0.0 } else { 100.0 * skipped as f64 / (timed + skipped) as f64 };
    if losses.is_empty() && emptied == 0 {
        return format!("pruning: {share:.1}% of decode candidates skipped; no cell audited");
    }
    let geomean = crate::stats::geomean_regret(&losses);
    let mut sorted = losses.clone();
    sorted.sort_by(f64::total_cmp);
    let p95 = if sorted.is_empty() { 0.0 } else { crate::stats::nearest_rank(&sorted, 0.95) };
    let max = losses.iter().copied().fold(0.0, f64::max);
    format!(
        "pruning: {share:.1}% of decode candidates skipped; audit of {} (cell, mode): loss geomean {:.3}%, p95 {:.3}%, max {:.3}%{}",
        losses.len() + emptied,
        100.0 * geomean,
        100.0 * p95,
        100.0 * max,
        if emptied > 0 { format!("; {emptied} would have kept no eligible candidate") } else { String::new() }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use vnni_kernels::SourceFormat;

    /// A committed H200 policy with cost models (graph mode only).
    fn session_policy() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../lfs-data/tables/cuda/sm_90/h200-session/policy.json")
    }

    fn key(format: SourceFormat, n: usize, k: usize) -> CellKey {
        CellKey { format, n, k, partition: Partition::Development }
    }

    fn err(r: Result<Pruner>) -> String {
        r.map(|_| ()).unwrap_err().to_string()
    }

    #[test]
    fn load_refuses_what_cannot_prune() {
        let p = session_policy();
        assert!(err(Pruner::load(&p, 1.25, 0.1, (Backend::Cpu, "cpu"), 2)).contains("the cpu backend"));
        let e = err(Pruner::load(&p, 1.25, 0.1, (Backend::Cuda, "sm_90"), 114));
        assert!(e.contains("132 units") && e.contains("with 114"), "{e}");
        assert!(err(Pruner::load(&p, 1.0, 0.1, (Backend::Cuda, "sm_90"), 132)).contains("--prune-above 1"));
        assert!(err(Pruner::load(&p, 1.25, 1.5, (Backend::Cuda, "sm_90"), 132)).contains("--prune-audit 1.5"));
        let dir = tempdir();
        let junk = dir.join("p.json");
        std::fs::write(&junk, "{}").unwrap();
        assert!(err(Pruner::load(&junk, 1.25, 0.1, (Backend::Cuda, "sm_90"), 132)).contains("not a policy"));
    }

    fn tempdir() -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("vnni-prune-{}-{:?}", std::process::id(), std::thread::current().id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn decisions_skip_only_candidates_predicted_above_the_ratio() {
        let pruner = Pruner::load(&session_policy(), 1.25, 0.0, (Backend::Cuda, "sm_90"), 132).unwrap();
        assert_eq!((pruner.plan.above_permille, pruner.plan.audit_permille), (1250, 0));
        let mut skipped = 0;
        let mut modelled = 0;
        for (format, n, k) in
            [(SourceFormat::Q4_0, 4096, 4096), (SourceFormat::Q6_K, 151_936, 4096), (SourceFormat::Q8_0, 1536, 8960)]
        {
            let c = key(format, n, k);
            let d = pruner.decide(&c, &[Mode::Graph]);
            assert!(!d.audited && d.skipped() == d.pruned);
            let predictions = pruner.policy.decode_predictions(format.codebook().name(), "graph", n as u64, k as u64);
            let least = predictions[0].1;
            let pick = pruner.policy.select(format.codebook().name(), "graph", 1, n as u64, k as u64).unwrap();
            for (id, t) in &predictions {
                let above = *t as f64 > 1.25 * least as f64 && *id != pick.candidate.id;
                let id: CandidateId = id.parse().unwrap();
                assert_eq!(d.pruned.contains(&id), above, "{id} at {}", c.stem());
            }
            // Sealed cells are timed in full: they score policies.
            let sealed = CellKey { partition: Partition::Sealed, ..c };
            assert!(pruner.decide(&sealed, &[Mode::Graph]).pruned.is_empty());
            assert!(d.pruned.len() < predictions.len(), "the least predicted candidate is always timed");
            skipped += d.pruned.len();
            modelled += predictions.len();
            // A mode with no models (this policy answers graph only) prunes nothing.
            assert!(pruner.decide(&c, &[Mode::Eager, Mode::Graph]).pruned.is_empty());
            assert_eq!(pruner.decide(&c, &[Mode::Graph]), d, "deterministic");
        }
        assert!(skipped > 0 && skipped < modelled, "{skipped} of {modelled}");
    }

    #[test]
    fn the_audit_share_is_a_deterministic_draw_per_cell() {
        let share = |audit: f64| {
            let p = Pruner::load(&session_policy(), 1.25, audit, (Backend::Cuda, "sm_90"), 132).unwrap();
            let keys: Vec<CellKey> =
                (1..=40).flat_map(|i| (1..=25).map(move |j| key(SourceFormat::Q4_0, 256 * i, 256 * j))).collect();
            let audited = keys.iter().filter(|c| p.audited(c)).count();
            assert!(keys.iter().all(|c| p.audited(c) == p.decide(c, &[Mode::Graph]).audited));
            audited as f64 / keys.len() as f64
        };
        assert_eq!(share(0.0), 0.0);
        assert_eq!(share(1.0), 1.0);
        let s = share(0.125);
        assert!((0.09..0.16).contains(&s), "{s}");
    }

    #[test]
    fn a_changed_policy_is_refused_by_digest() {
        let dir = tempdir();
        let copy = dir.join("policy.json");
        std::fs::copy(session_policy(), &copy).unwrap();
        let pruner = Pruner::load(&copy, 1.25, 0.125, (Backend::Cuda, "sm_90"), 132).unwrap();
        assert!(Pruner::of_plan(&pruner.plan, (Backend::Cuda, "sm_90"), 132).is_ok());
        let mut bytes = std::fs::read(&copy).unwrap();
        bytes.push(b'\n');
        std::fs::write(&copy, bytes).unwrap();
        let e = err(Pruner::of_plan(&pruner.plan, (Backend::Cuda, "sm_90"), 132));
        assert!(e.contains(&pruner.plan.policy.sha256) && e.contains("start a new --out"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn audited_cells_score_the_loss_of_the_kept_candidates() {
        let c = key(SourceFormat::Q4_0, 4096, 4096);
        let row = |id: &str, us: f64, eligible: bool| TimingRow {
            candidate: id.parse().unwrap(),
            median_us: us,
            eligible,
            ..decode_row()
        };
        let rows = vec![row("decode.a", 10.0, true), row("decode.b", 10.5, true), row("decode.c", 9.0, false)];
        let pruned: BTreeSet<CandidateId> = ["decode.a".parse().unwrap()].into();
        let audited = Decision { audited: true, pruned: pruned.clone() };
        let scored = score_cell(&c, &audited, &[Mode::Graph], &rows);
        assert_eq!(scored.len(), 1);
        assert_eq!((scored[0].timed, scored[0].pruned, scored[0].best_us), (3, 1, Some(10.0)));
        assert!((scored[0].loss.unwrap() - 0.05).abs() < 1e-12);
        let skipped = score_cell(&c, &Decision { audited: false, pruned }, &[Mode::Graph], &rows[1..]);
        assert_eq!((skipped[0].timed, skipped[0].loss), (2, None));
        let line = summary(&[scored[0].clone(), skipped[0].clone()]);
        assert!(line.contains("33.3% of decode candidates skipped") && line.contains("geomean 5.000%"), "{line}");
        assert!(!line.contains("no eligible"), "{line}");
        // Pruning every eligible candidate of an audited cell is named, not dropped.
        let all: BTreeSet<CandidateId> = ["decode.a".parse().unwrap(), "decode.b".parse().unwrap()].into();
        let emptied = score_cell(&c, &Decision { audited: true, pruned: all }, &[Mode::Graph], &rows);
        assert_eq!((emptied[0].best_us, emptied[0].best_kept_us, emptied[0].loss), (Some(10.0), None, None));
        let line = summary(&[scored[0].clone(), emptied[0].clone()]);
        assert!(
            line.contains("audit of 2 (cell, mode)") && line.contains("1 would have kept no eligible candidate"),
            "{line}"
        );
        // Also when it is the only audited (cell, mode).
        let line = summary(&emptied);
        assert!(line.contains("audit of 1 (cell, mode)") && line.contains("1 would have kept no eligible"), "{line}");
    }

    /// A decode row of graph mode at M = 1 (each test sets the fields scoring reads).
    fn decode_row() -> TimingRow {
        TimingRow {
            backend: Backend::Cuda,
            arch: "sm_90".into(),
            device: "test".into(),
            mode: Mode::Graph,
            source_format: Some(SourceFormat::Q4_0),
            codebook: Some(SourceFormat::Q4_0.codebook()),
            m: 1,
            n: 4096,
            k: 4096,
            candidate: "decode.a".parse().unwrap(),
            m1_candidate: None,
            bpp: 1,
            warmups: 2,
            samples: 12,
            replays: 1,
            weight_copies: 1,
            seed: 0,
            min_us: 0.0,
            median_us: 0.0,
            p95_us: 0.0,
            mad_us: 0.0,
            cv: 0.0,
            weight_bytes: 0,
            gbps: 0.0,
            pct_copy_bw: 0.0,
            checked: 0,
            mismatches: 0,
            first_mismatch: String::new(),
            eligible: true,
            dropped: false,
            registers: 0,
            occupancy_blocks_per_sm: 0,
        }
    }
}
