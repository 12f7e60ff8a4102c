//! The 32-value "legacy" formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
//! Quantizers follow ggml's reference rounding (as gguf-py reproduces it), so a row
//! quantized here has the same bytes as one quantized by gguf-py.

use half::f16;

use super::{array, read_f16, write_f16, Block, Quantize};
use crate::codebook::{encode_fifth_bits, encode_nibbles};
use crate::packed::PackedBlock;
use crate::SourceFormat;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ4_0 {
    pub d: f16,
    pub qs: [u8; 16],
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ4_1 {
    pub d: f16,
    pub m: f16,
    pub qs: [u8; 16],
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ5_0 {
    pub d: f16,
    /// Bit i is bit 4 of element i (little-endian u32).
    pub qh: [u8; 4],
    pub qs: [u8; 16],
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ5_1 {
    pub d: f16,
    pub m: f16,
    pub qh: [u8; 4],
    pub qs: [u8; 16],
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ8_0 {
    pub d: f16,
    pub qs: [i8; 32],
}

/// Unsigned 4-bit values of the nibble convention, elements 0..32.
pub(super) fn nibble_values(qs: &[u8; 16]) -> [u8; 32] {
    std::array::from_fn(|i| if i < 16 { qs[i] & 0x0F } else { qs[i - 16] >> 4 })
}

/// 5-bit values from nibbles plus the fifth-bit mask.
fn five_bit_values(qs: &[u8; 16], qh: &[u8; 4]) -> [u8; 32] {
    let hi = u32::from_le_bytes(*qh);
    let lo = nibble_values(qs);
    std::array::from_fn(|i| lo[i] | ((((hi >> i) & 1) as u8) << 4))
}

/// The value of largest magnitude, keeping its sign (first one on ties, as numpy's argmax).
pub(super) fn signed_abs_max(x: &[f32]) -> f32 {
    x[1..].iter().fold(x[0], |best, &v| if v.abs() > best.abs() { v } else { best })
}

fn min_max(x: &[f32]) -> (f32, f32) {
    x.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

pub(super) fn inverse(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

/// `min(levels, trunc(v))` as ggml computes an unsigned level.
fn level(v: f32, levels: u8) -> u8 {
    (v.trunc() as u8).min(levels)
}

pub(super) fn pack_nibbles(q: &[u8; 32]) -> [u8; 16] {
    let mut qs = [0u8; 16];
    encode_nibbles(q, &mut qs);
    qs
}

fn pack_fifth_bits(q: &[u8; 32]) -> [u8; 4] {
    let mut qh = [0u8; 4];
    encode_fifth_bits(q, &mut qh);
    qh
}

pub(super) fn payload_of(parts: &[&[u8]]) -> [u8; 32] {
    let mut payload = [0u8; 32];
    let mut at = 0;
    for part in parts {
        payload[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    payload
}

impl Block for BlockQ4_0 {
    const FORMAT: SourceFormat = SourceFormat::Q4_0;
    const F16_OFFSETS: &'static [usize] = &[0];

    fn read(b: &[u8]) -> Self {
        BlockQ4_0 { d: read_f16(b, 0), qs: array(&b[2..]) }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        out[2..18].copy_from_slice(&self.qs);
    }
    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, q) in out.iter_mut().zip(nibble_values(&self.qs)) {
            *o = d * (q as i8 - 8) as f32;
        }
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        out[0] = PackedBlock { payload: payload_of(&[&self.qs]), scale: self.d.to_f32(), second: 0.0 };
    }
}

impl Quantize for BlockQ4_0 {
    fn quantize(x: &[f32]) -> Self {
        let d = signed_abs_max(x) / -8.0;
        let id = inverse(d);
        let q: [u8; 32] = std::array::from_fn(|i| level(x[i] * id + 8.5, 15));
        BlockQ4_0 { d: f16::from_f32(d), qs: pack_nibbles(&q) }
    }
}

impl Block for BlockQ4_1 {
    const FORMAT: SourceFormat = SourceFormat::Q4_1;
    const F16_OFFSETS: &'static [usize] = &[0, 2];

    fn read(b: &[u8]) -> Self {
        BlockQ4_1 { d: read_f16(b, 0), m: read_f16(b, 2), qs: array(&b[4..]) }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        write_f16(out, 2, self.m);
        out[4..20].copy_from_slice(&self.qs);
    }
    fn dequantize(&self, out: &mut [f32]) {
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        for (o, q) in out.iter_mut().zip(nibble_values(&self.qs)) {
            *o = (d * q as f32) + m;
        }
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        out[0] = PackedBlock { payload: payload_of(&[&self.qs]), scale: self.d.to_f32(), second: self.m.to_f32() };
    }
}

impl Quantize for BlockQ4_1 {
    fn quantize(x: &[f32]) -> Self {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inverse(d);
        let q: [u8; 32] = std::array::from_fn(|i| level((x[i] - min) * id + 0.5, 15));
        BlockQ4_1 { d: f16::from_f32(d), m: f16::from_f32(min), qs: pack_nibbles(&q) }
    }
}

impl Block for BlockQ5_0 {
    const FORMAT: SourceFormat = SourceFormat::Q5_0;
    const F16_OFFSETS: &'static [usize] = &[0];

    fn read(b: &[u8]) -> Self {
        BlockQ5_0 { d: read_f16(b, 0), qh: array(&b[2..]), qs: array(&b[6..]) }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        out[2..6].copy_from_slice(&self.qh);
        out[6..22].copy_from_slice(&self.qs);
    }
    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, q) in out.iter_mut().zip(five_bit_values(&self.qs, &self.qh)) {
            *o = d * (q as i8 - 16) as f32;
        }
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        out[0] = PackedBlock { payload: payload_of(&[&self.qs, &self.qh]), scale: self.d.to_f32(), second: 0.0 };
    }
}

impl Quantize for BlockQ5_0 {
    fn quantize(x: &[f32]) -> Self {
        let d = signed_abs_max(x) / -16.0;
        let id = inverse(d);
        let q: [u8; 32] = std::array::from_fn(|i| level(x[i] * id + 16.5, 31));
        BlockQ5_0 { d: f16::from_f32(d), qh: pack_fifth_bits(&q), qs: pack_nibbles(&q) }
    }
}

impl Block for BlockQ5_1 {
    const FORMAT: SourceFormat = SourceFormat::Q5_1;
    const F16_OFFSETS: &'static [usize] = &[0, 2];

    fn read(b: &[u8]) -> Self {
        BlockQ5_1 { d: read_f16(b, 0), m: read_f16(b, 2), qh: array(&b[4..]), qs: array(&b[8..]) }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        write_f16(out, 2, self.m);
        out[4..8].copy_from_slice(&self.qh);
        out[8..24].copy_from_slice(&self.qs);
    }
    fn dequantize(&self, out: &mut [f32]) {
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        for (o, q) in out.iter_mut().zip(five_bit_values(&self.qs, &self.qh)) {
            *o = (d * q as f32) + m;
        }
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        out[0] =
            PackedBlock { payload: payload_of(&[&self.qs, &self.qh]), scale: self.d.to_f32(), second: self.m.to_f32() };
    }
}

impl Quantize for BlockQ5_1 {
    fn quantize(x: &[f32]) -> Self {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inverse(d);
        let q: [u8; 32] = std::array::from_fn(|i| level((x[i] - min) * id + 0.5, 31));
        BlockQ5_1 { d: f16::from_f32(d), m: f16::from_f32(min), qh: pack_fifth_bits(&q), qs: pack_nibbles(&q) }
    }
}

impl Block for BlockQ8_0 {
    const FORMAT: SourceFormat = SourceFormat::Q8_0;
    const F16_OFFSETS: &'static [usize] = &[0];

    fn read(b: &[u8]) -> Self {
        BlockQ8_0 { d: read_f16(b, 0), qs: array::<32>(&b[2..]).map(|v| v as i8) }
    }
    fn write(&self, out: &mut [u8]) {
        write_f16(out, 0, self.d);
        for (o, q) in out[2..34].iter_mut().zip(self.qs) {
            *o = q as u8;
        }
    }
    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, q) in out.iter_mut().zip(self.qs) {
            *o = q as f32 * d;
        }
    }
    fn repack(&self, out: &mut [PackedBlock]) {
        out[0] = PackedBlock { payload: self.qs.map(|v| v as u8), scale: self.d.to_f32(), second: 0.0 };
    }
}

impl Quantize for BlockQ8_0 {
    fn quantize(x: &[f32]) -> Self {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = inverse(d);
        // ggml rounds half away from zero here (roundf), unlike the activation quantizer.
        BlockQ8_0 { d: f16::from_f32(d), qs: std::array::from_fn(|i| (x[i] * id).round() as i8) }
    }
}
