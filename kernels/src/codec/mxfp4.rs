//! MXFP4 (OCP microscaling FP4): 32 E2M1 values sharing one E8M0 power-of-two scale.
//! GGUF stores the scale byte first, then 16 bytes in the nibble convention; ggml keeps the
//! E2M1 values doubled (integers, [`E2M1_TABLE`]) and halves the scale to match.

use super::legacy::{nibble_values, pack_nibbles, payload_of};
use super::{array, Block, Quantize};
use crate::codebook::E2M1_TABLE;
use crate::packed::PackedBlock;
use crate::SourceFormat;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockMxfp4 {
    /// The E8M0 exponent byte: the block scale is 2^(e - 127), stored halved as 2^(e - 128).
    pub e: u8,
    pub qs: [u8; 16],
}

/// 2^(e - 128) as f32, the halved E8M0 scale (exact; e < 2 gives the f32 subnormals
/// 2^-128 and 2^-127), the same bits as ggml's `ggml_e8m0_to_fp32_half`.
pub fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 { 0x0020_0000u32 << e } else { (u32::from(e) - 1) << 23 };
    f32::from_bits(bits)
}

impl Block for BlockMxfp4 {
    const FORMAT: SourceFormat = SourceFormat::MXFP4;
    // The scale is a byte: every value is valid, nothing to check.
    const F16_OFFSETS: &'static [usize] = &[];

    fn read(b: &[u8]) -> Self {
        BlockMxfp4 { e: b[0], qs: array(&b[1..]) }
    }
    fn write(&self, out: &mut [u8]) {
        out[0] = self.e;
        out[1..17].copy_from_slice(&self.qs);
    }
    fn dequantize(&self, out: &mut [f32]) {
        let d = e8m0_half(self.e);
        for (o, q) in out.iter_mut().zip(nibble_values(&self.qs)) {
            *o = d * E2M1_TABLE[q as usize] as f32;
        }
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        out[0] = PackedBlock { payload: payload_of(&[&self.qs]), scale: e8m0_half(self.e), second: 0.0 };
    }
}

impl Quantize for BlockMxfp4 {
    /// gguf-py's rule: the exponent puts the largest magnitude in the top E2M1 binade
    /// (`floor(log2(amax)) - 2 + 127`, in f32), then each value takes the table entry
    /// nearest in f32 (the lower index on ties). An all-zero block gets e = 0; a block so
    /// small that the exponent would be negative is clamped to e = 0 (gguf-py wraps it).
    fn quantize(x: &[f32]) -> Self {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let e = if amax > 0.0 { (amax.log2().floor() - 2.0 + 127.0).clamp(0.0, 255.0) as u8 } else { 0 };
        let d = e8m0_half(e);
        let q: [u8; 32] = std::array::from_fn(|i| {
            let err = |k: usize| (d * E2M1_TABLE[k] as f32 - x[i]).abs();
            (1..16).fold(0, |best, k| if err(k) < err(best) { k } else { best }) as u8
        });
        BlockMxfp4 { e, qs: pack_nibbles(&q) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_halved_scale_covers_every_exponent_exactly() {
        for e in 0..=255u8 {
            let expected = 2f64.powi(i32::from(e) - 128);
            assert_eq!(e8m0_half(e) as f64, expected, "e = {e}");
        }
    }

    #[test]
    fn quantize_round_trips_representable_blocks() {
        let values: Vec<f32> = (0..32).map(|i| E2M1_TABLE[i % 16] as f32 * 0.25).collect();
        let b = BlockMxfp4::quantize(&values);
        let mut back = [0f32; 32];
        b.dequantize(&mut back);
        assert_eq!(back.to_vec(), values);
        assert_eq!(BlockMxfp4::quantize(&[0.0; 32]).e, 0);
    }
}
