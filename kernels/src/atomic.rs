//! Atomic file replacement, the one implementation in the workspace: write a temporary
//! file beside the target (a name unique to this process and call, ending `.inprogress`),
//! fsync it, rename it over the target, fsync the directory. A reader sees the old file or
//! the new one, never half of one; a crash leaves only an `.inprogress` file, which sealing
//! refuses and reruns ignore. The corpus crate's CSV writers and the cubin cache use it.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The temporary name of `path` while it is written: the whole name, this process and a
/// counter, then `.inprogress`, so two writers never share a temporary file.
pub fn in_progress(path: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".{}.{n}.inprogress", std::process::id()));
    path.with_file_name(name)
}

/// Replace `path` atomically with what `fill` writes (through a buffered writer); the
/// parent directories are created. On any error the temporary file is removed.
pub fn write_with(path: &Path, fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    if path.is_dir() {
        return Err(std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory, not a file"));
    }
    let tmp = in_progress(path);
    let result = (|| {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        fill(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    sync_dir(path);
    Ok(())
}

/// Replace `path` atomically with `bytes`.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with(path, |w| w.write_all(bytes))
}

/// Persist a rename itself; not every filesystem supports syncing a directory.
fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn replaces_whole_files_and_leaves_no_temporaries() {
        let dir = std::env::temp_dir().join(format!("vnni-atomic-{}", std::process::id()));
        let path = dir.join("a/b.txt");
        super::write_bytes(&path, b"one").unwrap();
        super::write_bytes(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let failed = super::write_with(&path, |_| Err(std::io::Error::other("stop")));
        assert!(failed.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.join("a")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(super::write_bytes(&dir.join("a"), b"x").is_err(), "a directory is not replaced");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
