//! The CPU backend's kernels: rayon over the same contract as every CUDA family, so a whole
//! sweep, fit and generate runs on any machine. Families (registry `Backend::Cpu`):
//! - `wide` (row tiles over N with all of K): one task per `tile` columns, one partition;
//! - `kpar` (K partitions, ordered fold): one task per (partition, column tile) writing
//!   partials, then every column folds its partials in ascending order;
//! - grouped `rows`: one task per column tile, each weight block decoded once for all M rows,
//!   at the bpp inherited from the M = 1 selection.

use rayon::prelude::*;

use crate::activation::QuantizedActivations;
use crate::contract::{partition_count, partition_range};
use crate::packed::PackedMatrix;
use crate::reference::{gemm_tiled, partition_sums};
use crate::registry::{Backend, Candidate, Family, Surface};
use crate::ShapeError;

fn illegal(c: &Candidate, w: &PackedMatrix, why: &'static str) -> ShapeError {
    ShapeError::Illegal { candidate: c.id.to_string(), n: w.n, k: w.k, why }
}

/// Run a CPU decode (M = 1) candidate; `units` is the worker thread count its bpp formula
/// sees. Returns (bpp, y[N]).
pub fn decode(
    c: &Candidate,
    w: &PackedMatrix,
    a: &QuantizedActivations,
    units: u32,
) -> Result<(usize, Vec<f32>), ShapeError> {
    if c.backend != Backend::Cpu || c.surface != Surface::Decode {
        return Err(illegal(c, w, "not a CPU decode candidate"));
    }
    if a.m != 1 {
        return Err(ShapeError::Length { what: "activation rows of a decode", expected: 1, got: a.m });
    }
    let plan = c.plan(w.n, w.k, units).ok_or_else(|| illegal(c, w, "the candidate's KB rule is illegal for this K"))?;
    let tile = c.tile as usize;
    let columns: Vec<usize> = (0..w.n).collect();
    let y = match c.family {
        Family::Wide => gemm_tiled(w, a, plan.bpp, &columns, tile)?,
        Family::Kpar => partitioned(w, a, plan.bpp, tile),
        _ => return Err(illegal(c, w, "no CPU kernel for this family")),
    };
    Ok((plan.bpp, y))
}

/// Run a CPU grouped candidate on M rows at the inherited `bpp`: y[M][N].
pub fn grouped(c: &Candidate, w: &PackedMatrix, a: &QuantizedActivations, bpp: usize) -> Result<Vec<f32>, ShapeError> {
    if c.backend != Backend::Cpu || c.surface != Surface::Grouped {
        return Err(illegal(c, w, "not a CPU grouped candidate"));
    }
    let columns: Vec<usize> = (0..w.n).collect();
    gemm_tiled(w, a, bpp.min(w.kblk()).max(1), &columns, c.tile as usize)
}

/// The kpar family for one row: partials [KB][N] in parallel over (partition, tile), then
/// the ordered fold per column.
fn partitioned(w: &PackedMatrix, a: &QuantizedActivations, bpp: usize, tile: usize) -> Vec<f32> {
    let (n, kblk) = (w.n, w.kblk());
    let kb = partition_count(kblk, bpp);
    let tile = tile.max(1);
    let mut partials = vec![0f32; kb * n];
    partials.par_chunks_mut(n).enumerate().for_each(|(p, part)| {
        part.par_chunks_mut(tile).enumerate().for_each(|(t, acc)| {
            let cols: Vec<usize> = (t * tile..t * tile + acc.len()).collect();
            partition_sums(w, a, partition_range(kblk, bpp, p), &cols, acc);
        });
    });
    let mut y = vec![0f32; n];
    y.par_chunks_mut(tile).enumerate().for_each(|(t, out)| {
        for (i, v) in out.iter_mut().enumerate() {
            let col = t * tile + i;
            // Ascending partitions, starting from the first (not from 0.0).
            *v = (1..kb).fold(partials[col], |acc, p| acc + partials[p * n + col]);
        }
    });
    y
}
