//! The template context: the policy IR turned into the integer tables both languages emit.
//! All indexing, sorting and range checking happens here, once, so the C++ and Rust
//! templates only spell the same tables in their own syntax.

use serde::Serialize;
use vnni_policy::{CostModel, Feature, KbFormula, Node, Policy, Surface, MAX_DIM};

use crate::error::{GenerateError, Result};
use crate::provenance::ProvenanceCtx;

#[derive(Debug, Serialize)]
pub struct Context {
    pub provenance: ProvenanceCtx,
    pub max_dim: i64,
    pub units: i64,
    pub codebooks: Vec<String>,
    pub modes: Vec<String>,
    pub m_buckets: Vec<BucketCtx>,
    /// The bucket holding M = 1 (its candidate fixes bpp for every M).
    pub decode_bucket: usize,
    pub aspect_edges: Vec<RatioCtx>,
    /// Domain slots per (codebook, mode): one per aspect bucket of the decode bucket, one per
    /// other bucket.
    pub slots: usize,
    pub candidates: Vec<CandidateCtx>,
    pub domains: Vec<DomainCtx>,
    /// Dense `[codebook][mode][slot]` -> domain index, one row per (codebook, mode).
    pub domain_rows: Vec<DomainRowCtx>,
    /// One sorted exact table per codebook (possibly empty).
    pub overlays: Vec<OverlayTableCtx>,
    /// Every domain's cost models, domain after domain (`DomainCtx::models_first`, `models_count`).
    pub models: Vec<ModelCtx>,
    pub model: ModelConstants,
    /// The local correction of the models' predictions (`vnni_policy::correction`).
    pub correction: CorrectionCtx,
    /// Every domain's anchors as (log2 N, log2 K) in 1/64 octave, domain after domain
    /// (`DomainCtx::anchors_first`, `anchors_count`).
    pub anchors: Vec<(i64, i64)>,
    /// Every model's residuals as (the domain's anchor index, value), model after model
    /// (`ModelCtx::residuals_first`, `residuals_count`).
    pub residuals: Vec<(i64, i64)>,
    /// The most anchors of any domain (at least 1: the size of the weights' scratch array).
    pub max_anchors: usize,
}

/// The correction rule; `present` false (and no anchors anywhere) where the policy has none.
#[derive(Debug, Serialize)]
pub struct CorrectionCtx {
    pub present: bool,
    pub strength: i64,
    pub prior: i64,
    pub step: i64,
    pub weights: Vec<i64>,
    pub one: i64,
    pub strength_den: i64,
    pub max_exponent: i64,
    pub fraction_bits: u32,
}

impl CorrectionCtx {
    fn new(rule: Option<&vnni_policy::Correction>) -> CorrectionCtx {
        use vnni_policy::correction as c;
        let (strength, prior, step, weights) =
            rule.map_or((0, 1, 1, Vec::new()), |r| (r.strength, r.prior, r.step, r.weights.clone()));
        CorrectionCtx {
            present: rule.is_some(),
            strength,
            prior,
            step,
            weights,
            one: c::ONE,
            strength_den: c::STRENGTH_DEN,
            max_exponent: c::MAX_EXPONENT,
            fraction_bits: c::LOG_FRACTION_BITS,
        }
    }
}

/// The cost model's constants (`vnni_policy::cost`) and the sm_90 occupancy limits
/// (`vnni_kernels::occupancy`): both languages spell them from here.
#[derive(Debug, Serialize)]
pub struct ModelConstants {
    pub max_elements: i64,
    pub full_draw: i64,
    /// Threads of the split-K reduce resident on one SM.
    pub reduce_threads: i64,
    pub max_warps: i64,
    pub max_blocks: i64,
    pub registers: i64,
    pub register_unit: i64,
    pub warp_group: i64,
    pub shared: i64,
    pub shared_reserved: i64,
    pub shared_unit: i64,
}

impl ModelConstants {
    fn new() -> ModelConstants {
        use vnni_kernels::occupancy as o;
        ModelConstants {
            max_elements: vnni_policy::cost::MAX_ELEMENTS as i64,
            full_draw: vnni_policy::cost::FULL_DRAW as i64,
            reduce_threads: vnni_policy::cost::REDUCE_THREADS_PER_SM as i64,
            max_warps: o::MAX_WARPS.into(),
            max_blocks: o::MAX_BLOCKS.into(),
            registers: o::REGISTERS.into(),
            register_unit: o::REGISTER_UNIT.into(),
            warp_group: o::WARP_GROUP.into(),
            shared: o::SHARED.into(),
            shared_reserved: o::SHARED_RESERVED.into(),
            shared_unit: o::SHARED_UNIT.into(),
        }
    }
}

/// One candidate's cost model in one domain.
#[derive(Debug, Serialize)]
pub struct ModelCtx {
    pub candidate: usize,
    pub id: String,
    /// `fused_kpar`: tile * KB threads in one CTA per tile, 4 shared bytes a thread.
    pub fused: bool,
    /// `kpar`: KB * N f32 partials where KB > 1.
    pub partials: bool,
    pub registers: i64,
    pub shared_static: i64,
    pub rate: i64,
    pub base: i64,
    /// (mantissa, shift) of the waves, elements, partials, CTA-turn, K-chain and reduce
    /// coefficients.
    pub coefs: [(i64, i64); 6],
    /// The model answers for `from <= N * K < below` (`below`: one past the model limit where
    /// the policy sets none).
    pub from: i64,
    pub below: i64,
    /// Its residuals in `Context::residuals`.
    pub residuals_first: usize,
    pub residuals_count: usize,
}

#[derive(Debug, Serialize)]
pub struct BucketCtx {
    pub lo: i64,
    /// -1: unbounded.
    pub hi: i64,
    pub surface: &'static str,
    /// First domain slot of this bucket.
    pub slot: usize,
    pub by_aspect: bool,
}

#[derive(Debug, Serialize)]
pub struct RatioCtx {
    pub num: i64,
    pub den: i64,
}

#[derive(Debug, Serialize)]
pub struct CandidateCtx {
    pub id: String,
    pub family: String,
    pub surface: &'static str,
    pub tile: i64,
    pub cpt: i64,
    pub rows: i64,
    /// `wide`, `literal`, `waves`, `inherited`.
    pub kb_kind: &'static str,
    /// Literal KB or waves; 0 otherwise.
    pub kb_param: i64,
    /// -1: no cap besides KBLK.
    pub max_kb: i64,
    pub generic_legal: bool,
}

#[derive(Debug, Serialize)]
pub struct DomainCtx {
    /// Human-readable key for the comment above the tree.
    pub name: String,
    pub tree: TreeCtx,
    /// The domain's models in `Context::models`.
    pub models_first: usize,
    pub models_count: usize,
    /// The domain's anchors in `Context::anchors`.
    pub anchors_first: usize,
    pub anchors_count: usize,
}

/// A tree node: a leaf (candidate index) or an int64 predicate `feature <= le`.
#[derive(Debug, Serialize)]
pub struct TreeCtx {
    pub leaf: Option<usize>,
    pub id: String,
    pub feature: Option<FeatureCtx>,
    pub le: i64,
    pub left: Option<Box<TreeCtx>>,
    pub right: Option<Box<TreeCtx>>,
}

#[derive(Debug, Serialize)]
pub struct FeatureCtx {
    /// `n`, `k`, `nk`, `aspect_q10`, `kblk`, `tiles`, `waves`.
    pub kind: &'static str,
    /// Tile width of `tiles` and `waves`.
    pub w: i64,
}

#[derive(Debug, Serialize)]
pub struct DomainRowCtx {
    pub codebook: String,
    pub mode: String,
    pub domains: Vec<usize>,
}

#[derive(Debug, Serialize)]
pub struct OverlayTableCtx {
    /// The codebook's index (tables are named by it: codebook names need not be identifiers).
    pub index: usize,
    pub codebook: String,
    /// Sorted by (mode, bucket, n, k).
    pub entries: Vec<OverlayCtx>,
}

#[derive(Debug, Serialize)]
pub struct OverlayCtx {
    pub mode: usize,
    pub bucket: usize,
    pub n: i64,
    pub k: i64,
    pub candidate: usize,
    pub id: String,
}

/// Every feature lies in 0 ..= 2^62 (N * K < 2^62 is the largest), so clamping a threshold
/// into -1 ..= 2^62 changes no comparison and keeps every literal a plain int64.
const LE_CEILING: i64 = 1 << 62;

/// An unsigned policy value as int64, or an error naming it.
fn int(what: impl FnOnce() -> String, value: u64) -> Result<i64> {
    i64::try_from(value).map_err(|_| GenerateError::OutOfRange { what: what(), value })
}

/// The name both languages and the harness protocol use for a surface.
pub(crate) fn surface_name(s: Surface) -> &'static str {
    match s {
        Surface::Decode => "decode",
        Surface::Grouped => "grouped",
        Surface::Prefill => "prefill",
    }
}

impl Context {
    /// Build the context of a policy that passed `check()`.
    pub fn new(policy: &Policy) -> Result<Context> {
        let units = int(|| "units".into(), policy.units)?;
        let mut slot = 0;
        let mut m_buckets = Vec::new();
        for (i, b) in policy.m_buckets.iter().enumerate() {
            let by_aspect = b.surface == Surface::Decode;
            m_buckets.push(BucketCtx {
                lo: int(|| format!("M bucket {i} lo"), b.lo)?,
                hi: b.hi.map(|h| int(|| format!("M bucket {i} hi"), h)).transpose()?.unwrap_or(-1),
                surface: surface_name(b.surface),
                slot,
                by_aspect,
            });
            slot += if by_aspect { policy.aspect_edges.len() + 1 } else { 1 };
        }
        let slots = slot;
        let decode_bucket = policy.m_bucket(1).ok_or(vnni_policy::PolicyError::NoBucket { m: 1 })?;
        let aspect_edges = policy
            .aspect_edges
            .iter()
            .map(|e| {
                Ok(RatioCtx { num: int(|| "aspect num".into(), e.num)?, den: int(|| "aspect den".into(), e.den)? })
            })
            .collect::<Result<_>>()?;
        let candidates = policy.candidates.iter().map(candidate_ctx).collect::<Result<_>>()?;
        let index_of = |id: &str| {
            policy
                .candidates
                .binary_search_by(|c| c.id.as_str().cmp(id))
                .map_err(|_| vnni_policy::PolicyError::UnknownCandidate { id: id.into() }.into())
        };
        let mut models = Vec::new();
        let mut anchors = Vec::new();
        let mut residuals = Vec::new();
        let domains = policy
            .domains
            .iter()
            .map(|d| {
                let models_first = models.len();
                for m in &d.models {
                    let residuals_first = residuals.len();
                    residuals.extend(m.residuals.iter().map(|r| (i64::from(r.anchor), i64::from(r.value))));
                    models.push(ModelCtx {
                        residuals_first,
                        residuals_count: m.residuals.len(),
                        ..model_ctx(policy, m, &index_of)?
                    });
                }
                let anchors_first = anchors.len();
                anchors.extend(vnni_policy::correction::anchor_logs(&d.anchors));
                Ok(DomainCtx {
                    name: match d.aspect {
                        Some(a) => format!("{} {} M bucket {} aspect bucket {a}", d.codebook, d.mode, d.m_bucket),
                        None => format!("{} {} M bucket {}", d.codebook, d.mode, d.m_bucket),
                    },
                    tree: tree_ctx(&d.tree, &index_of)?,
                    models_first,
                    models_count: d.models.len(),
                    anchors_first,
                    anchors_count: d.anchors.len(),
                })
            })
            .collect::<Result<_>>()?;
        let position = |names: &[String], name: &str| names.iter().position(|x| x == name);
        let mut domain_table = vec![usize::MAX; policy.codebooks.len() * policy.modes.len() * slots];
        for (di, d) in policy.domains.iter().enumerate() {
            let (Some(cb), Some(mode)) = (position(&policy.codebooks, &d.codebook), position(&policy.modes, &d.mode))
            else {
                continue;
            };
            let cell = (cb * policy.modes.len() + mode) * slots + m_buckets[d.m_bucket].slot + d.aspect.unwrap_or(0);
            // The evaluator takes the first matching domain; so does the table.
            if domain_table[cell] == usize::MAX {
                domain_table[cell] = di;
            }
        }
        if domain_table.contains(&usize::MAX) {
            return Err(vnni_policy::PolicyError::NotTotal { what: "a domain slot has no tree".into() }.into());
        }
        let mut rows = domain_table.chunks(slots);
        let mut domain_rows = Vec::new();
        for codebook in &policy.codebooks {
            for mode in &policy.modes {
                let domains = rows.next().expect("one row per (codebook, mode)").to_vec();
                domain_rows.push(DomainRowCtx { codebook: codebook.clone(), mode: mode.clone(), domains });
            }
        }
        let mut overlays = Vec::new();
        for (cb, name) in policy.codebooks.iter().enumerate() {
            let mut entries = Vec::new();
            for o in policy.overlays.iter().filter(|o| &o.codebook == name) {
                let mode = position(&policy.modes, &o.mode)
                    .ok_or_else(|| vnni_policy::PolicyError::UnknownMode { mode: o.mode.clone() })?;
                entries.push(OverlayCtx {
                    mode,
                    bucket: o.m_bucket,
                    n: int(|| format!("overlay {cb} n"), o.n)?,
                    k: int(|| format!("overlay {cb} k"), o.k)?,
                    candidate: index_of(&o.candidate)?,
                    id: o.candidate.clone(),
                });
            }
            entries.sort_by_key(|e| (e.mode, e.bucket, e.n, e.k));
            overlays.push(OverlayTableCtx { index: cb, codebook: name.clone(), entries });
        }
        Ok(Context {
            provenance: ProvenanceCtx::new(policy),
            max_dim: MAX_DIM as i64,
            units,
            codebooks: policy.codebooks.clone(),
            modes: policy.modes.clone(),
            m_buckets,
            decode_bucket,
            aspect_edges,
            slots,
            candidates,
            domains,
            domain_rows,
            overlays,
            models,
            model: ModelConstants::new(),
            correction: CorrectionCtx::new(policy.correction.as_ref()),
            max_anchors: policy.domains.iter().map(|d| d.anchors.len()).max().unwrap_or(0).max(1),
            anchors,
            residuals,
        })
    }
}

fn model_ctx(policy: &Policy, m: &CostModel, index_of: &impl Fn(&str) -> Result<usize>) -> Result<ModelCtx> {
    let candidate = index_of(&m.candidate)?;
    let desc = &policy.candidates[candidate];
    let field = |name: &str, v: u64| int(|| format!("model of {} {name}", m.candidate), v);
    let coef =
        |c: vnni_policy::Coef| -> Result<(i64, i64)> { Ok((field("mantissa", c.mantissa)?, i64::from(c.shift))) };
    Ok(ModelCtx {
        candidate,
        id: m.candidate.clone(),
        fused: desc.fused_launch(),
        partials: desc.writes_partials(),
        registers: m.registers.into(),
        shared_static: m.shared_static.into(),
        rate: field("rate", m.rate)?,
        base: field("base", m.base)?,
        coefs: [
            coef(m.waves)?,
            coef(m.elements)?,
            coef(m.partials)?,
            coef(m.cta_rounds)?,
            coef(m.chain)?,
            coef(m.reduce)?,
        ],
        from: field("from_elements", m.from_elements)?,
        below: field("below_elements", m.below_elements.unwrap_or(vnni_policy::cost::MAX_ELEMENTS + 1))?,
        residuals_first: 0,
        residuals_count: 0,
    })
}

fn candidate_ctx(c: &vnni_policy::CandidateDesc) -> Result<CandidateCtx> {
    let field = |name: &str, v: u64| int(|| format!("candidate {} {name}", c.id), v);
    let (kb_kind, kb_param) = match c.kb {
        KbFormula::Wide => ("wide", 0),
        KbFormula::Literal { kb } => ("literal", field("kb", kb)?),
        KbFormula::Waves { waves } => ("waves", field("waves", waves)?),
        KbFormula::Capped { kb } => ("capped", field("kb", kb)?),
        KbFormula::Inherited => ("inherited", 0),
    };
    Ok(CandidateCtx {
        id: c.id.clone(),
        family: c.family.clone(),
        surface: surface_name(c.surface),
        tile: field("tile", c.tile)?,
        cpt: field("cpt", c.cpt)?,
        rows: field("rows", c.rows)?,
        kb_kind,
        kb_param,
        max_kb: c.max_kb.map(|m| field("max_kb", m)).transpose()?.unwrap_or(-1),
        generic_legal: c.generic_legal,
    })
}

fn tree_ctx(node: &Node, index_of: &impl Fn(&str) -> Result<usize>) -> Result<TreeCtx> {
    match node {
        Node::Leaf { candidate } => Ok(TreeCtx {
            leaf: Some(index_of(candidate)?),
            id: candidate.clone(),
            feature: None,
            le: 0,
            left: None,
            right: None,
        }),
        Node::Split { feature, le, left, right } => {
            let branch = |b: &Option<Box<Node>>| -> Result<Box<TreeCtx>> {
                let b = b
                    .as_deref()
                    .ok_or_else(|| vnni_policy::PolicyError::NotTotal { what: "a split lacks a branch".into() })?;
                Ok(Box::new(tree_ctx(b, index_of)?))
            };
            Ok(TreeCtx {
                leaf: None,
                id: String::new(),
                feature: Some(feature_ctx(*feature)?),
                le: (*le).clamp(-1, LE_CEILING),
                left: Some(branch(left)?),
                right: Some(branch(right)?),
            })
        }
    }
}

fn feature_ctx(f: Feature) -> Result<FeatureCtx> {
    let width = |w: u64| int(|| "feature tile width".into(), w);
    Ok(match f {
        Feature::N => FeatureCtx { kind: "n", w: 0 },
        Feature::K => FeatureCtx { kind: "k", w: 0 },
        Feature::NK => FeatureCtx { kind: "nk", w: 0 },
        Feature::AspectQ10 => FeatureCtx { kind: "aspect_q10", w: 0 },
        Feature::Kblk => FeatureCtx { kind: "kblk", w: 0 },
        Feature::Tiles { w } => FeatureCtx { kind: "tiles", w: width(w)? },
        Feature::Waves { w } => FeatureCtx { kind: "waves", w: width(w)? },
    })
}
