//! Codebooks: one packed layout and one decode rule each. The dispatch is keyed by
//! codebook, never by source format; several source formats share one (aliases).
//!
//! Packed layout, K-block major and column minor (DESIGN.md section 2):
//! `payload: u8 [KBLK][N][PB]`, `scale: f16 [KBLK][N]`, `second: f16 [KBLK][N]`.
//! Payload conventions per 32-value block (byte j holds element j in its low nibble
//! and element j + 16 in its high nibble wherever nibbles are used):
//! - `s4`, `nl4`, `u4`, `e2m1`, `nl3`, `o4`, `nl2`: 16 nibble bytes.
//! - `nl2d`: 16 bytes of nibbles too, but in halves: the table codebook with two scales
//!   (elements 0..15, 16..31). Little-endian word i holds elements 4i..4i+3 in its low four
//!   nibbles and 16+4i..16+4i+3 in its high four, in order, so each 16-bit half of a word is a
//!   GPU byte-permute selector for four elements of one half: no nibble shuffling before the
//!   table lookup (see [`nl2d_place`]).
//! - `s5`, `u5`: 16 nibble bytes, then a little-endian u32 whose bit i is bit 4 of element i.
//! - `s6d`: 16 nibble bytes (bits 0..3), then 8 bytes where byte 16 + i holds bits 4..5 of
//!   elements 4i .. 4i+3 at shifts 0, 2, 4, 6.
//! - `s8`: 32 two's-complement bytes.
//! - `s3d`: values -4..3 (Q3_K), two scales like `s6d`. Two little-endian u32 words of 2-bit
//!   low fields, where byte b of word j holds element 16j + 4s + b at shift 2s; then a u32 of
//!   signs, where bit g of byte b is set when element 4g + b is negative. An element is its low
//!   field with bits 2..7 set when negative: a GPU decodes four of them in a shift, a byte
//!   permute (its sign-replicate mode) and one three-input logic op.
//! - `u2m`: Q2_K's 2-bit values with a 4-bit scale and a 4-bit min per 16. Two u32 words of
//!   2-bit fields laid out as `s3d`'s low words, then one byte of the two sub-scales (low
//!   nibble elements 0..15) and one of the two sub-mins, then two zero bytes. An element is
//!   its field times its half's sub-scale (0..45); the scale plane holds Q2_K's d, the second
//!   plane -dmin, and the min term is `-dmin * (m_lo * sum(a[0..16]) + m_hi * sum(a[16..32]))`
//!   (see [`Codebook::sub_mins`]).
//!
//! Every scale plane holds f16 bits except `e2m1`'s, which holds bf16 bits: an MXFP4 block
//! scale is a power of two from 2^-128 to 2^127 (E8M0, halved), beyond f16's range but exact
//! in bf16 (its 8-bit exponent, with subnormals down to 2^-133). See [`ScaleFormat`].

use crate::contract::ScaleRule;
use crate::vocab::Vocabulary;

/// The IQ4 non-linear value table (IQ4_NL, IQ4_XS).
pub const IQ4_TABLE: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/// The IQ3_XXS levels as a sign-magnitude table: entries 0..7 the levels, 8..15 their negatives.
pub const NL3_TABLE: [i8; 16] = [4, 12, 20, 28, 36, 44, 52, 62, -4, -12, -20, -28, -36, -44, -52, -62];

/// The grid levels of the 2-bit and 1-bit i-quants as a sign-magnitude table (`nl2`, `nl2d`):
/// entries 0..2 the IQ2 levels 8, 25, 43; entries 3..5 the IQ1 values times eight (a grid
/// value -1, 0 or 1 plus a delta of +-1/8: 1, 7, 9 in magnitude); 6 and 7 unused (zero);
/// 8..15 the negatives of 0..7.
pub const NL2_TABLE: [i8; 16] = [8, 25, 43, 1, 7, 9, 0, 0, -8, -25, -43, -1, -7, -9, 0, 0];

/// The MXFP4 (E2M1) values, doubled so that they are integers: entries 0..7 are
/// 0, 0.5, 1, 1.5, 2, 3, 4, 6 times two, entries 8..15 their negatives.
pub const E2M1_TABLE: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// How a codebook's scale plane stores each block scale in 16 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleFormat {
    /// IEEE binary16; a source scale is rounded to it (nearest even) when repacked.
    F16,
    /// bfloat16 (the upper half of an f32); a source scale must be exact in it.
    Bf16,
}

impl ScaleFormat {
    /// The stored scale as f32 (exact in both formats).
    #[inline(always)]
    pub fn widen(self, bits: u16) -> f32 {
        match self {
            ScaleFormat::F16 => half::f16::from_bits(bits).to_f32(),
            ScaleFormat::Bf16 => f32::from_bits(u32::from(bits) << 16),
        }
    }

    /// The bits that store `value`: f16 rounds to nearest even, bf16 takes only exact values.
    /// `None` when the result would not be finite or (bf16) not exact.
    pub fn narrow(self, value: f32) -> Option<u16> {
        match self {
            ScaleFormat::F16 => Some(half::f16::from_f32(value)).filter(|h| h.is_finite()).map(|h| h.to_bits()),
            ScaleFormat::Bf16 => {
                let bits = value.to_bits();
                (value.is_finite() && bits & 0xFFFF == 0).then_some((bits >> 16) as u16)
            }
        }
    }
}

/// Serialized, parsed and shown as its name (`s4`, `nl4`, ...): see [`Vocabulary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Codebook {
    S4,
    Nl4,
    U4,
    S5,
    U5,
    S6d,
    S8,
    E2m1,
    S3d,
    Nl3,
    O4,
    U2m,
    Nl2,
    Nl2d,
}

impl Codebook {
    pub const ALL: [Codebook; 14] = [
        Codebook::S4,
        Codebook::Nl4,
        Codebook::U4,
        Codebook::S5,
        Codebook::U5,
        Codebook::S6d,
        Codebook::S8,
        Codebook::E2m1,
        Codebook::S3d,
        Codebook::Nl3,
        Codebook::O4,
        Codebook::U2m,
        Codebook::Nl2,
        Codebook::Nl2d,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Codebook::S4 => "s4",
            Codebook::Nl4 => "nl4",
            Codebook::U4 => "u4",
            Codebook::S5 => "s5",
            Codebook::U5 => "u5",
            Codebook::S6d => "s6d",
            Codebook::S8 => "s8",
            Codebook::E2m1 => "e2m1",
            Codebook::S3d => "s3d",
            Codebook::Nl3 => "nl3",
            Codebook::O4 => "o4",
            Codebook::U2m => "u2m",
            Codebook::Nl2 => "nl2",
            Codebook::Nl2d => "nl2d",
        }
    }

    /// Payload bytes per 32 values (`PB`).
    pub const fn payload_bytes(self) -> usize {
        match self {
            Codebook::S4
            | Codebook::Nl4
            | Codebook::U4
            | Codebook::E2m1
            | Codebook::Nl3
            | Codebook::O4
            | Codebook::Nl2
            | Codebook::Nl2d => 16,
            Codebook::S5 | Codebook::U5 => 20,
            Codebook::S6d => 24,
            Codebook::S8 => 32,
            Codebook::S3d | Codebook::U2m => 12,
        }
    }

    /// How a block's integer dot becomes its f32 contribution.
    pub const fn scale_rule(self) -> ScaleRule {
        match self {
            Codebook::U4 | Codebook::U5 | Codebook::U2m => ScaleRule::Asymmetric,
            Codebook::S6d | Codebook::S3d | Codebook::Nl2d => ScaleRule::DualScale,
            _ => ScaleRule::Single,
        }
    }

    /// How the scale plane stores a block scale.
    pub const fn scale_format(self) -> ScaleFormat {
        match self {
            Codebook::E2m1 => ScaleFormat::Bf16,
            _ => ScaleFormat::F16,
        }
    }

    /// Whether the packed matrix carries the `second` f16 plane (min or second scale).
    pub const fn has_second(self) -> bool {
        !matches!(self.scale_rule(), ScaleRule::Single)
    }

    /// Bytes one packed block of 32 values streams: payload, the 16-bit scale and, where the
    /// codebook has one, the second f16 plane.
    pub const fn block_bytes(self) -> usize {
        self.payload_bytes() + 2 + if self.has_second() { 2 } else { 0 }
    }

    /// Decode one packed block (`payload.len() == self.payload_bytes()`) to its 32 integer values.
    #[inline]
    pub fn decode(self, payload: &[u8]) -> [i8; 32] {
        match self {
            Codebook::S4 => decode_s4(payload),
            Codebook::Nl4 => decode_nl4(payload),
            Codebook::U4 => decode_u4(payload),
            Codebook::S5 => decode_s5(payload),
            Codebook::U5 => decode_u5(payload),
            Codebook::S6d => decode_s6d(payload),
            Codebook::S8 => decode_s8(payload),
            Codebook::E2m1 => decode_e2m1(payload),
            Codebook::S3d => decode_s3d(payload),
            Codebook::Nl3 => decode_nl3(payload),
            Codebook::O4 => decode_o4(payload),
            Codebook::U2m => decode_u2m(payload),
            Codebook::Nl2 => decode_nl2(payload),
            Codebook::Nl2d => decode_nl2d(payload),
        }
    }

    /// Whether the codebook's min has a weight per half block (`u2m`: Q2_K's sub-block mins),
    /// so the min multiplies a weighted sum of the activation halves, not the block sum.
    pub const fn has_sub_mins(self) -> bool {
        matches!(self, Codebook::U2m)
    }

    /// The integer weights of an asymmetric codebook's min over elements 0..15 and 16..31:
    /// Q2_K's sub-block mins for `u2m`, one for every other codebook (its min covers the block).
    #[inline]
    pub fn sub_mins(self, payload: &[u8]) -> [i32; 2] {
        if self.has_sub_mins() {
            [i32::from(payload[9] & 0x0F), i32::from(payload[9] >> 4)]
        } else {
            [1, 1]
        }
    }
}

#[inline(always)]
fn nibbles(payload: &[u8], mut f: impl FnMut(u8) -> i8) -> [i8; 32] {
    let mut v = [0i8; 32];
    for j in 0..16 {
        v[j] = f(payload[j] & 0x0F);
        v[j + 16] = f(payload[j] >> 4);
    }
    v
}

#[inline(always)]
fn fifth_bits(payload: &[u8]) -> u32 {
    u32::from_le_bytes([payload[16], payload[17], payload[18], payload[19]])
}

#[inline]
pub fn decode_s4(p: &[u8]) -> [i8; 32] {
    nibbles(p, |x| x as i8 - 8)
}

#[inline]
pub fn decode_nl4(p: &[u8]) -> [i8; 32] {
    nibbles(p, |x| IQ4_TABLE[x as usize])
}

#[inline]
pub fn decode_e2m1(p: &[u8]) -> [i8; 32] {
    nibbles(p, |x| E2M1_TABLE[x as usize])
}

#[inline]
pub fn decode_nl3(p: &[u8]) -> [i8; 32] {
    nibbles(p, |x| NL3_TABLE[x as usize])
}

/// `nl2` and `nl2d` share the table; their scale rules and nibble layouts differ.
#[inline]
pub fn decode_nl2(p: &[u8]) -> [i8; 32] {
    nibbles(p, |x| NL2_TABLE[x as usize])
}

/// Where element `i` (0..32) of an `nl2d` payload lives: its byte and shift. Word `w` of half
/// `h` holds elements 16h + 4w .. 16h + 4w + 3 in bytes 4w + 2h and 4w + 2h + 1, low nibble first.
const fn nl2d_place(i: usize) -> (usize, u32) {
    let (half, r) = (i / 16, i % 16);
    (4 * (r / 4) + 2 * half + (r % 4) / 2, 4 * (r % 2) as u32)
}

#[inline]
pub fn decode_nl2d(p: &[u8]) -> [i8; 32] {
    std::array::from_fn(|i| {
        let (byte, shift) = nl2d_place(i);
        NL2_TABLE[((p[byte] >> shift) & 0x0F) as usize]
    })
}

/// The odd values -15..15 of IQ3_S: nibble n is 2n - 15. (The CUDA M = 1 dot uses that form,
/// `2 (n . a) - 15 sum(a)`, so it relies on the activation block sums as the asymmetric
/// codebooks do.)
#[inline]
pub fn decode_o4(p: &[u8]) -> [i8; 32] {
    nibbles(p, |x| 2 * x as i8 - 15)
}

#[inline]
pub fn decode_u4(p: &[u8]) -> [i8; 32] {
    nibbles(p, |x| x as i8)
}

#[inline]
pub fn decode_u5(p: &[u8]) -> [i8; 32] {
    let hi = fifth_bits(p);
    let mut v = decode_u4(p);
    for (i, x) in v.iter_mut().enumerate() {
        *x |= (((hi >> i) & 1) << 4) as i8;
    }
    v
}

#[inline]
pub fn decode_s5(p: &[u8]) -> [i8; 32] {
    let mut v = decode_u5(p);
    for x in &mut v {
        *x -= 16;
    }
    v
}

#[inline]
pub fn decode_s6d(p: &[u8]) -> [i8; 32] {
    let mut v = decode_u4(p);
    for (i, x) in v.iter_mut().enumerate() {
        let hi = (p[16 + i / 4] >> (2 * (i % 4))) & 3;
        *x = (*x | (hi << 4) as i8) - 32;
    }
    v
}

/// Where element `i` (0..32) of an `s3d` payload lives: the byte and shift of its 2-bit low
/// field, the byte and bit of its sign (the layout both [`decode_s3d`] and `encode_s3d` use).
const fn s3d_place(i: usize) -> (usize, usize, usize, usize) {
    (4 * (i / 16) + i % 4, 2 * ((i % 16) / 4), 8 + i % 4, i / 4)
}

#[inline]
pub fn decode_s3d(p: &[u8]) -> [i8; 32] {
    std::array::from_fn(|i| {
        let (low_byte, shift, sign_byte, bit) = s3d_place(i);
        let low = ((p[low_byte] >> shift) & 3) as i8;
        if (p[sign_byte] >> bit) & 1 == 1 {
            low - 4
        } else {
            low
        }
    })
}

#[inline]
pub fn decode_u2m(p: &[u8]) -> [i8; 32] {
    std::array::from_fn(|i| {
        let (low_byte, shift, _, _) = s3d_place(i);
        let field = (p[low_byte] >> shift) & 3;
        let sub_scale = (p[8] >> (4 * (i / 16))) & 0x0F;
        (field * sub_scale) as i8
    })
}

#[inline]
pub fn decode_s8(p: &[u8]) -> [i8; 32] {
    let mut v = [0i8; 32];
    for (x, &b) in v.iter_mut().zip(p) {
        *x = b as i8;
    }
    v
}

/// Encode 32 unsigned 4-bit values into the nibble convention (inverse of the nibble decode).
pub(crate) fn encode_nibbles(values: &[u8; 32], out: &mut [u8]) {
    for j in 0..16 {
        out[j] = (values[j] & 0x0F) | ((values[j + 16] & 0x0F) << 4);
    }
}

/// Encode 32 `nl2d` table indices (0..15) in its halved nibble layout (inverse of [`decode_nl2d`]'s lookup).
pub(crate) fn encode_nl2d(indices: &[u8; 32], out: &mut [u8]) {
    out[..16].fill(0);
    for (i, &x) in indices.iter().enumerate() {
        let (byte, shift) = nl2d_place(i);
        out[byte] |= (x & 0x0F) << shift;
    }
}

/// Encode bit 4 of 32 values as the little-endian fifth-bit mask of `s5`/`u5` payloads.
pub(crate) fn encode_fifth_bits(values: &[u8; 32], out: &mut [u8]) {
    let mask = values.iter().enumerate().fold(0u32, |m, (i, &v)| m | (u32::from((v >> 4) & 1) << i));
    out.copy_from_slice(&mask.to_le_bytes());
}

/// Encode 32 values in -4..3 as an `s3d` payload (12 bytes; inverse of [`decode_s3d`]).
pub(crate) fn encode_s3d(values: &[i8; 32], out: &mut [u8]) {
    out[..12].fill(0);
    for (i, &v) in values.iter().enumerate() {
        let (low_byte, shift, sign_byte, bit) = s3d_place(i);
        out[low_byte] |= ((v & 3) as u8) << shift;
        out[sign_byte] |= u8::from(v < 0) << bit;
    }
}

/// Encode Q2_K's 2-bit fields of 32 values with their two sub-scales and sub-mins (each
/// `[elements 0..15, elements 16..31]`, 4 bits) as a `u2m` payload (12 bytes).
pub(crate) fn encode_u2m(fields: &[u8; 32], sub_scales: [u8; 2], sub_mins: [u8; 2], out: &mut [u8]) {
    out[..12].fill(0);
    for (i, &q) in fields.iter().enumerate() {
        let (low_byte, shift, _, _) = s3d_place(i);
        out[low_byte] |= (q & 3) << shift;
    }
    out[8] = (sub_scales[0] & 0x0F) | (sub_scales[1] << 4);
    out[9] = (sub_mins[0] & 0x0F) | (sub_mins[1] << 4);
}

/// Encode bits 4..5 of 32 values as the 8 trailing bytes of an `s6d` payload.
pub(crate) fn encode_sixth_bits(values: &[u8; 32], out: &mut [u8]) {
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = (0..4).fold(0u8, |b, j| b | (((values[4 * i + j] >> 4) & 3) << (2 * j)));
    }
}

impl Vocabulary for Codebook {
    const WHAT: &'static str = "codebook";
    const ALL: &'static [Self] = &Codebook::ALL;
    fn name(self) -> &'static str {
        Codebook::name(self)
    }
}
crate::vocabulary_impls!(Codebook);
