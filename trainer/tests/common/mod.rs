//! Helpers shared by the binary's integration tests.

use std::process::Command;

/// Run `vnni-dispatch args...`: (success, stdout, stderr).
pub fn vnni(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vnni-dispatch")).args(args).env("RUST_BACKTRACE", "0").output().unwrap();
    (out.status.success(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

/// `vnni` with extra environment variables.
#[allow(dead_code)]
pub fn vnni_env(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"));
    cmd.args(args).env("RUST_BACKTRACE", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (out.status.success(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

/// The repository's shape inventory.
#[allow(dead_code)]
pub fn repo_inventory() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/inventory")
}

/// A fresh, empty scratch directory for one test of this process.
#[allow(dead_code)]
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("vnni-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `sweep --backend cpu --profile family-smoke` into `out`: (success, stdout, stderr).
#[allow(dead_code)]
pub fn smoke_sweep(out: &std::path::Path) -> (bool, String, String) {
    smoke_sweep_with(out, &[])
}

/// The same with more arguments.
#[allow(dead_code)]
pub fn smoke_sweep_with(out: &std::path::Path, extra: &[&str]) -> (bool, String, String) {
    let inv = repo_inventory();
    let mut args = vec!["sweep", "--backend", "cpu", "--profile", "family-smoke", "--inventory", inv.to_str().unwrap()];
    args.extend(["--out", out.to_str().unwrap()]);
    args.extend(extra);
    vnni(&args)
}
