//! Provenance of a corpus: the git commit and dirty flag of the checkout (through libgit2),
//! the toolchain, and (when a GPU was used) device and driver.

use std::path::Path;

/// (commit, dirty) of the repository containing `path`; ("unknown", true) outside one.
pub fn git_state(path: &Path) -> (String, bool) {
    let Ok(repo) = git2::Repository::discover(path) else { return ("unknown".into(), true) };
    let commit = repo
        .head()
        .ok()
        .and_then(|h| h.peel_to_commit().ok())
        .map_or_else(|| "unborn".to_string(), |c| c.id().to_string());
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true).include_ignored(false);
    let dirty = repo.statuses(Some(&mut opts)).map_or(true, |s| !s.is_empty());
    (commit, dirty)
}

/// The Rust toolchain the binary was built with (set at compile time by build scripts when
/// available), else the crate version.
pub fn toolchain() -> String {
    format!("vnni-dispatch {}", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_this_checkout_or_says_unknown() {
        let (commit, _dirty) = super::git_state(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
        assert!(commit == "unknown" || commit == "unborn" || commit.len() == 40, "{commit}");
        let (c, d) = super::git_state(&std::env::temp_dir().join("surely-not-a-repo-vnni"));
        assert!(c == "unknown" && d || c.len() == 40);
    }
}
