// Packed codebook blocks: loads and decode to eight int8x4 words (words 0..3 hold elements
// 0..15, words 4..7 elements 16..31), ready for dp4a, or to one lane's pair of words of an mma
// fragment (decode_pair); the block dots and contributions. Layout and value rules:
// codebook.rs. With VNNI_HOST_EMULATION defined (tests/cuda_host), the file also compiles for
// the CPU against emulated intrinsics, so CI checks these functions without a GPU.
#pragma once
#include "contract.cuh"

namespace vnni {

typedef unsigned char u8;
typedef unsigned int u32;

enum CodebookId { CB_S4 = 0, CB_NL4 = 1, CB_U4 = 2, CB_S5 = 3, CB_U5 = 4, CB_S6D = 5, CB_S8 = 6, CB_E2M1 = 7, CB_S3D = 8,
                  CB_NL3 = 9, CB_O4 = 10, CB_U2M = 11, CB_NL2 = 12, CB_NL2D = 13 };

template <int CB> struct Codebook;
template <> struct Codebook<CB_S4>  { static const int PB = 16; static const int RULE = RULE_SINGLE; static const bool SECOND = false; };
template <> struct Codebook<CB_NL4> { static const int PB = 16; static const int RULE = RULE_SINGLE; static const bool SECOND = false; };
template <> struct Codebook<CB_U4>  { static const int PB = 16; static const int RULE = RULE_ASYMMETRIC; static const bool SECOND = true; };
template <> struct Codebook<CB_S5>  { static const int PB = 20; static const int RULE = RULE_SINGLE; static const bool SECOND = false; };
template <> struct Codebook<CB_U5>  { static const int PB = 20; static const int RULE = RULE_ASYMMETRIC; static const bool SECOND = true; };
template <> struct Codebook<CB_S6D> { static const int PB = 24; static const int RULE = RULE_DUAL; static const bool SECOND = true; };
template <> struct Codebook<CB_S8>  { static const int PB = 32; static const int RULE = RULE_SINGLE; static const bool SECOND = false; };
template <> struct Codebook<CB_E2M1> { static const int PB = 16; static const int RULE = RULE_SINGLE; static const bool SECOND = false; };
template <> struct Codebook<CB_S3D> { static const int PB = 12; static const int RULE = RULE_DUAL; static const bool SECOND = true; };
template <> struct Codebook<CB_NL3> { static const int PB = 16; static const int RULE = RULE_SINGLE; static const bool SECOND = false; };
template <> struct Codebook<CB_O4>  { static const int PB = 16; static const int RULE = RULE_SINGLE; static const bool SECOND = false; };
template <> struct Codebook<CB_U2M> { static const int PB = 12; static const int RULE = RULE_ASYMMETRIC; static const bool SECOND = true; };
template <> struct Codebook<CB_NL2> { static const int PB = 16; static const int RULE = RULE_SINGLE; static const bool SECOND = false; };
template <> struct Codebook<CB_NL2D> { static const int PB = 16; static const int RULE = RULE_DUAL; static const bool SECOND = true; };

// u2m (Q2_K) carries a min per 16 values: the min multiplies m_lo * sum(a[0..16]) + m_hi *
// sum(a[16..32]), not the block sum. Its payload word 2 holds the sub-scales (byte 0) and
// the sub-mins (byte 1), low nibble for elements 0..15.
template <int CB> struct SubMins { static const bool VALUE = CB == CB_U2M; };

// The single-scale 16-entry table codebooks (nl4, e2m1, nl3, nl2): decoded straight from payload
// words in the interleaved element order (4i, 4i+16, 4i+1, 4i+17, ...), the other operand permuted
// to match. nl2d's two scales need the halves apart: its payload words hold elements 4i..4i+3 in
// their low half and 16+4i..16+4i+3 in their high half (codebook.rs), so each 16-bit half is
// the lookup's selector of four elements of one half, in element order.
template <int CB> struct Table {
  static const bool VALUE = CB == CB_NL4 || CB == CB_E2M1 || CB == CB_NL3 || CB == CB_NL2;
};

// f16 bits to f32 (exact); PTX directly, so the module needs no cuda_fp16.h.
__device__ __forceinline__ float h2f(unsigned short bits) {
#ifdef VNNI_HOST_EMULATION  // tests/cuda_host: these functions compiled for the CPU
  return vnni_host::h2f(bits);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
  return f;
#endif
}

// A scale plane entry as f32 (exact): bf16 bits for e2m1 (MXFP4's power-of-two scales reach
// 2^-128 .. 2^127, beyond f16), f16 bits otherwise. Subnormals stay: no -ftz.
template <int CB>
__device__ __forceinline__ float scale_of(unsigned short bits) {
  return CB == CB_E2M1 ? __uint_as_float((u32)bits << 16) : h2f(bits);
}

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
  } else if (PB == 12) {
#pragma unroll
    for (int i = 0; i < 3; ++i) r.q[i] = __ldg(reinterpret_cast<const u32*>(p) + i);
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

// The IQ4 table as bytes: entries 0..7 in t0:t1, 8..15 in t2:t3.
#define VNNI_IQ4_T0 0xBFAD9881u
#define VNNI_IQ4_T1 0xF6EADDCFu
#define VNNI_IQ4_T2 0x26190D01u
#define VNNI_IQ4_T3 0x71594535u
// Entries 8..15 plus one (2, 14, ..., 114): all positive, see block_dots<CB_NL4>.
#define VNNI_IQ4_T2P 0x271A0E02u
#define VNNI_IQ4_T3P 0x725A4636u

// The e2m1 (MXFP4) table doubled, entries 0..7 (0, 1, 2, 3, 4, 6, 8, 12); 8..15 are their negatives.
#define VNNI_E2M1_T0 0x03020100u
#define VNNI_E2M1_T1 0x0C080604u
// The nl3 (IQ3_XXS) levels, entries 0..7 (4, 12, 20, 28, 36, 44, 52, 62); 8..15 their negatives.
#define VNNI_NL3_T0 0x1C140C04u
#define VNNI_NL3_T1 0x3E342C24u

// The nl2 / nl2d levels, entries 0..7 (8, 25, 43: IQ2; 1, 7, 9: IQ1 times eight; 0, 0); 8..15 their negatives.
#define VNNI_NL2_T0 0x012B1908u
#define VNNI_NL2_T1 0x00000907u

// The sign-magnitude table codebooks (e2m1, nl3, nl2, nl2d): entries 0..7 are the magnitudes in
// the bytes of T0:T1, entries 8..15 their negatives.
template <int CB> struct SignMagnitude { static const bool VALUE = false; static const u32 T0 = 0, T1 = 0; };
template <> struct SignMagnitude<CB_E2M1> { static const bool VALUE = true; static const u32 T0 = VNNI_E2M1_T0, T1 = VNNI_E2M1_T1; };
template <> struct SignMagnitude<CB_NL3> { static const bool VALUE = true; static const u32 T0 = VNNI_NL3_T0, T1 = VNNI_NL3_T1; };
template <> struct SignMagnitude<CB_NL2> { static const bool VALUE = true; static const u32 T0 = VNNI_NL2_T0, T1 = VNNI_NL2_T1; };
template <> struct SignMagnitude<CB_NL2D> { static const bool VALUE = true; static const u32 T0 = VNNI_NL2_T0, T1 = VNNI_NL2_T1; };

// PTX prmt in its default mode: a selector nibble with bit 3 set replicates the sign of the
// selected byte (the nl4 dot relies on it; __byte_perm does not promise that).
__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 s) {
#ifdef VNNI_HOST_EMULATION
  return vnni_host::prmt(a, b, s);
#else
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
  return r;
#endif
}

// IQ4 lookup of the eight nibbles of q, four per output word: out0 from bits 0..15, out1
// from bits 16..31. Two 8-entry PRMT lookups per word, then a third PRMT takes the upper-table
// byte where the nibble's bit 3 is set (selector nibble k + 4).
__device__ __forceinline__ void iq4_lookup8(u32 q, u32& out0, u32& out1) {
  const u32 s7 = q & 0x77777777u;
  const u32 pick = ((q >> 1) & 0x44444444u) | 0x32103210u;
  out0 = __byte_perm(__byte_perm(VNNI_IQ4_T0, VNNI_IQ4_T1, s7), __byte_perm(VNNI_IQ4_T2, VNNI_IQ4_T3, s7), pick);
  const u32 s7h = s7 >> 16;
  out1 = __byte_perm(__byte_perm(VNNI_IQ4_T0, VNNI_IQ4_T1, s7h), __byte_perm(VNNI_IQ4_T2, VNNI_IQ4_T3, s7h), pick >> 16);
}

// nl4 decode in interleaved order: word 2i holds elements (4i, 4i+16, 4i+1, 4i+17) and word
// 2i+1 holds (4i+2, 4i+18, 4i+3, 4i+19), straight from payload word i. The two sign-mode
// lookups of block_dots<CB_NL4> are added bytewise (their sum per byte is the table value, in
// range, so no carry crosses bytes). Activations must be permuted to match (prepare_act).
__device__ __forceinline__ u32 iq4_word(u32 q) {
  return __vadd4(prmt(VNNI_IQ4_T0, VNNI_IQ4_T1, q), prmt(VNNI_IQ4_T2P, VNNI_IQ4_T3P, q ^ 0x88888888u));
}

// Sign-magnitude decode (e2m1, nl3) in the interleaved order of iq4_word. With nibble n as
// selector, prmt(T0, T1, n) is T[n] for n < 8 and 0 (the sign of a non-negative entry) for
// n >= 8; with n ^ 8 it is 0 for n < 8 and T[n & 7] for n >= 8. The first minus the second
// is the signed value.
template <int CB>
__device__ __forceinline__ u32 sign_magnitude_word(u32 q) {
  const u32 T0 = SignMagnitude<CB>::T0, T1 = SignMagnitude<CB>::T1;
  return __vsub4(prmt(T0, T1, q), prmt(T0, T1, q ^ 0x88888888u));
}

// A table codebook's payload word decoded in the interleaved order (elements 4i, 4i+16,
// 4i+1, 4i+17 from the low half of q).
template <int CB>
__device__ __forceinline__ u32 table_word(u32 q) {
  return SignMagnitude<CB>::VALUE ? sign_magnitude_word<CB>(q) : iq4_word(q);
}

// Four nibbles held one per byte as one 16-bit prmt selector, element order preserved.
__device__ __forceinline__ u32 nibble_selector(u32 x) {
  return (x & 0xFu) | ((x >> 4) & 0xF0u) | ((x >> 8) & 0xF00u) | ((x >> 12) & 0xF000u);
}

// The same selector in three instructions: x | x >> 4 holds nibble pairs (0, 1) and (2, 3) in
// bytes 0 and 2, and one byte permute joins them. Only the low 16 bits are a selector.
__device__ __forceinline__ u32 nibble_pairs_selector(u32 x) { return prmt(x | (x >> 4), 0u, 0x0020u); }

// IQ4 lookup of four nibbles held one per byte (values 0..15), element order preserved.
__device__ __forceinline__ u32 iq4_lookup(u32 x) {
  u32 out0, out1;
  iq4_lookup8(nibble_selector(x), out0, out1);
  return out0;
}

// s3d elements 4g..4g+3 from the payload's low word g / 4 and its sign word: the 2-bit
// fields at shift 2(g % 4), and bits 2..7 of a byte set when bit g of the sign byte is (prmt's
// sign mode replicates bit 7, where the shift put bit g). One LOP3 merges the two.
__device__ __forceinline__ u32 s3d_word(u32 low, u32 signs, int g) {
  const u32 negative = prmt(signs << (7 - g), 0u, 0xBA98u);
  return ((low >> (2 * (g & 3))) & 0x03030303u) | (negative & 0xFCFCFCFCu);
}

// u2m elements 4g..4g+3: the 2-bit fields of low word g / 4 at shift 2(g % 4) (s3d's order),
// times the sub-scale of their half; no byte exceeds 3 * 15, so one multiply scales all four.
__device__ __forceinline__ u32 u2m_word(u32 low, u32 scales, int g) {
  return ((low >> (2 * (g & 3))) & 0x03030303u) * ((scales >> (4 * (g >> 2))) & 0xFu);
}

// The integer an asymmetric block's min multiplies: the activation block's sum, or for u2m
// m_lo * lo + m_hi * (sum - lo), lo the sum of elements 0..15 (exact: |value| < 2^16).
template <int CB>
__device__ __forceinline__ int min_sum(u32 word2, int lo, int sum) {
  if (!SubMins<CB>::VALUE) return sum;
  const int m = (int)((word2 >> 8) & 0xFFu);
  return (m & 0xF) * lo + (m >> 4) * (sum - lo);
}

// The sum of four int8x4 words (elements 0..15 of an activation block).
__device__ __forceinline__ int half_sum(int a0, int a1, int a2, int a3) {
  return __dp4a(a3, 0x01010101, __dp4a(a2, 0x01010101, __dp4a(a1, 0x01010101, __dp4a(a0, 0x01010101, 0))));
}

template <int CB>
__device__ __forceinline__ void decode(const Raw& r, int (&w)[8]) {
  if (CB == CB_S8) {
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = (int)r.q[i];
    return;
  }
  if (CB == CB_S3D) {
#pragma unroll
    for (int g = 0; g < 8; ++g) w[g] = (int)s3d_word(r.q[g >> 2], r.q[2], g);
    return;
  }
  if (CB == CB_U2M) {
#pragma unroll
    for (int g = 0; g < 8; ++g) w[g] = (int)u2m_word(r.q[g >> 2], r.q[2], g);
    return;
  }
  if (CB == CB_NL2D) {  // each half-word is four elements of one half, in order (see Table)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[i] = (int)sign_magnitude_word<CB>(r.q[i]);
      w[4 + i] = (int)sign_magnitude_word<CB>(r.q[i] >> 16);
    }
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
    if (SignMagnitude<CB>::VALUE) {  // element order; no kernel decodes the single-scale tables here
      lo = sign_magnitude_word<CB>(nibble_pairs_selector(lo));
      hi = sign_magnitude_word<CB>(nibble_pairs_selector(hi));
    }
    if (CB == CB_O4) { lo = __vsub4(lo + lo, 0x0F0F0F0Fu); hi = __vsub4(hi + hi, 0x0F0F0F0Fu); }
    w[i] = (int)lo;
    w[4 + i] = (int)hi;
  }
}

// One 32-bit word of packed payload, through the read-only cache or from shared memory.
template <bool SHARED>
__device__ __forceinline__ u32 payload_word(const u8* p, int i) {
  const u32* w = reinterpret_cast<const u32*>(p) + i;
  return SHARED ? *w : __ldg(w);
}
template <bool SHARED>
__device__ __forceinline__ u32 payload_byte(const u8* p, int i) {
  return SHARED ? p[i] : __ldg(p + i);
}

// Words t (elements 4t..4t+3) and 4+t (elements 16+4t..16+4t+3) of a decoded block, loading
// only the payload bytes they need: one lane's share of an mma fragment. `p` points at the
// block's payload in global memory or (SHARED) in shared memory.
template <int CB, bool SHARED>
__device__ __forceinline__ void decode_pair(const u8* __restrict__ p, int t, u32& lo, u32& hi) {
  if (CB == CB_S8) {
    lo = payload_word<SHARED>(p, t);
    hi = payload_word<SHARED>(p, 4 + t);
    return;
  }
  if (CB == CB_S3D) {
    const u32 signs = payload_word<SHARED>(p, 2);
    lo = s3d_word(payload_word<SHARED>(p, 0), signs, t);
    hi = s3d_word(payload_word<SHARED>(p, 1), signs, 4 + t);
    return;
  }
  if (CB == CB_U2M) {
    const u32 scales = payload_word<SHARED>(p, 2);
    lo = u2m_word(payload_word<SHARED>(p, 0), scales, t);
    hi = u2m_word(payload_word<SHARED>(p, 1), scales, 4 + t);
    return;
  }
  const u32 q = payload_word<SHARED>(p, t);
  // The single-scale tables in the interleaved order (the caller permutes the other operand to
  // match); nl2d's half-words hold elements 4t.. and 16+4t.. in order (see Table).
  if (Table<CB>::VALUE || CB == CB_NL2D) {
    lo = table_word<CB>(q);
    hi = table_word<CB>(q >> 16);
    return;
  }
  lo = q & 0x0F0F0F0Fu;
  hi = (q >> 4) & 0x0F0F0F0Fu;
  if (CB == CB_S5 || CB == CB_U5) {
    const u32 h = payload_word<SHARED>(p, 4);
    lo |= spread_bit4((h >> (4 * t)) & 0xFu);
    hi |= spread_bit4((h >> (16 + 4 * t)) & 0xFu);
  }
  if (CB == CB_S6D) {
    lo |= spread_bits45(payload_byte<SHARED>(p, 16 + t));
    hi |= spread_bits45(payload_byte<SHARED>(p, 20 + t));
  }
  if (CB == CB_S4) { lo = __vsub4(lo, 0x08080808u); hi = __vsub4(hi, 0x08080808u); }
  if (CB == CB_O4) { lo = __vsub4(lo + lo, 0x0F0F0F0Fu); hi = __vsub4(hi + hi, 0x0F0F0F0Fu); }
  if (CB == CB_S5) { lo = __vsub4(lo, 0x10101010u); hi = __vsub4(hi, 0x10101010u); }
  if (CB == CB_S6D) { lo = __vsub4(lo, 0x20202020u); hi = __vsub4(hi, 0x20202020u); }
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

// Put an activation block in the element order block_dots<CB> expects (once per block,
// shared by every column a thread owns). Only the table codebooks reorder: (j, j+16, j+1, j+17, ...).
template <int CB>
__device__ __forceinline__ void prepare_act(ActBlock& x) {
  if (Table<CB>::VALUE) {
    int a[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      a[2 * i] = (int)__byte_perm(x.a[i], x.a[4 + i], 0x5140);
      a[2 * i + 1] = (int)__byte_perm(x.a[i], x.a[4 + i], 0x7362);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) x.a[i] = a[i];
  }
}

// Exact integer dots of one block: (elements 0..15, elements 16..31).
template <int CB>
__device__ __forceinline__ int2 block_dots(const Raw& raw, const ActBlock& x) {
  int lo = 0, hi = 0;
  if (CB == CB_NL4) {
    // Single-scale codebook: only lo + hi matters, so the lookup runs straight on the payload
    // words, whose nibbles hold elements (j, j+16, j+1, j+17, ...); prepare_act<CB_NL4> put
    // the activations in that same order. PRMT's sign mode does the 16-entry lookup without a
    // select: with nibble n as selector, prmt(T0, T1, n) is T[n] for n < 8 and -1 (the sign of
    // a negative entry) for n >= 8; with n ^ 8, prmt(T2P, T3P, .) is T[n] + 1 for n >= 8 and 0
    // (the sign of a positive entry) for n < 8. Their sum is T[n], and dp4a is linear, so two
    // dp4a give the exact dot.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const u32 q = raw.q[i], f = q ^ 0x88888888u;
      lo = __dp4a((int)prmt(VNNI_IQ4_T0, VNNI_IQ4_T1, q), x.a[2 * i], lo);
      lo = __dp4a((int)prmt(VNNI_IQ4_T2P, VNNI_IQ4_T3P, f), x.a[2 * i], lo);
      lo = __dp4a((int)prmt(VNNI_IQ4_T0, VNNI_IQ4_T1, q >> 16), x.a[2 * i + 1], lo);
      lo = __dp4a((int)prmt(VNNI_IQ4_T2P, VNNI_IQ4_T3P, f >> 16), x.a[2 * i + 1], lo);
    }
    return make_int2(lo, 0);
  }
  if (SignMagnitude<CB>::VALUE) {
    // The positive entries through the first lookup, the magnitudes of the negative ones
    // through the second (see sign_magnitude_word), each dotted on its own and subtracted:
    // exact, and no bytewise subtraction per word. The single-scale tables dot both half-words
    // against the interleaved activations (prepare_act) into one sum; nl2d's half-words hold
    // one half each (see Table), dotted against the activations in element order, a sum per half.
    const u32 T0 = SignMagnitude<CB>::T0, T1 = SignMagnitude<CB>::T1;
    const int H = Table<CB>::VALUE ? 0 : 1;  // the sum the high half-words go to
    int pos[2] = {0, 0}, neg[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const u32 q = raw.q[i], f = q ^ 0x88888888u;
      const int a0 = Table<CB>::VALUE ? x.a[2 * i] : x.a[i], a1 = Table<CB>::VALUE ? x.a[2 * i + 1] : x.a[4 + i];
      pos[0] = __dp4a((int)prmt(T0, T1, q), a0, pos[0]);
      neg[0] = __dp4a((int)prmt(T0, T1, f), a0, neg[0]);
      pos[H] = __dp4a((int)prmt(T0, T1, q >> 16), a1, pos[H]);
      neg[H] = __dp4a((int)prmt(T0, T1, f >> 16), a1, neg[H]);
    }
    return make_int2(pos[0] - neg[0], pos[1] - neg[1]);
  }
  if (CB == CB_O4) {
    // Single-scale: value 2n - 15 for nibble n, so the dot is 2 (n . a) - 15 sum(a), exact
    // (|n . a| <= 32 * 15 * 127), and the nibbles go to dp4a as they are, undecoded.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      lo = __dp4a((int)(raw.q[i] & 0x0F0F0F0Fu), x.a[i], lo);
      lo = __dp4a((int)((raw.q[i] >> 4) & 0x0F0F0F0Fu), x.a[4 + i], lo);
    }
    return make_int2(2 * lo - 15 * x.sum, 0);
  }
  int w[8];
  decode<CB>(raw, w);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    lo = __dp4a(w[i], x.a[i], lo);
    hi = __dp4a(w[4 + i], x.a[4 + i], hi);
  }
  return make_int2(lo, hi);
}

// Contribution of one packed block against activation block x.
template <int CB>
__device__ __forceinline__ float block_term(const Raw& raw, float s, float second, const ActBlock& x) {
  const int2 d = block_dots<CB>(raw, x);
  // The guard keeps the half sum out of every other codebook's code (it changed their SASS).
  const int sum = SubMins<CB>::VALUE ? min_sum<CB>(raw.q[2], half_sum(x.a[0], x.a[1], x.a[2], x.a[3]), x.sum) : x.sum;
  return block_contribution<Codebook<CB>::RULE>(x.d, s, second, d.x, d.y, sum);
}

}  // namespace vnni
