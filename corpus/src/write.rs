//! Atomic publication: write a temporary file, fsync, rename. A reader never sees half a file.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Csv { path: PathBuf, source: csv::Error },
}

/// Write `rows` as CSV with a header to `path`, atomically; a `.zst` path is zstd-compressed.
pub fn write_csv<T: Serialize>(path: &Path, rows: &[T]) -> Result<(), WriteError> {
    if path.extension().is_some_and(|e| e == "zst") {
        let mut w = csv::Writer::from_writer(Vec::new());
        for row in rows {
            w.serialize(row).map_err(|source| WriteError::Csv { path: path.to_path_buf(), source })?;
        }
        let plain = w.into_inner().map_err(|e| WriteError::Io { path: path.to_path_buf(), source: e.into_error() })?;
        let packed = zstd::encode_all(plain.as_slice(), 9)
            .map_err(|source| WriteError::Io { path: path.to_path_buf(), source })?;
        return write_bytes(path, &packed);
    }
    let io = |source| WriteError::Io { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = in_progress(path);
    {
        let file = std::fs::File::create(&tmp).map_err(io)?;
        let mut w = csv::Writer::from_writer(std::io::BufWriter::new(file));
        for row in rows {
            w.serialize(row).map_err(|source| WriteError::Csv { path: path.to_path_buf(), source })?;
        }
        let buf = w.into_inner().map_err(|e| io(e.into_error()))?;
        let file = buf.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
    }
    std::fs::rename(&tmp, path).map_err(io)?;
    sync_dir(path);
    let _ = std::io::stdout().flush();
    Ok(())
}

/// The temporary name of `path` while it is written: the whole name, this process and a
/// counter, then `.inprogress`, so two writers (workers binding one plan) never share a
/// temporary file and sealing recognizes leftovers.
pub fn in_progress(path: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".{}.{n}.inprogress", std::process::id()));
    path.with_file_name(name)
}

/// Write bytes to `path` atomically (temp file, fsync, rename).
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let io = |source| WriteError::Io { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = in_progress(path);
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io)?;
    sync_dir(path);
    Ok(())
}

/// Persist a rename itself; not every filesystem supports syncing a directory.
fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
}
