//! The binary's commands, run as a user runs them.

mod common;
use common::vnni;

#[test]
fn formats_json_lists_twenty_formats_fourteen_codebooks_five_alias_groups() {
    let (ok, out, err) = vnni(&["formats", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["formats"].as_array().unwrap().len(), 20);
    assert_eq!(v["codebooks"].as_array().unwrap().len(), 14);
    let groups: Vec<String> = v["alias_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            format!(
                "{}={}",
                g["codebook"].as_str().unwrap(),
                g["formats"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect::<Vec<_>>().join("+")
            )
        })
        .collect();
    assert_eq!(
        groups,
        ["nl4=IQ4_NL+IQ4_XS", "u4=Q4_1+Q4_K", "u5=Q5_1+Q5_K", "nl2=IQ2_XXS+IQ1_S", "nl2d=IQ2_XS+IQ2_S+IQ1_M"]
    );
    let q6k = v["formats"].as_array().unwrap().iter().find(|f| f["name"] == "Q6_K").unwrap();
    assert_eq!(q6k["codebook"], "s6d");
    assert_eq!(q6k["block_bytes"], 210);
    assert_eq!(q6k["bits_per_weight"], 6.5625);
    assert!(q6k["alias_group"].is_null());
    let mxfp4 = v["formats"].as_array().unwrap().iter().find(|f| f["name"] == "MXFP4").unwrap();
    assert_eq!((mxfp4["codebook"].as_str(), mxfp4["ggml_type"].as_u64()), (Some("e2m1"), Some(39)));
    assert_eq!(mxfp4["block_bytes"], 17);
    let q3k = v["formats"].as_array().unwrap().iter().find(|f| f["name"] == "Q3_K").unwrap();
    assert_eq!((q3k["codebook"].as_str(), q3k["block_bytes"].as_u64()), (Some("s3d"), Some(110)));
    for (name, codebook, bytes) in [
        ("IQ3_XXS", "nl3", 98),
        ("IQ3_S", "o4", 110),
        ("Q2_K", "u2m", 84),
        ("IQ2_XXS", "nl2", 66),
        ("IQ2_XS", "nl2d", 74),
        ("IQ2_S", "nl2d", 82),
        ("IQ1_S", "nl2", 50),
        ("IQ1_M", "nl2d", 56),
    ] {
        let f = v["formats"].as_array().unwrap().iter().find(|f| f["name"] == name).unwrap();
        assert_eq!((f["codebook"].as_str(), f["block_bytes"].as_u64()), (Some(codebook), Some(bytes)), "{name}");
    }
}

#[test]
fn formats_table_is_readable() {
    let (ok, out, _) = vnni(&["formats"]);
    assert!(ok);
    assert!(out.lines().any(|l| l.starts_with("Q4_K") && l.contains("u4: Q4_1, Q4_K")), "{out}");
    assert!(out.contains("20 source formats, 14 codebooks, 5 alias groups"), "{out}");
}

#[test]
fn unknown_commands_fail_with_usage() {
    let (ok, _, err) = vnni(&["no-such-command"]);
    assert!(!ok);
    assert!(err.contains("Usage"), "{err}");
}

#[test]
fn seal_and_verify_a_corpus_directory() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let inv = root.join("corpus/inventory");
    let dir = std::env::temp_dir().join(format!("vnni-cli-seal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("cells")).unwrap();
    std::fs::write(dir.join("decode_m1.csv"), "a\n1\n").unwrap();
    std::fs::write(dir.join("cells/c.csv"), "b\n2\n").unwrap();
    let (d, i) = (dir.to_str().unwrap(), inv.to_str().unwrap());
    let (ok, out, err) = vnni(&["seal", d, "--profile", "family-smoke", "--backend", "cpu", "--inventory", i]);
    assert!(ok, "{err}");
    assert!(out.contains("sealed 2 payloads"), "{out}");
    let (ok, out, err) = vnni(&["verify", "--corpus", d, "--inventory", i]);
    assert!(ok && out.starts_with("ok "), "{out}{err}");
    std::fs::write(dir.join("cells/c.csv"), "b\n3\n").unwrap();
    let (ok, out, _) = vnni(&["verify", "--corpus", d, "--inventory", i]);
    assert!(!ok && out.contains("FAIL") && out.contains("cells/c.csv") && out.contains("sha256"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
    // No committed corpus yet: verify says so and succeeds.
    let empty = std::env::temp_dir().join(format!("vnni-cli-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let (ok, out, _) = vnni(&["verify", "--root", empty.to_str().unwrap(), "--inventory", i]);
    assert!(ok && out.contains("no sealed corpus"), "{out}");
    // But a root that does not exist, or a directory of data without a manifest, fails.
    let (ok, _, err) = vnni(&["verify", "--root", empty.join("nosuch").to_str().unwrap(), "--inventory", i]);
    assert!(!ok && err.contains("no such directory"), "{err}");
    std::fs::create_dir_all(empty.join("cpu/x86_64/stray")).unwrap();
    std::fs::write(empty.join("cpu/x86_64/stray/decode_m1.development.csv"), "garbage").unwrap();
    let (ok, _, err) = vnni(&["verify", "--root", empty.to_str().unwrap(), "--inventory", i]);
    assert!(!ok && err.contains("no corpus.manifest.json") && err.contains("stray"), "{err}");
    let _ = std::fs::remove_dir_all(&empty);
}

#[test]
fn seal_refuses_an_empty_directory_a_fifo_and_flags_that_disagree_with_the_plan() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let inv = root.join("corpus/inventory");
    let i = inv.to_str().unwrap();
    let dir = std::env::temp_dir().join(format!("vnni-cli-seal-refuse-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let (ok, _, err) = vnni(&["seal", d, "--profile", "family-smoke", "--backend", "cpu", "--inventory", i]);
    assert!(!ok && err.contains("nothing to seal"), "{err}");
    // Without plan.json the flags are needed, and say so.
    std::fs::write(dir.join("decode_m1.csv"), "a\n1\n").unwrap();
    let (ok, _, err) = vnni(&["seal", d, "--inventory", i]);
    assert!(!ok && err.contains("--profile and --backend"), "{err}");
    // A FIFO is refused, not read (reading one would block forever).
    let fifo = dir.join("pipe");
    if std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()) {
        let (ok, _, err) = vnni(&["seal", d, "--profile", "family-smoke", "--backend", "cpu", "--inventory", i]);
        assert!(!ok && err.contains("not a regular file"), "{err}");
        std::fs::remove_file(&fifo).unwrap();
    }
    // With a plan, flags that disagree with it are refused (not silently ignored).
    let store = dir.join("work");
    let (ok, _, err) = common::smoke_sweep(&store);
    assert!(ok, "{err}");
    let corpus = store.join("corpus");
    let c = corpus.to_str().unwrap();
    let (ok, _, err) = vnni(&["seal", c, "--profile", "core", "--inventory", i]);
    assert!(!ok && err.contains("--profile core disagrees"), "{err}");
    let (ok, _, err) = vnni(&["seal", c, "--backend", "cuda", "--inventory", i]);
    assert!(!ok && err.contains("--backend cuda disagrees"), "{err}");
    let (ok, out, err) = vnni(&["seal", c, "--inventory", i]);
    assert!(ok && out.contains("sealed"), "{out}{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn prefill_certificates_need_the_cuda_backend_and_the_listing_shows_the_tiles() {
    let (ok, _, err) = vnni(&["certify", "--backend", "cpu", "--surface", "prefill", "--out", "/dev/null"]);
    assert!(!ok && err.contains("--surface prefill needs --backend cuda"), "{err}");
    let (ok, out, err) = vnni(&["candidates", "--surface", "prefill", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["prefill_registry_digest"].as_str().unwrap(), vnni_kernels::registry::prefill_registry_digest());
    let ids: Vec<&str> = v["candidates"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 16);
    assert!(ids.contains(&"prefill.bk64.t5.kpart") && ids.contains(&"prefill.bk256.wide.std"), "{ids:?}");
}

#[test]
fn errors_print_their_chain_once_and_no_backtrace() {
    // RUST_BACKTRACE=1 is common on developer machines: an ordinary error still prints no
    // stack backtrace, and each cause once.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"))
        .args(["inventory", "--profile", "nosuch", "--inventory"])
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/inventory"))
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.starts_with("error: ") && err.contains("nosuch"), "{err}");
    assert!(!err.contains("stack backtrace") && !err.contains("Stack backtrace"), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    let unique: std::collections::BTreeSet<&str> =
        lines.iter().map(|l| l.trim_start_matches("  caused by: ").trim_start_matches("error: ")).collect();
    assert_eq!(unique.len(), lines.len(), "a cause is repeated:\n{err}");
}

/// Files under `dir` whose name ends in `.inprogress`.
fn leftovers(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".inprogress"))
        .collect()
}

#[test]
fn concurrent_certify_runs_and_refused_arguments_leave_nothing_behind() {
    let dir = std::env::temp_dir().join(format!("vnni-cli-certify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("certificates.jsonl");
    let args = [
        "certify",
        "--backend",
        "cpu",
        "--formats",
        "Q8_0,Q4_0",
        "--shapes",
        "256x512",
        "--m",
        "2,5",
        "--m1",
        "cpu.decode.wide.t16,cpu.decode.kpar.t64.kb2",
        "--sms",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    let spawn = || std::process::Command::new(env!("CARGO_BIN_EXE_vnni-dispatch")).args(args).output().unwrap();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(spawn);
        let b = s.spawn(spawn);
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(
        a.status.success() && b.status.success(),
        "{}{}",
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stderr)
    );
    let bytes = std::fs::read(&out).unwrap();
    assert!(!bytes.contains(&0), "interleaved writes");
    let certs = vnni_corpus::read::read_certificates(&out).unwrap();
    assert_eq!(certs.len(), 2 * 2 * 2 * 2, "one whole run's certificates");
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));

    // An argument that only fails for the second format is refused before any work.
    let bad = dir.join("bad.jsonl");
    let (ok, _, err) = vnni(&[
        "certify",
        "--backend",
        "cpu",
        "--formats",
        "Q8_0,Q4_K",
        "--shapes",
        "256x288",
        "--m",
        "2",
        "--m1",
        "cpu.decode.wide.t16",
        "--out",
        bad.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("Q4_K"), "{err}");
    assert!(!bad.exists() && leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dead_sweeps_staging_directory_is_cleared_when_the_corpus_is_assembled() {
    let work = common::scratch("staging");
    // What a sweep killed during assembly leaves: a staging directory of a process now gone.
    let stale = work.join(vnni_measure::collect::staging_name(&vnni_corpus::collection::host(), 4_000_000));
    // Another host's staging directory is that host's business: kept.
    let other = work.join(vnni_measure::collect::staging_name("another-host.example", 4_000_000));
    std::fs::create_dir_all(&other).unwrap();
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("decode_m1.development.csv"), "half").unwrap();
    let (ok, out, err) = common::smoke_sweep(&work);
    assert!(ok && out.contains("corpus sealed"), "{out}{err}");
    assert!(!stale.exists() && other.exists(), "{:?}", leftovers(&work));
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn a_published_cell_that_was_truncated_or_cut_is_refused_at_assembly() {
    let work = common::scratch("cells");
    let (ok, out, err) = common::smoke_sweep(&work);
    assert!(ok && out.contains("corpus sealed"), "{out}{err}");
    let cell = std::fs::read_dir(work.join("cells"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "csv") && !p.to_string_lossy().contains(".timing."))
        .unwrap();
    let original = std::fs::read_to_string(&cell).unwrap();
    let header = original.lines().next().unwrap().to_string();
    let minus_one: String = original.lines().take(original.lines().count() - 1).map(|l| format!("{l}\n")).collect();
    for (what, text) in [("empty", String::new()), ("header only", format!("{header}\n")), ("one row fewer", minus_one)]
    {
        std::fs::write(&cell, &text).unwrap();
        let _ = std::fs::remove_dir_all(work.join("corpus"));
        let (ok, out, err) = common::smoke_sweep(&work);
        assert!(!ok, "{what}: sealed anyway:\n{out}");
        assert!(
            err.contains(&*cell.file_name().unwrap().to_string_lossy())
                && err.contains("changed since it was published"),
            "{what}: {err}"
        );
        assert!(!work.join("corpus").exists(), "{what}: a corpus was sealed");
    }
    std::fs::write(&cell, &original).unwrap();
    let (ok, out, err) = common::smoke_sweep(&work);
    assert!(ok && out.contains("corpus sealed"), "{out}{err}");
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn small_edges_of_the_command_line() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let inv = root.join("corpus/inventory");
    let tmp = std::env::temp_dir().join(format!("vnni-cli-edges-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();

    // A garbage SLURM array id is refused before the work directory is bound to a plan.
    let work = tmp.join("work");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"))
        .args(["sweep", "--backend", "cpu", "--inventory", inv.to_str().unwrap(), "--out", work.to_str().unwrap()])
        .env("SLURM_ARRAY_TASK_ID", "garbage")
        .env("SLURM_ARRAY_TASK_COUNT", "4")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("SLURM_ARRAY_TASK_ID"), "{err}");
    assert!(!work.join("plan.json").exists(), "plan.json written before the shard was checked");

    // `generate --out` naming a file says so.
    let file = tmp.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let policy = tmp.join("policy.json");
    std::fs::write(&policy, vnni_policy::example::example_policy(vnni_kernels::Backend::Cpu).to_bytes()).unwrap();
    let (ok, _, err) = vnni(&["generate", "--policy", policy.to_str().unwrap(), "--out", file.to_str().unwrap()]);
    assert!(!ok && err.contains("is a file, not a directory"), "{err}");

    // `certify --out` in a directory that does not exist yet: created, and the file is there.
    let nested = tmp.join("new/dir/certs.jsonl");
    let (ok, _, err) = vnni(&[
        "certify",
        "--backend",
        "cpu",
        "--formats",
        "Q8_0",
        "--shapes",
        "256x256",
        "--m",
        "2",
        "--m1",
        "cpu.decode.wide.t16",
        "--out",
        nested.to_str().unwrap(),
    ]);
    assert!(ok && nested.is_file(), "{err}");

    // A GPU command on a machine without one does not suggest a flag it lacks.
    if !std::path::Path::new("/dev/nvidia0").exists() {
        let (ok, _, err) = vnni(&["preflight", "--out", tmp.join("r.csv").to_str().unwrap()]);
        assert!(!ok && !err.contains("or use --backend cpu"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn explain_shows_the_path_the_bpp_and_the_measured_margin() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let policy = root.join("lfs-data/tables/cuda/sm_90/h200-grid/policy.json");
    let corpora = root.join("lfs-data/corpora");
    let (p, r) = (policy.to_str().unwrap(), corpora.to_str().unwrap());
    // A grouped query on an inventory shape: overlays, the inherited bpp, measured margins.
    let (ok, out, err) = vnni(&[
        "explain", "--policy", p, "--root", r, "--format", "Q4_K", "--m", "8", "--n", "151936", "--k", "4096",
        "--mode", "graph",
    ]);
    assert!(ok, "{err}");
    let sel = vnni_policy::Policy::from_bytes(&std::fs::read(&policy).unwrap()).unwrap();
    let want = sel.select("u4", "graph", 8, 151_936, 4096).unwrap();
    assert!(out.contains(&format!("selection   {} bpp {}", want.candidate.id, want.bpp)), "{out}");
    assert!(out.contains("inherit bpp") && out.contains("runner-up") && out.contains("noise"), "{out}");
    // A shape the corpus never measured: the cost models' least predictions, the pick first.
    let (ok, out, err) = vnni(&[
        "explain", "--policy", p, "--root", r, "--format", "Q4_0", "--m", "1", "--n", "24576", "--k", "4096", "--mode",
        "graph",
    ]);
    assert!(ok, "{err}");
    let want = sel.select("s4", "graph", 1, 24_576, 4096).unwrap();
    assert!(out.contains("via Model") && out.contains("least predicted latency"), "{out}");
    let first = out.lines().find(|l| l.contains(" us ")).unwrap_or("");
    assert!(first.trim_end().ends_with(&want.candidate.id), "the pick leads the predictions: {out}");
    // Beyond the models' 2^36 elements: the tree path with its thresholds.
    let (ok, out, err) = vnni(&[
        "explain", "--policy", p, "--format", "Q4_0", "--m", "1", "--n", "1048576", "--k", "131072", "--mode", "graph",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("via Tree") && out.contains("leaf ") && (out.contains(" <= ") || out.contains(" > ")),
        "{out}"
    );
    // --predictions: every cost model of the decode domain, fastest first, even on an overlay.
    let (ok, out, err) = vnni(&[
        "explain",
        "--policy",
        p,
        "--format",
        "Q4_0",
        "--m",
        "1",
        "--n",
        "14336",
        "--k",
        "4096",
        "--predictions",
    ]);
    assert!(ok, "{err}");
    let d = sel.explain("s4", &sel.modes[0], 1, 14_336, 4096).unwrap().decode;
    let predicted: Vec<f64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("predicted"))
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(predicted.len(), sel.model_predictions(d.domain, 14_336, 4096).len(), "{out}");
    assert!(predicted.len() > 10 && predicted.windows(2).all(|w| w[0] <= w[1]), "{out}");
    let (ok, _, err) = vnni(&["explain", "--policy", p, "--format", "Q4_9", "--m", "1", "--n", "64", "--k", "64"]);
    assert!(!ok && err.contains("Q4_0"), "{err}");
    // A one-pass corpus has no noise band.
    let (_, out, _) = vnni(&[
        "explain", "--policy", p, "--root", r, "--format", "Q4_K", "--m", "8", "--n", "151936", "--k", "4096",
        "--mode", "graph",
    ]);
    assert!(out.contains("noise band  none: the corpus was timed in one pass"), "{out}");
}

/// `explain --shapes`: one CSV line per shape, each the policy's own selection (what scripts
/// that score a policy on many shapes read), and --shapes with --n refused.
#[test]
fn explain_lists_many_shapes_one_line_each() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let policy = root.join("lfs-data/tables/cuda/sm_90/h200-grid/policy.json");
    let p = policy.to_str().unwrap();
    let shapes = [(151_936u64, 4096u64), (24_576, 4096), (1_048_576, 131_072), (4096, 4096)];
    let list: Vec<String> = shapes.iter().map(|(n, k)| format!("{n}x{k}")).collect();
    let sel = vnni_policy::Policy::from_bytes(&std::fs::read(&policy).unwrap()).unwrap();
    for m in [1u64, 8] {
        let m_text = m.to_string();
        let (ok, out, err) = vnni(&[
            "explain",
            "--policy",
            p,
            "--format",
            "Q4_K",
            "--mode",
            "graph",
            "--m",
            &m_text,
            "--shapes",
            &list.join(","),
        ]);
        assert!(ok, "{err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "format,codebook,mode,m,n,k,candidate,bpp,partitions,via,decode_candidate");
        assert_eq!(lines.len(), shapes.len() + 1, "{out}");
        for (line, &(n, k)) in lines[1..].iter().zip(&shapes) {
            let want = sel.select("u4", "graph", m, n, k).unwrap();
            let decode = sel.select("u4", "graph", 1, n, k).unwrap();
            let head = format!("Q4_K,u4,graph,{m},{n},{k},{},{},{},", want.candidate.id, want.bpp, want.kb);
            assert!(line.starts_with(&head), "{line} (want {head})");
            assert!(line.ends_with(&format!(",{}", decode.candidate.id)), "{line}");
        }
    }
    let (ok, _, err) =
        vnni(&["explain", "--policy", p, "--format", "Q4_K", "--m", "1", "--n", "64", "--shapes", "64x64"]);
    assert!(!ok && err.contains("--shapes"), "{err}");
    let (ok, _, err) = vnni(&["explain", "--policy", p, "--format", "Q4_K", "--m", "1", "--n", "64"]);
    assert!(!ok && err.contains("--k"), "{err}");
}

/// Explain on a corpus timed in two passes: the cell's noise band, where it came from, and
/// whether the pick is tied with the best inside it.
#[test]
fn explain_shows_the_noise_band_of_a_two_pass_corpus() {
    use vnni_learner::synthetic::{half_octaves, write, Spec};
    let dir = common::scratch("explain-band");
    let corpus = dir.join("corpus");
    let spec =
        Spec { ns: half_octaves(256, 4096), ks: half_octaves(256, 2048), ms: vec![1, 4], passes: 2, ..Spec::cpu(5) };
    write(&corpus, &spec).unwrap();
    let policy = dir.join("policy.json");
    let (c, p) = (corpus.to_str().unwrap(), policy.to_str().unwrap());
    let ledger = dir.join("ledger.json");
    let (_, out, err) = vnni(&["fit", "--corpus", c, "--out", p, "--ledger", ledger.to_str().unwrap()]);
    assert!(policy.is_file(), "{out}{err}");
    let (ok, out, err) =
        vnni(&["explain", "--policy", p, "--corpus", c, "--format", "Q4_0", "--m", "1", "--n", "1024", "--k", "512"]);
    assert!(ok, "{err}");
    let line =
        out.lines().find(|l| l.starts_with("Q4_0") && l.contains("noise band")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("size octave 2^19") && line.contains("pass differences"), "{line}");
    assert!(line.contains("tied with the best") || line.contains("is outside it"), "{line}");
}

/// Output piped into a reader that has gone (`| head` after its lines) ends the command
/// quietly by SIGPIPE, as other Unix tools do, never with a panic.
#[cfg(unix)]
#[test]
fn a_closed_output_pipe_ends_the_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"))
        .args(["inventory", "--profile", "all", "--inventory"])
        .arg(common::repo_inventory())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end at once: the inventory is still loading, so the first line of the
    // table already meets a pipe without a reader.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.signal(), Some(13), "SIGPIPE (13 on Linux and the BSDs): {:?} {err}", out.status);
}
