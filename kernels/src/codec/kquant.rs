//! The K-quant super-block formats Q4_K, Q5_K (asymmetric, 6-bit scale/min pairs per
//! 32 values), Q6_K (signed 6-bit values, int8 scales per 16 values) and Q3_K (signed 3-bit
//! values, 6-bit scales per 16 values) and Q2_K (2-bit values, a 4-bit scale and a 4-bit min
//! per 16 values). Repacking rewrites their chunks into the per-32 conventions of the
//! codebooks.

use half::f16;

use super::{array, read_f16, write_f16, Block};
use crate::codebook::{encode_fifth_bits, encode_nibbles, encode_s3d, encode_sixth_bits, encode_u2m};
use crate::packed::PackedBlock;
use crate::SourceFormat;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ4K {
    pub d: f16,
    pub dmin: f16,
    /// Eight 6-bit (scale, min) pairs packed in 12 bytes.
    pub scales: [u8; 12],
    /// Four 32-byte chunks; chunk c holds sub-block 2c in low nibbles, 2c+1 in high nibbles.
    pub qs: [u8; 128],
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ5K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    /// Bit j of byte l is bit 4 of element l of sub-block j.
    pub qh: [u8; 32],
    pub qs: [u8; 128],
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ2K {
    /// Per 16 values: the scale in the low nibble, the min in the high one.
    pub scales: [u8; 16],
    /// 2-bit values: two 32-byte halves, 32-value chunk t of a half at shift 2t.
    pub qs: [u8; 64],
    pub d: f16,
    pub dmin: f16,
}

impl BlockQ2K {
    /// The 2-bit fields of elements 32j .. 32j+32.
    fn fields(&self, j: usize) -> [u8; 32] {
        std::array::from_fn(|l| (self.qs[32 * (j / 4) + l] >> (2 * (j % 4))) & 3)
    }
}

impl Block for BlockQ2K {
    const FORMAT: SourceFormat = SourceFormat::Q2_K;
    const F16_OFFSETS: &'static [usize] = &[80, 82];

    fn read(b: &[u8]) -> Self {
        BlockQ2K { scales: array(b), qs: array(&b[16..]), d: read_f16(b, 80), dmin: read_f16(b, 82) }
    }
    fn write(&self, out: &mut [u8]) {
        out[..16].copy_from_slice(&self.scales);
        out[16..80].copy_from_slice(&self.qs);
        write_f16(out, 80, self.d);
        write_f16(out, 82, self.dmin);
    }
    /// `(d * sc) * q - (dmin * m)` in f32 per 16 values, gguf-py's order.
    fn dequantize(&self, out: &mut [f32]) {
        for (j, chunk) in out.chunks_exact_mut(32).enumerate() {
            let fields = self.fields(j);
            for (h, half) in chunk.chunks_exact_mut(16).enumerate() {
                let sm = self.scales[2 * j + h];
                let (dl, ml) = (self.d.to_f32() * (sm & 0x0F) as f32, self.dmin.to_f32() * (sm >> 4) as f32);
                dequantize_asym(&fields[16 * h..16 * h + 16], dl, ml, half);
            }
        }
    }
    /// Exact: the sub-scales go into the values (q * sc <= 45), d and -dmin into the planes
    /// as they are, the sub-mins beside the values.
    fn repack(&self, out: &mut [PackedBlock]) {
        for (j, o) in out.iter_mut().enumerate() {
            let (lo, hi) = (self.scales[2 * j], self.scales[2 * j + 1]);
            let mut payload = [0u8; 32];
            encode_u2m(&self.fields(j), [lo & 0x0F, hi & 0x0F], [lo >> 4, hi >> 4], &mut payload[..12]);
            *o = PackedBlock { payload, scale: self.d.to_f32(), second: -self.dmin.to_f32() };
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ6K {
    /// Low 4 bits: two 64-byte halves, each 128 values (low nibbles of 64 bytes, then high).
    pub ql: [u8; 128],
    /// High 2 bits: two 32-byte halves, value group t of a half at shift 2t.
    pub qh: [u8; 64],
    /// One scale per 16 values.
    pub scales: [i8; 16],
    pub d: f16,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ3K {
    /// Bit j of byte l is the high bit of element l of 32-value chunk j (set: value 0..3,
    /// clear: value - 4).
    pub hmask: [u8; 32],
    /// Low 2 bits: two 32-byte halves, chunk t of a half at shift 2t.
    pub qs: [u8; 64],
    /// Sixteen 6-bit scales (offset 32): low nibbles in bytes 0..7 (scale i in byte i % 8,
    /// high nibble for i >= 8), the top two bits in bytes 8..11 (scale i at byte 8 + i % 4,
    /// shift 2 * (i / 4)).
    pub scales: [u8; 12],
    pub d: f16,
}

/// The 6-bit (scale, min) pair of sub-block `j` (ggml's `get_scale_min_k4`).
pub fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// 4-bit values of sub-block `j` of a Q4_K/Q5_K `qs` array.
fn k_nibbles(qs: &[u8; 128], j: usize) -> [u8; 32] {
    let chunk = &qs[32 * (j / 2)..32 * (j / 2) + 32];
    let shift = 4 * (j % 2);
    std::array::from_fn(|l| (chunk[l] >> shift) & 0x0F)
}

/// `(d * sc, dmin * m)` of sub-block `j`, in f32 as gguf-py computes them.
fn k_scale_min(d: f16, dmin: f16, scales: &[u8; 12], j: usize) -> (f32, f32) {
    let (sc, m) = scale_min_k4(j, scales);
    (d.to_f32() * sc as f32, dmin.to_f32() * m as f32)
}

fn dequantize_asym(values: &[u8], scale: f32, min: f32, out: &mut [f32]) {
    for (o, &q) in out.iter_mut().zip(values) {
        *o = scale * q as f32 - min;
    }
}

/// A codebook block holding 32 unsigned values (4 or 5 bits) with scale and min.
fn packed_unsigned(values: &[u8; 32], scale: f32, min: f32, fifth_bit: bool) -> PackedBlock {
    let mut payload = [0u8; 32];
    encode_nibbles(values, &mut payload[..16]);
    if fifth_bit {
        encode_fifth_bits(values, &mut payload[16..20]);
    }
    // Stored sign-folded so every kernel adds `min * sum`.
    PackedBlock { payload, scale, second: -min }
}

impl Block for BlockQ4K {
    const FORMAT: SourceFormat = SourceFormat::Q4_K;
    const F16_OFFSETS: &'static [usize] = &[0, 2];

    fn read(b: &[u8]) -> Self {
        BlockQ4K { d: read_f16(b, 0), dmin: read_f16(b, 2), scales: array(&b[4..]), qs: array(&b[16..]) }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        write_f16(out, 2, self.dmin);
        out[4..16].copy_from_slice(&self.scales);
        out[16..144].copy_from_slice(&self.qs);
    }
    fn dequantize(&self, out: &mut [f32]) {
        for (j, chunk) in out.chunks_exact_mut(32).enumerate() {
            let (scale, min) = k_scale_min(self.d, self.dmin, &self.scales, j);
            dequantize_asym(&k_nibbles(&self.qs, j), scale, min, chunk);
        }
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        for (j, o) in out.iter_mut().enumerate() {
            let (scale, min) = k_scale_min(self.d, self.dmin, &self.scales, j);
            *o = packed_unsigned(&k_nibbles(&self.qs, j), scale, min, false);
        }
    }
}

impl BlockQ5K {
    fn values(&self, j: usize) -> [u8; 32] {
        let lo = k_nibbles(&self.qs, j);
        std::array::from_fn(|l| lo[l] | (((self.qh[l] >> j) & 1) << 4))
    }
}

impl Block for BlockQ5K {
    const FORMAT: SourceFormat = SourceFormat::Q5_K;
    const F16_OFFSETS: &'static [usize] = &[0, 2];

    fn read(b: &[u8]) -> Self {
        BlockQ5K {
            d: read_f16(b, 0),
            dmin: read_f16(b, 2),
            scales: array(&b[4..]),
            qh: array(&b[16..]),
            qs: array(&b[48..]),
        }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        write_f16(out, 2, self.dmin);
        out[4..16].copy_from_slice(&self.scales);
        out[16..48].copy_from_slice(&self.qh);
        out[48..176].copy_from_slice(&self.qs);
    }
    fn dequantize(&self, out: &mut [f32]) {
        for (j, chunk) in out.chunks_exact_mut(32).enumerate() {
            let (scale, min) = k_scale_min(self.d, self.dmin, &self.scales, j);
            dequantize_asym(&self.values(j), scale, min, chunk);
        }
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        for (j, o) in out.iter_mut().enumerate() {
            let (scale, min) = k_scale_min(self.d, self.dmin, &self.scales, j);
            *o = packed_unsigned(&self.values(j), scale, min, true);
        }
    }
}

impl BlockQ6K {
    /// Unsigned 6-bit values (before the -32 offset) of elements 32j .. 32j+32.
    fn values(&self, j: usize) -> [u8; 32] {
        let (half, t) = (j / 4, j % 4);
        let ql = &self.ql[64 * half + 32 * (t % 2)..];
        let qh = &self.qh[32 * half..];
        std::array::from_fn(|l| {
            let lo = if t < 2 { ql[l] & 0x0F } else { ql[l] >> 4 };
            lo | (((qh[l] >> (2 * t)) & 3) << 4)
        })
    }

    /// `d * sc` of the 16-value sub-block `i`, in f32.
    fn sub_scale(&self, i: usize) -> f32 {
        self.d.to_f32() * self.scales[i] as f32
    }
}

impl BlockQ3K {
    /// Signed 3-bit values (-4..3) of elements 32j .. 32j+32.
    fn values(&self, j: usize) -> [i8; 32] {
        let (half, t) = (j / 4, j % 4);
        std::array::from_fn(|l| {
            let low = (self.qs[32 * half + l] >> (2 * t)) & 3;
            let high = (self.hmask[l] >> j) & 1;
            (low | (high << 2)) as i8 - 4
        })
    }

    /// The 6-bit scale of 16-value sub-block `i`, offset removed (-32..31).
    fn sub_scale_index(&self, i: usize) -> i8 {
        let low = (self.scales[i % 8] >> (4 * (i / 8))) & 0x0F;
        let high = (self.scales[8 + i % 4] >> (2 * (i / 4))) & 3;
        (low | (high << 4)) as i8 - 32
    }

    /// `d * sc` of the 16-value sub-block `i`, in f32 as gguf-py computes it.
    fn sub_scale(&self, i: usize) -> f32 {
        self.d.to_f32() * self.sub_scale_index(i) as f32
    }
}

impl Block for BlockQ3K {
    const FORMAT: SourceFormat = SourceFormat::Q3_K;
    const F16_OFFSETS: &'static [usize] = &[108];

    fn read(b: &[u8]) -> Self {
        BlockQ3K { hmask: array(b), qs: array(&b[32..]), scales: array(&b[96..]), d: read_f16(b, 108) }
    }
    fn write(&self, out: &mut [u8]) {
        out[..32].copy_from_slice(&self.hmask);
        out[32..96].copy_from_slice(&self.qs);
        out[96..108].copy_from_slice(&self.scales);
        write_f16(out, 108, self.d);
    }
    fn dequantize(&self, out: &mut [f32]) {
        for (j, chunk) in out.chunks_exact_mut(32).enumerate() {
            for (l, (o, q)) in chunk.iter_mut().zip(self.values(j)).enumerate() {
                *o = self.sub_scale(2 * j + l / 16) * q as f32;
            }
        }
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        for (j, o) in out.iter_mut().enumerate() {
            let mut payload = [0u8; 32];
            encode_s3d(&self.values(j), &mut payload[..12]);
            *o = PackedBlock { payload, scale: self.sub_scale(2 * j), second: self.sub_scale(2 * j + 1) };
        }
    }
}

impl Block for BlockQ6K {
    const FORMAT: SourceFormat = SourceFormat::Q6_K;
    const F16_OFFSETS: &'static [usize] = &[208];

    fn read(b: &[u8]) -> Self {
        BlockQ6K {
            ql: array(b),
            qh: array(&b[128..]),
            scales: array::<16>(&b[192..]).map(|v| v as i8),
            d: read_f16(b, 208),
        }
    }
    fn write(&self, out: &mut [u8]) {
        out[..128].copy_from_slice(&self.ql);
        out[128..192].copy_from_slice(&self.qh);
        for (o, s) in out[192..208].iter_mut().zip(self.scales) {
            *o = s as u8;
        }
        write_f16(out, 208, self.d);
    }
    fn dequantize(&self, out: &mut [f32]) {
        for (j, chunk) in out.chunks_exact_mut(32).enumerate() {
            for (l, (o, q)) in chunk.iter_mut().zip(self.values(j)).enumerate() {
                *o = self.sub_scale(2 * j + l / 16) * (q as i8 - 32) as f32;
            }
        }
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        for (j, o) in out.iter_mut().enumerate() {
            let values = self.values(j);
            let mut payload = [0u8; 32];
            encode_nibbles(&values, &mut payload[..16]);
            encode_sixth_bits(&values, &mut payload[16..24]);
            *o = PackedBlock { payload, scale: self.sub_scale(2 * j), second: self.sub_scale(2 * j + 1) };
        }
    }
}
