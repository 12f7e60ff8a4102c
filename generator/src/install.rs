//! Writing generated files: `--out` copies and installs. Both replace each target
//! atomically (temp file in the same directory, fsync, rename); an install needs the
//! [`Validated`] proof, so unvalidated bytes cannot reach an installed path.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::render::Rendered;
use crate::validate::Validated;

/// Where an install puts each output; `None`: not installed.
#[derive(Debug, Clone, Default)]
pub struct InstallTargets {
    pub inc: Option<PathBuf>,
    pub header: Option<PathBuf>,
    pub rust: Option<PathBuf>,
}

/// Write the three outputs into `dir` under their standard names; returns the paths.
pub fn write_outputs(rendered: &Rendered, dir: &Path) -> Result<Vec<PathBuf>> {
    if dir.exists() && !dir.is_dir() {
        return Err(crate::error::GenerateError::Io {
            path: dir.into(),
            source: std::io::Error::other("is a file, not a directory: --out names the directory for the tables"),
        });
    }
    let mut written = Vec::new();
    for (name, text) in rendered.files() {
        let path = dir.join(name);
        vnni_corpus::write_bytes(&path, text.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

/// Install the validated outputs at the targets asked for; returns the paths written.
/// Only what was validated is installed: the Rust module is skipped (the caller says so) when
/// validation could not compile it here.
pub fn install(validated: &Validated<'_>, targets: &InstallTargets) -> Result<Vec<PathBuf>> {
    let r = validated.rendered();
    let rust_checked = validated.report().rust_not_compiled.is_none();
    let rust = if rust_checked { &targets.rust } else { &None };
    let mut written = Vec::new();
    for (target, text) in [(&targets.header, &r.header), (rust, &r.rust), (&targets.inc, &r.inc)] {
        if let Some(path) = target {
            vnni_corpus::write_bytes(path, text.as_bytes())?;
            written.push(path.clone());
        }
    }
    Ok(written)
}
