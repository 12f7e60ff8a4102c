//! Sealed synthetic corpora from a known cost model with noise, in the real corpus format
//! (plan.json, the four phases' rows and zstd sample sidecars, corpus.manifest.json), so the
//! learner can be tested end to end where the right answers are known. The model follows each
//! candidate's real launch plan from the registry: CTAs (tasks) over `units` slots in waves,
//! work per task from tile x bpp, a reduce for K partitions, a launch cost per mode. Only the
//! latencies are invented: rows, samples, phases and the seal come from the code the sweep
//! runs (`vnni_measure::rows`, `phase_stem`, `CollectionPlan::seal_inputs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use vnni_corpus::collection::{phase_stem, CollectionPlan, COLLECTION_SCHEMA, PHASES, PLAN_FILE};
use vnni_corpus::inventory::{InventoryPlan, Partition, PlanShape};
use vnni_corpus::seal::{seal, Manifest};
use vnni_corpus::{write_bytes, write_csv, ResourceRow, SampleRow, TimingRow};
use vnni_kernels::fixture::{derive_seed, splitmix64};
use vnni_kernels::registry::{self, Candidate, Family};
use vnni_kernels::{Backend, CandidateId, Mode, SourceFormat, Surface};
use vnni_measure::cell::CellResult;
use vnni_measure::protocol::{replays_for, Protocol, Sample, Timed};
use vnni_measure::rows::{mode_rows, CellContext, Checked, ModeTimings};

/// What to generate.
#[derive(Debug, Clone)]
pub struct Spec {
    pub backend: Backend,
    pub units: u32,
    pub ns: Vec<usize>,
    pub ks: Vec<usize>,
    pub formats: Vec<SourceFormat>,
    /// Including 1.
    pub ms: Vec<usize>,
    pub modes: Vec<Mode>,
    pub samples: usize,
    /// Timing passes: every pass after the first adds its own lognormal shift (sigma
    /// `noise`) to all of a candidate's samples, the run-to-run part of real noise.
    pub passes: usize,
    /// Lognormal sigma of the per-sample noise.
    pub noise: f64,
    /// Every `sealed_every`-th geometry (in (N, K) order) is sealed; 0: none.
    pub sealed_every: usize,
    pub overlay: Vec<(usize, usize)>,
    /// (format, candidate): that candidate is the fastest in every cell of the format but
    /// produces wrong bits (ineligible).
    pub wrong_bits: Option<(SourceFormat, CandidateId)>,
    /// (candidate, N, K): that candidate is made the clear winner at that geometry.
    pub boost: Option<(CandidateId, usize, usize)>,
    /// Shapes are named into this many model families (`family0.NxK`, ..., dealt by N);
    /// 0: every shape is `synthetic.NxK`.
    pub families: usize,
    /// CUDA: write a preflight `resources.csv` (every decode kernel at this many registers,
    /// no static shared memory), so the learner fits cost models for the decode domains.
    pub registers: Option<u32>,
    pub seed: u64,
}

impl Spec {
    /// A small CPU corpus: N 256..32768 and K 256..16384 in half octaves (15 x 13
    /// geometries), four formats (u4 has two aliases), M 1, 2, 4, 8.
    pub fn cpu(seed: u64) -> Spec {
        Spec {
            backend: Backend::Cpu,
            units: 8,
            ns: half_octaves(256, 32768),
            ks: half_octaves(256, 16384),
            formats: vec![SourceFormat::Q4_0, SourceFormat::Q4_1, SourceFormat::Q4_K, SourceFormat::Q8_0],
            ms: vec![1, 2, 4, 8],
            modes: vec![Mode::Eager],
            samples: 15,
            passes: 1,
            noise: 0.01,
            sealed_every: 5,
            overlay: vec![(4096, 4096), (1024, 8192)],
            wrong_bits: None,
            boost: None,
            families: 0,
            registers: None,
            seed,
        }
    }

    /// A larger CUDA corpus (49 decode and 5 grouped candidates, two modes, 132 SMs).
    pub fn cuda(seed: u64) -> Spec {
        Spec {
            backend: Backend::Cuda,
            units: 132,
            ns: half_octaves(256, 131072),
            ks: half_octaves(256, 32768),
            modes: vec![Mode::Eager, Mode::Graph],
            ms: vec![1, 2, 4, 8, 16],
            ..Spec::cpu(seed)
        }
    }

    /// The formats a shape of inner dimension `k` is timed in (K a whole number of blocks).
    fn formats_at(&self, k: usize) -> BTreeSet<SourceFormat> {
        self.formats.iter().copied().filter(|f| k % f.block_elems() == 0).collect()
    }

    /// Cells (a source format and a shape, every mode and M) the corpus holds.
    pub fn cells(&self) -> usize {
        self.ns.len() * self.ks.iter().map(|&k| self.formats_at(k).len()).sum::<usize>()
    }

    fn geometries(&self) -> Vec<(usize, usize, Partition)> {
        let mut g: Vec<(usize, usize)> = self.ns.iter().flat_map(|&n| self.ks.iter().map(move |&k| (n, k))).collect();
        g.sort();
        g.into_iter()
            .enumerate()
            .map(|(i, (n, k))| {
                let sealed = self.sealed_every > 0 && i % self.sealed_every == self.sealed_every - 1;
                (n, k, if sealed { Partition::Sealed } else { Partition::Development })
            })
            .collect()
    }
}

/// lo, 1.5 lo, 2 lo, 3 lo, ... up to hi (lo a power of two, multiples of 256 stay multiples of 128).
pub fn half_octaves(lo: usize, hi: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut p = lo;
    while p <= hi {
        out.push(p);
        if p + p / 2 <= hi && p >= 256 {
            out.push(p + p / 2);
        }
        p *= 2;
    }
    out
}

/// Seconds-free latency model in microseconds of `c` on (M, N, K) at `bpp` (batched
/// surfaces); `None` where the candidate is illegal.
pub fn latency(
    spec: &Spec,
    c: &Candidate,
    format: SourceFormat,
    mode: Mode,
    (m, n, k): (usize, usize, usize),
    bpp: usize,
) -> Option<f64> {
    let slots = match spec.backend {
        Backend::Cuda => spec.units as usize * 4,
        Backend::Cpu => spec.units as usize,
    };
    let plan = match c.surface {
        Surface::Decode => c.plan(n, k, spec.units)?,
        Surface::Grouped | Surface::Prefill => c.plan_batched(format.codebook(), n, k, m, bpp)?,
    };
    let per_unit = 0.004 * format.codebook().payload_bytes() as f64 / 16.0;
    let efficiency = match (c.family, c.cpt) {
        (Family::Direct, _) => 1.05,
        (_, 2) => 0.92,
        (_, 4) => 0.96,
        _ => 1.0,
    };
    let rows_factor = match c.surface {
        Surface::Decode => 1.0,
        Surface::Grouped if c.family == Family::Mma16 => 0.5 + 0.05 * m as f64,
        Surface::Grouped => 0.6 + 0.4 * m.min(c.rows as usize) as f64,
        Surface::Prefill => 0.5 + 0.01 * m as f64,
    };
    // The second alias of a codebook (e.g. Q4_K beside Q4_1) runs the wide family 4% slower.
    let alias = if c.family == Family::Wide && SourceFormat::aliases_of(format.codebook()).first() != Some(&format) {
        1.04
    } else {
        1.0
    };
    let tasks = plan.grid.0 as usize * plan.grid.1 as usize * plan.z as usize;
    let waves = tasks.div_ceil(slots) as f64;
    let body = match spec.backend {
        // CPU: tasks run whole on worker threads, in waves.
        Backend::Cpu => waves * (c.tile as f64 * plan.bpp as f64 * per_unit * efficiency * rows_factor + 0.05) * alias,
        // CUDA: bandwidth-bound streaming of every weight, slowed by idle SMs (too few threads)
        // and by the last partial wave.
        Backend::Cuda => {
            let threads = (tasks * plan.threads as usize) as f64;
            let fill = (threads / (spec.units as f64 * 1024.0)).min(1.0);
            let tail = tasks as f64 / (waves * slots as f64);
            let stream = (n * (k / 32)) as f64 * per_unit * 0.01 * efficiency * rows_factor * alias;
            stream / (fill * tail).max(0.02)
        }
    };
    let reduce = match (plan.kb > 1, c.family) {
        (false, _) => 0.0,
        (true, Family::FusedKpar) => 0.2 + (n * plan.kb) as f64 * 2e-6,
        (true, _) => 1.0 + (n * plan.kb * m) as f64 * 1e-5,
    };
    let launch = if mode == Mode::Graph { 0.5 } else { 2.0 };
    let boost = match &spec.boost {
        Some((id, bn, bk)) if id == &c.id && (*bn, *bk) == (n, k) => 0.5,
        _ => 1.0,
    };
    Some((launch + body + reduce) * boost)
}

/// One preflight row per decode kernel of every codebook of the spec's formats.
fn resource_rows(spec: &Spec, decode: &[Candidate], registers: u32) -> Vec<ResourceRow> {
    let codebooks: BTreeSet<vnni_kernels::Codebook> = spec.formats.iter().map(|f| f.codebook()).collect();
    let mut rows: BTreeMap<String, ResourceRow> = BTreeMap::new();
    for &codebook in &codebooks {
        for c in decode {
            let kernel = c.kernel(codebook).symbol();
            let row = rows.entry(kernel.clone()).or_insert_with(|| ResourceRow {
                arch: "synthetic".into(),
                kernel,
                codebook,
                threads: 1024,
                registers,
                stack_bytes: 0,
                spill_store_bytes: 0,
                spill_load_bytes: 0,
                shared_static_bytes: 0,
                device_local_bytes: None,
                device_max_threads: None,
                device_occupancy_blocks_per_sm: None,
                verdict: "ok".into(),
                candidates: String::new(),
            });
            if !row.candidates.is_empty() {
                row.candidates.push(';');
            }
            row.candidates.push_str(c.id.as_str());
        }
    }
    rows.into_values().collect()
}

/// A standard normal from two counter-based uniforms (Box-Muller).
fn normal(seed: u64, i: u64) -> f64 {
    let u = |j: u64| ((splitmix64(seed, 2 * i + j) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    (-2.0 * u(0).ln()).sqrt() * (std::f64::consts::TAU * u(1)).cos()
}

/// The synthetic machine's copy bandwidth (GB/s), the roofline of `pct_copy_bw`.
const COPY_GBPS: f64 = 1000.0;

/// Time one cell of candidates the way the sweep reports it (racing drops those slower than
/// 1.3x the leader after a third of the samples): invented samples, the sweep's rows.
fn cell(
    spec: &Spec,
    list: &[Candidate],
    format: SourceFormat,
    mode: Mode,
    shape: (usize, usize, usize),
    m1: Option<(&CandidateId, usize)>,
) -> CellResult {
    let (m, n, k) = shape;
    let bpp = m1.map_or(0, |x| x.1);
    let truth: Vec<Option<f64>> = list.iter().map(|c| latency(spec, c, format, mode, (m, n, k), bpp)).collect();
    let wrong = |c: &Candidate| spec.wrong_bits.as_ref().is_some_and(|(f, id)| *f == format && *id == c.id);
    let leader = truth.iter().flatten().copied().fold(f64::INFINITY, f64::min);
    let mut runs = Vec::new();
    let mut timed = Vec::new();
    for (c, t) in list.iter().zip(&truth) {
        let Some(mut t) = *t else { continue };
        if wrong(c) {
            t = leader * 0.5;
        }
        let dropped = t > 1.3 * leader;
        let count = if dropped { (spec.samples / 3).max(3) } else { spec.samples };
        let seed = derive_seed(spec.seed, &format!("{format} {mode} {m} {n} {k} {}", c.id));
        // Per pass, a cold warmup sample the learner must ignore, then the measured ones;
        // racing drops a candidate in the first pass.
        let mut samples = Vec::new();
        for pass in 0..if dropped { 1 } else { spec.passes.max(1) } {
            let (seed, shift) = match pass {
                0 => (seed, 1.0),
                p => {
                    let s = derive_seed(seed, &format!("pass {p}"));
                    (s, (spec.noise * normal(s, 1 << 40)).exp())
                }
            };
            samples.push(Sample { pass, round: 0, order: 0, warmup: true, latency_us: t * 3.0 });
            samples.extend((0..count as u64).map(|i| Sample {
                pass,
                round: i as usize + 1,
                order: 0,
                warmup: false,
                latency_us: t * shift * (spec.noise * normal(seed, i)).exp(),
            }));
        }
        let bpp = match c.surface {
            Surface::Decode => c.plan(n, k, spec.units).map_or(0, |p| p.bpp),
            Surface::Grouped | Surface::Prefill => bpp,
        };
        let bad = wrong(c);
        runs.push(Checked {
            id: c.id.clone(),
            bpp,
            mismatches: usize::from(bad),
            first_mismatch: if bad { "row 0 col 0: synthetic".into() } else { String::new() },
            registers: 0,
            occupancy: 0,
        });
        // calibrated as a real protocol would (a record's samples last the protocol's shortest)
        let replays = replays_for(Protocol::default().min_sample_us, t);
        timed.push(Timed { replays, samples, dropped });
    }
    let ctx = CellContext {
        backend: spec.backend,
        arch: "synthetic",
        device: "synthetic",
        format,
        m,
        n,
        k,
        m1_candidate: m1.map(|x| x.0),
        weight_bytes: n * k / 32 * format.codebook().payload_bytes(),
        weight_copies: 1,
        checked: n,
        copy_gbps: COPY_GBPS,
    };
    let eligible: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].mismatches == 0).collect();
    let timed: Vec<Timed> = eligible.iter().map(|&i| timed[i].clone()).collect();
    let protocol =
        Protocol { warmups: 1, samples: spec.samples, passes: spec.passes, seed: spec.seed, ..Protocol::default() };
    let mut out = CellResult::default();
    mode_rows(
        &ctx,
        &ModeTimings { mode, protocol: &protocol, runs: &runs, eligible: &eligible, timed: &timed },
        &mut out,
    );
    out
}

/// Write and seal a synthetic corpus into `dir` (created; must not hold another corpus).
pub fn write(dir: &Path, spec: &Spec) -> Result<Manifest, String> {
    let decode = registry::candidates(spec.backend, Surface::Decode);
    let grouped = registry::candidates(spec.backend, Surface::Grouped);
    let geometries = spec.geometries();
    let overlay: BTreeSet<(usize, usize)> = spec.overlay.iter().copied().collect();
    let shapes: Vec<PlanShape> = geometries
        .iter()
        .map(|&(n, k, partition)| PlanShape {
            n,
            k,
            partition,
            exact_overlay: overlay.contains(&(n, k)),
            formats: spec.formats_at(k),
            names: vec![match spec.families {
                0 => format!("synthetic.{n}x{k}"),
                f => format!("family{}.{n}x{k}", n.trailing_zeros() as usize % f),
            }],
        })
        .collect();
    let inventory = InventoryPlan {
        profile: "synthetic".into(),
        m: spec.ms.clone(),
        modes: spec.modes.clone(),
        warmups: 1,
        samples: spec.samples,
        passes: spec.passes.max(1),
        shapes,
        proxy: false,
    };
    let plan = CollectionPlan {
        schema: COLLECTION_SCHEMA.into(),
        backend: spec.backend,
        arch: "synthetic".into(),
        device: "synthetic".into(),
        driver: "-".into(),
        nvrtc: "-".into(),
        units: spec.units,
        registry_digest: registry::registry_digest_for(&spec.ms),
        kernel_source_digest: "-".into(),
        version: "synthetic".into(),
        git_commit: "-".into(),
        git_dirty: false,
        inventory_digest: inventory.digest(),
        inventory_sources: Vec::new(),
        modes: spec.modes.clone(),
        inventory,
        frozen_m1: None,
        m1_only: false,
        whole_rotations: false,
        programmatic: false,
        l2_prefetch: None,
        learned_buckets: None,
        pruning: None,
    };
    let mut phases: BTreeMap<String, CellResult> =
        PHASES.iter().map(|p| (p.to_string(), CellResult::default())).collect();
    for shape in &plan.inventory.shapes {
        let (n, k) = (shape.n, shape.k);
        for &format in &shape.formats {
            for &mode in &spec.modes {
                let decode_cell = cell(spec, &decode, format, mode, (1, n, k), None);
                // Grouped rows inherit the bpp of the fastest generic decode candidate.
                let m1 = decode_cell
                    .rows
                    .iter()
                    .filter(|r| r.eligible && registry::find(&r.candidate).is_some_and(|c| c.generic_legal()))
                    .min_by(|a, b| a.median_us.total_cmp(&b.median_us))
                    .map(|r| (r.candidate.clone(), r.bpp))
                    .expect("generic candidates are legal everywhere");
                let mut push = |m: usize, c: CellResult| {
                    let phase = phases.get_mut(&phase_stem(m, shape.partition)).expect("decode and grouped phases");
                    phase.rows.extend(c.rows);
                    phase.samples.extend(c.samples);
                };
                push(1, decode_cell);
                for &m in spec.ms.iter().filter(|&&m| m >= 2) {
                    push(m, cell(spec, &grouped, format, mode, (m, n, k), Some((&m1.0, m1.1))));
                }
            }
        }
    }
    let err = |e: vnni_corpus::WriteError| e.to_string();
    if let (Some(registers), Backend::Cuda) = (spec.registers, spec.backend) {
        write_csv::<ResourceRow>(&dir.join("resources.csv"), &resource_rows(spec, &decode, registers)).map_err(err)?;
    }
    for (phase, c) in &phases {
        write_csv::<TimingRow>(&dir.join(format!("{phase}.csv")), &c.rows).map_err(err)?;
        write_csv::<SampleRow>(&dir.join(format!("{phase}.timing.csv.zst")), &c.samples).map_err(err)?;
    }
    write_bytes(&dir.join(PLAN_FILE), &plan.to_bytes()).map_err(err)?;
    seal(dir, &plan.seal_inputs()).map_err(|e| e.to_string())
}
