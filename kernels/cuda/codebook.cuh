// Packed codebook blocks: loads and decode to eight int8x4 words (words 0..3 hold elements
// 0..15, words 4..7 elements 16..31), ready for dp4a. Layout and value rules: codebook.rs.
#pragma once
#include "contract.cuh"

namespace vnni {

typedef unsigned char u8;
typedef unsigned int u32;

enum CodebookId { CB_S4 = 0, CB_NL4 = 1, CB_U4 = 2, CB_S5 = 3, CB_U5 = 4, CB_S6D = 5, CB_S8 = 6 };

template <int CB> struct Codebook;
template <> struct Codebook<CB_S4>  { static const int PB = 16; static const int RULE = RULE_SINGLE; static const bool SECOND = false; };
template <> struct Codebook<CB_NL4> { static const int PB = 16; static const int RULE = RULE_SINGLE; static const bool SECOND = false; };
template <> struct Codebook<CB_U4>  { static const int PB = 16; static const int RULE = RULE_ASYMMETRIC; static const bool SECOND = true; };
template <> struct Codebook<CB_S5>  { static const int PB = 20; static const int RULE = RULE_SINGLE; static const bool SECOND = false; };
template <> struct Codebook<CB_U5>  { static const int PB = 20; static const int RULE = RULE_ASYMMETRIC; static const bool SECOND = true; };
template <> struct Codebook<CB_S6D> { static const int PB = 24; static const int RULE = RULE_DUAL; static const bool SECOND = true; };
template <> struct Codebook<CB_S8>  { static const int PB = 32; static const int RULE = RULE_SINGLE; static const bool SECOND = false; };

// Raw payload of one block, as 32-bit words (PB / 4 of them used).
struct Raw { u32 q[8]; };

template <int CB>
__device__ __forceinline__ Raw load_raw(const u8* __restrict__ payload, size_t block) {
  Raw r;
  const int PB = Codebook<CB>::PB;
  const u8* p = payload + block * PB;
  if (PB == 16) {
    uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    r.q[0] = v.x; r.q[1] = v.y; r.q[2] = v.z; r.q[3] = v.w;
  } else if (PB == 20) {
#pragma unroll
    for (int i = 0; i < 5; ++i) r.q[i] = __ldg(reinterpret_cast<const u32*>(p) + i);
  } else if (PB == 24) {
#pragma unroll
    for (int i = 0; i < 3; ++i) {
      uint2 v = __ldg(reinterpret_cast<const uint2*>(p) + i);
      r.q[2 * i] = v.x; r.q[2 * i + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      uint4 v = __ldg(reinterpret_cast<const uint4*>(p) + i);
      r.q[4 * i] = v.x; r.q[4 * i + 1] = v.y; r.q[4 * i + 2] = v.z; r.q[4 * i + 3] = v.w;
    }
  }
  return r;
}

// Bits 0..3 of m become bit 4 of bytes 0..3.
__device__ __forceinline__ u32 spread_bit4(u32 m) { return ((m * 0x00204081u) & 0x01010101u) << 4; }

// 2-bit fields 0..3 of byte h become bits 4..5 of bytes 0..3.
__device__ __forceinline__ u32 spread_bits45(u32 h) {
  return ((h & 3u) | ((h & 0xCu) << 6) | ((h & 0x30u) << 12) | ((h & 0xC0u) << 18)) << 4;
}

// IQ4 table lookup for four nibbles (one per byte, values 0..15).
__device__ __forceinline__ u32 iq4_lookup(u32 x) {
  const u32 t0 = 0xBFAD9881u, t1 = 0xF6EADDCFu, t2 = 0x26190D01u, t3 = 0x71594535u;  // bytes of the table
  const u32 sel = (x & 0x7u) | ((x >> 4) & 0x70u) | ((x >> 8) & 0x700u) | ((x >> 12) & 0x7000u);
  const u32 lo = __byte_perm(t0, t1, sel);
  const u32 hi = __byte_perm(t2, t3, sel);
  const u32 m = ((x >> 3) & 0x01010101u) * 0xFFu;
  return (hi & m) | (lo & ~m);
}

template <int CB>
__device__ __forceinline__ void decode(const Raw& r, int (&w)[8]) {
  if (CB == CB_S8) {
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = (int)r.q[i];
    return;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    u32 lo = r.q[i] & 0x0F0F0F0Fu;
    u32 hi = (r.q[i] >> 4) & 0x0F0F0F0Fu;
    if (CB == CB_S5 || CB == CB_U5) {
      lo |= spread_bit4((r.q[4] >> (4 * i)) & 0xFu);
      hi |= spread_bit4((r.q[4] >> (16 + 4 * i)) & 0xFu);
    }
    if (CB == CB_S6D) {
      lo |= spread_bits45((r.q[4] >> (8 * i)) & 0xFFu);
      hi |= spread_bits45((r.q[5] >> (8 * i)) & 0xFFu);
    }
    if (CB == CB_S4) { lo = __vsub4(lo, 0x08080808u); hi = __vsub4(hi, 0x08080808u); }
    if (CB == CB_S5) { lo = __vsub4(lo, 0x10101010u); hi = __vsub4(hi, 0x10101010u); }
    if (CB == CB_S6D) { lo = __vsub4(lo, 0x20202020u); hi = __vsub4(hi, 0x20202020u); }
    if (CB == CB_NL4) { lo = iq4_lookup(lo); hi = iq4_lookup(hi); }
    w[i] = (int)lo;
    w[4 + i] = (int)hi;
  }
}

// One activation block: 32 int8 values as 8 words, its scale and exact sum.
struct ActBlock { int a[8]; float d; int sum; };

__device__ __forceinline__ ActBlock load_act(const signed char* __restrict__ q, const float* __restrict__ d,
                                             const int* __restrict__ sum, int b) {
  ActBlock x;
  const int4* p = reinterpret_cast<const int4*>(q + (size_t)b * 32);
  int4 v0 = __ldg(p), v1 = __ldg(p + 1);
  x.a[0] = v0.x; x.a[1] = v0.y; x.a[2] = v0.z; x.a[3] = v0.w;
  x.a[4] = v1.x; x.a[5] = v1.y; x.a[6] = v1.z; x.a[7] = v1.w;
  x.d = __ldg(d + b);
  x.sum = __ldg(sum + b);
  return x;
}

// Contribution of packed block `block` (scales at index `block`) against activation block x.
template <int CB>
__device__ __forceinline__ float block_term(const Raw& raw, float s, float second, const ActBlock& x) {
  int w[8];
  decode<CB>(raw, w);
  int lo = 0, hi = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    lo = __dp4a(w[i], x.a[i], lo);
    hi = __dp4a(w[4 + i], x.a[4 + i], hi);
  }
  return block_contribution<Codebook<CB>::RULE>(x.d, s, second, lo, hi, x.sum);
}

}  // namespace vnni
