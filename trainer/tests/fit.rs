//! `vnni-dispatch fit` end to end: two separate processes fit the same sealed synthetic
//! corpus and must write byte-identical policies; the summary, report and ledger are there.

use std::path::Path;
use std::process::Command;

use vnni_learner::synthetic::{write, Spec};

fn run_fit(corpus: &Path, out: &Path, report: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"))
        .args(["fit", "--corpus"])
        .arg(corpus)
        .arg("--out")
        .arg(out)
        .arg("--report")
        .arg(report)
        .arg("--ledger")
        .arg(out.parent().unwrap().join("sealed-ledger.json"))
        // Synthetic noise puts a few cells' confidence bounds near 5%: a looser UCB gate (a flag
        // the policy records) keeps this test about determinism.
        .args(["--ucb-max", "0.08"])
        .output()
        .unwrap()
}

#[test]
fn two_processes_write_the_same_policy_bytes() {
    let root = std::env::temp_dir().join(format!("vnni-cli-fit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let corpus = root.join("corpus");
    let spec = Spec::cpu(11);
    write(&corpus, &spec).unwrap();
    let mut policies = Vec::new();
    for run in ["a", "b"] {
        let out = root.join(run).join("policy.json");
        let o = run_fit(&corpus, &out, &root.join(run).join("report"));
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            stdout.contains("passing") && stdout.contains("worst held-out p95") && stdout.contains("policy.json"),
            "{stdout}"
        );
        assert!(root.join(run).join("sealed-ledger.json").is_file());
        assert!(root.join(run).join("report").join("report.md").is_file());
        let bytes = std::fs::read(&out).unwrap();
        vnni_policy_check(&bytes);
        policies.push(bytes);
    }
    assert!(policies[0] == policies[1], "two processes fitted different policies");
}

/// The written bytes parse as a policy of this registry.
fn vnni_policy_check(bytes: &[u8]) {
    let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    assert_eq!(v["schema"], "vnni-policy-v2");
    assert_eq!(v["gates"]["ucb_max"], 0.08);
    assert!(v["gates"]["passed"].as_bool().unwrap());
    assert!(v["gates"]["sealed"]["passed"].as_bool().unwrap());
}

#[test]
fn an_unsealed_corpus_is_refused() {
    let dir = std::env::temp_dir().join(format!("vnni-cli-fit-unsealed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let o = run_fit(&dir, &dir.join("policy.json"), &dir.join("report"));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("corpus.manifest.json") && err.contains("not sealed"), "{err}");
    assert!(!dir.join("policy.json").exists());
}

#[test]
fn a_new_out_cannot_reset_a_failed_sealed_certification() {
    let root = std::env::temp_dir().join(format!("vnni-cli-fit-ledger-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let corpus = root.join("corpus");
    write(&corpus, &Spec::cpu(12)).unwrap();
    let ledger = root.join("ledger.json");
    let fit = |out: &str, p95: &str| {
        Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"))
            .args(["fit", "--corpus"])
            .arg(&corpus)
            .arg("--out")
            .arg(root.join(out).join("policy.json"))
            .arg("--ledger")
            .arg(&ledger)
            .args(["--p95-max", p95])
            .output()
            .unwrap()
    };
    // A threshold no policy meets: the sealed certification fails and is recorded.
    let first = fit("a", "0.0001");
    assert!(!first.status.success());
    assert!(String::from_utf8_lossy(&first.stdout).contains("FAILED"), "{}", String::from_utf8_lossy(&first.stdout));
    assert!(ledger.is_file());
    // Another --out, even with an easy threshold: refused, the corpus is spent.
    let second = fit("b", "0.5");
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success() && err.contains("never refit"), "{err}");
    assert!(!root.join("b/policy.json").exists());
    let _ = std::fs::remove_dir_all(&root);
}
