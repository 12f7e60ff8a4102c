//! The non-linear 4-bit formats IQ4_NL (32 values) and IQ4_XS (256 values, 6-bit sub-scales).

use half::f16;

use super::legacy::{inverse, nibble_values, pack_nibbles, payload_of, signed_abs_max};
use super::{array, read_f16, write_f16, Block, Quantize};
use crate::codebook::IQ4_TABLE;
use crate::packed::PackedBlock;
use crate::SourceFormat;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockIq4Nl {
    pub d: f16,
    pub qs: [u8; 16],
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockIq4Xs {
    pub d: f16,
    /// Bits 2i..2i+1 are bits 4..5 of sub-block i's scale.
    pub scales_h: u16,
    /// Nibble i (low nibble first) holds bits 0..3 of sub-block i's scale.
    pub scales_l: [u8; 4],
    /// 16 bytes per 32-value sub-block, in the nibble convention.
    pub qs: [u8; 128],
}

fn dequantize_nl(d: f32, qs: &[u8; 16], out: &mut [f32]) {
    for (o, q) in out.iter_mut().zip(nibble_values(qs)) {
        *o = d * IQ4_TABLE[q as usize] as f32;
    }
}

impl Block for BlockIq4Nl {
    const FORMAT: SourceFormat = SourceFormat::IQ4_NL;
    const F16_OFFSETS: &'static [usize] = &[0];

    fn read(b: &[u8]) -> Self {
        BlockIq4Nl { d: read_f16(b, 0), qs: array(&b[2..]) }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        out[2..18].copy_from_slice(&self.qs);
    }
    fn dequantize(&self, out: &mut [f32]) {
        dequantize_nl(self.d.to_f32(), &self.qs, out);
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        out[0] = PackedBlock { payload: payload_of(&[&self.qs]), scale: self.d.to_f32(), second: 0.0 };
    }
}

/// Index of the table entry nearest to `v` (lower index on ties).
fn nearest_index(v: f32) -> u8 {
    let mut best = 0;
    for (i, &t) in IQ4_TABLE.iter().enumerate() {
        if (v - t as f32).abs() < (v - IQ4_TABLE[best] as f32).abs() {
            best = i;
        }
    }
    best as u8
}

fn assign(x: &[f32], d: f32) -> ([u8; 32], f32) {
    let id = inverse(d);
    let q: [u8; 32] = std::array::from_fn(|i| nearest_index(x[i] * id));
    let err = x.iter().zip(q).map(|(&v, qi)| (v - d * IQ4_TABLE[qi as usize] as f32).powi(2)).sum();
    (q, err)
}

impl Quantize for BlockIq4Nl {
    /// A small deterministic search: scales that map the largest value onto several
    /// table entries near the ends, each refined once by least squares; the scale is
    /// rounded to f16 before the final assignment so the stored bytes are self-consistent.
    fn quantize(x: &[f32]) -> Self {
        let max = signed_abs_max(x);
        let mut best = (f32::INFINITY, 0f32);
        for target in [-127.0f32, -124.0, -120.0, -116.0, -112.0, 113.0, 110.0, 106.0] {
            let d = max / target;
            let (q, err) = assign(x, d);
            let (num, den) = x.iter().zip(q).fold((0f64, 0f64), |(n, dd), (&v, qi)| {
                let t = IQ4_TABLE[qi as usize] as f64;
                (n + v as f64 * t, dd + t * t)
            });
            let refined = if den > 0.0 { (num / den) as f32 } else { d };
            for cand in [d, refined] {
                let (_, e) = if cand == d { (q, err) } else { assign(x, cand) };
                if e < best.0 {
                    best = (e, cand);
                }
            }
        }
        let d = f16::from_f32(best.1);
        let (q, _) = assign(x, d.to_f32());
        BlockIq4Nl { d, qs: pack_nibbles(&q) }
    }
}

impl BlockIq4Xs {
    /// The 6-bit scale of sub-block `i` (0..8), before the -32 offset.
    pub fn sub_scale(&self, i: usize) -> u8 {
        let lo = (self.scales_l[i / 2] >> (4 * (i % 2))) & 0x0F;
        let hi = ((self.scales_h >> (2 * i)) & 3) as u8;
        lo | (hi << 4)
    }

    /// `d * (ls - 32)` as gguf-py computes it, in f32.
    fn sub_block_scale(&self, i: usize) -> f32 {
        self.d.to_f32() * (self.sub_scale(i) as i32 - 32) as f32
    }

    fn sub_block(&self, i: usize) -> [u8; 16] {
        array(&self.qs[16 * i..])
    }
}

impl Block for BlockIq4Xs {
    const FORMAT: SourceFormat = SourceFormat::IQ4_XS;
    const F16_OFFSETS: &'static [usize] = &[0];

    fn read(b: &[u8]) -> Self {
        BlockIq4Xs {
            d: read_f16(b, 0),
            scales_h: u16::from_le_bytes([b[2], b[3]]),
            scales_l: array(&b[4..]),
            qs: array(&b[8..]),
        }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        out[2..4].copy_from_slice(&self.scales_h.to_le_bytes());
        out[4..8].copy_from_slice(&self.scales_l);
        out[8..136].copy_from_slice(&self.qs);
    }
    fn dequantize(&self, out: &mut [f32]) {
        for (i, chunk) in out.chunks_exact_mut(32).enumerate() {
            dequantize_nl(self.sub_block_scale(i), &self.sub_block(i), chunk);
        }
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        for (i, o) in out.iter_mut().enumerate() {
            *o =
                PackedBlock { payload: payload_of(&[&self.sub_block(i)]), scale: self.sub_block_scale(i), second: 0.0 };
        }
    }
}
