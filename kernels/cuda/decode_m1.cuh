// Decode (M = 1) kernel bodies. The extern "C" entry points are generated per
// specialization by the Rust registry (kernels/src/cuda/source.rs), so every variant is a
// template instantiation, not a copy.
#pragma once
#include "codebook.cuh"
#include "launch.cuh"

namespace vnni {

struct DecodeArgs {
  const u8* payload;        // [KBLK][N][PB]
  const unsigned short* scale;   // f16 bits [KBLK][N] (bf16 for e2m1: scale_of)
  const unsigned short* second;  // f16 bits [KBLK][N] or null
  const signed char* aq;    // [M][K]
  const float* ad;          // [M][KBLK]
  const int* asum;          // [M][KBLK]
  float* out;               // [KB][M][N] partials, or y[M][N] when KB == 1
  int n, kblk, bpp;
  int m;                    // activation rows (grouped kernels; 1 for decode)
  int prefetch_rows;        // decode: block rows of each partition asked of L2 before the wait (registry::prefetch_rows)
};

// Block rows [b0, b0 + rows) of partitions 0..parts-1 (partition q starts at b0 + q * bpp,
// rows past its end or past kblk skipped) over columns [c0, c0 + cols): payload, scales and
// second scales, one bulk prefetch per (partition, row, array), spread over the CTA's threads.
// No registers stay live across it, unlike loads issued before the wait. Not inlined, and
// given scalars (no struct on the stack): inlined, ptxas interleaves its arithmetic with the
// fold and kernels at their register budget spill.
__device__ __noinline__ void prefetch_rows(const u8* payload, const unsigned short* scale, const unsigned short* second,
                                           int pb, int n, int kblk, int bpp, int b0, int parts, int rows, int c0,
                                           int cols) {
  for (int t = threadIdx.x; t < parts * rows * 3; t += blockDim.x) {
    const int q = t / (rows * 3), u = t / 3 % rows, which = t % 3;
    const int b = b0 + q * bpp + u;
    if (u >= bpp || b >= kblk) continue;
    const size_t first = (size_t)b * n + c0, last = first + cols;
    if (which == 0) {
      prefetch_bytes(payload, first * pb, last * pb);
    } else if (which == 1) {
      prefetch_bytes(scale, first * 2, last * 2);
    } else if (second != nullptr) {
      prefetch_bytes(second, first * 2, last * 2);
    }
  }
}

template <int CB>
__device__ __forceinline__ void prefetch_first(const DecodeArgs& a, int b0, int parts, int rows, int c0, int cols) {
  if (cols > 0)
    prefetch_rows(a.payload, a.scale, Codebook<CB>::SECOND ? a.second : nullptr, Codebook<CB>::PB, a.n, a.kblk, a.bpp,
                  b0, parts, rows, c0, cols);
}

// Blocks whose loads are in flight at once per thread: about 128 payload bytes, enough to
// cover HBM latency at the occupancy these kernels reach, and short serial chains for
// narrow shapes.
// The table codebooks keep 6 blocks: their lookups need the registers that 8 would take
// (ptxas spills nl4 at 64); so does nl2d, the same lookups. s3d and u2m (12-byte payloads) keep 8, not 10: ten blocks spill
// at 64 (s3d with two columns a thread, u2m with one).
template <int CB> struct Depth {
  static const int VALUE = Table<CB>::VALUE || SignMagnitude<CB>::VALUE ? 6 : CB == CB_S3D || CB == CB_U2M ? 8 : 128 / Codebook<CB>::PB;
};

// Fold blocks [b0, b1) of CPT columns, each from +0.0f in ascending block order. Loads of
// D blocks x CPT columns are issued before any of them is used; the fold stays serial.
// Columns past N read column N-1 (valid memory) and are simply not stored by the caller.
template <int CB, int CPT>
__device__ __forceinline__ void fold_columns(const DecodeArgs& a, const int (&col)[CPT], int b0, int b1,
                                             float (&acc)[CPT]) {
  const int D = Depth<CB>::VALUE / CPT > 0 ? Depth<CB>::VALUE / CPT : 1;
  int n[CPT];
#pragma unroll
  for (int j = 0; j < CPT; ++j) {
    n[j] = min(col[j], a.n - 1);
    acc[j] = 0.0f;
  }
  int b = b0;
  for (; b + D <= b1; b += D) {
    Raw raw[D][CPT];
    float s[D][CPT], s2[D][CPT];
#pragma unroll
    for (int u = 0; u < D; ++u) {
#pragma unroll
      for (int j = 0; j < CPT; ++j) {
        const size_t blk = (size_t)(b + u) * a.n + n[j];
        raw[u][j] = load_raw<CB>(a.payload, blk);
        s[u][j] = scale_of<CB>(__ldg(a.scale + blk));
        s2[u][j] = Codebook<CB>::SECOND ? h2f(__ldg(a.second + blk)) : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < D; ++u) {
      ActBlock x = load_act(a.aq, a.ad, a.asum, b + u);
      prepare_act<CB>(x);
#pragma unroll
      for (int j = 0; j < CPT; ++j) acc[j] = fold(acc[j], block_term<CB>(raw[u][j], s[u][j], s2[u][j], x));
    }
  }
  // The tail (fewer than D blocks) goes in rounds of R = D/2 loads issued together, indices
  // clamped to the partition (valid memory), folding only the blocks that exist, in order:
  // a couple of memory latencies instead of one per block, in fewer registers than D.
  const int R = D / 2 > 0 ? D / 2 : 1;
  for (; b < b1; b += R) {
    Raw raw[R][CPT];
    float s[R][CPT], s2[R][CPT];
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const int bu = min(b + u, b1 - 1);
#pragma unroll
      for (int j = 0; j < CPT; ++j) {
        const size_t blk = (size_t)bu * a.n + n[j];
        raw[u][j] = load_raw<CB>(a.payload, blk);
        s[u][j] = scale_of<CB>(__ldg(a.scale + blk));
        s2[u][j] = Codebook<CB>::SECOND ? h2f(__ldg(a.second + blk)) : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < R; ++u) {
      if (b + u < b1) {
        ActBlock x = load_act(a.aq, a.ad, a.asum, b + u);
        prepare_act<CB>(x);
#pragma unroll
        for (int j = 0; j < CPT; ++j) acc[j] = fold(acc[j], block_term<CB>(raw[u][j], s[u][j], s2[u][j], x));
      }
    }
  }
}

// Tile family (wide, direct, kpar): CTA x covers TN columns, CTA y is partition p.
// Thread t owns columns t, t + THREADS, ... (CPT of them) so each load instruction of a warp
// touches adjacent columns.
template <int CB, int TN, int CPT>
__device__ __forceinline__ void decode_tile(const DecodeArgs& a) {
  const int THREADS = TN / CPT;
  const int p = blockIdx.y;
  pdl_trigger();
  prefetch_first<CB>(a, partition_begin(p, a.bpp), 1, a.prefetch_rows, blockIdx.x * TN, min(TN, a.n - (int)blockIdx.x * TN));
  pdl_wait();
  int col[CPT];
#pragma unroll
  for (int j = 0; j < CPT; ++j) col[j] = blockIdx.x * TN + threadIdx.x + j * THREADS;
  float acc[CPT];
  fold_columns<CB, CPT>(a, col, partition_begin(p, a.bpp), partition_end(p, a.bpp, a.kblk), acc);
#pragma unroll
  for (int j = 0; j < CPT; ++j)
    if (col[j] < a.n) a.out[(size_t)p * a.n + col[j]] = acc[j];
}

// Ordered reduction of KB partials per column: y = ((p0 + p1) + p2) ...
__device__ __forceinline__ void reduce_partials(const float* __restrict__ partials, float* __restrict__ y, int n,
                                                int kb) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  pdl_trigger();
  pdl_wait();  // the partials are the previous kernel's output
  if (col >= n) return;
  float v = partials[col];
  for (int p = 1; p < kb; ++p) v = fold(v, partials[(size_t)p * n + col]);
  y[col] = v;
}

// Fused family: one CTA of C columns x KB partitions (blockDim.x = C * KB); thread t works
// on partition t / C of column t % C, then the partition-0 threads fold the partials from
// shared memory in ascending order. One launch, no workspace.
template <int CB, int C>
__device__ __forceinline__ void decode_fused(const DecodeArgs& a, int kb) {
  extern __shared__ float partial[];  // [KB][C]
  const int p = threadIdx.x / C, c = threadIdx.x % C;
  const int n = blockIdx.x * C + c;
  pdl_trigger();
  prefetch_first<CB>(a, 0, kb, a.prefetch_rows, blockIdx.x * C, min(C, a.n - (int)blockIdx.x * C));
  pdl_wait();
  int col[1] = {n};
  float acc[1];
  fold_columns<CB, 1>(a, col, partition_begin(p, a.bpp), partition_end(p, a.bpp, a.kblk), acc);
  partial[threadIdx.x] = acc[0];
  __syncthreads();  // every thread reaches it: out-of-range columns only skip their loads
  if (p == 0 && n < a.n) {
    float y = partial[c];
    for (int q = 1; q < kb; ++q) y = fold(y, partial[q * C + c]);
    a.out[n] = y;
  }
}

}  // namespace vnni
