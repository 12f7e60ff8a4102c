//! `vnni-dispatch generate`: byte-stable output across processes, validation before an
//! atomic install, and refusal of policies that fail their checks.

mod common;

use std::path::{Path, PathBuf};

use common::{vnni, vnni_env};
use vnni_kernels::registry::Backend;
use vnni_policy::example::example_policy;
use vnni_policy::Policy;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vnni-cli-generate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_policy(dir: &Path, policy: &Policy) -> String {
    let path = dir.join("policy.json");
    std::fs::write(&path, policy.to_bytes()).unwrap();
    path.to_str().unwrap().to_string()
}

/// The example policy with its gates passed (only such a policy may be installed).
fn passing(mut p: Policy) -> Policy {
    p.gates.domains_with_data = p.domains.len() as u64;
    p.gates.domains_passing = p.domains.len() as u64;
    p.gates.passed = true;
    p
}

/// The example policy as if fitted on the committed family-smoke profile (whose plan the
/// batch-invariance matrix of an install is read from).
fn on_family_smoke(mut p: Policy) -> Policy {
    let plan =
        vnni_corpus::inventory::Inventory::load(Path::new(&inventory())).unwrap().resolve("family-smoke").unwrap();
    p.provenance.profile = "family-smoke".into();
    p.provenance.inventory_digest = plan.digest();
    p
}

/// `certify --policy` on the CPU: the policy's whole matrix, into `dir/certificates.jsonl`.
fn certify_policy(dir: &Path, policy: &str) -> String {
    let certs = dir.join("certificates.jsonl");
    let (ok, stdout, err) = vnni(&[
        "certify",
        "--backend",
        "cpu",
        "--policy",
        policy,
        "--inventory",
        &inventory(),
        "--out",
        certs.to_str().unwrap(),
    ]);
    assert!(ok && stdout.contains("0 failed"), "{stdout}{err}");
    certs.to_str().unwrap().to_string()
}

fn inventory() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/inventory").to_str().unwrap().to_string()
}

const FILES: [&str; 3] = [vnni_generator::INC_FILE, vnni_generator::HEADER_FILE, vnni_generator::RUST_FILE];

#[test]
fn two_processes_write_identical_bytes() {
    let dir = scratch("stable");
    let policy = write_policy(&dir, &example_policy(Backend::Cuda));
    for out in ["a", "b"] {
        let out = dir.join(out);
        let (ok, stdout, err) = vnni(&["generate", "--policy", &policy, "--out", out.to_str().unwrap()]);
        assert!(ok, "{err}");
        assert!(stdout.contains("wrote"), "{stdout}");
    }
    let rendered = vnni_generator::render(&example_policy(Backend::Cuda)).unwrap();
    for (name, text) in rendered.files() {
        let a = std::fs::read(dir.join("a").join(name)).unwrap();
        let b = std::fs::read(dir.join("b").join(name)).unwrap();
        assert_eq!(a, b, "{name} differs between two runs");
        assert_eq!(a, text.as_bytes(), "{name} differs from the library's rendering");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Under CI a missing compiler fails the test; elsewhere it is reported as skipped.
fn compiler_missing(stderr: &str) -> bool {
    if stderr.contains(" is missing (") {
        vnni_tests::missing_tool("a C++ compiler or rustc", stderr.trim());
        return true;
    }
    false
}

#[test]
fn install_validates_then_replaces_every_target_atomically() {
    let dir = scratch("install");
    let policy = write_policy(&dir, &passing(on_family_smoke(example_policy(Backend::Cpu))));
    let certs = certify_policy(&dir, &policy);
    let target = dir.join("installed");
    std::fs::create_dir_all(&target).unwrap();
    for name in FILES {
        std::fs::write(target.join(name), "stale\n").unwrap();
    }
    let t = |name: &str| target.join(name).to_str().unwrap().to_string();
    let out = dir.join("out");
    let (ok, stdout, err) = vnni(&[
        "generate",
        "--policy",
        &policy,
        "--out",
        out.to_str().unwrap(),
        "--inventory",
        &inventory(),
        "--install",
        &t(FILES[0]),
        "--install-header",
        &t(FILES[1]),
        "--install-rust",
        &t(FILES[2]),
        "--certificates",
        &certs,
    ]);
    if !ok && compiler_missing(&err) {
        return;
    }
    assert!(ok, "{err}");
    assert!(stdout.contains("validated") && stdout.contains("1000000 random"), "{stdout}");
    assert!(stdout.contains("certified: every planned grouped point of profile family-smoke"), "{stdout}");
    assert_eq!(stdout.matches("installed ").count(), 3, "{stdout}");
    for name in FILES {
        assert_eq!(std::fs::read(target.join(name)).unwrap(), std::fs::read(out.join(name)).unwrap(), "{name}");
    }
    // Nothing but the three targets: no temporary file is left behind.
    let mut left: Vec<String> =
        std::fs::read_dir(&target).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    let mut want: Vec<String> = FILES.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(left, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn invalid_policies_are_refused_and_the_installed_file_is_untouched() {
    let dir = scratch("refuse");
    let target = dir.join("vnni_dispatch.inc");
    std::fs::write(&target, "previous tables\n").unwrap();
    let out = dir.join("out");
    let run = |policy: &Policy, extra: &[&str]| {
        let path = write_policy(&dir, policy);
        let mut args =
            vec!["generate", "--policy", &path, "--out", out.to_str().unwrap(), "--install", target.to_str().unwrap()];
        args.extend_from_slice(extra);
        let inv = inventory();
        args.extend(["--inventory", &inv]);
        vnni(&args)
    };

    // A deleted domain: not total.
    let mut broken = example_policy(Backend::Cuda);
    broken.domains.remove(2);
    let (ok, _, err) = run(&broken, &[]);
    assert!(!ok);
    assert!(err.contains("policy.json") && err.contains("totality") && err.contains("is missing"), "{err}");

    // Total and valid, but it failed its gates: never installed.
    let (ok, _, err) = run(&example_policy(Backend::Cuda), &["--random", "1000000"]);
    assert!(!ok && err.contains("refusing to install") && err.contains("failed its gates"), "{err}");
    let mut sealed_failed = passing(example_policy(Backend::Cuda));
    sealed_failed.gates.sealed = Some(vnni_policy::SealedCertification {
        rows: 10,
        p95_regret: 0.2,
        geomean_regret: 0.1,
        passed: false,
        surfaces: Default::default(),
        decode_sources: Default::default(),
    });
    let (ok, _, err) = run(&sealed_failed, &["--random", "1000000"]);
    assert!(!ok && err.contains("sealed certification failed"), "{err}");

    // Total, but its candidate differs from this registry's.
    let mut foreign = passing(example_policy(Backend::Cuda));
    foreign.candidates[0].tile += 1;
    let (ok, _, err) = run(&foreign, &["--random", "1000000"]);
    if ok || !compiler_missing(&err) {
        assert!(!ok);
        assert!(err.contains("failed validation") && err.contains("registry"), "{err}");
    }

    // Too few random queries for an install.
    let (ok, _, err) = run(&passing(example_policy(Backend::Cuda)), &["--random", "10"]);
    assert!(!ok);
    assert!(err.contains("--random 10"), "{err}");

    // A file that is not a policy.
    std::fs::write(dir.join("policy.json"), "{}").unwrap();
    let (ok, _, err) =
        vnni(&["generate", "--policy", dir.join("policy.json").to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("policy.json") && err.contains("not a policy IR"), "{err}");

    assert_eq!(std::fs::read_to_string(&target).unwrap(), "previous tables\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_node_without_rustc_validates_the_cpp_tables_and_says_so() {
    let dir = scratch("no-rustc");
    let policy = write_policy(&dir, &example_policy(Backend::Cuda));
    let out = dir.join("out");
    let args = [
        "generate",
        "--policy",
        &policy,
        "--out",
        out.to_str().unwrap(),
        "--validate",
        "--random",
        "1000",
        "--inventory",
        &inventory(),
    ];
    let no_rustc = [("RUSTC", "/nonexistent/rustc")];
    let (ok, stdout, err) = vnni_env(&args, &no_rustc);
    if !ok && compiler_missing(&err) {
        return;
    }
    assert!(ok, "{err}");
    assert!(
        stdout.contains("validated") && stdout.contains("Rust module was NOT compiled") && stdout.contains("rustc"),
        "{stdout}"
    );
    // Installing there: the validated C++ tables and header, never the unchecked Rust module.
    let passing_policy = write_policy(&dir, &passing(on_family_smoke(example_policy(Backend::Cpu))));
    let certs = certify_policy(&dir, &passing_policy);
    let (inc, rs) = (dir.join("inst/t.inc"), dir.join("inst/t.rs"));
    let install = [
        "generate",
        "--policy",
        &passing_policy,
        "--out",
        out.to_str().unwrap(),
        "--inventory",
        &inventory(),
        "--install",
        inc.to_str().unwrap(),
        "--install-rust",
        rs.to_str().unwrap(),
        "--certificates",
        &certs,
    ];
    let (ok, stdout, err) = vnni_env(&install, &no_rustc);
    assert!(ok, "{err}");
    assert!(inc.is_file() && !rs.exists() && stdout.contains("not installed"), "{stdout}");
    // Asked for, the Rust check is required.
    let mut strict: Vec<&str> = args.to_vec();
    strict.push("--require-rust");
    let (ok, _, err) = vnni_env(&strict, &no_rustc);
    assert!(!ok && err.contains("/nonexistent/rustc is missing"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_install_needs_the_policy_matrix_certified() {
    let dir = scratch("matrix");
    let policy = write_policy(&dir, &passing(on_family_smoke(example_policy(Backend::Cpu))));
    let target = dir.join("vnni_dispatch.inc");
    std::fs::write(&target, "previous tables\n").unwrap();
    let out = dir.join("out");
    let inv = inventory();
    let install = |extra: &[&str]| {
        let mut args = vec![
            "generate",
            "--policy",
            &policy,
            "--out",
            out.to_str().unwrap(),
            "--install",
            target.to_str().unwrap(),
            "--inventory",
            &inv,
        ];
        args.extend_from_slice(extra);
        vnni(&args)
    };
    // No certificates at all.
    let (ok, _, err) = install(&[]);
    if !ok && compiler_missing(&err) {
        return;
    }
    assert!(
        !ok && err.contains("no certificates of that matrix") && err.contains("certify --backend cpu --policy"),
        "{err}"
    );
    // Certificates of the matrix minus one point: the refusal names a (format, N x K, M).
    let certs = certify_policy(&dir, &policy);
    let text = std::fs::read_to_string(&certs).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 10, "{} certificates", lines.len());
    let partial = dir.join("partial.jsonl");
    std::fs::write(&partial, lines[1..].join("\n") + "\n").unwrap();
    let (ok, _, err) = install(&["--certificates", partial.to_str().unwrap()]);
    assert!(!ok && err.contains("are not certified") && err.contains(" M="), "{err}");
    // A mismatch is not a certificate.
    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, text.replacen("\"mismatches\":0", "\"mismatches\":3", 1)).unwrap();
    let (ok, _, err) = install(&["--certificates", bad.to_str().unwrap()]);
    assert!(!ok && err.contains("differs from single-row decodes"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "previous tables\n");
    // The complete matrix installs.
    let (ok, stdout, err) = install(&["--certificates", &certs]);
    assert!(ok, "{err}");
    assert!(stdout.contains("installed "), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A CUDA install needs profiler evidence of its corpus; the refusal says how to make it, and
/// evidence of another corpus is refused too.
#[test]
fn a_cuda_install_needs_profiler_evidence() {
    let dir = scratch("evidence");
    let policy = write_policy(&dir, &passing(example_policy(Backend::Cuda)));
    let target = dir.join("vnni_dispatch.inc");
    let out = dir.join("out");
    let inv = inventory();
    let base = [
        "generate",
        "--policy",
        &policy,
        "--out",
        out.to_str().unwrap(),
        "--install",
        target.to_str().unwrap(),
        "--inventory",
        &inv,
    ];
    let (ok, _, err) = vnni(&base);
    if !ok && compiler_missing(&err) {
        return;
    }
    assert!(!ok && err.contains("refusing to install a CUDA policy without profiler evidence"), "{err}");
    assert!(err.contains("vnni-dispatch profile --corpus CORPUS --policy"), "{err}");
    assert!(!target.exists());
    // --evidence needs --corpus
    let mut args = base.to_vec();
    args.extend(["--evidence", "ev"]);
    let (ok, _, err) = vnni(&args);
    assert!(!ok && err.contains("--corpus"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
