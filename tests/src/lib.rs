//! Helpers shared by the cross-crate integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// True when running under CI: there, a missing test tool is a failure, never a skip.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Report a missing tool: panic under CI, otherwise say why the test did nothing.
pub fn missing_tool(what: &str, fix: &str) {
    if in_ci() {
        panic!("CI is set but {what} is missing: {fix}");
    }
    eprintln!("SKIPPED (not under CI): {what} is missing: {fix}");
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ sits in the workspace").to_path_buf()
}

/// A Python interpreter that can import `modules`: `$VNNI_PYTHON`, then the project's
/// `.venv` (made by scripts/test.sh), then `python3`. `None` (outside CI) when none can.
pub fn python_with(modules: &[&str]) -> Option<PathBuf> {
    let venv = workspace_root().join(".venv/bin/python");
    let candidates: Vec<PathBuf> = std::env::var_os("VNNI_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([venv, PathBuf::from("python3")])
        .collect();
    let import = format!("import {}", modules.join(", "));
    for py in candidates {
        let ok = Command::new(&py).args(["-c", &import]).output().is_ok_and(|o| o.status.success());
        if ok {
            return Some(py);
        }
    }
    missing_tool(
        &format!("a Python with {}", modules.join(" and ")),
        "run scripts/test.sh (it installs them into .venv)",
    );
    None
}

/// Run `python script args...`, panicking with its stderr on failure; returns stdout.
pub fn run_python(python: &Path, script: &Path, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut child = Command::new(python)
        .arg(script)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
    child.stdin.take().unwrap().write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{} {:?} failed:\n{}", script.display(), args, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}
