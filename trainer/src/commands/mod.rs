//! One module per subcommand: typed arguments (clap, and `ToArgv` back to a command line)
//! and a `run` over the libraries.

pub mod bench;
pub mod candidates;
pub mod certify;
pub mod explain;
pub mod fit;
pub mod formats;
pub mod generate;
pub mod inventory;
pub mod merge;
pub mod preflight;
pub mod profile;
pub mod refresh;
pub mod remeasure;
pub mod report;
pub mod seal;
pub mod shell;
pub mod sweep;
pub mod verify;

/// The build identity a collection records: `vnni-dispatch 0.1.0 (rustc ...)`.
pub fn version() -> String {
    format!("vnni-dispatch {} ({})", env!("CARGO_PKG_VERSION"), env!("VNNI_RUSTC_VERSION"))
}

/// Read a policy file and check its totality; errors name the file and the fix.
pub fn load_policy(path: &std::path::Path) -> anyhow::Result<vnni_policy::Policy> {
    Ok(load_policy_bytes(path)?.0)
}

/// The same, with the bytes it was parsed from (for a digest of exactly what was read).
pub fn load_policy_bytes(path: &std::path::Path) -> anyhow::Result<(vnni_policy::Policy, Vec<u8>)> {
    use anyhow::Context;
    let bytes = std::fs::read(path)
        .with_context(|| format!("{}: cannot read the policy (write one with `vnni-dispatch fit`)", path.display()))?;
    let policy = vnni_policy::Policy::from_bytes(&bytes).with_context(|| {
        format!("{}: not a policy IR ({}); regenerate it with `vnni-dispatch fit`", path.display(), vnni_policy::SCHEMA)
    })?;
    policy.check().with_context(|| format!("{}: the policy fails its totality check; refit it", path.display()))?;
    Ok((policy, bytes))
}
