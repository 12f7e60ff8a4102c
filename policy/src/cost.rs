//! The cost model a CUDA decode domain carries: per candidate, a latency prediction from the
//! launch the candidate makes for N x K, evaluated in integers so that this evaluator and the
//! generated C++ and Rust tables take the same argmin bit for bit. The learner fits the
//! coefficients (`vnni-learner`'s `cost_model.rs` says why this form) and scores exactly this
//! integer evaluation, so what is measured is what ships.
//!
//! For a launch of `ctas` CTAs of `threads` threads, `occ` of them resident per SM
//! (`vnni_kernels::occupancy`, sm_90 rules) on `units` SMs, and E = N * K elements:
//!
//! ```text
//! D     = threads * rate                        (threads in whole warps; per-thread rate rate / 64)
//! wave(r) = r * D + 65536 - floor(3 * min(r * D, 65536) / 4)
//!                                               (a soft knee: r resident CTAs are latency bound
//!                                                below a full draw of 65536, bandwidth bound above)
//! W     = (ctas / (units * occ)) * wave(occ) + [tail > 0] * wave(ceil(tail / units))
//! waves = (E / ctas) * W / D                    (elements per SM, stretched by each wave's draw)
//! turns = ceil(ctas / units) * 1024             (CTAs an SM runs in turn)
//! chain = ceil(K / kb) * ceil(ctas / (units * occ))
//!                                               (a thread's serial run over its K partition,
//!                                                once per round of resident CTAs)
//! reduce = [partials > 0] * kb * ceil(N / (units * 2048))
//!                                               (the split-K reduce's serial fold: kb partials
//!                                                a thread folds, once per round of its threads;
//!                                                graph-mode models only, `Provenance::reduce_term`)
//! t     = base + waves * cw + E * ce + partials * cp + turns * ct + chain * cc + reduce * cr
//!                                               (units of 2^-16 us)
//! ```
//!
//! with each coefficient `c = mantissa / 2^shift` applied as `(mantissa * x) >> shift`.
//! Bounds, for E <= 2^36 (64 G elements, 16x the largest weight matrix of any model we know;
//! beyond it the domain's tree answers), 4 <= rate <= 512 and 1 <= units < 2^31 (`check`
//! enforces both): D = threads * rate lies in 128 ..= 2^19; a wave's resident CTAs r <= 32,
//! so wave(r) <= 32 * D + 65536 <= 2^24 + 2^16 and wave(r) / D <= 32 + 512 = 544; W counts at
//! most full + [tail > 0] <= ctas waves, so (E / ctas) * W <= (2^24 + 2^16) * E < 2^61 and
//! waves <= 544 * E < 2^45.1; ctas <= N * K / 32 <= 2^31 (one CTA per tile and partition, at
//! least 32 elements each), so turns <= 2^41. A launch splits K into kb partitions over
//! ctas = tiles * kb CTAs (fused: tiles CTAs), tiles <= N, so chain <= ceil(K / kb) * ctas <=
//! (K + kb) * N <= 2^37, and reduce <= kb * N <= K / 32 * N <= 2^31. Each product with a
//! mantissa (< 2^16) is then below 2^61.1, 2^52, 2^51, 2^57, 2^53 and 2^47, and the sum with
//! `base` (<= 2^40) below 2^62: int64 never
//! overflows (a test walks the extremes with checked arithmetic, for units 1, 132 and
//! 2^31 - 1).

use serde::{Deserialize, Serialize};
use vnni_kernels::occupancy::blocks_per_sm;

use crate::correction::{self, Correction, Residual};
use crate::ir::{CandidateDesc, KbFormula};

/// The per-thread rate is `rate / RATE_DEN` of 1/1024 of an SM's bandwidth.
pub const RATE_DEN: u64 = 64;
/// One SM's full draw in units of `threads * rate`: `1024 * RATE_DEN`.
pub const FULL_DRAW: u64 = 1024 * RATE_DEN;
/// The time-weight of one wave whose resident CTAs draw `draw` (units of `threads * rate`):
/// `draw + FULL_DRAW - floor(3 * min(draw, FULL_DRAW) / 4)`, a soft knee between the latency
/// bound (few threads: ~ FULL_DRAW, whatever they draw) and the bandwidth bound (~ draw). The
/// hard knee `max(draw, FULL_DRAW)` is the same with 4/4; 3/4 was chosen on development
/// leave-one-family-out regret of the three committed H200 corpora (docs/PERF.md).
pub fn wave_draw(draw: u64) -> u64 {
    draw + FULL_DRAW - 3 * draw.min(FULL_DRAW) / 4
}

/// Threads of the split-K reduce resident on one SM (`vnni_reduce_partials`: 256-thread CTAs,
/// eight an SM).
pub const REDUCE_THREADS_PER_SM: u64 = 2048;
/// The most elements (N * K) the model answers for.
pub const MAX_ELEMENTS: u64 = 1 << 36;
/// Predictions are in units of 2^-TIME_BITS microseconds ...
pub const TIME_BITS: u32 = 16;
/// ... so this many make a microsecond.
pub const UNITS_PER_US: f64 = (1u64 << TIME_BITS) as f64;
/// Coefficient mantissas are below 2^MANTISSA_BITS ...
pub const MANTISSA_BITS: u32 = 16;
/// ... and shifts at most this (a shift by 64 or more is undefined in C++).
pub const MAX_SHIFT: u32 = 62;
/// `base` is at most this.
pub const MAX_BASE: u64 = 1 << 40;
/// The smallest `rate` (a thread at 1/16 of 1/1024 of an SM) ...
pub const MIN_RATE: u64 = 4;
/// ... and the largest (8/1024 of an SM).
pub const MAX_RATE: u64 = 512;

/// A non-negative coefficient `mantissa / 2^shift`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coef {
    pub mantissa: u64,
    pub shift: u32,
}

impl Coef {
    /// The zero coefficient (the term is off; left out of a policy's JSON).
    pub fn is_zero(&self) -> bool {
        *self == Coef::default()
    }

    /// `floor(mantissa * x / 2^shift)`.
    pub fn apply(self, x: u64) -> u64 {
        (self.mantissa * x) >> self.shift
    }

    /// The nearest representable coefficient to `value` (>= 0; saturates at the largest).
    pub fn quantize(value: f64) -> Coef {
        if value.is_nan() || value <= 0.0 {
            return Coef::default();
        }
        let top = (1u64 << MANTISSA_BITS) - 1;
        let mut shift = 0u32;
        while shift < MAX_SHIFT && value * 2f64.powi(shift as i32 + 1) < top as f64 {
            shift += 1;
        }
        let mantissa = (value * 2f64.powi(shift as i32)).round().min(top as f64) as u64;
        Coef { mantissa, shift }
    }

    pub fn value(self) -> f64 {
        self.mantissa as f64 / 2f64.powi(self.shift as i32)
    }
}

/// One candidate's model in one domain (the kernel resources are those of the domain's codebook).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostModel {
    pub candidate: String,
    /// Registers per thread of the kernel the candidate runs for the domain's codebook.
    pub registers: u32,
    /// Its static shared memory bytes (dynamic shared memory follows from the launch).
    pub shared_static: u32,
    /// Per-thread rate: `rate / 64` of 1/1024 of an SM's bandwidth (4 ..= 512).
    pub rate: u64,
    /// Fixed cost, 2^-16 us.
    pub base: u64,
    /// Per element-wave ([`Basis::waves`]), per element, per f32 partial, per CTA turn.
    pub waves: Coef,
    pub elements: Coef,
    pub partials: Coef,
    /// Per CTA an SM runs in turn ([`Basis::cta_rounds`]).
    pub cta_rounds: Coef,
    /// Per element of a thread's serial K run, per round of resident CTAs ([`Basis::chain`]);
    /// absent (zero) in policies fitted before the term existed, which predict as they did.
    #[serde(default)]
    pub chain: Coef,
    /// Per partition of the split-K reduce's serial fold, per round of its threads
    /// ([`Basis::reduce`]); absent (zero) in policies fitted before the term existed.
    #[serde(default, skip_serializing_if = "Coef::is_zero")]
    pub reduce: Coef,
    /// The sizes the model answers for: `from_elements <= N * K < below_elements`. A candidate
    /// may carry one model per size regime (ranges disjoint, `check` enforces it); absent:
    /// every size, as policies fitted before regimes predict.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub from_elements: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below_elements: Option<u64>,
    /// Its log residuals at the domain's anchors (`correction.rs`), by anchor; empty where the
    /// policy carries no correction.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub residuals: Vec<Residual>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The launch a decode candidate makes for N x K, reduced to what the model needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLaunch {
    pub ctas: u64,
    pub threads: u64,
    /// Dynamic shared memory bytes.
    pub shared: u64,
    /// f32 partials a split-K launch writes and reduces.
    pub partials: u64,
    /// The partitions K is split into (1: unsplit).
    pub kb: u64,
}

impl CandidateDesc {
    /// `fused_kpar`: tile * KB threads in one CTA per tile, 4 bytes of shared memory a thread.
    pub fn fused_launch(&self) -> bool {
        self.family == "fused_kpar"
    }

    /// `kpar`: a split launch (KB > 1) writes KB * N f32 partials and reduces them.
    pub fn writes_partials(&self) -> bool {
        self.family == "kpar"
    }

    /// The launch of this CUDA decode candidate for N x K (the registry's `plan`, reduced);
    /// `None` where the candidate is illegal or not a CUDA decode candidate.
    pub fn model_launch(&self, n: u64, k: u64, units: u64) -> Option<ModelLaunch> {
        if self.backend != "cuda" || self.kb == KbFormula::Inherited || self.tile == 0 || self.cpt == 0 {
            return None;
        }
        let bpp = self.bpp(n, k, units)?;
        let kb = (k / 32).div_ceil(bpp);
        let tiles = n.div_ceil(self.tile);
        let launch = if self.fused_launch() {
            let threads = self.tile * kb;
            ModelLaunch { ctas: tiles, threads, shared: threads * 4, partials: 0, kb }
        } else {
            let partials = if self.writes_partials() && kb > 1 { kb * n } else { 0 };
            ModelLaunch { ctas: tiles * kb, threads: self.tile / self.cpt, shared: 0, partials, kb }
        };
        (1..=1024).contains(&launch.threads).then_some(launch)
    }
}

/// The model's inputs for one launch: what the coefficients multiply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Basis {
    /// Elements per SM summed over waves, each wave stretched by the draw of its resident CTAs.
    pub waves: u64,
    /// N * K.
    pub elements: u64,
    pub partials: u64,
    /// CTAs each SM runs in turn, x 1024: ceil(ctas / units) << 10 (the shift keeps a
    /// coefficient of a few us per CTA representable).
    pub cta_rounds: u64,
    /// A thread's serial run over its K partition, once per round of resident CTAs:
    /// ceil(K / kb) * ceil(ctas / (units * occupancy)). It lowered leave-one-family-out regret
    /// on `core` (docs/PERF.md): without it the models of one candidate erred systematically
    /// in N and K (e.g. `fused.c32.cap4` +6-8% at N 12-16K,
    /// -7 to -13% at N 27-33K).
    pub chain: u64,
    /// The split-K reduce's serial fold: kb partials a thread folds in order, once per round
    /// of the reduce's threads (256-thread CTAs, 2048 threads an SM): kb * ceil(N / (units *
    /// 2048)) for a launch that writes partials, 0 otherwise.
    pub reduce: u64,
    /// Resident CTAs per SM.
    pub occupancy: u64,
}

impl Basis {
    /// `None` where N * K exceeds [`MAX_ELEMENTS`] or a CTA cannot be resident.
    pub fn of(
        l: &ModelLaunch,
        n: u64,
        k: u64,
        units: u64,
        registers: u32,
        shared_static: u32,
        rate: u64,
    ) -> Option<Basis> {
        let elements = n.checked_mul(k)?;
        if elements > MAX_ELEMENTS || l.ctas == 0 || l.kb == 0 || units == 0 || !(MIN_RATE..=MAX_RATE).contains(&rate) {
            return None;
        }
        let threads = u32::try_from(l.threads).ok()?;
        let shared = shared_static.checked_add(u32::try_from(l.shared).ok()?)?;
        let occ = u64::from(blocks_per_sm(threads, registers, shared));
        if occ == 0 {
            return None;
        }
        let slots = units * occ;
        Some(Basis {
            waves: waves(l, elements, units, occ, rate),
            elements,
            partials: l.partials,
            cta_rounds: l.ctas.div_ceil(units) << 10,
            chain: k.div_ceil(l.kb) * l.ctas.div_ceil(slots),
            reduce: if l.partials > 0 { l.kb * n.div_ceil(units * REDUCE_THREADS_PER_SM) } else { 0 },
            occupancy: occ,
        })
    }

    /// This basis (of launch `l` on `units` SMs) at another rate: only the waves term depends
    /// on it (a fit tries every rate on the same rows). `None` outside the rates allowed.
    pub fn at_rate(self, l: &ModelLaunch, units: u64, rate: u64) -> Option<Basis> {
        (MIN_RATE..=MAX_RATE)
            .contains(&rate)
            .then(|| Basis { waves: waves(l, self.elements, units, self.occupancy, rate), ..self })
    }
}

/// [`Basis::waves`] of launch `l` of `elements` on `units` SMs, `occ` CTAs resident per SM.
fn waves(l: &ModelLaunch, elements: u64, units: u64, occ: u64, rate: u64) -> u64 {
    // Threads count in whole warps (a CTA of 16 threads holds a warp's slot), which also
    // keeps D >= 32 * MIN_RATE for the bounds above.
    let d = l.threads.div_ceil(32) * 32 * rate;
    let wave = |resident: u64| wave_draw(resident * d);
    let slots = units * occ;
    let (full, tail) = (l.ctas / slots, l.ctas % slots);
    let mut w = full * wave(occ);
    if tail > 0 {
        w += wave(tail.div_ceil(units));
    }
    elements / l.ctas * w / d
}

impl CostModel {
    /// Whether N * K = `elements` lies in the model's size range.
    pub fn covers(&self, elements: u64) -> bool {
        elements >= self.from_elements && self.below_elements.is_none_or(|b| elements < b)
    }

    /// The model's inputs for `c` at N x K.
    pub fn basis(&self, c: &CandidateDesc, n: u64, k: u64, units: u64) -> Option<Basis> {
        let l = c.model_launch(n, k, units)?;
        Basis::of(&l, n, k, units, self.registers, self.shared_static, self.rate)
    }

    /// Predicted latency of `c` at N x K (2^-16 us); `None` where the model does not answer.
    pub fn predict(&self, c: &CandidateDesc, n: u64, k: u64, units: u64) -> Option<u64> {
        if !self.covers(n.checked_mul(k)?) {
            return None;
        }
        let b = self.basis(c, n, k, units)?;
        Some(
            self.base
                + self.waves.apply(b.waves)
                + self.elements.apply(b.elements)
                + self.partials.apply(b.partials)
                + self.cta_rounds.apply(b.cta_rounds)
                + self.chain.apply(b.chain)
                + self.reduce.apply(b.reduce),
        )
    }
}

/// A query's anchor weights under a policy's correction rule (`correction.rs`); `None` where
/// the policy or the domain carries none (predictions stay as the models give them).
pub struct Corrector<'a> {
    rule: &'a Correction,
    weights: Vec<i64>,
}

impl<'a> Corrector<'a> {
    /// For a query at N x K against anchors given as [`correction::log2_fixed`] pairs.
    pub fn new(rule: Option<&'a Correction>, anchors: &[(i64, i64)], n: u64, k: u64) -> Option<Corrector<'a>> {
        let rule = rule.filter(|_| !anchors.is_empty())?;
        let at = (correction::log2_fixed(n), correction::log2_fixed(k));
        Some(Corrector { rule, weights: rule.anchor_weights(anchors, at) })
    }

    /// Prediction `t` of a model with `residuals`, corrected.
    pub fn apply(&self, t: u64, residuals: &[Residual]) -> u64 {
        if residuals.is_empty() {
            return t;
        }
        correction::scale(t, self.rule.factor(&self.weights, residuals))
    }
}

/// A model's prediction at N x K, corrected where `corrector` is given; `None` where the
/// model does not answer or predicts 0 (a pair without a candidate answers nothing).
pub fn corrected(
    m: &CostModel,
    c: Option<&CandidateDesc>,
    n: u64,
    k: u64,
    units: u64,
    corrector: Option<&Corrector>,
) -> Option<u64> {
    let t = c.and_then(|c| m.predict(c, n, k, units)).filter(|&t| t > 0)?;
    Some(corrector.map_or(t, |x| x.apply(t, &m.residuals)))
}

/// The position of the (model, its candidate) pair whose prediction (corrected, where
/// `corrector` is given) is least among those answering with a positive one (the first on
/// ties), with that prediction; `None` where no model answers. The one tie-break the
/// evaluator, the tables and the learner share.
pub fn argmin<'a>(
    pairs: impl IntoIterator<Item = (&'a CostModel, Option<&'a CandidateDesc>)>,
    n: u64,
    k: u64,
    units: u64,
    corrector: Option<&Corrector>,
) -> Option<(usize, u64)> {
    let mut best: Option<(usize, u64)> = None;
    for (i, (m, c)) in pairs.into_iter().enumerate() {
        let Some(t) = corrected(m, c, n, k, units, corrector) else { continue };
        if best.is_none_or(|(_, b)| t < b) {
            best = Some((i, t));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use vnni_kernels::registry;

    /// Every CUDA decode candidate of the registry.
    fn cuda_decode() -> impl Iterator<Item = &'static registry::Candidate> {
        registry::all_candidates()
            .iter()
            .filter(|c| c.surface == registry::Surface::Decode && c.backend == registry::Backend::Cuda)
    }

    #[test]
    fn launches_match_the_registry_plans() {
        for c in cuda_decode() {
            let d = crate::descriptor(c);
            for n in [1u64, 17, 256, 4096, 5120, 100_352, 262_144] {
                for k in [32u64, 256, 2048, 3584, 14_336, 32_768] {
                    let plan = c.plan(n as usize, k as usize, 132);
                    let launch = d.model_launch(n, k, 132);
                    assert_eq!(plan.is_some(), launch.is_some(), "{} {n}x{k}", c.id);
                    let (Some(p), Some(l)) = (plan, launch) else { continue };
                    assert_eq!(l.ctas, u64::from(p.grid.0) * u64::from(p.grid.1), "{} {n}x{k}", c.id);
                    assert_eq!((l.threads, l.shared), (u64::from(p.threads), u64::from(p.shared)));
                    let kpar = c.family == registry::Family::Kpar;
                    assert_eq!(l.partials, if kpar { p.workspace as u64 } else { 0 }, "{}", c.id);
                }
            }
        }
    }

    #[test]
    fn a_second_wave_costs_time() {
        // fused.c16 at 16384 x 4096: capped at 8 partitions (128 threads, 9 CTAs an SM: one
        // wave of 1024) against waves64's 9 (144 threads, 7 an SM: 924 + a tail of 100).
        let one = crate::descriptor(registry::find("decode.fused.c16.cap8").unwrap());
        let two = crate::descriptor(registry::find("decode.fused.c16.waves64").unwrap());
        let model = |candidate: &str| CostModel {
            candidate: candidate.into(),
            registers: 54,
            shared_static: 0,
            rate: 64,
            base: 0,
            waves: Coef { mantissa: 1, shift: 0 },
            elements: Coef::default(),
            partials: Coef::default(),
            cta_rounds: Coef::default(),
            chain: Coef::default(),
            reduce: Coef::default(),
            from_elements: 0,
            below_elements: None,
            residuals: Vec::new(),
        };
        let a = model(&one.id).basis(&one, 16_384, 4096, 132).unwrap();
        let b = model(&two.id).basis(&two, 16_384, 4096, 132).unwrap();
        assert_eq!((a.occupancy, b.occupancy), (9, 7));
        assert!(b.waves > a.waves);
        let models = [model(&two.id), model(&one.id)];
        let pairs = models.iter().zip([Some(&two), Some(&one)]);
        assert_eq!(argmin(pairs, 16_384, 4096, 132, None).map(|x| x.0), Some(1));
    }

    #[test]
    fn the_reduce_term_counts_a_split_launchs_serial_fold() {
        // Only kpar launches that split K write partials; their reduce folds kb of them a
        // thread, once per round of 2048 threads an SM.
        let kpar = crate::descriptor(registry::find("decode.kpar.tn256.cpt1.waves2").unwrap());
        let fused = crate::descriptor(registry::find("decode.fused.c16.cap8").unwrap());
        let m = |c: &CandidateDesc, reduce: Coef| CostModel {
            candidate: c.id.clone(),
            registers: 40,
            shared_static: 0,
            rate: 64,
            base: 0,
            waves: Coef::default(),
            elements: Coef::default(),
            partials: Coef::default(),
            cta_rounds: Coef::default(),
            chain: Coef::default(),
            reduce,
            from_elements: 0,
            below_elements: None,
            residuals: Vec::new(),
        };
        let one = Coef { mantissa: 1, shift: 0 };
        for (n, k) in [(512u64, 14_848u64), (4096, 4096), (300_000, 4096)] {
            let l = kpar.model_launch(n, k, 132).unwrap();
            let b = m(&kpar, one).basis(&kpar, n, k, 132).unwrap();
            let rounds = n.div_ceil(132 * REDUCE_THREADS_PER_SM);
            assert_eq!(b.reduce, if l.kb > 1 { l.kb * rounds } else { 0 }, "{n}x{k}");
            assert_eq!(m(&kpar, one).predict(&kpar, n, k, 132), Some(b.reduce));
            assert_eq!(m(&fused, one).basis(&fused, n, k, 132).unwrap().reduce, 0);
        }
        // Few column tiles, many partitions: the fold is long.
        assert!(m(&kpar, one).basis(&kpar, 512, 14_848, 132).unwrap().reduce > 32);
        // A model without the term (every policy from before it) predicts as it did.
        assert!(Coef::default().is_zero() && !one.is_zero());
        let json = serde_json::to_string(&m(&kpar, Coef::default())).unwrap();
        assert!(!json.contains("reduce"), "{json}");
    }

    #[test]
    fn the_largest_shapes_do_not_overflow() {
        // Worst cases of every decode candidate at the model's limit: checked arithmetic on
        // the same formula finds no overflow where the model answers.
        let max = |m: &CostModel, b: &Basis| {
            let term = |c: Coef, x: u64| c.mantissa.checked_mul(x).map(|v| v >> c.shift);
            [
                term(m.waves, b.waves),
                term(m.elements, b.elements),
                term(m.partials, b.partials),
                term(m.cta_rounds, b.cta_rounds),
                term(m.chain, b.chain),
                term(m.reduce, b.reduce),
            ]
            .into_iter()
            .try_fold(m.base, |acc, t| acc.checked_add(t?))
        };
        let top = Coef { mantissa: (1 << MANTISSA_BITS) - 1, shift: 0 };
        for c in cuda_decode() {
            let d = crate::descriptor(c);
            for (n, k) in
                [(1u64 << 18, 1u64 << 18), (1 << 31, 32), (32, 1 << 31), (4, 1 << 34), (1 << 25, 2048), (1, 32)]
            {
                for (rate, units) in
                    [MIN_RATE, 64, MAX_RATE].into_iter().flat_map(|r| [(r, 1), (r, 132), (r, (1 << 31) - 1)])
                {
                    let m = CostModel {
                        candidate: d.id.clone(),
                        registers: 32,
                        shared_static: 0,
                        rate,
                        base: MAX_BASE,
                        waves: top,
                        elements: top,
                        partials: top,
                        cta_rounds: top,
                        chain: top,
                        reduce: top,
                        from_elements: 0,
                        below_elements: None,
                        residuals: Vec::new(),
                    };
                    if let Some(b) = m.basis(&d, n, k, units) {
                        let t = max(&m, &b).unwrap_or_else(|| panic!("{} {n}x{k} units {units} overflows", d.id));
                        assert!(t < 1 << 62, "{} {n}x{k} units {units}", d.id);
                    }
                }
            }
            assert!(CostModel {
                candidate: d.id.clone(),
                registers: 32,
                shared_static: 0,
                rate: 64,
                base: 0,
                waves: top,
                elements: top,
                partials: top,
                cta_rounds: top,
                chain: top,
                reduce: top,
                from_elements: 0,
                below_elements: None,
                residuals: Vec::new(),
            }
            .basis(&d, (1 << 18) + 1, 1 << 18, 132)
            .is_none());
        }
    }

    #[test]
    fn quantization_keeps_sixteen_bits() {
        for v in [1e-9, 3.7e-5, 0.5, 1.0, 123.456, 65_535.0] {
            let c = Coef::quantize(v);
            assert!(c.mantissa < 1 << MANTISSA_BITS && c.shift <= MAX_SHIFT);
            assert!((c.value() / v - 1.0).abs() < 2e-5, "{v} -> {c:?}");
        }
        assert_eq!(Coef::quantize(0.0), Coef::default());
        assert_eq!(Coef::quantize(-1.0), Coef::default());
        assert_eq!(Coef::quantize(1e9).mantissa, (1 << MANTISSA_BITS) - 1);
    }
}
