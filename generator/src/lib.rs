//! vnni-generator: policy IR -> C++17 `.inc` dispatch tables, a header declaring their
//! types, and a Rust module with the same tables and logic; validation of both against the
//! Rust evaluator (compiled harnesses, bulk queries); atomic install after validation.
//!
//! - [`render()`]: the templates in `templates/*.jinja` over a [`context::Context`].
//! - [`validate()`]: compile both outputs and compare their answers with the evaluator on
//!   inventory, boundary and random queries; returns the [`Validated`] proof.
//! - [`install()`]: atomic replacement of the targets, from a [`Validated`] only.
//! - [`certified`]: the batch-invariance matrix an install needs (every planned format x
//!   shape x grouped M at the bpp of the policy's own M = 1 pick) and what is missing from it.

pub mod certified;
pub mod context;
pub mod error;
pub mod harness;
pub mod install;
pub mod integer_only;
pub mod protocol;
pub mod provenance;
pub mod queries;
pub mod render;
pub mod templates;
pub mod validate;

pub use error::{Disagreement, GenerateError, Result};
pub use install::{install, write_outputs, InstallTargets};
pub use queries::InventoryPoints;
pub use render::{render, Rendered, HEADER_FILE, INC_FILE, RUST_FILE};
pub use validate::{validate, Report, ValidateOptions, Validated, MIN_RANDOM};
