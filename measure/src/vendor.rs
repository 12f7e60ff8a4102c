//! Baselines timed in the same run as the kernels, under the same protocol: device copy
//! bandwidth (the roofline), cuBLAS fp16 GEMV/GEMM and cuBLASLt int8 GEMM on the same shapes.
//! The vendor calls themselves live in `vnni_kernels::cuda::vendor`.

use crate::error::{Context, Result};
use vnni_kernels::cuda::device::Gpu;
use vnni_kernels::cuda::vendor::{CublasF16Gemm, CublasLtI8Gemm, DeviceCopy};
use vnni_kernels::Mode;

use crate::cell::copies_for;
use crate::cuda_clock::{time_candidates, Copies};
use crate::protocol::{Protocol, Timed};
use crate::stats::{summarize, Summary};

/// Copy bandwidth in GB/s counting bytes read plus bytes written, and its summary (us per copy).
pub fn copy_bandwidth(gpu: &Gpu, protocol: &Protocol) -> Result<(f64, Summary, Timed, usize)> {
    const BYTES: usize = 2 << 30;
    let mut copy = DeviceCopy::new(gpu, BYTES).context("allocating the copy buffers")?;
    let p = Protocol { race: Vec::new(), settle: None, min_sample_us: 1.0, ..protocol.clone() };
    let t = time_candidates(gpu, Mode::Eager, &p, 1, Copies { distance: 1, allocated: 1 }, &mut None, &mut |_, _| {
        copy.launch()
    })?
    .remove(0);
    let s = summarize(&t.measured()).context("no copy samples")?;
    Ok((2.0 * BYTES as f64 / (s.median * 1e-6) / 1e9, s, t, BYTES))
}

/// cuBLAS fp16 GEMV `y[N] = W[N][K] x[K]`: the GEMM below with one row. Returns the timings,
/// the bytes of W and the weight copies.
pub fn cublas_f16_gemv(
    gpu: &Gpu,
    n: usize,
    k: usize,
    mode: Mode,
    protocol: &Protocol,
) -> Result<(Timed, usize, usize)> {
    let (t, copies) = cublas_f16_gemm(gpu, 1, n, k, mode, protocol)?;
    Ok((t, n * k * 2, copies))
}

/// cuBLAS fp16 GEMM `Y[M][N] = X[M][K] W[N][K]^T` on dequantized (fp16) weights, weight copies
/// rotated like the kernels'. Returns the timings and the weight copies.
pub fn cublas_f16_gemm(
    gpu: &Gpu,
    m: usize,
    n: usize,
    k: usize,
    mode: Mode,
    protocol: &Protocol,
) -> Result<(Timed, usize)> {
    let copies = copies_for(n * k * 2, gpu.info.l2_bytes);
    let mut gemm = CublasF16Gemm::new(gpu, m, n, k, copies, protocol.seed)?;
    time_rotated(gpu, mode, protocol, copies, &mut |copy| gemm.launch(copy))
}

/// One baseline launched on rotated weight copies, timed without racing: (timings, copies).
fn time_rotated(
    gpu: &Gpu,
    mode: Mode,
    protocol: &Protocol,
    copies: usize,
    launch: &mut dyn FnMut(usize) -> Result<(), vnni_kernels::cuda::CudaError>,
) -> Result<(Timed, usize)> {
    let p = Protocol { race: Vec::new(), settle: None, ..protocol.clone() };
    let all = Copies { distance: copies, allocated: copies };
    let t = time_candidates(gpu, mode, &p, 1, all, &mut None, &mut |_, copy| launch(copy))?.remove(0);
    Ok((t, copies))
}

/// cuBLASLt int8 GEMM `Y[M][N] = X[M][K] W[N][K]^T` (int32 out, no quantization scales): the
/// integer tensor-core roofline. Returns the timings and the weight copies.
pub fn cublaslt_i8_gemm(
    gpu: &Gpu,
    m: usize,
    n: usize,
    k: usize,
    mode: Mode,
    protocol: &Protocol,
) -> Result<(Timed, usize)> {
    let copies = copies_for(n * k, gpu.info.l2_bytes);
    let mut gemm = CublasLtI8Gemm::new(gpu, m, n, k, copies, protocol.seed)?;
    time_rotated(gpu, mode, protocol, copies, &mut |copy| gemm.launch(copy))
}
