//! An authenticated corpus read into alias cells. One cell = (source format, mode, M, N, K):
//! the medians of every candidate of its surface, their regrets and the upper confidence
//! bounds of those regrets from the raw samples. Samples are dropped once the bounds exist.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use vnni_corpus::collection::{CollectionPlan, PHASES, PLAN_FILE};
use vnni_corpus::read::{read_samples, read_timing, BASELINES};
use vnni_corpus::schema::parse_hex_f64;
use vnni_corpus::seal::{verify, Expected, Manifest, SealError, MANIFEST};
use vnni_kernels::registry::{self, Backend, Candidate, Surface};
use vnni_kernels::{Codebook, SourceFormat};

use crate::error::{FitError, Result};
use crate::regret::{regrets, Measured};
use crate::ucb::{cell_ucb, ALPHA};

#[derive(Debug, Clone)]
pub struct Cell {
    pub format: SourceFormat,
    pub codebook: Codebook,
    pub mode: String,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// From a `*.sealed` phase (touched once, by certification).
    pub sealed: bool,
    /// Per candidate of the surface, registry order.
    pub regret: Vec<f64>,
    pub ucb: Vec<f64>,
}

impl Cell {
    pub fn surface(&self) -> Surface {
        if self.m == 1 {
            Surface::Decode
        } else {
            Surface::Grouped
        }
    }
}

#[derive(Debug)]
pub struct Corpus {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub plan: CollectionPlan,
    pub backend: Backend,
    pub decode: Vec<Candidate>,
    pub grouped: Vec<Candidate>,
    pub cells: Vec<Cell>,
}

impl Corpus {
    /// The backend's candidates of `surface`, registry order (the tie-break order).
    pub fn candidates(&self, surface: Surface) -> &[Candidate] {
        match surface {
            Surface::Decode => &self.decode,
            Surface::Grouped => &self.grouped,
            Surface::Prefill => &[],
        }
    }
}

/// Verify the seal (every payload's sha256, the registry digest of this checkout), then read.
pub fn load(dir: &Path) -> Result<Corpus> {
    let unauthenticated = |source| FitError::Unauthenticated { dir: dir.into(), source };
    let manifest = verify(dir, &Expected::default()).map_err(unauthenticated)?;
    // The (now authenticated) plan says which surfaces the corpus covers, hence which
    // registry digest it must bind.
    let plan = CollectionPlan::read(&dir.join(PLAN_FILE))?;
    let want = registry::registry_digest_for(&plan.inventory.m);
    if manifest.identity.inputs.registry_digest != want {
        return Err(unauthenticated(SealError::Stale {
            path: dir.join(MANIFEST),
            what: "the registry digest",
            expected: want,
            found: manifest.identity.inputs.registry_digest.clone(),
            fix: "the candidate registry changed since this corpus was collected; collect a new corpus",
        }));
    }
    let backend = match plan.backend.as_str() {
        "cuda" => Backend::Cuda,
        "cpu" => Backend::Cpu,
        other => {
            return Err(FitError::Corpus { path: dir.join(PLAN_FILE), message: format!("unknown backend {other:?}") })
        }
    };
    let decode = registry::candidates(backend, Surface::Decode);
    let grouped = registry::candidates(backend, Surface::Grouped);
    let mut cells = Vec::new();
    for phase in PHASES {
        let sealed = phase.ends_with(".sealed");
        let rows_path = dir.join(format!("{phase}.csv"));
        let samples_path = dir.join(format!("{phase}.timing.csv.zst"));
        let mut samples: BTreeMap<SampleKey, Vec<f64>> = BTreeMap::new();
        for s in read_samples(&samples_path)? {
            if s.warmup {
                continue;
            }
            let v = parse_hex_f64(&s.latency_us_hex).expect("validated by read_samples");
            samples.entry((s.mode, s.source_format, s.m, s.n, s.k, s.candidate)).or_default().push(v);
        }
        let mut grouped_rows: BTreeMap<CellKey, BTreeMap<String, Measured>> = BTreeMap::new();
        for (line, r) in read_timing(&rows_path)?.into_iter().enumerate() {
            if BASELINES.contains(&r.candidate.as_str()) {
                continue;
            }
            let bad = |message: String| FitError::Corpus { path: rows_path.clone(), message: format!("row {}: {message}", line + 2) };
            if r.backend != plan.backend {
                return Err(bad(format!("backend {:?} in a {:?} corpus", r.backend, plan.backend)));
            }
            let measured = Measured { median_us: r.median_us, eligible: r.eligible };
            grouped_rows.entry((r.source_format, r.mode, r.m, r.n, r.k)).or_default().insert(r.candidate, measured);
        }
        for ((format_name, mode, m, n, k), rows) in grouped_rows {
            let format: SourceFormat = format_name
                .parse()
                .map_err(|e| FitError::Corpus { path: rows_path.clone(), message: format!("{e}") })?;
            let surface = if m == 1 { Surface::Decode } else { Surface::Grouped };
            let list = if m == 1 { &decode } else { &grouped };
            for id in rows.keys() {
                if !list.iter().any(|c| &c.id == id) {
                    return Err(FitError::Corpus {
                        path: rows_path.clone(),
                        message: format!("{id} is not a {} {surface:?} candidate (M = {m})", backend.name()),
                    });
                }
            }
            let entries: Vec<Option<Measured>> = list.iter().map(|c| rows.get(&c.id).copied()).collect();
            let mut cell_samples: Vec<Option<&[f64]>> = Vec::with_capacity(list.len());
            for (c, e) in list.iter().zip(&entries) {
                let key = (mode.clone(), format_name.clone(), m, n, k, c.id.clone());
                cell_samples.push(match e {
                    Some(e) if e.eligible => Some(samples.get(&key).map(Vec::as_slice).ok_or_else(|| FitError::Corpus {
                        path: samples_path.clone(),
                        message: format!("no samples for {format_name} {mode} M={m} {n}x{k} {}", c.id),
                    })?),
                    _ => None,
                });
            }
            cells.push(Cell {
                format,
                codebook: format.codebook(),
                mode,
                m: m as u64,
                n: n as u64,
                k: k as u64,
                sealed,
                regret: regrets(&entries),
                ucb: cell_ucb(&cell_samples, ALPHA),
            });
        }
    }
    Ok(Corpus { dir: dir.into(), manifest, plan, backend, decode, grouped, cells })
}

type SampleKey = (String, String, usize, usize, usize, String);
type CellKey = (String, String, usize, usize, usize);
