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

/// Weight copies of a baseline GEMM: like the kernels', more than 3 x L2 between two uses.
fn rotated<T: cudarc::driver::DeviceRepr>(
    gpu: &Gpu,
    first: cudarc::driver::CudaSlice<T>,
    bytes: usize,
) -> Result<Vec<cudarc::driver::CudaSlice<T>>> {
    let copies = copies_for(bytes, gpu.info.l2_bytes);
    let mut ws = vec![first];
    for _ in 1..copies {
        ws.push(gpu.stream.clone_dtod(&ws[0]).context("copying weights")?);
    }
    Ok(ws)
}

/// cuBLAS fp16 GEMM `Y[M][N] = X[M][K] W[N][K]^T` on dequantized (fp16) weights (GemmEx,
/// fp16 in and out, f32 compute). Returns the timings and the weight copies.
pub fn cublas_f16_gemm(gpu: &Gpu, m: usize, n: usize, k: usize, mode: Mode, protocol: &Protocol) -> Result<(Timed, usize)> {
    let blas = CudaBlas::new(gpu.stream.clone()).context("creating a cuBLAS handle")?;
    let ws = rotated(gpu, gpu.upload(&bounded_f16(derive_seed(protocol.seed, "cublas w"), n * k))?, n * k * 2)?;
    let x = gpu.upload(&bounded_f16(derive_seed(protocol.seed, "cublas x"), m * k))?;
    let mut y = gpu.stream.alloc_zeros::<f16>(m * n).context("allocating Y")?;
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_T,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: m as i32,
        k: k as i32,
        alpha: f16::ONE,
        lda: k as i32,
        ldb: k as i32,
        beta: f16::ZERO,
        ldc: n as i32,
    };
    let copies = ws.len();
    let mut launch = |_: usize, copy: usize| -> Result<(), CudaError> {
        // SAFETY: W is K x N column-major (N x K row-major), X is K x M, Y is N x M.
        unsafe { blas.gemm(cfg, &ws[copy], &x, &mut y) }
            .map_err(|e| CudaError::Cublas { what: "GemmEx fp16".into(), message: format!("{e:?}") })
    };
    let t = time_candidates(gpu, mode, &Protocol { race_after: None, ..protocol.clone() }, 1, copies, &mut launch)?
        .remove(0);
    Ok((t, copies))
}

/// cuBLASLt int8 GEMM `Y[M][N] = X[M][K] W[N][K]^T` (int8 in, int32 out and compute; the
/// algorithm from cuBLASLt's heuristic with a 32 MiB workspace): the integer tensor-core
/// roofline without any quantization scales. Returns the timings and the weight copies.
pub fn cublaslt_i8_gemm(gpu: &Gpu, m: usize, n: usize, k: usize, mode: Mode, protocol: &Protocol) -> Result<(Timed, usize)> {
    use cudarc::cublaslt::result as lt;
    use cudarc::cublaslt::sys::{
        cublasComputeType_t, cublasLtMatmulDescAttributes_t as Desc, cublasLtMatmulPreferenceAttributes_t as Pref,
        cudaDataType,
    };
    use cudarc::driver::DevicePtr;
    let fail = |what: &'static str| move |e: cudarc::cublaslt::result::CublasError| CudaError::Cublas { what: what.into(), message: format!("{e:?}") };
    let bytes_i8 = |seed: &str, len: usize| -> Vec<i8> {
        let s = derive_seed(protocol.seed, seed);
        (0..len).map(|i| (splitmix64(s, i as u64) % 255) as i8).collect()
    };
    let ws = rotated(gpu, gpu.upload(&bytes_i8("cublaslt w", n * k))?, n * k)?;
    let x = gpu.upload(&bytes_i8("cublaslt x", m * k))?;
    let mut y = gpu.stream.alloc_zeros::<i32>(m * n).context("allocating Y")?;
    const WORKSPACE: usize = 32 << 20;
    let mut scratch = gpu.stream.alloc_zeros::<u8>(WORKSPACE).context("allocating the cuBLASLt workspace")?;
    let mut objects = LtObjects::default();
    let handle = *objects.handle.insert(lt::create_handle().map_err(fail("cublasLtCreate"))?);
    let desc = *objects.desc.insert(
        lt::create_matmul_desc(cublasComputeType_t::CUBLAS_COMPUTE_32I, cudaDataType::CUDA_R_32I)
            .map_err(fail("cublasLtMatmulDescCreate"))?,
    );
    let trans: i32 = 1; // CUBLAS_OP_T (cublasOperation_t is an int)
    // SAFETY: the descriptor is live; the attribute is a cublasOperation_t (an int).
    unsafe {
        lt::set_matmul_desc_attribute(desc, Desc::CUBLASLT_MATMUL_DESC_TRANSA, &trans as *const _ as *const _, std::mem::size_of_val(&trans))
    }
    .map_err(fail("setting TRANSA"))?;
    // op(A) = W (N x K), B = X^T (K x M), D = Y^T (N x M), all column-major.
    let mut layout = |t: cudaDataType, rows: usize, cols: usize| -> Result<_, CudaError> {
        let l = lt::create_matrix_layout(t, rows as u64, cols as u64, rows as i64).map_err(fail("a matrix layout"))?;
        objects.layouts.push(l);
        Ok(l)
    };
    let a_layout = layout(cudaDataType::CUDA_R_8I, k, n)?;
    let b_layout = layout(cudaDataType::CUDA_R_8I, k, m)?;
    let d_layout = layout(cudaDataType::CUDA_R_32I, n, m)?;
    let pref = *objects.pref.insert(lt::create_matmul_pref().map_err(fail("cublasLtMatmulPreferenceCreate"))?);
    let limit = WORKSPACE as u64;
    // SAFETY: live preference; the attribute is a u64.
    unsafe {
        lt::set_matmul_pref_attribute(pref, Pref::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit as *const _ as *const _, 8)
    }
    .map_err(fail("setting the workspace limit"))?;
    // SAFETY: every descriptor is live.
    let heuristic = unsafe { lt::get_matmul_algo_heuristic(handle, desc, a_layout, b_layout, d_layout, d_layout, pref) }
        .map_err(fail("cublasLtMatmulAlgoGetHeuristic (int8)"))?;
    let (alpha, beta) = (1i32, 0i32);
    let copies = ws.len();
    let stream = gpu.stream.cu_stream() as cudarc::cublaslt::sys::cudaStream_t;
    let mut launch = |_: usize, copy: usize| -> Result<(), CudaError> {
        let (w, _g1) = ws[copy].device_ptr(&gpu.stream);
        let (xp, _g2) = x.device_ptr(&gpu.stream);
        let (yp, _g3) = y.device_ptr(&gpu.stream);
        let (sp, _g4) = scratch.device_ptr(&gpu.stream);
        // SAFETY: buffers sized by the layouts above; the algorithm came from the heuristic
        // for exactly these descriptors.
        unsafe {
            lt::matmul(
                handle,
                desc,
                &alpha as *const i32 as *const _,
                &beta as *const i32 as *const _,
                w as *const _,
                a_layout,
                xp as *const _,
                b_layout,
                yp as *const _,
                d_layout,
                yp as *mut _,
                d_layout,
                &heuristic.algo,
                sp as *mut _,
                WORKSPACE,
                stream,
            )
        }
        .map_err(fail("cublasLtMatmul (int8)"))
    };
    let t = time_candidates(gpu, mode, &Protocol { race_after: None, ..protocol.clone() }, 1, copies, &mut launch);
    drop(objects);
    let _ = (&mut y, &mut scratch);
    Ok((t?.remove(0), copies))
}

/// The cuBLASLt objects of one GEMM, destroyed on drop (also when a step fails half way).
#[derive(Default)]
struct LtObjects {
    handle: Option<cudarc::cublaslt::sys::cublasLtHandle_t>,
    desc: Option<cudarc::cublaslt::sys::cublasLtMatmulDesc_t>,
    layouts: Vec<cudarc::cublaslt::sys::cublasLtMatrixLayout_t>,
    pref: Option<cudarc::cublaslt::sys::cublasLtMatmulPreference_t>,
}

impl Drop for LtObjects {
    fn drop(&mut self) {
        use cudarc::cublaslt::result as lt;
        // SAFETY: each object was created once, is destroyed once, and nothing uses it after.
        unsafe {
            if let Some(p) = self.pref.take() {
                let _ = lt::destroy_matmul_pref(p);
            }
            for l in self.layouts.drain(..) {
                let _ = lt::destroy_matrix_layout(l);
            }
            if let Some(d) = self.desc.take() {
                let _ = lt::destroy_matmul_desc(d);
            }
            if let Some(h) = self.handle.take() {
                let _ = lt::destroy_handle(h);
            }
        }
    }
}
