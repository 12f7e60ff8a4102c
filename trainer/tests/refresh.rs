//! The one command end to end on the CPU: `refresh --backend cpu --profile family-smoke` (the
//! README's main job) collects, certifies, fits, generates and validates, reports, and leaves
//! every piece in its output directory; a rerun reuses the published cells.

mod common;

use std::path::Path;
use std::time::Instant;

use common::vnni;
use vnni_corpus::read::read_certificates;

#[test]
fn refresh_on_the_cpu_runs_end_to_end_and_leaves_every_output() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let inv = root.join("corpus/inventory");
    let out = std::env::temp_dir().join(format!("vnni-refresh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let args = [
        "refresh",
        "--backend",
        "cpu",
        "--profile",
        "family-smoke",
        "--inventory",
        inv.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let started = Instant::now();
    let (ok, stdout, stderr) = vnni(&args);
    let seconds = started.elapsed().as_secs_f64();
    assert!(ok, "{stdout}\n{stderr}");
    eprintln!("refresh family-smoke on the CPU: {seconds:.1} s");
    assert!(stdout.lines().any(|l| l.starts_with("verdict     PROXY PASS")), "no proxy pass verdict:\n{stdout}");
    for key in
        ["backend", "domains", "worst p95", "invariance", "matrix", "corpus", "policy", "tables", "report", "verdict"]
    {
        assert!(stdout.lines().any(|l| l.starts_with(key)), "summary lacks {key}:\n{stdout}");
    }
    // The policy's own matrix is certified completely (what an install would need).
    let matrix = stdout.lines().find(|l| l.starts_with("matrix")).unwrap();
    assert!(matrix.ends_with(", 0 planned points uncertified") && !matrix.contains(" 0 certificates"), "{matrix}");
    for file in [
        "corpus/corpus.manifest.json",
        "policy.json",
        "tables/vnni_dispatch.inc",
        "tables/vnni_dispatch.h",
        "tables/vnni_dispatch.rs",
        "report/report.md",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let certs = read_certificates(&out.join("certificates.jsonl")).unwrap();
    assert!(!certs.is_empty() && certs.iter().all(|c| c.mismatches == 0 && c.repeat_mismatches == 0));
    assert!(std::fs::read_dir(out.join("report")).unwrap().any(|e| e
        .unwrap()
        .path()
        .extension()
        .is_some_and(|x| x == "png")));
    // Each piece is reusable on its own.
    let (ok, o, e) =
        vnni(&["verify", "--corpus", out.join("corpus").to_str().unwrap(), "--inventory", inv.to_str().unwrap()]);
    assert!(ok, "{o}{e}");

    // A rerun measures nothing again.
    let (ok, stdout, stderr) = vnni(&args);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("0 measured, 30 already published") || stdout.contains("0 measured, 30 already published"),
        "{stdout}\n{stderr}"
    );

    // The smoke profile is a proxy: never installed.
    let mut install = args.to_vec();
    let target = out.join("installed/vnni_dispatch.inc");
    install.extend(["--install", target.to_str().unwrap()]);
    let (ok, _, err) = vnni(&install);
    assert!(!ok && err.contains("never installable"), "{err}");
    assert!(!target.exists());
    let _ = std::fs::remove_dir_all(&out);
}
