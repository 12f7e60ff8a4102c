// The checked columns of M output rows, gathered on the device before the download: a large
// output (an LM head at M = 4096 is 2 GiB) would otherwise cross the bus whole to compare a
// few thousand columns. out[r * ncols + i] = y[r * n + cols[i]], the layout the host compares.
extern "C" __global__ void __launch_bounds__(256)
vnni_gather_columns(const float* __restrict__ y, const int* __restrict__ cols, int ncols, long long n,
                    long long m, float* __restrict__ out) {
  long long total = m * (long long)ncols;
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < total; i += (long long)gridDim.x * 256LL) {
    long long r = i / ncols;
    out[i] = y[r * n + cols[i % ncols]];
  }
}
