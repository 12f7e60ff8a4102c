//! Summary statistics of regret over rows (alias cells): nearest-rank p95 and geomean.

/// Nearest-rank percentile `q` (0 < q <= 1) of unsorted values (`vnni_measure::stats`, the
/// one definition); `None` for no values.
pub fn nearest_rank(values: &[f64], q: f64) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| vnni_measure::stats::nearest_rank(&v, q))
}

/// Nearest-rank p95; 0 for no values.
pub fn p95(values: &[f64]) -> f64 {
    nearest_rank(values, 0.95).unwrap_or(0.0)
}

/// Geometric-mean regret: exp(mean ln(1 + r)) - 1 (`vnni_measure::stats`, the one definition).
pub fn geomean(values: &[f64]) -> f64 {
    vnni_measure::stats::geomean_regret(values)
}

pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// What one method scores on a set of rows.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct Summary {
    pub rows: u64,
    pub p95_regret: f64,
    /// p95 over rows of each row's upper confidence bound of regret.
    pub ucb_p95_regret: f64,
    pub geomean_regret: f64,
}

impl Summary {
    /// From (regret, upper confidence bound) per row.
    pub fn of(rows: &[(f64, f64)]) -> Summary {
        let r: Vec<f64> = rows.iter().map(|x| x.0).collect();
        let u: Vec<f64> = rows.iter().map(|x| x.1).collect();
        Summary { rows: rows.len() as u64, p95_regret: p95(&r), ucb_p95_regret: p95(&u), geomean_regret: geomean(&r) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(p95(&v), 19.0);
        assert_eq!(p95(&[3.0]), 3.0);
        assert_eq!(p95(&(1..=100).map(f64::from).collect::<Vec<_>>()), 95.0);
        assert!((geomean(&[0.0, 0.21]) - 0.1).abs() < 1e-12);
    }
}
