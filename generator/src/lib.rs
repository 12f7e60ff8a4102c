//! vnni-generator: policy IR to C++ `.inc` dispatch tables (and a Rust module), compiled
//! validation against the Rust evaluator, atomic install.
//!
//! Empty until the generator issue lands; the crate exists so the workspace has its final shape.
