//! An authenticated corpus read into alias cells. One cell = (source format, mode, M, N, K):
//! the medians of every candidate of its surface, their regrets, the upper confidence bounds
//! of those regrets from the raw samples and, where the protocol ran two or more passes, each
//! candidate's pass-to-pass difference (the noise band's evidence, `noise.rs`). Samples are
//! dropped once these exist.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use vnni_corpus::collection::{CollectionPlan, PHASES, PLAN_FILE};
use vnni_corpus::read::{read_resources, read_samples, read_timing, BASELINES};
use vnni_corpus::schema::parse_hex_f64;
use vnni_corpus::seal::{verify, Expected, Manifest, SealError, MANIFEST};
use vnni_kernels::registry::{self, Backend, Candidate, Surface};
use vnni_kernels::{CandidateId, Codebook, Mode, SourceFormat};

use crate::cost_model::KernelResources;
use crate::error::{FitError, Result};
use crate::regret::{best_median, regrets, Measured};
use crate::ucb::{cell_ucb, ALPHA};

#[derive(Debug, Clone)]
pub struct Cell {
    pub format: SourceFormat,
    pub codebook: Codebook,
    pub mode: Mode,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// From a `*.sealed` phase (touched once, by certification).
    pub sealed: bool,
    /// The least eligible median (us): the candidates' medians are `best_us * (1 + regret)`.
    pub best_us: f64,
    /// Per candidate of the surface, registry order.
    pub regret: Vec<f64>,
    pub ucb: Vec<f64>,
    /// Pass-to-pass differences of each eligible candidate's position in the cell
    /// (`noise::cell_replicates`): replicates of one kernel on the same bytes, the shift the
    /// whole cell takes between passes removed.
    pub replicates: Vec<f64>,
    /// The noise band of the cell's domain and size (`noise::apply_pass_bands`); 0 without
    /// replicates.
    pub band: f64,
    /// Per candidate: its record is suspect ([`Suspect`]), so the cell lists it as a pair to
    /// time again (`remeasure.rs`); cleared by a pair that timed it (`pairs.rs`).
    pub stalled: Vec<bool>,
}

impl Cell {
    pub fn surface(&self) -> Surface {
        if self.m == 1 {
            Surface::Decode
        } else {
            Surface::Grouped
        }
    }

    /// The regret that scores a choice: a candidate inside the noise band of the best is
    /// tied with it (0), one outside keeps its whole regret. Fits use the raw `regret`.
    pub fn scored(&self, c: usize) -> f64 {
        let r = self.regret[c];
        if r <= self.band {
            0.0
        } else {
            r
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
    /// Registers and static shared memory per kernel symbol (`resources.csv`; CUDA corpora).
    pub resources: BTreeMap<String, KernelResources>,
    /// The noise band of every (domain, size octave) of a cell, from pass replicates (empty
    /// for one-pass corpora).
    pub bands: BTreeMap<(crate::domains::DomainKey, u32), crate::noise::Band>,
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
    load_with(dir, Twins::AsMeasured)
}

/// How the records of launch twins (candidates that launch the same kernel the same way at a
/// shape: [`Candidate::same_launch_as`] at the same bpp) are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Twins {
    /// Every candidate keeps its own record, as the corpus has it.
    #[default]
    AsMeasured,
    /// A record cut short (fewer samples than a twin's: racing dropped it, often on one
    /// stalled sample) is read as its twin's fullest record, since both time one launch.
    /// Equally full records stay their own: they are replicates, and the noise band covers
    /// their difference.
    Pooled,
}

impl Twins {
    /// How `policy`'s fit read its corpus.
    pub fn of(policy: &vnni_policy::Policy) -> Twins {
        if policy.provenance.twins_pooled {
            Twins::Pooled
        } else {
            Twins::AsMeasured
        }
    }
}

/// Load and authenticate the corpus in `dir`, reading launch twins' records as `twins` says.
pub fn load_with(dir: &Path, twins: Twins) -> Result<Corpus> {
    let unauthenticated = |source| FitError::Unauthenticated { dir: dir.into(), source: Box::new(source) };
    let manifest = verify(dir, &Expected::default()).map_err(unauthenticated)?;
    // The (now authenticated) plan says which surfaces the corpus covers, hence which
    // registry digest it must bind.
    let plan = CollectionPlan::read(&dir.join(PLAN_FILE))?;
    let found = &manifest.identity.inputs.registry_digest;
    let Some(generation) = registry::generation_of(found, &plan.inventory.m) else {
        return Err(unauthenticated(SealError::Stale {
            path: dir.join(MANIFEST),
            what: "the registry digest",
            expected: registry::fittable_digests(&plan.inventory.m).join(" or "),
            found: found.clone(),
            fix: "the candidate registry changed since this corpus was collected; collect a new corpus",
        }));
    };
    let backend = plan.backend;
    // The candidate lists of the corpus's own generation: the regret vectors, tie-break
    // order and the generic candidates of a refit are those it was fitted with.
    let decode = registry::candidates_in(backend, Surface::Decode, generation);
    let grouped = registry::candidates_in(backend, Surface::Grouped, generation);
    let position: [HashMap<&str, usize>; 2] =
        [&decode, &grouped].map(|list| list.iter().enumerate().map(|(i, c)| (c.id.as_str(), i)).collect());
    let mut cells = Vec::new();
    let suspect = Suspect::of_protocol();
    for phase in PHASES {
        let sealed = phase.ends_with(".sealed");
        let rows_path = dir.join(format!("{phase}.csv"));
        let samples_path = dir.join(format!("{phase}.timing.csv.zst"));
        let bad = |path: &PathBuf, line: usize, message: String| FitError::Corpus {
            path: path.clone(),
            message: format!("row {}: {message}", line + 2),
        };
        // every candidate's measured samples, by protocol pass
        // Keyed by the candidate's position in its surface's list (looked up, never walked).
        let mut samples: HashMap<(RowKey, usize), BTreeMap<usize, Vec<f64>>> = HashMap::new();
        // The fastest launch of the first pass, warmups too (what racing bounds a drop by).
        let mut fastest: HashMap<(RowKey, usize), f64> = HashMap::new();
        for (line, s) in read_samples(&samples_path)?.into_iter().enumerate() {
            if BASELINES.contains(&s.candidate.as_str()) {
                continue;
            }
            // A candidate of neither list has no rows either (the rows check below names it).
            let Some(&c) = position[usize::from(s.m != 1)].get(s.candidate.as_str()) else { continue };
            let format = s
                .source_format
                .ok_or_else(|| bad(&samples_path, line, "a candidate's sample without a source format".into()))?;
            let v = parse_hex_f64(&s.latency_us_hex).expect("validated by read_samples");
            let key = RowKey { format, mode: s.mode, m: s.m, n: s.n, k: s.k };
            if s.pass == 0 {
                let f = fastest.entry((key, c)).or_insert(f64::INFINITY);
                *f = f.min(v);
            }
            if !s.warmup {
                samples.entry((key, c)).or_default().entry(s.pass).or_default().push(v);
            }
        }
        let mut grouped_rows: BTreeMap<RowKey, BTreeMap<CandidateId, (Measured, Record)>> = BTreeMap::new();
        for (line, r) in read_timing(&rows_path)?.into_iter().enumerate() {
            if BASELINES.contains(&r.candidate.as_str()) {
                continue;
            }
            if r.backend != plan.backend {
                return Err(bad(&rows_path, line, format!("backend {} in a {} corpus", r.backend, plan.backend)));
            }
            let format = r
                .source_format
                .ok_or_else(|| bad(&rows_path, line, "a candidate row without a source format".into()))?;
            let measured = Measured { median_us: r.median_us, eligible: r.eligible };
            let record = Record { replays: r.replays, dropped: r.dropped, samples: r.samples, bpp: r.bpp };
            let key = RowKey { format, mode: r.mode, m: r.m, n: r.n, k: r.k };
            grouped_rows.entry(key).or_default().insert(r.candidate, (measured, record));
        }
        for (key, rows) in grouped_rows {
            let RowKey { format, mode, m, n, k } = key;
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
            // The record each candidate is read as: its own, or its fullest launch twin's.
            let source: Vec<usize> = match twins {
                Twins::Pooled if surface == Surface::Decode => twin_sources(list, &rows),
                _ => (0..list.len()).collect(),
            };
            let record_of = |i: usize| rows.get(&list[source[i]].id);
            let entries: Vec<Option<Measured>> = (0..list.len()).map(|i| record_of(i).map(|r| r.0)).collect();
            let best_us = best_median(&entries);
            let stalled_of = |i: usize| {
                record_of(i).is_some_and(|(m, r)| {
                    let first = fastest.get(&(key, source[i])).copied().unwrap_or(f64::INFINITY);
                    m.eligible && suspect.stalled(m.median_us, *r, first, best_us)
                })
            };
            let stalled: Vec<bool> = (0..list.len()).map(stalled_of).collect();
            // Replicates of the records read once (a twin read as another adds no evidence).
            let per_pass: Vec<&BTreeMap<usize, Vec<f64>>> = (0..list.len())
                .zip(&entries)
                .filter(|(c, e)| source[*c] == *c && e.is_some_and(|e| e.eligible))
                .filter_map(|(c, _)| samples.get(&(key, c)))
                .collect();
            let replicates = crate::noise::cell_replicates(&per_pass);
            // the confidence bounds pool every pass
            let mut pooled: Vec<Option<Vec<f64>>> = Vec::with_capacity(list.len());
            for ((i, c), e) in list.iter().enumerate().zip(&entries) {
                pooled.push(match e {
                    Some(e) if e.eligible => {
                        let passes = samples.get(&(key, source[i])).ok_or_else(|| FitError::Corpus {
                            path: samples_path.clone(),
                            message: format!("no samples for {format} {mode} M={m} {n}x{k} {}", c.id),
                        })?;
                        Some(passes.values().flatten().copied().collect())
                    }
                    _ => None,
                });
            }
            let cell_samples: Vec<Option<&[f64]>> = pooled.iter().map(Option::as_deref).collect();
            cells.push(Cell {
                format,
                codebook: format.codebook(),
                mode,
                m: m as u64,
                n: n as u64,
                k: k as u64,
                sealed,
                best_us,
                regret: regrets(&entries),
                ucb: cell_ucb(&cell_samples, ALPHA),
                replicates,
                band: 0.0,
                stalled,
            });
        }
    }
    let resources_path = dir.join("resources.csv");
    let mut resources = BTreeMap::new();
    if resources_path.is_file() {
        for r in read_resources(&resources_path)? {
            resources
                .insert(r.kernel, KernelResources { registers: r.registers, shared_static: r.shared_static_bytes });
        }
    }
    let mut corpus =
        Corpus { dir: dir.into(), manifest, plan, backend, decode, grouped, cells, resources, bands: BTreeMap::new() };
    crate::noise::apply_pass_bands(&mut corpus);
    Ok(corpus)
}

/// What a row says of how its candidate was timed.
#[derive(Debug, Clone, Copy)]
struct Record {
    replays: usize,
    dropped: bool,
    /// Samples the record's median is of.
    samples: usize,
    bpp: usize,
}

/// For each candidate of `list`, the index of the record it is read as under
/// [`Twins::Pooled`]: of its eligible launch twins at the cell (same launch, same bpp), the one
/// with the most samples; itself where none has more (equally full records stay their own),
/// else the first such twin in registry order.
fn twin_sources(list: &[Candidate], rows: &BTreeMap<CandidateId, (Measured, Record)>) -> Vec<usize> {
    // Each candidate's eligible record, looked up once for the cell.
    let records: Vec<Option<Record>> =
        list.iter().map(|c| rows.get(&c.id).filter(|(m, _)| m.eligible).map(|(_, r)| *r)).collect();
    (0..list.len())
        .map(|i| {
            let Some(own) = records[i] else { return i };
            let mut best = (own.samples, i);
            for (j, (c, r)) in list.iter().zip(&records).enumerate() {
                if let Some(r) = r {
                    if r.bpp == own.bpp && r.samples > best.0 && c.same_launch_as(&list[i]) {
                        best = (r.samples, j);
                    }
                }
            }
            best.1
        })
        .collect()
}

/// When a candidate's record is suspect, from what the row and its own launches say: its
/// samples lasted under half the protocol's shortest sample (`replays x median`; calibration
/// stalled, so each sample paid fixed costs the others shared: one replay where its cell's
/// others had 16-24, recorded 1.6-2.1x slow), or racing dropped it although one of its
/// first-pass launches, warmups included, came within the tightest optimistic ratio of the
/// cell's best (today's racing bounds a drop by every launch; it bounded by the sample rounds
/// alone when `core`'s corpus of 2026-12-04 was timed, whose worst leave-one-family-out picks
/// were such rows). Either way only a new measurement can say what the candidate runs at.
#[derive(Debug, Clone, Copy)]
struct Suspect {
    /// Half the protocol's shortest sample (us).
    short_us: f64,
    /// Racing's tightest optimistic ratio.
    ratio: f64,
}

impl Suspect {
    /// The thresholds of the default protocol, read once per corpus.
    fn of_protocol() -> Suspect {
        use vnni_measure::protocol::{Protocol, RaceBound, RACE};
        let fastest = RACE.iter().filter(|s| s.bound == RaceBound::Fastest);
        Suspect {
            short_us: Protocol::default().min_sample_us / 2.0,
            ratio: fastest.map(|s| s.ratio).fold(f64::INFINITY, f64::min),
        }
    }

    fn stalled(&self, median_us: f64, r: Record, fastest_launch: f64, best_us: f64) -> bool {
        let short = (r.replays as f64) * median_us < self.short_us;
        let close = fastest_launch <= self.ratio * best_us && median_us > self.ratio * best_us;
        short || (r.dropped && close)
    }
}

/// The runtime key of a group of rows: (source format, mode, M, N, K). Ordered by the
/// source format's *name*, then mode, M, N, K: the order of the string keys the learner used
/// before the vocabulary was typed, which the cell order (and so every committed policy's
/// bytes) depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct RowKey {
    format: SourceFormat,
    mode: Mode,
    m: usize,
    n: usize,
    k: usize,
}

impl RowKey {
    fn order(&self) -> (&'static str, Mode, usize, usize, usize) {
        (self.format.name(), self.mode, self.m, self.n, self.k)
    }
}

impl Ord for RowKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order().cmp(&other.order())
    }
}

impl PartialOrd for RowKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use vnni_kernels::registry::{candidates_in, Backend, Surface, GENERATION};

    use super::{twin_sources, Record, Suspect};
    use crate::regret::Measured;

    /// A record is suspect when its samples were too short for the protocol (a stalled
    /// calibration) or racing dropped it although one of its own launches ran close to the
    /// cell's best; an honest drop and an honest short kernel are not.
    #[test]
    fn suspect_records() {
        let stalled = |median, r, fastest, best| Suspect::of_protocol().stalled(median, r, fastest, best);
        let record = |replays, dropped| Record { replays, dropped, samples: 12, bpp: 4 };
        let (kept, dropped) = (record(24, false), record(14, true));
        // 24 launches of 5 us: 120 us a sample, honest
        assert!(!stalled(5.0, kept, 5.0, 5.0));
        // one launch of 10.6 us a sample where the protocol's shortest is 100 us
        assert!(stalled(10.6, record(1, true), 10.6, 5.0));
        // dropped at 35.6 us with a warmup at 16.6 us, the cell's best at 16.5 us
        assert!(stalled(35.6, dropped, 16.6, 16.5));
        // dropped, every launch slow: honest
        assert!(!stalled(35.6, dropped, 30.0, 16.5));
        // dropped but recorded within the ratio already: nothing a pair would change much
        assert!(!stalled(17.5, dropped, 16.6, 16.5));
    }

    /// A record racing cut short is read as its launch twin's fullest; equally full twins,
    /// other bpps and other kernels keep their own records.
    #[test]
    fn cut_short_records_read_as_their_fullest_launch_twin() {
        let list = candidates_in(Backend::Cuda, Surface::Decode, GENERATION);
        let at = |id: &str| list.iter().position(|c| c.id.as_str() == id).unwrap_or_else(|| panic!("{id}"));
        let row = |median_us, samples, bpp| {
            (Measured { median_us, eligible: true }, Record { replays: 8, dropped: samples < 12, samples, bpp })
        };
        let mut rows = BTreeMap::new();
        // one launch (14 blocks a partition) under three rules, one of them dropped on a stall
        rows.insert(list[at("decode.fused.c32.cap32")].id.clone(), row(10.0, 24, 14));
        rows.insert(list[at("decode.fused.c32.waves32")].id.clone(), row(21.6, 1, 14));
        rows.insert(list[at("decode.fused.c32.waves16")].id.clone(), row(10.1, 24, 14));
        // the same kernel at another bpp, and another kernel at this bpp
        rows.insert(list[at("decode.fused.c32.cap16")].id.clone(), row(12.0, 3, 28));
        rows.insert(list[at("decode.fused.c16.cap32")].id.clone(), row(30.0, 2, 14));
        let source = twin_sources(&list, &rows);
        assert_eq!(source[at("decode.fused.c32.waves32")], at("decode.fused.c32.cap32"));
        assert_eq!(source[at("decode.fused.c32.cap32")], at("decode.fused.c32.cap32"));
        assert_eq!(source[at("decode.fused.c32.waves16")], at("decode.fused.c32.waves16"));
        assert_eq!(source[at("decode.fused.c32.cap16")], at("decode.fused.c32.cap16"));
        assert_eq!(source[at("decode.fused.c16.cap32")], at("decode.fused.c16.cap32"));
        // a candidate without a row reads nothing
        assert_eq!(source[at("decode.fused.c16.waves64")], at("decode.fused.c16.waves64"));
    }
}
