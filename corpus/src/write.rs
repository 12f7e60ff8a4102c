//! Atomic publication of the corpus files: CSV (zstd-compressed for `.zst` paths) and bytes,
//! through the workspace's one atomic replacement (`vnni_kernels::atomic`: temp file, fsync,
//! rename). A reader never sees half a file.

use std::path::{Path, PathBuf};

use serde::Serialize;
pub use vnni_kernels::atomic::in_progress;

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Csv { path: PathBuf, source: csv::Error },
}

/// Write `rows` as CSV with a header to `path`, atomically; a `.zst` path is zstd-compressed.
pub fn write_csv<T: Serialize>(path: &Path, rows: &[T]) -> Result<(), WriteError> {
    write_bytes(path, &csv_bytes(path, rows)?)
}

/// The bytes `write_csv` writes for `rows` at `path` (zstd-compressed for a `.zst` path).
pub fn csv_bytes<T: Serialize>(path: &Path, rows: &[T]) -> Result<Vec<u8>, WriteError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for row in rows {
        w.serialize(row).map_err(|source| WriteError::Csv { path: path.to_path_buf(), source })?;
    }
    let plain = w.into_inner().map_err(|e| WriteError::Io { path: path.to_path_buf(), source: e.into_error() })?;
    if path.extension().is_some_and(|e| e == "zst") {
        return zstd::encode_all(plain.as_slice(), 9)
            .map_err(|source| WriteError::Io { path: path.to_path_buf(), source });
    }
    Ok(plain)
}

/// Write bytes to `path` atomically (temp file, fsync, rename).
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    vnni_kernels::atomic::write_bytes(path, bytes).map_err(|source| WriteError::Io { path: path.to_path_buf(), source })
}
