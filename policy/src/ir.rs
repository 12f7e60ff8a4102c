//! The policy IR: what `fit` writes (`policy.json`) and what the generator renders. Every
//! number a run-time decision needs is an integer; floats appear only in the recorded
//! statistics. Serialization is deterministic (field order fixed, vectors sorted by the
//! learner), so the same corpus gives the same bytes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::correction::{Correction, Residual};
pub use crate::cost::{Coef, CostModel};

pub const SCHEMA: &str = "vnni-policy-v2";

/// Which kernel surface serves an M bucket: the registry's one `Surface` (serialized as
/// `decode`, `grouped`, `prefill`).
pub use vnni_kernels::Surface;

/// `lo ..= hi` (hi `None`: unbounded). Buckets are contiguous from M = 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MBucket {
    pub lo: u64,
    pub hi: Option<u64>,
    pub surface: Surface,
}

/// An aspect edge N/K >= num/den, compared as `N * den >= K * num` (integers, no division).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ratio {
    pub num: u64,
    pub den: u64,
}

/// How a candidate derives its partition count KB, hence bpp = ceil(KBLK / KB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KbFormula {
    /// KB = 1.
    Wide,
    /// KB = kb; illegal (no selection) where kb > the cap. Overlay-only.
    Literal { kb: u64 },
    /// KB = clamp(ceil(waves * units / ceil(N / tile)), 1, cap).
    Waves { waves: u64 },
    /// KB = clamp(kb, 1, cap): legal for every shape.
    Capped { kb: u64 },
    /// Grouped: the decode selection's bpp.
    Inherited,
}

/// A candidate as the run time sees it: enough to build its launch and derive its bpp.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateDesc {
    pub id: String,
    /// `cuda` or `cpu`.
    pub backend: String,
    pub surface: Surface,
    /// Registry family name (`wide`, `direct`, `kpar`, `fused_kpar`, `rows`, `mma16`).
    pub family: String,
    /// Columns per CTA (CUDA) or per task (CPU).
    pub tile: u64,
    /// Columns per thread (CUDA tile families; 1 otherwise).
    pub cpt: u64,
    /// Activation rows per CTA (grouped; 1 for decode).
    pub rows: u64,
    pub kb: KbFormula,
    /// The partition cap besides KBLK (fused kernels: threads / tile); `None`: KBLK only.
    pub max_kb: Option<u64>,
    /// Whether generic (tree) leaves may use it.
    pub generic_legal: bool,
}

/// An integer feature of (N, K) known at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Feature {
    N,
    K,
    /// N * K (< 2^62 for N, K < 2^31).
    NK,
    /// floor(N * 1024 / K).
    AspectQ10,
    /// K / 32.
    Kblk,
    /// ceil(N / w).
    Tiles {
        w: u64,
    },
    /// ceil(ceil(N / w) / units): waves of one-CTA-per-tile launches.
    Waves {
        w: u64,
    },
}

/// A decision tree over integer features: `feature <= le` goes left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "node", rename_all = "snake_case")]
pub enum Node {
    Leaf {
        candidate: String,
    },
    Split {
        feature: Feature,
        le: i64,
        /// `Option` so that a policy with a branch removed parses and is then rejected by
        /// the totality check with the domain and depth named.
        left: Option<Box<Node>>,
        right: Option<Box<Node>>,
    },
}

/// Held-out statistics of a domain (regret as a fraction: 0.01 = 1%).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainStats {
    pub rows: u64,
    pub p95_regret: f64,
    pub ucb_p95_regret: f64,
    pub geomean_regret: f64,
    pub passed: bool,
}

/// One domain: (codebook, mode, M bucket, aspect bucket), its cost models and its tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Domain {
    pub codebook: String,
    pub mode: String,
    /// Index into `Policy::m_buckets`.
    pub m_bucket: usize,
    /// Index of the aspect bucket (decode), `None` for grouped and prefill domains.
    pub aspect: Option<usize>,
    /// CUDA decode domains: one latency model per generic candidate the learner could fit
    /// (enough measured rows), sorted by candidate id; the least prediction answers
    /// (`cost.rs`). Empty: the tree answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<CostModel>,
    /// The development shapes (N, K) its models' residuals were measured at, sorted
    /// (`correction.rs`); empty where the policy carries no correction.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anchors: Vec<[u64; 2]>,
    /// Where the models do not answer (or there are none).
    pub tree: Node,
    /// `None` where the corpus had no rows for the domain (a tree borrowed from a neighbour).
    pub stats: Option<DomainStats>,
}

/// An exact-shape overlay entry; takes precedence over the tree.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Overlay {
    pub codebook: String,
    pub mode: String,
    pub m_bucket: usize,
    pub n: u64,
    pub k: u64,
    pub candidate: String,
}

impl Overlay {
    /// What a query matches: (codebook, mode, M bucket, N, K), the order overlays are sorted in.
    pub fn key(&self) -> (&str, &str, usize, u64, u64) {
        (&self.codebook, &self.mode, self.m_bucket, self.n, self.k)
    }
}

/// Gate thresholds (recorded so a policy says what it was held to) and the outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gates {
    pub p95_max: f64,
    pub ucb_max: f64,
    pub min_pass_fraction: f64,
    pub domains_passing: u64,
    pub domains_with_data: u64,
    pub passed: bool,
    /// The one certification on the sealed partition, overlays off; `None` if not run.
    pub sealed: Option<SealedCertification>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SealedCertification {
    /// Every sealed row pooled (decode and grouped).
    pub rows: u64,
    pub p95_regret: f64,
    pub geomean_regret: f64,
    /// Every surface of `surfaces` passed on its own (a pooled figure lets many easy grouped
    /// rows hide failing decode rows).
    pub passed: bool,
    /// Per surface (`decode`, `grouped`), each gated on the p95 threshold.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub surfaces: BTreeMap<String, SealedScore>,
    /// Decode rows per source of the sealed shapes: a model family, or `grid`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub decode_sources: BTreeMap<String, SealedScore>,
}

impl SealedCertification {
    /// Every score with its name: the surfaces, then decode per source (`decode, <source>`).
    pub fn named_scores(&self) -> impl Iterator<Item = (String, &SealedScore)> {
        self.surfaces
            .iter()
            .map(|(k, v)| (k.clone(), v))
            .chain(self.decode_sources.iter().map(|(k, v)| (format!("decode, {k}"), v)))
    }
}

/// Regret of the policy's picks over a set of sealed rows (a pick inside its cell's noise
/// band is tied with the best: regret 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SealedScore {
    pub rows: u64,
    pub p95_regret: f64,
    pub geomean_regret: f64,
    pub max_regret: f64,
    /// The same rows as measured, without ties; present only where a band tied some pick
    /// (corpora timed in two or more passes), so one-pass policies keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_measured: Option<MeasuredScore>,
}

/// Regret as measured (no noise-band ties).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeasuredScore {
    pub p95_regret: f64,
    pub geomean_regret: f64,
    pub max_regret: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    pub corpus_id: String,
    pub registry_digest: String,
    pub inventory_digest: String,
    pub backend: String,
    pub arch: String,
    pub profile: String,
    pub learner_version: String,
    /// A staged fit: the frozen M = 1 stage whose picks the batched rows were timed at (absent
    /// from the JSON of a one-stage policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen_m1: Option<FrozenStage>,
    /// Fitted on the M = 1 stage of a staged refresh only: its batched buckets were never
    /// timed, so it is never installed (absent from the JSON when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub m1_only: bool,
    /// Development cells timed again as pairs and applied before cross-validation (`fit
    /// --pairs`; absent from the JSON when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<PairEvidence>,
    /// Fitted on decode rows launched with programmatic dependent launch (`sweep
    /// --programmatic`): its picks are for callers that launch so (absent from the JSON when
    /// false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub programmatic: bool,
    /// Fitted on the development rows alone (`fit --development-only --development-policy`):
    /// its sealed rows were never looked at, so it is for experiments and scoring on fresh
    /// shapes, never installed (absent from the JSON when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub development_only: bool,
    /// How the development rows were weighted when the cost models were fitted (`fit
    /// --focus`), so a refit weighs them alike (absent from the JSON when every row weighed 1,
    /// as in policies from before the rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<Focus>,
    /// Whether launch twins' records were pooled when the corpus was read (`fit --twins
    /// pooled`: a record racing cut short is read as its twin's fullest, since both time one
    /// launch), so a refit reads them alike (absent from the JSON when every record was read
    /// as measured, as in policies from before the rule).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub twins_pooled: bool,
    /// Whether the graph-mode decode cost models were fitted with the split-K reduce term
    /// (`fit --reduce-term on`, [`crate::cost::Basis::reduce`]), so a refit fits alike (absent
    /// from the JSON of policies from before the term, whose models carry none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reduce_term: bool,
}

/// The weight of a development row in a cost model's fit: a row of a candidate that ran `r`
/// slower than its cell's fastest weighs `max(1 / (1 + (r / scale)^2), floor)`. A model is then
/// fitted hardest where its candidate competes, which is where its prediction picks; rows far
/// behind still bound it (the floor), so a cliff is not forgotten. Both in 1/1000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Focus {
    pub scale_permille: u32,
    pub floor_permille: u32,
}

impl Focus {
    /// The weight of a row `regret` behind its cell's fastest (0: the fastest itself, weight 1).
    pub fn weight(&self, regret: f64) -> f64 {
        let x = regret / (f64::from(self.scale_permille.max(1)) / 1000.0);
        (1.0 / (1.0 + x * x)).max(f64::from(self.floor_permille) / 1000.0)
    }
}

/// The pair samples a fit applied: the sha256 of the file and the cells it changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairEvidence {
    pub sha256: String,
    pub cells: u64,
}

/// The first 16 characters of a digest (all of a shorter text), for messages.
pub fn short(digest: &str) -> &str {
    digest.get(..16).unwrap_or(digest)
}

/// The frozen M = 1 stage of a staged policy: the corpus it was fitted on, the pair samples
/// that fit applied (if any), and the digest of its M = 1 part ([`Policy::m1_digest`]), which
/// the policy must still carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenStage {
    pub m1_corpus_id: String,
    pub m1_digest: String,
    /// Absent from the JSON when the M = 1 fit applied none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m1_pairs: Option<PairEvidence>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    pub schema: String,
    pub provenance: Provenance,
    /// SMs (CUDA) or worker threads (CPU): the `units` of the waves formula and feature.
    pub units: u64,
    /// Codebook names, every one owning every domain.
    pub codebooks: Vec<String>,
    /// Timing modes (`eager`, `graph`) the policy answers for.
    pub modes: Vec<String>,
    pub m_buckets: Vec<MBucket>,
    /// Ascending; aspect bucket = number of edges with N/K >= edge.
    pub aspect_edges: Vec<Ratio>,
    /// How the cost models' residuals at their anchors correct a prediction (`correction.rs`);
    /// absent: predictions are the models' own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correction: Option<Correction>,
    /// Sorted by id; every id a tree or overlay names.
    pub candidates: Vec<CandidateDesc>,
    /// Sorted by (codebook, mode, m_bucket, aspect).
    pub domains: Vec<Domain>,
    /// Sorted.
    pub overlays: Vec<Overlay>,
    pub gates: Gates,
}

impl Policy {
    /// Canonical bytes: pretty JSON with a trailing newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("policies serialize");
        v.push(b'\n');
        v
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Policy, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// Why the policy may not be installed (a staged policy's M = 1 part edited after the
    /// staged fit, its gates failed, or its sealed certification), if so.
    pub fn not_installable(&self) -> Option<String> {
        if self.provenance.development_only {
            return Some(
                "it was fitted on the development rows alone (fit --development-only): its sealed rows were never certified".into(),
            );
        }
        if self.provenance.m1_only {
            return Some(
                "it was fitted on the M = 1 stage of a staged refresh: its batched buckets were never timed (install the policy fitted on the staged corpus)".into(),
            );
        }
        if let Some(why) = self.frozen_m1_changed() {
            return Some(why);
        }
        let g = &self.gates;
        if let Some(s) = g.sealed.as_ref().filter(|s| !s.passed) {
            let failing: Vec<String> = s
                .surfaces
                .iter()
                .filter(|(_, v)| v.p95_regret >= g.p95_max)
                .map(|(k, v)| format!("{k} p95 regret {:.2}%", v.p95_regret * 100.0))
                .collect();
            let what = if failing.is_empty() {
                format!("p95 regret {:.2}%", s.p95_regret * 100.0)
            } else {
                failing.join(", ")
            };
            return Some(format!("its sealed certification failed ({what})"));
        }
        (!g.passed).then(|| {
            format!(
                "it failed its gates ({} of {} domains with data pass; {:.0}% needed)",
                g.domains_passing,
                g.domains_with_data,
                g.min_pass_fraction * 100.0
            )
        })
    }

    /// sha256 of the canonical bytes.
    pub fn digest(&self) -> String {
        vnni_kernels::digest::sha256_hex(&self.to_bytes())
    }

    /// Whether M bucket `b` is served by decode kernels.
    pub fn is_decode_bucket(&self, b: usize) -> bool {
        self.m_buckets.get(b).is_some_and(|b| b.surface == Surface::Decode)
    }

    /// sha256 of the M = 1 part: everything `select` reads to answer M = 1 (units, codebooks,
    /// modes, aspect edges, the decode domains' models and trees, the decode overlays and the
    /// decode descriptors), not the recorded statistics or the batched buckets. Two policies
    /// with one M = 1 digest pick the same M = 1 candidate, hence bpp, everywhere.
    pub fn m1_digest(&self) -> String {
        #[derive(Serialize)]
        struct M1Domain<'a> {
            codebook: &'a str,
            mode: &'a str,
            aspect: Option<usize>,
            models: &'a [CostModel],
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            anchors: &'a [[u64; 2]],
            tree: &'a Node,
        }
        #[derive(Serialize)]
        struct M1Part<'a> {
            units: u64,
            codebooks: &'a [String],
            modes: &'a [String],
            aspect_edges: &'a [Ratio],
            #[serde(skip_serializing_if = "Option::is_none")]
            correction: Option<&'a Correction>,
            candidates: Vec<&'a CandidateDesc>,
            domains: Vec<M1Domain<'a>>,
            overlays: Vec<(&'a str, &'a str, u64, u64, &'a str)>,
        }
        let part = M1Part {
            units: self.units,
            codebooks: &self.codebooks,
            modes: &self.modes,
            aspect_edges: &self.aspect_edges,
            correction: self.correction.as_ref(),
            candidates: self.candidates.iter().filter(|c| c.surface == Surface::Decode).collect(),
            domains: self
                .domains
                .iter()
                .filter(|d| self.is_decode_bucket(d.m_bucket))
                .map(|d| M1Domain {
                    codebook: &d.codebook,
                    mode: &d.mode,
                    aspect: d.aspect,
                    models: &d.models,
                    anchors: &d.anchors,
                    tree: &d.tree,
                })
                .collect(),
            overlays: self
                .overlays
                .iter()
                .filter(|o| self.is_decode_bucket(o.m_bucket))
                .map(|o| (o.codebook.as_str(), o.mode.as_str(), o.n, o.k, o.candidate.as_str()))
                .collect(),
        };
        vnni_kernels::digest::sha256_hex(&serde_json::to_vec(&part).expect("policies serialize"))
    }

    /// Why a staged policy's M = 1 part is no longer the one its batched rows were timed and
    /// certified at (edited after the staged fit), if so.
    pub fn frozen_m1_changed(&self) -> Option<String> {
        let frozen = self.provenance.frozen_m1.as_ref()?;
        let now = self.m1_digest();
        (now != frozen.m1_digest).then(|| {
            format!(
                "its M = 1 part changed after the batched rows were timed at the frozen picks (frozen M = 1 digest {}, now {}): refit the batched stage",
                short(&frozen.m1_digest),
                short(&now)
            )
        })
    }
}
