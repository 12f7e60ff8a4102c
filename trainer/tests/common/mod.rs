//! Helpers shared by the binary's integration tests.

use std::process::Command;

/// Run `vnni-dispatch args...`: (success, stdout, stderr).
pub fn vnni(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vnni-dispatch")).args(args).env("RUST_BACKTRACE", "0").output().unwrap();
    (out.status.success(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}
