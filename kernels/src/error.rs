//! Typed errors of the kernels crate. Every variant names where the bad input is
//! (block index, byte offset, shape) so callers can point a user at the row.

use crate::{Codebook, SourceFormat};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CodecError {
    #[error("{format}: {len} bytes is not a whole number of {block_bytes}-byte blocks")]
    BadLength { format: SourceFormat, len: usize, block_bytes: usize },
    #[error("{format}: {k} values is not a multiple of the block size {block_elems}")]
    BadElementCount { format: SourceFormat, k: usize, block_elems: usize },
    #[error("{format}: block {block}: the f16 field at byte {offset} is not finite (bits {bits:#06x})")]
    NonFiniteScale { format: SourceFormat, block: usize, offset: usize, bits: u16 },
    #[error("{format}: input value {index} is not finite ({value})")]
    NonFiniteInput { format: SourceFormat, index: usize, value: f32 },
    #[error("{format}: block {block}: the computed scale {value} does not fit in f16")]
    ScaleOverflow { format: SourceFormat, block: usize, value: f32 },
    #[error("{format} has no quantizer (quantize from f32 is implemented for {supported})")]
    NoQuantizer { format: SourceFormat, supported: String },
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShapeError {
    #[error("shape {n} x {k}: dimensions must be positive")]
    Empty { n: usize, k: usize },
    #[error("K = {k} is not a multiple of {multiple} (required by {what})")]
    KNotMultiple { k: usize, multiple: usize, what: String },
    #[error("{what}: expected {expected} elements, got {got}")]
    Length { what: &'static str, expected: usize, got: usize },
    #[error("shape {n} x {k} overflows the address space")]
    Overflow { n: usize, k: usize },
    #[error("bpp (K-blocks per partition) must be at least 1")]
    ZeroBpp,
    #[error("weights are {weights} but the request is for {requested}")]
    CodebookMismatch { weights: Codebook, requested: Codebook },
    #[error("activation value at row {row}, column {col} is not finite ({value})")]
    NonFiniteActivation { row: usize, col: usize, value: f32 },
    #[error("column {col} is out of range for N = {n}")]
    ColumnOutOfRange { col: usize, n: usize },
    #[error("candidate {candidate} cannot run {n} x {k} here: {why}")]
    Illegal { candidate: String, n: usize, k: usize, why: &'static str },
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RepackError {
    #[error(transparent)]
    Shape(#[from] ShapeError),
    #[error("{format} matrix: expected {expected} bytes for its shape, got {got}")]
    BadLength { format: SourceFormat, expected: usize, got: usize },
    #[error("{format} matrix: row {row}, source block {block}: the f16 field at byte {offset} is not finite")]
    NonFiniteScale { format: SourceFormat, row: usize, block: usize, offset: usize },
    #[error("{format} matrix: row {row}, source block {block}, sub-block {sub}: scale {value} does not fit its codebook's scale plane (f16; bf16, exactly, for e2m1)")]
    ScaleOverflow { format: SourceFormat, row: usize, block: usize, sub: usize, value: f32 },
}
