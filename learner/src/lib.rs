//! vnni-learner: fit a dispatch policy (the `vnni-policy` IR) from an authenticated corpus.
//!
//! - [`corpus`]: verify the seal, read alias cells (regret, confidence bounds).
//! - [`regret`]: regret, the minimax over aliases and the 1% tie band.
//! - [`ucb`]: per-cell upper confidence bounds of regret from the raw samples.
//! - [`domains`]: M buckets, aspect buckets, runtime keys per domain.
//! - [`features`], [`cart`], [`tree`]: a deterministic CART per domain over integer features, canonical splits, relabelling.
//! - [`cost_model`], [`distill`], [`regret_tree`]: CUDA decode domains instead carry
//!   per-candidate latency models (CTAs in waves at the kernel's occupancy, quantized as the
//!   policy stores them; their argmin answers) and a fallback tree grown on summed regret over
//!   a dense shape grid the models label, plus the measured rows.
//! - [`cv`]: grouped cross-validation over (N, K) geometries; [`baselines`] beside it;
//!   [`family_cv`] leave-one-family-out regret of the decode trees, of the cost models'
//!   own argmin (the gap is what distillation into trees loses) and of the baselines,
//!   optionally nested (reported, not gated).
//! - [`borrow`], [`overlays`]: domains without data, exact-shape overlays.
//! - [`frozen`]: the frozen M = 1 stage of a staged fit (its M = 1 part copied, checked against
//!   the digest the corpus's plan binds).
//! - [`sealed`], [`ledger`]: the one sealed certification and its ledger.
//! - [`regret_stats`]: p95, geomean and means of regret over rows (percentiles from `vnni_measure::stats`).
//! - [`report`], [`map`]: the fit report (Markdown, decision maps as PNG and SVG).
//! - [`corpus_report`]: bandwidth vs the copy roofline, regret CDFs and maps of a corpus; [`chart`] draws every image (PNG and SVG).
//! - [`noise`]: noise bands, from pass replicates (scoring) and alias replicates (reported).
//! - [`throughput`]: how fast the corpus was collected, by weight size (corpus report).
//! - [`generic_floor`]: the best generic-legal candidate's regret per decode cell.
//! - [`in_sample`]: a given policy's regret on its own corpus; [`proxy`] the verdict of a workflow profile.
//! - [`synthetic`]: sealed synthetic corpora from a known cost model (tests, demos).

pub mod baselines;
pub mod borrow;
pub mod cart;
pub mod chart;
pub mod corpus;
pub mod corpus_report;
pub mod cost_model;
pub mod cv;
pub mod dense_m;
pub mod distill;
pub mod domains;
pub mod error;
pub mod family_cv;
pub mod features;
pub mod frozen;
pub mod generic_floor;
pub mod in_sample;
pub mod ledger;
pub mod map;
pub mod noise;
pub mod overlays;
pub mod pairs;
pub mod proxy;
pub mod regret;
pub mod regret_stats;
pub mod regret_tree;
pub mod remeasure;
pub mod report;
pub mod sealed;
pub mod synthetic;
pub mod throughput;
pub mod tree;
pub mod ucb;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use vnni_kernels::registry;
use vnni_policy::{Domain, DomainStats, Node, Policy, Surface};

pub use error::{FitError, Result};

use crate::cv::{Folds, Heldout};
use crate::domains::DomainKey;
use crate::regret_stats::Summary;
use crate::tree::Trainer;

#[derive(Debug, Clone)]
pub struct FitOptions {
    /// A domain passes when its held-out nearest-rank p95 regret is below this ...
    pub p95_max: f64,
    /// ... and the p95 of its per-cell regret upper confidence bounds is below this.
    pub ucb_max: f64,
    /// The fraction of domains with data that must pass.
    pub min_pass: f64,
    /// The sealed-certification ledger; `None` records nothing and refuses nothing.
    pub ledger: Option<PathBuf>,
    pub folds: usize,
    /// Leave-one-family-out regret with hyperparameters chosen per left-out family on the
    /// other rows (nested; about 10x the folds' work, for reports) instead of the domain's.
    pub nested_family_cv: bool,
    /// The frozen M = 1 policy of a staged corpus: its M = 1 part is copied, the batched
    /// buckets fitted (required exactly when the corpus's plan binds one).
    pub frozen_m1: Option<Policy>,
    /// Threads fitting domains; `None`: one per core. The policy does not depend on it.
    pub threads: Option<usize>,
    /// Development cells timed again as pairs (the `samples.csv` of `bench --pairs`), applied
    /// before cross-validation (`pairs.rs`); the policy's provenance records the file's digest.
    pub pairs: Option<PathBuf>,
    /// Certify the sealed rows (and record the outcome in `ledger`); `false` for a development
    /// pass whose policy is thrown away (e.g. the one that lists the pairs to time again): the
    /// sealed rows are looked at once, by the fit that ships.
    pub certify_sealed: bool,
    /// Leave one family out of each decode domain's fit (report rows only: the policy does not
    /// depend on it, and it is about half of a fit's work); `false` where no report is read.
    pub family_cv: bool,
    /// How the decode domains' cost-model predictions are corrected by their residuals at
    /// the development shapes (`vnni_policy::correction`; the policy records the rule, so
    /// `verify` refits with it); `None`: the models' own predictions. A staged fit takes its
    /// frozen M = 1 policy's rule instead.
    pub correction: Option<vnni_policy::Correction>,
    /// How each development row weighs in its cost model's fit (`vnni_policy::Focus`; the
    /// policy records it, so `verify` refits with it); `None`: every row weighs 1. A staged fit
    /// takes its frozen M = 1 policy's instead.
    pub focus: Option<vnni_policy::Focus>,
    /// How launch twins' records are read (`corpus::Twins`; the policy records it, so `verify`
    /// refits alike). A staged fit reads its batched rows as its frozen M = 1 policy read its own.
    pub twins: corpus::Twins,
    /// Whether the graph-mode decode cost models carry the split-K reduce term
    /// (`vnni_policy::cost::Basis::reduce`; the policy records it, so `verify` refits alike). A
    /// staged fit takes its frozen M = 1 policy's.
    pub reduce_term: bool,
}

/// The correction a fit applies unless told otherwise: a Gaussian of 0.35 octave in
/// (log2 N, log2 K), strength 1/2, prior weight 1/2 (chosen by leave one family out on the
/// development rows of the committed corpora, docs/PERF.md).
pub fn default_correction() -> Option<vnni_policy::Correction> {
    let (h, lambda, prior) = DEFAULT_CORRECTION;
    Some(vnni_policy::Correction::gaussian(h, lambda, prior))
}

/// [`default_correction`]'s bandwidth (octaves), strength and prior weight.
pub const DEFAULT_CORRECTION: (f64, f64, f64) = (0.35, 0.5, 0.5);

impl FitOptions {
    /// These options with the fitting rules `policy` records (its correction, row weighting
    /// and reading of launch twins), so a refit of it, or a report of its held-out rows, fits
    /// as it was fitted.
    pub fn with_rules_of(self, policy: &Policy) -> FitOptions {
        let twins = corpus::Twins::of(policy);
        FitOptions {
            correction: policy.correction.clone(),
            focus: policy.provenance.focus,
            twins,
            reduce_term: policy.provenance.reduce_term,
            ..self
        }
    }
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            p95_max: 0.05,
            ucb_max: 0.05,
            min_pass: 0.99,
            ledger: None,
            folds: cv::FOLDS,
            nested_family_cv: false,
            frozen_m1: None,
            threads: None,
            pairs: None,
            certify_sealed: true,
            family_cv: true,
            correction: default_correction(),
            // Off: on fresh family set 14 (H200, one look) `--focus scale=0.15,floor=0.05` lowered
            // geomean and p95 regret but raised the maximum past the 10% target, which the
            // unweighted fit met (docs/PERF.md).
            focus: None,
            twins: corpus::Twins::Pooled,
            // Off: on fresh family set 16 (H100, one look) it tied on `core-ragged` and lost on
            // `core` (max 10.1% -> 16.0%), though leave one family out on the development rows
            // had lowered `core-ragged`'s maximum 65% -> 28%; shape-held-out CV failed more
            // domains' gates with it (`core-ragged` 10 -> 8 of 14, H200 `core` 3 -> 1 of 28;
            // docs/PERF.md). Eager models never carry it: there it raised every corpus's regret.
            reduce_term: false,
        }
    }
}

/// How one domain was fitted, for the report.
#[derive(Debug, Clone)]
pub struct DomainFit {
    pub key: DomainKey,
    /// Decode domains: per model family, the regrets of its cells when left out of the fit.
    pub family_heldout: BTreeMap<String, family_cv::FamilyRegrets>,
    /// Cross-validation outcome (domains with data).
    pub heldout: Option<Heldout>,
    /// Held-out cells of a domain failing its gate, as pairs to time again (`remeasure.rs`).
    pub remeasure: Vec<vnni_corpus::schema::PairRequest>,
    /// The domain whose tree was borrowed, or `None` with `heldout` `None`: the single-leaf fallback.
    pub borrowed_from: Option<DomainKey>,
    /// CUDA decode domains with cost models: how many models (per candidate and size regime) and the
    /// in-sample |predicted / measured - 1| of every modelled candidate on every development cell.
    pub model_errors: Option<(usize, Vec<f64>)>,
    /// Copied from the frozen M = 1 policy of a staged fit, not fitted here.
    pub frozen: bool,
}

impl DomainFit {
    /// A decode domain copied from the frozen M = 1 policy.
    fn frozen(key: DomainKey) -> DomainFit {
        DomainFit {
            key,
            family_heldout: BTreeMap::new(),
            heldout: None,
            remeasure: Vec::new(),
            borrowed_from: None,
            model_errors: None,
            frozen: true,
        }
    }

    pub fn summaries(&self) -> Option<[Summary; cv::METHOD_COUNT]> {
        self.heldout.as_ref().map(|h| std::array::from_fn(|m| h.summary(m)))
    }
}

#[derive(Debug, Clone)]
pub struct Fit {
    pub policy: Policy,
    pub domains: Vec<DomainFit>,
    pub corpus_dir: PathBuf,
    /// Development geometries (decision maps mark them).
    pub geometries: Vec<(u64, u64)>,
    /// Whether the leave-one-family-out rows chose their hyperparameters nested.
    pub nested_family_cv: bool,
    /// Timing passes per cell, and the noise band of each domain from their replicates.
    pub passes: usize,
    pub bands: BTreeMap<(DomainKey, u32), noise::Band>,
}

/// The registry surface serving an M bucket.
fn registry_surface(s: Surface) -> registry::Surface {
    match s {
        Surface::Decode => registry::Surface::Decode,
        _ => registry::Surface::Grouped,
    }
}

fn trainer<'a>(corpus: &'a corpus::Corpus, skeleton: &'a Policy, bucket: usize, widths: &[u64]) -> Trainer<'a> {
    Trainer::new(corpus, skeleton, registry_surface(skeleton.m_buckets[bucket].surface), widths.to_vec())
}

/// Fit a policy from the sealed corpus in `dir`.
pub fn fit(dir: &Path, opts: &FitOptions) -> Result<Fit> {
    if opts.pairs.is_some() && opts.frozen_m1.is_some() {
        return Err(FitError::Frozen {
            dir: dir.into(),
            message: "pairs change M = 1 cells, whose part a staged fit copies: fit the M = 1 stage with them".into(),
        });
    }
    // A staged fit reads its corpus as its frozen M = 1 policy read its own.
    let twins = opts.frozen_m1.as_ref().map_or(opts.twins, corpus::Twins::of);
    let mut corpus = corpus::load_with(dir, twins)?;
    let pairs = opts.pairs.as_deref().map(|p| pairs::apply(&mut corpus, p)).transpose()?;
    let corpus = corpus;
    let corpus_id = corpus.manifest.corpus_id.clone();
    if let Some(l) = &opts.ledger {
        ledger::refuse_failed(l, &corpus_id)?;
    }
    let mut policy = domains::skeleton(&corpus);
    let frozen = frozen::check(&corpus, &policy, opts.frozen_m1.as_ref())?;
    // Every trainer reads the rule from the skeleton; a staged fit keeps its frozen M = 1 part's.
    (policy.correction, policy.provenance.focus, policy.provenance.reduce_term) = match &opts.frozen_m1 {
        Some(m1) => (m1.correction.clone(), m1.provenance.focus, m1.provenance.reduce_term),
        None => (opts.correction.clone(), opts.focus, opts.reduce_term),
    };
    policy.provenance.twins_pooled = twins == corpus::Twins::Pooled;
    policy.provenance.pairs = pairs.map(|a| vnni_policy::PairEvidence { sha256: a.sha256, cells: a.cells });
    let is_frozen = |p: &Policy, bucket: usize| frozen.is_some() && p.is_decode_bucket(bucket);
    let dev = domains::samples(&corpus, &policy, false);
    let sealed = domains::samples(&corpus, &policy, true);
    let geometries: BTreeSet<(u64, u64)> = dev.values().flatten().map(|s| s.geometry()).collect();
    let folds = Folds::new(geometries.iter().copied(), opts.folds.max(2));
    let widths = features::tile_widths(&corpus);
    let surface_of = |bucket: usize| policy.m_buckets[bucket].surface;

    let families = family_cv::families(&corpus);
    // Domains are fitted independently, on as many threads as the machine has; each result is
    // keyed by its domain, so the policy does not depend on the thread count or the schedule.
    let todo: Vec<(&DomainKey, &Vec<domains::Sample>)> =
        dev.iter().filter(|(key, _)| !is_frozen(&policy, key.bucket)).collect();
    let fit_domain = |key: &DomainKey, samples: &Vec<domains::Sample>| -> Result<DomainResult> {
        let t = trainer(&corpus, &policy, key.bucket, &widths);
        let tree_err = |message: String| FitError::Tree { domain: key.to_string(), message };
        let heldout = cv::cross_validate(&t, samples, &folds).map_err(tree_err)?;
        let all: Vec<&domains::Sample> = samples.iter().collect();
        let fit = t.fit(&all, heldout.hyper).map_err(tree_err)?;
        let model_errors = fit.models.as_ref().map(|m| (m.len(), m.relative_errors(&t, samples)));
        let lofo = if opts.family_cv && key.aspect.is_some() {
            let choice = if opts.nested_family_cv {
                family_cv::HyperChoice::Nested(&folds)
            } else {
                family_cv::HyperChoice::Domain(heldout.hyper)
            };
            Some(family_cv::leave_one_family_out(&t, samples, choice, &families).map_err(tree_err)?)
        } else {
            None
        };
        let s = heldout.summary(0);
        let stats = DomainStats {
            rows: s.rows,
            p95_regret: s.p95_regret,
            ucb_p95_regret: s.ucb_p95_regret,
            geomean_regret: s.geomean_regret,
            passed: s.p95_regret < opts.p95_max && s.ucb_p95_regret < opts.ucb_max,
        };
        let models = fit.policy_models();
        let anchors = fit.policy_anchors();
        let mut remeasure =
            if stats.passed { Vec::new() } else { remeasure::failing(&t, &heldout, opts.p95_max, opts.ucb_max) };
        remeasure.extend(remeasure::stalled(&t, samples));
        Ok(DomainResult { tree: fit.tree, models, anchors, stats, heldout, model_errors, lofo, remeasure })
    };
    let threads = opts
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(todo.len())
        .max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<BTreeMap<usize, Result<DomainResult>>> = Default::default();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((key, samples)) = todo.get(i) else { break };
                let r = fit_domain(key, samples);
                results.lock().expect("a fitting thread panicked").insert(i, r);
            });
        }
    });
    let mut fitted: BTreeMap<DomainKey, DomainResult> = BTreeMap::new();
    for (i, r) in results.into_inner().expect("a fitting thread panicked") {
        fitted.insert(todo[i].0.clone(), r?);
    }

    let mut out_domains = Vec::new();
    let mut reports = Vec::new();
    for key in domains::all_domains(&policy) {
        if let (Some((fp, _)), true) = (&frozen, is_frozen(&policy, key.bucket)) {
            let d = frozen::domain(fp, &key).ok_or_else(|| FitError::Frozen {
                dir: dir.into(),
                message: format!("the frozen M = 1 policy has no domain {key}"),
            })?;
            out_domains.push(d);
            reports.push(DomainFit::frozen(key));
            continue;
        }
        // A borrowed domain is of the same codebook and mode, so its models' kernel
        // resources hold here too.
        let (tree, (models, anchors), stats, heldout, borrowed_from) = match fitted.get(&key) {
            Some(r) => (
                r.tree.clone(),
                (r.models.clone(), r.anchors.clone()),
                Some(r.stats.clone()),
                Some(r.heldout.clone()),
                None,
            ),
            None => match borrow::nearest(&key, fitted.keys(), surface_of) {
                Some(from) => {
                    let r = &fitted[from];
                    (r.tree.clone(), (r.models.clone(), r.anchors.clone()), None, None, Some(from.clone()))
                }
                None => (
                    borrow::best_single_leaf(&trainer(&corpus, &policy, key.bucket, &widths), &key, &dev, surface_of),
                    (Vec::new(), Vec::new()),
                    None,
                    None,
                    None,
                ),
            },
        };
        out_domains.push(Domain {
            codebook: key.codebook.clone(),
            mode: key.mode.clone(),
            m_bucket: key.bucket,
            aspect: key.aspect,
            models,
            anchors,
            tree,
            stats,
        });
        // The report's data moves out of the domain's own result (a borrowed domain has none).
        let (lofo, model_errors, remeasure) = match fitted.get_mut(&key) {
            Some(r) => (r.lofo.take().unwrap_or_default(), r.model_errors.take(), std::mem::take(&mut r.remeasure)),
            None => Default::default(),
        };
        reports.push(DomainFit {
            key,
            family_heldout: lofo,
            heldout,
            remeasure,
            borrowed_from,
            model_errors,
            frozen: false,
        });
    }
    policy.domains = out_domains;
    policy.overlays = overlays::exact_overlays(&corpus, policy.units, &dev);
    if let Some((fp, stage)) = &frozen {
        let decode: Vec<usize> = (0..policy.m_buckets.len()).filter(|&b| policy.is_decode_bucket(b)).collect();
        policy.overlays.retain(|o| !decode.contains(&o.m_bucket));
        for b in decode {
            policy.overlays.extend(frozen::overlays(fp, b));
        }
        policy.overlays.sort();
        policy.provenance.frozen_m1 = Some(stage.clone());
    }
    policy.candidates = named_candidates(&policy, corpus.backend);
    if let Some(why) = policy.frozen_m1_changed() {
        return Err(FitError::Frozen {
            dir: dir.into(),
            message: format!("the staged policy does not carry the frozen M = 1 part ({why})"),
        });
    }

    let with_data = policy.domains.iter().filter(|d| d.stats.is_some()).count() as u64;
    let passing = policy.domains.iter().filter(|d| d.stats.as_ref().is_some_and(|s| s.passed)).count() as u64;
    policy.gates.p95_max = opts.p95_max;
    policy.gates.ucb_max = opts.ucb_max;
    policy.gates.min_pass_fraction = opts.min_pass;
    policy.gates.domains_with_data = with_data;
    policy.gates.domains_passing = passing;
    policy.gates.passed = with_data > 0 && passing as f64 >= opts.min_pass * with_data as f64;
    policy.check()?;
    policy.check_registry()?;

    let sealed_outcome =
        if opts.certify_sealed { sealed::certify(&policy, &corpus, &sealed, opts.p95_max)? } else { None };
    if let (Some(l), Some(outcome)) = (&opts.ledger, &sealed_outcome) {
        ledger::record(l, &corpus_id, outcome)?;
    }
    policy.gates.sealed = sealed_outcome;
    Ok(Fit {
        policy,
        domains: reports,
        corpus_dir: dir.into(),
        geometries: geometries.into_iter().collect(),
        nested_family_cv: opts.nested_family_cv,
        passes: corpus.plan.inventory.passes,
        bands: corpus.bands.clone(),
    })
}

/// What fitting one domain gives (owned data, so that domains fit on several threads).
struct DomainResult {
    tree: Node,
    models: Vec<vnni_policy::CostModel>,
    /// The anchors of the models' residuals (empty without a correction).
    anchors: Vec<[u64; 2]>,
    stats: DomainStats,
    heldout: Heldout,
    /// The cost models' count and in-sample relative errors (CUDA decode domains).
    model_errors: Option<(usize, Vec<f64>)>,
    /// Leave one family out (domains with an aspect bucket).
    lofo: Option<BTreeMap<String, family_cv::FamilyRegrets>>,
    remeasure: Vec<vnni_corpus::schema::PairRequest>,
}

/// The descriptors of every candidate a tree, model or overlay names, sorted by id.
fn named_candidates(policy: &Policy, backend: registry::Backend) -> Vec<vnni_policy::CandidateDesc> {
    let mut ids: BTreeSet<&str> = policy.overlays.iter().map(|o| o.candidate.as_str()).collect();
    for d in &policy.domains {
        leaves(&d.tree, &mut ids);
        ids.extend(d.models.iter().map(|m| m.candidate.as_str()));
    }
    vnni_policy::descriptors(backend).into_iter().filter(|c| ids.contains(c.id.as_str())).collect()
}

fn leaves<'t>(node: &'t Node, out: &mut BTreeSet<&'t str>) {
    match node {
        Node::Leaf { candidate } => {
            out.insert(candidate);
        }
        Node::Split { left, right, .. } => {
            for child in [left, right].into_iter().flatten() {
                leaves(child, out);
            }
        }
    }
}
