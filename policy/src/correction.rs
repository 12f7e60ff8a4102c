//! The local residual correction of a CUDA decode domain's cost models, in integers so that
//! this evaluator and the generated C++ and Rust tables take the same argmin bit for bit.
//!
//! A cost model's form is global over its domain; where it errs, it errs alike on nearby
//! shapes (leave one family out on `core`: held-out errors of 2-9% that a neighbouring
//! development shape shares, docs/PERF.md). The learner stores, per model, the log residual
//! ln(measured / predicted) at each development shape (an *anchor*) where the candidate was
//! measured; a query's prediction is multiplied by exp(c), with
//!
//! ```text
//! c = strength * sum_a w_a r_a / (sum_a w_a + prior)   (clamped to +-1/2)
//! w_a = exp(-d_a^2 / h^2)                              (the policy's weight table)
//! d_a = distance from the query to anchor a in (log2 N, log2 K), in 1/64 octave
//! ```
//!
//! so a shape far from every anchor keeps the model's prediction (sum w = 0, c = 0) and one
//! on an anchor moves part of the way toward what was measured there.
//!
//! Integers: log2 in 1/64 octave by squaring ([`log2_fixed`]); weights w in 2^-16 from the
//! table (`weights[d^2 / step]`, 0 past its end); residuals r in 2^-16 of ln, |r| <= 2^15;
//! c in 2^-16; exp(c) ~ 1 + c + c^2/2 + c^3/6 + c^4/24 (under 0.06% off at |c| = 1/2, and
//! monotone there). Every division truncates toward zero (as `/` does in C++ and Rust). Bounds,
//! with at most [`MAX_ANCHORS`] = 2^12 anchors a domain, |r| <= 2^15, w <= 2^16, strength <=
//! 256: |sum w r| <= 2^12 * 2^16 * 2^15 = 2^43 and times strength <= 2^51; (sum w + prior) * 256
//! < 2^37; the factor E = 2^16 exp(c) lies in 39,700 ..= 108,100 (< 2^17), and a prediction
//! t < 2^62 is multiplied as (t / 2^16) * E + (t % 2^16) * E / 2^16 < 2^46 * 2^17 = 2^63.

use serde::{Deserialize, Serialize};

/// Fraction bits of [`log2_fixed`]: 1/64 octave.
pub const LOG_FRACTION_BITS: u32 = 6;
/// Anchors a domain may carry (the generated tables keep one weight per anchor of a domain on
/// the stack: 32 KiB at most).
pub const MAX_ANCHORS: usize = 1 << 12;
/// A residual's largest magnitude (2^-16 of ln): ln 1.65.
pub const MAX_RESIDUAL: i32 = 1 << 15;
/// The correction exponent's largest magnitude (2^-16): 1/2.
pub const MAX_EXPONENT: i64 = 1 << 15;
/// Q16 one.
pub const ONE: i64 = 1 << 16;
/// The strength is `strength / STRENGTH_DEN`.
pub const STRENGTH_DEN: i64 = 256;
/// The weight table's largest length.
pub const MAX_WEIGHTS: usize = 4096;

/// The policy-wide rule: how strongly, how locally (the weight table) and with what prior
/// weight the anchors' residuals correct a prediction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Correction {
    /// lambda = strength / 256 (0 ..= 256).
    pub strength: i64,
    /// The prior weight in the denominator, 2^-16 (1 ..= 2^20): with few anchors near, little moves.
    pub prior: i64,
    /// Squared distance, in (1/64 octave)^2, per weight-table entry (1 ..= 2^20).
    pub step: i64,
    /// `weights[i]` = 2^16 exp(-d^2 / h^2) for d^2 in [i * step, (i + 1) * step), 0 past the end.
    pub weights: Vec<i64>,
}

/// A model's log residual at one anchor of its domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Residual {
    /// Index into the domain's anchors.
    pub anchor: u32,
    /// ln(measured / predicted) in 2^-16, |value| <= [`MAX_RESIDUAL`].
    pub value: i32,
}

impl Correction {
    /// The rule for a Gaussian of `h` octaves, `lambda` and `prior` (in weight units, 1 = one
    /// anchor at distance 0), the table cut where the weight is below 2^-13.
    pub fn gaussian(h: f64, lambda: f64, prior: f64) -> Correction {
        let unit = (1u64 << LOG_FRACTION_BITS) as f64;
        let h2 = (h * unit) * (h * unit);
        // Fine enough for narrow Gaussians, and wide ones still fade out inside the table.
        let step = 16i64.max((9.5 * h2 / MAX_WEIGHTS as f64).ceil() as i64);
        let mut weights = Vec::new();
        loop {
            let d2 = (weights.len() as f64 + 0.5) * step as f64;
            let w = (ONE as f64 * (-d2 / h2).exp()).round() as i64;
            if w < 8 || weights.len() == MAX_WEIGHTS {
                break;
            }
            weights.push(w);
        }
        Correction {
            strength: (lambda * STRENGTH_DEN as f64).round() as i64,
            prior: (prior * ONE as f64).round() as i64,
            step,
            weights,
        }
    }

    /// The weight of every anchor (given as [`log2_fixed`] pairs) for a query at (log2 N, log2 K).
    pub fn anchor_weights(&self, anchors: &[(i64, i64)], at: (i64, i64)) -> Vec<i64> {
        anchors
            .iter()
            .map(|&anchor| {
                let i = squared_distance(at, anchor) / self.step;
                usize::try_from(i).ok().and_then(|i| self.weights.get(i)).copied().unwrap_or(0)
            })
            .collect()
    }

    /// The factor 2^16 exp(c) for one model's residuals under anchor weights `w`.
    pub fn factor(&self, w: &[i64], residuals: &[Residual]) -> i64 {
        let (mut sw, mut swr) = (0i64, 0i64);
        for r in residuals {
            let wa = w[r.anchor as usize];
            sw += wa;
            swr += wa * i64::from(r.value);
        }
        if sw == 0 {
            return ONE;
        }
        let c = (swr * self.strength / ((sw + self.prior) * STRENGTH_DEN)).clamp(-MAX_EXPONENT, MAX_EXPONENT);
        let c2 = c * c / ONE;
        let c3 = c2 * c / ONE;
        let c4 = c3 * c / ONE;
        ONE + c + c2 / 2 + c3 / 6 + c4 / 24
    }
}

/// The squared distance of two [`log2_fixed`] pairs, in (1/64 octave)^2.
pub fn squared_distance(a: (i64, i64), b: (i64, i64)) -> i64 {
    let (dn, dk) = (a.0 - b.0, a.1 - b.1);
    dn * dn + dk * dk
}

/// `t * factor / 2^16`, split so that t < 2^62 and factor < 2^17 never overflow, and at
/// least 1 (a corrected prediction stays positive, as the learner's scoring assumes).
pub fn scale(t: u64, factor: i64) -> u64 {
    let f = factor as u64;
    ((t >> 16) * f + (((t & 0xffff) * f) >> 16)).max(1)
}

/// log2(x) in 1/64 octave, x >= 1 (0 for 0): the integer part from the highest set bit, six
/// fraction bits by squaring the mantissa (each square doubles the log; a square past 2
/// is one bit). Integers only, the same in every language.
pub fn log2_fixed(x: u64) -> i64 {
    if x == 0 {
        return 0;
    }
    let e = 63 - i64::from(x.leading_zeros());
    // The mantissa in [2^31, 2^32): x / 2^e in 2^-31.
    let mut m = if e >= 31 { x >> (e - 31) } else { x << (31 - e) };
    let mut f = 0i64;
    for _ in 0..LOG_FRACTION_BITS {
        m = (m * m) >> 31;
        f <<= 1;
        if m >= 1 << 32 {
            m >>= 1;
            f |= 1;
        }
    }
    (e << LOG_FRACTION_BITS) | f
}

/// The [`log2_fixed`] pairs of anchors given as (N, K).
pub fn anchor_logs(anchors: &[[u64; 2]]) -> Vec<(i64, i64)> {
    anchors.iter().map(|&[n, k]| (log2_fixed(n), log2_fixed(k))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_is_within_a_step_of_the_real_one() {
        for x in (1u64..5000).chain([4096, 5120, 14_336, 151_936, 248_320, (1 << 31) - 1, 1 << 40, u64::MAX]) {
            let got = log2_fixed(x) as f64 / 64.0;
            let want = (x as f64).log2();
            assert!(got <= want + 1e-9 && want - got < 1.0 / 32.0, "{x}: {got} vs {want}");
        }
        assert_eq!(log2_fixed(1), 0);
        assert_eq!(log2_fixed(4096), 12 * 64);
        // Monotone.
        let v: Vec<i64> = (1u64..70_000).map(log2_fixed).collect();
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn the_factor_follows_exp_and_stays_in_bounds() {
        let rule = Correction::gaussian(0.35, 1.0, 0.0001);
        let w = vec![ONE];
        for c in [-0.5f64, -0.2, -0.01, 0.0, 0.01, 0.2, 0.5, 3.0] {
            let value = (c * ONE as f64).round().clamp(-(MAX_RESIDUAL as f64), MAX_RESIDUAL as f64) as i32;
            let f = rule.factor(&w, &[Residual { anchor: 0, value }]) as f64 / ONE as f64;
            let want = (value as f64 / ONE as f64).exp();
            assert!((f / want - 1.0).abs() < 0.001, "{c}: {f} vs {want}");
            assert!(f > 0.6 && f < 1.65);
        }
        // Extremes of `scale`.
        assert_eq!(scale((1 << 62) - 1, 108_100) >> 62, 1);
        assert_eq!(scale(123_456_789, ONE), 123_456_789);
    }

    #[test]
    fn weights_fall_with_distance_and_far_anchors_correct_nothing() {
        let rule = Correction::gaussian(0.35, 0.5, 0.5);
        assert!(rule.weights.windows(2).all(|w| w[0] >= w[1]));
        let anchors = anchor_logs(&[[4096, 4096], [8192, 4096], [1 << 20, 4096]]);
        let at = (log2_fixed(4096), log2_fixed(4096));
        let w = rule.anchor_weights(&anchors, at);
        assert!(w[0] > 60_000 && w[1] < w[0] / 2 && w[2] == 0, "{w:?}");
        let far = [Residual { anchor: 2, value: 20_000 }];
        assert_eq!(rule.factor(&w, &far), ONE);
        let near = [Residual { anchor: 0, value: 20_000 }];
        assert!(rule.factor(&w, &near) > ONE);
    }
}
