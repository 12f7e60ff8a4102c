//! Profiler evidence without a GPU: Nsight Compute's CSV as recorded on the H200 (the first 27
//! requests of the family-smoke profile's top-1 pass: decode, two-kernel grouped candidates with
//! their ordered reduce, mma16 and IMMA tiles; one file per pass, hardware counters and SASS
//! counts) is parsed, its units normalised whatever scale ncu chose, the passes joined and bound
//! to the requests in launch order, and refused where it does not belong to them or to the
//! corpus.

use std::path::{Path, PathBuf};

use vnni_corpus::evidence::{self, chunk_path, EvidenceRow, ProfileRequest, EVIDENCE, NCU_DIR};
use vnni_corpus::ncu::{self, Pass};
use vnni_corpus::TimingRow;
use vnni_kernels::{L2Prefetch, Mode};

const CORPUS: &str = "dd3e83578a673e49b37a05e64434f135368fed5e769ee4fa104d8d04dce47a27";
const OTHER: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn scratch() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "vnni-evidence-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(NCU_DIR)).unwrap();
    dir
}

fn recorded_requests() -> Vec<ProfileRequest> {
    let mut r = csv::Reader::from_path(data("requests-h200-family-smoke.csv")).unwrap();
    r.deserialize().collect::<Result<_, _>>().unwrap()
}

/// ncu's output for the recorded requests, one text per pass of [`Pass::PROFILED`].
fn recorded_ncu() -> [String; 2] {
    Pass::PROFILED.map(|p| std::fs::read_to_string(data(&format!("ncu-h200-family-smoke.{}.csv", p.name()))).unwrap())
}

/// An evidence directory of the recorded requests (one chunk) with `ncu` as ncu's output.
fn evidence_dir(ncu: &[String; 2]) -> (PathBuf, Vec<ProfileRequest>) {
    evidence_dir_of(recorded_requests(), ncu)
}

fn evidence_dir_of(requests: Vec<ProfileRequest>, ncu: &[String; 2]) -> (PathBuf, Vec<ProfileRequest>) {
    let dir = scratch();
    let target = evidence::Target {
        device: "NVIDIA H200".into(),
        arch: "sm_90".into(),
        kernel_source_digest: vnni_kernels::cuda::source::kernel_source_digest(),
        l2_prefetch: L2Prefetch::Programmatic,
    };
    evidence::write_requests(&dir, CORPUS, &requests, requests.len(), &target).unwrap();
    for (pass, text) in Pass::PROFILED.iter().zip(ncu) {
        std::fs::write(chunk_path(&dir, 0, *pass), text).unwrap();
    }
    (dir, requests)
}

fn err<T, E: std::fmt::Display>(r: Result<T, E>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

/// The worker launches the requests under the corpus's L2 prefetch rule, which the manifest
/// carries; a manifest written before the rule existed reads as the prefetch on every launch.
#[test]
fn the_request_manifest_carries_the_l2_prefetch_rule() {
    let (dir, _) = evidence_dir(&recorded_ncu());
    let (manifest, _) = evidence::read_requests(&dir, CORPUS).unwrap();
    assert_eq!(manifest.decode_l2_prefetch(), L2Prefetch::Programmatic);
    let path = dir.join(evidence::REQUEST_MANIFEST);
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["l2_prefetch"], "programmatic");
    json.as_object_mut().unwrap().remove("l2_prefetch");
    std::fs::write(&path, serde_json::to_string(&json).unwrap()).unwrap();
    let (older, _) = evidence::read_requests(&dir, CORPUS).unwrap();
    assert_eq!((older.l2_prefetch, older.decode_l2_prefetch()), (None, L2Prefetch::Always));
}

#[test]
fn recorded_ncu_output_binds_to_its_requests() {
    let (dir, requests) = evidence_dir(&recorded_ncu());
    let rows = evidence::write_evidence(&dir, CORPUS).unwrap();
    let expected: usize = requests.iter().map(|r| r.kernel_symbols().len()).sum();
    assert_eq!(rows.len(), expected);
    assert_eq!(requests.len(), 27);
    // every request's records, in launch order: its kernel, then the reduce of two-phase ones
    let mut at = 0;
    for req in &requests {
        for (i, symbol) in req.kernel_symbols().iter().enumerate() {
            let row = &rows[at];
            assert_eq!((row.request, row.record), (req.request, i));
            assert!(ncu::names_symbol(&row.kernel, symbol), "{} is not {symbol}", row.kernel);
            assert!(row.registers > 0 && row.profiled_duration_ns > 1000.0, "{row:?}");
            at += 1;
        }
    }
    let two_kernel = requests.iter().filter(|r| r.kernel_symbols().len() == 2).count();
    assert!(two_kernel >= 10, "the fixture holds two-kernel candidates");
    // the IMMA path is taken exactly where the registry says, and nothing spills
    assert!(evidence::check_claims(&requests, &rows).is_empty(), "{:?}", evidence::check_claims(&requests, &rows));
    let imma: Vec<_> = rows.iter().filter(|r| r.record == 0 && r.candidate.as_str().contains("imma")).collect();
    assert!(!imma.is_empty() && imma.iter().all(|r| r.imma_insts > 0));
    // the reduce reads its partials as full 32-byte sectors
    assert!(rows.iter().filter(|r| r.record == 1).all(|r| r.bytes_per_sector == Some(32.0)));
    // the IMMA tiles stage their operands with cp.async only: their sectors are the SASS
    // LDGSTS sectors, not counted twice (L1's hardware counter of global loads includes them,
    // which halved the bytes per sector)
    for r in &imma {
        assert!(r.bytes_per_sector.is_some_and(|b| b > 20.0), "{r:?}");
    }
    let (_, again) = evidence::verify(&dir, CORPUS).unwrap();
    assert_eq!(again, rows);
    // ncu's own count of replay passes rides along: one per pass on the H200, the point of the
    // split (all metrics in one process need three, at several times the cost)
    for (pass, text) in Pass::PROFILED.iter().zip(recorded_ncu()) {
        let records = ncu::parse(Path::new("ncu.csv"), &text, *pass).unwrap();
        assert!(records.iter().all(|r| r.replay_passes == Some(1)), "{pass:?}: {:?}", records[0].replay_passes);
    }
}

/// ncu prints a unit per metric and may scale it differently in another report: `ns` here,
/// `usecond` or `msecond` there, `byte` or `Kbyte`. The evidence is the same.
#[test]
fn unit_switches_give_the_same_evidence() {
    let text = recorded_ncu();
    let (dir, _) = evidence_dir(&text);
    let base = evidence::write_evidence(&dir, CORPUS).unwrap();
    let rescaled = |metric: &str, unit: &str, divisor: f64| text.clone().map(|t| rescale(&t, metric, unit, divisor));
    for (metric, unit, divisor) in [
        ("gpu__time_duration.sum", "usecond", 1e3),
        ("gpu__time_duration.sum", "msecond", 1e6),
        ("launch__shared_mem_per_block_static", "Kbyte/block", 1e3),
        ("smsp__sass_data_bytes_mem_global_op_ld.sum", "Mbyte", 1e6),
    ] {
        let (dir, _) = evidence_dir(&rescaled(metric, unit, divisor));
        let scaled = evidence::write_evidence(&dir, CORPUS).unwrap();
        for (a, b) in base.iter().zip(&scaled) {
            let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(1.0);
            assert!(close(a.profiled_duration_ns, b.profiled_duration_ns), "{metric} in {unit}");
            assert_eq!(
                (a.shared_static_bytes, a.global_load_bytes, a.registers),
                (b.shared_static_bytes, b.global_load_bytes, b.registers),
                "{metric} in {unit}"
            );
        }
    }
    // a unit of another class is refused, naming the line and the metric
    let (dir, _) = evidence_dir(&rescaled("gpu__time_duration.sum", "byte", 1.0));
    let e = err(evidence::write_evidence(&dir, CORPUS));
    assert!(e.contains("000000.hw.csv:5: column gpu__time_duration.sum") && e.contains("\"byte\""), "{e}");
}

/// `text` with `metric`'s unit replaced and its values divided, printed as ncu prints them
/// (unchanged where ncu did not collect `metric`).
fn rescale(text: &str, metric: &str, unit: &str, divisor: f64) -> String {
    let mut out = String::new();
    let mut col = None;
    let mut data_line = 0;
    for line in text.lines() {
        if line.starts_with("==") {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let mut rec: Vec<String> = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(line.as_bytes())
            .records()
            .next()
            .unwrap()
            .unwrap()
            .iter()
            .map(String::from)
            .collect();
        data_line += 1;
        match data_line {
            1 => col = rec.iter().position(|h| h == metric),
            2 => {
                if let Some(c) = col {
                    rec[c] = unit.to_string();
                }
            }
            _ => {
                if let Some(c) = col {
                    let v: f64 = rec[c].replace(',', "").parse().unwrap();
                    rec[c] = format!("{}", v / divisor);
                }
            }
        }
        let mut w = csv::WriterBuilder::new().quote_style(csv::QuoteStyle::Always).from_writer(Vec::new());
        w.write_record(&rec).unwrap();
        out.push_str(&String::from_utf8(w.into_inner().unwrap()).unwrap());
    }
    out
}

#[test]
fn evidence_of_another_corpus_or_other_requests_is_refused() {
    let (dir, requests) = evidence_dir(&recorded_ncu());
    evidence::write_evidence(&dir, CORPUS).unwrap();
    // drawn from another corpus
    let e = err(evidence::verify(&dir, OTHER));
    assert!(e.contains("requests drawn from corpus dd3e8357") && e.contains("not from corpus 00000000"), "{e}");
    // a request the corpus never measured (here: its rows lack the first request's candidate)
    let rows: Vec<TimingRow> = requests.iter().skip(1).map(row_of).collect();
    let e = err(evidence::check_requests_against(&dir.join("requests.csv"), &requests, &rows));
    assert!(
        e.contains("request 0: Q4_0 s4 M=1 256x2304 eager decode.fused.c16.waves32")
            && e.contains("not an eligible row"),
        "{e}"
    );
    let all: Vec<TimingRow> = requests.iter().map(row_of).collect();
    evidence::check_requests_against(&dir.join("requests.csv"), &requests, &all).unwrap();
    // requests whose registry claims this registry does not make
    let mut other = requests.clone();
    let imma = other.iter().position(|r| r.imma).expect("the fixture holds IMMA requests");
    other[imma].imma = false;
    let e = err(evidence::check_requests_against(&dir.join("requests.csv"), &other, &all));
    assert!(
        e.contains(&format!("request {imma} "))
            && e.contains("the registry now launches")
            && e.contains("profile again"),
        "{e}"
    );
    // requests edited after their manifest
    let path = dir.join("requests.csv");
    let text = std::fs::read_to_string(&path).unwrap().replacen("waves32", "waves16", 1);
    std::fs::write(&path, text).unwrap();
    assert!(err(evidence::verify(&dir, CORPUS)).contains("requests.csv: changed since its manifest"));
}

#[test]
fn records_that_do_not_match_the_launches_are_refused() {
    let [hw, sass] = recorded_ncu();
    let lines = |t: &str| -> Vec<String> { t.lines().map(String::from).collect() };
    let text = |l: &[String]| -> String { l.iter().map(|l| format!("{l}\n")).collect() };
    // one record short in one pass (its last launch was not profiled)
    let short = text(&lines(&sass)[..lines(&sass).len() - 1]);
    let (dir, _) = evidence_dir(&[hw.clone(), short]);
    let e = err(evidence::write_evidence(&dir, CORPUS));
    assert!(e.contains("000000.sass.csv: 38 records for requests 0..27 that launch 39 kernels"), "{e}");
    // two records swapped: a reduce where a kernel of the candidate was launched
    let mut swapped = [lines(&hw), lines(&sass)];
    let first_data = swapped[0].iter().position(|l| l.starts_with("\"0\"")).unwrap();
    swapped[0].swap(first_data + 3, first_data + 4);
    let (dir, _) = evidence_dir(&[text(&swapped[0]), sass.clone()]);
    let e = err(evidence::write_evidence(&dir, CORPUS));
    assert!(e.contains("column ID: record 4 where record 3 was expected (launch order)"), "{e}");
    // ... and renumbered: the ids are in order, the kernels are not, and the passes disagree
    let renumber = |l: &mut Vec<String>| {
        l[first_data + 3] = l[first_data + 3].replacen("\"4\"", "\"3\"", 1);
        l[first_data + 4] = l[first_data + 4].replacen("\"3\"", "\"4\"", 1);
    };
    renumber(&mut swapped[0]);
    let (dir, _) = evidence_dir(&[text(&swapped[0]), sass.clone()]);
    let e = err(evidence::write_evidence(&dir, CORPUS));
    assert!(e.contains("000000.sass.csv: line") && e.contains("the passes profiled different launches"), "{e}");
    // ... in both passes alike: bound to the requests, the kernel is not the one launched there
    let s_first = swapped[1].iter().position(|l| l.starts_with("\"0\"")).unwrap();
    swapped[1].swap(s_first + 3, s_first + 4);
    renumber(&mut swapped[1]);
    let (dir, _) = evidence_dir(&swapped.clone().map(|l| text(&l)));
    let e = err(evidence::write_evidence(&dir, CORPUS));
    assert!(
        e.contains("record 3 is kernel \"vnni_reduce_partials\", request 2")
            && e.contains("launches vnni_grouped_rows"),
        "{e}"
    );
    // the passes' launch statistics disagree: not the same launch
    let registers = rescale(&sass, "launch__registers_per_thread", "register/thread", 0.5);
    let (dir, _) = evidence_dir(&[hw.clone(), registers]);
    let e = err(evidence::write_evidence(&dir, CORPUS));
    assert!(e.contains("with another launch__registers_per_thread"), "{e}");
    // ncu reported an error
    let (dir, _) = evidence_dir(&[format!("==ERROR== the profiler failed\n{hw}"), sass.clone()]);
    assert!(err(evidence::write_evidence(&dir, CORPUS)).contains("ncu reported an error"));
    // a metric ncu did not collect
    let renamed = hw.replacen("\"sm__inst_executed_pipe_tensor_op_imma.sum\"", "\"sm__other.sum\"", 1);
    let (dir, _) = evidence_dir(&[renamed, sass.clone()]);
    assert!(err(evidence::write_evidence(&dir, CORPUS))
        .contains("sm__inst_executed_pipe_tensor_op_imma.sum was not collected"));
    // the passes' files swapped: each lacks the other's metrics
    let (dir, _) = evidence_dir(&[sass, hw]);
    assert!(err(evidence::write_evidence(&dir, CORPUS)).contains("was not collected"));
}

#[test]
fn edited_evidence_is_refused_and_a_missing_chunk_is_named() {
    let (dir, _) = evidence_dir(&recorded_ncu());
    evidence::write_evidence(&dir, CORPUS).unwrap();
    let path = dir.join(EVIDENCE);
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replacen(",0,", ",1,", 1);
    assert_ne!(edited, text);
    std::fs::write(&path, edited).unwrap();
    assert!(err(evidence::verify(&dir, CORPUS)).contains("evidence.csv: changed since its manifest"));
    std::fs::remove_file(chunk_path(&dir, 0, Pass::Instrumented)).unwrap();
    assert!(err(evidence::verify(&dir, CORPUS)).contains("this chunk was not profiled"));
}

#[test]
fn a_spill_or_a_missing_imma_path_fails_the_claims() {
    let (dir, requests) = evidence_dir(&recorded_ncu());
    let mut rows = evidence::write_evidence(&dir, CORPUS).unwrap();
    let imma = rows.iter().position(|r| r.record == 0 && r.candidate.as_str().contains("imma")).unwrap();
    rows[imma].imma_insts = 0;
    rows[0].local_store_insts = 3;
    let claims = evidence::check_claims(&requests, &rows);
    assert_eq!(claims.len(), 2, "{claims:?}");
    assert!(claims[0].contains("3 local-memory instructions (a spill)"), "{claims:?}");
    assert!(claims[1].contains("the registry says IMMA"), "{claims:?}");
}

/// A corpus row of the request's key (eligible, timed).
fn row_of(r: &ProfileRequest) -> TimingRow {
    TimingRow {
        backend: "cuda".parse().unwrap(),
        arch: "sm_90".into(),
        device: "NVIDIA H200".into(),
        mode: r.mode,
        source_format: Some(r.source_format),
        codebook: Some(r.codebook),
        m: r.m,
        n: r.n,
        k: r.k,
        candidate: r.candidate.clone(),
        m1_candidate: r.m1_candidate.clone(),
        bpp: r.bpp,
        warmups: 2,
        samples: 12,
        replays: 2,
        weight_copies: 1,
        seed: 7,
        min_us: 9.0,
        median_us: 10.0 + r.rank as f64,
        p95_us: 11.0 + r.rank as f64,
        mad_us: 0.1,
        cv: 0.01,
        weight_bytes: 1 << 20,
        gbps: 100.0,
        pct_copy_bw: 3.0,
        checked: r.n,
        mismatches: 0,
        first_mismatch: String::new(),
        eligible: true,
        dropped: false,
        registers: 64,
        occupancy_blocks_per_sm: 8,
    }
}

/// The selection draws the same requests from the corpus rows: the top K per cell and mode,
/// the two-phase and IMMA flags from the registry.
#[test]
fn requests_are_drawn_from_the_corpus_rows() {
    let recorded = recorded_requests();
    let rows: Vec<TimingRow> = recorded.iter().map(row_of).collect();
    let selection = evidence::Selection { top: Some(3), ..Default::default() };
    let drawn = evidence::plan_requests(Path::new("corpus"), &rows, &selection).unwrap();
    let key = |r: &ProfileRequest| (r.key(), r.rank, r.kernels.clone(), r.imma);
    let mut a: Vec<_> = drawn.iter().map(key).collect();
    let mut b: Vec<_> = recorded.iter().map(key).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    // two slower candidates in the first cell: drawn by the top 3, not by the top 1
    let mut more = rows.clone();
    for (rank, c) in [(2, "decode.fused.c32.waves16"), (3, "decode.fused.c32.cap32")] {
        more.push(row_of(&ProfileRequest { candidate: c.parse().unwrap(), rank, ..recorded[0].clone() }));
    }
    let drawn = evidence::plan_requests(Path::new("corpus"), &more, &selection).unwrap();
    assert_eq!(drawn.len(), recorded.len() + 2);
    let top1 = evidence::Selection { top: Some(1), ..Default::default() };
    let drawn = evidence::plan_requests(Path::new("corpus"), &more, &top1).unwrap();
    assert!(drawn.iter().all(|r| r.rank == 1) && drawn.len() == recorded.len(), "{}", drawn.len());
}

/// A candidate asked for in both modes of a cell is launched once (in the first mode), and its
/// request stands for both: each record gives one row per mode, the claims are checked once per
/// record, and the corpus must have measured it in every mode the request names.
#[test]
fn one_launch_stands_for_every_mode_it_was_asked_for_in() {
    let recorded = recorded_requests();
    let graph = |r: &ProfileRequest| TimingRow { mode: Mode::Graph, ..row_of(r) };
    let mut rows: Vec<TimingRow> = recorded.iter().map(row_of).collect();
    rows.extend(recorded.iter().map(graph));
    let top3 = evidence::Selection { top: Some(3), ..Default::default() };
    let drawn = evidence::plan_requests(Path::new("corpus"), &rows, &top3).unwrap();
    assert_eq!(drawn.len(), recorded.len());
    for (d, r) in drawn.iter().zip(&recorded) {
        assert_eq!(
            (d.key(), d.modes.as_str(), d.stands_for()),
            (r.key(), "eager;graph", vec![Mode::Eager, Mode::Graph])
        );
    }
    // the recorded ncu output binds to them: twice the rows, the same metrics in both modes
    let (dir, requests) = evidence_dir_of(drawn.clone(), &recorded_ncu());
    let ev = evidence::write_evidence(&dir, CORPUS).unwrap();
    let records: usize = requests.iter().map(|r| r.kernel_symbols().len()).sum();
    assert_eq!(ev.len(), 2 * records);
    for pair in ev.chunks(2) {
        assert_eq!((pair[0].mode, pair[1].mode), (Mode::Eager, Mode::Graph));
        assert!(pair.iter().all(|r| r.profiled_mode == Mode::Eager));
        assert_eq!(EvidenceRow { mode: Mode::Eager, ..pair[1].clone() }, pair[0]);
    }
    let by_key = evidence::by_key(&ev);
    assert!(requests.iter().flat_map(|r| r.keys()).all(|k| by_key.contains_key(&k)));
    assert_eq!(evidence::verify(&dir, CORPUS).unwrap().1, ev);
    let mut spilled = ev.clone();
    spilled[0].local_store_insts = 1;
    spilled[1].local_store_insts = 1;
    assert_eq!(evidence::check_claims(&requests, &spilled).len(), 1, "one record, one violation");
    // a corpus that never timed the candidate in graph mode did not ask for that key
    let eager_only: Vec<TimingRow> = recorded.iter().map(row_of).collect();
    let e = err(evidence::check_requests_against(&dir.join("requests.csv"), &requests, &eager_only));
    assert!(e.contains("request 0: Q4_0 s4 M=1 256x2304 graph") && e.contains("not an eligible row"), "{e}");
    // ranks differ between modes: each candidate is launched in the first mode that asked for it
    // (the first cell's recorded pick and two slower candidates of its shape)
    let first_cell: Vec<ProfileRequest> = [None, Some("decode.fused.c32.waves16"), Some("decode.fused.c32.cap32")]
        .iter()
        .enumerate()
        .map(|(i, c)| ProfileRequest {
            candidate: c.map_or(recorded[0].candidate.clone(), |c| c.parse().unwrap()),
            rank: i + 1,
            ..recorded[0].clone()
        })
        .collect();
    let mut rows: Vec<TimingRow> = recorded.iter().map(row_of).collect();
    rows.extend(first_cell[1..].iter().map(row_of));
    for (i, r) in first_cell.iter().enumerate() {
        // graph ranks them second, third, first
        rows.push(TimingRow { median_us: [12.0, 13.0, 11.0][i], ..graph(r) });
    }
    let top2 = evidence::Selection { top: Some(2), ..Default::default() };
    let drawn = evidence::plan_requests(Path::new("corpus"), &rows, &top2).unwrap();
    let cell_of = |r: &ProfileRequest| (r.source_format, r.n, r.k, r.m);
    let first = |r: &&ProfileRequest| cell_of(r) == cell_of(&recorded[0]);
    let cell: Vec<(&str, Mode, &str)> =
        drawn.iter().filter(first).map(|r| (r.candidate.as_str(), r.mode, r.modes.as_str())).collect();
    let id = |i: usize| first_cell[i].candidate.as_str();
    assert_eq!(
        cell,
        vec![(id(0), Mode::Eager, "eager;graph"), (id(1), Mode::Eager, "eager"), (id(2), Mode::Graph, "graph")]
    );
    // rows that time one key twice are refused, not folded into `eager;eager`
    let mut twice: Vec<TimingRow> = recorded.iter().map(row_of).collect();
    twice.push(row_of(&recorded[0]));
    let e = err(evidence::plan_requests(Path::new("corpus"), &twice, &top2));
    assert!(e.contains("decode.fused.c16.waves32 (bpp 2) is measured twice"), "{e}");
    // requests.csv naming modes out of order, or not the profiled one first, is refused by line
    for modes in ["graph;eager", "graph", "eager;eager", "eager;batch"] {
        let mut bad = drawn.clone();
        bad[0].modes = modes.into();
        let (dir, _) = evidence_dir_of(bad, &recorded_ncu());
        let e = err(evidence::read_requests(&dir, CORPUS));
        assert!(
            e.contains("requests.csv:2: column modes") && e.contains("the profiled mode eager first"),
            "{modes}: {e}"
        );
    }
}
