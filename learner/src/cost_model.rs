//! Fitting the per-candidate latency model of decode (M = 1) launches that CUDA decode
//! domains carry (`vnni_policy::cost` states and evaluates it, in integers, as the tables do).
//!
//! Why this form: decode GEMVs stream the weights once, so time is bytes over the bandwidth
//! the launch can draw, and what the launch can draw is set by how its CTAs fall into waves.
//! CTAs are placed `occupancy` per SM (`vnni_kernels::occupancy`); a full wave keeps
//! `occupancy` CTAs on each SM, the tail wave `ceil(tail / SMs)`. An SM moves its CTAs' bytes
//! at about `min(1, resident x threads x rate / 65536)` of its share of the bandwidth: few small
//! CTAs are latency bound, enough of them saturate it. The knee between the two is soft
//! (`vnni_policy::cost::wave_draw`): with the hard `max`, leave-one-family-out regret of the
//! shipped models on the development rows (p95 / geomean / max) was 6.20% / 1.34% / 16.0%
//! (`h200-generic`), 6.94% / 1.72% / 26.4% (`h200-grid`), 8.11% / 1.80% / 18.4%
//! (`h200-session`); with the soft knee of weight 3/4 5.65% / 1.20% / 16.0%, 7.24% / 1.56% /
//! 18.3%, 7.87% / 1.75% / 18.4% (weights 0 and 1/2 were better on some geomeans and worse on
//! other maxima). The measured cliffs this captures are
//! large: on the H200 `fused.c16` at 16384 x 4096 runs 54% slower with 9 partitions (7 CTAs
//! an SM fit, a second wave of 100) than with 8 (9 fit, one wave).
//!
//! `t = base + cw * waves + ce * elements + cp * partials + ct * turns + cc * chain` (turns:
//! the CTAs each SM runs in turn; a per-CTA cost lowered leave-one-family-out regret on
//! `h200-generic` from 6.47% / 1.45% to 6.20% / 1.34%, p95 / geomean, a per-wave cost did not
//! help; chain: a thread's serial run over its K partition, once per round of resident CTAs.
//! Residuals of the five-term models on `core` correlated with the number of waves and with K
//! (kpar: r = 0.35-0.40 with CTAs per slot), and of the columns tried on shape-held-out folds
//! of all four corpora (CTAs, sqrt(turns), N, K, K / KB, elements per slot, log N) this one
//! lowered geomean regret on every corpus; leave one family out, what ships, p95 / geomean /
//! max: `core` 6.23% / 1.04% / 30.2% -> 5.79% / 0.91% / 28.1%, `h200-generic` 5.65% / 1.20% /
//! 16.0% -> 5.69% / 1.09% / 11.4%, `h200-grid` 7.24% / 1.56% / 18.3% -> 7.79% / 1.43% / 18.3%,
//! `h200-session` 7.87% / 1.75% / 18.4% -> 8.64% / 1.81% / 19.1%: better on the two larger
//! corpora, worse on the smallest), `+ cr * reduce` in graph domains of a policy fitted with
//! `reduce_term` (the split-K reduce's serial fold, `vnni_policy::cost::Basis::reduce`; off by
//! default, docs/PERF.md says why), with every coefficient >= 0, fitted
//! by exact non-negative least squares over relative error, each row weighted by the policy's
//! `Focus` (rows where the candidate competes count most), for each rate of a fixed grid
//! (`rate / 64` = 2^(i/2), i in -8..=6, rounded to integers), the rate of least error kept.
//! The coefficients are then quantized to what the policy stores, and everything downstream
//! (distillation, cross-validation, the gates) scores the quantized integer model: what is
//! measured is what ships. Fits are deterministic: fixed grid, sums in row order, strict
//! improvement to replace a fit.

use vnni_policy::cost::{Basis, ModelLaunch, UNITS_PER_US};
use vnni_policy::{Coef, CostModel};

/// Registers per thread and static shared bytes of the kernel a candidate runs for a codebook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelResources {
    pub registers: u32,
    pub shared_static: u32,
}

/// One measured launch: the launch, its shape, the median latency (us) and the row's weight
/// in the fit (`vnni_policy::Focus`; 1 without one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    pub launch: ModelLaunch,
    pub n: u64,
    pub k: u64,
    pub us: f64,
    pub weight: f64,
}

/// The rates tried: `64 * 2^(i/2)` for i in -8..=6, rounded (4 .. 512).
pub const RATES: [u64; 15] = [4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256, 362, 512];

/// Rows a model needs before it is trusted; a candidate with fewer is left unmodelled.
pub const MIN_ROWS: usize = 5;

const COLS: usize = 7;
/// The column of the waves term, the only one that depends on the rate.
const WAVES: usize = 1;
/// The column of the split-K reduce term, left out of fits without it.
const REDUCE: usize = 6;

/// The basis columns, scaled for the normal equations (1e6 units per column unit; 1e3 for
/// the K chain, which is thousands of elements where the others are millions).
fn columns(b: &Basis) -> [f64; COLS] {
    [
        1.0,
        b.waves as f64 / 1e6,
        b.elements as f64 / 1e6,
        b.partials as f64 / 1e6,
        b.cta_rounds as f64 / 1e6,
        b.chain as f64 / 1e3,
        b.reduce as f64 / 1e3,
    ]
}

/// Fit one candidate's model from its observations on `units` SMs; `None` with fewer than
/// [`MIN_ROWS`] usable rows. `candidate` names it in the policy.
pub fn fit(candidate: &str, rows: &[Observation], units: u64, res: KernelResources, reduce: bool) -> Option<CostModel> {
    if rows.len() < MIN_ROWS {
        return None;
    }
    // Every basis but its waves term is the same at every rate (a row none answers at one
    // rate, none answers at any).
    let basis: Vec<Basis> = rows
        .iter()
        .map(|o| Basis::of(&o.launch, o.n, o.k, units, res.registers, res.shared_static, RATES[0]))
        .collect::<Option<_>>()?;
    // Weighted least squares: each row (and its target, 1) scaled by the root of its weight;
    // a weight of 1 leaves every product as it was, bit for bit.
    let root: Vec<f64> = rows.iter().map(|o| o.weight.sqrt()).collect();
    let y = root.clone();
    let mut x: Vec<[f64; COLS]> = Vec::with_capacity(rows.len());
    let mut normal: Option<Normal<COLS>> = None;
    let mut best: Option<(f64, u64, [f64; COLS])> = None;
    for rate in RATES {
        // Relative error: each row divided by its measured time.
        x.clear();
        for ((b, o), r) in basis.iter().zip(rows).zip(&root) {
            x.push(columns(&b.at_rate(&o.launch, units, rate)?).map(|v| v / o.us * r));
        }
        // The sums of the other columns are those of the first rate, bit for bit.
        let normal = match normal.as_mut() {
            Some(n) => {
                n.replace_column(WAVES, &x, &y);
                n
            }
            None => normal.insert(Normal::of(&x, &y)),
        };
        let (coef, err) = nnls(normal, if reduce { u32::MAX } else { !(1 << REDUCE) });
        if best.as_ref().is_none_or(|(e, _, _)| err < *e) {
            best = Some((err, rate, coef));
        }
    }
    let (_, rate, coef) = best?;
    // us -> 2^-16 us; the scaled columns back to one element per unit.
    let scale = UNITS_PER_US;
    Some(CostModel {
        candidate: candidate.into(),
        registers: res.registers,
        shared_static: res.shared_static,
        rate,
        base: (coef[0] * scale).round().clamp(0.0, vnni_policy::cost::MAX_BASE as f64) as u64,
        waves: Coef::quantize(coef[1] * scale / 1e6),
        elements: Coef::quantize(coef[2] * scale / 1e6),
        partials: Coef::quantize(coef[3] * scale / 1e6),
        cta_rounds: Coef::quantize(coef[4] * scale / 1e6),
        chain: Coef::quantize(coef[5] * scale / 1e3),
        reduce: Coef::quantize(coef[6] * scale / 1e3),
        from_elements: 0,
        below_elements: None,
        residuals: Vec::new(),
    })
}

/// Where a candidate's models change, in elements (N x K = 2^26, e.g. 8192 x 8192): one
/// five-term form does not span a 4096 x 4096 projection and a 128K-row vocabulary. Fitted
/// per regime (windows overlapping by 8x each way), leave-one-family-out regret of what ships
/// (p95 / geomean / max) on the four development corpora: `core` 5.79% / 0.91% / 28.05% ->
/// 4.94% / 0.81% / 28.05%, `h200-generic` 5.69% / 1.09% / 11.37% -> 5.38% / 1.04% / 10.78%,
/// `h200-grid` and `h200-session` within 0.01 point. Windows overlapping by 4x gained more on
/// `h200-generic` and lost a maximum on `h200-grid` (18.25% -> 24.40%); 2x was worse
/// (docs/PERF.md).
pub const REGIME_EDGE: u64 = 1 << 26;

/// How far each regime's fitting window reaches past the edge (a factor).
pub const REGIME_OVERLAP: u64 = 8;

/// Rows a regime's own model needs; with fewer, the regime keeps the model of every row.
pub const REGIME_MIN_ROWS: usize = 8;

/// One candidate's models, one per size regime: below [`REGIME_EDGE`] fitted on the rows
/// below [`REGIME_OVERLAP`] x the edge, from the edge on the rows from the edge /
/// [`REGIME_OVERLAP`] (the windows overlap so each side is fitted across the seam). A regime
/// with too few rows of its own keeps the model of every row; where both do, that model alone
/// answers every size. Empty where no model fits. Sorted as the policy stores them (size
/// range ascending).
pub fn fit_regimes(
    candidate: &str,
    rows: &[Observation],
    units: u64,
    res: KernelResources,
    reduce: bool,
) -> Vec<CostModel> {
    let every = || fit(candidate, rows, units, res, reduce);
    let own = |window: &dyn Fn(u64) -> bool| {
        let rows: Vec<Observation> = rows.iter().filter(|o| window(o.n * o.k)).copied().collect();
        if rows.len() >= REGIME_MIN_ROWS {
            fit(candidate, &rows, units, res, reduce)
        } else {
            None
        }
    };
    let below = own(&|e| e < REGIME_OVERLAP * REGIME_EDGE);
    let from = own(&|e| e >= REGIME_EDGE / REGIME_OVERLAP);
    if below.is_none() && from.is_none() {
        return every().into_iter().collect();
    }
    let below = below.or_else(every).map(|m| CostModel { below_elements: Some(REGIME_EDGE), ..m });
    let from = from.or_else(every).map(|m| CostModel { from_elements: REGIME_EDGE, ..m });
    below.into_iter().chain(from).collect()
}

/// Exact non-negative least squares: the best of the unconstrained least-squares solutions
/// over every subset of free variables whose solution is non-negative (the optimum is one of
/// them), subsets of `columns` (a bit mask) only. Returns (coefficients, squared error). The
/// normal equations are summed once over every column and each subset takes its rows and
/// columns from them: the same additions in the same row order as summing per subset, so the
/// same bits, at about a tenth of the summing (and a fit without a column takes exactly the
/// subsets, and the bits, it took before the column existed).
fn nnls<const C: usize>(normal: &Normal<C>, columns: u32) -> ([f64; C], f64) {
    let mut best = ([0.0; C], normal.yty);
    let mut free = [0usize; C];
    for mask in (1u32..(1 << C)).filter(|m| m & !columns == 0) {
        let mut m = 0;
        for i in (0..C).filter(|i| mask & (1 << i) != 0) {
            free[m] = i;
            m += 1;
        }
        let free = &free[..m];
        let Some(sol) = normal.solve(free) else { continue };
        if sol[..m].iter().any(|&v| v < 0.0) {
            continue;
        }
        let mut coef = [0.0; C];
        for (i, &f) in free.iter().enumerate() {
            coef[f] = sol[i];
        }
        let err = normal.error(&coef);
        if err < best.1 {
            best = (coef, err);
        }
    }
    best
}

/// The normal equations of every column: `xtx[i][j]` = sum of x_i x_j, `xty[i]` = sum of x_i y,
/// `yty` = sum of y^2, each summed in row order.
struct Normal<const C: usize> {
    xtx: [[f64; C]; C],
    xty: [f64; C],
    yty: f64,
}

impl<const C: usize> Normal<C> {
    fn of(x: &[[f64; C]], y: &[f64]) -> Normal<C> {
        let mut n = Normal { xtx: [[0.0; C]; C], xty: [0.0; C], yty: 0.0 };
        for (row, t) in x.iter().zip(y) {
            n.yty += t * t;
            for i in 0..C {
                for j in 0..C {
                    n.xtx[i][j] += row[i] * row[j];
                }
                n.xty[i] += row[i] * t;
            }
        }
        n
    }

    /// Sum column `i` again from `x` and `y` (the other columns unchanged): every entry it
    /// enters is summed as [`Normal::of`] sums it (a product of two doubles does not depend on
    /// their order, so row i and column i are the same sums), so the result is that of summing
    /// `x` whole.
    fn replace_column(&mut self, i: usize, x: &[[f64; C]], y: &[f64]) {
        let (mut col, mut rhs) = ([0.0; C], 0.0);
        for (row, t) in x.iter().zip(y) {
            for (sum, v) in col.iter_mut().zip(row) {
                *sum += row[i] * v;
            }
            rhs += row[i] * t;
        }
        self.xtx[i] = col;
        for (j, &v) in col.iter().enumerate() {
            self.xtx[j][i] = v;
        }
        self.xty[i] = rhs;
    }

    /// The squared error of `coef`, |X c - y|^2 = c' X'X c - 2 c' X'y + y'y, from the sums
    /// alone: each of the 2^C subsets is scored without another pass over the rows (the
    /// residuals are a few percent of y, so the cancellation costs a few of 16 digits).
    fn error(&self, coef: &[f64; C]) -> f64 {
        let mut quad = 0.0;
        let mut lin = 0.0;
        for i in 0..C {
            for j in 0..C {
                quad += coef[i] * self.xtx[i][j] * coef[j];
            }
            lin += coef[i] * self.xty[i];
        }
        quad - 2.0 * lin + self.yty
    }

    /// Solve the normal equations on the `free` columns by Gaussian elimination with partial
    /// pivoting; `None` when they are singular.
    /// (On the stack: the first `free.len()` entries of the result are the solution.)
    fn solve(&self, free: &[usize]) -> Option<[f64; C]> {
        let m = free.len();
        let mut a = [[0.0; C]; C];
        let mut b = [0.0; C];
        for (r, &i) in free.iter().enumerate() {
            for (c, &j) in free.iter().enumerate() {
                a[r][c] = self.xtx[i][j];
            }
            b[r] = self.xty[i];
        }
        for col in 0..m {
            let pivot = (col..m).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()).then(q.cmp(&p)))?;
            if a[pivot][col].abs() < 1e-12 {
                return None;
            }
            a.swap(col, pivot);
            b.swap(col, pivot);
            let (pivot_row, pivot_b) = (a[col], b[col]);
            for r in 0..m {
                if r != col {
                    let f = a[r][col] / pivot_row[col];
                    for (x, p) in a[r][..m].iter_mut().zip(&pivot_row[..m]).skip(col) {
                        *x -= f * p;
                    }
                    b[r] -= f * pivot_b;
                }
            }
        }
        let mut out = [0.0; C];
        for i in 0..m {
            out[i] = b[i] / a[i][i];
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vnni_kernels::registry::find;

    #[test]
    fn the_fit_recovers_a_model_it_generated() {
        let res = KernelResources { registers: 64, shared_static: 0 };
        let desc = vnni_policy::descriptor(find("decode.kpar.tn128.cpt1.waves2").unwrap());
        let truth = CostModel {
            candidate: desc.id.clone(),
            registers: 64,
            shared_static: 0,
            rate: 23,
            base: 3 << 16,
            waves: Coef::quantize(0.002 * 65_536.0 / 1e6 * 1e3),
            elements: Coef::quantize(1e-4 * 65_536.0 / 1e6),
            partials: Coef::default(),
            cta_rounds: Coef::quantize(0.05),
            chain: Coef::quantize(0.4),
            reduce: Coef::default(),
            from_elements: 0,
            below_elements: None,
            residuals: Vec::new(),
        };
        let rows: Vec<Observation> = [
            (4096, 4096),
            (8192, 2048),
            (24_576, 8192),
            (1024, 16_384),
            (65_536, 512),
            (2048, 2048),
            (3072, 3072),
            (16_384, 1024),
            (512, 8192),
            (40_960, 5120),
        ]
        .iter()
        .map(|&(n, k)| Observation {
            launch: desc.model_launch(n, k, 132).unwrap(),
            n,
            k,
            us: truth.predict(&desc, n, k, 132).unwrap() as f64 / 65_536.0,
            weight: 1.0,
        })
        .collect();
        let fitted = fit(&desc.id, &rows, 132, res, true).unwrap();
        assert_eq!(fitted.rate, truth.rate);
        for o in &rows {
            let p = fitted.predict(&desc, o.n, o.k, 132).unwrap() as f64 / 65_536.0;
            assert!((p / o.us - 1.0).abs() < 1e-3, "{p} vs {}", o.us);
        }
        assert_eq!(Some(fitted), fit(&desc.id, &rows, 132, res, true));
        assert!(fit(&desc.id, &rows[..4], 132, res, true).is_none());
    }

    #[test]
    fn rows_of_low_weight_barely_move_the_fit() {
        // Ten rows on one line and three far off it: weighted 1, the three pull the fit away
        // from the line; weighted 1/1000, the fit stays on it.
        let res = KernelResources { registers: 64, shared_static: 0 };
        let desc = vnni_policy::descriptor(find("decode.fused.c32.cap16").unwrap());
        let line = |n: u64, k: u64| 2.0 + (n * k) as f64 / 4.0e6;
        let shapes = [(4096, 4096), (8192, 2048), (2048, 8192), (16_384, 4096), (4096, 14_336), (1024, 4096)];
        let mut rows: Vec<Observation> = shapes
            .iter()
            .chain(&[(12_288, 4096), (6144, 6144), (3072, 3072), (28_672, 4096)])
            .map(|&(n, k)| Observation {
                launch: desc.model_launch(n, k, 132).unwrap(),
                n,
                k,
                us: line(n, k),
                weight: 1.0,
            })
            .collect();
        let on_line: Vec<Observation> = rows.clone();
        let error = |m: &CostModel| -> f64 {
            on_line
                .iter()
                .map(|o| (m.predict(&desc, o.n, o.k, 132).unwrap() as f64 / 65_536.0 / o.us - 1.0).abs())
                .fold(0.0, f64::max)
        };
        let clean = fit(&desc.id, &rows, 132, res, true).unwrap();
        for &(n, k) in &shapes[..3] {
            rows.push(Observation {
                launch: desc.model_launch(n, k, 132).unwrap(),
                n,
                k,
                us: 3.0 * line(n, k),
                weight: 1.0,
            });
        }
        let pulled = fit(&desc.id, &rows, 132, res, true).unwrap();
        for o in &mut rows[10..] {
            o.weight = 1e-3;
        }
        let focused = fit(&desc.id, &rows, 132, res, true).unwrap();
        let (clean, pulled, focused) = (error(&clean), error(&pulled), error(&focused));
        assert!(clean < 0.01 && pulled > 0.05 && focused < pulled / 5.0, "{clean} {pulled} {focused}");
    }

    #[test]
    fn each_size_regime_gets_its_own_model_when_it_has_the_rows() {
        let res = KernelResources { registers: 64, shared_static: 0 };
        let desc = vnni_policy::descriptor(find("decode.kpar.tn128.cpt1.waves2").unwrap());
        let truth = |base: u64, elements: f64| CostModel {
            candidate: desc.id.clone(),
            registers: 64,
            shared_static: 0,
            rate: 23,
            base: base << 16,
            waves: Coef::quantize(2.0 * 65_536.0 / 1e6),
            elements: Coef::quantize(elements * 65_536.0 / 1e6),
            partials: Coef::default(),
            cta_rounds: Coef::quantize(0.05),
            chain: Coef::quantize(0.4),
            reduce: Coef::default(),
            from_elements: 0,
            below_elements: None,
            residuals: Vec::new(),
        };
        // Small shapes follow one truth, large ones another.
        let (small, large) = (truth(3, 1e-4), truth(9, 3e-4));
        let shapes = |ns: &[u64], k: u64| ns.iter().map(move |&n| (n, k)).collect::<Vec<_>>();
        let observe = |shapes: &[(u64, u64)]| -> Vec<Observation> {
            shapes
                .iter()
                .map(|&(n, k)| {
                    let m = if n * k < REGIME_EDGE { &small } else { &large };
                    let us = m.predict(&desc, n, k, 132).unwrap() as f64 / 65_536.0;
                    Observation { launch: desc.model_launch(n, k, 132).unwrap(), n, k, us, weight: 1.0 }
                })
                .collect()
        };
        // Outside each other's fitting windows: below edge / 8, from edge * 8.
        let below = shapes(&[512, 1024, 1536, 2048, 3072, 4096, 5120, 6144, 7168], 1024);
        let above = [
            shapes(&[65_536, 98_304, 131_072, 151_936, 200_000, 262_144], 8192),
            shapes(&[32_768, 49_152, 98_304], 16_384),
        ]
        .concat();
        let rows = observe(&[below.clone(), above.clone()].concat());
        let models = fit_regimes(&desc.id, &rows, 132, res, true);
        assert_eq!(models.len(), 2);
        assert_eq!((models[0].from_elements, models[0].below_elements), (0, Some(REGIME_EDGE)));
        assert_eq!((models[1].from_elements, models[1].below_elements), (REGIME_EDGE, None));
        for o in &rows {
            let m = &models[usize::from(o.n * o.k >= REGIME_EDGE)];
            let p = m.predict(&desc, o.n, o.k, 132).unwrap() as f64 / 65_536.0;
            assert!((p / o.us - 1.0).abs() < 1e-3, "{} x {}: {p} vs {}", o.n, o.k, o.us);
        }
        // One row above the edge: the large regime keeps the model of every row.
        let rows = observe(&[below.clone(), above[..1].to_vec()].concat());
        let models = fit_regimes(&desc.id, &rows, 132, res, true);
        let every = fit(&desc.id, &rows, 132, res, true).unwrap();
        assert_eq!(models[1], CostModel { from_elements: REGIME_EDGE, ..every.clone() });
        assert_ne!(models[0], CostModel { below_elements: Some(REGIME_EDGE), ..every });
        // Too few rows for either regime: one model answers every size.
        let rows = observe(&[below[..4].to_vec(), above[..3].to_vec()].concat());
        assert_eq!(fit_regimes(&desc.id, &rows, 132, res, true), vec![fit(&desc.id, &rows, 132, res, true).unwrap()]);
        assert!(fit_regimes(&desc.id, &rows[..4], 132, res, true).is_empty());
    }

    /// The fixtures' fixed pseudo-random stream of `seed`, as doubles in [0, 1].
    fn stream(seed: u64) -> impl FnMut() -> f64 {
        let mut index = 0;
        move || {
            index += 1;
            vnni_kernels::fixture::splitmix64(seed, index) as f64 / u64::MAX as f64
        }
    }

    #[test]
    fn subsets_of_the_normal_equations_are_the_per_subset_sums_bit_for_bit() {
        // Rows of the fixtures' fixed pseudo-random stream, in [0, 1] like the fit's scaled columns.
        let mut next = stream(7);
        let x: Vec<[f64; COLS]> = (0..37).map(|_| std::array::from_fn(|_| next())).collect();
        let y: Vec<f64> = (0..37).map(|_| 1.0 + next()).collect();
        let normal = Normal::of(&x, &y);
        for mask in 1u32..(1 << COLS) {
            let free: Vec<usize> = (0..COLS).filter(|i| mask & (1 << i) != 0).collect();
            // What summing each subset's own normal equations gives.
            let m = free.len();
            let mut a = vec![vec![0.0; m + 1]; m];
            for (row, t) in x.iter().zip(&y) {
                for i in 0..m {
                    for j in 0..m {
                        a[i][j] += row[free[i]] * row[free[j]];
                    }
                    a[i][m] += row[free[i]] * t;
                }
            }
            for i in 0..m {
                for j in 0..m {
                    assert_eq!(a[i][j].to_bits(), normal.xtx[free[i]][free[j]].to_bits());
                }
                assert_eq!(a[i][m].to_bits(), normal.xty[free[i]].to_bits());
            }
            let sol = normal.solve(&free).unwrap();
            let fitted: Vec<f64> = x.iter().map(|row| free.iter().zip(&sol).map(|(&f, s)| row[f] * s).sum()).collect();
            // The least-squares residual is orthogonal to every free column.
            for &f in &free {
                let dot: f64 = x.iter().zip(&y).zip(&fitted).map(|((row, t), p)| row[f] * (t - p)).sum();
                assert!(dot.abs() < 1e-9, "mask {mask:b}: {dot}");
            }
        }
    }

    #[test]
    fn summing_one_column_again_is_summing_the_rows_again_bit_for_bit() {
        let mut next = stream(11);
        let mut x: Vec<[f64; COLS]> = (0..41).map(|_| std::array::from_fn(|_| next())).collect();
        let y: Vec<f64> = (0..x.len()).map(|_| 1.0 + next()).collect();
        let mut normal = Normal::of(&x, &y);
        for row in &mut x {
            row[WAVES] = next() * 3.0;
        }
        normal.replace_column(WAVES, &x, &y);
        let whole = Normal::of(&x, &y);
        for i in 0..COLS {
            for j in 0..COLS {
                assert_eq!(normal.xtx[i][j].to_bits(), whole.xtx[i][j].to_bits(), "{i} {j}");
            }
            assert_eq!(normal.xty[i].to_bits(), whole.xty[i].to_bits(), "{i}");
        }
        assert_eq!(normal.yty.to_bits(), whole.yty.to_bits());
    }

    #[test]
    fn nnls_clamps_negative_coefficients_to_zero() {
        // y = 2 * x0 exactly; x1 anticorrelated: its unconstrained weight would be negative.
        let x: Vec<[f64; 4]> = (1..8).map(|i| [f64::from(i), 8.0 - f64::from(i), 0.0, 1.0]).collect();
        let y: Vec<f64> = (1..8).map(|i| 2.0 * f64::from(i)).collect();
        let (coef, err) = nnls(&Normal::of(&x, &y), u32::MAX);
        assert!(coef.iter().all(|&c| c >= 0.0) && err < 1e-18, "{coef:?} {err}");
        assert!((coef[0] - 2.0).abs() < 1e-9);
    }
}
