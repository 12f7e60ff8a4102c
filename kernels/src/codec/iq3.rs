//! The 3-bit grid formats IQ3_XXS and IQ3_S (256 values a block, one scale per 32).
//!
//! Each stores groups of four magnitudes as an index into a fixed grid ([`super::iq3_grid`])
//! and one sign per value. Every magnitude is one of eight levels, so a value is a level
//! index and a sign: four bits, which is what the codebooks hold (`nl3` the IQ3_XXS levels
//! as a sign-magnitude table, `o4` the odd values -15..15 of IQ3_S, linear in the nibble).
//! Both are read, never written: gguf-py has no quantizer for them.

use half::f16;

use super::iq3_grid::{IQ3S_GRID, IQ3XXS_GRID};
use super::{array, parity_signs, read_f16, write_f16, Block};
use crate::codebook::{encode_nibbles, NL3_TABLE};
use crate::packed::PackedBlock;
use crate::SourceFormat;

/// One element of a grid block: its level index (0..7) and whether it is negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Element {
    level: u8,
    negative: bool,
}

/// What both formats share: per 32 values a scale and 32 elements, each a level and a sign.
trait GridBlock {
    /// The value of a level index, as gguf-py multiplies it.
    fn magnitude(level: u8) -> f32;
    /// The element as a nibble of the format's codebook.
    fn nibble(e: Element) -> u8;
    /// The scale of sub-block `j` (32 values), in f32 as gguf-py computes it.
    fn sub_scale(&self, j: usize) -> f32;
    fn elements(&self, j: usize) -> [Element; 32];

    /// `scale * magnitude * sign`, gguf-py's order.
    fn dequantize_grid(&self, out: &mut [f32]) {
        for (j, chunk) in out.chunks_exact_mut(32).enumerate() {
            let db = self.sub_scale(j);
            for (o, e) in chunk.iter_mut().zip(self.elements(j)) {
                *o = db * Self::magnitude(e.level) * if e.negative { -1.0 } else { 1.0 };
            }
        }
    }

    fn repack_grid(&self, out: &mut [PackedBlock]) {
        for (j, o) in out.iter_mut().enumerate() {
            let mut payload = [0u8; 32];
            encode_nibbles(&self.elements(j).map(Self::nibble), &mut payload[..16]);
            *o = PackedBlock { payload, scale: self.sub_scale(j), second: 0.0 };
        }
    }
}

/// Level `j` (0..4) of grid entry `word`.
fn level(word: u16, j: usize) -> u8 {
    ((word >> (4 * j)) & 7) as u8
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockIq3Xxs {
    pub d: f16,
    /// Grid indices, eight per 32 values (four values each).
    pub qs: [u8; 64],
    /// One little-endian u32 per 32 values: four 7-bit sign indices (bits 7l..7l+6 sign
    /// values 8l..8l+7, the eighth sign making the count of negatives even), then the 4-bit
    /// scale in bits 28..31.
    pub scales: [u8; 32],
}

impl BlockIq3Xxs {
    fn word(&self, j: usize) -> u32 {
        u32::from_le_bytes(array(&self.scales[4 * j..]))
    }
}

impl GridBlock for BlockIq3Xxs {
    fn magnitude(level: u8) -> f32 {
        // The codebook's table: entries 0..7 are the IQ3_XXS levels.
        NL3_TABLE[level as usize] as f32
    }

    /// nl3: the level in bits 0..2, the sign in bit 3.
    fn nibble(e: Element) -> u8 {
        e.level | (u8::from(e.negative) << 3)
    }

    /// `d * (0.5 + ls) * 0.5`.
    fn sub_scale(&self, j: usize) -> f32 {
        self.d.to_f32() * (0.5f32 + (self.word(j) >> 28) as f32) * 0.5f32
    }

    fn elements(&self, j: usize) -> [Element; 32] {
        let word = self.word(j);
        std::array::from_fn(|i| {
            let (l, b) = (i / 8, i % 8);
            let index = (word >> (7 * l)) & 127;
            let signs = parity_signs(index);
            let entry = IQ3XXS_GRID[self.qs[8 * j + 2 * l + b / 4] as usize];
            Element { level: level(entry, b % 4), negative: (signs >> b) & 1 == 1 }
        })
    }
}

impl Block for BlockIq3Xxs {
    const FORMAT: SourceFormat = SourceFormat::IQ3_XXS;
    const F16_OFFSETS: &'static [usize] = &[0];

    fn read(b: &[u8]) -> Self {
        BlockIq3Xxs { d: read_f16(b, 0), qs: array(&b[2..]), scales: array(&b[66..]) }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        out[2..66].copy_from_slice(&self.qs);
        out[66..98].copy_from_slice(&self.scales);
    }
    fn dequantize(&self, out: &mut [f32]) {
        self.dequantize_grid(out);
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        self.repack_grid(out);
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockIq3S {
    pub d: f16,
    /// Bits 0..7 of the grid indices, eight per 32 values.
    pub qs: [u8; 64],
    /// Bit 8 of grid index e is bit e % 8 of byte e / 8.
    pub qh: [u8; 8],
    /// Bit i % 8 of byte i / 8 is set when value i is negative.
    pub signs: [u8; 32],
    /// The 4-bit scale of sub-block j in nibble j % 2 of byte j / 2.
    pub scales: [u8; 4],
}

impl GridBlock for BlockIq3S {
    fn magnitude(level: u8) -> f32 {
        (2 * level + 1) as f32
    }

    /// o4: value 2n - 15 for nibble n, so +(2l + 1) is 8 + l and -(2l + 1) is 7 - l.
    fn nibble(e: Element) -> u8 {
        if e.negative {
            7 - e.level
        } else {
            8 + e.level
        }
    }

    /// `d * (1 + 2 * ls)`.
    fn sub_scale(&self, j: usize) -> f32 {
        let ls = (self.scales[j / 2] >> (4 * (j % 2))) & 0x0F;
        self.d.to_f32() * (1 + 2 * ls) as f32
    }

    fn elements(&self, j: usize) -> [Element; 32] {
        std::array::from_fn(|l| {
            let (i, e) = (32 * j + l, 8 * j + l / 4);
            let index = usize::from(self.qs[e]) | (usize::from((self.qh[e / 8] >> (e % 8)) & 1) << 8);
            Element { level: level(IQ3S_GRID[index], l % 4), negative: (self.signs[i / 8] >> (i % 8)) & 1 == 1 }
        })
    }
}

impl Block for BlockIq3S {
    const FORMAT: SourceFormat = SourceFormat::IQ3_S;
    const F16_OFFSETS: &'static [usize] = &[0];

    fn read(b: &[u8]) -> Self {
        BlockIq3S {
            d: read_f16(b, 0),
            qs: array(&b[2..]),
            qh: array(&b[66..]),
            signs: array(&b[74..]),
            scales: array(&b[106..]),
        }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        out[2..66].copy_from_slice(&self.qs);
        out[66..74].copy_from_slice(&self.qh);
        out[74..106].copy_from_slice(&self.signs);
        out[106..110].copy_from_slice(&self.scales);
    }
    fn dequantize(&self, out: &mut [f32]) {
        self.dequantize_grid(out);
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        self.repack_grid(out);
    }
}
