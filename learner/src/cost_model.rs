//! A per-candidate latency model of decode (M = 1) launches, fitted on the measured cells of
//! one domain and used to label shapes that were never measured (`distill.rs`).
//!
//! Why this form: decode GEMVs stream the weights once, so time is bytes over the bandwidth
//! the launch can draw, and what the launch can draw is set by how its CTAs fall into waves.
//! CTAs are placed `occupancy` per SM (`occupancy.rs`); a full wave keeps `occupancy` CTAs on
//! each SM, the tail wave `ceil(tail / SMs)`. An SM moves its CTAs' bytes at
//! `min(1, resident x threads x beta / 1024)` of its share of the bandwidth: few small CTAs
//! are latency bound, enough of them saturate it. The measured cliffs this captures are
//! large: on the H200 `fused.c16` at 16384 x 4096 runs 54% slower with 9 partitions (7 CTAs
//! an SM fit, a second wave of 100) than with 8 (9 fit, one wave).
//!
//! `t = o + s * waves_term(beta) + q * bytes + r * partials` with `o, s, q, r >= 0` (exact
//! non-negative least squares over relative error) and `beta` from a fixed log grid. Fits
//! are deterministic: fixed grid, sums in row order, strict improvement to replace a fit.

use vnni_kernels::registry::{Candidate, Family};
use vnni_kernels::Codebook;

use crate::occupancy::blocks_per_sm;

/// One launch of a candidate on one shape, reduced to what the model needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Launch {
    pub ctas: u64,
    pub threads: u32,
    /// Resident CTAs per SM (at least 1: a launch that does not fit is not a candidate).
    pub occupancy: u32,
    pub bytes: f64,
    /// f32 partials a split-K launch writes and reduces (0 for one-pass launches).
    pub partials: f64,
}

/// The kernel resources a launch needs besides its plan: registers per thread and static
/// shared bytes of the kernel the candidate runs for the domain's codebook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelResources {
    pub registers: u32,
    pub shared_static: u32,
}

impl Launch {
    /// `None` where the candidate is illegal for the shape or cannot be resident.
    pub fn of(c: &Candidate, codebook: Codebook, n: u64, k: u64, sms: u32, res: KernelResources) -> Option<Launch> {
        let plan = c.plan(n as usize, k as usize, sms)?;
        let ctas = u64::from(plan.grid.0) * u64::from(plan.grid.1);
        let occupancy = blocks_per_sm(plan.threads, res.registers, res.shared_static + plan.shared);
        if occupancy == 0 {
            return None;
        }
        let partials = if c.family == Family::Kpar && plan.kb > 1 { (plan.kb as f64) * n as f64 } else { 0.0 };
        Some(Launch {
            ctas,
            threads: plan.threads,
            occupancy,
            bytes: n as f64 * (k / 32) as f64 * codebook.block_bytes() as f64,
            partials,
        })
    }

    /// Bytes per SM of each wave, each divided by the share of an SM's bandwidth the wave's
    /// resident CTAs can draw at per-thread rate `beta`; summed over waves.
    fn waves_term(&self, sms: u32, beta: f64) -> f64 {
        let sms = u64::from(sms);
        let slots = sms * u64::from(self.occupancy);
        let per_cta = self.bytes / self.ctas as f64;
        let wave = |resident: u64| {
            let draw = (resident as f64 * f64::from(self.threads) * beta / 1024.0).min(1.0);
            per_cta * resident as f64 / draw
        };
        let full = self.ctas / slots;
        let tail = self.ctas % slots;
        let mut t = full as f64 * wave(u64::from(self.occupancy));
        if tail > 0 {
            t += wave(tail.div_ceil(sms));
        }
        t
    }

    fn basis(&self, sms: u32, beta: f64) -> [f64; 4] {
        [1.0, self.waves_term(sms, beta) / 1e6, self.bytes / 1e6, self.partials / 1e6]
    }
}

/// The per-thread rates tried, `2^(i/2)` for i in -8..=6.
fn betas() -> impl Iterator<Item = f64> {
    (-8..=6).map(|i| 2f64.powf(f64::from(i) / 2.0))
}

/// One candidate's fitted model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CandidateModel {
    beta: f64,
    coef: [f64; 4],
}

/// Rows a model needs before it is trusted; a candidate with fewer is left unmodelled.
pub const MIN_ROWS: usize = 5;

impl CandidateModel {
    /// Fit from (launch, median us) rows; `None` with fewer than [`MIN_ROWS`].
    pub fn fit(rows: &[(Launch, f64)], sms: u32) -> Option<CandidateModel> {
        if rows.len() < MIN_ROWS {
            return None;
        }
        let mut best: Option<(f64, CandidateModel)> = None;
        for beta in betas() {
            // Relative error: each row divided by its measured time.
            let x: Vec<[f64; 4]> = rows.iter().map(|(l, t)| l.basis(sms, beta).map(|v| v / t)).collect();
            let (coef, err) = nnls4(&x, &vec![1.0; rows.len()]);
            if best.as_ref().is_none_or(|(e, _)| err < *e) {
                best = Some((err, CandidateModel { beta, coef }));
            }
        }
        best.map(|(_, m)| m)
    }

    /// Predicted median latency (us).
    pub fn predict(&self, l: &Launch, sms: u32) -> f64 {
        l.basis(sms, self.beta).iter().zip(&self.coef).map(|(b, c)| b * c).sum()
    }
}

/// Exact non-negative least squares for 4 unknowns: the best of the unconstrained
/// least-squares solutions over every subset of free variables whose solution is
/// non-negative (the optimum is one of them). Returns (coefficients, squared error).
fn nnls4(x: &[[f64; 4]], y: &[f64]) -> ([f64; 4], f64) {
    let mut best = ([0.0; 4], y.iter().map(|v| v * v).sum::<f64>());
    for mask in 1u32..16 {
        let free: Vec<usize> = (0..4).filter(|i| mask & (1 << i) != 0).collect();
        let Some(sol) = least_squares(x, y, &free) else { continue };
        if sol.iter().any(|&v| v < 0.0) {
            continue;
        }
        let mut coef = [0.0; 4];
        for (i, &f) in free.iter().enumerate() {
            coef[f] = sol[i];
        }
        let err: f64 = x
            .iter()
            .zip(y)
            .map(|(row, t)| {
                let p: f64 = row.iter().zip(&coef).map(|(a, b)| a * b).sum();
                (p - t) * (p - t)
            })
            .sum();
        if err < best.1 {
            best = (coef, err);
        }
    }
    best
}

/// Solve the normal equations on the `free` columns by Gaussian elimination with partial
/// pivoting; `None` when they are singular.
fn least_squares(x: &[[f64; 4]], y: &[f64], free: &[usize]) -> Option<Vec<f64>> {
    let m = free.len();
    let mut a = vec![vec![0.0; m + 1]; m];
    for (row, t) in x.iter().zip(y) {
        for i in 0..m {
            for j in 0..m {
                a[i][j] += row[free[i]] * row[free[j]];
            }
            a[i][m] += row[free[i]] * t;
        }
    }
    for col in 0..m {
        let pivot = (col..m).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()).then(q.cmp(&p)))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (x, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *x -= f * p;
                }
            }
        }
    }
    Some((0..m).map(|i| a[i][m] / a[i][i]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vnni_kernels::registry::find;

    #[test]
    fn a_second_wave_costs_time() {
        // fused.c16 at 16384 x 4096: capped at 8 partitions (128 threads, 9 CTAs an SM: one
        // wave of 1024) against waves64's 9 (144 threads, 7 an SM: 924 + a tail of 100).
        let res = KernelResources { registers: 54, shared_static: 0 };
        let one = Launch::of(find("decode.fused.c16.cap8").unwrap(), Codebook::S4, 16_384, 4096, 132, res).unwrap();
        let two = Launch::of(find("decode.fused.c16.waves64").unwrap(), Codebook::S4, 16_384, 4096, 132, res).unwrap();
        assert_eq!((one.ctas, one.occupancy, two.occupancy), (1024, 9, 7));
        assert!(two.waves_term(132, 1.0) > one.waves_term(132, 1.0));
        assert_eq!(one.bytes, 16_384.0 * 128.0 * 18.0);
    }

    #[test]
    fn the_fit_recovers_a_model_it_generated() {
        let res = KernelResources { registers: 64, shared_static: 0 };
        let c = find("decode.kpar.tn128.cpt1.waves2").unwrap();
        let truth = CandidateModel { beta: 2f64.powf(-1.5), coef: [3.0, 0.002, 0.0001, 0.0] };
        let rows: Vec<(Launch, f64)> =
            [(4096, 4096), (8192, 2048), (24_576, 8192), (1024, 16_384), (65_536, 512), (2048, 2048)]
                .iter()
                .map(|&(n, k)| {
                    let l = Launch::of(c, Codebook::S8, n, k, 132, res).unwrap();
                    (l, truth.predict(&l, 132))
                })
                .collect();
        let fit = CandidateModel::fit(&rows, 132).unwrap();
        for (l, t) in &rows {
            assert!((fit.predict(l, 132) / t - 1.0).abs() < 1e-6, "{} vs {t}", fit.predict(l, 132));
        }
        assert_eq!(fit, CandidateModel::fit(&rows, 132).unwrap());
        assert!(CandidateModel::fit(&rows[..4], 132).is_none());
    }

    #[test]
    fn nnls_clamps_negative_coefficients_to_zero() {
        // y = 2 * x0 exactly; x1 anticorrelated: its unconstrained weight would be negative.
        let x: Vec<[f64; 4]> = (1..8).map(|i| [f64::from(i), 8.0 - f64::from(i), 0.0, 1.0]).collect();
        let y: Vec<f64> = (1..8).map(|i| 2.0 * f64::from(i)).collect();
        let (coef, err) = nnls4(&x, &y);
        assert!(coef.iter().all(|&c| c >= 0.0) && err < 1e-18, "{coef:?} {err}");
        assert!((coef[0] - 2.0).abs() < 1e-9);
    }
}
