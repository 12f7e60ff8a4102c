//! Vendor baselines measured beside our kernels in the same run: a device-to-device copy
//! (the bandwidth roofline), cuBLAS fp16 GEMM/GEMV on dequantized weights and cuBLASLt int8
//! GEMM without scales (the integer tensor-core roofline). Each is set up once, with its
//! weights in `copies` rotated device copies, and then launched one copy at a time; the
//! timing protocol lives in `vnni-measure`. All the FFI of the workspace is here.

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys::{
    cublasComputeType_t, cublasLtMatmulDescAttributes_t as Desc, cublasLtMatmulPreferenceAttributes_t as Pref,
    cudaDataType,
};
use cudarc::driver::{CudaSlice, DevicePtr};
use half::f16;

use super::device::Gpu;
use super::{driver, CudaError};
use crate::fixture::{derive_seed, splitmix64};

fn cublas(what: &'static str) -> impl Fn(cudarc::cublas::result::CublasError) -> CudaError {
    move |e| CudaError::Cublas { what: what.into(), message: format!("{e:?}") }
}

fn cublaslt(what: &'static str) -> impl Fn(lt::CublasError) -> CudaError {
    move |e| CudaError::Cublas { what: what.into(), message: format!("{e:?}") }
}

/// A device-to-device copy of `bytes` (read once, written once).
pub struct DeviceCopy<'g> {
    gpu: &'g Gpu,
    src: CudaSlice<u8>,
    dst: CudaSlice<u8>,
}

impl<'g> DeviceCopy<'g> {
    pub fn new(gpu: &'g Gpu, bytes: usize) -> Result<Self, CudaError> {
        Ok(DeviceCopy { gpu, src: gpu.alloc_zeros(bytes)?, dst: gpu.alloc_zeros(bytes)? })
    }

    pub fn launch(&mut self) -> Result<(), CudaError> {
        self.gpu.stream.memcpy_dtod(&self.src, &mut self.dst).map_err(driver("copy"))
    }
}

/// Bounded fp16 values (|v| in [2^-2, 2^-1)) from a seed: no overflow in any GEMM here.
fn bounded_f16(seed: u64, len: usize) -> Vec<f16> {
    (0..len)
        .map(|i| {
            let r = splitmix64(seed, i as u64) as u16;
            f16::from_bits((r & 0x8000) | (13 << 10) | (r & 0x03FF))
        })
        .collect()
}

/// `copies` device copies of `host` (the first uploaded, the rest copied on the device).
fn rotated<T: cudarc::driver::DeviceRepr + Copy + Default + cudarc::driver::ValidAsZeroBits>(
    gpu: &Gpu,
    host: &[T],
    copies: usize,
) -> Result<Vec<CudaSlice<T>>, CudaError> {
    let mut ws = vec![gpu.upload(host)?];
    for _ in 1..copies.max(1) {
        ws.push(gpu.stream.clone_dtod(&ws[0]).map_err(driver("copying weights"))?);
    }
    Ok(ws)
}

/// cuBLAS fp16 GEMM `Y[M][N] = X[M][K] W[N][K]^T` (GemmEx, fp16 in and out, f32 compute);
/// M = 1 is the GEMV baseline.
pub struct CublasF16Gemm {
    blas: CudaBlas,
    cfg: GemmConfig<f16>,
    ws: Vec<CudaSlice<f16>>,
    x: CudaSlice<f16>,
    y: CudaSlice<f16>,
}

impl CublasF16Gemm {
    pub fn new(gpu: &Gpu, m: usize, n: usize, k: usize, copies: usize, seed: u64) -> Result<Self, CudaError> {
        let blas = CudaBlas::new(gpu.stream.clone()).map_err(cublas("creating a cuBLAS handle"))?;
        let ws = rotated(gpu, &bounded_f16(derive_seed(seed, "cublas w"), n * k), copies)?;
        let x = gpu.upload(&bounded_f16(derive_seed(seed, "cublas x"), m * k))?;
        let y = gpu.alloc_zeros::<f16>(m * n)?;
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
        Ok(CublasF16Gemm { blas, cfg, ws, x, y })
    }

    /// One GEMM on weight copy `copy` (modulo the copies).
    pub fn launch(&mut self, copy: usize) -> Result<(), CudaError> {
        let w = &self.ws[copy % self.ws.len()];
        // SAFETY: W is K x N column-major (N x K row-major), X is K x M, Y is N x M, as sized in `new`.
        unsafe { self.blas.gemm(self.cfg, w, &self.x, &mut self.y) }.map_err(cublas("GemmEx fp16"))
    }
}

/// The cuBLASLt objects of one GEMM, destroyed on drop (also when setup fails half way).
#[derive(Default)]
struct LtObjects {
    handle: Option<cudarc::cublaslt::sys::cublasLtHandle_t>,
    desc: Option<cudarc::cublaslt::sys::cublasLtMatmulDesc_t>,
    layouts: Vec<cudarc::cublaslt::sys::cublasLtMatrixLayout_t>,
    pref: Option<cudarc::cublaslt::sys::cublasLtMatmulPreference_t>,
}

impl Drop for LtObjects {
    fn drop(&mut self) {
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

/// cuBLASLt int8 GEMM `Y[M][N] = X[M][K] W[N][K]^T` (int8 in, int32 out and compute; the
/// algorithm from cuBLASLt's heuristic with a 32 MiB workspace).
pub struct CublasLtI8Gemm<'g> {
    gpu: &'g Gpu,
    objects: LtObjects,
    layouts: [cudarc::cublaslt::sys::cublasLtMatrixLayout_t; 3],
    algo: cudarc::cublaslt::sys::cublasLtMatmulAlgo_t,
    ws: Vec<CudaSlice<i8>>,
    x: CudaSlice<i8>,
    y: CudaSlice<i32>,
    scratch: CudaSlice<u8>,
}

const LT_WORKSPACE: usize = 32 << 20;

impl<'g> CublasLtI8Gemm<'g> {
    pub fn new(gpu: &'g Gpu, m: usize, n: usize, k: usize, copies: usize, seed: u64) -> Result<Self, CudaError> {
        let bytes_i8 = |what: &str, len: usize| -> Vec<i8> {
            let s = derive_seed(seed, what);
            (0..len).map(|i| (splitmix64(s, i as u64) % 255) as i8).collect()
        };
        let ws = rotated(gpu, &bytes_i8("cublaslt w", n * k), copies)?;
        let x = gpu.upload(&bytes_i8("cublaslt x", m * k))?;
        let y = gpu.alloc_zeros::<i32>(m * n)?;
        let scratch = gpu.alloc_zeros::<u8>(LT_WORKSPACE)?;
        let mut objects = LtObjects::default();
        let handle = *objects.handle.insert(lt::create_handle().map_err(cublaslt("cublasLtCreate"))?);
        let desc = *objects.desc.insert(
            lt::create_matmul_desc(cublasComputeType_t::CUBLAS_COMPUTE_32I, cudaDataType::CUDA_R_32I)
                .map_err(cublaslt("cublasLtMatmulDescCreate"))?,
        );
        let trans: i32 = 1; // CUBLAS_OP_T (cublasOperation_t is an int)
                            // SAFETY: the descriptor is live; the attribute is a cublasOperation_t (an int).
        unsafe {
            lt::set_matmul_desc_attribute(
                desc,
                Desc::CUBLASLT_MATMUL_DESC_TRANSA,
                &trans as *const _ as *const _,
                std::mem::size_of_val(&trans),
            )
        }
        .map_err(cublaslt("setting TRANSA"))?;
        // op(A) = W (N x K), B = X^T (K x M), D = Y^T (N x M), all column-major.
        let mut layout = |t: cudaDataType, rows: usize, cols: usize| -> Result<_, CudaError> {
            let l = lt::create_matrix_layout(t, rows as u64, cols as u64, rows as i64)
                .map_err(cublaslt("a matrix layout"))?;
            objects.layouts.push(l);
            Ok(l)
        };
        let layouts = [
            layout(cudaDataType::CUDA_R_8I, k, n)?,
            layout(cudaDataType::CUDA_R_8I, k, m)?,
            layout(cudaDataType::CUDA_R_32I, n, m)?,
        ];
        let pref = *objects.pref.insert(lt::create_matmul_pref().map_err(cublaslt("cublasLtMatmulPreferenceCreate"))?);
        let limit = LT_WORKSPACE as u64;
        // SAFETY: live preference; the attribute is a u64.
        unsafe {
            lt::set_matmul_pref_attribute(
                pref,
                Pref::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &limit as *const _ as *const _,
                8,
            )
        }
        .map_err(cublaslt("setting the workspace limit"))?;
        let [a, b, d] = layouts;
        // SAFETY: every descriptor is live.
        let heuristic = unsafe { lt::get_matmul_algo_heuristic(handle, desc, a, b, d, d, pref) }
            .map_err(cublaslt("cublasLtMatmulAlgoGetHeuristic (int8)"))?;
        Ok(CublasLtI8Gemm { gpu, objects, layouts, algo: heuristic.algo, ws, x, y, scratch })
    }

    /// One GEMM on weight copy `copy` (modulo the copies).
    pub fn launch(&mut self, copy: usize) -> Result<(), CudaError> {
        let (handle, desc) = (self.objects.handle.expect("created in new"), self.objects.desc.expect("created in new"));
        let [a, b, d] = self.layouts;
        let (alpha, beta) = (1i32, 0i32);
        let stream = self.gpu.stream.cu_stream() as cudarc::cublaslt::sys::cudaStream_t;
        let s = &self.gpu.stream;
        let (w, _g1) = self.ws[copy % self.ws.len()].device_ptr(s);
        let (xp, _g2) = self.x.device_ptr(s);
        let (yp, _g3) = self.y.device_ptr(s);
        let (sp, _g4) = self.scratch.device_ptr(s);
        // SAFETY: buffers sized by the layouts in `new`; the algorithm came from the heuristic
        // for exactly these descriptors, which live as long as `self`.
        unsafe {
            lt::matmul(
                handle,
                desc,
                &alpha as *const i32 as *const _,
                &beta as *const i32 as *const _,
                w as *const _,
                a,
                xp as *const _,
                b,
                yp as *const _,
                d,
                yp as *mut _,
                d,
                &self.algo,
                sp as *mut _,
                LT_WORKSPACE,
                stream,
            )
        }
        .map_err(cublaslt("cublasLtMatmul (int8)"))
    }
}
