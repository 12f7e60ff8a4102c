//! vnni-kernels: everything about the numbers.
//!
//! - [`format`]: the GGUF source formats and their registry.
//! - [`codebook`]: packed codebooks, alias groups, block decode.
//! - [`codec`]: GGUF block parse/write, dequantize, quantize, repack.
//! - [`packed`]: the packed matrix layout and repacking of whole matrices.
//! - [`contract`]: the canonical arithmetic contract (the one Rust copy).
//! - [`activation`]: activation quantization.
//! - [`reference`]: the canonical CPU reference GEMV/GEMM for any bpp.
//! - [`cpu`]: the CPU backend's kernels (row tiles, K partitions, grouped rows).
//! - [`fixture`]: deterministic O(bytes) fixtures.
//! - [`registry`]: candidate identity, launch plans and the registry digests.
//! - [`occupancy`]: resident CTAs per SM on sm_90 (the cost model's waves).
//! - [`vocab`]: the shared words (backend, surface, mode, candidate id).
//! - [`cuda`]: CUDA sources and ptxas parsing always; NVRTC, the device runtime, launchers
//!   and the vendor (cuBLAS) baselines with the `cuda` feature (cudarc).
//! - [`digest`], [`atomic`]: the workspace's one sha256-to-hex and one atomic file write.

pub mod activation;
pub mod atomic;
pub mod codebook;
pub mod codec;
pub mod contract;
pub mod cpu;
pub mod cuda;
pub mod digest;
mod error;
pub mod fixture;
pub mod format;
pub mod occupancy;
pub mod packed;
pub mod reference;
pub mod registry;
pub mod vocab;

pub use activation::{quantize_activations, QuantizedActivations};
pub use codebook::Codebook;
pub use error::{CodecError, RepackError, ShapeError};
pub use format::SourceFormat;
pub use packed::{repack, PackedMatrix};
pub use vocab::{Backend, BackendChoice, CandidateId, L2Prefetch, Mode, Surface, Vocabulary};
