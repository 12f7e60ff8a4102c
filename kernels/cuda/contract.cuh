// The canonical arithmetic contract (DESIGN.md section 3), the one CUDA copy of it.
// Every float operation is an explicitly rounded intrinsic, so no build flag or compiler
// choice can contract it into an FMA; the module is also compiled with --fmad=false.
#pragma once

namespace vnni {

enum ScaleRule { RULE_SINGLE = 0, RULE_ASYMMETRIC = 1, RULE_DUAL = 2 };

// Contribution of one K-block from exact float inputs: `dot` is the dot of all 32 elements
// (single and asymmetric rules) or of elements 0..15 (dual rule), `dot_hi` that of elements
// 16..31 (dual rule only), `act_sum` what the min multiplies (asymmetric rule only): the
// activation block's sum, or for sub-block mins (u2m) m_lo * sum(a[0..16]) + m_hi *
// sum(a[16..32]) (min_sum, codebook.cuh).
template <int RULE>
__device__ __forceinline__ float contribution(float sa, float s, float second, float dot, float dot_hi,
                                              float act_sum) {
  if (RULE == RULE_SINGLE) {
    return __fmul_rn(__fmul_rn(sa, s), dot);
  } else if (RULE == RULE_ASYMMETRIC) {
    return __fadd_rn(__fmul_rn(__fmul_rn(sa, s), dot), __fmul_rn(__fmul_rn(sa, second), act_sum));
  } else {
    return __fmul_rn(sa, __fadd_rn(__fmul_rn(s, dot), __fmul_rn(second, dot_hi)));
  }
}

// The same from integer dots: dot_lo/dot_hi are the exact dots of elements 0..15 and 16..31,
// act_sum the exact integer the min multiplies (see contribution); |each| < 2^24 so int->float
// is exact.
template <int RULE>
__device__ __forceinline__ float block_contribution(float sa, float s, float second, int dot_lo, int dot_hi,
                                                    int act_sum) {
  if (RULE == RULE_DUAL) {
    return contribution<RULE>(sa, s, second, __int2float_rn(dot_lo), __int2float_rn(dot_hi), 0.0f);
  }
  return contribution<RULE>(sa, s, second, __int2float_rn(dot_lo + dot_hi), 0.0f,
                            RULE == RULE_ASYMMETRIC ? __int2float_rn(act_sum) : 0.0f);
}

// Partition p of kblk K-blocks at bpp blocks per partition: [p*bpp, min((p+1)*bpp, kblk)).
__device__ __forceinline__ int partition_begin(int p, int bpp) { return p * bpp; }
__device__ __forceinline__ int partition_end(int p, int bpp, int kblk) { return min((p + 1) * bpp, kblk); }

// A partition folds from +0.0f in ascending block order; partitions fold in ascending order
// starting from the first partition's value (not from 0).
__device__ __forceinline__ float fold(float acc, float c) { return __fadd_rn(acc, c); }

}  // namespace vnni
