//! The 2-bit and 1-bit grid formats: IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S and IQ1_M (256 values a
//! block).
//!
//! Each stores groups of eight values as an index into a fixed grid ([`super::iq12_grid`])
//! whose elements take one of three levels: 8, 25 or 43 with a sign per value (IQ2), or -1,
//! 0 or 1 plus a delta of +-1/8 per group (IQ1). Either way a value is one of six integers
//! once the IQ1 values are multiplied by eight, which the codebooks hold as a sign-magnitude
//! table ([`NL2_TABLE`]): `nl2` where a scale covers 32 values (IQ2_XXS, IQ1_S), `nl2d` where
//! it covers 16 (IQ2_XS, IQ2_S, IQ1_M). The sub-block scales are the files' own products
//! (`d * (0.5 + s) * 0.25`; IQ1's `d * (2 s + 1)` divided by eight, since its values are
//! eight times the file's), rounded to f16 when packed, as for IQ3_XXS.
//! All five are read, never written: gguf-py has no quantizer for them.

use half::f16;

use super::iq12_grid::{IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID};
use super::{array, parity_signs, read_f16, write_f16, Block, SplitF16};
use crate::codebook::{encode_nibbles, encode_nl2d, NL2_TABLE};
use crate::contract::ScaleRule;
use crate::packed::PackedBlock;
use crate::SourceFormat;

/// Level `j` (0..2) of an entry of a 2-bit grid.
fn level(entry: u16, j: usize) -> u8 {
    ((entry >> (2 * j)) & 3) as u8
}

/// The IQ2 formats: per 16 values a scale `d * (0.5 + s) * 0.25`, and per value a level of
/// 8, 25, 43 and a sign.
trait Iq2Grid {
    /// The scales of elements 0..15 and 16..31 of sub-block `j`, in f32 as gguf-py computes them.
    fn half_scales(&self, j: usize) -> [f32; 2];
    /// Level index (0..2) and whether negative, for the 32 values of sub-block `j`.
    fn elements(&self, j: usize) -> [(u8, bool); 32];

    /// `db * level * sign`, gguf-py's order.
    fn dequantize_iq2(&self, out: &mut [f32]) {
        for (j, chunk) in out.chunks_exact_mut(32).enumerate() {
            let db = self.half_scales(j);
            for (i, (o, (l, negative))) in chunk.iter_mut().zip(self.elements(j)).enumerate() {
                *o = db[i / 16] * NL2_TABLE[l as usize] as f32 * if negative { -1.0 } else { 1.0 };
            }
        }
    }

    fn repack_iq2(&self, format: SourceFormat, out: &mut [PackedBlock]) {
        for (j, o) in out.iter_mut().enumerate() {
            let nibbles = self.elements(j).map(|(l, negative)| l | (u8::from(negative) << 3));
            *o = packed(format, &nibbles, self.half_scales(j));
        }
    }
}

/// The IQ1 formats: per 16 values a scale `d * (2 s + 1)`, per group of eight a delta of
/// +-1/8, per value a grid value of -1, 0 or 1.
trait Iq1Grid {
    /// The scales of elements 0..15 and 16..31 of sub-block `j`, in f32 as gguf-py computes them.
    fn half_scales(&self, j: usize) -> [f32; 2];
    /// Grid index (0..2047) and whether the delta is negative, for group `g` (0..31) of eight values.
    fn group(&self, g: usize) -> (usize, bool);

    /// `dl * (grid + delta)`, gguf-py's order.
    fn dequantize_iq1(&self, out: &mut [f32]) {
        for (g, chunk) in out.chunks_exact_mut(8).enumerate() {
            let (index, negative_delta) = self.group(g);
            let dl = self.half_scales(g / 4)[g / 2 % 2];
            let delta = if negative_delta { -0.125f32 } else { 0.125 };
            for (b, o) in chunk.iter_mut().enumerate() {
                *o = dl * ((level(IQ1S_GRID[index], b) as f32 - 1.0) + delta);
            }
        }
    }

    /// Eight times (grid + delta) is one of +-1, +-7, +-9: table entries 3..5 and a sign.
    fn repack_iq1(&self, format: SourceFormat, out: &mut [PackedBlock]) {
        for (j, o) in out.iter_mut().enumerate() {
            let nibbles: [u8; 32] = std::array::from_fn(|i| {
                let (index, negative_delta) = self.group(4 * j + i / 8);
                let v = 8 * (i32::from(level(IQ1S_GRID[index], i % 8)) - 1) + if negative_delta { -1 } else { 1 };
                let magnitude = match v.abs() {
                    1 => 3,
                    7 => 4,
                    _ => 5,
                };
                magnitude | (u8::from(v < 0) << 3)
            });
            // The values are eight times gguf-py's, so the scales are an eighth (exact in f32).
            *o = packed(format, &nibbles, self.half_scales(j).map(|s| s * 0.125));
        }
    }
}

/// A codebook block of `format`'s codebook: one scale (`nl2`) or one per half (`nl2d`).
fn packed(format: SourceFormat, nibbles: &[u8; 32], scales: [f32; 2]) -> PackedBlock {
    let mut payload = [0u8; 32];
    let second = match format.codebook().scale_rule() {
        ScaleRule::DualScale => {
            encode_nl2d(nibbles, &mut payload[..16]);
            scales[1]
        }
        _ => {
            encode_nibbles(nibbles, &mut payload[..16]);
            debug_assert_eq!(scales[0].to_bits(), scales[1].to_bits(), "{format}: one scale per 32 values");
            0.0
        }
    };
    PackedBlock { payload, scale: scales[0], second }
}

/// `d * (0.5 + s) * 0.25`: the IQ2 sub-block scale.
fn iq2_scale(d: f16, s: u32) -> f32 {
    d.to_f32() * (0.5f32 + s as f32) * 0.25f32
}

/// IQ2_XS and IQ2_S: a byte of two 4-bit scales per 32 values, the low nibble first.
fn nibble_scales(d: f16, byte: u8) -> [f32; 2] {
    [iq2_scale(d, u32::from(byte & 15)), iq2_scale(d, u32::from(byte >> 4))]
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockIq2Xxs {
    pub d: f16,
    /// Per 32 values two little-endian u32: four grid indices (one byte per group of eight),
    /// then four 7-bit sign indices (bits 7l..7l+6 for group l) and the 4-bit scale in bits 28..31.
    pub qs: [u8; 64],
}

impl BlockIq2Xxs {
    fn word(&self, j: usize, w: usize) -> u32 {
        u32::from_le_bytes(array(&self.qs[8 * j + 4 * w..]))
    }
}

impl Iq2Grid for BlockIq2Xxs {
    fn half_scales(&self, j: usize) -> [f32; 2] {
        [iq2_scale(self.d, self.word(j, 1) >> 28); 2]
    }

    fn elements(&self, j: usize) -> [(u8, bool); 32] {
        let signs = self.word(j, 1);
        std::array::from_fn(|i| {
            let (l, b) = (i / 8, i % 8);
            let entry = IQ2XXS_GRID[self.qs[8 * j + l] as usize];
            (level(entry, b), (parity_signs((signs >> (7 * l)) & 127) >> b) & 1 == 1)
        })
    }
}

impl Block for BlockIq2Xxs {
    const FORMAT: SourceFormat = SourceFormat::IQ2_XXS;
    const F16_OFFSETS: &'static [usize] = &[0];

    fn read(b: &[u8]) -> Self {
        BlockIq2Xxs { d: read_f16(b, 0), qs: array(&b[2..]) }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        out[2..66].copy_from_slice(&self.qs);
    }
    fn dequantize(&self, out: &mut [f32]) {
        self.dequantize_iq2(out);
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        self.repack_iq2(Self::FORMAT, out);
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockIq2Xs {
    pub d: f16,
    /// One little-endian u16 per group of eight: the grid index in bits 0..8, the 7-bit sign
    /// index in bits 9..15.
    pub qs: [u8; 64],
    /// Byte j: the scale of values 32j..32j+15 in its low nibble, of 32j+16..32j+31 in the high.
    pub scales: [u8; 8],
}

impl Iq2Grid for BlockIq2Xs {
    fn half_scales(&self, j: usize) -> [f32; 2] {
        nibble_scales(self.d, self.scales[j])
    }

    fn elements(&self, j: usize) -> [(u8, bool); 32] {
        std::array::from_fn(|i| {
            let (g, b) = (4 * j + i / 8, i % 8);
            let q = u16::from_le_bytes(array(&self.qs[2 * g..]));
            let entry = IQ2XS_GRID[usize::from(q & 511)];
            (level(entry, b), (parity_signs(u32::from(q >> 9)) >> b) & 1 == 1)
        })
    }
}

impl Block for BlockIq2Xs {
    const FORMAT: SourceFormat = SourceFormat::IQ2_XS;
    const F16_OFFSETS: &'static [usize] = &[0];

    fn read(b: &[u8]) -> Self {
        BlockIq2Xs { d: read_f16(b, 0), qs: array(&b[2..]), scales: array(&b[66..]) }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        out[2..66].copy_from_slice(&self.qs);
        out[66..74].copy_from_slice(&self.scales);
    }
    fn dequantize(&self, out: &mut [f32]) {
        self.dequantize_iq2(out);
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        self.repack_iq2(Self::FORMAT, out);
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockIq2S {
    pub d: f16,
    /// Bits 0..7 of the grid index of each group of eight.
    pub qs: [u8; 32],
    /// Byte g: the signs of group g, bit b for value b.
    pub signs: [u8; 32],
    /// Bits 8..9 of the grid index of group g at shift 2 (g % 4) of byte g / 4.
    pub qh: [u8; 8],
    /// As IQ2_XS's.
    pub scales: [u8; 8],
}

impl Iq2Grid for BlockIq2S {
    fn half_scales(&self, j: usize) -> [f32; 2] {
        nibble_scales(self.d, self.scales[j])
    }

    fn elements(&self, j: usize) -> [(u8, bool); 32] {
        std::array::from_fn(|i| {
            let (g, b) = (4 * j + i / 8, i % 8);
            let index = usize::from(self.qs[g]) | (usize::from((self.qh[g / 4] >> (2 * (g % 4))) & 3) << 8);
            (level(IQ2S_GRID[index], b), (self.signs[g] >> b) & 1 == 1)
        })
    }
}

impl Block for BlockIq2S {
    const FORMAT: SourceFormat = SourceFormat::IQ2_S;
    const F16_OFFSETS: &'static [usize] = &[0];

    fn read(b: &[u8]) -> Self {
        BlockIq2S {
            d: read_f16(b, 0),
            qs: array(&b[2..]),
            signs: array(&b[34..]),
            qh: array(&b[66..]),
            scales: array(&b[74..]),
        }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        out[2..34].copy_from_slice(&self.qs);
        out[34..66].copy_from_slice(&self.signs);
        out[66..74].copy_from_slice(&self.qh);
        out[74..82].copy_from_slice(&self.scales);
    }
    fn dequantize(&self, out: &mut [f32]) {
        self.dequantize_iq2(out);
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        self.repack_iq2(Self::FORMAT, out);
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockIq1S {
    pub d: f16,
    /// Bits 0..7 of the grid index of each group of eight.
    pub qs: [u8; 32],
    /// One little-endian u16 per 32 values: bits 3l..3l+2 are bits 8..10 of group l's grid
    /// index, bits 12..14 the scale, bit 15 the delta's sign.
    pub qh: [u8; 16],
}

impl BlockIq1S {
    fn qh(&self, j: usize) -> u16 {
        u16::from_le_bytes(array(&self.qh[2 * j..]))
    }
}

impl Iq1Grid for BlockIq1S {
    fn half_scales(&self, j: usize) -> [f32; 2] {
        [self.d.to_f32() * f32::from(2 * ((self.qh(j) >> 12) & 7) + 1); 2]
    }

    fn group(&self, g: usize) -> (usize, bool) {
        let qh = self.qh(g / 4);
        (usize::from(self.qs[g]) | (usize::from((qh >> (3 * (g % 4))) & 7) << 8), qh & 0x8000 != 0)
    }
}

impl Block for BlockIq1S {
    const FORMAT: SourceFormat = SourceFormat::IQ1_S;
    const F16_OFFSETS: &'static [usize] = &[0];

    fn read(b: &[u8]) -> Self {
        BlockIq1S { d: read_f16(b, 0), qs: array(&b[2..]), qh: array(&b[34..]) }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        out[2..34].copy_from_slice(&self.qs);
        out[34..50].copy_from_slice(&self.qh);
    }
    fn dequantize(&self, out: &mut [f32]) {
        self.dequantize_iq1(out);
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        self.repack_iq1(Self::FORMAT, out);
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockIq1M {
    /// Bits 0..7 of the grid index of each group of eight.
    pub qs: [u8; 32],
    /// Nibble g % 2 of byte g / 2 for group g: bits 8..10 of its grid index, then its delta's sign.
    pub qh: [u8; 16],
    /// Four little-endian u16: bits 3t..3t+2 of word w are the scale of values 16 (4w + t) ..
    /// +15; the top nibbles of the four words, word 0's lowest, are the block's f16 scale.
    pub scales: [u8; 8],
}

impl BlockIq1M {
    fn word(&self, w: usize) -> u16 {
        u16::from_le_bytes(array(&self.scales[2 * w..]))
    }

    fn d(&self) -> f16 {
        // The scale words start the `scales` field (byte 48 of the block).
        SplitF16 { offset: 0 }.read(&self.scales)
    }

    /// The 3-bit scale of 16-value chunk `c` (0..15).
    fn chunk_scale(&self, c: usize) -> u16 {
        (self.word(c / 4) >> (3 * (c % 4))) & 7
    }
}

impl Iq1Grid for BlockIq1M {
    fn half_scales(&self, j: usize) -> [f32; 2] {
        let d = self.d().to_f32();
        [0, 1].map(|h| d * f32::from(2 * self.chunk_scale(2 * j + h) + 1))
    }

    fn group(&self, g: usize) -> (usize, bool) {
        let h = (self.qh[g / 2] >> (4 * (g % 2))) & 15;
        (usize::from(self.qs[g]) | (usize::from(h & 7) << 8), h & 8 != 0)
    }
}

impl Block for BlockIq1M {
    const FORMAT: SourceFormat = SourceFormat::IQ1_M;
    const F16_OFFSETS: &'static [usize] = &[];

    const SPLIT_F16: Option<SplitF16> = Some(SplitF16 { offset: 48 });
    fn read(b: &[u8]) -> Self {
        BlockIq1M { qs: array(&b[0..]), qh: array(&b[32..]), scales: array(&b[48..]) }
    }
    fn write(&self, out: &mut [u8]) {
        out[0..32].copy_from_slice(&self.qs);
        out[32..48].copy_from_slice(&self.qh);
        out[48..56].copy_from_slice(&self.scales);
    }
    fn dequantize(&self, out: &mut [f32]) {
        self.dequantize_iq1(out);
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        self.repack_iq1(Self::FORMAT, out);
    }
}
