//! vnni-corpus: the owner of every file format of the project (shape inventory and
//! profiles, observation/timing/resource/certificate schemas, the resumable cell store,
//! sealing and verifying corpus bundles, Git LFS pointer handling, provenance).
//!
//! Empty until the corpus issue lands; the crate exists so the workspace has its final shape.
