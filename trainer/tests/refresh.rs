//! The one command end to end on the CPU: `refresh --backend cpu --profile family-smoke` (the
//! README's main job) collects, certifies, fits, generates and validates, reports, and leaves
//! every piece in its output directory; a rerun reuses the published cells.

mod common;

use std::path::Path;
use std::time::Instant;

use common::vnni;
use vnni_corpus::read::read_certificates;

/// `refresh --backend cpu --profile family-smoke` of the inventory `inv` into `out`.
fn cpu_family_smoke<'a>(inv: &'a str, out: &'a str) -> [&'a str; 9] {
    ["refresh", "--backend", "cpu", "--profile", "family-smoke", "--inventory", inv, "--out", out]
}

#[test]
fn refresh_on_the_cpu_runs_end_to_end_and_leaves_every_output() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let inv = root.join("corpus/inventory");
    let out = std::env::temp_dir().join(format!("vnni-refresh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let args = cpu_family_smoke(inv.to_str().unwrap(), out.to_str().unwrap());
    let started = Instant::now();
    let (ok, stdout, stderr) = vnni(&args);
    let seconds = started.elapsed().as_secs_f64();
    assert!(ok, "{stdout}\n{stderr}");
    eprintln!("refresh family-smoke on the CPU: {seconds:.1} s");
    assert!(stdout.lines().any(|l| l.starts_with("verdict     PROXY PASS")), "no proxy pass verdict:\n{stdout}");
    for key in [
        "backend",
        "domains",
        "worst p95",
        "staged",
        "launch      plain",
        "invariance",
        "matrix",
        "corpus",
        "policy",
        "tables",
        "report",
        "verdict",
    ] {
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
    let staged = stdout.lines().find(|l| l.starts_with("staged")).unwrap();
    assert!(staged.contains("batched rows timed at the frozen M = 1 picks"), "{staged}");
    staged_outputs_agree(&out);
    // The pair loop ran: the cells the development fit got wrong were timed again, and the
    // frozen M = 1 policy applied exactly those samples (their digest in its provenance).
    let listed = vnni_corpus::read::read_pair_requests(&out.join("m1/pairs/remeasure.csv")).unwrap();
    let frozen: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("m1/policy.json")).unwrap()).unwrap();
    let samples = out.join("m1/pairs/pairs.samples.csv");
    if listed.is_empty() {
        assert!(!samples.exists() && frozen["provenance"]["pairs"].is_null());
    } else {
        let sha = vnni_kernels::digest::sha256_hex(&std::fs::read(&samples).unwrap());
        assert_eq!(frozen["provenance"]["pairs"]["sha256"], serde_json::json!(sha));
        assert_eq!(frozen["provenance"]["pairs"]["cells"], serde_json::json!(listed.len()));
        let fit_line = stdout.lines().find(|l| l.starts_with("fit M = 1")).unwrap();
        assert!(fit_line.contains(&format!("fitted with {} pairs timed again", listed.len())), "{fit_line}");
    }
    // Each piece is reusable on its own.
    let (ok, o, e) =
        vnni(&["verify", "--corpus", out.join("corpus").to_str().unwrap(), "--inventory", inv.to_str().unwrap()]);
    assert!(ok, "{o}{e}");

    // A rerun measures nothing again.
    let (ok, stdout, stderr) = vnni(&args);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("0 measured, 60 already published") || stdout.contains("0 measured, 60 already published"),
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

/// The staged refresh's pieces: the batched rows were timed at the frozen M = 1 policy's picks,
/// the decode rows are the M = 1 stage's (byte for byte), the final policy carries the frozen
/// M = 1 part; a fit without (or with another) frozen policy and an install of a policy whose
/// M = 1 part was edited afterwards are refused.
fn staged_outputs_agree(out: &Path) {
    use vnni_policy::{Node, Policy};
    let read_policy = |p: &Path| Policy::from_bytes(&std::fs::read(p).unwrap()).unwrap();
    let frozen = read_policy(&out.join("m1/policy.json"));
    let policy = read_policy(&out.join("policy.json"));
    let stage = policy.provenance.frozen_m1.as_ref().expect("a staged policy records its frozen stage");
    assert_eq!(stage.m1_digest, frozen.m1_digest());
    assert_eq!(policy.m1_digest(), frozen.m1_digest());
    for p in [
        "decode_m1.development.csv",
        "decode_m1.sealed.csv",
        "decode_m1.development.timing.csv.zst",
        "decode_m1.sealed.timing.csv.zst",
    ] {
        assert_eq!(
            std::fs::read(out.join("corpus").join(p)).unwrap(),
            std::fs::read(out.join("m1/corpus").join(p)).unwrap(),
            "{p}"
        );
    }
    let rows = vnni_corpus::collection::read_corpus_rows(&out.join("corpus")).unwrap();
    let batched: Vec<_> = rows.iter().filter(|r| r.m > 1).collect();
    assert!(!batched.is_empty());
    for r in batched {
        let cb = r.codebook.unwrap();
        let pick = frozen.select(cb.name(), r.mode.name(), 1, r.n as u64, r.k as u64).unwrap();
        assert_eq!(
            (r.m1_candidate.as_ref().unwrap().as_str(), r.bpp as u64),
            (pick.candidate.id.as_str(), pick.bpp),
            "{} {}x{} M={}",
            cb.name(),
            r.n,
            r.k,
            r.m
        );
    }

    // The batched stage refuses a frozen policy of another device size, and a corpus that is
    // not the one the frozen policy was fitted on, before measuring anything.
    let inv = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("corpus/inventory");
    let batched = |threads: u64, m1_corpus: &Path| {
        let (threads, m1_policy) = (threads.to_string(), out.join("m1/policy.json"));
        let stage = ["--threads", &threads, "--m1-policy", m1_policy.to_str().unwrap()];
        common::smoke_sweep_with(
            &out.join("scratch-sweep"),
            &[&stage[..], &["--m1-corpus", m1_corpus.to_str().unwrap()]].concat(),
        )
    };
    let (ok, _, err) = batched(frozen.units + 1, &out.join("m1/corpus"));
    assert!(!ok && err.contains(&format!("fitted for {} units", frozen.units)), "{err}");
    let (ok, _, err) = batched(frozen.units, &out.join("corpus"));
    assert!(!ok && err.contains("but the frozen M = 1 policy was fitted on corpus"), "{err}");
    assert!(!out.join("scratch-sweep/plan.json").exists());

    // The staged corpus is fitted with its frozen policy only.
    let scratch = out.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let fit = |frozen: Option<&Path>| {
        let mut args = vec![
            "fit".to_string(),
            "--corpus".into(),
            out.join("corpus").display().to_string(),
            "--out".into(),
            scratch.join("p.json").display().to_string(),
            "--ledger".into(),
            scratch.join("ledger.json").display().to_string(),
        ];
        if let Some(f) = frozen {
            args.extend(["--frozen-m1".into(), f.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        vnni(&args)
    };
    let (ok, _, err) = fit(None);
    assert!(!ok && err.contains("batched stage of a staged refresh"), "{err}");
    // Another M = 1 part (one decode tree under a new split, with the same choices on both
    // sides: other bytes, and the digest covers every byte selection reads) is not the frozen one.
    let edit = |mut p: Policy, path: &Path| {
        let d = p.domains.iter_mut().find(|d| d.m_bucket == 0).unwrap();
        let tree = d.tree.clone();
        d.tree = Node::Split {
            feature: vnni_policy::Feature::N,
            le: 1,
            left: Some(Box::new(tree.clone())),
            right: Some(Box::new(tree)),
        };
        std::fs::write(path, p.to_bytes()).unwrap();
    };
    let other = scratch.join("other-m1.json");
    edit(frozen.clone(), &other);
    let (ok, _, err) = fit(Some(&other));
    assert!(!ok && err.contains("M = 1 digest"), "{err}");
    let (ok, o, err) = fit(Some(&out.join("m1/policy.json")));
    assert!(ok || err.contains("gates"), "{o}{err}");
    assert_eq!(std::fs::read(scratch.join("p.json")).unwrap(), std::fs::read(out.join("policy.json")).unwrap());

    // Batched rows bound to picks the frozen policy does not make (a plan edited and resealed)
    // are refused, naming the pick.
    let tampered = scratch.join("tampered");
    copy_dir(&out.join("corpus"), &tampered);
    let mut plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tampered.join("plan.json")).unwrap()).unwrap();
    let bpp = plan["frozen_m1"]["picks"][0]["bpp"].as_u64().unwrap();
    plan["frozen_m1"]["picks"][0]["bpp"] = serde_json::json!(bpp + 1);
    std::fs::write(tampered.join("plan.json"), serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
    std::fs::remove_file(tampered.join("corpus.manifest.json")).unwrap();
    let (ok, o, e) = vnni(&["seal", tampered.to_str().unwrap(), "--inventory", inv.to_str().unwrap()]);
    assert!(ok, "{o}{e}");
    let mut args: Vec<String> =
        ["fit", "--corpus", tampered.to_str().unwrap(), "--frozen-m1"].map(String::from).to_vec();
    args.push(out.join("m1/policy.json").display().to_string());
    args.extend(["--out".into(), scratch.join("t.json").display().to_string()]);
    args.extend(["--ledger".into(), scratch.join("ledger.json").display().to_string()]);
    let (ok, _, err) = vnni(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        !ok && err.contains("were timed at the frozen pick") && err.contains(&format!("(bpp {})", bpp + 1)),
        "{err}"
    );

    // The M = 1 stage's own policy never timed its batched buckets: never installed.
    let target = scratch.join("installed/vnni_dispatch.inc");
    let (ok, _, err) = vnni(&[
        "generate",
        "--policy",
        out.join("m1/policy.json").to_str().unwrap(),
        "--out",
        scratch.join("m1-tables").to_str().unwrap(),
        "--install",
        target.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("fitted on the M = 1 stage of a staged refresh"), "{err}");
    assert!(!target.exists());

    // An install of a staged policy whose M = 1 part changed after the staged fit is refused.
    let edited = scratch.join("edited.json");
    edit(policy, &edited);
    let target = scratch.join("installed/vnni_dispatch.inc");
    let (ok, _, err) = vnni(&[
        "generate",
        "--policy",
        edited.to_str().unwrap(),
        "--out",
        scratch.join("edited-tables").to_str().unwrap(),
        "--install",
        target.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("M = 1 part changed"), "{err}");
    assert!(!target.exists());

    // `verify` reproduces a committed staged table set from its two corpora, and refuses it
    // without the M = 1 corpus its frozen part came from.
    let (corpora, tables) = (scratch.join("corpora"), scratch.join("tables/staged"));
    for (from, to) in [("m1/corpus", "m1"), ("corpus", "staged")] {
        copy_dir(&out.join(from), &corpora.join(to));
    }
    copy_dir(&out.join("tables"), &tables);
    std::fs::copy(out.join("policy.json"), tables.join("policy.json")).unwrap();
    let verify = || {
        vnni(&[
            "verify",
            "--root",
            corpora.to_str().unwrap(),
            "--tables",
            scratch.join("tables").to_str().unwrap(),
            "--inventory",
            inv.to_str().unwrap(),
        ])
    };
    // The frozen M = 1 fit applied the pairs refresh timed again: without them beside the
    // tables the frozen part cannot be refitted, and `verify` says which file is missing.
    let m1_pairs = out.join("m1/pairs/pairs.samples.csv");
    if m1_pairs.is_file() {
        let (ok, o, e) = verify();
        assert!(!ok && format!("{o}{e}").contains("m1-pairs.samples.csv is missing"), "{o}{e}");
        std::fs::copy(&m1_pairs, tables.join("m1-pairs.samples.csv")).unwrap();
    }
    let (ok, o, e) = verify();
    assert!(ok && o.contains("its frozen M = 1 part refit from corpus"), "{o}{e}");

    // A table fitted with pairs timed again: `verify` refits it from the pair samples beside
    // it, and refuses it when they are missing.
    let pairs_tables = scratch.join("tables/m1-pairs");
    std::fs::create_dir_all(&pairs_tables).unwrap();
    let pairs = pairs_tables.join("pairs.samples.csv");
    write_pair(&out.join("m1/corpus"), &pairs);
    let policy = pairs_tables.join("policy.json");
    let (_, o, e) = vnni(&[
        "fit",
        "--corpus",
        corpora.join("m1").to_str().unwrap(),
        "--out",
        policy.to_str().unwrap(),
        "--ledger",
        scratch.join("scratch-ledger.json").to_str().unwrap(),
        "--pairs",
        pairs.to_str().unwrap(),
    ]);
    assert!(std::fs::read_to_string(&policy).unwrap().contains("\"pairs\""), "{o}{e}");
    let (ok, o, e) = vnni(&["generate", "--policy", policy.to_str().unwrap(), "--out", pairs_tables.to_str().unwrap()]);
    assert!(ok, "{o}{e}");
    let (ok, o, e) = verify();
    assert!(ok && o.contains("m1-pairs (refit and regenerated byte for byte"), "{o}{e}");
    std::fs::remove_file(&pairs).unwrap();
    let (ok, o, e) = verify();
    assert!(!ok && format!("{o}{e}").contains("pairs.samples.csv is missing"), "{o}{e}");
    std::fs::remove_dir_all(&pairs_tables).unwrap();

    std::fs::remove_dir_all(corpora.join("m1")).unwrap();
    let (ok, o, e) = verify();
    assert!(!ok && o.contains("its frozen M = 1 stage names corpus"), "{o}{e}");
    let _ = std::fs::remove_dir_all(&scratch);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Pair samples for the first development M = 1 cell of the corpus in `corpus`: its first two
/// eligible candidates, the second 10% behind the first.
fn write_pair(corpus: &Path, path: &Path) {
    let rows = vnni_corpus::read::read_timing(&corpus.join("decode_m1.development.csv")).unwrap();
    let first = rows.iter().find(|r| r.eligible && r.m == 1).unwrap();
    let pair: Vec<_> = rows
        .iter()
        .filter(|r| {
            r.eligible
                && (r.source_format, r.mode, r.m, r.n, r.k) == (first.source_format, first.mode, 1, first.n, first.k)
        })
        .take(2)
        .collect();
    assert_eq!(pair.len(), 2);
    let mut samples = Vec::new();
    for (order, (r, us)) in pair.iter().zip([10.0, 11.0]).enumerate() {
        for round in 0..12 {
            samples.push(vnni_corpus::SampleRow {
                mode: r.mode,
                source_format: r.source_format,
                codebook: r.codebook,
                m: 1,
                n: r.n,
                k: r.k,
                candidate: r.candidate.clone(),
                pass: 0,
                round,
                order,
                warmup: false,
                latency_us_hex: vnni_corpus::schema::hex_f64(us),
            });
        }
    }
    vnni_corpus::write_csv(path, &samples).unwrap();
}

/// `refresh --prune-with` passes the policy to its M = 1 sweep, which refuses it on the CPU
/// (no cost models there) before anything is planned.
#[test]
fn a_pruned_refresh_is_refused_on_the_cpu_by_its_m1_sweep() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let out = std::env::temp_dir().join(format!("vnni-refresh-prune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let policy = root.join("lfs-data/tables/cuda/sm_90/h200-session/policy.json");
    let inv = root.join("corpus/inventory");
    let base = cpu_family_smoke(inv.to_str().unwrap(), out.to_str().unwrap());
    let (ok, stdout, stderr) = vnni(&[&base[..], &["--prune-with", policy.to_str().unwrap()]].concat());
    assert!(!ok && stderr.contains("only CUDA policies carry cost models"), "{stdout}\n{stderr}");
    assert!(!out.join("m1/plan.json").exists(), "nothing planned");
    let _ = std::fs::remove_dir_all(&out);
}
