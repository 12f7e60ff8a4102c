// The CUDA intrinsics kernels/cuda/codebook.cuh uses, emulated on the CPU as the CUDA and PTX
// manuals define them, so that file compiles with a host C++ compiler (VNNI_HOST_EMULATION)
// and its decode and dot functions run in tests/tests/cuda_host.rs without a GPU.
#pragma once
#include <cstdint>
#include <cstring>

#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict

struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
struct int2 { int x, y; };
struct int4 { int x, y, z, w; };
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

// Read-only cache loads: plain loads (memcpy: the payload need not be aligned here).
template <class T>
inline T __ldg(const T* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline unsigned byte_of(uint64_t v, unsigned i) { return (unsigned)(v >> (8 * i)) & 0xFFu; }

// __byte_perm: result byte n is byte (s >> 4n) & 7 of the 8-byte value {y, x}.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t v = ((uint64_t)y << 32) | x;
  unsigned r = 0;
  for (unsigned n = 0; n < 4; ++n) r |= byte_of(v, (s >> (4 * n)) & 7u) << (8 * n);
  return r;
}

inline unsigned __vadd4(unsigned a, unsigned b) {
  unsigned r = 0;
  for (unsigned n = 0; n < 4; ++n) r |= ((byte_of(a, n) + byte_of(b, n)) & 0xFFu) << (8 * n);
  return r;
}

inline unsigned __vsub4(unsigned a, unsigned b) {
  unsigned r = 0;
  for (unsigned n = 0; n < 4; ++n) r |= ((byte_of(a, n) - byte_of(b, n)) & 0xFFu) << (8 * n);
  return r;
}

// Signed bytes of a times signed bytes of b, summed, plus c.
inline int __dp4a(int a, int b, int c) {
  for (unsigned n = 0; n < 4; ++n) c += (int)(int8_t)byte_of((unsigned)a, n) * (int)(int8_t)byte_of((unsigned)b, n);
  return c;
}

inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round-to-nearest f32 steps: the test compiles with -ffp-contract=off, so no FMA forms.
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __int2float_rn(int i) { return (float)i; }
inline int min(int a, int b) { return a < b ? a : b; }

namespace vnni_host {

// PTX prmt.b32 in its default mode: selector nibble n picks byte (n & 7) of {b, a}; with bit 3
// set, every bit of the result byte is the sign (bit 7) of the picked byte.
inline unsigned prmt(unsigned a, unsigned b, unsigned s) {
  const uint64_t v = ((uint64_t)b << 32) | a;
  unsigned r = 0;
  for (unsigned n = 0; n < 4; ++n) {
    const unsigned sel = (s >> (4 * n)) & 0xFu;
    unsigned byte = byte_of(v, sel & 7u);
    if (sel & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    r |= byte << (8 * n);
  }
  return r;
}

// IEEE binary16 bits to f32, exactly (subnormals, infinities and NaNs included).
inline float h2f(unsigned short h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int e = -1;
    uint32_t m = man;
    do { m <<= 1; ++e; } while ((m & 0x400u) == 0);
    bits = sign | ((uint32_t)(112 - e) << 23) | ((m & 0x3FFu) << 13);
  }
  return __uint_as_float(bits);
}

}  // namespace vnni_host
