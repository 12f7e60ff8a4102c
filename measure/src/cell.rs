//! What every backend's cell shares: the fixture seed and weights, the columns checked
//! against the reference, weight-copy rotation, the result of one cell and its best row.

use crate::error::{Context, Result};
use vnni_corpus::{SampleRow, TimingRow};
use vnni_kernels::fixture::{self, derive_seed, splitmix64};
use vnni_kernels::{Mode, PackedMatrix, SourceFormat};

/// The fixture seed of every cell (bench, sweep, both backends): same seed, same weights and rows.
pub const FIXTURE_SEED: u64 = 0xC0DA;

/// Columns compared with the CPU reference: all of them up to this N, else a seeded sample this large.
pub const FULL_CHECK_MAX_N: usize = 8192;
pub const SAMPLED_COLUMNS: usize = 4096;

#[derive(Debug, Default)]
pub struct CellResult {
    pub rows: Vec<TimingRow>,
    pub samples: Vec<SampleRow>,
}

/// Outputs (rows x columns) checked per candidate of a batched (M > 1) cell at most: every
/// row is checked, over fewer sampled columns as M grows (the CPU reference costs M x
/// columns x K). Grouped cells (M <= 31) stay within it at up to 8192 columns.
pub const BATCHED_CHECK_OUTPUTS: usize = 1 << 18;

/// Distinct sorted columns to check for M rows: all of them for small outputs, else the first
/// and the last column (tails of the last tile) plus seeded columns spread over all of N,
/// at most `sampled` in all.
pub fn check_columns(n: usize, m: usize, seed: u64) -> Vec<usize> {
    if n <= FULL_CHECK_MAX_N && n * m <= BATCHED_CHECK_OUTPUTS {
        return (0..n).collect();
    }
    let sampled = SAMPLED_COLUMNS.min((BATCHED_CHECK_OUTPUTS / m).max(64)).min(n);
    let mut cols: std::collections::BTreeSet<usize> = [0, n - 1].into();
    // Draws in stream order (not sorted first, which would keep only the low columns).
    let mut i = 0;
    while cols.len() < sampled {
        cols.insert((splitmix64(seed, i) % n as u64) as usize);
        i += 1;
    }
    cols.into_iter().collect()
}

/// Weight copies so that the bytes touched between two uses of one copy exceed 3 x L2.
pub fn copies_for(bytes: usize, l2: usize) -> usize {
    if bytes >= 3 * l2 {
        1
    } else {
        (3 * l2).div_ceil(bytes) + 1
    }
}

/// The packed weights of one (source format, N, K) cell: the format's codebook, seeded by
/// the format so aliases are measured on their own bytes.
pub fn cell_weights(format: SourceFormat, n: usize, k: usize, seed: u64) -> Result<PackedMatrix> {
    fixture::packed_matrix(format.codebook(), n, k, derive_seed(seed, format.name()))
        .with_context(|| format!("fixture {format} {n}x{k}"))
}

/// The fastest eligible, not dropped row of `mode` among `rows` (ties: registry order, i.e.
/// the first one), with a finite median.
pub fn best_row(rows: &[TimingRow], mode: Mode) -> Option<&TimingRow> {
    rows.iter().filter(|r| r.mode == mode && r.eligible && !r.dropped && r.median_us.is_finite()).fold(
        None,
        |best: Option<&TimingRow>, r| match best {
            Some(b) if b.median_us <= r.median_us => Some(b),
            _ => Some(r),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_columns_cover_both_ends_and_the_whole_width() {
        for (n, m) in [(151_936, 1), (24_576, 512), (24_576, 4096), (9_000, 31)] {
            let cols = check_columns(n, m, 7);
            let want = SAMPLED_COLUMNS.min((BATCHED_CHECK_OUTPUTS / m).max(64));
            assert_eq!(cols.len(), want, "{n} x M={m}");
            assert!(cols.windows(2).all(|w| w[0] < w[1]));
            assert_eq!((cols[0], *cols.last().unwrap()), (0, n - 1));
            // Spread: some sampled column lies in the top tenth of N (not only low columns).
            assert!(cols.iter().filter(|&&c| c >= n - n / 10 && c < n - 1).count() > want / 20, "{n} x M={m}");
        }
        assert_eq!(check_columns(4096, 31, 7), (0..4096).collect::<Vec<_>>());
    }
}
