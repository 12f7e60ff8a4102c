//! The cell store end to end on the CPU backend: a sweep killed with SIGKILL at random
//! points resumes to every planned cell exactly once with the same plan bytes; four shards
//! merged equal one unsharded run; `--devices` workers share one work directory.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::vnni;
use vnni_corpus::collection::{read_corpus_rows, CellStore, CollectionPlan};

fn inventory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny-inventory")
}

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vnni-sweep-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn sweep_args(out: &Path) -> Vec<String> {
    let s = |x: &str| x.to_string();
    vec![
        s("sweep"),
        s("--backend"),
        s("cpu"),
        s("--profile"),
        s("tiny"),
        s("--inventory"),
        inventory().display().to_string(),
        s("--threads"),
        s("1"),
        s("--out"),
        out.display().to_string(),
    ]
}

fn sweep(out: &Path, extra: &[&str]) -> (bool, String, String) {
    let mut args = sweep_args(out);
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    vnni(&refs)
}

/// The corpus's row keys, each of which must appear once. (Not the bpp: grouped rows
/// inherit the fastest decode candidate's, which depends on timing.)
fn row_keys(corpus: &Path) -> BTreeSet<String> {
    let rows = read_corpus_rows(corpus).unwrap();
    let keys: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {:?} {}x{} m{} {}", r.mode, r.source_format, r.n, r.k, r.m, r.candidate))
        .collect();
    let set: BTreeSet<String> = keys.iter().cloned().collect();
    assert_eq!(set.len(), keys.len(), "a row appears twice in {}", corpus.display());
    set
}

/// Published cell stems in a work directory.
fn published(out: &Path) -> BTreeSet<String> {
    let Ok(rd) = std::fs::read_dir(out.join("cells")) else { return BTreeSet::new() };
    rd.filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".csv") && !n.ends_with(".timing.csv"))
        .map(|n| n.trim_end_matches(".csv").to_string())
        .collect()
}

fn planned(out: &Path) -> BTreeSet<String> {
    let plan = CollectionPlan::read(&CellStore::new(out).plan_path()).unwrap();
    plan.cells().iter().map(|c| c.stem()).collect()
}

/// A complete uninterrupted run: (work dir, seconds it took).
fn reference_run(tag: &str) -> (PathBuf, f64) {
    let out = tmp(tag);
    let t = Instant::now();
    let (ok, stdout, stderr) = sweep(&out, &[]);
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("corpus sealed"), "{stdout}");
    (out, t.elapsed().as_secs_f64())
}

#[test]
fn a_sweep_killed_at_random_points_resumes_to_every_cell_exactly_once() {
    let (reference, seconds) = reference_run("reference-kill");
    let work = tmp("killed");
    let args = sweep_args(&work);
    let total = planned(&reference).len();
    let (mut kills, mut mid_collection, mut attempts) = (0, 0, 0);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    while kills < 20 {
        attempts += 1;
        assert!(attempts < 400, "could not land 20 kills on a running sweep");
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let unit = (rng >> 11) as f64 / (1u64 << 53) as f64;
        let before = published(&work).len();
        let mut child = Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        if before < total {
            // While cells remain: wait until this run publishes one or two more (start-up
            // takes a machine-dependent while), then kill at a random moment up to 20 ms on:
            // inside a cell, between the files of one cell, or while it renames.
            let target = (before + 1 + (rng >> 7) as usize % 2).min(total);
            let started = Instant::now();
            while child.try_wait().unwrap().is_none()
                && published(&work).len() < target
                && started.elapsed().as_secs_f64() < 10.0 * seconds.max(1.0)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_secs_f64(unit * 0.02));
        } else {
            // Everything published: a random point of start-up, assembly or sealing.
            std::thread::sleep(Duration::from_secs_f64(unit * seconds));
        }
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            kills += 1;
            let n = published(&work).len();
            if n > 0 && n < total {
                mid_collection += 1;
            }
        }
        child.wait().unwrap();
    }
    eprintln!("{kills} SIGKILLs in {attempts} runs, {mid_collection} with the collection part done");
    assert!(mid_collection >= 3, "only {mid_collection} of {kills} kills landed mid-collection");
    let (ok, stdout, stderr) = sweep(&work, &[]);
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("corpus sealed") || stdout.contains("already sealed"), "{stdout}");
    assert_eq!(published(&work), planned(&work), "every planned cell, nothing else");
    assert_eq!(
        std::fs::read(work.join("plan.json")).unwrap(),
        std::fs::read(reference.join("plan.json")).unwrap(),
        "plan metadata is byte-identical"
    );
    assert_eq!(row_keys(&work.join("corpus")), row_keys(&reference.join("corpus")));
    let (ok, out, err) = vnni(&[
        "verify",
        "--corpus",
        work.join("corpus").to_str().unwrap(),
        "--inventory",
        inventory().to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    // A rerun of a finished sweep measures nothing.
    let (ok, stdout, _) = sweep(&work, &[]);
    assert!(ok && stdout.contains("0 measured, 12 already published"), "{stdout}");
}

/// The tiny profile times two passes: every candidate timed and not dropped has each round
/// of both passes in the sealed samples, and the plan says so.
#[test]
fn every_timed_candidate_has_both_passes() {
    let (work, _) = reference_run("passes");
    let plan = CollectionPlan::read(&work.join("plan.json")).unwrap();
    assert_eq!((plan.inventory.passes, plan.inventory.samples), (2, 2));
    let corpus = work.join("corpus");
    let rows = read_corpus_rows(&corpus).unwrap();
    let mut samples = Vec::new();
    for phase in vnni_corpus::collection::PHASES.iter().filter(|p| !p.starts_with("prefill")) {
        samples.extend(vnni_corpus::read::read_samples(&corpus.join(format!("{phase}.timing.csv.zst"))).unwrap());
    }
    let mut timed = 0;
    for r in rows.iter().filter(|r| r.eligible && !r.dropped) {
        let mut seen: Vec<(usize, usize)> = samples
            .iter()
            .filter(|s| {
                (s.source_format, s.m, s.n, s.k, &s.candidate) == (r.source_format, r.m, r.n, r.k, &r.candidate)
            })
            .map(|s| (s.pass, s.round))
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, [(0, 0), (0, 1), (1, 0), (1, 1)], "{} {}x{} M={}", r.candidate, r.n, r.k, r.m);
        assert_eq!(r.samples, 4, "the row's median is over both passes");
        timed += 1;
    }
    assert!(timed > 20, "{timed} rows checked");
    // Every cell recorded how long it took: the corpus report's throughput table counts them.
    let cells = vnni_corpus::read::read_cells(&corpus.join("cells.csv")).unwrap();
    assert!(cells.len() == 12 && cells.iter().all(|c| c.millis.is_some()), "{cells:?}");
    let report = work.join("report");
    let (ok, out, err) = vnni(&["report", "--corpus", corpus.to_str().unwrap(), "--out", report.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    let section = md.split("## Collection throughput").nth(1).expect("a throughput section");
    assert!(section.contains("2 protocol pass(es)") && section.contains("| all | 12 |"), "{section}");
    // the device time of the timing rounds, by surface: the tiny profile times decode and grouped rows
    let device = section.lines().find(|l| l.starts_with("| < 4 MiB | 12 |")).unwrap_or_else(|| panic!("{section}"));
    let secs: Vec<f64> = device.split('|').filter_map(|x| x.trim().parse().ok()).collect();
    assert!(secs.len() == 5 && secs[1] > 0.0 && secs[2] > 0.0 && secs[3] == 0.0, "{device}");
}

#[test]
fn four_shards_merged_equal_one_unsharded_run() {
    let (reference, _) = reference_run("reference-shards");
    let mut shards = Vec::new();
    for i in 0..4 {
        let dir = tmp(&format!("shard{i}"));
        let (ok, stdout, stderr) = if i == 2 {
            // The SLURM array variables stand in for --shard.
            let args = sweep_args(&dir);
            let out = Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"))
                .args(&args)
                .env("SLURM_ARRAY_TASK_ID", "12")
                .env("SLURM_ARRAY_TASK_MIN", "10")
                .env("SLURM_ARRAY_TASK_COUNT", "4")
                .output()
                .unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        } else {
            sweep(&dir, &["--shard", &format!("{i}/4")])
        };
        assert!(ok, "{stdout}{stderr}");
        assert!(stdout.contains("cells in this shard") && stdout.contains("still to collect"), "{stdout}");
        assert_eq!(published(&dir).len(), 3, "shard {i} holds its quarter");
        shards.push(dir);
    }
    // Inside a Slurm array, a --shard that disagrees with the array task is refused.
    let args = sweep_args(&tmp("disagreeing-shard"));
    let mut refs: Vec<&str> = args.iter().map(String::as_str).collect();
    refs.extend(["--shard", "1/4"]);
    let (ok, _, err) = common::vnni_env(&refs, &[("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_ARRAY_TASK_COUNT", "2")]);
    assert!(!ok && err.contains("--shard 1/4 disagrees with this Slurm array task (1/2"), "{err}");

    let merged = tmp("merged");
    let mut args = vec!["merge".to_string(), "--out".into(), merged.display().to_string()];
    args.extend(shards.iter().map(|d| d.display().to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, stdout, stderr) = vnni(&refs);
    assert!(ok && stdout.contains("corpus sealed"), "{stdout}{stderr}");
    assert_eq!(published(&merged), published(&reference));
    assert_eq!(row_keys(&merged.join("corpus")), row_keys(&reference.join("corpus")));
    assert_eq!(std::fs::read(merged.join("plan.json")).unwrap(), std::fs::read(reference.join("plan.json")).unwrap());

    // A shard of another collection is refused, naming the differing field.
    let other = tmp("other");
    std::fs::create_dir_all(&other).unwrap();
    let mut plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(shards[0].join("plan.json")).unwrap()).unwrap();
    plan["units"] = serde_json::json!(99);
    std::fs::write(other.join("plan.json"), serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
    let (ok, _, err) = vnni(&[
        "merge",
        "--out",
        tmp("bad-merge").to_str().unwrap(),
        shards[0].to_str().unwrap(),
        other.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("not a shard of the same collection") && err.contains("units"), "{err}");
}

#[test]
fn device_workers_share_one_work_directory() {
    let out = tmp("devices");
    let (ok, stdout, stderr) = sweep(&out, &["--devices", "0,1"]);
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("worker 0 (device 0)") && stdout.contains("worker 1 (device 1)"), "{stdout}");
    assert!(stdout.contains("corpus sealed"), "{stdout}");
    assert_eq!(published(&out), planned(&out));
    let cells = std::fs::read_to_string(out.join("corpus/cells.csv")).unwrap();
    assert_eq!(cells.lines().count(), 1 + 12, "{cells}");
    assert!(cells.lines().skip(1).all(|l| l.contains(",0,") || l.contains(",1,")), "{cells}");
    // A lock left by a dead process (a killed worker) is reclaimed on the next run.
    let again = tmp("stale-lock");
    std::fs::create_dir_all(again.join("locks")).unwrap();
    let host = vnni_corpus::collection::host();
    std::fs::write(again.join("locks/Q4_0-128x256.lock"), format!("{host} 999999999\n")).unwrap();
    let (ok, stdout, stderr) = sweep(&again, &[]);
    assert!(ok && stdout.contains("12 measured"), "{stdout}{stderr}");
}

#[test]
fn another_plan_in_the_same_directory_is_refused() {
    let out = tmp("replan");
    let (ok, _, err) = sweep(&out, &["--shard", "0/4"]);
    assert!(ok, "{err}");
    let (ok, _, err) = common::smoke_sweep(&out);
    assert!(!ok && err.contains("holds another collection plan"), "{err}");
}

#[test]
fn a_plan_with_a_prefill_bucket_binds_the_prefill_registry_and_seals_prefill_phases() {
    let out = tmp("prefill");
    let mut args = sweep_args(&out);
    let at = args.iter().position(|a| a == "tiny").unwrap();
    args[at] = "tiny-prefill".into();
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, stdout, stderr) = vnni(&refs);
    assert!(ok && stdout.contains("corpus sealed"), "{stdout}{stderr}");
    let corpus = out.join("corpus");
    let plan = CollectionPlan::read(&corpus.join("plan.json")).unwrap();
    use vnni_kernels::registry::{registry_digest, registry_digest_for};
    assert_eq!(plan.registry_digest, registry_digest_for(&[1, 2, 64]));
    assert_ne!(plan.registry_digest, registry_digest(), "prefill candidates must be bound");
    // The CPU backend has no prefill tiles: the prefill phases exist and are empty, the
    // grouped rows are there.
    for phase in ["prefill.development", "prefill.sealed"] {
        assert_eq!(vnni_corpus::read::read_timing(&corpus.join(format!("{phase}.csv"))).unwrap().len(), 0);
    }
    let rows = read_corpus_rows(&corpus).unwrap();
    assert!(rows.iter().any(|r| r.m == 2) && !rows.iter().any(|r| r.m == 64));
    let (ok, o, e) =
        vnni(&["verify", "--corpus", corpus.to_str().unwrap(), "--inventory", inventory().to_str().unwrap()]);
    assert!(ok, "{o}{e}");
    let _ = std::fs::remove_dir_all(&out);
}

/// The batched stage of a staged collection copies the M = 1 corpus's decode rows: an M = 1
/// corpus timed with another protocol (here one pass instead of two) is refused before anything
/// is measured.
#[test]
fn a_staged_sweep_refuses_an_m1_corpus_timed_with_another_protocol() {
    let root = tmp("protocol");
    let (one, two) = (root.join("one-pass"), root.join("two-pass"));
    for dir in [&one, &two] {
        std::fs::create_dir_all(dir).unwrap();
        for e in std::fs::read_dir(inventory()).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
        }
    }
    let toml = std::fs::read_to_string(one.join("tiny.toml")).unwrap();
    std::fs::write(one.join("tiny.toml"), toml.replacen("passes = 2", "passes = 1", 1)).unwrap();
    let s = |p: &Path| p.display().to_string();
    let (m1, policy, work) = (root.join("m1"), root.join("m1-policy.json"), root.join("batched"));
    let base = |inv: &Path, out: &Path| {
        ["sweep", "--backend", "cpu", "--profile", "tiny", "--threads", "1"]
            .map(String::from)
            .into_iter()
            .chain(["--inventory".into(), s(inv), "--out".into(), s(out)])
            .collect::<Vec<String>>()
    };
    let run = |args: Vec<String>| vnni(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let (ok, out, err) = run([base(&one, &m1), vec!["--m1-only".into()]].concat());
    assert!(ok, "{out}{err}");
    let ledger = root.join("ledger.json");
    run(["fit", "--corpus", &s(&m1.join("corpus")), "--out", &s(&policy), "--ledger", &s(&ledger)]
        .map(String::from)
        .to_vec());
    assert!(policy.is_file());
    let stage = vec!["--m1-policy".into(), s(&policy), "--m1-corpus".into(), s(&m1.join("corpus"))];
    let (ok, _, err) = run([base(&two, &work), stage].concat());
    assert!(!ok && err.contains("1 passes per cell, this sweep with 0, 2 and 2"), "{err}");
    assert!(published(&work).is_empty(), "nothing measured");

    // An M = 1 corpus whose decode candidates were launched programmatically (its plan says
    // so, resealed and refitted) cannot stand beside batched rows launched plainly: refused
    // first, whatever else differs.
    let pdl = root.join("m1-programmatic");
    std::fs::create_dir_all(&pdl).unwrap();
    for e in std::fs::read_dir(m1.join("corpus")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, pdl.join(p.file_name().unwrap())).unwrap();
    }
    let plan = std::fs::read_to_string(pdl.join("plan.json")).unwrap();
    let marked = plan.replacen("{", "{\n  \"programmatic\": true,", 1);
    std::fs::write(pdl.join("plan.json"), marked).unwrap();
    let (ok, out, err) = run(["seal".into(), s(&pdl), "--inventory".into(), s(&one)].to_vec());
    assert!(ok, "{out}{err}");
    let pdl_policy = root.join("m1-programmatic-policy.json");
    let (ok, out, err) = run(["fit", "--corpus", &s(&pdl), "--out", &s(&pdl_policy), "--ledger", &s(&ledger)]
        .map(String::from)
        .to_vec());
    assert!(pdl_policy.is_file(), "{out}{err}");
    let _ = ok; // the fit may fail its gates; the policy is written either way
    let fitted = std::fs::read_to_string(&pdl_policy).unwrap();
    assert!(fitted.contains("\"programmatic\": true"), "the policy records the launch");
    let stage = vec!["--m1-policy".into(), s(&pdl_policy), "--m1-corpus".into(), s(&pdl)];
    let (ok, _, err) = run([base(&one, &root.join("batched-plain")), stage].concat());
    assert!(!ok && err.contains("launched its decode candidates programmatically, this sweep plainly"), "{err}");

    // Nor an M = 1 corpus whose decode launches issued the L2 prefetch otherwise than this
    // build's would (its plan says so).
    let prefetch = root.join("m1-prefetch");
    std::fs::create_dir_all(&prefetch).unwrap();
    for e in std::fs::read_dir(m1.join("corpus")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, prefetch.join(p.file_name().unwrap())).unwrap();
    }
    let marked = plan.replacen("{", "{\n  \"l2_prefetch\": \"programmatic\",", 1);
    std::fs::write(prefetch.join("plan.json"), marked).unwrap();
    let (ok, out, err) = run(["seal".into(), s(&prefetch), "--inventory".into(), s(&one)].to_vec());
    assert!(ok, "{out}{err}");
    let prefetch_policy = root.join("m1-prefetch-policy.json");
    run(["fit", "--corpus", &s(&prefetch), "--out", &s(&prefetch_policy), "--ledger", &s(&ledger)]
        .map(String::from)
        .to_vec());
    assert!(prefetch_policy.is_file());
    let stage = vec!["--m1-policy".into(), s(&prefetch_policy), "--m1-corpus".into(), s(&prefetch)];
    let (ok, _, err) = run([base(&one, &root.join("batched-prefetch")), stage].concat());
    assert!(
        !ok && err.contains("was timed with the L2 prefetch on programmatic decode launches only, this build issues it on every decode launch"),
        "{err}"
    );
}

/// The older protocol (samples of whole weight-copy rotations) is recorded in the plan, so a
/// work directory never mixes the two; a plain plan has no such key (its bytes and digest are
/// what they were); every measured cell reports its time by phase.
#[test]
fn whole_rotations_are_recorded_in_the_plan_and_never_mixed() {
    let (plain, whole) = (tmp("rot-plain"), tmp("rot-whole"));
    let (ok, _, err) = sweep(&plain, &["--shard", "0/4"]);
    assert!(ok, "{err}");
    assert!(err.contains("sampling") && err.contains("time by phase"), "{err}");
    let (ok, _, err) = sweep(&whole, &["--shard", "0/4", "--whole-rotations"]);
    assert!(ok, "{err}");
    let text = |d: &Path| std::fs::read_to_string(d.join("plan.json")).unwrap();
    assert!(!text(&plain).contains("whole_rotations"));
    assert!(text(&whole).contains("\"whole_rotations\": true"));
    let (ok, _, err) = sweep(&whole, &["--shard", "1/4"]);
    assert!(!ok && err.contains("holds another collection plan"), "{err}");
    assert!(err.contains(r#""whole_rotations": true there, absent now"#), "{err}");
}

/// Programmatic dependent launch is a CUDA launch: a CPU sweep asking for it is refused
/// before anything is planned.
#[test]
fn programmatic_launch_is_refused_on_the_cpu() {
    let work = tmp("programmatic-cpu");
    let (ok, _, err) = sweep(&work, &["--shard", "0/4", "--programmatic"]);
    assert!(!ok && err.contains("--programmatic is a CUDA launch"), "{err}");
    assert!(!work.join("plan.json").exists(), "nothing planned");
}

#[test]
fn pruning_is_refused_on_the_cpu_before_anything_is_planned() {
    let work = tmp("prune-cpu");
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../lfs-data/tables/cuda/sm_90/h200-session/policy.json");
    let (ok, _, err) = sweep(&work, &["--shard", "0/4", "--prune-with", policy.to_str().unwrap()]);
    assert!(!ok && err.contains("only CUDA policies carry cost models") && err.contains("h200-session"), "{err}");
    assert!(!work.join("plan.json").exists(), "nothing planned");
    let (ok, _, err) = sweep(&work, &["--shard", "0/4", "--prune-audit", "0.5"]);
    assert!(!ok && err.contains("--prune-with"), "--prune-audit alone: {err}");
}

/// Every candidate's row of a dense-M bench at one M (the fields `sweep --m-buckets-from` reads).
fn dense_row(m: usize, candidate: &str, median_us: f64) -> vnni_corpus::TimingRow {
    vnni_corpus::TimingRow {
        backend: "cpu".parse().unwrap(),
        arch: std::env::consts::ARCH.into(),
        device: "test".into(),
        mode: "eager".parse().unwrap(),
        source_format: Some("Q4_0".parse().unwrap()),
        codebook: Some("s4".parse().unwrap()),
        m,
        n: 4096,
        k: 4096,
        candidate: candidate.parse().unwrap(),
        m1_candidate: Some("decode.wide.tn128.cpt1".parse().unwrap()),
        bpp: 128,
        warmups: 0,
        samples: 2,
        replays: 1,
        weight_copies: 1,
        seed: 1,
        min_us: median_us,
        median_us,
        p95_us: median_us,
        mad_us: 0.0,
        cv: 0.0,
        weight_bytes: 1 << 20,
        gbps: 1.0,
        pct_copy_bw: 1.0,
        checked: 8,
        mismatches: 0,
        first_mismatch: String::new(),
        eligible: true,
        dropped: false,
        registers: 32,
        occupancy_blocks_per_sm: 1,
    }
}

/// `sweep --m-buckets-from`: the grouped rows are timed at the bucket starts learned from a
/// dense-M bench's rows (here 2, 3 and 5: the fastest candidate changes at 3 and 5; the prefill
/// start at 40 is not the grouped surface's), the plan records them and the files they came
/// from, the corpus verifies, the fitted policy's grouped buckets start there, and a profile's
/// prefill M stay. Refused, naming the files: rows missing beside the file given, a given file
/// that does not exist, rows of another machine, a row in two files.
#[test]
fn grouped_rows_are_timed_at_the_bucket_starts_learned_from_dense_m_rows() {
    let root = tmp("learned-buckets");
    let bench = root.join("bench");
    std::fs::create_dir_all(&bench).unwrap();
    let (a, b, c) = ("grouped.rows.r2", "grouped.rows.r4", "grouped.rows.r8");
    let mut rows = Vec::new();
    for m in [2, 3, 4, 5, 8, 16, 31, 32, 40, 64] {
        let at = match m {
            2 => [10.0, 12.0, 14.0],
            3 | 4 => [13.0, 10.0, 12.0],
            5..=32 => [20.0, 15.0, 10.0],
            _ => [20.0, 10.0, 15.0],
        };
        rows.extend([dense_row(m, a, at[0]), dense_row(m, b, at[1]), dense_row(m, c, at[2])]);
    }
    let rows_file = bench.join(vnni_corpus::schema::DENSE_ROWS_FILE);
    vnni_corpus::write_csv(&rows_file, &rows).unwrap();
    let dense = bench.join("dense-m.csv");
    std::fs::write(&dense, "").unwrap();
    let from = dense.to_str().unwrap();
    let out = root.join("work");
    let (ok, stdout, stderr) = sweep(&out, &["--m-buckets-from", from]);
    assert!(ok && stdout.contains("corpus sealed"), "{stdout}{stderr}");
    let corpus = out.join("corpus");
    let plan = CollectionPlan::read(&corpus.join("plan.json")).unwrap();
    assert_eq!(plan.collected_m(), vec![1, 2, 3, 5]);
    let learned = plan.learned_buckets.as_ref().unwrap();
    assert_eq!((learned.starts.clone(), learned.tolerance_percent), (vec![2, 3, 5], 5));
    let bytes = std::fs::read(&rows_file).unwrap();
    assert_eq!(learned.sources[0].sha256, vnni_kernels::digest::sha256_hex(&bytes));
    let ms: BTreeSet<usize> = read_corpus_rows(&corpus).unwrap().iter().map(|r| r.m).collect();
    assert_eq!(ms, BTreeSet::from([1, 2, 3, 5]));
    let inv = inventory();
    let (ok, o, e) = vnni(&["verify", "--corpus", corpus.to_str().unwrap(), "--inventory", inv.to_str().unwrap()]);
    assert!(ok, "{o}{e}");
    let policy = root.join("policy.json");
    let (ok, o, e) = vnni(&[
        "fit",
        "--corpus",
        corpus.to_str().unwrap(),
        "--out",
        policy.to_str().unwrap(),
        "--ledger",
        root.join("ledger.json").to_str().unwrap(),
    ]);
    assert!(policy.is_file(), "{o}{e} (ok = {ok})");
    let p: serde_json::Value = serde_json::from_slice(&std::fs::read(&policy).unwrap()).unwrap();
    let buckets: Vec<(u64, Option<u64>)> =
        p["m_buckets"].as_array().unwrap().iter().map(|b| (b["lo"].as_u64().unwrap(), b["hi"].as_u64())).collect();
    assert_eq!(buckets, vec![(1, Some(1)), (2, Some(2)), (3, Some(4)), (5, None)]);
    // a profile's prefill M stay beside the learned starts (the CPU times none of them)
    let mut args = sweep_args(&root.join("prefill"));
    let at = args.iter().position(|a| a == "tiny").unwrap();
    args[at] = "tiny-prefill".into();
    args.extend(["--m-buckets-from".to_string(), from.to_string()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, o, e) = vnni(&refs);
    assert!(ok, "{o}{e}");
    let plan = CollectionPlan::read(&root.join("prefill/corpus/plan.json")).unwrap();
    assert_eq!(plan.collected_m(), vec![1, 2, 3, 5, 64]);
    let refused = |tag: &str, files: &str| {
        let (ok, _, err) = sweep(&root.join(tag), &["--m-buckets-from", files]);
        assert!(!ok, "{tag}: accepted");
        err
    };
    // no rows beside the file given; no file at all
    let elsewhere = root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("dense-m.csv"), "").unwrap();
    let err = refused("no-rows", elsewhere.join("dense-m.csv").to_str().unwrap());
    assert!(err.contains("elsewhere/dense-m.csv") && err.contains("dense-rows.csv.zst"), "{err}");
    let err = refused("no-file", root.join("missing/dense-m.csv").to_str().unwrap());
    assert!(err.contains("missing/dense-m.csv: not a file"), "{err}");
    // rows of another machine
    let gpu = root.join("gpu");
    std::fs::create_dir_all(&gpu).unwrap();
    std::fs::write(gpu.join("dense-m.csv"), "").unwrap();
    let on_gpu: Vec<_> = rows
        .iter()
        .map(|r| vnni_corpus::TimingRow { backend: "cuda".parse().unwrap(), arch: "sm_90".into(), ..r.clone() })
        .collect();
    vnni_corpus::write_csv(&gpu.join(vnni_corpus::schema::DENSE_ROWS_FILE), &on_gpu).unwrap();
    let err = refused("other-machine", gpu.join("dense-m.csv").to_str().unwrap());
    assert!(err.contains("learned from cuda sm_90 measurements") && err.contains("gpu/dense-rows.csv.zst"), "{err}");
    // one row in two files
    let twice = format!("{from},{}", elsewhere.join("dense-m.csv").display());
    vnni_corpus::write_csv(&elsewhere.join(vnni_corpus::schema::DENSE_ROWS_FILE), &rows[..1]).unwrap();
    let err = refused("twice", &twice);
    assert!(
        err.contains("elsewhere/dense-rows.csv.zst")
            && err.contains("is also in")
            && err.contains("bench/dense-rows.csv.zst"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
