//! The M = 1 stage a staged (grouped) collection inherits. A staged refresh sweeps M = 1,
//! fits and freezes the M = 1 policy, then times the batched rows (grouped and prefill) at
//! the bpp that frozen policy picks for each planned (format, N, K) and mode: at run time a
//! batched launch inherits the bpp of the table's M = 1 pick, so that is the configuration to
//! time and certify. The plan of the second collection binds the frozen stage ([`FrozenM1`]:
//! the M = 1 corpus, the frozen policy's digests and every pick), and its decode rows are the
//! M = 1 corpus's rows, copied with their raw samples ([`M1Rows`]), not timed again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vnni_kernels::{CandidateId, Mode, SourceFormat};

use crate::collection::{phase_stem, CellKey, CollectionError, CollectionPlan, PLAN_FILE};
use crate::inventory::Partition;
use crate::read::{read_samples, read_timing};
use crate::schema::{SampleRow, TimingRow};
use crate::seal::{verify, Expected};

/// The frozen M = 1 stage a staged collection's batched rows inherit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenM1 {
    /// The sealed M = 1 corpus whose decode rows this collection copies.
    pub m1_corpus_id: String,
    /// sha256 of the frozen policy file, and the digest of its M = 1 part (`Policy::m1_digest`):
    /// the final policy must carry exactly that M = 1 part.
    pub policy_digest: String,
    pub m1_digest: String,
    /// The frozen policy's `units` (SMs or CPU threads): its picks' bpp hold on such a device only.
    pub units: u32,
    /// Every planned (format, N, K) x mode: the frozen policy's M = 1 pick, sorted.
    pub picks: Vec<InheritedPick>,
}

/// The M = 1 candidate (and its bpp) the frozen policy picks for one (format, N, K, mode).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InheritedPick {
    pub format: SourceFormat,
    pub n: usize,
    pub k: usize,
    pub mode: Mode,
    pub candidate: CandidateId,
    pub bpp: usize,
}

impl FrozenM1 {
    /// The picks of one cell, in mode order.
    pub fn picks_of(&self, key: &CellKey) -> Vec<&InheritedPick> {
        self.picks.iter().filter(|p| p.format == key.format && p.n == key.n && p.k == key.k).collect()
    }
}

/// (format, N, K, partition): one cell's decode rows and raw samples.
type CellRows = BTreeMap<(SourceFormat, usize, usize, Partition), (Vec<TimingRow>, Vec<SampleRow>)>;

/// The decode rows of a sealed M = 1 corpus, per cell.
#[derive(Debug)]
pub struct M1Rows {
    dir: PathBuf,
    cells: CellRows,
}

impl M1Rows {
    /// Verify the seal of the M = 1 corpus in `dir`, check its id and that it was collected
    /// like `batched` (backend, arch, device, units; warmups, samples and passes; every planned
    /// cell in the same partition, in every mode), and read its decode rows.
    pub fn load(dir: &Path, corpus_id: &str, batched: &CollectionPlan) -> Result<M1Rows, CollectionError> {
        let mismatch = |message: String| CollectionError::Mismatch { path: dir.into(), message };
        let manifest = verify(dir, &Expected::default()).map_err(|e| mismatch(format!("not a sealed corpus: {e}")))?;
        if manifest.corpus_id != corpus_id {
            return Err(mismatch(format!(
                "is corpus {}, but the frozen M = 1 policy was fitted on corpus {corpus_id}",
                manifest.corpus_id
            )));
        }
        let m1 = CollectionPlan::read(&dir.join(PLAN_FILE))?;
        let same = [
            ("backend", m1.backend == batched.backend),
            ("arch", m1.arch == batched.arch),
            ("device", m1.device == batched.device),
            ("units", m1.units == batched.units),
        ];
        if let Some((what, _)) = same.iter().find(|(_, ok)| !ok) {
            return Err(mismatch(format!(
                "was collected on another {what} than this sweep ({} {} {} with {} units vs {} {} {} with {} units): its decode rows cannot stand beside batched rows timed here",
                m1.backend, m1.arch, m1.device, m1.units, batched.backend, batched.arch, batched.device, batched.units
            )));
        }
        if m1.programmatic != batched.programmatic {
            let launch = |p: bool| if p { "programmatically" } else { "plainly" };
            return Err(mismatch(format!(
                "launched its decode candidates {}, this sweep {}: the frozen picks hold for one launch style (sweep --programmatic on both stages or neither)",
                launch(m1.programmatic),
                launch(batched.programmatic)
            )));
        }
        if m1.decode_l2_prefetch() != batched.decode_l2_prefetch() {
            return Err(mismatch(format!(
                "was timed with the L2 prefetch on {}, this build issues it on {}: its decode rows do not describe what this build runs (collect the M = 1 stage again with this build)",
                m1.decode_l2_prefetch().launches(),
                batched.decode_l2_prefetch().launches()
            )));
        }
        let protocol = |p: &CollectionPlan| (p.inventory.warmups, p.inventory.samples, p.inventory.passes);
        if protocol(&m1) != protocol(batched) {
            let (w, s, p) = protocol(&m1);
            let (bw, bs, bp) = protocol(batched);
            return Err(mismatch(format!(
                "was timed with {w} warmups, {s} samples and {p} passes per cell, this sweep with {bw}, {bs} and {bp}: one corpus holds one timing protocol (its noise bands come from the passes)"
            )));
        }
        let m1_cells: BTreeMap<(SourceFormat, usize, usize), Partition> =
            m1.cells().into_iter().map(|c| ((c.format, c.n, c.k), c.partition)).collect();
        for key in batched.cells() {
            match m1_cells.get(&(key.format, key.n, key.k)) {
                None => return Err(mismatch(format!("has no cell {}: the M = 1 stage swept another plan", key.stem()))),
                Some(p) if *p != key.partition => {
                    return Err(mismatch(format!(
                        "holds cell {} in its {} partition, this plan in its {} partition: the frozen policy may have been fitted on rows this corpus would seal",
                        key.stem(),
                        p.name(),
                        key.partition.name()
                    )))
                }
                Some(_) => {}
            }
        }
        if let Some(mode) = batched.modes.iter().find(|m| !m1.modes.contains(m)) {
            return Err(mismatch(format!("has no {mode} rows, which this plan measures")));
        }
        let mut cells = CellRows::new();
        for partition in [Partition::Development, Partition::Sealed] {
            let stem = phase_stem(1, partition);
            let rows_path = dir.join(format!("{stem}.csv"));
            let samples_path = dir.join(format!("{stem}.timing.csv.zst"));
            let no_format = |path: &Path| CollectionError::Mismatch {
                path: path.into(),
                message: "a decode row without a source format: not a sweep corpus".into(),
            };
            for r in read_timing(&rows_path)? {
                let f = r.source_format.ok_or_else(|| no_format(&rows_path))?;
                cells.entry((f, r.n, r.k, partition)).or_default().0.push(r);
            }
            for s in read_samples(&samples_path)? {
                let f = s.source_format.ok_or_else(|| no_format(&samples_path))?;
                cells.entry((f, s.n, s.k, partition)).or_default().1.push(s);
            }
        }
        Ok(M1Rows { dir: dir.into(), cells })
    }

    /// One cell's decode rows and samples, as the M = 1 collection published them.
    pub fn cell(&self, key: &CellKey) -> Result<(Vec<TimingRow>, Vec<SampleRow>), CollectionError> {
        self.cells.get(&(key.format, key.n, key.k, key.partition)).cloned().ok_or_else(|| CollectionError::Mismatch {
            path: self.dir.clone(),
            message: format!("has no decode rows of cell {}: the M = 1 stage swept another plan", key.stem()),
        })
    }
}
