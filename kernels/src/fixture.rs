//! Deterministic fixtures. Packed payloads are built directly in the packed layout in
//! O(bytes) (no quantization pass, which stalls on LM heads), from a counter-based
//! generator so any chunk can be produced in parallel and the same seed always gives
//! the same bytes. Scales are finite, non-zero and bounded, so no matrix is all zeros.

use half::f16;
use rayon::prelude::*;

use crate::codebook::ScaleFormat;
use crate::codec::with_block;
use crate::contract::ScaleRule;
use crate::packed::{check_shape, PackedMatrix};
use crate::{Codebook, ShapeError, SourceFormat};

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64 output number `index` of stream `seed` (Steele, Lea, Flood 2014).
#[inline(always)]
pub fn splitmix64(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(GOLDEN));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Derive an independent stream seed from a base seed and a label.
pub fn derive_seed(seed: u64, label: &str) -> u64 {
    label.bytes().fold(splitmix64(seed, u64::MAX), |h, b| splitmix64(h, u64::from(b)))
}

/// Fill `out` with the stream `seed`, in parallel 64 KiB chunks.
pub fn fill_bytes(seed: u64, out: &mut [u8]) {
    const CHUNK: usize = 1 << 16;
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, chunk)| {
        let base = (c * CHUNK / 8) as u64;
        let mut words = chunk.chunks_mut(8);
        for (i, word) in (&mut words).enumerate() {
            let r = splitmix64(seed, base + i as u64).to_le_bytes();
            word.copy_from_slice(&r[..word.len()]);
        }
    });
}

/// A finite, non-zero f16 with random sign and mantissa and |v| in [2^(lo-15), 2^(lo-11)).
#[inline(always)]
fn bounded_f16(r: u64, lo_exponent: u16) -> f16 {
    let r = r as u16;
    let sign = r & 0x8000;
    let exponent = lo_exponent + ((r >> 10) & 3);
    f16::from_bits(sign | (exponent << 10) | (r & 0x03FF))
}

fn fill_f16(seed: u64, lo_exponent: u16, out: &mut [f16]) {
    out.par_chunks_mut(1 << 14).enumerate().for_each(|(c, chunk)| {
        let base = (c << 14) as u64;
        for (i, v) in chunk.iter_mut().enumerate() {
            *v = bounded_f16(splitmix64(seed, base + i as u64), lo_exponent);
        }
    });
}

/// A structurally valid packed matrix of `codebook` with shape N x K.
/// Scales lie in [2^-10, 2^-6) in magnitude (e2m1: the powers of two 2^-10 .. 2^-7), mins
/// in [2^-8, 2^-4).
pub fn packed_matrix(codebook: Codebook, n: usize, k: usize, seed: u64) -> Result<PackedMatrix, ShapeError> {
    let kblk = check_shape(n, k, 32, "packed fixture")?;
    let blocks = kblk * n;
    let mut payload = vec![0u8; blocks * codebook.payload_bytes()];
    fill_bytes(derive_seed(seed, "payload"), &mut payload);
    if codebook == Codebook::S8 {
        // ggml never stores -128 in Q8_0; keep fixtures within what real weights hold.
        payload.par_iter_mut().for_each(|b| *b = if *b == 0x80 { 0x81 } else { *b });
    }
    let mut scale = vec![f16::ZERO; blocks];
    fill_f16(derive_seed(seed, "scale"), 5, &mut scale);
    let scale: Vec<u16> = match codebook.scale_format() {
        ScaleFormat::F16 => scale.par_iter().map(|h| h.to_bits()).collect(),
        // e2m1 scales are powers of two: the f16 draw's sign and exponent, mantissa dropped
        // (2^-10 .. 2^-7), as bf16 bits.
        ScaleFormat::Bf16 => scale
            .par_iter()
            .map(|h| ScaleFormat::Bf16.narrow(f32::from_bits(h.to_f32().to_bits() & 0x7F80_0000)).expect("exact"))
            .collect(),
    };
    let mut second = vec![f16::ZERO; if codebook.has_second() { blocks } else { 0 }];
    // A second scale (dual-scale codebooks) lies where the first does; a min a little higher.
    let second_exponent = if codebook.scale_rule() == ScaleRule::DualScale { 5 } else { 7 };
    fill_f16(derive_seed(seed, "second"), second_exponent, &mut second);
    PackedMatrix::from_parts(codebook, n, k, payload, scale, second)
}

/// Activations `f32 [M][K]` uniform in [-1, 1), with a few exact zeros and one
/// all-zero block per row when K allows, so the amax == 0 rule is exercised.
pub fn activations(m: usize, k: usize, seed: u64) -> Vec<f32> {
    let seed = derive_seed(seed, "activations");
    let mut x: Vec<f32> = (0..m * k)
        .into_par_iter()
        .map(|i| {
            let r = splitmix64(seed, i as u64);
            if r & 0xFF == 0 {
                0.0
            } else {
                ((r >> 40) as f32 / (1u32 << 24) as f32) * 2.0 - 1.0
            }
        })
        .collect();
    if k >= 64 {
        for row in x.chunks_mut(k) {
            row[32..64].fill(0.0);
        }
    }
    x
}

/// `blocks` random source blocks of `format`: random bytes with every f16 field set to a
/// finite value (mostly normal, sometimes zero or subnormal, either sign).
pub fn source_blocks(format: SourceFormat, blocks: usize, seed: u64) -> Vec<u8> {
    let bb = format.block_bytes();
    let mut bytes = vec![0u8; blocks * bb];
    fill_bytes(derive_seed(seed, format.name()), &mut bytes);
    let (offsets, split) =
        with_block!(format, B => (<B as crate::codec::Block>::F16_OFFSETS, <B as crate::codec::Block>::SPLIT_F16));
    let fseed = derive_seed(seed, "f16 fields");
    for (i, block) in bytes.chunks_exact_mut(bb).enumerate() {
        let value = |j: usize| {
            let r = splitmix64(fseed, (i * 4 + j) as u64);
            match (r >> 32) & 63 {
                0 => f16::from_bits((r as u16) & 0x8000), // signed zero
                1 => f16::from_bits((r as u16) & 0x83FF), // subnormal
                _ => bounded_f16(r, 5),
            }
        };
        for (j, &off) in offsets.iter().enumerate() {
            block[off..off + 2].copy_from_slice(&value(j).to_le_bytes());
        }
        if let Some(s) = split {
            s.write(block, value(offsets.len()));
        }
    }
    bytes
}
