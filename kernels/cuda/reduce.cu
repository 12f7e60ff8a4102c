// The kpar family's second launch: ordered fold of the partition partials.
#include "decode_m1.cuh"

extern "C" __global__ void __launch_bounds__(256)
vnni_reduce_partials(const float* __restrict__ partials, float* __restrict__ y, int n, int kb) {
  vnni::reduce_partials(partials, y, n, kb);
}
