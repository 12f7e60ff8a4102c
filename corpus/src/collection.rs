//! A collection: the plan of a sweep (`plan.json`) and its cell store. One cell = every
//! candidate of one (source format, N, K) over the plan's M values and modes. Cells are
//! published atomically into `<work>/cells/`; a rerun skips published cells and ignores
//! `.inprogress` leftovers; workers claim cells with lock files; shards split the cell list;
//! `assemble` turns a complete cell set into the corpus files in plan order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vnni_kernels::digest::sha256_hex;
use vnni_kernels::{Backend, L2Prefetch, Mode, SourceFormat, Surface};

use crate::inventory::{InventoryPlan, Partition};
use crate::read::{read_samples, read_timing, ReadError};
use crate::schema::{SampleRow, TimingRow};
use crate::seal::{BuildIdentity, SealInputs, SourceFile};
use crate::staged::FrozenM1;
use crate::write::{csv_bytes, write_bytes, write_csv, WriteError};

pub const COLLECTION_SCHEMA: &str = "vnni-collection-v1";
pub const PLAN_FILE: &str = "plan.json";
/// The corpus phases (aggregate CSV stems), in file order.
pub const PHASES: [&str; 4] = ["decode_m1.development", "decode_m1.sealed", "grouped.development", "grouped.sealed"];
/// The prefill phases (M >= 32): present exactly when the plan has a prefill M.
pub const PREFILL_PHASES: [&str; 2] = ["prefill.development", "prefill.sealed"];

/// The phase stem of rows with M activation rows: decode_m1, grouped or prefill (the
/// registry's surfaces).
pub fn phase_of(m: usize) -> &'static str {
    match Surface::of_m(m) {
        Surface::Decode => "decode_m1",
        Surface::Grouped => "grouped",
        Surface::Prefill => "prefill",
    }
}

/// The aggregate CSV stem (and sidecar stem) of rows with M activation rows in a partition:
/// `decode_m1.development`, `grouped.sealed`, ...
pub fn phase_stem(m: usize, partition: Partition) -> String {
    format!("{}.{}", phase_of(m), partition.name())
}

#[derive(Debug, thiserror::Error)]
pub enum CollectionError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Mismatch { path: PathBuf, message: String },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> CollectionError + '_ {
    move |e| CollectionError::Io { path: path.to_path_buf(), message: e.to_string() }
}

/// Everything that decides what a sweep measures and on what. Two workers or shards may
/// combine their cells only when their plans are byte-identical.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionPlan {
    pub schema: String,
    pub backend: Backend,
    pub arch: String,
    pub device: String,
    pub driver: String,
    pub nvrtc: String,
    /// SMs (CUDA) or worker threads per process (CPU): the bpp formulas' `units`.
    pub units: u32,
    pub registry_digest: String,
    pub kernel_source_digest: String,
    /// Binary version, git commit and dirty flag of the build that collects.
    pub version: String,
    pub git_commit: String,
    pub git_dirty: bool,
    pub inventory_digest: String,
    pub inventory_sources: Vec<SourceFile>,
    /// The modes this backend measures of the profile's (CPU: eager only).
    pub modes: Vec<Mode>,
    pub inventory: InventoryPlan,
    /// A staged collection: the frozen M = 1 stage its batched rows inherit (absent from the
    /// JSON of a one-stage plan, so those plans' bytes and digests did not change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen_m1: Option<FrozenM1>,
    /// The first stage of a staged refresh: the profile's plan (its digests unchanged), M = 1
    /// rows only (absent from the JSON when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub m1_only: bool,
    /// Timed with samples of whole rotations of the weight copies (the older protocol,
    /// `sweep --whole-rotations`, kept to measure what the windows change; absent from the
    /// JSON when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whole_rotations: bool,
    /// Decode candidates launched with programmatic dependent launch (`sweep --programmatic`,
    /// CUDA on sm_90: tables for callers that launch so; absent from the JSON when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub programmatic: bool,
    /// Which decode launches issued the L2 prefetch of their first weight rows (CUDA plans
    /// from its introduction on; absent from older plans and CPU ones, see
    /// [`CollectionPlan::l2_prefetch`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_prefetch: Option<L2Prefetch>,
    /// Grouped M values learned from dense-M measurements (`sweep --m-buckets-from`), in
    /// place of the profile's (absent from the JSON of a plan that has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_buckets: Option<LearnedBuckets>,
    /// Decode candidates skipped where a policy's cost models predict them far from the best
    /// (`sweep --prune-with`; absent from the JSON of a plan that times every candidate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pruning: Option<Pruning>,
}

/// How a sweep prunes (issue 17): in a cell's M = 1 rows, a decode candidate whose prediction
/// by the policy's cost models is above `above_permille` / 1000 of the least prediction, in
/// every mode the plan times, is not timed; a candidate no model predicts always is. A
/// deterministic share of cells (`audit_permille` / 1000, by a digest of the policy and the
/// cell) is timed in full, so the corpus measures what pruning lost (`pruning.csv`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pruning {
    /// The policy whose cost models predict (path as given, sha256 of its bytes).
    pub policy: SourceFile,
    pub above_permille: u32,
    pub audit_permille: u32,
}

/// The first M of each grouped bucket, placed where the fastest candidate changes in dense-M
/// measurements (issue 24): a sweep times the grouped rows at these M (a bucket is timed at its
/// first M, and the policy's buckets start at the M a corpus measures), not at the profile's.
/// Prefill M (>= 32) stay the profile's: the grouped surface ends below them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedBuckets {
    /// Ascending, each in 2..32.
    pub starts: Vec<usize>,
    /// A bucket's single candidate stays within this many percent of the fastest at every
    /// measured M of the bucket, in every measured series.
    pub tolerance_percent: u32,
    /// The backend and architecture the measurements were taken on: a plan for another is
    /// refused (buckets of one machine's kernels say nothing of another's).
    pub backend: Backend,
    pub arch: String,
    /// The measurements they were learned from (path as given, sha256 of the bytes read).
    pub sources: Vec<SourceFile>,
}

impl LearnedBuckets {
    /// Checked: starts ascending, distinct, each a grouped M (2 <= M < 32), the first M = 2
    /// (a bucket is timed at its first M, and the first grouped bucket serves M = 2).
    pub fn new(
        starts: Vec<usize>,
        tolerance_percent: u32,
        (backend, arch): (Backend, String),
        sources: Vec<SourceFile>,
    ) -> Result<LearnedBuckets, String> {
        if starts.is_empty() {
            return Err("no grouped bucket start (2 <= M < 32) was learned: no eligible row has an M in 2..32".into());
        }
        if let Some(m) = starts.iter().find(|&&m| Surface::of_m(m) != Surface::Grouped) {
            return Err(format!("bucket start M = {m} is not a grouped M (2 <= M < 32)"));
        }
        if starts.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("bucket starts {starts:?} are not strictly ascending"));
        }
        if starts[0] != 2 {
            return Err(format!(
                "the measurements start at M = {}: the first grouped bucket serves M = 2, so M = 2 must be measured",
                starts[0]
            ));
        }
        Ok(LearnedBuckets { starts, tolerance_percent, backend, arch, sources })
    }
}

/// One cell key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CellKey {
    pub format: SourceFormat,
    pub n: usize,
    pub k: usize,
    pub partition: Partition,
}

impl CellKey {
    /// The file stem: `Q4_0-4096x4096`.
    pub fn stem(&self) -> String {
        format!("{}-{}x{}", self.format.name(), self.n, self.k)
    }
}

/// `i/n` with i < n.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (i, n) = s.split_once('/').ok_or_else(|| format!("shard {s:?} is not i/n"))?;
        let index: usize = i.trim().parse().map_err(|_| format!("shard index {i:?} is not a number"))?;
        let count: usize = n.trim().parse().map_err(|_| format!("shard count {n:?} is not a number"))?;
        if count == 0 || index >= count {
            return Err(format!("shard {index}/{count}: the index must be below the count"));
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    /// `SLURM_ARRAY_TASK_ID` (minus `SLURM_ARRAY_TASK_MIN`, default 0) over
    /// `SLURM_ARRAY_TASK_COUNT`, when both are set.
    pub fn from_slurm(get: impl Fn(&str) -> Option<String>) -> Result<Option<Shard>, String> {
        let (Some(id), Some(count)) = (get("SLURM_ARRAY_TASK_ID"), get("SLURM_ARRAY_TASK_COUNT")) else {
            return Ok(None);
        };
        let num = |name: &str, v: &str| v.trim().parse::<usize>().map_err(|_| format!("{name}={v:?} is not a number"));
        let id = num("SLURM_ARRAY_TASK_ID", &id)?;
        let min = get("SLURM_ARRAY_TASK_MIN").map(|v| num("SLURM_ARRAY_TASK_MIN", &v)).transpose()?.unwrap_or(0);
        let count = num("SLURM_ARRAY_TASK_COUNT", &count)?;
        let index = id
            .checked_sub(min)
            .ok_or_else(|| format!("SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}"))?;
        format!("{index}/{count}").parse().map(Some)
    }

    pub fn owns(&self, cell_index: usize) -> bool {
        cell_index % self.count == self.index
    }
}

impl CollectionPlan {
    /// Which decode launches issued the L2 prefetch: what the plan records, and for a plan
    /// without the field every launch (the CUDA kernels that had the prefetch before it was
    /// recorded issued it on every launch; older kernels and the CPU have none, and ignore it).
    pub fn decode_l2_prefetch(&self) -> L2Prefetch {
        L2Prefetch::recorded(self.l2_prefetch)
    }

    /// The M values a cell of this plan is run over, in profile order: the planned ones, or
    /// only M = 1 for the first stage of a staged refresh.
    pub fn collected_m(&self) -> Vec<usize> {
        if self.m1_only {
            return vec![1];
        }
        self.planned_m()
    }

    /// The profile's M values, with its grouped ones (2..32) replaced by the learned bucket
    /// starts where the plan has them (ascending then). What a policy fitted on this plan's
    /// corpus takes its M buckets from, in either stage of a staged refresh.
    pub fn planned_m(&self) -> Vec<usize> {
        let Some(learned) = &self.learned_buckets else { return self.inventory.m.clone() };
        let mut m: Vec<usize> =
            self.inventory.m.iter().copied().filter(|&m| Surface::of_m(m) != Surface::Grouped).collect();
        m.extend(&learned.starts);
        m.sort_unstable();
        m.dedup();
        m
    }

    /// The M values this plan's backend measures (the CPU has no prefill surface).
    pub fn measured_m(&self) -> Vec<usize> {
        let mut m: Vec<usize> = self
            .collected_m()
            .iter()
            .copied()
            .filter(|&m| self.backend == Backend::Cuda || Surface::of_m(m) != Surface::Prefill)
            .collect();
        m.sort_unstable();
        m.dedup();
        m
    }

    /// A cell's rows must match its plan: M = 1 rows in every mode, and, where some decode
    /// candidate was eligible (the runners time batched rows at its bpp), rows for every
    /// measured batched M in every mode.
    pub fn check_cell_rows(&self, path: &Path, rows: &[TimingRow]) -> Result<(), CollectionError> {
        let any_eligible_decode = rows.iter().any(|r| r.m == 1 && r.eligible);
        for m in self.measured_m() {
            if m > 1 && !any_eligible_decode {
                continue;
            }
            for &mode in &self.modes {
                if !rows.iter().any(|r| r.m == m && r.mode == mode) {
                    return Err(CollectionError::Mismatch {
                        path: path.to_path_buf(),
                        message: format!(
                            "no rows for M = {m} in {mode} mode, which the plan measures: not the cell this plan's runner publishes (cut or copied from another collection)"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Every cell, in plan order (shapes by (N, K), formats in registry order).
    pub fn cells(&self) -> Vec<CellKey> {
        self.inventory
            .shapes
            .iter()
            .flat_map(|s| s.formats.iter().map(|&format| CellKey { format, n: s.n, k: s.k, partition: s.partition }))
            .collect()
    }

    /// The cells of one shard (all of them without one).
    pub fn shard_cells(&self, shard: Option<Shard>) -> Vec<CellKey> {
        self.cells().into_iter().enumerate().filter(|(i, _)| shard.is_none_or(|s| s.owns(*i))).map(|(_, c)| c).collect()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("plans serialize");
        v.push(b'\n');
        v
    }

    pub fn digest(&self) -> String {
        sha256_hex(&self.to_bytes())
    }

    /// What sealing this collection's corpus records.
    pub fn seal_inputs(&self) -> SealInputs {
        SealInputs {
            backend: self.backend,
            arch: self.arch.clone(),
            profile: self.inventory.profile.clone(),
            inventory_digest: self.inventory_digest.clone(),
            inventory_sources: self.inventory_sources.clone(),
            registry_digest: self.registry_digest.clone(),
            arguments_digest: self.digest(),
            build: BuildIdentity {
                kernel_source_digest: self.kernel_source_digest.clone(),
                nvrtc: self.nvrtc.clone(),
                driver: self.driver.clone(),
                device: self.device.clone(),
                git_commit: self.git_commit.clone(),
                git_dirty: self.git_dirty,
            },
        }
    }

    pub fn read(path: &Path) -> Result<CollectionPlan, CollectionError> {
        let bytes = std::fs::read(path).map_err(io(path))?;
        let plan: CollectionPlan = serde_json::from_slice(&bytes).map_err(|e| CollectionError::Mismatch {
            path: path.into(),
            message: format!("not a collection plan: {e}"),
        })?;
        if plan.schema != COLLECTION_SCHEMA {
            return Err(CollectionError::Mismatch {
                path: path.into(),
                message: format!("schema {:?} is not {COLLECTION_SCHEMA:?}", plan.schema),
            });
        }
        Ok(plan)
    }
}

/// Who measured a cell (per-device provenance).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellProvenance {
    pub cell: String,
    pub host: String,
    pub pid: u32,
    /// Device ordinal (CUDA) or worker index (CPU).
    pub device: usize,
    pub device_name: String,
    pub shard: String,
    /// Rows and raw samples published, and the sha256 of the two files' bytes: a cell
    /// truncated or edited after publication is refused when read (absent in cells published
    /// before these fields existed).
    #[serde(default)]
    pub rows: Option<usize>,
    #[serde(default)]
    pub rows_sha256: Option<String>,
    #[serde(default)]
    pub samples: Option<usize>,
    #[serde(default)]
    pub samples_sha256: Option<String>,
    /// Wall milliseconds this process spent measuring the cell (fixtures, bit checks, timing;
    /// absent in cells published before it was recorded): the sweep's throughput by size.
    #[serde(default)]
    pub millis: Option<u64>,
}

/// A work directory: `plan.json`, `cells/`, `locks/`.
#[derive(Debug, Clone)]
pub struct CellStore {
    pub root: PathBuf,
}

/// The outcome of trying to claim a cell.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// This process holds the lock; publish, then release.
    Claimed,
    /// Already published.
    Published,
    /// A live process holds it.
    Busy,
}

impl CellStore {
    pub fn new(root: &Path) -> CellStore {
        CellStore { root: root.to_path_buf() }
    }

    pub fn plan_path(&self) -> PathBuf {
        self.root.join(PLAN_FILE)
    }

    /// Write `plan` on first use; afterwards it must be byte-identical.
    pub fn bind_plan(&self, plan: &CollectionPlan) -> Result<(), CollectionError> {
        let path = self.plan_path();
        let bytes = plan.to_bytes();
        match std::fs::read(&path) {
            Ok(old) if old == bytes => Ok(()),
            Ok(old) => Err(CollectionError::Mismatch {
                path,
                message: format!(
                    "holds another collection plan ({}): use a new --out, or delete the directory to start over",
                    plan_difference(&old, &bytes)
                ),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(write_bytes(&path, &bytes)?),
            Err(e) => Err(io(&path)(e)),
        }
    }

    fn cell_path(&self, key: &CellKey, suffix: &str) -> PathBuf {
        self.root.join("cells").join(format!("{}{suffix}", key.stem()))
    }

    pub fn rows_path(&self, key: &CellKey) -> PathBuf {
        self.cell_path(key, ".csv")
    }

    pub fn samples_path(&self, key: &CellKey) -> PathBuf {
        self.cell_path(key, ".timing.csv.zst")
    }

    pub fn provenance_path(&self, key: &CellKey) -> PathBuf {
        self.cell_path(key, ".prov.json")
    }

    fn lock_path(&self, key: &CellKey) -> PathBuf {
        self.root.join("locks").join(format!("{}.lock", key.stem()))
    }

    /// A cell counts as published once its aggregate rows exist (written last).
    pub fn is_published(&self, key: &CellKey) -> bool {
        self.rows_path(key).is_file()
    }

    /// Claim `key` with an exclusive lock file holding `host pid start-time`. The lock is a
    /// hard link to a temporary file already holding that text, so it appears complete or not
    /// at all. A lock of a process of this host that is gone (a killed worker), or that names
    /// this very process (a reused pid), is taken over: moved aside under a unique name (one
    /// racer's rename wins), checked to be the stale one, then replaced.
    pub fn claim(&self, key: &CellKey) -> Result<Claim, CollectionError> {
        if self.is_published(key) {
            return Ok(Claim::Published);
        }
        let path = self.lock_path(key);
        std::fs::create_dir_all(path.parent().expect("locks dir")).map_err(io(&path))?;
        let pid = std::process::id();
        let me = format!("{} {pid} {}\n", host(), start_time(pid).unwrap_or(0));
        let unique = |what: &str| {
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            path.with_file_name(format!("{}.{pid}.{n}.{what}", key.stem()))
        };
        let mine = unique("claim");
        std::fs::write(&mine, &me).map_err(io(&mine))?;
        let outcome = (|| {
            for _ in 0..2 {
                match std::fs::hard_link(&mine, &path) {
                    Ok(()) => {
                        // Another worker may have published between our check and the lock.
                        if self.is_published(key) {
                            self.release(key)?;
                            return Ok(Claim::Published);
                        }
                        return Ok(Claim::Claimed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        let holder = std::fs::read_to_string(&path).unwrap_or_default();
                        if holder_alive(&holder) {
                            return Ok(Claim::Busy);
                        }
                        let aside = unique("stale");
                        if std::fs::rename(&path, &aside).is_ok() {
                            let moved = std::fs::read_to_string(&aside).unwrap_or_default();
                            if moved != holder {
                                // We moved a fresh lock of a faster racer: put it back.
                                let _ = std::fs::hard_link(&aside, &path);
                                let _ = std::fs::remove_file(&aside);
                                return Ok(Claim::Busy);
                            }
                            let _ = std::fs::remove_file(&aside);
                        }
                    }
                    Err(e) => return Err(io(&path)(e)),
                }
            }
            Ok(Claim::Busy)
        })();
        let _ = std::fs::remove_file(&mine);
        outcome
    }

    pub fn release(&self, key: &CellKey) -> Result<(), CollectionError> {
        let path = self.lock_path(key);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// Publish a cell: samples and provenance first, the aggregate rows last (the commit point).
    pub fn publish(
        &self,
        key: &CellKey,
        rows: &[TimingRow],
        samples: &[SampleRow],
        prov: &CellProvenance,
    ) -> Result<(), CollectionError> {
        // Samples, then the provenance (counts and digests of both files), then the rows: the
        // rows file is the commit point.
        let (rows_path, samples_path) = (self.rows_path(key), self.samples_path(key));
        let row_bytes = csv_bytes(&rows_path, rows)?;
        let sample_bytes = csv_bytes(&samples_path, samples)?;
        let prov = CellProvenance {
            rows: Some(rows.len()),
            rows_sha256: Some(sha256_hex(&row_bytes)),
            samples: Some(samples.len()),
            samples_sha256: Some(sha256_hex(&sample_bytes)),
            ..prov.clone()
        };
        write_bytes(&samples_path, &sample_bytes)?;
        let mut p = serde_json::to_vec_pretty(&prov).expect("provenance serializes");
        p.push(b'\n');
        write_bytes(&self.provenance_path(key), &p)?;
        write_bytes(&rows_path, &row_bytes)?;
        Ok(())
    }

    /// Cells of `cells` not yet published.
    pub fn missing(&self, cells: &[CellKey]) -> Vec<CellKey> {
        cells.iter().filter(|c| !self.is_published(c)).copied().collect()
    }

    /// Read one published cell through the validating readers; every row and sample must
    /// belong to the cell its file names (a file copied from another cell is refused).
    pub fn read_cell(
        &self,
        key: &CellKey,
    ) -> Result<(Vec<TimingRow>, Vec<SampleRow>, CellProvenance), CollectionError> {
        let pp = self.provenance_path(key);
        let text = std::fs::read(&pp).map_err(io(&pp))?;
        let prov: CellProvenance = serde_json::from_slice(&text).map_err(|e| CollectionError::Mismatch {
            path: pp.clone(),
            message: format!("not cell provenance: {e}"),
        })?;
        // The bytes must be the ones published (a truncated, cut or edited file is refused).
        for (path, want) in [(self.rows_path(key), &prov.rows_sha256), (self.samples_path(key), &prov.samples_sha256)] {
            if let Some(want) = want {
                let got = sha256_hex(&std::fs::read(&path).map_err(io(&path))?);
                if &got != want {
                    return Err(CollectionError::Mismatch {
                        path,
                        message: format!(
                            "changed since it was published (sha256 {got}, published {want}): measure the cell again (delete it and rerun)"
                        ),
                    });
                }
            }
        }
        let rows = read_timing(&self.rows_path(key))?;
        let samples = read_samples(&self.samples_path(key))?;
        let counted = |path: PathBuf, what: &str, want: Option<usize>, got: usize| match want {
            Some(w) if w != got => {
                Err(CollectionError::Mismatch { path, message: format!("holds {got} {what}, {w} were published") })
            }
            _ => Ok(()),
        };
        counted(self.rows_path(key), "rows", prov.rows, rows.len())?;
        counted(self.samples_path(key), "samples", prov.samples, samples.len())?;
        let wrong = |path: PathBuf, what: String| CollectionError::Mismatch {
            path,
            message: format!("{what} does not belong to cell {}", key.stem()),
        };
        if let Some(r) = rows.iter().find(|r| (r.source_format, r.n, r.k) != (Some(key.format), key.n, key.k)) {
            return Err(wrong(
                self.rows_path(key),
                format!("row {} {:?} {}x{}", r.candidate, r.source_format, r.n, r.k),
            ));
        }
        if let Some(s) = samples.iter().find(|s| (s.source_format, s.n, s.k) != (Some(key.format), key.n, key.k)) {
            return Err(wrong(
                self.samples_path(key),
                format!("sample of {} {:?} {}x{}", s.candidate, s.source_format, s.n, s.k),
            ));
        }
        Ok((rows, samples, prov))
    }
}

/// The top-level fields where two plan texts differ (`a` the one on disk, `b` the new one),
/// with both values where they are short (digests, versions, flags): a resumed collection
/// whose registry, kernel sources or inventory changed names the digests.
pub fn plan_difference(a: &[u8], b: &[u8]) -> String {
    let (Ok(a), Ok(b)) =
        (serde_json::from_slice::<serde_json::Value>(a), serde_json::from_slice::<serde_json::Value>(b))
    else {
        return "unreadable plan".into();
    };
    let shown = |v: Option<&serde_json::Value>| match v {
        None => Some("absent".to_string()),
        Some(v) if v.is_string() || v.is_boolean() || v.is_number() => Some(v.to_string()).filter(|t| t.len() <= 80),
        Some(_) => None,
    };
    if let (Some(a), Some(b)) = (a.as_object(), b.as_object()) {
        let differs: Vec<String> = a
            .keys()
            .chain(b.keys().filter(|k| !a.contains_key(*k)))
            .filter(|k| a.get(*k) != b.get(*k))
            .map(|k| match (shown(a.get(k)), shown(b.get(k))) {
                (Some(old), Some(new)) => format!("{k:?}: {old} there, {new} now"),
                _ => format!("{k:?}"),
            })
            .collect();
        if !differs.is_empty() {
            return format!("fields differ: {}", differs.join("; "));
        }
    }
    "the text differs".into()
}

pub fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Whether process `pid` of this host is running (not a zombie). Unknown without `/proc`:
/// then assumed running, so nothing of a live process is ever removed.
pub fn process_running(pid: u32) -> bool {
    !Path::new("/proc/self").exists() || zombie(pid) == Some(false)
}

/// Whether `/proc/<pid>/stat` shows a zombie (state Z: exited); `None` when it cannot be read.
fn zombie(pid: u32) -> Option<bool> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
}

/// The start time of a process (`/proc/<pid>/stat` field 22, clock ticks since boot), which
/// tells a live holder from a later process that reused its pid.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesized command name: state is field 3, start time field 22.
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the `host pid start-time` in a lock names a live process. Locks of other hosts
/// are assumed live (shards on a shared filesystem claim disjoint cells anyway), and so is
/// text that does not parse (never produced by `claim`, so someone else's).
fn holder_alive(holder: &str) -> bool {
    let mut it = holder.split_whitespace();
    let (Some(h), Some(pid)) = (it.next(), it.next()) else {
        return true;
    };
    if h != host() {
        return true;
    }
    let Ok(pid) = pid.parse::<u32>() else { return true };
    if pid == std::process::id() {
        // This process claims a cell once: a lock naming it is a previous process's.
        return false;
    }
    let recorded: Option<u64> = it.next().and_then(|t| t.parse().ok()).filter(|&t| t > 0);
    match zombie(pid) {
        // A zombie has exited, and a process we cannot see is gone: the lock is stale.
        Some(true) | None => false,
        Some(false) => recorded.is_none_or(|t| start_time(pid) == Some(t)),
    }
}

/// Assemble a complete cell set into corpus files under `out` (plan order, one file per phase
/// plus its sidecar, `cells.csv` with per-cell provenance, `plan.json`). Returns the row count.
pub fn assemble(store: &CellStore, plan: &CollectionPlan, out: &Path) -> Result<usize, CollectionError> {
    let mut phases: BTreeMap<&str, (Vec<TimingRow>, Vec<SampleRow>)> = BTreeMap::new();
    for p in PHASES {
        phases.insert(p, Default::default());
    }
    if plan.collected_m().iter().any(|&m| phase_of(m) == "prefill") {
        for p in PREFILL_PHASES {
            phases.insert(p, Default::default());
        }
    }
    let mut provenance = Vec::new();
    let mut total = 0;
    for key in plan.cells() {
        if !store.is_published(&key) {
            return Err(CollectionError::Mismatch {
                path: store.rows_path(&key),
                message: "cell not published: the collection is incomplete (rerun the sweep)".into(),
            });
        }
        let (rows, samples, prov) = store.read_cell(&key)?;
        plan.check_cell_rows(&store.rows_path(&key), &rows)?;
        let unplanned = |m: usize| CollectionError::Mismatch {
            path: store.rows_path(&key),
            message: format!("a row with M = {m}, which the plan does not have"),
        };
        for r in rows {
            let phase = phases.get_mut(phase_stem(r.m, key.partition).as_str()).ok_or_else(|| unplanned(r.m))?;
            phase.0.push(r);
            total += 1;
        }
        for s in samples {
            let phase = phases.get_mut(phase_stem(s.m, key.partition).as_str()).ok_or_else(|| unplanned(s.m))?;
            phase.1.push(s);
        }
        provenance.push(prov);
    }
    for (name, (rows, samples)) in &phases {
        write_csv(&out.join(format!("{name}.csv")), rows)?;
        write_csv(&out.join(format!("{name}.timing.csv.zst")), samples)?;
    }
    write_csv(&out.join("cells.csv"), &provenance)?;
    write_bytes(&out.join(PLAN_FILE), &plan.to_bytes())?;
    Ok(total)
}

/// The `*.toml` files of an inventory directory with their sha256, sorted by name.
pub fn inventory_sources(dir: &Path) -> Result<Vec<SourceFile>, CollectionError> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io(dir))? {
        let p = e.map_err(io(dir))?.path();
        if p.extension().is_some_and(|x| x == "toml") {
            let bytes = std::fs::read(&p).map_err(io(&p))?;
            let name = p.file_name().expect("a file").to_string_lossy().into_owned();
            out.push(SourceFile { path: name, sha256: sha256_hex(&bytes) });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The corpus rows of every phase in `dir` (an assembled or sealed corpus).
pub fn read_corpus_rows(dir: &Path) -> Result<Vec<TimingRow>, CollectionError> {
    let mut out = Vec::new();
    for p in PHASES {
        out.extend(read_timing(&dir.join(format!("{p}.csv")))?);
    }
    for p in PREFILL_PHASES {
        let path = dir.join(format!("{p}.csv"));
        if path.is_file() {
            out.extend(read_timing(&path)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    /// Learned bucket starts are grouped M, ascending, from M = 2; each refusal says which.
    #[test]
    fn learned_bucket_starts_are_checked() {
        use super::LearnedBuckets;
        let on = || (vnni_kernels::Backend::Cuda, "sm_90".to_string());
        assert!(LearnedBuckets::new(vec![2, 3, 5, 9, 17], 5, on(), Vec::new()).is_ok());
        for (starts, says) in [
            (vec![], "no grouped bucket start"),
            (vec![2, 32], "M = 32 is not a grouped M"),
            (vec![1, 2], "M = 1 is not a grouped M"),
            (vec![2, 9, 5], "not strictly ascending"),
            (vec![2, 2], "not strictly ascending"),
            (vec![3, 5], "start at M = 3"),
        ] {
            let e = LearnedBuckets::new(starts.clone(), 5, on(), Vec::new()).unwrap_err();
            assert!(e.contains(says), "{starts:?}: {e}");
        }
    }

    /// A changed digest is named with both values; a changed structure by its field.
    #[test]
    fn plan_differences_name_changed_digests() {
        let a = br#"{"registry_digest": "aaaa", "inventory": {"m": [1]}, "git_dirty": false}"#;
        let b = br#"{"registry_digest": "bbbb", "inventory": {"m": [1]}, "git_dirty": false}"#;
        assert_eq!(super::plan_difference(a, b), r#"fields differ: "registry_digest": "aaaa" there, "bbbb" now"#);
        let c = br#"{"registry_digest": "bbbb", "inventory": {"m": [1, 2]}, "git_dirty": false, "m1_only": true}"#;
        assert_eq!(
            super::plan_difference(a, c),
            r#"fields differ: "inventory"; "registry_digest": "aaaa" there, "bbbb" now; "m1_only": absent there, true now"#
        );
        assert_eq!(super::plan_difference(a, a), "the text differs");
    }

    use super::*;

    /// A plan without the L2 prefetch field (every CUDA plan before it was recorded) was timed
    /// with the prefetch on every decode launch, and writes no such field back; a recorded one
    /// round-trips.
    #[test]
    fn the_l2_prefetch_of_older_plans_is_every_launch() {
        let committed = |dir: &str| -> CollectionPlan {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../lfs-data/corpora/cuda/sm_90")
                .join(dir)
                .join("plan.json");
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
        };
        // The committed core corpus was timed after the field existed.
        assert_eq!(committed("4364fe0387eeb1aa-10a2c061ae2d").decode_l2_prefetch(), L2Prefetch::Programmatic);
        let mut plan = committed("27df0629a5ccd600-69d16bfaea33");
        assert_eq!(plan.l2_prefetch, None);
        assert_eq!(plan.decode_l2_prefetch(), L2Prefetch::Always);
        assert!(!serde_json::to_string(&plan).unwrap().contains("l2_prefetch"));
        plan.l2_prefetch = Some(L2Prefetch::Programmatic);
        let json = serde_json::to_string(&plan).unwrap();
        assert!(json.contains(r#""l2_prefetch":"programmatic""#), "{json}");
        let back: CollectionPlan = serde_json::from_str(&json).unwrap();
        assert_eq!(back.decode_l2_prefetch(), L2Prefetch::Programmatic);
    }

    fn store(tag: &str) -> (CellStore, CellKey) {
        let dir = std::env::temp_dir().join(format!("vnni-locks-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let key = CellKey { format: SourceFormat::Q4_0, n: 64, k: 64, partition: Partition::Development };
        (CellStore::new(&dir), key)
    }

    fn lock(s: &CellStore, key: &CellKey, text: &str) {
        std::fs::create_dir_all(s.root.join("locks")).unwrap();
        std::fs::write(s.lock_path(key), text).unwrap();
    }

    #[test]
    fn locks_are_exclusive_and_stale_ones_are_taken_over() {
        let (s, key) = store("claims");
        assert_eq!(s.claim(&key).unwrap(), Claim::Claimed);
        // Our own live lock from another claim attempt would be a reused pid: taken over.
        assert_eq!(s.claim(&key).unwrap(), Claim::Claimed);
        s.release(&key).unwrap();
        // A live process of this host (pid 1, the init of this namespace) holds it.
        let start = start_time(1).unwrap_or(0);
        lock(&s, &key, &format!("{} 1 {start}\n", host()));
        assert_eq!(s.claim(&key).unwrap(), Claim::Busy);
        // The same pid with another start time is a later process: stale.
        lock(&s, &key, &format!("{} 1 {}\n", host(), start + 1));
        assert_eq!(s.claim(&key).unwrap(), Claim::Claimed);
        // A dead pid is stale; text that does not parse, or another host, counts as live.
        lock(&s, &key, &format!("{} 999999999 5\n", host()));
        assert_eq!(s.claim(&key).unwrap(), Claim::Claimed);
        lock(&s, &key, "");
        assert_eq!(s.claim(&key).unwrap(), Claim::Busy);
        lock(&s, &key, "another-host 1 1\n");
        assert_eq!(s.claim(&key).unwrap(), Claim::Busy);
        // No temporary claim or stale files are left behind.
        let left: Vec<_> = std::fs::read_dir(s.root.join("locks")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 1, "{left:?}");
        let _ = std::fs::remove_dir_all(&s.root);
    }
}
