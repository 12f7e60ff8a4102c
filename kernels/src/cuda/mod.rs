//! The CUDA side: sources (`kernels/cuda/`), NVRTC compilation, ptxas resource parsing,
//! and the cudarc device runtime with the kernel launchers. cudarc loads libcuda and
//! libnvrtc at run time, so this builds on machines without CUDA; missing libraries are
//! reported as [`CudaError::MissingLibrary`], never a panic.

#[cfg(feature = "cuda")]
pub mod clock;
#[cfg(feature = "cuda")]
pub mod device;
pub mod launch;
#[cfg(feature = "cuda")]
pub mod nvrtc;
#[cfg(feature = "cuda")]
pub mod profiler;
pub mod ptxas;
pub mod source;
#[cfg(feature = "cuda")]
pub mod vendor;

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error("{library} is not available: {fix}")]
    MissingLibrary { library: &'static str, fix: &'static str },
    #[error("NVRTC failed to compile module {module}:\n{log}")]
    Nvrtc { module: String, log: String },
    #[error("CUDA driver error during {what}: {message}")]
    Driver { what: String, message: String },
    #[error("cuBLAS error during {what}: {message}")]
    Cublas { what: String, message: String },
    #[error("no CUDA device {ordinal}: {message}")]
    NoDevice { ordinal: usize, message: String },
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error(transparent)]
    Refused(#[from] launch::LaunchRefused),
    #[error("{what} cannot launch programmatically on {arch}: programmatic dependent launch needs sm_90 or later")]
    NoProgrammaticLaunch { what: String, arch: String },
    #[error("{candidate} cannot run {n} x {k}: {why}")]
    NotApplicable { candidate: String, n: usize, k: usize, why: String },
}

#[cfg(feature = "cuda")]
/// Map a cudarc driver error into ours, naming the step.
pub(crate) fn driver(what: impl Into<String>) -> impl FnOnce(cudarc::driver::DriverError) -> CudaError {
    let what = what.into();
    move |e| CudaError::Driver { what, message: format!("{e:?}") }
}
