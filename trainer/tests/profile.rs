//! `vnni-dispatch profile` end to end without a GPU: a stand-in for ncu (a shell script taking
//! ncu's arguments) writes one record per kernel each request launches, with ncu's CSV layout
//! and microsecond durations, instead of starting the worker. The command's own part is real:
//! requests drawn from a sealed synthetic CUDA corpus and bound to its id, one ncu process per
//! chunk and pass, a failed pass refused with the finished files kept, the same command again
//! resuming at the first missing file, the evidence derived and authenticated, `--reparse`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use vnni_kernels::{Mode, SourceFormat};
use vnni_learner::synthetic::{write, Spec};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vnni-profile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Records for requests `--first .. --first + --count` of `--out`'s requests.csv, one per kernel
/// (`;`-separated), IMMA instructions where the request says so; fails when the chunk starts at
/// or after $FAKE_NCU_FAIL_FROM and its metrics include $FAKE_NCU_FAIL_METRIC (any, unset);
/// appends its TMPDIR and arguments to $FAKE_NCU_ARGS when set.
const FAKE_NCU: &str = r#"#!/usr/bin/env bash
set -eu
if [ -n "${FAKE_NCU_ARGS:-}" ]; then echo "TMPDIR=${TMPDIR:-} $*" >> "$FAKE_NCU_ARGS"; fi
log= metrics= out= first= count=
while [ $# -gt 0 ]; do
  case "$1" in
    --log-file) log=$2; shift ;;
    --metrics) metrics=$2; shift ;;
    --out) out=$2; shift ;;
    --first) first=$2; shift ;;
    --count) count=$2; shift ;;
  esac
  shift
done
if [ -n "${FAKE_NCU_FAIL_FROM:-}" ] && [ "$first" -ge "$FAKE_NCU_FAIL_FROM" ] \
  && [[ "$metrics" == *"${FAKE_NCU_FAIL_METRIC:-}"* ]]; then
  echo "==ERROR== the fake profiler failed" > "$log"; exit 3
fi
awk -F, -v metrics="$metrics" -v first="$first" -v count="$count" '
BEGIN { n = split(metrics, m, ","); h = "\"ID\",\"Kernel Name\""; u = "\"\",\"\""
  for (i = 1; i <= n; i++) {
    h = h ",\"" m[i] "\""
    unit = ""
    if (m[i] ~ /time_duration/) unit = "usecond"
    else if (m[i] ~ /shared_mem|data_bytes/) unit = "Kbyte"
    else if (m[i] ~ /pct/) unit = "%"
    u = u ",\"" unit "\""
  }
  h = h ",\"profiler__replayer_passes\""; u = u ",\"\""
  print "==PROF== Connected to process 1 (fake)"; print h; print u; id = 0 }
NR > 1 && $1 >= first && $1 < first + count {
  k = split($14, kernels, ";")
  for (j = 1; j <= k; j++) {
    line = "\"" id "\",\"" kernels[j] "\""
    for (i = 1; i <= n; i++) {
      v = "0"
      if (m[i] ~ /time_duration/) v = "1.5"
      if (m[i] ~ /registers/) v = "32"
      if (m[i] ~ /imma/ && j == 1 && $15 == "true") v = "1,024"
      line = line ",\"" v "\""
    }
    print line ",\"" (j == 2 ? 2 : 1) "\""; id++
  }
}' "$out/requests.csv" > "$log"
"#;

fn profile(args: &[&str], fail_from: Option<usize>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"));
    c.arg("profile").args(args);
    match fail_from {
        Some(f) => c.env("FAKE_NCU_FAIL_FROM", f.to_string()).env("FAKE_NCU_FAIL_METRIC", "smsp__sass"),
        None => c.env_remove("FAKE_NCU_FAIL_FROM"),
    };
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn chunk_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("ncu"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn profile_chunks_resume_and_the_evidence_is_authenticated() {
    let dir = scratch("chunks");
    let corpus = dir.join("corpus");
    let spec = Spec {
        ns: vec![256, 512],
        ks: vec![256, 512],
        formats: vec![SourceFormat::Q4_0],
        ms: vec![1, 2],
        modes: vec![Mode::Eager, Mode::Graph],
        sealed_every: 0,
        overlay: vec![],
        ..Spec::cuda(3)
    };
    let sealed = write(&corpus, &spec).unwrap();
    // profiled with this build's kernels: the corpus must say it was timed with them
    let plan_path = corpus.join("plan.json");
    let mut plan: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    plan["kernel_source_digest"] = vnni_kernels::cuda::source::kernel_source_digest().into();
    let o = profile(&["--corpus", corpus.to_str().unwrap(), "--out", dir.join("refused").to_str().unwrap()], None);
    assert!(!o.status.success() && text(&o).contains("collected with other kernel sources"), "{}", text(&o));
    std::fs::write(&plan_path, serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
    // sealed again over the changed plan (the same inputs; a new corpus id)
    vnni_corpus::seal::seal(&corpus, &sealed.identity.inputs).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("corpus.manifest.json")).unwrap()).unwrap();
    let ncu = dir.join("fake-ncu");
    std::fs::write(&ncu, FAKE_NCU).unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&ncu).status().unwrap();
    let out = dir.join("evidence");
    let args = [
        "--corpus",
        corpus.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--top",
        "3",
        "--chunk",
        "8",
        "--ncu",
        ncu.to_str().unwrap(),
    ];

    // The third chunk's SASS pass fails: the files before it are kept, nothing is derived.
    let o = profile(&args, Some(16));
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("exited with exit status: 3") && text(&o).contains("000016.sass.csv.inprogress"),
        "{}",
        text(&o)
    );
    assert_eq!(
        chunk_files(&out),
        [
            "000000.hw.csv",
            "000000.sass.csv",
            "000008.hw.csv",
            "000008.sass.csv",
            "000016.hw.csv",
            "000016.sass.csv.inprogress"
        ]
    );
    assert!(!out.join("evidence.csv").exists());
    let requests: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("requests.manifest.json")).unwrap()).unwrap();
    assert_eq!(requests["corpus_id"], manifest["corpus_id"]);
    assert_eq!(requests["device"], "synthetic");
    let n = requests["requests"].as_u64().unwrap() as usize;
    // a candidate in the top 3 of both modes of a cell is one launch standing for both
    let drawn = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    let modes = |l: &str| l.split(',').nth(7).unwrap().split(';').count();
    assert_eq!(drawn.lines().skip(1).map(modes).sum::<usize>(), 4 * 2 * 2 * 3, "4 shapes x 2 M x 2 modes x the top 3");
    assert!(drawn.lines().any(|l| l.contains(",eager,eager;graph,")), "{drawn}");
    assert!(n > 24 && n < 48, "{n} requests: the test needs five chunks, some launches shared");

    // Again: the finished chunks are not profiled again, the rest are, the evidence holds.
    let o = profile(&args, None);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("chunk 1/5: profiled before") && t.contains("chunk 2/5: profiled before"), "{t}");
    // the third chunk's hardware pass is kept, its SASS pass runs
    assert!(t.contains("chunk 3/5: requests 16..24: hw profiled before; sass "), "{t}");
    assert!(t.contains(&format!("chunk 5/5: requests 32..{n}: hw ")), "{t}");
    // each pass says what its records cost (the fake replays a reduce twice)
    assert!(t.contains("ms a record, replay passes: 1-2") || t.contains("ms a record, replay passes: 1\n"), "{t}");
    assert!(t.contains("every claim held"), "{t}");
    let evidence = std::fs::read_to_string(out.join("evidence.csv")).unwrap();
    // one row per ncu record and mode it stands for
    let records = requests["records"].as_u64().unwrap() as usize;
    let rows: usize = drawn.lines().skip(1).map(|l| modes(l) * l.split(',').nth(13).unwrap().split(';').count()).sum();
    assert_eq!(evidence.lines().count() - 1, rows);
    assert!(rows > records, "{rows} rows, {records} records");
    // ncu's microseconds are nanoseconds in the evidence
    assert!(evidence.lines().skip(1).all(|l| l.ends_with(",1500.0")), "{evidence}");

    // The kept ncu output derives the same evidence; an edited file is refused.
    let o = profile(&[&args[..4], &["--reparse"]].concat(), None);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(out.join("evidence.csv")).unwrap(), evidence);
    let report_args = ["report", "--corpus", corpus.to_str().unwrap(), "--evidence", out.to_str().unwrap(), "--out"];
    let report = |to: &str| {
        Command::new(env!("CARGO_BIN_EXE_vnni-dispatch")).args(report_args).arg(dir.join(to)).output().unwrap()
    };
    let o = report("report");
    assert!(o.status.success(), "{}", text(&o));
    let md = std::fs::read_to_string(dir.join("report/evidence.md")).unwrap();
    assert!(
        md.contains(&format!("{n} requests, {records} records"))
            && md.contains("| decode.wide.tn512.cpt2 | main | 32 |"),
        "{md}"
    );
    let first = out.join("ncu/000000.sass.csv");
    let edited = std::fs::read_to_string(&first).unwrap().replacen("\"32\"", "\"40\"", 1);
    std::fs::write(&first, edited).unwrap();
    let o = report("report-2");
    assert!(!o.status.success() && text(&o).contains("changed since the evidence was derived"), "{}", text(&o));

    // Application replay is ncu's, asked for on every chunk; the evidence is the same.
    let app = dir.join("evidence-app");
    let log = dir.join("ncu-args.log");
    let mut c = Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"));
    c.arg("profile").args(&args[..2]).args(["--out", app.to_str().unwrap()]).args(&args[4..]);
    let o = c
        .args(["--replay", "application"])
        .env("FAKE_NCU_ARGS", &log)
        .env_remove("FAKE_NCU_FAIL_FROM")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(calls.lines().count(), 10, "five chunks, two passes each: {calls}");
    assert!(calls.lines().all(|l| l.contains("--replay-mode application") && l.contains("--profile-from-start off")));
    assert_eq!(std::fs::read_to_string(app.join("evidence.csv")).unwrap(), evidence);

    // Two devices share the chunks out, each ncu with its device's lock directory and the
    // worker on its device. A failed chunk stops both, names its device, and keeps what
    // finished; run again, the evidence is the same.
    let two = dir.join("evidence-two");
    let log = dir.join("ncu-args-two.log");
    let two_devices = |fail_from: Option<usize>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vnni-dispatch"));
        c.arg("profile")
            .args(&args[..2])
            .args(["--out", two.to_str().unwrap()])
            .args(&args[4..])
            .args(["--devices", "0,1"])
            .env("FAKE_NCU_ARGS", &log);
        match fail_from {
            Some(f) => c.env("FAKE_NCU_FAIL_FROM", f.to_string()).env("FAKE_NCU_FAIL_METRIC", "smsp__sass"),
            None => c.env_remove("FAKE_NCU_FAIL_FROM"),
        };
        c.output().unwrap()
    };
    let o = two_devices(Some(16));
    assert!(!o.status.success() && text(&o).contains("on device"), "{}", text(&o));
    assert!(chunk_files(&two).iter().any(|f| f == "000008.sass.csv"), "{:?}", chunk_files(&two));
    let before = std::fs::read_to_string(&log).unwrap().lines().count();
    let o = two_devices(None);
    assert!(o.status.success(), "{}", text(&o));
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(calls.lines().count() - before < 10, "the finished files are not profiled again: {calls}");
    assert!(text(&o).contains("(device 0): ") || text(&o).contains("(device 1): "), "{}", text(&o));
    // over both runs (which device takes which chunk is up to the threads)
    for device in ["0", "1"] {
        let on: Vec<&str> = calls.lines().filter(|l| l.contains(&format!("--devices {device} "))).collect();
        assert!(!on.is_empty(), "device {device} profiled no chunk: {calls}");
        assert!(on.iter().all(|l| l.contains(&format!("vnni-ncu-lock-device-{device} "))), "{calls}");
    }
    assert_eq!(std::fs::read_to_string(two.join("evidence.csv")).unwrap(), evidence);
    std::fs::remove_dir_all(&dir).unwrap();
}
