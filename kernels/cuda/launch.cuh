// Programmatic dependent launch (sm_90) and the L2 prefetch that goes with it, for every kernel
// that may be launched with the programmatic stream serialization attribute (the decode
// families, their ordered reduce, the activation quantization).
#pragma once

namespace vnni {

// A kernel launched with the programmatic stream serialization attribute may start while the
// previous kernel of its stream drains: it lets its own dependents start as soon as every CTA
// has begun (`pdl_trigger`), may read what no kernel of the chain writes (weights; the f32
// activations of the quantization) and ask L2 for it (`prefetch_bytes`), and waits for the
// previous grid to complete and flush (`pdl_wait`) before reading anything another kernel
// writes and before any store. Without the attribute the wait returns at once; before sm_90
// (no such launch) all three are absent.
__device__ __forceinline__ void pdl_trigger() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Bytes [lo, hi) of `base` into L2, their addresses rounded inward to 16 B (the bulk
// prefetch's unit and alignment): a hint, so it never touches memory past the range, whatever
// the alignment of `base`.
__device__ __forceinline__ void prefetch_bytes(const void* base, size_t lo, size_t hi) {
#if __CUDA_ARCH__ >= 900
  const size_t first = ((size_t)base + lo + 15) & ~(size_t)15, last = ((size_t)base + hi) & ~(size_t)15;
  if (last > first) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(first), "r"((unsigned)(last - first)));
#endif
}

}  // namespace vnni
