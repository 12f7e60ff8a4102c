//! Sample statistics of the timing protocol.

/// Summary of one candidate's samples (microseconds per launch).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub min: f64,
    /// The label the learner uses.
    pub median: f64,
    /// Nearest-rank 95th percentile.
    pub p95: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
    /// Coefficient of variation (population standard deviation over mean).
    pub cv: f64,
}

fn median_sorted(s: &[f64]) -> f64 {
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Geometric-mean regret: exp(mean ln(1 + r)) - 1; 0 for no values (the learner's regrets and
/// a pruning audit's losses).
pub fn geomean_regret(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    (values.iter().map(|r| r.ln_1p()).sum::<f64>() / values.len() as f64).exp_m1()
}

/// Nearest-rank percentile `q` (0 < q <= 1) of sorted samples.
pub fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

pub fn summarize(samples: &[f64]) -> Option<Summary> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let median = median_sorted(&s);
    let mut dev: Vec<f64> = s.iter().map(|v| (v - median).abs()).collect();
    dev.sort_by(f64::total_cmp);
    let mean = s.iter().sum::<f64>() / s.len() as f64;
    let var = s.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / s.len() as f64;
    Some(Summary { min: s[0], median, p95: nearest_rank(&s, 0.95), mad: median_sorted(&dev), cv: var.sqrt() / mean })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_samples() {
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0, 100.0]).unwrap();
        assert_eq!((s.min, s.median, s.p95, s.mad), (1.0, 3.5, 100.0, 1.5));
        let t: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(summarize(&t).unwrap().p95, 19.0);
        assert!(summarize(&[]).is_none());
        assert_eq!(summarize(&[2.0, 2.0]).unwrap().cv, 0.0);
    }
}
