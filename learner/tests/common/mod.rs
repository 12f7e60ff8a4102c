//! Shared by the learner's integration tests: synthetic corpora in fresh temp directories.

use std::path::PathBuf;

use vnni_learner::synthetic::{write, Spec};

/// A fresh directory under the system temp dir, unique per test and process.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vnni-learner-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Write and seal `spec` as a corpus named `name`.
pub fn corpus(name: &str, spec: &Spec) -> PathBuf {
    let dir = scratch(name).join("corpus");
    write(&dir, spec).unwrap();
    dir
}
