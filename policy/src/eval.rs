//! The Rust evaluator of the policy IR: the single statement of the run-time decision that
//! the generated C++ and Rust tables must agree with, query for query. Integer arithmetic
//! only (i64 products bounded by N, K, M < 2^31; the cost model's bounds are in `cost.rs`).

use crate::ir::{CandidateDesc, Feature, KbFormula, Node, Policy, Surface};
use crate::PolicyError;

/// The largest N, K or M a query may carry.
pub const MAX_DIM: u64 = (1 << 31) - 1;

/// Where a selection came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Overlay,
    /// The least prediction of the domain's cost models.
    Model,
    Tree,
}

/// One split a tree walk passed: `feature` had `value`, compared with `le` (left when <=).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub feature: Feature,
    pub value: i64,
    pub le: i64,
    pub left: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection<'p> {
    pub candidate: &'p CandidateDesc,
    /// K-blocks per partition (the arithmetic identity).
    pub bpp: u64,
    /// Partitions launched: ceil(KBLK / bpp).
    pub kb: u64,
    pub via: Via,
    /// Index into `Policy::domains`.
    pub domain: usize,
}

impl Feature {
    /// The feature's value for (N, K) on `units` SMs or threads.
    pub fn value(self, n: u64, k: u64, units: u64) -> i64 {
        let v = match self {
            Feature::N => n,
            Feature::K => k,
            Feature::NK => n * k,
            Feature::AspectQ10 => n * 1024 / k,
            Feature::Kblk => k / 32,
            Feature::Tiles { w } => n.div_ceil(w),
            Feature::Waves { w } => n.div_ceil(w).div_ceil(units.max(1)),
        };
        v as i64
    }
}

impl CandidateDesc {
    /// bpp = ceil(KBLK / requested KB) of this decode candidate for N x K (the registry's
    /// `plan`), `None` where illegal.
    pub fn bpp(&self, n: u64, k: u64, units: u64) -> Option<u64> {
        let kblk = k / 32;
        let cap = self.max_kb.map_or(kblk, |c| c.min(kblk)).max(1);
        let requested = match self.kb {
            KbFormula::Wide => 1,
            KbFormula::Literal { kb } => {
                if kb > cap || kb == 0 {
                    return None;
                }
                kb
            }
            KbFormula::Waves { waves } => (waves * units).div_ceil(n.div_ceil(self.tile)).clamp(1, cap),
            KbFormula::Capped { kb } => kb.clamp(1, cap),
            KbFormula::Inherited => return None,
        };
        Some(kblk.div_ceil(requested))
    }
}

impl Policy {
    /// The M bucket holding `m`.
    pub fn m_bucket(&self, m: u64) -> Option<usize> {
        self.m_buckets.iter().position(|b| m >= b.lo && b.hi.is_none_or(|hi| m <= hi))
    }

    /// The aspect bucket of N x K: how many edges N/K reaches.
    pub fn aspect_bucket(&self, n: u64, k: u64) -> usize {
        self.aspect_edges.iter().filter(|e| n as u128 * e.den as u128 >= k as u128 * e.num as u128).count()
    }

    pub fn candidate(&self, id: &str) -> Option<&CandidateDesc> {
        self.candidates.binary_search_by(|c| c.id.as_str().cmp(id)).ok().map(|i| &self.candidates[i])
    }

    fn domain_index(&self, codebook: &str, mode: &str, m_bucket: usize, aspect: Option<usize>) -> Option<usize> {
        self.domains
            .iter()
            .position(|d| d.codebook == codebook && d.mode == mode && d.m_bucket == m_bucket && d.aspect == aspect)
    }

    /// The leaf a tree reaches for N x K.
    pub fn walk<'p>(&self, tree: &'p Node, n: u64, k: u64) -> Result<&'p str, PolicyError> {
        self.walk_visiting(tree, n, k, &mut |_| {})
    }

    /// `walk`, telling `visit` every split it passes (for `explain`).
    pub fn walk_visiting<'p>(
        &self,
        tree: &'p Node,
        n: u64,
        k: u64,
        visit: &mut dyn FnMut(Step),
    ) -> Result<&'p str, PolicyError> {
        let mut node = tree;
        loop {
            match node {
                Node::Leaf { candidate } => return Ok(candidate),
                Node::Split { feature, le, left, right } => {
                    let value = feature.value(n, k, self.units);
                    let go_left = value <= *le;
                    visit(Step { feature: *feature, value, le: *le, left: go_left });
                    let next = if go_left { left } else { right };
                    node = next.as_deref().ok_or(PolicyError::MissingBranch { n, k })?;
                }
            }
        }
    }

    /// The corrector of domain `domain` at N x K (`correction.rs`); `None` where the policy or
    /// the domain carries no correction.
    fn corrector(&self, domain: usize, n: u64, k: u64) -> Option<crate::cost::Corrector<'_>> {
        let anchors = crate::correction::anchor_logs(&self.domains[domain].anchors);
        crate::cost::Corrector::new(self.correction.as_ref(), &anchors, n, k)
    }

    /// The index (into the domain's models) and prediction of the least predicted candidate of
    /// domain `domain` at N x K (predictions corrected where the policy carries a correction);
    /// `None` where no model answers (then the tree does).
    pub fn model_pick(&self, domain: usize, n: u64, k: u64) -> Option<(usize, u64)> {
        let models = &self.domains[domain].models;
        let corrector = self.corrector(domain, n, k);
        let pairs = models.iter().map(|m| (m, self.candidate(&m.candidate)));
        crate::cost::argmin(pairs, n, k, self.units, corrector.as_ref())
    }

    /// Every prediction of domain `domain`'s models at N x K (2^-16 us, corrected as
    /// `model_pick` does), least first (ties in model order, as `model_pick` breaks them).
    pub fn model_predictions(&self, domain: usize, n: u64, k: u64) -> Vec<(&str, u64)> {
        let corrector = self.corrector(domain, n, k);
        let mut v: Vec<(usize, &str, u64)> = self.domains[domain]
            .models
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let c = self.candidate(&m.candidate);
                let t = crate::cost::corrected(m, c, n, k, self.units, corrector.as_ref())?;
                Some((i, m.candidate.as_str(), t))
            })
            .collect();
        v.sort_by_key(|&(i, _, t)| (t, i));
        v.into_iter().map(|(_, id, t)| (id, t)).collect()
    }

    /// Every decode (M = 1) cost-model prediction for (codebook, mode) at N x K, least first, as
    /// [`Policy::model_predictions`] gives them; empty where no decode domain answers or its
    /// domain carries no models (what a sweep prunes with: `vnni_measure::prune`).
    pub fn decode_predictions(&self, codebook: &str, mode: &str, n: u64, k: u64) -> Vec<(&str, u64)> {
        let Some(bucket) = self.m_bucket(1) else { return Vec::new() };
        match self.domain_index(codebook, mode, bucket, Some(self.aspect_bucket(n, k))) {
            Some(d) => self.model_predictions(d, n, k),
            None => Vec::new(),
        }
    }

    /// The candidate for one surface's domain: the overlay for the exact shape, else the
    /// domain's cost models, else its tree.
    fn choose(
        &self,
        codebook: &str,
        mode: &str,
        m_bucket: usize,
        n: u64,
        k: u64,
        overlays: bool,
    ) -> Result<(&CandidateDesc, Via, usize), PolicyError> {
        self.choose_visiting(codebook, mode, m_bucket, n, k, overlays, &mut |_| {})
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn choose_visiting(
        &self,
        codebook: &str,
        mode: &str,
        m_bucket: usize,
        n: u64,
        k: u64,
        overlays: bool,
        visit: &mut dyn FnMut(Step),
    ) -> Result<(&CandidateDesc, Via, usize), PolicyError> {
        let surface = self.m_buckets[m_bucket].surface;
        let aspect = (surface == Surface::Decode).then(|| self.aspect_bucket(n, k));
        let domain = self.domain_index(codebook, mode, m_bucket, aspect).ok_or_else(|| PolicyError::NoDomain {
            codebook: codebook.into(),
            mode: mode.into(),
            m_bucket,
            aspect,
        })?;
        // Overlays are sorted (`check`), so the exact entry is found by binary search.
        let key = (codebook, mode, m_bucket, n, k);
        let overlay = overlays
            .then(|| {
                let at = self.overlays.partition_point(|o| o.key() < key);
                self.overlays.get(at).filter(|o| o.key() == key)
            })
            .flatten();
        let (id, via) = match (overlay, self.model_pick(domain, n, k)) {
            (Some(o), _) => (o.candidate.as_str(), Via::Overlay),
            (None, Some((i, _))) => (self.domains[domain].models[i].candidate.as_str(), Via::Model),
            (None, None) => (self.walk_visiting(&self.domains[domain].tree, n, k, visit)?, Via::Tree),
        };
        let cand = self.candidate(id).ok_or_else(|| PolicyError::UnknownCandidate { id: id.into() })?;
        Ok((cand, via, domain))
    }

    /// Select the kernel for an M x N x K product (overlays on).
    pub fn select(&self, codebook: &str, mode: &str, m: u64, n: u64, k: u64) -> Result<Selection<'_>, PolicyError> {
        self.select_with(codebook, mode, m, n, k, true)
    }

    /// Select with overlays on or off (certification on the sealed partition runs with them off).
    pub fn select_with(
        &self,
        codebook: &str,
        mode: &str,
        m: u64,
        n: u64,
        k: u64,
        overlays: bool,
    ) -> Result<Selection<'_>, PolicyError> {
        if m == 0 || n == 0 || k == 0 || k % 32 != 0 || m > MAX_DIM || n > MAX_DIM || k > MAX_DIM {
            return Err(PolicyError::BadQuery { m, n, k });
        }
        if !self.codebooks.iter().any(|c| c == codebook) {
            return Err(PolicyError::UnknownCodebook { codebook: codebook.into() });
        }
        if !self.modes.iter().any(|c| c == mode) {
            return Err(PolicyError::UnknownMode { mode: mode.into() });
        }
        let bucket = self.m_bucket(m).ok_or(PolicyError::NoBucket { m })?;
        let decode_bucket = self.m_bucket(1).ok_or(PolicyError::NoBucket { m: 1 })?;
        let (m1, m1_via, m1_domain) = self.choose(codebook, mode, decode_bucket, n, k, overlays)?;
        let bpp = m1.bpp(n, k, self.units).ok_or_else(|| PolicyError::Illegal { id: m1.id.clone(), n, k })?;
        let kb = (k / 32).div_ceil(bpp);
        if bucket == decode_bucket {
            return Ok(Selection { candidate: m1, bpp, kb, via: m1_via, domain: m1_domain });
        }
        let (cand, via, domain) = self.choose(codebook, mode, bucket, n, k, overlays)?;
        Ok(Selection { candidate: cand, bpp, kb, via, domain })
    }
}
