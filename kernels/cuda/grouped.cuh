// Grouped verifier kernels (M = 2..16 and 31). They never choose a bpp: the caller passes
// the M = 1 candidate's bpp, and each (row, column) folds exactly the M = 1 tree: partition p
// folds its blocks from +0.0f in ascending order, partitions fold in order in the reduce
// kernel (or are the output when there is one partition). Rows are independent, so every row
// carries the bits of a one-row decode. Output layout: [KB][M][N] partials, or y[M][N].
#pragma once
#include "decode_m1.cuh"

namespace vnni {

// rows.rR: one thread per column; each weight block is loaded and decoded once and streamed
// against R activation rows with dp4a. CTA z-slice z covers rows z*R .. z*R+R-1. The rows'
// activation blocks are staged in shared memory a chunk of blocks at a time (all threads of a
// CTA share the partition and the rows), so the inner loop addresses them with constants
// instead of keeping R row pointers in registers.
template <int CB, int R>
__device__ __forceinline__ void grouped_rows(const DecodeArgs& a) {
  const int CHUNK = 8;
  const int D = R >= 8 ? 2 : 8 / R;  // weight blocks in flight per thread
  __shared__ int4 sq[CHUNK][R][2];
  __shared__ float sd[CHUNK][R];
  __shared__ int ssum[CHUNK][R];
  __shared__ int ssumlo[CHUNK][SubMins<CB>::VALUE ? R : 1];  // elements 0..15 (u2m only)
  const int p = blockIdx.y, r0 = blockIdx.z * R;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int n = min(col, a.n - 1);
  const int b0 = partition_begin(p, a.bpp), b1 = partition_end(p, a.bpp, a.kblk);
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
#pragma unroll 1
  for (int bc = b0; bc < b1; bc += CHUNK) {
    __syncthreads();  // the previous chunk is consumed
    for (int i = threadIdx.x; i < CHUNK * R; i += blockDim.x) {
      const int u = i / R, r = i % R;
      const size_t off = (size_t)min(r0 + r, a.m - 1) * a.kblk + min(bc + u, b1 - 1);
      const int4* src = reinterpret_cast<const int4*>(a.aq + off * 32);
      int4 v0 = __ldg(src), v1 = __ldg(src + 1);
      if (Table<CB>::VALUE) {  // the interleaved element order of table_word (prepare_act's)
        const int4 p0 = make_int4(prmt(v0.x, v1.x, 0x5140), prmt(v0.x, v1.x, 0x7362), prmt(v0.y, v1.y, 0x5140),
                                  prmt(v0.y, v1.y, 0x7362));
        const int4 p1 = make_int4(prmt(v0.z, v1.z, 0x5140), prmt(v0.z, v1.z, 0x7362), prmt(v0.w, v1.w, 0x5140),
                                  prmt(v0.w, v1.w, 0x7362));
        v0 = p0;
        v1 = p1;
      }
      sq[u][r][0] = v0;
      sq[u][r][1] = v1;
      sd[u][r] = __ldg(a.ad + off);
      ssum[u][r] = __ldg(a.asum + off);
      if (SubMins<CB>::VALUE) ssumlo[u][r] = half_sum(v0.x, v0.y, v0.z, v0.w);
    }
    __syncthreads();
    const int bn = min(bc + CHUNK, b1);
#pragma unroll 1
    for (int b = bc; b < bn; b += D) {
      Raw raw[D];
      float s[D], s2[D];
#pragma unroll
      for (int u = 0; u < D; ++u) {
        const size_t blk = (size_t)min(b + u, bn - 1) * a.n + n;
        raw[u] = load_raw<CB>(a.payload, blk);
        s[u] = scale_of<CB>(__ldg(a.scale + blk));
        s2[u] = Codebook<CB>::SECOND ? h2f(__ldg(a.second + blk)) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < D; ++u) {
        if (b + u < bn) {
          const int su = b + u - bc;
          int w[8];
          if (Table<CB>::VALUE) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              w[2 * i] = (int)table_word<CB>(raw[u].q[i]);
              w[2 * i + 1] = (int)table_word<CB>(raw[u].q[i] >> 16);
            }
          } else {
            decode<CB>(raw[u], w);
          }
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const int4 q0 = sq[su][r][0], q1 = sq[su][r][1];
            int lo = 0, hi = 0;
            lo = __dp4a(w[0], q0.x, lo); lo = __dp4a(w[1], q0.y, lo);
            lo = __dp4a(w[2], q0.z, lo); lo = __dp4a(w[3], q0.w, lo);
            hi = __dp4a(w[4], q1.x, hi); hi = __dp4a(w[5], q1.y, hi);
            hi = __dp4a(w[6], q1.z, hi); hi = __dp4a(w[7], q1.w, hi);
            const int sum = min_sum<CB>(raw[u].q[2], ssumlo[su][SubMins<CB>::VALUE ? r : 0], ssum[su][r]);
            acc[r] = fold(acc[r], block_contribution<Codebook<CB>::RULE>(sd[su][r], s[u], s2[u], lo, hi, sum));
          }
        }
      }
    }
  }
  if (col < a.n) {
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r0 + r < a.m) a.out[((size_t)p * a.m + r0 + r) * a.n + col] = acc[r];
  }
}

// Exact int8 tile product: C[16][8] = A[16][32] * B[32][8] + init (K = one K-block).
__device__ __forceinline__ void mma_s8(const u32 (&a)[4], u32 b0, u32 b1, int (&c)[4], int init = 0) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(init));
}

// mma16: int8 mma.sync m16n8k32 with the weights as the 16-row operand: a warp owns 16
// columns, each K-block is decoded once per lane (two columns' words) and multiplied against
// up to RG groups of 8 activation rows, one mma per group, giving the exact integer dots of
// 16 columns x 8 rows; each lane then applies the per-block contract to its 4 (column, row)
// pairs per group. The dual-scale codebook runs two mmas per group (lo and hi halves zeroed).
// Fragment ownership (PTX m16n8k32, lane = 4g + t): A rows g and g+8 = columns col0+g and
// col0+g+8, K 4t..4t+3 and 16+4t..; B column g = activation row g, the same K; C (column g or
// g+8, activation rows 2t and 2t+1).
template <int CB>
__device__ __forceinline__ void grouped_mma16(const DecodeArgs& a) {
  const int RG = 2;  // row groups of 8 per CTA z-slice (16 rows)
  const int D = 4;   // K-blocks of loads in flight
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int p = blockIdx.y, r0 = blockIdx.z * 8 * RG;
  const int col0 = (blockIdx.x * (blockDim.x / 32) + warp) * 16;
  const int ncol[2] = {min(col0 + g, a.n - 1), min(col0 + g + 8, a.n - 1)};
  const int b0 = partition_begin(p, a.bpp), b1 = partition_end(p, a.bpp, a.kblk);
  const int PB = Codebook<CB>::PB;
  // acc[rg][j]: j = 2 * (column g / g+8) + (row 2t / 2t+1)
  float acc[RG][4];
#pragma unroll
  for (int rg = 0; rg < RG; ++rg)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[rg][j] = 0.0f;
#pragma unroll 1
  for (int b = b0; b < b1; b += D) {
    u32 wlo[D][2], whi[D][2], mins[D][2];
    float s[D][2], s2[D][2];
#pragma unroll
    for (int u = 0; u < D; ++u) {
      const int bu = min(b + u, b1 - 1);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const size_t blk = (size_t)bu * a.n + ncol[c];
        decode_pair<CB, false>(a.payload + blk * PB, t, wlo[u][c], whi[u][c]);
        mins[u][c] = SubMins<CB>::VALUE ? payload_word<false>(a.payload + blk * PB, 2) : 0u;
        s[u][c] = scale_of<CB>(__ldg(a.scale + blk));
        s2[u][c] = Codebook<CB>::SECOND ? h2f(__ldg(a.second + blk)) : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < D; ++u) {
      if (b + u < b1) {
        const int bb = b + u;
#pragma unroll
        for (int rg = 0; rg < RG; ++rg) {
          const int rbase = r0 + rg * 8;
          if (rbase >= a.m) break;  // uniform across the warp
          const u32* q = reinterpret_cast<const u32*>(a.aq + ((size_t)min(rbase + g, a.m - 1) * a.kblk + bb) * 32);
          u32 bf0 = __ldg(q + t), bf1 = __ldg(q + 4 + t);
          if (Table<CB>::VALUE) {  // match decode_pair's interleaved order (elements 4t, 4t+16, ...)
            const u32 x0 = bf0;
            bf0 = prmt(x0, bf1, 0x5140);
            bf1 = prmt(x0, bf1, 0x7362);
          }
          float sa[2];
          int sum[2], sumlo[2] = {0, 0};
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const size_t off = (size_t)min(rbase + 2 * t + i, a.m - 1) * a.kblk + bb;
            sa[i] = __ldg(a.ad + off);
            sum[i] = __ldg(a.asum + off);
          }
          int clo[4], chi[4];
          if (Codebook<CB>::RULE == RULE_DUAL) {
            const u32 alo[4] = {wlo[u][0], wlo[u][1], 0u, 0u};
            const u32 ahi[4] = {0u, 0u, whi[u][0], whi[u][1]};
            mma_s8(alo, bf0, bf1, clo);
            mma_s8(ahi, bf0, bf1, chi);
          } else {
            const u32 af[4] = {wlo[u][0], wlo[u][1], whi[u][0], whi[u][1]};
            mma_s8(af, bf0, bf1, clo);
#pragma unroll
            for (int j = 0; j < 4; ++j) chi[j] = 0;
          }
          // u2m: the mins as the A operand (columns g, g+8; m_lo over elements 0..15, m_hi over
          // 16..31, payload byte 9), so one more mma gives each (column, row) its min's exact
          // integer m_lo * sum(a[0..16]) + m_hi * sum(a[16..32]). Every other codebook keeps
          // min_sum (its zero sumlo unread): written any other way, their SASS changed.
          int cmin[4];
          if constexpr (SubMins<CB>::VALUE) {
            const u32 m0 = (mins[u][0] >> 8) & 0xFFu, m1 = (mins[u][1] >> 8) & 0xFFu;
            const u32 am[4] = {(m0 & 0xFu) * 0x01010101u, (m1 & 0xFu) * 0x01010101u, (m0 >> 4) * 0x01010101u,
                               (m1 >> 4) * 0x01010101u};
            mma_s8(am, bf0, bf1, cmin);
          }
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int c = j / 2, i = j % 2;
            const int ms = SubMins<CB>::VALUE ? cmin[j] : min_sum<CB>(mins[u][c], sumlo[i], sum[i]);
            acc[rg][j] = fold(acc[rg][j], block_contribution<Codebook<CB>::RULE>(sa[i], s[u][c], s2[u][c], clo[j], chi[j], ms));
          }
        }
      }
    }
  }
#pragma unroll
  for (int rg = 0; rg < RG; ++rg)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = r0 + rg * 8 + 2 * t + (j % 2), col = col0 + g + 8 * (j / 2);
      if (row < a.m && col < a.n) a.out[((size_t)p * a.m + row) * a.n + col] = acc[rg][j];
    }
}

}  // namespace vnni
