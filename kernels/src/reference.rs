//! The canonical CPU reference: `y[M][N] = x[M][K] * W[N][K]^T` under the arithmetic
//! contract, for any bpp. Each weight block is decoded once and streamed against all M
//! rows (the grouped shape), so row independence is a property the tests check, not an
//! accident of running rows one by one.

use rayon::prelude::*;

use crate::activation::QuantizedActivations;
use crate::codebook::{
    decode_e2m1, decode_nl2, decode_nl2d, decode_nl3, decode_nl4, decode_o4, decode_s3d, decode_s4, decode_s5,
    decode_s6d, decode_s8, decode_u2m, decode_u4, decode_u5,
};
use crate::contract::{
    block_contribution, fold_partition, min_sum, partition_count, partition_range, BlockDots, ScaleRule,
};
use crate::packed::PackedMatrix;
use crate::{Codebook, ShapeError};

/// Columns per parallel task.
pub const TILE: usize = 64;

/// The full product, `f32 [M][N]`.
pub fn gemm(w: &PackedMatrix, a: &QuantizedActivations, bpp: usize) -> Result<Vec<f32>, ShapeError> {
    let columns: Vec<usize> = (0..w.n).collect();
    gemm_columns(w, a, bpp, &columns)
}

/// The product restricted to `columns` (in the given order), `f32 [M][columns.len()]`.
/// Used to check huge shapes on a seeded sample of columns.
pub fn gemm_columns(
    w: &PackedMatrix,
    a: &QuantizedActivations,
    bpp: usize,
    columns: &[usize],
) -> Result<Vec<f32>, ShapeError> {
    gemm_tiled(w, a, bpp, columns, TILE)
}

/// [`gemm_columns`] with `tile` columns per parallel task (the CPU backend's row-tile
/// families differ only in this).
pub fn gemm_tiled(
    w: &PackedMatrix,
    a: &QuantizedActivations,
    bpp: usize,
    columns: &[usize],
    tile_width: usize,
) -> Result<Vec<f32>, ShapeError> {
    if bpp == 0 {
        return Err(ShapeError::ZeroBpp);
    }
    if a.k != w.k {
        return Err(ShapeError::Length { what: "activation row length (K)", expected: w.k, got: a.k });
    }
    if let Some(&col) = columns.iter().find(|&&c| c >= w.n) {
        return Err(ShapeError::ColumnOutOfRange { col, n: w.n });
    }
    let m = a.m;
    let tile_width = tile_width.max(1);
    // Column-major while computing ([cols][M]) so each task owns a contiguous slice.
    let mut by_column = vec![0f32; columns.len() * m];
    by_column.par_chunks_mut(tile_width * m).zip(columns.par_chunks(tile_width)).for_each(|(out, cols)| {
        let kblk = w.kblk();
        let mut acc = vec![0f32; out.len()];
        for p in 0..partition_count(kblk, bpp) {
            partition_sums(w, a, partition_range(kblk, bpp, p), cols, &mut acc);
            // Partitions fold in ascending order starting from the first (not from 0.0).
            if p == 0 {
                out.copy_from_slice(&acc);
            } else {
                out.iter_mut().zip(&acc).for_each(|(y, &part)| *y += part);
            }
        }
    });
    if m == 1 {
        return Ok(by_column);
    }
    let mut y = vec![0f32; m * columns.len()];
    for (c, col) in by_column.chunks_exact(m.max(1)).enumerate() {
        for (r, &v) in col.iter().enumerate() {
            y[r * columns.len() + c] = v;
        }
    }
    Ok(y)
}

/// One partition's sums for a tile of columns: `acc[cols][M]`, each folded from +0.0 over
/// `blocks` in ascending order.
pub fn partition_sums(
    w: &PackedMatrix,
    a: &QuantizedActivations,
    blocks: std::ops::Range<usize>,
    cols: &[usize],
    acc: &mut [f32],
) {
    macro_rules! run {
        ($decode:expr) => {
            partition_sums_with(w, a, blocks, cols, acc, $decode)
        };
    }
    match w.codebook {
        Codebook::S4 => run!(decode_s4),
        Codebook::Nl4 => run!(decode_nl4),
        Codebook::U4 => run!(decode_u4),
        Codebook::S5 => run!(decode_s5),
        Codebook::U5 => run!(decode_u5),
        Codebook::S6d => run!(decode_s6d),
        Codebook::S8 => run!(decode_s8),
        Codebook::E2m1 => run!(decode_e2m1),
        Codebook::S3d => run!(decode_s3d),
        Codebook::Nl3 => run!(decode_nl3),
        Codebook::O4 => run!(decode_o4),
        Codebook::U2m => run!(decode_u2m),
        Codebook::Nl2 => run!(decode_nl2),
        Codebook::Nl2d => run!(decode_nl2d),
    }
}

/// Generic over the decode function so each codebook gets its own inlined loop.
fn partition_sums_with(
    w: &PackedMatrix,
    a: &QuantizedActivations,
    blocks: std::ops::Range<usize>,
    cols: &[usize],
    acc: &mut [f32],
    decode: impl Fn(&[u8]) -> [i8; 32],
) {
    let (m, kblk) = (a.m, w.kblk());
    let rule: ScaleRule = w.codebook.scale_rule();
    acc.fill(0.0);
    for b in blocks {
        for (ci, &n) in cols.iter().enumerate() {
            let payload = w.payload_at(b, n);
            let values = decode(payload);
            let mins = w.codebook.sub_mins(payload);
            let (scale, second) = w.scales_at(b, n);
            for r in 0..m {
                let ab = r * kblk + b;
                let q = &a.q[ab * 32..ab * 32 + 32];
                let dots = BlockDots::compute(&values, q, min_sum(mins, q, a.sum[ab]));
                let c = block_contribution(rule, a.d[ab], scale, second, dots);
                let slot = &mut acc[ci * m + r];
                *slot = fold_partition(*slot, c);
            }
        }
    }
}
