//! Totality: every positive M reaches exactly one bucket, every legal (N, K) exactly one
//! leaf of its domain, every codebook owns every domain, every id names a registry candidate
//! of the right surface. A policy that fails here is never generated or installed.

use std::collections::BTreeSet;

use crate::correction::{self, Correction};
use crate::cost;
use crate::eval::MAX_DIM;
use crate::ir::{CostModel, Domain, Feature, KbFormula, Node, Policy, Surface, SCHEMA};
use crate::PolicyError;

fn bad(what: String) -> PolicyError {
    PolicyError::NotTotal { what }
}

impl Policy {
    /// Check structure and totality; the error names the first violation.
    pub fn check(&self) -> Result<(), PolicyError> {
        if self.schema != SCHEMA {
            return Err(bad(format!("schema {:?} is not {SCHEMA:?}", self.schema)));
        }
        // Bounded so that waves * units and units * occupancy stay far from overflow in every
        // language (the cost model's bounds in cost.rs hold for any units up to this).
        if self.units == 0 || self.units > MAX_DIM {
            return Err(bad(format!("units (SMs or threads) {} is not in 1..=2^31-1", self.units)));
        }
        self.check_buckets()?;
        self.check_correction_rule()?;
        for w in self.aspect_edges.windows(2) {
            if w[0].num as u128 * w[1].den as u128 >= w[1].num as u128 * w[0].den as u128 {
                return Err(bad(format!("aspect edges are not strictly ascending at {}/{}", w[1].num, w[1].den)));
            }
        }
        for e in &self.aspect_edges {
            if e.den == 0 || e.num > MAX_DIM || e.den > MAX_DIM {
                return Err(bad(format!("aspect edge {}/{} is out of range", e.num, e.den)));
            }
        }
        unique_sorted("codebooks", &self.codebooks, false)?;
        unique_sorted("modes", &self.modes, false)?;
        // The words of the runtime keys are the registry's vocabulary (they also name report
        // files, so nothing else may pass).
        for c in &self.codebooks {
            c.parse::<vnni_kernels::Codebook>().map_err(|e| bad(e.to_string()))?;
        }
        for m in &self.modes {
            m.parse::<vnni_kernels::Mode>().map_err(|e| bad(e.to_string()))?;
        }
        if self.codebooks.is_empty() || self.modes.is_empty() {
            return Err(bad("a policy needs at least one codebook and one mode".into()));
        }
        let ids: Vec<String> = self.candidates.iter().map(|c| c.id.clone()).collect();
        unique_sorted("candidates", &ids, true)?;
        for c in &self.candidates {
            if c.tile == 0 {
                return Err(bad(format!("candidate {} has tile 0", c.id)));
            }
            if (c.surface == Surface::Decode) == (c.kb == KbFormula::Inherited) {
                return Err(bad(format!("candidate {}: decode candidates derive bpp, others inherit it", c.id)));
            }
        }
        self.check_domains()?;
        for o in &self.overlays {
            let at = format!("overlay {} {} bucket {} {}x{}", o.codebook, o.mode, o.m_bucket, o.n, o.k);
            if !self.codebooks.contains(&o.codebook) || !self.modes.contains(&o.mode) {
                return Err(bad(format!("{at}: codebook or mode not in the policy")));
            }
            let Some(bucket) = self.m_buckets.get(o.m_bucket) else {
                return Err(bad(format!("{at}: no such M bucket")));
            };
            if o.n == 0 || o.k == 0 || o.k % 32 != 0 || o.n > MAX_DIM || o.k > MAX_DIM {
                return Err(bad(format!("{at}: not a legal shape")));
            }
            let c = self
                .candidate(&o.candidate)
                .ok_or_else(|| PolicyError::UnknownCandidate { id: o.candidate.clone() })?;
            if c.surface != bucket.surface {
                return Err(bad(format!("{at}: {} serves {:?}, the bucket {:?}", c.id, c.surface, bucket.surface)));
            }
            if c.surface == Surface::Decode && c.bpp(o.n, o.k, self.units).is_none() {
                return Err(PolicyError::Illegal { id: c.id.clone(), n: o.n, k: o.k });
            }
        }
        for w in self.overlays.windows(2) {
            let o = &w[1];
            if w[0].key() == o.key() {
                return Err(bad(format!(
                    "overlay {} {} bucket {} {}x{} is listed twice",
                    o.codebook, o.mode, o.m_bucket, o.n, o.k
                )));
            }
            if w[0].key() > o.key() {
                return Err(bad(format!(
                    "overlays are not sorted by (codebook, mode, bucket, N, K) at {} {} bucket {} {}x{}",
                    o.codebook, o.mode, o.m_bucket, o.n, o.k
                )));
            }
        }
        Ok(())
    }

    fn check_buckets(&self) -> Result<(), PolicyError> {
        let b = &self.m_buckets;
        if b.is_empty() {
            return Err(bad("no M buckets".into()));
        }
        if b[0].lo != 1 || b[0].hi != Some(1) || b[0].surface != Surface::Decode {
            return Err(bad("the first M bucket must be exactly M = 1, served by decode".into()));
        }
        for (i, w) in b.windows(2).enumerate() {
            let Some(hi) = w[0].hi else {
                return Err(bad(format!("M bucket {i} is unbounded but not the last")));
            };
            if w[1].lo != hi + 1 {
                return Err(bad(format!(
                    "M {} reaches no bucket (bucket {i} ends at {hi}, bucket {} starts at {})",
                    hi + 1,
                    i + 1,
                    w[1].lo
                )));
            }
            if w[1].hi.is_some_and(|h| h < w[1].lo) || w[1].surface == Surface::Decode {
                return Err(bad(format!("M bucket {} is empty or claims decode", i + 1)));
            }
        }
        if b.last().is_some_and(|l| l.hi.is_some()) {
            return Err(bad(format!(
                "M above {} reaches no bucket (the last bucket must be unbounded)",
                b.last().unwrap().hi.unwrap()
            )));
        }
        Ok(())
    }

    fn check_domains(&self) -> Result<(), PolicyError> {
        let mut expected = BTreeSet::new();
        for cb in &self.codebooks {
            for mode in &self.modes {
                for (bi, b) in self.m_buckets.iter().enumerate() {
                    if b.surface == Surface::Decode {
                        for a in 0..=self.aspect_edges.len() {
                            expected.insert((cb.clone(), mode.clone(), bi, Some(a)));
                        }
                    } else {
                        expected.insert((cb.clone(), mode.clone(), bi, None));
                    }
                }
            }
        }
        let mut seen = BTreeSet::new();
        for d in &self.domains {
            let key = (d.codebook.clone(), d.mode.clone(), d.m_bucket, d.aspect);
            let name = format!("domain {} {} bucket {} aspect {:?}", d.codebook, d.mode, d.m_bucket, d.aspect);
            if !expected.contains(&key) {
                return Err(bad(format!("{name} is not a domain of this policy")));
            }
            if !seen.insert(key) {
                return Err(bad(format!("{name} is listed twice")));
            }
            let surface = self.m_buckets[d.m_bucket].surface;
            self.check_tree(&d.tree, &name, surface, "root")?;
            self.check_models(&d.models, &name, surface)?;
            self.check_correction(d, &name)?;
        }
        if let Some((cb, mode, bi, a)) = expected.difference(&seen).next() {
            return Err(bad(format!(
                "domain {cb} {mode} bucket {bi} aspect {a:?} is missing: its queries reach no tree"
            )));
        }
        Ok(())
    }

    /// The policy's correction rule, once: inside the bounds `correction.rs` proves overflow-free.
    fn check_correction_rule(&self) -> Result<(), PolicyError> {
        if let Some(Correction { strength, prior, step, weights }) = &self.correction {
            let weights_ok =
                weights.len() <= correction::MAX_WEIGHTS && weights.iter().all(|w| (0..=correction::ONE).contains(w));
            if !(0..=correction::STRENGTH_DEN).contains(strength)
                || !(1..=1 << 20).contains(prior)
                || !(1..=1 << 20).contains(step)
                || !weights_ok
            {
                return Err(bad(format!(
                    "the correction rule is out of range (strength {strength} in 0..=256, prior {prior} and step {step} in 1..=2^20, {} weights (<= {}) each in 0..=65536)",
                    weights.len(),
                    correction::MAX_WEIGHTS
                )));
            }
        }
        Ok(())
    }

    /// A domain's correction data (`correction.rs`): anchors sorted, distinct, legal
    /// dimensions, at most `MAX_ANCHORS`, only beside models and a rule; residuals by
    /// ascending anchor, each naming one, inside +-`MAX_RESIDUAL`.
    fn check_correction(&self, d: &Domain, domain: &str) -> Result<(), PolicyError> {
        let residuals = d.models.iter().any(|m| !m.residuals.is_empty());
        if (residuals || !d.anchors.is_empty()) && (self.correction.is_none() || d.models.is_empty()) {
            return Err(bad(format!("{domain}: anchors or residuals without cost models and a correction rule")));
        }
        if d.anchors.len() > correction::MAX_ANCHORS {
            return Err(bad(format!("{domain}: {} anchors (at most {})", d.anchors.len(), correction::MAX_ANCHORS)));
        }
        if let Some(w) = d.anchors.windows(2).find(|w| w[0] >= w[1]) {
            return Err(bad(format!("{domain}: anchors {:?} and {:?} are not sorted and distinct", w[0], w[1])));
        }
        if let Some(a) = d.anchors.iter().find(|a| a.iter().any(|&v| v == 0 || v > MAX_DIM)) {
            return Err(bad(format!("{domain}: anchor {a:?} is not a legal shape")));
        }
        for m in &d.models {
            let sorted = m.residuals.windows(2).all(|w| w[0].anchor < w[1].anchor);
            let named = m.residuals.iter().all(|r| (r.anchor as usize) < d.anchors.len());
            let small =
                m.residuals.iter().all(|r| (-correction::MAX_RESIDUAL..=correction::MAX_RESIDUAL).contains(&r.value));
            if !(sorted && named && small) {
                return Err(bad(format!(
                    "{domain}: model of {}: residuals not by ascending anchor, naming no anchor, or beyond +-{}",
                    m.candidate,
                    correction::MAX_RESIDUAL
                )));
            }
        }
        Ok(())
    }

    /// Cost models: decode only, generic CUDA decode candidates (those the learner could
    /// fit), sorted by (candidate, size range), a candidate's ranges disjoint (at most one of
    /// its models answers a shape), every number inside the bounds `cost.rs` proves
    /// overflow-free, and the candidate's launch inside them too (tile and cpt bounded).
    fn check_models(&self, models: &[CostModel], domain: &str, surface: Surface) -> Result<(), PolicyError> {
        if !models.is_empty() && surface != Surface::Decode {
            return Err(bad(format!("{domain}: cost models serve decode domains only")));
        }
        for w in models.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            let disjoint = a.candidate < b.candidate
                || (a.candidate == b.candidate && a.below_elements.is_some_and(|e| e <= b.from_elements));
            if !disjoint {
                return Err(bad(format!(
                    "{domain}: models of {} and {} are not sorted by candidate, or their size ranges overlap \
                     ({}..{:?} then {}..{:?})",
                    a.candidate, b.candidate, a.from_elements, a.below_elements, b.from_elements, b.below_elements
                )));
            }
        }
        for m in models {
            let at = format!("{domain}: model of {}", m.candidate);
            let limit = cost::MAX_ELEMENTS;
            if m.from_elements > limit || m.below_elements.is_some_and(|b| b <= m.from_elements || b > limit + 1) {
                return Err(bad(format!(
                    "{at}: size range {}..{:?} is empty or reaches past the model limit 2^36",
                    m.from_elements, m.below_elements
                )));
            }
            let c = self
                .candidate(&m.candidate)
                .ok_or_else(|| PolicyError::UnknownCandidate { id: m.candidate.clone() })?;
            if c.surface != Surface::Decode || !c.generic_legal || c.backend != "cuda" {
                return Err(bad(format!("{at}: not a generic CUDA decode candidate")));
            }
            if c.tile > 1024 || c.cpt == 0 || c.max_kb.is_some_and(|m| m > 1024) {
                return Err(bad(format!("{at}: tile {} / cpt {} / max_kb {:?} out of range", c.tile, c.cpt, c.max_kb)));
            }
            let shared_max = vnni_kernels::occupancy::SHARED;
            if !(cost::MIN_RATE..=cost::MAX_RATE).contains(&m.rate)
                || m.base > cost::MAX_BASE
                || m.registers > 255
                || m.shared_static > shared_max
            {
                return Err(bad(format!(
                    "{at}: rate {} ({}..={}), base {} (<= 2^40), registers {} (<= 255) or static shared {} \
                     (<= {shared_max}) out of range",
                    m.rate,
                    cost::MIN_RATE,
                    cost::MAX_RATE,
                    m.base,
                    m.registers,
                    m.shared_static
                )));
            }
            let coefs = [
                ("waves", m.waves),
                ("elements", m.elements),
                ("partials", m.partials),
                ("CTA turns", m.cta_rounds),
                ("K chain", m.chain),
                ("reduce", m.reduce),
            ];
            for (name, coef) in coefs {
                if coef.mantissa >> cost::MANTISSA_BITS != 0 || coef.shift > cost::MAX_SHIFT {
                    return Err(bad(format!("{at}: {name} coefficient {coef:?} out of range")));
                }
            }
        }
        Ok(())
    }

    fn check_tree(&self, node: &Node, domain: &str, surface: Surface, path: &str) -> Result<(), PolicyError> {
        match node {
            Node::Leaf { candidate } => {
                let c =
                    self.candidate(candidate).ok_or_else(|| PolicyError::UnknownCandidate { id: candidate.clone() })?;
                if !c.generic_legal {
                    return Err(bad(format!("{domain} {path}: leaf {candidate} is overlay-only")));
                }
                if c.surface != surface {
                    return Err(bad(format!(
                        "{domain} {path}: leaf {candidate} serves {:?}, not {surface:?}",
                        c.surface
                    )));
                }
                Ok(())
            }
            Node::Split { feature, left, right, .. } => {
                if let Feature::Tiles { w } | Feature::Waves { w } = feature {
                    if *w == 0 {
                        return Err(bad(format!("{domain} {path}: feature width 0")));
                    }
                }
                let l = left.as_deref().ok_or_else(|| bad(format!("{domain} {path}: the left branch is missing")))?;
                let r = right.as_deref().ok_or_else(|| bad(format!("{domain} {path}: the right branch is missing")))?;
                self.check_tree(l, domain, surface, &format!("{path}.left"))?;
                self.check_tree(r, domain, surface, &format!("{path}.right"))
            }
        }
    }
}

fn unique_sorted(what: &str, v: &[String], sorted: bool) -> Result<(), PolicyError> {
    for w in v.windows(2) {
        if w[0] == w[1] || (sorted && w[0] > w[1]) {
            return Err(bad(format!("{what} are not unique{}: {:?}", if sorted { " and sorted" } else { "" }, w[1])));
        }
    }
    Ok(())
}
