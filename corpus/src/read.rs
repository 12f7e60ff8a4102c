//! Validating readers for the corpus files. Every row is checked; an error names the file,
//! the line and the column (or JSON key) and says what is wrong: malformed numbers, NaN or
//! non-positive times where a time is required, unknown candidates, duplicate keys.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::schema::{
    parse_hex_f64, Certificate, DenseMRow, FamilyCvRow, PairRequest, ResourceRow, SampleRow, TimingRow,
};

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("{path}:{line}: column {column}: {message}")]
    Row { path: PathBuf, line: u64, column: String, message: String },
}

/// Baseline rows the bench writes beside registry candidates (the registry owns the ids).
pub use vnni_kernels::registry::BASELINE_IDS as BASELINES;

/// Whether `id` names a registry candidate or a baseline.
pub fn known_candidate(id: &str) -> bool {
    BASELINES.contains(&id) || vnni_kernels::registry::find(id).is_some()
}

/// Open a file, transparently decompressing `.zst`.
pub fn open(path: &Path) -> Result<Box<dyn Read>, ReadError> {
    let io = |e: std::io::Error| ReadError::Io { path: path.to_path_buf(), message: e.to_string() };
    let file = std::fs::File::open(path).map_err(io)?;
    if path.extension().is_some_and(|e| e == "zst") {
        Ok(Box::new(zstd::Decoder::new(file).map_err(io)?))
    } else {
        Ok(Box::new(std::io::BufReader::new(file)))
    }
}

/// Deserialize every CSV row, mapping serde errors to (line, column name).
pub(crate) fn rows<T: DeserializeOwned>(path: &Path) -> Result<Vec<(u64, T)>, ReadError> {
    let mut r = csv::Reader::from_reader(open(path)?);
    let headers = r.headers().map_err(|e| ReadError::Io { path: path.to_path_buf(), message: e.to_string() })?.clone();
    let mut out = Vec::new();
    for (i, rec) in r.deserialize::<T>().enumerate() {
        let line = i as u64 + 2;
        match rec {
            Ok(v) => out.push((line, v)),
            Err(e) => {
                let line = e.position().map_or(line, |p| p.line());
                let (column, message) = match e.kind() {
                    csv::ErrorKind::Deserialize { err, .. } => (
                        err.field().and_then(|f| headers.get(f as usize)).unwrap_or("?").to_string(),
                        err.kind().to_string(),
                    ),
                    other => ("?".to_string(), format!("{other:?}")),
                };
                return Err(ReadError::Row { path: path.to_path_buf(), line, column, message });
            }
        }
    }
    Ok(out)
}

pub(crate) fn row_err(path: &Path, line: u64, column: &str, message: impl Into<String>) -> ReadError {
    ReadError::Row { path: path.to_path_buf(), line, column: column.to_string(), message: message.into() }
}

/// The candidate must be known.
pub(crate) fn check_candidate(path: &Path, line: u64, id: &str) -> Result<(), ReadError> {
    if known_candidate(id) {
        Ok(())
    } else {
        Err(row_err(path, line, "candidate", format!("unknown candidate {id:?} (not in the registry)")))
    }
}

/// Each candidate id of one file, checked against the registry once and numbered: samples
/// repeat a few dozen ids millions of times.
#[derive(Default)]
struct Interned(HashMap<String, u32>);

impl Interned {
    fn index(&mut self, path: &Path, line: u64, id: &str) -> Result<u32, ReadError> {
        if let Some(&i) = self.0.get(id) {
            return Ok(i);
        }
        check_candidate(path, line, id)?;
        let i = self.0.len() as u32;
        self.0.insert(id.to_string(), i);
        Ok(i)
    }
}

/// The key must not have appeared before (the map is only looked up, never walked, so its
/// order does not matter).
fn check_unique<K: Hash + Eq>(
    seen: &mut HashMap<K, u64>,
    key: K,
    path: &Path,
    line: u64,
    column: &str,
    what: &str,
) -> Result<(), ReadError> {
    match seen.insert(key, line) {
        Some(first) => Err(row_err(path, line, column, format!("duplicate {what} (first at line {first})"))),
        None => Ok(()),
    }
}

/// Aggregate timing rows: times of eligible rows finite and positive, candidates known, keys unique.
pub fn read_timing(path: &Path) -> Result<Vec<TimingRow>, ReadError> {
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    for (line, r) in rows::<TimingRow>(path)? {
        check_candidate(path, line, &r.candidate)?;
        if r.eligible {
            for (col, v) in [("median_us", r.median_us), ("min_us", r.min_us), ("p95_us", r.p95_us)] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(row_err(path, line, col, format!("{v} is not a positive time")));
                }
            }
        }
        if r.mismatches > 0 && r.eligible {
            return Err(row_err(path, line, "eligible", "a row with mismatches cannot be eligible"));
        }
        let key = format!(
            "{}|{}|{}|{:?}|{:?}|{}|{}|{}|{}",
            r.backend, r.arch, r.mode, r.source_format, r.codebook, r.m, r.n, r.k, r.candidate
        );
        check_unique(&mut seen, key, path, line, "candidate", "key")?;
        out.push(r);
    }
    Ok(out)
}

/// Pair requests (`remeasure.csv`): candidates known and different, regrets finite and
/// non-negative, the limit one of `regret` / `bound`, cells unique.
pub fn read_pair_requests(path: &Path) -> Result<Vec<PairRequest>, ReadError> {
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    for (line, r) in rows::<PairRequest>(path)? {
        for (col, id) in [("pick", &r.pick), ("best", &r.best)] {
            if !known_candidate(id.as_ref()) {
                return Err(row_err(path, line, col, format!("unknown candidate {id} (not in the registry)")));
            }
        }
        if r.pick == r.best {
            return Err(row_err(path, line, "best", "the pick is the best: nothing to compare"));
        }
        for (col, v) in [("regret", r.regret), ("ucb", r.ucb)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(row_err(path, line, col, format!("{v} is not a non-negative regret")));
            }
        }
        if !crate::schema::PAIR_LIMITS.contains(&r.limit.as_str()) {
            let words = crate::schema::PAIR_LIMITS.join(", ");
            return Err(row_err(path, line, "limit", format!("{:?} is not one of {words}", r.limit)));
        }
        let key = format!("{}|{}|{}|{}|{}", r.source_format, r.mode, r.m, r.n, r.k);
        check_unique(&mut seen, key, path, line, "source_format", "cell")?;
        out.push(r);
    }
    Ok(out)
}

/// Leave-one-family-out rows (`family-cv.csv.zst`): candidates known, predictions finite and
/// positive where present, regrets non-negative, (family, source format, mode, N, K,
/// candidate) unique, and exactly one shipped pick and one tree leaf per cell.
pub fn read_family_cv(path: &Path) -> Result<Vec<FamilyCvRow>, ReadError> {
    let mut seen: HashMap<String, u64> = HashMap::new();
    // Per cell: (first line, shipped picks, tree leaves).
    let mut cells: BTreeMap<String, (u64, u32, u32)> = BTreeMap::new();
    let mut out = Vec::new();
    for (line, r) in rows::<FamilyCvRow>(path)? {
        check_candidate(path, line, r.candidate.as_ref())?;
        if let Some(p) = r.predicted_us {
            if !(p.is_finite() && p > 0.0) {
                return Err(row_err(path, line, "predicted_us", format!("{p} is not a positive latency")));
            }
        }
        for (col, v) in [("regret", r.regret), ("scored", r.scored)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(row_err(path, line, col, format!("{v} is not a non-negative regret")));
            }
        }
        let cell = format!("{}|{}|{}|{}|{}", r.family, r.source_format, r.mode, r.n, r.k);
        check_unique(&mut seen, format!("{cell}|{}", r.candidate), path, line, "candidate", "candidate of a cell")?;
        let e = cells.entry(cell).or_insert((line, 0, 0));
        e.1 += u32::from(r.shipped);
        e.2 += u32::from(r.tree);
        out.push(r);
    }
    for (cell, (line, shipped, tree)) in cells {
        if shipped != 1 || tree != 1 {
            return Err(row_err(
                path,
                line,
                "shipped",
                format!("cell {cell} has {shipped} shipped picks and {tree} tree leaves (one each expected)"),
            ));
        }
    }
    Ok(out)
}

/// Dense-M rows (`dense-m.csv`): candidates known, times finite and positive, the codebook
/// the source format's, the dispatched time present only beside a dispatched candidate,
/// (mode, source format, N, K, M) unique.
pub fn read_dense_m(path: &Path) -> Result<Vec<DenseMRow>, ReadError> {
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    for (line, r) in rows::<DenseMRow>(path)? {
        for (col, id) in
            [("m1_candidate", Some(&r.m1_candidate)), ("best", Some(&r.best)), ("dispatched", r.dispatched.as_ref())]
        {
            if let Some(id) = id.filter(|id| vnni_kernels::registry::find(id.as_str()).is_none()) {
                return Err(row_err(path, line, col, format!("unknown candidate {id} (not in the registry)")));
            }
        }
        if r.codebook != r.source_format.codebook() {
            return Err(row_err(
                path,
                line,
                "codebook",
                format!("{} is not the codebook of {}", r.codebook, r.source_format),
            ));
        }
        if r.m == 0 || r.n == 0 || r.k == 0 || r.k % 32 != 0 {
            return Err(row_err(path, line, "m", format!("{}x{}x{} is not a product shape", r.m, r.n, r.k)));
        }
        for (col, v) in [("best_us", Some(r.best_us)), ("dispatched_us", r.dispatched_us)] {
            if let Some(v) = v.filter(|v| !(v.is_finite() && *v > 0.0)) {
                return Err(row_err(path, line, col, format!("{v} is not a positive time")));
            }
        }
        if r.dispatched.is_none() && r.dispatched_us.is_some() {
            return Err(row_err(path, line, "dispatched_us", "a time without a dispatched candidate"));
        }
        let key = format!("{}|{}|{}|{}|{}", r.mode, r.source_format, r.n, r.k, r.m);
        check_unique(&mut seen, key, path, line, "m", "(mode, source format, N, K, M)")?;
        out.push(r);
    }
    Ok(out)
}

/// Raw samples: hex latencies finite and positive, candidates known, (key, pass, round)
/// unique. Files written before passes existed have no `pass` column: pass 0.
pub fn read_samples(path: &Path) -> Result<Vec<SampleRow>, ReadError> {
    let mut seen = HashMap::new();
    let mut ids = Interned::default();
    let mut out = Vec::new();
    for (line, r) in rows::<SampleRow>(path)? {
        let candidate = ids.index(path, line, &r.candidate)?;
        match parse_hex_f64(&r.latency_us_hex) {
            Some(v) if v.is_finite() && v > 0.0 => {}
            Some(v) => return Err(row_err(path, line, "latency_us_hex", format!("{v} is not a positive time"))),
            None => {
                return Err(row_err(path, line, "latency_us_hex", format!("{:?} is not a hex float", r.latency_us_hex)))
            }
        }
        let key = (r.mode, r.source_format, r.codebook, r.m, r.n, r.k, candidate, r.pass, r.round);
        check_unique(&mut seen, key, path, line, "round", "sample")?;
        out.push(r);
    }
    Ok(out)
}

/// A sealed corpus's `cells.csv`: who measured each cell, and how long it took (cells of
/// older corpora have no time).
pub fn read_cells(path: &Path) -> Result<Vec<crate::collection::CellProvenance>, ReadError> {
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    for (line, r) in rows::<crate::collection::CellProvenance>(path)? {
        check_unique(&mut seen, r.cell.clone(), path, line, "cell", "cell")?;
        out.push(r);
    }
    Ok(out)
}

/// Certificates, one JSON object per line, every key present and candidates known.
pub fn read_certificates(path: &Path) -> Result<Vec<Certificate>, ReadError> {
    let mut text = String::new();
    open(path)?
        .read_to_string(&mut text)
        .map_err(|e| ReadError::Io { path: path.to_path_buf(), message: e.to_string() })?;
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let line = i as u64 + 1;
        if l.trim().is_empty() {
            continue;
        }
        let c: Certificate =
            serde_json::from_str(l).map_err(|e| row_err(path, line, &format!("char {}", e.column()), e.to_string()))?;
        if !known_candidate(&c.m1_candidate) {
            return Err(row_err(path, line, "m1_candidate", format!("unknown candidate {:?}", c.m1_candidate)));
        }
        out.push(c);
    }
    Ok(out)
}

/// Kernel resources: one row per kernel, verdicts consistent with the numbers (a kernel with
/// local memory or zero occupancy must be rejected).
pub fn read_resources(path: &Path) -> Result<Vec<ResourceRow>, ReadError> {
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    for (line, r) in rows::<ResourceRow>(path)? {
        let local = r.stack_bytes > 0
            || r.spill_store_bytes > 0
            || r.spill_load_bytes > 0
            || r.device_local_bytes.is_some_and(|b| b > 0)
            || r.device_occupancy_blocks_per_sm == Some(0);
        if local && r.verdict == "ok" {
            return Err(row_err(path, line, "verdict", "uses local memory or has zero occupancy but is marked ok"));
        }
        if r.verdict != "ok" && !r.verdict.starts_with("rejected: ") {
            return Err(row_err(
                path,
                line,
                "verdict",
                format!("{:?} is neither `ok` nor `rejected: <why>`", r.verdict),
            ));
        }
        for id in r.candidates.split(';').filter(|s| !s.is_empty()) {
            if !known_candidate(id) {
                return Err(row_err(path, line, "candidates", format!("unknown candidate {id:?}")));
            }
        }
        check_unique(&mut seen, format!("{}|{}", r.arch, r.kernel), path, line, "kernel", "kernel")?;
        out.push(r);
    }
    Ok(out)
}
