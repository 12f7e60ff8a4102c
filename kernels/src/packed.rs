//! The packed matrix: codebook blocks laid out K-block major, column minor, and the
//! repacking of GGUF source matrices into it.

use half::f16;
use rayon::prelude::*;

use crate::codec::{non_finite_f16, with_block, Block};
use crate::contract::ScaleRule;
use crate::{Codebook, RepackError, ShapeError, SourceFormat};

/// One codebook block as a source block produces it, scales still in f32. The packer
/// stores them in the codebook's [`ScaleFormat`](crate::codebook::ScaleFormat): f16 rounds to nearest even (that rounding
/// is part of the codebook definition), bf16 (e2m1) takes exact values only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PackedBlock {
    /// The first `Codebook::payload_bytes()` bytes are used.
    pub payload: [u8; 32],
    pub scale: f32,
    /// Min (asymmetric codebooks) or the scale of elements 16..31 (s6d); 0 otherwise.
    pub second: f32,
}

/// A decoded block: 32 integer values and the stored scales widened to f32.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodedBlock {
    pub values: [i8; 32],
    pub scale: f32,
    pub second: f32,
}

/// A weight matrix `W[N][K]` in a codebook's packed layout.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedMatrix {
    pub codebook: Codebook,
    pub n: usize,
    pub k: usize,
    /// `u8 [KBLK][N][PB]`.
    pub payload: Vec<u8>,
    /// `[KBLK][N]` scale bits in the codebook's [`ScaleFormat`](crate::codebook::ScaleFormat) (f16, or bf16 for e2m1).
    pub scale: Vec<u16>,
    /// `f16 [KBLK][N]` when the codebook has a second plane, else empty.
    pub second: Vec<f16>,
}

/// Validate a weight shape for a K granularity of `multiple` values; returns KBLK.
pub fn check_shape(n: usize, k: usize, multiple: usize, what: &str) -> Result<usize, ShapeError> {
    if n == 0 || k == 0 {
        return Err(ShapeError::Empty { n, k });
    }
    if k % multiple != 0 {
        return Err(ShapeError::KNotMultiple { k, multiple, what: what.to_string() });
    }
    // Every buffer index must fit, including the 32-byte-per-value worst case.
    n.checked_mul(k).and_then(|nk| nk.checked_mul(2)).ok_or(ShapeError::Overflow { n, k })?;
    Ok(k / 32)
}

impl PackedMatrix {
    /// Assemble from planes, checking every length against the shape.
    pub fn from_parts(
        codebook: Codebook,
        n: usize,
        k: usize,
        payload: Vec<u8>,
        scale: Vec<u16>,
        second: Vec<f16>,
    ) -> Result<Self, ShapeError> {
        let kblk = check_shape(n, k, 32, "packed layout")?;
        let blocks = kblk * n;
        let expect = |what, expected: usize, got: usize| {
            if expected == got {
                Ok(())
            } else {
                Err(ShapeError::Length { what, expected, got })
            }
        };
        expect("payload bytes", blocks * codebook.payload_bytes(), payload.len())?;
        expect("scale plane", blocks, scale.len())?;
        expect("second plane", if codebook.has_second() { blocks } else { 0 }, second.len())?;
        Ok(PackedMatrix { codebook, n, k, payload, scale, second })
    }

    pub fn kblk(&self) -> usize {
        self.k / 32
    }

    /// Bytes a kernel streams: payload plus scale planes (`Codebook::block_bytes` per block).
    pub fn bytes(&self) -> usize {
        let b = self.payload.len() + 2 * (self.scale.len() + self.second.len());
        debug_assert_eq!(b, self.n * self.kblk() * self.codebook.block_bytes());
        b
    }

    #[inline(always)]
    pub fn payload_at(&self, b: usize, n: usize) -> &[u8] {
        let pb = self.codebook.payload_bytes();
        let at = (b * self.n + n) * pb;
        &self.payload[at..at + pb]
    }

    #[inline(always)]
    pub fn scales_at(&self, b: usize, n: usize) -> (f32, f32) {
        let i = b * self.n + n;
        (self.codebook.scale_format().widen(self.scale[i]), self.second.get(i).map_or(0.0, |s| s.to_f32()))
    }

    #[inline]
    pub fn block(&self, b: usize, n: usize) -> DecodedBlock {
        let (scale, second) = self.scales_at(b, n);
        DecodedBlock { values: self.codebook.decode(self.payload_at(b, n)), scale, second }
    }

    /// The real weights of block (b, n): `s * v`, `s * v + min` (the min times its sub-block's
    /// integer weight for `u2m`), or the dual-scale form.
    pub fn dequantize_block(&self, b: usize, n: usize) -> [f32; 32] {
        let d = self.block(b, n);
        let mins = self.codebook.sub_mins(self.payload_at(b, n));
        std::array::from_fn(|i| {
            let v = d.values[i] as f32;
            match self.codebook.scale_rule() {
                ScaleRule::Single => d.scale * v,
                ScaleRule::Asymmetric if mins == [1, 1] => d.scale * v + d.second,
                ScaleRule::Asymmetric => d.scale * v + d.second * mins[i / 16] as f32,
                ScaleRule::DualScale => (if i < 16 { d.scale } else { d.second }) * v,
            }
        })
    }

    /// The real weights of row `n` of W (K values).
    pub fn dequantize_row(&self, n: usize) -> Vec<f32> {
        (0..self.kblk()).flat_map(|b| self.dequantize_block(b, n)).collect()
    }
}

/// Repack a GGUF source matrix `W[N][K]` (row-major blocks, as stored in a GGUF tensor
/// with `ne[0] = K`) into its codebook's packed layout.
pub fn repack(format: SourceFormat, n: usize, k: usize, bytes: &[u8]) -> Result<PackedMatrix, RepackError> {
    with_block!(format, B => repack_blocks::<B>(n, k, bytes))
}

fn repack_blocks<B: Block>(n: usize, k: usize, bytes: &[u8]) -> Result<PackedMatrix, RepackError> {
    let format = B::FORMAT;
    let codebook = format.codebook();
    let kblk = check_shape(n, k, B::ELEMS, format.name())?;
    let per_row = k / B::ELEMS;
    let expected = n * per_row * B::BYTES;
    if bytes.len() != expected {
        return Err(RepackError::BadLength { format, expected, got: bytes.len() });
    }
    let pb = codebook.payload_bytes();
    let sub = B::ELEMS / 32;
    let mut payload = vec![0u8; kblk * n * pb];
    let mut scale = vec![0u16; kblk * n];
    let mut second = vec![f16::ZERO; if codebook.has_second() { kblk * n } else { 0 }];
    let second_chunks: Vec<&mut [f16]> = if second.is_empty() {
        (0..per_row).map(|_| &mut [][..]).collect()
    } else {
        second.chunks_mut(sub * n).collect()
    };

    // One task per source block column j: it owns packed K-blocks j*sub .. (j+1)*sub.
    let results: Vec<Result<(), RepackError>> = payload
        .par_chunks_mut(sub * n * pb)
        .zip(scale.par_chunks_mut(sub * n))
        .zip(second_chunks.into_par_iter())
        .enumerate()
        .map(|(j, ((pay, sca), sec))| {
            let mut out = [PackedBlock { payload: [0; 32], scale: 0.0, second: 0.0 }; 8];
            for row in 0..n {
                let src = &bytes[(row * per_row + j) * B::BYTES..][..B::BYTES];
                if let Some((offset, _)) = non_finite_f16::<B>(src) {
                    return Err(RepackError::NonFiniteScale { format, row, block: j, offset });
                }
                B::read(src).repack(&mut out[..sub]);
                for (s, blk) in out[..sub].iter().enumerate() {
                    let at = s * n + row;
                    pay[at * pb..(at + 1) * pb].copy_from_slice(&blk.payload[..pb]);
                    let overflow = |value| RepackError::ScaleOverflow { format, row, block: j, sub: s, value };
                    sca[at] = codebook.scale_format().narrow(blk.scale).ok_or_else(|| overflow(blk.scale))?;
                    if !sec.is_empty() {
                        let h = f16::from_f32(blk.second);
                        sec[at] = if h.is_finite() { h } else { return Err(overflow(blk.second)) };
                    }
                }
            }
            Ok(())
        })
        .collect();
    results.into_iter().collect::<Result<(), _>>()?;
    Ok(PackedMatrix { codebook, n, k, payload, scale, second })
}
