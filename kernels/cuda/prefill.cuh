// Prefill (M >= 32) IMMA GEMM tiles: y[M][N] = x[M][K] * W[N][K]^T on int8 tensor cores.
//
// A CTA owns a BM x BN output tile (WM x WN warps, each a (BM/WM) x (BN/WN) warp tile of
// 16 x 8 mma fragments) and walks K a stage of KSTEP K-blocks at a time (KSTEP 2: BK64,
// KSTEP 8: BK256). Stages are filled with cp.async into a STAGES-deep ring in dynamic shared
// memory: activation rows (int8, rows padded by 16 bytes so fragment loads hit 32 distinct
// banks), their block scales and sums, and the raw packed payload and f16 scales of the BN
// columns, which each lane decodes straight into its B fragment.
//
// Batch invariance: every mma covers exactly one K-block (m16n8k32; two m16n8k16 halves for
// the dual-scale codebook), so its result is the block's exact integer dot. The accumulator
// starts at the bits of 1.5 * 2^23 instead of 0: the sum's bits then read as the float
// 1.5 * 2^23 + dot (|dot| < 2^22), and one exact subtraction yields the dot as a float
// without the slow int-to-float conversion. Each (row, column) then applies the per-block
// contract and folds blocks into its partition accumulator in ascending order and partitions
// into its output in ascending order, exactly the M = 1 tree at the inherited bpp.
// Form `std` (kpart = 0): one CTA walks all of K. Form `kpart`: CTA z walks partition z only
// and writes it to partials [KB][M][N], folded in order by vnni_reduce_partials.
#pragma once
#include "grouped.cuh"

namespace vnni {

__device__ __forceinline__ u32 smem_address(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// Asynchronous global -> shared copies; a copy with valid == false writes zeros (the source
// address must still be mapped: callers clamp it).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_address(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_address(dst)), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// Four 8 x 8 b16 matrices from shared memory: with lane l pointing at row l % 8 + 8 * (l / 8 % 2),
// byte 16 * (l / 16) of a 16-row x 32-byte int8 tile, exactly the m16n8k32 A fragment.
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p))
               : "memory");
}

// The accumulator start whose sum reads as the float 1.5 * 2^23 + dot.
#define VNNI_DOT_BIAS_BITS 0x4B400000
#define VNNI_DOT_BIAS 12582912.0f

__device__ __forceinline__ float biased_dot(int bits) { return __fsub_rn(__int_as_float(bits), VNNI_DOT_BIAS); }

// C[16][8] = A[16][16] * B[16][8] + bias: the dual-scale codebook's half-block dots.
__device__ __forceinline__ void mma_s8_k16(u32 a0, u32 a1, u32 b0, int (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
               : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
               : "r"(a0), "r"(a1), "r"(b0), "r"(VNNI_DOT_BIAS_BITS));
}

// Shared-memory layout of one pipeline stage. A launch takes STAGES stages, the consumed
// stage's scales and sums converted to f32 (PrefillPrep), then the tile's outputs (BM x BN
// f32, see prefill_tile); PrefillTile::shared_bytes (registry.rs) computes the same size for
// the launch, and the kernel traps if it was given less.
template <int CB, int BM, int BN, int KSTEP>
struct PrefillStage {
  static const int PB = Codebook<CB>::PB;
  static const bool ASYM = Codebook<CB>::RULE == RULE_ASYMMETRIC;
  static const bool SECOND = Codebook<CB>::SECOND;
  static const int AROW = KSTEP * 32 + 16;  // bytes per staged activation row
  static const int A = 0;                                        // i8 [BM][AROW]
  static const int D = A + BM * AROW;                            // f32 [KSTEP][BM]
  static const int SUM = D + KSTEP * BM * 4;                     // i32 [KSTEP][BM] (asymmetric)
  static const int W = SUM + (ASYM ? KSTEP * BM * 4 : 0);        // u8 [KSTEP][BN][PB]
  static const int S = W + KSTEP * BN * PB;                      // f16 (e2m1: bf16) [KSTEP][BN]
  static const int S2 = S + KSTEP * BN * 2;                      // f16 [KSTEP][BN] (second)
  static const int BYTES = S2 + (SECOND ? KSTEP * BN * 2 : 0);
};

// The stage being consumed, converted once per CTA instead of once per lane that reads it
// (f16 -> f32 and int -> f32 conversions issue at a fraction of the FP32 rate).
template <int CB, int BM, int BN, int KSTEP>
struct PrefillPrep {
  typedef PrefillStage<CB, BM, BN, KSTEP> L;
  static const int S = 0;                                       // f32 [KSTEP][BN]
  static const int S2 = S + KSTEP * BN * 4;                     // f32 [KSTEP][BN] (second)
  static const int SUM = S2 + (L::SECOND ? KSTEP * BN * 4 : 0); // f32 [KSTEP][BM] (asymmetric)
  static const int BYTES = SUM + (L::ASYM ? KSTEP * BM * 4 : 0);
};

template <int CB, int BM, int BN, int WM, int WN, int KSTEP, int STAGES>
__device__ __forceinline__ void prefill_tile(const DecodeArgs& a, int kpart) {
  typedef PrefillStage<CB, BM, BN, KSTEP> L;
  typedef PrefillPrep<CB, BM, BN, KSTEP> P;
  const int THREADS = 32 * WM * WN;
  const int TM = BM / WM, TN = BN / WN, MF = TM / 16, NF = TN / 8;
  const int PB = L::PB, RULE = Codebook<CB>::RULE;
  extern __shared__ __align__(16) unsigned char smem[];
  {
    u32 given;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(given));
    if (given < (u32)(STAGES * L::BYTES + P::BYTES + BM * BN * 4)) __trap();
  }
  unsigned char* prep = smem + STAGES * L::BYTES;
  // The folded outputs live in shared memory, element e of thread x at ys[e * THREADS + x]:
  // they change only at partition ends, and registers are what the block loop needs.
  float* ys = reinterpret_cast<float*>(prep + P::BYTES);
  const int b_begin = kpart ? (int)blockIdx.z * a.bpp : 0;
  const int b_end = kpart ? min(b_begin + a.bpp, a.kblk) : a.kblk;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int steps = (b_end - b_begin + KSTEP - 1) / KSTEP;
  const int ncols = min(BN, a.n - n0);
  const bool w16 = ((a.n * PB) & 15) == 0;  // every column run starts 16-byte aligned
  const bool s16 = (a.n & 7) == 0;

  auto load = [&](int stage, int step) {
    unsigned char* base = smem + stage * L::BYTES;
    const int b0 = b_begin + step * KSTEP;
    
#pragma unroll 1
    for (int i = threadIdx.x; i < BM * KSTEP * 2; i += THREADS) {
      const int r = i / (KSTEP * 2), c = i % (KSTEP * 2);
      const int b = b0 + c / 2;
      const signed char* src = a.aq + ((size_t)min(m0 + r, a.m - 1) * a.kblk + min(b, b_end - 1)) * 32 + (c % 2) * 16;
      cp_async16(base + L::A + r * L::AROW + c * 16, src, b < b_end);
    }
    float* sd = reinterpret_cast<float*>(base + L::D);
    int* ssum = reinterpret_cast<int*>(base + L::SUM);
    
#pragma unroll 1
    for (int i = threadIdx.x; i < KSTEP * BM; i += THREADS) {
      const int j = i / BM, r = i % BM;
      const size_t off = (size_t)min(m0 + r, a.m - 1) * a.kblk + min(b0 + j, b_end - 1);
      cp_async4(sd + i, a.ad + off, true);
      if (L::ASYM) cp_async4(ssum + i, a.asum + off, true);
    }
    unsigned char* sw = base + L::W;
    if (w16) {
      const int CH = BN * PB / 16;
      
#pragma unroll 1
    for (int i = threadIdx.x; i < KSTEP * CH; i += THREADS) {
        const int j = i / CH, c = i % CH;
        const bool ok = c * 16 < ncols * PB;
        const u8* src = a.payload + ((size_t)min(b0 + j, b_end - 1) * a.n + n0) * PB + (ok ? c * 16 : 0);
        cp_async16(sw + j * BN * PB + c * 16, src, ok);
      }
    } else {
      const int CH = BN * PB / 4;
      
#pragma unroll 1
    for (int i = threadIdx.x; i < KSTEP * CH; i += THREADS) {
        const int j = i / CH, c = i % CH;
        const bool ok = c * 4 < ncols * PB;
        const u8* src = a.payload + ((size_t)min(b0 + j, b_end - 1) * a.n + n0) * PB + (ok ? c * 4 : 0);
        cp_async4(sw + j * BN * PB + c * 4, src, ok);
      }
    }
    unsigned short* ss = reinterpret_cast<unsigned short*>(base + L::S);
    unsigned short* ss2 = reinterpret_cast<unsigned short*>(base + L::S2);
    if (s16) {
      const int CH = BN / 8;
      
#pragma unroll 1
    for (int i = threadIdx.x; i < KSTEP * CH; i += THREADS) {
        const int j = i / CH, c = i % CH;
        const bool ok = c * 8 < ncols;
        const size_t off = (size_t)min(b0 + j, b_end - 1) * a.n + n0 + (ok ? c * 8 : 0);
        cp_async16(ss + j * BN + c * 8, a.scale + off, ok);
        if (L::SECOND) cp_async16(ss2 + j * BN + c * 8, a.second + off, ok);
      }
    } else {  // N not a multiple of 8: plain loads (this stage is not read before the next barrier)
      
#pragma unroll 1
    for (int i = threadIdx.x; i < KSTEP * BN; i += THREADS) {
        const int j = i / BN, c = i % BN;
        const size_t off = (size_t)min(b0 + j, b_end - 1) * a.n + min(n0 + c, a.n - 1);
        ss[i] = __ldg(a.scale + off);
        if (L::SECOND) ss2[i] = __ldg(a.second + off);
      }
    }
  };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int wm = warp / WN, wn = warp % WN;
  // Fragment element i of (mf, nf): row g + 8 * (i / 2), column 2t + i % 2.
  float acc[MF][NF][4];
#pragma unroll
  for (int mf = 0; mf < MF; ++mf)
#pragma unroll
    for (int nf = 0; nf < NF; ++nf)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mf][nf][i] = 0.0f;
  int left = a.bpp;  // blocks left in the current partition (every CTA starts at a partition start)
  bool first = true;

#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < steps) load(s, s);
    cp_async_commit();
  }
#pragma unroll 1
  for (int s = 0; s < steps; ++s) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // stage s landed for everyone; stage s - 1 is consumed by everyone
    if (s + STAGES - 1 < steps) load((s + STAGES - 1) % STAGES, s + STAGES - 1);
    cp_async_commit();
    const unsigned char* base = smem + (s % STAGES) * L::BYTES;
    const float* sd = reinterpret_cast<const float*>(base + L::D);
    const float* sf = reinterpret_cast<const float*>(prep + P::S);
    const float* s2f = reinterpret_cast<const float*>(prep + P::S2);
    const float* sumf = reinterpret_cast<const float*>(prep + P::SUM);
    {
      const unsigned short* ss = reinterpret_cast<const unsigned short*>(base + L::S);
      const unsigned short* ss2 = reinterpret_cast<const unsigned short*>(base + L::S2);
      const int* ssum = reinterpret_cast<const int*>(base + L::SUM);
#pragma unroll 1
      for (int i = threadIdx.x; i < KSTEP * BN; i += THREADS) {
        reinterpret_cast<float*>(prep + P::S)[i] = scale_of<CB>(ss[i]);
        if (L::SECOND) reinterpret_cast<float*>(prep + P::S2)[i] = h2f(ss2[i]);
      }
      if (L::ASYM) {
#pragma unroll 1
        for (int i = threadIdx.x; i < KSTEP * BM; i += THREADS)
          reinterpret_cast<float*>(prep + P::SUM)[i] = __int2float_rn(ssum[i]);
      }
    }
    __syncthreads();  // the converted stage is complete
    const int b0 = b_begin + s * KSTEP;
#pragma unroll 1
    for (int j = 0; j < KSTEP; ++j) {
      if (b0 + j >= b_end) break;  // uniform across the CTA
      u32 af[MF][4];
      float sa[MF][2], asum[MF][2];
#pragma unroll
      for (int mf = 0; mf < MF; ++mf) {
        const int row = wm * TM + mf * 16 + g;
        ldmatrix_x4(af[mf], base + L::A + (wm * TM + mf * 16 + lane % 8 + 8 * (lane / 8 % 2)) * L::AROW + j * 32 +
                                16 * (lane / 16));
        if (Table<CB>::VALUE) {  // decode_pair's interleaved element order (4t, 4t+16, 4t+1, 4t+17, ...)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const u32 x0 = af[mf][h], x1 = af[mf][2 + h];
            af[mf][h] = prmt(x0, x1, 0x5140);
            af[mf][2 + h] = prmt(x0, x1, 0x7362);
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          sa[mf][h] = sd[j * BM + row + 8 * h];
          asum[mf][h] = L::ASYM ? sumf[j * BM + row + 8 * h] : 0.0f;
        }
      }
#pragma unroll
      for (int nf = 0; nf < NF; ++nf) {
        const int col = wn * TN + nf * 8;
        u32 bw0, bw1;
        decode_pair<CB, true>(base + L::W + (j * BN + col + g) * PB, t, bw0, bw1);
        const float2 sv = *reinterpret_cast<const float2*>(sf + j * BN + col + 2 * t);
        const float2 s2v = L::SECOND ? *reinterpret_cast<const float2*>(s2f + j * BN + col + 2 * t) : make_float2(0.0f, 0.0f);
        const float s[2] = {sv.x, sv.y}, s2[2] = {s2v.x, s2v.y};
        // u2m: the B fragment of the mins (column g's m_lo for elements 0..15, m_hi for
        // 16..31, payload byte 9), so one more mma gives each (row, column) its min's integer.
        u32 bm0 = 0u, bm1 = 0u;
        if (SubMins<CB>::VALUE) {
          const u32 m = base[L::W + (j * BN + col + g) * PB + 9];
          bm0 = (m & 0xFu) * 0x01010101u;
          bm1 = (m >> 4) * 0x01010101u;
        }
#pragma unroll
        for (int mf = 0; mf < MF; ++mf) {
          int c[4], chi[4], cmin[4];
          if (RULE == RULE_DUAL) {
            mma_s8_k16(af[mf][0], af[mf][1], bw0, c);
            mma_s8_k16(af[mf][2], af[mf][3], bw1, chi);
          } else {
            mma_s8(af[mf], bw0, bw1, c, VNNI_DOT_BIAS_BITS);
          }
          if (SubMins<CB>::VALUE) mma_s8(af[mf], bm0, bm1, cmin, VNNI_DOT_BIAS_BITS);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int h = i / 2, e = i % 2;
            const float hi = RULE == RULE_DUAL ? biased_dot(chi[i]) : 0.0f;
            // u2m: m_lo * sum(a[0..16]) + m_hi * sum(a[16..32]), exact (below 2^16).
            const float ms = SubMins<CB>::VALUE ? biased_dot(cmin[i]) : asum[mf][h];
            acc[mf][nf][i] = fold(acc[mf][nf][i], contribution<RULE>(sa[mf][h], s[e], s2[e], biased_dot(c[i]), hi, ms));
          }
        }
      }
      if (--left == 0 || b0 + j + 1 == b_end) {  // partition end: fold it into the output
#pragma unroll
        for (int mf = 0; mf < MF; ++mf)
#pragma unroll
          for (int nf = 0; nf < NF; ++nf)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              float* y = ys + ((mf * NF + nf) * 4 + i) * THREADS + threadIdx.x;
              *y = first ? acc[mf][nf][i] : fold(*y, acc[mf][nf][i]);
              acc[mf][nf][i] = 0.0f;
            }
        first = false;
        left = a.bpp;
      }
    }
  }
  cp_async_wait<0>();

  float* out = a.out + (size_t)(kpart ? blockIdx.z : 0) * a.m * a.n;
  const bool pairs = (a.n & 1) == 0;
#pragma unroll
  for (int mf = 0; mf < MF; ++mf)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = m0 + wm * TM + mf * 16 + g + 8 * h;
      if (row >= a.m) continue;
#pragma unroll
      for (int nf = 0; nf < NF; ++nf) {
        const int col = n0 + wn * TN + nf * 8 + 2 * t;
        const float y0 = ys[((mf * NF + nf) * 4 + 2 * h) * THREADS + threadIdx.x];
        const float y1 = ys[((mf * NF + nf) * 4 + 2 * h + 1) * THREADS + threadIdx.x];
        float* o = out + (size_t)row * a.n + col;
        if (pairs && col + 1 < a.n) {
          *reinterpret_cast<float2*>(o) = make_float2(y0, y1);
        } else {
          if (col < a.n) o[0] = y0;
          if (col + 1 < a.n) o[1] = y1;
        }
      }
    }
}

}  // namespace vnni
