//! Corpus file readers validate every row and name the file, line and column at fault.

use std::path::PathBuf;

use vnni_corpus::read::{
    read_certificates, read_dense_m, read_pair_requests, read_resources, read_samples, read_timing,
};
use vnni_corpus::schema::{hex_f64, DenseMRow, PairRequest};
use vnni_corpus::{write_csv, Certificate, SampleRow, TimingRow};

fn tmp(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "vnni-schema-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn timing(candidate: &str, n: usize, median: f64) -> TimingRow {
    TimingRow {
        source_format: Some(vnni_kernels::SourceFormat::Q4_0),
        backend: "cuda".parse().unwrap(),
        arch: "sm_90".into(),
        device: "NVIDIA H200".into(),
        mode: "graph".parse().unwrap(),
        codebook: Some(vnni_kernels::Codebook::S4),
        m: 1,
        n,
        k: 4096,
        candidate: candidate.parse().unwrap(),
        m1_candidate: None,
        bpp: 128,
        warmups: 2,
        samples: 12,
        replays: 2,
        weight_copies: 1,
        seed: 7,
        min_us: median * 0.99,
        median_us: median,
        p95_us: median * 1.01,
        mad_us: 0.1,
        cv: 0.01,
        weight_bytes: 1 << 20,
        gbps: 4000.0,
        pct_copy_bw: 95.0,
        checked: 4096,
        mismatches: 0,
        first_mismatch: String::new(),
        eligible: true,
        dropped: false,
        registers: 64,
        occupancy_blocks_per_sm: 8,
    }
}

fn sample(round: usize, v: f64) -> SampleRow {
    SampleRow {
        source_format: Some(vnni_kernels::SourceFormat::Q4_0),
        mode: "graph".parse().unwrap(),
        codebook: Some(vnni_kernels::Codebook::S4),
        m: 1,
        n: 4096,
        k: 4096,
        candidate: "decode.wide.tn128.cpt2".parse().unwrap(),
        pass: 0,
        round,
        order: 0,
        warmup: false,
        latency_us_hex: hex_f64(v),
    }
}

fn err_of(r: Result<impl std::fmt::Debug, vnni_corpus::read::ReadError>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn timing_rows_round_trip_and_bad_rows_are_named() {
    let good = vec![
        timing("decode.wide.tn128.cpt2", 4096, 85.0),
        timing("decode.kpar.tn128.cpt1.kb8", 4096, 90.0),
        timing("copy", 0, 1000.0),
    ];
    let p = tmp("decode.csv");
    write_csv(&p, &good).unwrap();
    assert_eq!(read_timing(&p).unwrap(), good);

    let text = std::fs::read_to_string(&p).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[2] = lines[2].replacen("4096,4096", "40x6,4096", 1);
    std::fs::write(&p, lines.join("\n")).unwrap();
    let e = err_of(read_timing(&p));
    assert!(e.contains("decode.csv:3: column n:"), "{e}");

    let cases: Vec<(Vec<TimingRow>, &str)> = vec![
        (vec![timing("decode.wide.tn128.cpt2", 4096, f64::NAN)], "decode.csv:2: column median_us: NaN"),
        (vec![timing("decode.wide.tn128.cpt2", 4096, -3.0)], "decode.csv:2: column median_us: -3"),
        (vec![timing("decode.warp.tn999", 4096, 3.0)], "column candidate: unknown candidate"),
        (
            vec![timing("decode.wide.tn128.cpt2", 4096, 3.0), timing("decode.wide.tn128.cpt2", 4096, 4.0)],
            "decode.csv:3: column candidate: duplicate key (first at line 2)",
        ),
    ];
    for (rows, want) in cases {
        write_csv(&p, &rows).unwrap();
        let e = err_of(read_timing(&p));
        assert!(e.contains(want), "want {want:?} in {e}");
    }
    // An ineligible row may carry NaN times (never timed).
    let mut skipped = timing("decode.wide.tn128.cpt2", 4096, f64::NAN);
    skipped.eligible = false;
    skipped.mismatches = 3;
    write_csv(&p, &[skipped]).unwrap();
    assert_eq!(read_timing(&p).unwrap().len(), 1);
}

#[test]
fn zstd_sidecars_round_trip_and_validate_hex_samples() {
    let p = tmp("x.timing.csv.zst");
    let good: Vec<SampleRow> = (0..500).map(|i| sample(i, 80.0 + i as f64 / 7.0)).collect();
    write_csv(&p, &good).unwrap();
    assert_eq!(&std::fs::read(&p).unwrap()[..4], &[0x28, 0xB5, 0x2F, 0xFD], "zstd magic");
    assert_eq!(read_samples(&p).unwrap(), good);
    let mut bad = good.clone();
    bad[7].latency_us_hex = "0x1.8q+1".into();
    write_csv(&p, &bad).unwrap();
    assert!(err_of(read_samples(&p)).contains("x.timing.csv.zst:9: column latency_us_hex"));
    bad[7] = sample(7, -1.0);
    write_csv(&p, &bad).unwrap();
    assert!(err_of(read_samples(&p)).contains("not a positive time"));
    bad[7] = sample(6, 1.0);
    write_csv(&p, &bad).unwrap();
    assert!(err_of(read_samples(&p)).contains("duplicate sample (first at line 8)"));
    // the same round of another pass is another sample
    bad[7].pass = 1;
    write_csv(&p, &bad).unwrap();
    assert_eq!(read_samples(&p).unwrap()[7].pass, 1);
    // ... and so is the same round of another candidate; a candidate the registry does not
    // know is named wherever it first appears
    bad[7] = SampleRow { candidate: "decode.wide.tn256.cpt2".parse().unwrap(), ..sample(6, 1.0) };
    write_csv(&p, &bad).unwrap();
    assert_eq!(read_samples(&p).unwrap()[7].candidate.as_str(), "decode.wide.tn256.cpt2");
    bad[300].candidate = "decode.wide.tn999.cpt2".parse().unwrap();
    write_csv(&p, &bad).unwrap();
    let e = err_of(read_samples(&p));
    assert!(e.contains(":302: column candidate: unknown candidate \"decode.wide.tn999.cpt2\""), "{e}");
}

/// Sample files written before passes existed have no `pass` column: they read as pass 0.
#[test]
fn samples_without_a_pass_column_are_pass_zero() {
    let p = tmp("old.timing.csv");
    let rows = [sample(0, 80.0), sample(1, 81.0)];
    write_csv(&p, &rows).unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let at = header.iter().position(|h| *h == "pass").expect("a pass column is written");
    let old: String = text
        .lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split(',').collect();
            f.remove(at);
            f.join(",") + "\n"
        })
        .collect();
    std::fs::write(&p, old).unwrap();
    let back = read_samples(&p).unwrap();
    assert_eq!(back, rows.to_vec());
}

#[test]
fn certificates_read_back_and_name_the_bad_line() {
    let c = Certificate {
        backend: "cuda".parse().unwrap(),
        arch: "sm_90".into(),
        codebook: "s4".parse().unwrap(),
        source_format: "Q4_0".parse().unwrap(),
        n: 8,
        k: 64,
        m: 2,
        bpp: 2,
        m1_candidate: "decode.wide.tn128.cpt2".parse().unwrap(),
        candidate: "grouped.rows.r2".parse().unwrap(),
        outputs: 16,
        mismatches: 0,
        repeat_mismatches: 0,
        first_mismatch: None,
        grouped_digest: "a".into(),
        serial_digest: "a".into(),
    };
    let p = tmp("certificates.jsonl");
    let line = serde_json::to_string(&c).unwrap();
    std::fs::write(&p, format!("{line}\n{line}\n")).unwrap();
    assert_eq!(read_certificates(&p).unwrap(), vec![c.clone(), c]);
    std::fs::write(&p, format!("{line}\n{}\n", line.replace("\"m\":2,", ""))).unwrap();
    let e = err_of(read_certificates(&p));
    assert!(e.contains("certificates.jsonl:2:") && e.contains("missing field `m`"), "{e}");
}

#[test]
fn committed_certificates_and_bench_rows_validate() {
    use vnni_kernels::Codebook;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let certs = read_certificates(&root.join("lfs-data/certificates/sm_90/grouped.jsonl")).unwrap();
    assert!(certs.len() >= 14_400);
    assert!(certs.iter().all(|c| c.mismatches == 0 && c.repeat_mismatches == 0 && c.grouped_digest == c.serial_digest));
    let rows = read_timing(&root.join("docs/perf/decode-h200.csv")).unwrap();
    assert!(rows.iter().all(|r| r.mismatches == 0));
    // On-device preflight of every kernel: the H200 run before the new codebooks, and the runs
    // that added them (sm_90 resources do not depend on the card: kernels two runs hold agree).
    // `u2m`'s IMMA tiles changed after format-q2k-h100 (its mins by an mma), so its rows there
    // are superseded by u2m-min-mma-h100's run of every kernel; `nl2d`'s M = 1 tiles changed
    // after format-iq12-h200 (the dot by two dp4a per half, then its payload in halves), so
    // that run is superseded by nl2d-halves' run of every kernel.
    let mut by_kernel = std::collections::BTreeMap::new();
    for file in [
        "docs/perf/resources-h200.csv",
        "docs/perf/format-mxfp4-h100/resources.csv",
        "docs/perf/format-q3k-h100/resources.csv",
        "docs/perf/format-iq3-h200/resources.csv",
        "docs/perf/u2m-min-mma-h100/resources.csv",
        "docs/perf/nl2d-halves/resources-h100.csv",
    ] {
        for r in read_resources(&root.join(file)).unwrap() {
            assert!(r.verdict == "ok" && r.device_occupancy_blocks_per_sm.unwrap_or(0) > 0, "{file}: {}", r.kernel);
            if let Some(seen) = by_kernel.insert(r.kernel.clone(), r.clone()) {
                assert_eq!(seen, r, "{file}: {} differs between runs", r.kernel);
            }
        }
    }
    let specs: std::collections::BTreeSet<String> =
        vnni_kernels::registry::kernel_specs().iter().map(|s| s.symbol()).collect();
    let rows: std::collections::BTreeSet<String> = by_kernel.keys().cloned().collect();
    assert_eq!(rows, specs, "one on-device preflight row per registry kernel, by name");
    // Grouped certificates of the codebooks added since: every grouped M, zero mismatches.
    for (file, codebook) in [
        ("grouped-e2m1.jsonl", Codebook::E2m1),
        ("grouped-s3d.jsonl", Codebook::S3d),
        ("grouped-nl3.jsonl", Codebook::Nl3),
        ("grouped-o4.jsonl", Codebook::O4),
        ("grouped-u2m.jsonl", Codebook::U2m),
        ("grouped-nl2.jsonl", Codebook::Nl2),
        ("grouped-nl2d.jsonl", Codebook::Nl2d),
    ] {
        let certs = read_certificates(&root.join("lfs-data/certificates/sm_90").join(file)).unwrap();
        assert!(certs
            .iter()
            .all(|c| c.mismatches == 0 && c.repeat_mismatches == 0 && c.grouped_digest == c.serial_digest));
        for m in (2..=16).chain([31]) {
            assert!(certs.iter().any(|c| c.codebook == codebook && c.m == m), "{file}: M = {m}");
        }
    }
}

/// The ragged grouped certificates (N = 1000: the last CTA and the last warp's upper half run
/// past N, the column clamps of every grouped kernel): every codebook at every grouped M, zero
/// mismatches.
#[test]
fn committed_ragged_grouped_certificates_cover_every_codebook() {
    use vnni_kernels::Codebook;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let certs = read_certificates(&root.join("lfs-data/certificates/sm_90/grouped-ragged.jsonl")).unwrap();
    assert!(certs.iter().all(|c| c.mismatches == 0 && c.repeat_mismatches == 0 && c.grouped_digest == c.serial_digest));
    assert!(certs.iter().all(|c| (c.n, c.k) == (1000, 2304)));
    for cb in Codebook::ALL {
        for m in (2..=16).chain([31]) {
            assert!(certs.iter().any(|c| c.codebook == cb && c.m == m), "{cb} M = {m}");
        }
    }
}

/// The prefill acceptance evidence: every codebook, every prefill bucket and every prefill
/// tile that serves the codebook certified against M = 1 decode with zero mismatches.
#[test]
fn committed_prefill_certificates_cover_every_codebook_bucket_and_tile() {
    use vnni_kernels::registry::{prefill_candidates, PREFILL_M};
    use vnni_kernels::Codebook;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let mut certs = read_certificates(&root.join("lfs-data/certificates/sm_90/prefill.jsonl")).unwrap();
    for file in [
        "prefill-e2m1.jsonl",
        "prefill-s3d.jsonl",
        "prefill-nl3.jsonl",
        "prefill-o4.jsonl",
        "prefill-u2m.jsonl",
        "prefill-nl2.jsonl",
        "prefill-nl2d.jsonl",
    ] {
        certs.extend(read_certificates(&root.join("lfs-data/certificates/sm_90").join(file)).unwrap());
    }
    assert!(certs.iter().all(|c| c.mismatches == 0 && c.repeat_mismatches == 0 && c.grouped_digest == c.serial_digest));
    for cb in Codebook::ALL {
        for m in PREFILL_M {
            for cand in prefill_candidates().iter().filter(|c| c.supports(cb)) {
                let n = certs.iter().filter(|c| c.codebook == cb && c.m == m && c.candidate == cand.id).count();
                // two shapes x two inherited bpp identities
                assert!(n >= 4, "{cb} M={m} {}: {n} certificates", cand.id);
            }
        }
    }
    let rows = read_timing(&root.join("docs/perf/prefill-h200/rows.csv")).unwrap();
    assert!(rows.iter().filter(|r| r.m >= 32).count() > 300 && rows.iter().all(|r| r.mismatches == 0));
}

#[test]
fn resource_rows_must_agree_with_their_verdicts() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let mut rows = read_resources(&root.join("docs/perf/resources-h200.csv")).unwrap();
    rows[3].spill_store_bytes = 8;
    let p = tmp("resources.csv");
    write_csv(&p, &rows).unwrap();
    let e = err_of(read_resources(&p));
    assert!(e.contains("resources.csv:5: column verdict"), "{e}");
    rows[3].verdict = "rejected: local memory".into();
    write_csv(&p, &rows).unwrap();
    assert_eq!(read_resources(&p).unwrap().len(), rows.len());
    rows[4].candidates = "decode.nope".into();
    write_csv(&p, &rows).unwrap();
    assert!(err_of(read_resources(&p)).contains("resources.csv:6: column candidates: unknown candidate"));
}

fn pair(pick: &str, best: &str, n: usize, limit: &str) -> PairRequest {
    PairRequest {
        source_format: "Q4_0".parse().unwrap(),
        codebook: "s4".parse().unwrap(),
        mode: "graph".parse().unwrap(),
        m: 1,
        n,
        k: 4096,
        pick: pick.parse().unwrap(),
        best: best.parse().unwrap(),
        regret: 0.07,
        ucb: 0.09,
        limit: limit.into(),
    }
}

#[test]
fn pair_requests_round_trip_and_bad_rows_are_named() {
    let (a, b) = ("decode.fused.c32.cap32", "decode.fused.c32.waves16");
    let good = vec![pair(a, b, 4096, "regret"), pair(b, a, 8192, "bound"), pair(a, b, 16384, "stalled")];
    let p = tmp("remeasure.csv");
    write_csv(&p, &good).unwrap();
    assert_eq!(read_pair_requests(&p).unwrap(), good);
    let mut negative = pair(a, b, 4096, "regret");
    negative.regret = -0.1;
    let cases: Vec<(Vec<PairRequest>, &str)> = vec![
        (vec![pair(a, a, 4096, "regret")], "remeasure.csv:2: column best: the pick is the best"),
        (vec![pair("decode.warp.tn999", b, 4096, "regret")], "remeasure.csv:2: column pick: unknown candidate"),
        (
            vec![pair(a, b, 4096, "noise")],
            "remeasure.csv:2: column limit: \"noise\" is not one of regret, bound, stalled",
        ),
        (vec![negative], "remeasure.csv:2: column regret: -0.1 is not a non-negative regret"),
        (
            vec![pair(a, b, 4096, "regret"), pair(b, a, 4096, "bound")],
            "remeasure.csv:3: column source_format: duplicate cell (first at line 2)",
        ),
    ];
    for (rows, want) in cases {
        write_csv(&p, &rows).unwrap();
        let e = err_of(read_pair_requests(&p));
        assert!(e.contains(want), "want {want:?} in {e}");
    }
}

fn dense(m: usize, dispatched: Option<(&str, Option<f64>)>) -> DenseMRow {
    DenseMRow {
        mode: "graph".parse().unwrap(),
        source_format: "Q4_0".parse().unwrap(),
        codebook: "s4".parse().unwrap(),
        n: 151_936,
        k: 4096,
        m,
        m1_candidate: "decode.wide.tn128.cpt2".parse().unwrap(),
        bpp: 128,
        timed: 12,
        best: "grouped.imma.32x128.w1x4.std".parse().unwrap(),
        best_us: 640.5,
        dispatched: dispatched.map(|d| d.0.parse().unwrap()),
        dispatched_us: dispatched.and_then(|d| d.1),
        note: String::new(),
    }
}

#[test]
fn dense_m_rows_round_trip_and_bad_rows_are_named() {
    let r16 = "grouped.rows.r16";
    let good = vec![dense(31, Some((r16, Some(1158.0)))), dense(32, Some((r16, None))), dense(33, None)];
    let p = tmp("dense-m.csv");
    write_csv(&p, &good).unwrap();
    assert_eq!(read_dense_m(&p).unwrap(), good);
    let mut wrong_codebook = dense(31, None);
    wrong_codebook.codebook = "u4".parse().unwrap();
    let mut orphan = dense(31, None);
    orphan.dispatched_us = Some(3.0);
    let mut slow = dense(31, None);
    slow.best_us = 0.0;
    let cases: Vec<(Vec<DenseMRow>, &str)> = vec![
        (vec![dense(31, Some(("grouped.rows.r99", Some(1.0))))], "dense-m.csv:2: column dispatched: unknown candidate"),
        (vec![wrong_codebook], "dense-m.csv:2: column codebook: u4 is not the codebook of Q4_0"),
        (vec![orphan], "dense-m.csv:2: column dispatched_us: a time without a dispatched candidate"),
        (vec![slow], "dense-m.csv:2: column best_us: 0 is not a positive time"),
        (vec![dense(31, None), dense(31, None)], "dense-m.csv:3: column m: duplicate (mode, source format, N, K, M)"),
    ];
    for (rows, want) in cases {
        write_csv(&p, &rows).unwrap();
        let e = err_of(read_dense_m(&p));
        assert!(e.contains(want), "{e}\nwanted {want}");
    }
}
