// Activation quantization on the GPU, bit-identical to activation.rs: one warp per
// 32-value block; max and integer sums are exact in any order, the divisions are IEEE.
#include "contract.cuh"
#include "launch.cuh"

extern "C" __global__ void __launch_bounds__(256)
vnni_quantize_activations(const float* __restrict__ x, signed char* __restrict__ q, float* __restrict__ d,
                          int* __restrict__ sum, long long blocks) {
  const long long block = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  vnni::pdl_trigger();
  if (block >= blocks) return;  // whole warps exit together: no barrier follows
  const float v = x[block * 32 + lane];  // the input no kernel of a chain writes
  vnni::pdl_wait();  // q, d and sum may still be read by the previous kernel
  float amax = fabsf(v);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  const float scale = amax == 0.0f ? 1.0f : __fdiv_rn(amax, 127.0f);
  int qi = __float2int_rn(__fdiv_rn(v, scale));  // round half to even
  qi = max(-127, min(127, qi));
  q[block * 32 + lane] = (signed char)qi;
  int s = qi;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
  if (lane == 0) {
    d[block] = scale;
    sum[block] = s;
  }
}
