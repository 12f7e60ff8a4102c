//! GGUF block codecs: parse and write block bytes, dequantize to f32 (the same
//! operation order as gguf-py, so results agree bit for bit), quantize from f32, and
//! repack into codebook blocks. One [`Block`] type per source format.

mod iq12;
mod iq12_grid;
mod iq3;
mod iq3_grid;
mod iq4;
mod kquant;
mod legacy;
mod mxfp4;

pub use iq12::{BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs};
pub use iq3::{BlockIq3S, BlockIq3Xxs};
pub use iq4::{BlockIq4Nl, BlockIq4Xs};
pub use kquant::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};
pub use legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0};
pub use mxfp4::{e8m0_half, BlockMxfp4};

use half::f16;

use crate::packed::PackedBlock;
use crate::{CodecError, SourceFormat};

/// One GGUF block of a source format.
pub trait Block: Sized + Send + Sync {
    const FORMAT: SourceFormat;
    /// Byte offsets of the f16 fields; each must hold a finite value.
    const F16_OFFSETS: &'static [usize];
    const BYTES: usize = Self::FORMAT.block_bytes();
    const ELEMS: usize = Self::FORMAT.block_elems();

    /// An f16 field stored split across the top nibbles of four u16 words (IQ1_M): it must
    /// hold a finite value too.
    const SPLIT_F16: Option<SplitF16> = None;
    /// Read a block from exactly `Self::BYTES` bytes (already validated by [`parse_blocks`]).
    fn read(bytes: &[u8]) -> Self;
    /// Write the block's `Self::BYTES` bytes.
    fn write(&self, out: &mut [u8]);
    /// Dequantize to `Self::ELEMS` values.
    fn dequantize(&self, out: &mut [f32]);
    /// Rewrite as `Self::ELEMS / 32` codebook blocks, scales still in f32.
    fn repack(&self, out: &mut [PackedBlock]);
}

/// Source formats with a quantizer from f32.
pub trait Quantize: Block {
    /// Quantize `Self::ELEMS` finite values.
    fn quantize(x: &[f32]) -> Self;
}

/// Formats that have a quantizer, in registry order.
pub const QUANTIZABLE: [SourceFormat; 7] = [
    SourceFormat::Q4_0,
    SourceFormat::IQ4_NL,
    SourceFormat::Q4_1,
    SourceFormat::Q5_0,
    SourceFormat::Q5_1,
    SourceFormat::Q8_0,
    SourceFormat::MXFP4,
];

/// Runs `$body` with `$B` bound to the block type of `$format`.
macro_rules! with_block {
    ($format:expr, $B:ident => $body:expr) => {
        match $format {
            SourceFormat::Q4_0 => {
                type $B = $crate::codec::BlockQ4_0;
                $body
            }
            SourceFormat::IQ4_NL => {
                type $B = $crate::codec::BlockIq4Nl;
                $body
            }
            SourceFormat::IQ4_XS => {
                type $B = $crate::codec::BlockIq4Xs;
                $body
            }
            SourceFormat::Q4_1 => {
                type $B = $crate::codec::BlockQ4_1;
                $body
            }
            SourceFormat::Q4_K => {
                type $B = $crate::codec::BlockQ4K;
                $body
            }
            SourceFormat::Q5_0 => {
                type $B = $crate::codec::BlockQ5_0;
                $body
            }
            SourceFormat::Q5_1 => {
                type $B = $crate::codec::BlockQ5_1;
                $body
            }
            SourceFormat::Q5_K => {
                type $B = $crate::codec::BlockQ5K;
                $body
            }
            SourceFormat::Q6_K => {
                type $B = $crate::codec::BlockQ6K;
                $body
            }
            SourceFormat::Q8_0 => {
                type $B = $crate::codec::BlockQ8_0;
                $body
            }
            SourceFormat::MXFP4 => {
                type $B = $crate::codec::BlockMxfp4;
                $body
            }
            SourceFormat::Q3_K => {
                type $B = $crate::codec::BlockQ3K;
                $body
            }
            SourceFormat::IQ3_XXS => {
                type $B = $crate::codec::BlockIq3Xxs;
                $body
            }
            SourceFormat::IQ3_S => {
                type $B = $crate::codec::BlockIq3S;
                $body
            }
            SourceFormat::Q2_K => {
                type $B = $crate::codec::BlockQ2K;
                $body
            }
            SourceFormat::IQ2_XXS => {
                type $B = $crate::codec::BlockIq2Xxs;
                $body
            }
            SourceFormat::IQ2_XS => {
                type $B = $crate::codec::BlockIq2Xs;
                $body
            }
            SourceFormat::IQ2_S => {
                type $B = $crate::codec::BlockIq2S;
                $body
            }
            SourceFormat::IQ1_S => {
                type $B = $crate::codec::BlockIq1S;
                $body
            }
            SourceFormat::IQ1_M => {
                type $B = $crate::codec::BlockIq1M;
                $body
            }
        }
    };
}
pub(crate) use with_block;

#[inline]
pub(crate) fn read_f16(bytes: &[u8], offset: usize) -> f16 {
    f16::from_le_bytes([bytes[offset], bytes[offset + 1]])
}

#[inline]
pub(crate) fn write_f16(out: &mut [u8], offset: usize, value: f16) {
    out[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
}

/// An f16 stored as the top nibbles of four little-endian u16 words at `offset`, word 0's
/// nibble lowest (IQ1_M's block scale; the words' other bits belong to other fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitF16 {
    pub offset: usize,
}

impl SplitF16 {
    fn word(self, bytes: &[u8], w: usize) -> u16 {
        u16::from_le_bytes(array(&bytes[self.offset + 2 * w..]))
    }

    pub fn read(self, bytes: &[u8]) -> f16 {
        f16::from_bits((0..4).fold(0u16, |d, w| d | ((self.word(bytes, w) >> 12) << (4 * w))))
    }

    pub fn write(self, bytes: &mut [u8], value: f16) {
        for w in 0..4 {
            let word = (self.word(bytes, w) & 0x0FFF) | (((value.to_bits() >> (4 * w)) & 15) << 12);
            bytes[self.offset + 2 * w..self.offset + 2 * w + 2].copy_from_slice(&word.to_le_bytes());
        }
    }
}

/// The eight sign bits of a group of IQ3_XXS, IQ2_XXS or IQ2_XS values from its 7-bit sign
/// index: the eighth makes the count of negatives even (gguf-py's `ksigns` table).
pub(crate) fn parity_signs(index: u32) -> u32 {
    index | ((index.count_ones() & 1) << 7)
}

pub(crate) fn array<const L: usize>(bytes: &[u8]) -> [u8; L] {
    bytes[..L].try_into().expect("caller passes at least L bytes")
}

/// Check that `bytes` is a whole number of valid blocks of `format`.
pub fn validate(format: SourceFormat, bytes: &[u8]) -> Result<usize, CodecError> {
    let bb = format.block_bytes();
    if bytes.len() % bb != 0 {
        return Err(CodecError::BadLength { format, len: bytes.len(), block_bytes: bb });
    }
    let first_non_finite = with_block!(format, B => non_finite_f16::<B> as fn(&[u8]) -> Option<(usize, u16)>);
    for (block, chunk) in bytes.chunks_exact(bb).enumerate() {
        if let Some((offset, bits)) = first_non_finite(chunk) {
            return Err(CodecError::NonFiniteScale { format, block, offset, bits });
        }
    }
    Ok(bytes.len() / bb)
}

/// The first f16 field of one block's bytes that does not hold a finite value, as (offset of
/// the field, or of the first word of a split one; its bits).
pub(crate) fn non_finite_f16<B: Block>(chunk: &[u8]) -> Option<(usize, u16)> {
    let fields = B::F16_OFFSETS.iter().map(|&offset| (offset, read_f16(chunk, offset)));
    fields
        .chain(B::SPLIT_F16.map(|s| (s.offset, s.read(chunk))))
        .find(|(_, v)| !v.is_finite())
        .map(|(offset, v)| (offset, v.to_bits()))
}

/// Parse validated blocks of a known type.
pub fn parse_blocks<B: Block>(bytes: &[u8]) -> Result<Vec<B>, CodecError> {
    validate(B::FORMAT, bytes)?;
    Ok(bytes.chunks_exact(B::BYTES).map(B::read).collect())
}

/// Serialize blocks to GGUF bytes.
pub fn write_blocks<B: Block>(blocks: &[B]) -> Vec<u8> {
    let mut out = vec![0u8; blocks.len() * B::BYTES];
    for (b, chunk) in blocks.iter().zip(out.chunks_exact_mut(B::BYTES)) {
        b.write(chunk);
    }
    out
}

/// Dequantize a run of blocks of `format` to f32 values.
pub fn dequantize(format: SourceFormat, bytes: &[u8]) -> Result<Vec<f32>, CodecError> {
    with_block!(format, B => {
        let blocks = parse_blocks::<B>(bytes)?;
        let mut out = vec![0f32; blocks.len() * B::ELEMS];
        for (b, chunk) in blocks.iter().zip(out.chunks_exact_mut(B::ELEMS)) {
            b.dequantize(chunk);
        }
        Ok(out)
    })
}

/// Quantize f32 values (a multiple of the block size, all finite) to blocks of `format`.
pub fn quantize(format: SourceFormat, x: &[f32]) -> Result<Vec<u8>, CodecError> {
    fn run<B: Quantize>(x: &[f32]) -> Result<Vec<u8>, CodecError> {
        if x.len() % B::ELEMS != 0 {
            return Err(CodecError::BadElementCount { format: B::FORMAT, k: x.len(), block_elems: B::ELEMS });
        }
        if let Some((index, &value)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(CodecError::NonFiniteInput { format: B::FORMAT, index, value });
        }
        let blocks: Vec<B> = x.chunks_exact(B::ELEMS).map(B::quantize).collect();
        let bytes = write_blocks(&blocks);
        // A block whose scale overflowed f16 would carry inf: report it instead of writing it.
        validate(B::FORMAT, &bytes).map_err(|e| match e {
            CodecError::NonFiniteScale { block, .. } => {
                let value = x[block * B::ELEMS..(block + 1) * B::ELEMS].iter().fold(0f32, |m, v| m.max(v.abs()));
                CodecError::ScaleOverflow { format: B::FORMAT, block, value }
            }
            other => other,
        })?;
        Ok(bytes)
    }
    match format {
        SourceFormat::Q4_0 => run::<BlockQ4_0>(x),
        SourceFormat::IQ4_NL => run::<BlockIq4Nl>(x),
        SourceFormat::Q4_1 => run::<BlockQ4_1>(x),
        SourceFormat::Q5_0 => run::<BlockQ5_0>(x),
        SourceFormat::Q5_1 => run::<BlockQ5_1>(x),
        SourceFormat::Q8_0 => run::<BlockQ8_0>(x),
        SourceFormat::MXFP4 => run::<BlockMxfp4>(x),
        _ => Err(CodecError::NoQuantizer {
            format,
            supported: QUANTIZABLE.iter().map(|f| f.name()).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// Parse blocks of `format` and write them again (a format's bytes survive the round trip).
pub fn reencode(format: SourceFormat, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
    with_block!(format, B => parse_blocks::<B>(bytes).map(|blocks| write_blocks(&blocks)))
}
