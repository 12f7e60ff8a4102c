//! Activation quantization, part of the arithmetic contract (DESIGN.md section 3):
//! per row, per 32 values, `d = amax / 127` (1 when amax is 0), `q = clamp(rne(x / d), -127, 127)`,
//! `sum = Σq`. Every division is an IEEE f32 division.

use rayon::prelude::*;

use crate::packed::check_shape;
use crate::ShapeError;

/// Quantized activation rows: `q: i8 [M][K]`, `d: f32 [M][KBLK]`, `sum: i32 [M][KBLK]`.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedActivations {
    pub m: usize,
    pub k: usize,
    pub q: Vec<i8>,
    pub d: Vec<f32>,
    pub sum: Vec<i32>,
}

impl QuantizedActivations {
    pub fn kblk(&self) -> usize {
        self.k / 32
    }

    /// Row `r` alone, as an M = 1 batch.
    pub fn row(&self, r: usize) -> QuantizedActivations {
        let kblk = self.kblk();
        QuantizedActivations {
            m: 1,
            k: self.k,
            q: self.q[r * self.k..(r + 1) * self.k].to_vec(),
            d: self.d[r * kblk..(r + 1) * kblk].to_vec(),
            sum: self.sum[r * kblk..(r + 1) * kblk].to_vec(),
        }
    }
}

/// Quantize one 32-value block; returns (scale, sum).
#[inline]
pub fn quantize_block(x: &[f32], q: &mut [i8]) -> (f32, i32) {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = if amax == 0.0 { 1.0 } else { amax / 127.0 };
    let mut sum = 0i32;
    for (qi, &v) in q.iter_mut().zip(x) {
        *qi = (v / d).round_ties_even().clamp(-127.0, 127.0) as i8;
        sum += i32::from(*qi);
    }
    (d, sum)
}

/// Quantize `x: f32 [M][K]` row by row.
pub fn quantize_activations(x: &[f32], m: usize, k: usize) -> Result<QuantizedActivations, ShapeError> {
    let kblk = check_shape(m, k, 32, "activation quantization")?;
    if x.len() != m * k {
        return Err(ShapeError::Length { what: "activation values", expected: m * k, got: x.len() });
    }
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Err(ShapeError::NonFiniteActivation { row: i / k, col: i % k, value: x[i] });
    }
    let mut q = vec![0i8; m * k];
    let mut d = vec![0f32; m * kblk];
    let mut sum = vec![0i32; m * kblk];
    q.par_chunks_mut(32).zip(d.par_iter_mut()).zip(sum.par_iter_mut()).zip(x.par_chunks(32)).for_each(
        |(((qb, db), sb), xb)| {
            (*db, *sb) = quantize_block(xb, qb);
        },
    );
    Ok(QuantizedActivations { m, k, q, d, sum })
}
