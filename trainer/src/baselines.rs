//! Baselines measured in the same run as the kernels: device-to-device copy bandwidth
//! (the roofline) and cuBLAS fp16 GEMV on the same N x K.

use anyhow::{Context, Result};
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use half::f16;
use vnni_kernels::cuda::device::Gpu;
use vnni_kernels::cuda::CudaError;
use vnni_kernels::fixture::{derive_seed, splitmix64};

use crate::cell::copies_for;
use crate::stats::{summarize, Summary};
use crate::gpu_timing::time_candidates;
use crate::timing::{Mode, Protocol, Timed};

/// Copy bandwidth in GB/s counting bytes read plus bytes written, and its summary (us per copy).
pub fn copy_bandwidth(gpu: &Gpu, protocol: &Protocol) -> Result<(f64, Summary, Timed, usize)> {
    const BYTES: usize = 2 << 30;
    let src = gpu.stream.alloc_zeros::<u8>(BYTES).context("allocating the copy source")?;
    let mut dst = gpu.stream.alloc_zeros::<u8>(BYTES).context("allocating the copy target")?;
    let mut launch = |_: usize, _: usize| -> Result<(), CudaError> {
        gpu.stream
            .memcpy_dtod(&src, &mut dst)
            .map_err(|e| CudaError::Driver { what: "copy".into(), message: format!("{e:?}") })
    };
    let p = Protocol { race_after: None, min_sample_us: 1.0, ..protocol.clone() };
    let t = time_candidates(gpu, Mode::Eager, &p, 1, 1, &mut launch)?.remove(0);
    let s = summarize(&t.measured()).context("no copy samples")?;
    Ok((2.0 * BYTES as f64 / (s.median * 1e-6) / 1e9, s, t, BYTES))
}

fn bounded_f16(seed: u64, len: usize) -> Vec<f16> {
    (0..len)
        .map(|i| {
            let r = splitmix64(seed, i as u64) as u16;
            f16::from_bits((r & 0x8000) | (13 << 10) | (r & 0x03FF))
        })
        .collect()
}

/// cuBLAS fp16 GEMV `y[N] = W[N][K] x[K]` (GemmEx, fp16 in and out, f32 compute), weight
/// copies rotated like the kernels'. Returns the timings and the bytes of W.
pub fn cublas_f16_gemv(
    gpu: &Gpu,
    n: usize,
    k: usize,
    mode: Mode,
    protocol: &Protocol,
) -> Result<(Timed, usize, usize)> {
    let blas = CudaBlas::new(gpu.stream.clone()).context("creating a cuBLAS handle")?;
    let bytes = n * k * 2;
    let copies = copies_for(bytes, gpu.info.l2_bytes);
    let w_host = bounded_f16(derive_seed(protocol.seed, "cublas w"), n * k);
    let w0 = gpu.upload(&w_host)?;
    drop(w_host);
    let mut ws = vec![w0];
    for _ in 1..copies {
        ws.push(gpu.stream.clone_dtod(&ws[0]).context("copying weights")?);
    }
    let x = gpu.upload(&bounded_f16(derive_seed(protocol.seed, "cublas x"), k))?;
    let mut y = gpu.stream.alloc_zeros::<f16>(n).context("allocating y")?;
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_T,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: 1,
        k: k as i32,
        alpha: f16::ONE,
        lda: k as i32,
        ldb: k as i32,
        beta: f16::ZERO,
        ldc: n as i32,
    };
    let mut launch = |_: usize, copy: usize| -> Result<(), CudaError> {
        // SAFETY: W is K x N column-major (N x K row-major), x has K and y N elements.
        unsafe { blas.gemm(cfg, &ws[copy], &x, &mut y) }
            .map_err(|e| CudaError::Cublas { what: "GemmEx fp16".into(), message: format!("{e:?}") })
    };
    let t = time_candidates(gpu, mode, &Protocol { race_after: None, ..protocol.clone() }, 1, copies, &mut launch)?
        .remove(0);
    Ok((t, bytes, copies))
}
