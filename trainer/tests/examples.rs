//! The table-consumer examples (examples/cpp through CMake, examples/rust through rustc) build
//! against tables generated from a committed policy, answer examples/queries.txt with the same
//! lines, and refuse the malformed queries with the status a caller must handle. Needs CMake
//! (scripts/test.sh installs it into .venv), a C++ compiler and rustc; under CI their absence fails.

use std::path::PathBuf;
use std::process::Command;

use vnni_tests::{missing_tool, workspace_root};

fn cmake() -> Option<PathBuf> {
    let venv = workspace_root().join(".venv/bin/cmake");
    let candidates = std::env::var_os("VNNI_CMAKE").map(PathBuf::from).into_iter().chain([venv, "cmake".into()]);
    candidates.into_iter().find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
}

#[test]
fn the_cpp_and_rust_examples_build_and_print_the_same_picks() {
    let Some(cmake) = cmake() else {
        return missing_tool("cmake", "run scripts/test.sh (it installs cmake into .venv) or install cmake");
    };
    let root = workspace_root();
    let work = std::env::temp_dir().join(format!("vnni-examples-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let o = Command::new("bash")
        .arg(root.join("scripts/examples.sh"))
        .arg(root.join("lfs-data/tables/cuda/sm_90/h200-generic/policy.json"))
        .env("BIN", env!("CARGO_BIN_EXE_vnni-dispatch"))
        .env("CMAKE", &cmake)
        .env("WORK", &work)
        .current_dir(&root)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "scripts/examples.sh failed:\n{stdout}\n{stderr}");
    let queries = std::fs::read_to_string(root.join("examples/queries.txt")).unwrap();
    let asked = queries.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).count();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), asked, "one answer per query:\n{stdout}");
    let picked = lines.iter().filter(|l| l.contains(" bpp=") && l.contains(" partitions=")).count();
    assert_eq!(picked, 5, "{stdout}");
    for (query, reason) in [("K=4100", "bad shape"), ("q9 graph", "unknown codebook"), ("s4 nosuch", "unknown mode")] {
        let line = lines.iter().find(|l| l.contains(query)).unwrap_or_else(|| panic!("no answer for {query}"));
        assert!(line.contains(&format!("refused: {reason}")), "{line}");
    }
    let _ = std::fs::remove_dir_all(&work);
}
