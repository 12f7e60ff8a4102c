//! End to end on sealed synthetic corpora: totality, gates, alias collapse, overlays,
//! borrowing, determinism, authentication, the sealed ledger, the cost models of CUDA decode
//! domains.

mod common;

use std::collections::BTreeSet;

use vnni_kernels::SourceFormat;
use vnni_learner::cv::Folds;
use vnni_learner::regret::{minimax_winner, REGRET_CAP};
use vnni_learner::synthetic::{half_octaves, Spec};
use vnni_learner::{corpus, domains, fit, FitError, FitOptions};
use vnni_policy::Via;

/// A smaller CPU corpus for the tests that do not need the full grid.
fn small(seed: u64) -> Spec {
    Spec { ns: half_octaves(256, 8192), ks: half_octaves(256, 4096), ms: vec![1, 4], ..Spec::cpu(seed) }
}

#[test]
fn the_policy_is_total_passes_its_gates_and_is_reproducible() {
    let dir = common::corpus("total", &Spec::cpu(1));
    let a = fit(&dir, &FitOptions::default()).unwrap();
    let p = &a.policy;
    p.check().unwrap();
    p.check_registry().unwrap();
    assert_eq!(p.codebooks, ["s4", "s8", "u4"]);
    assert!(p.gates.passed, "{:?}", p.gates);
    assert_eq!(p.gates.domains_with_data, p.domains.len() as u64);
    let sealed = p.gates.sealed.as_ref().expect("the corpus has sealed rows");
    assert!(sealed.passed && sealed.rows > 0, "{sealed:?}");
    // The policy beats the best single candidate somewhere (the trees split).
    let better = a.domains.iter().filter_map(|d| d.summaries()).any(|s| s[0].geomean_regret < s[1].geomean_regret);
    assert!(better);
    let again = fit(&dir, &FitOptions::default()).unwrap();
    assert_eq!(p.to_bytes(), again.policy.to_bytes());
    // Domains fit on several threads; how many does not change a byte (nor the report's data).
    for threads in [1, 3] {
        let other = fit(&dir, &FitOptions { threads: Some(threads), ..Default::default() }).unwrap();
        assert_eq!(p.to_bytes(), other.policy.to_bytes(), "{threads} threads");
        assert_eq!(format!("{:?}", a.domains), format!("{:?}", other.domains), "{threads} threads");
    }
}

#[test]
fn aliases_collapse_to_one_candidate_per_runtime_key() {
    let spec = Spec {
        formats: vec![SourceFormat::Q4_1, SourceFormat::Q4_K],
        overlay: half_octaves(256, 8192).into_iter().map(|n| (n, 1024)).collect(),
        ..small(2)
    };
    let dir = common::corpus("alias", &spec);
    let f = fit(&dir, &FitOptions::default()).unwrap();
    assert_eq!(f.policy.codebooks, ["u4"]);
    let c = corpus::load(&dir).unwrap();
    let skeleton = domains::skeleton(&c);
    let mut disagreements = 0;
    for (d, keys) in domains::samples(&c, &skeleton, false).iter().filter(|(d, _)| d.bucket == 0) {
        for s in keys.iter().filter(|s| s.k == 1024) {
            assert_eq!(s.cells.len(), 2, "both aliases measured");
            let per_alias: Vec<&[f64]> = s.cells.iter().map(|&i| c.cells[i].regret.as_slice()).collect();
            let winner = minimax_winner(&per_alias, |_| true).unwrap();
            let alone: BTreeSet<usize> = per_alias.iter().map(|r| minimax_winner(&[r], |_| true).unwrap()).collect();
            disagreements += usize::from(alone.len() > 1);
            let o: Vec<_> = f.policy.overlays.iter().filter(|o| o.m_bucket == 0 && (o.n, o.k) == (s.n, s.k)).collect();
            assert_eq!(o.len(), 1, "{d}: one overlay for {}x{}", s.n, s.k);
            assert_eq!(c.decode[winner].id, o[0].candidate);
        }
    }
    assert!(disagreements > 0, "the aliases never disagree: the test would prove nothing");
}

#[test]
fn wrong_bits_never_reach_the_policy() {
    let wrong = "cpu.decode.wide.t64".to_string();
    let spec = Spec {
        formats: vec![SourceFormat::Q4_1, SourceFormat::Q4_K],
        wrong_bits: Some((SourceFormat::Q4_1, wrong.parse().unwrap())),
        overlay: vec![(1024, 1024), (4096, 512)],
        ..small(3)
    };
    let dir = common::corpus("wrong", &spec);
    let f = fit(&dir, &FitOptions::default()).unwrap();
    assert!(f.policy.overlays.iter().all(|o| o.candidate != wrong));
    for d in &f.policy.domains {
        assert!(!serde_json::to_string(&d.tree).unwrap().contains(&wrong), "{} names {wrong}", d.codebook);
    }
    let c = corpus::load(&dir).unwrap();
    let idx = c.decode.iter().position(|x| x.id == wrong).unwrap();
    assert!(c.cells.iter().filter(|x| x.format == SourceFormat::Q4_1 && x.m == 1).all(|x| x.regret[idx] == REGRET_CAP));
}

#[test]
fn overlays_take_precedence_and_certification_turns_them_off() {
    let literal = "cpu.decode.kpar.t64.kb4".to_string();
    let spec = Spec { boost: Some((literal.parse().unwrap(), 2048, 2048)), overlay: vec![(2048, 2048)], ..small(4) };
    let dir = common::corpus("overlay", &spec);
    let p = fit(&dir, &FitOptions::default()).unwrap().policy;
    let on = p.select("s4", "eager", 1, 2048, 2048).unwrap();
    assert_eq!((on.candidate.id.as_str(), on.via), (literal.as_str(), Via::Overlay));
    let off = p.select_with("s4", "eager", 1, 2048, 2048, false).unwrap();
    assert_eq!(off.via, Via::Tree);
    assert!(off.candidate.generic_legal && off.candidate.id != literal);
    // Grouped rows inherit the overlay's bpp.
    let grouped = p.select("s4", "eager", 4, 2048, 2048).unwrap();
    assert_eq!(grouped.bpp, on.bpp);
    // A neighbouring shape has no overlay.
    assert_eq!(p.select("s4", "eager", 1, 2048, 3072).unwrap().via, Via::Tree);
}

#[test]
fn grouped_cross_validation_never_splits_a_geometry() {
    let dir = common::corpus("folds", &small(5));
    let c = corpus::load(&dir).unwrap();
    let skeleton = domains::skeleton(&c);
    let dev = domains::samples(&c, &skeleton, false);
    let geometries: BTreeSet<(u64, u64)> = dev.values().flatten().map(|s| s.geometry()).collect();
    let folds = Folds::new(geometries.iter().copied(), 5);
    let mut tested = BTreeSet::new();
    for f in 0..folds.count {
        // Across every domain (so every M, mode and codebook) of this fold.
        let (mut train, mut test) = (BTreeSet::new(), BTreeSet::new());
        for samples in dev.values() {
            let refs: Vec<_> = samples.iter().collect();
            let (tr, te) = folds.split(&refs, f);
            train.extend(tr.iter().map(|s| s.geometry()));
            test.extend(te.iter().map(|s| s.geometry()));
        }
        assert!(train.is_disjoint(&test), "fold {f} mixes {:?}", train.intersection(&test).collect::<Vec<_>>());
        assert!(!test.is_empty());
        assert!(tested.is_disjoint(&test), "a geometry is held out twice");
        tested.extend(test);
    }
    assert_eq!(tested, geometries, "every geometry is held out once");
    // Whole geometries go together: every development cell (any M, mode, format) of a
    // geometry held out in fold 0 is in some domain's test keys of fold 0.
    let held: BTreeSet<usize> = dev
        .values()
        .flat_map(|s| folds.split(&s.iter().collect::<Vec<_>>(), 0).1)
        .flat_map(|s| s.cells.iter().copied())
        .collect();
    let test0: BTreeSet<(u64, u64)> = geometries.iter().copied().filter(|&g| folds.of(g) == 0).collect();
    let expected: BTreeSet<usize> =
        (0..c.cells.len()).filter(|&i| !c.cells[i].sealed && test0.contains(&(c.cells[i].n, c.cells[i].k))).collect();
    assert_eq!(held, expected);
}

#[test]
fn gates_fail_when_the_thresholds_cannot_be_met() {
    let dir = common::corpus("gates", &small(6));
    let strict = FitOptions { p95_max: 1e-9, ucb_max: 1e-9, ..Default::default() };
    let g = fit(&dir, &strict).unwrap().policy.gates;
    assert!(!g.passed);
    assert!(g.domains_passing < g.domains_with_data);
    assert_eq!((g.p95_max, g.ucb_max), (1e-9, 1e-9));
    // The UCB gate on its own: a generous p95 but an impossible UCB fails every domain.
    let ucb_only = FitOptions { p95_max: 1.0, ucb_max: 1e-9, ..Default::default() };
    let g = fit(&dir, &ucb_only).unwrap().policy.gates;
    assert_eq!(g.domains_passing, 0);
    let loose = FitOptions { p95_max: 1.0, ucb_max: 1.0, ..Default::default() };
    let g = fit(&dir, &loose).unwrap().policy.gates;
    assert!(g.passed && g.domains_passing == g.domains_with_data);
}

#[test]
fn a_failed_seal_is_recorded_and_never_refit() {
    let root = common::scratch("ledger");
    let dir = root.join("corpus");
    vnni_learner::synthetic::write(&dir, &small(7)).unwrap();
    let ledger = root.join("out").join("sealed-ledger.json");
    let ok = FitOptions { ledger: Some(ledger.clone()), ..Default::default() };
    // A passing certification is recorded and does not block a rerun.
    fit(&dir, &ok).unwrap();
    fit(&dir, &ok).unwrap();
    let failing = FitOptions { p95_max: 0.0, ledger: Some(ledger.clone()), ..Default::default() };
    let f = fit(&dir, &failing).unwrap();
    let id = f.policy.provenance.corpus_id.clone();
    assert!(!f.policy.gates.sealed.unwrap().passed);
    let recorded = vnni_learner::ledger::read(&ledger).unwrap();
    assert!(!recorded.entries[&id].passed);
    for opts in [&ok, &failing] {
        let err = fit(&dir, opts).unwrap_err();
        assert!(matches!(err, FitError::SealFailedBefore { .. }), "{err}");
        assert!(err.to_string().contains(&id) && err.to_string().contains("sealed-ledger.json"), "{err}");
    }
}

#[test]
fn unsealed_or_tampered_corpora_are_refused_by_name() {
    let dir = common::corpus("tamper", &small(8));
    let csv = dir.join("decode_m1.development.csv");
    let mut bytes = std::fs::read(&csv).unwrap();
    let at = bytes.len() - 5;
    bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(&csv, &bytes).unwrap();
    let err = fit(&dir, &FitOptions::default()).unwrap_err().to_string();
    assert!(err.contains("decode_m1.development.csv") && err.contains("not sealed or fails verification"), "{err}");
    std::fs::remove_file(dir.join("corpus.manifest.json")).unwrap();
    let err = fit(&dir, &FitOptions::default()).unwrap_err().to_string();
    assert!(err.contains("corpus.manifest.json"), "{err}");
}

#[test]
fn domains_without_data_borrow_the_nearest_tree() {
    // Only vocabulary-head shapes (N/K >= 8): decode aspect 0 has no rows and borrows aspect 1's tree.
    let spec = Spec {
        ns: vec![8192, 12288, 16384, 24576, 32768],
        ks: vec![256, 384, 512, 768, 1024],
        sealed_every: 0,
        ..small(9)
    };
    let dir = common::corpus("borrow", &spec);
    let f = fit(&dir, &FitOptions::default()).unwrap();
    let decode: Vec<_> = f.policy.domains.iter().filter(|d| d.codebook == "s4" && d.m_bucket == 0).collect();
    assert_eq!(decode.len(), 2);
    assert!(decode[1].stats.is_some());
    assert!(decode[0].stats.is_none());
    assert_eq!(decode[0].tree, decode[1].tree);
    let borrowed = f.domains.iter().find(|d| d.key.codebook == "s4" && d.key.aspect == Some(0)).unwrap();
    assert_eq!(borrowed.borrowed_from.as_ref().unwrap().aspect, Some(1));
    assert!(f.policy.gates.sealed.is_none(), "no sealed rows, nothing certified");
    // Grouped domains have data; every codebook still owns every domain.
    f.policy.check().unwrap();
    assert!(f.policy.domains.iter().filter(|d| d.m_bucket > 0).all(|d| d.stats.is_some()));
}

#[test]
fn the_report_has_markdown_and_decision_maps() {
    let root = common::scratch("report");
    let dir = root.join("corpus");
    vnni_learner::synthetic::write(&dir, &small(10)).unwrap();
    let f = fit(&dir, &FitOptions::default()).unwrap();
    let files = vnni_learner::report::write_report(&f, &root.join("report")).unwrap();
    let md = std::fs::read_to_string(&files[0]).unwrap();
    for needle in ["policy", "best single", "log2 lookup", "auto", "Sealed certification", ".png"] {
        assert!(md.contains(needle), "report lacks {needle}");
    }
    let pngs: Vec<_> = files.iter().filter(|p| p.extension().is_some_and(|e| e == "png")).collect();
    assert_eq!(pngs.len(), 4);
    for p in pngs {
        let bytes = std::fs::read(p).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert!(md.contains(p.file_name().unwrap().to_str().unwrap()));
    }
}

#[test]
fn cells_that_fail_cross_validation_become_pair_requests() {
    let root = common::scratch("remeasure");
    let dir = root.join("corpus");
    vnni_learner::synthetic::write(&dir, &small(10)).unwrap();
    // Thresholds no held-out pick can meet: every domain fails, and its cells whose pick is
    // not the measured fastest are listed; with the regret threshold out of reach, only
    // their bounds can hold them back.
    let strict = FitOptions { p95_max: 1e-9, ucb_max: 1e-9, ..FitOptions::default() };
    let bound_only = FitOptions { p95_max: 10.0, ucb_max: 1e-9, ..FitOptions::default() };
    let c = corpus::load(&dir).unwrap();
    for (opts, limits) in [(strict, &["regret", "bound"][..]), (bound_only, &["bound"][..])] {
        let f = fit(&dir, &opts).unwrap();
        let pairs = vnni_learner::remeasure::all(&f.domains);
        assert!(!pairs.is_empty());
        for p in &pairs {
            assert_ne!(p.pick, p.best);
            assert!(limits.contains(&p.limit.as_str()), "{p:?}");
            if p.limit == "bound" {
                assert!(p.ucb >= opts.ucb_max && p.ucb >= p.regret, "{p:?}");
            }
            // The best is the cell's fastest measured candidate.
            let cell = c
                .cells
                .iter()
                .find(|x| {
                    (x.format, x.mode, x.m as usize, x.n as usize, x.k as usize)
                        == (p.source_format, p.mode, p.m, p.n, p.k)
                })
                .unwrap();
            let best = c.candidates(cell.surface()).iter().position(|x| x.id == p.best).unwrap();
            assert_eq!(cell.regret[best], 0.0);
        }
        let files = vnni_learner::report::write_report(&f, &root.join("report")).unwrap();
        let csv = files.iter().find(|p| p.ends_with("remeasure.csv")).unwrap();
        assert_eq!(vnni_corpus::read::read_pair_requests(csv).unwrap(), pairs);
        let md = std::fs::read_to_string(&files[0]).unwrap();
        assert!(md.contains("## Cells to time again") && md.contains("| **all** |"));
    }
    // Domains that pass list nothing.
    let f = fit(&dir, &FitOptions::default()).unwrap();
    for (d, r) in f.policy.domains.iter().zip(&f.domains) {
        if d.stats.as_ref().is_some_and(|s| s.passed) {
            assert!(r.remeasure.is_empty(), "{}", r.key);
        }
    }
    let loose = fit(&dir, &FitOptions { p95_max: 10.0, ucb_max: 10.0, ..FitOptions::default() }).unwrap();
    assert!(loose.policy.gates.passed);
    assert!(vnni_learner::remeasure::all(&loose.domains).is_empty());
}

#[test]
fn the_generic_floor_shows_a_literal_winner_without_a_generic_twin() {
    let plain = common::corpus("floor-plain", &small(21));
    let floors = vnni_learner::generic_floor::generic_floor(&corpus::load(&plain).unwrap());
    assert!(!floors.is_empty());
    // A literal-KB candidate made the clear winner at one geometry: the floor shows it there.
    let literal = "cpu.decode.kpar.t64.kb4";
    let spec = Spec { boost: Some((literal.parse().unwrap(), 2048, 2048)), ..small(21) };
    let boosted = common::corpus("floor-boost", &spec);
    let c = corpus::load(&boosted).unwrap();
    let floors = vnni_learner::generic_floor::generic_floor(&c);
    let worst = floors.values().flatten().copied().fold(0.0, f64::max);
    assert!(worst > 0.3, "the boosted literal winner leaves no generic gap: {worst}");
    let md = vnni_learner::generic_floor::section(&c);
    assert!(md.contains("| all | all |"), "{md}");
}

#[test]
fn every_left_out_family_is_scored_by_the_trees_and_the_baselines_nested_or_not() {
    let root = common::scratch("families");
    let dir = root.join("corpus");
    vnni_learner::synthetic::write(&dir, &Spec { families: 3, ..small(31) }).unwrap();
    let plain = fit(&dir, &FitOptions::default()).unwrap();
    let nested = fit(&dir, &FitOptions { nested_family_cv: true, ..Default::default() }).unwrap();
    assert!(plain.policy.to_bytes() == nested.policy.to_bytes(), "nesting changes the report, not the policy");
    // Skipping the family rows (a fit whose report nobody reads) skips only them.
    let skipped = fit(&dir, &FitOptions { family_cv: false, ..Default::default() }).unwrap();
    assert!(plain.policy.to_bytes() == skipped.policy.to_bytes(), "the family rows changed the policy");
    assert!(skipped.domains.iter().all(|d| d.family_heldout.is_empty()));
    let mut scored = 0;
    for (a, b) in plain.domains.iter().zip(&nested.domains) {
        assert_eq!(a.key, b.key);
        let families: Vec<&String> = a.family_heldout.keys().collect();
        assert_eq!(families, b.family_heldout.keys().collect::<Vec<_>>(), "{}", a.key);
        for (r, s) in a.family_heldout.values().zip(b.family_heldout.values()) {
            assert!(!r.tree.is_empty() && r.tree.len() == s.tree.len(), "{}", a.key);
            for rows in r.baselines.iter().chain(&s.baselines) {
                assert_eq!(rows.len(), r.tree.len(), "{}: a baseline scored other rows", a.key);
            }
            assert!(r.tree.iter().chain(&s.tree).all(|x| x.is_finite() && *x >= 0.0));
            scored += 1;
        }
    }
    assert!(scored >= 2, "no domain held out a family");
    let files = vnni_learner::report::write_report(&nested, &root.join("report")).unwrap();
    let md = std::fs::read_to_string(&files[0]).unwrap();
    assert!(md.contains("## Leave one family out") && md.contains("nested: hyperparameters chosen again"), "{md}");
    // Every scored cell is in family-cv.csv.zst with its shipped pick, scored as the report scores it.
    let path = files.iter().find(|p| p.ends_with(vnni_learner::report::FAMILY_CV_FILE)).unwrap();
    let rows = vnni_corpus::read::read_family_cv(path).unwrap();
    let shipped: Vec<f64> = rows.iter().filter(|r| r.shipped).map(|r| r.scored).collect();
    let mut expected: Vec<f64> = Vec::new();
    for d in &nested.domains {
        for r in d.family_heldout.values() {
            // CPU domains have no cost models: what ships is the tree's leaf.
            expected.extend(if r.model.is_empty() { &r.tree } else { &r.model });
        }
    }
    assert!(!shipped.is_empty());
    assert_eq!(shipped, expected);
    // A repeated row, or a cell without its shipped pick, is refused naming the file and row.
    let text = String::from_utf8(zstd_decode(path)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let bad = root.join("bad-family-cv.csv");
    let refusal = |lines: &[String]| {
        std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
        vnni_corpus::read::read_family_cv(&bad).unwrap_err().to_string()
    };
    let mut repeated: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    repeated.push(lines[1].to_string());
    let err = refusal(&repeated);
    assert!(err.contains("bad-family-cv.csv") && err.contains("candidate of a cell"), "{err}");
    let mut unshipped: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let pick = unshipped.iter().position(|l| l.ends_with(",true,true")).unwrap();
    unshipped[pick] = unshipped[pick].replace(",true,true", ",false,true");
    let err = refusal(&unshipped);
    assert!(err.contains("bad-family-cv.csv") && err.contains("0 shipped picks"), "{err}");
}

/// The bytes of a zstd file.
fn zstd_decode(path: &std::path::Path) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut vnni_corpus::read::open(path).unwrap(), &mut out).unwrap();
    out
}

#[test]
fn sealed_rows_never_become_overlays() {
    let (ns, ks) = (half_octaves(256, 4096), half_octaves(256, 2048));
    let every: Vec<(usize, usize)> = ns.iter().flat_map(|&n| ks.iter().map(move |&k| (n, k))).collect();
    let spec = Spec { ns, ks, ms: vec![1, 4], overlay: every, ..Spec::cpu(41) };
    let dir = common::corpus("sealed-overlays", &spec);
    let f = fit(&dir, &FitOptions::default()).unwrap();
    let c = corpus::load(&dir).unwrap();
    let sealed: BTreeSet<(u64, u64)> = c
        .plan
        .inventory
        .shapes
        .iter()
        .filter(|s| s.partition == vnni_corpus::inventory::Partition::Sealed)
        .map(|s| (s.n as u64, s.k as u64))
        .collect();
    assert!(!sealed.is_empty() && !f.policy.overlays.is_empty());
    let overlaid: BTreeSet<(u64, u64)> = f.policy.overlays.iter().map(|o| (o.n, o.k)).collect();
    assert!(overlaid.is_disjoint(&sealed), "sealed shapes with overlays: {:?}", overlaid.intersection(&sealed));
    assert_eq!(overlaid.len() + sealed.len(), spec.ns.len() * spec.ks.len(), "every development shape has one");
}

#[test]
fn cuda_decode_domains_ship_cost_models_that_answer_unmeasured_shapes() {
    let spec = Spec {
        ns: half_octaves(256, 32768),
        ks: half_octaves(256, 8192),
        ms: vec![1, 4],
        formats: vec![SourceFormat::Q4_0],
        modes: vec![vnni_kernels::Mode::Graph],
        registers: Some(40),
        ..Spec::cuda(51)
    };
    let dir = common::corpus("models", &spec);
    let f = fit(&dir, &FitOptions::default()).unwrap();
    let decode: Vec<_> = f.policy.domains.iter().filter(|d| d.m_bucket == 0 && d.stats.is_some()).collect();
    assert!(!decode.is_empty() && decode.iter().all(|d| !d.models.is_empty()), "decode domains carry models");
    assert!(f.policy.domains.iter().filter(|d| d.m_bucket > 0).all(|d| d.models.is_empty()));
    // A shape between the measured ones: no overlay, the models' least prediction answers.
    let s = f.policy.select("s4", "graph", 1, 5000, 3008).unwrap();
    assert_eq!(s.via, Via::Model);
    let (i, _) = f.policy.model_pick(s.domain, 5000, 3008).unwrap();
    assert_eq!(f.policy.domains[s.domain].models[i].candidate, s.candidate.id);
    // Held out by grouped folds, what ships beats the best single candidate in every decode domain.
    for d in f.domains.iter().filter(|d| d.key.bucket == 0) {
        let Some([shipped, best_single, ..]) = d.summaries() else { continue };
        assert!(shipped.geomean_regret < best_single.geomean_regret, "{}: {shipped:?} vs {best_single:?}", d.key);
    }
    // The report says how well the models fit, per decode domain with models.
    let files = vnni_learner::report::write_report(&f, &common::scratch("models-report")).unwrap();
    let md = std::fs::read_to_string(&files[0]).unwrap();
    let section = md.split("## Cost models (decode)").nth(1).expect("the report has a cost-model section");
    assert_eq!(section.lines().filter(|l| l.starts_with("| s4 graph M-bucket 0")).count(), decode.len(), "{section}");
    // The same corpus without preflight resources: trees only.
    let plain = common::corpus("models-plain", &Spec { registers: None, ..spec });
    let f = fit(&plain, &FitOptions::default()).unwrap();
    assert!(f.policy.domains.iter().all(|d| d.models.is_empty()));
    assert!(f.domains.iter().all(|d| d.model_errors.is_none()));
    assert_eq!(f.policy.select("s4", "graph", 1, 5000, 3008).unwrap().via, Via::Tree);
}

/// `reduce_term`: the policy records it, only graph-mode decode models may carry the split-K
/// reduce term, a fit without it carries none, and a refit with the policy's own rules
/// reproduces it byte for byte either way.
#[test]
fn the_reduce_term_is_recorded_graph_only_and_refits_alike() {
    let spec = Spec {
        ns: half_octaves(256, 32768),
        ks: half_octaves(256, 8192),
        ms: vec![1],
        formats: vec![SourceFormat::Q4_0],
        modes: vec![vnni_kernels::Mode::Eager, vnni_kernels::Mode::Graph],
        registers: Some(40),
        ..Spec::cuda(52)
    };
    let dir = common::corpus("reduce-term", &spec);
    let quick = FitOptions { family_cv: false, certify_sealed: false, ..FitOptions::default() };
    for reduce_term in [false, true] {
        let opts = FitOptions { reduce_term, ..quick.clone() };
        let p = fit(&dir, &opts).unwrap().policy;
        assert_eq!(p.provenance.reduce_term, reduce_term);
        let carried = |mode: &str| {
            p.domains.iter().filter(|d| d.mode == mode).flat_map(|d| &d.models).filter(|m| !m.reduce.is_zero()).count()
        };
        assert!(p.domains.iter().any(|d| d.mode == "eager" && !d.models.is_empty()));
        assert_eq!(carried("eager"), 0, "eager models never carry the term");
        if !reduce_term {
            assert_eq!(carried("graph"), 0);
        }
        let refit = fit(&dir, &quick.clone().with_rules_of(&p)).unwrap().policy;
        assert_eq!(refit.to_bytes(), p.to_bytes(), "reduce_term {reduce_term}");
    }
}

/// Two passes per cell: every domain gets a noise band from pass replicates (near the
/// synthetic run-to-run noise), a pick inside it is scored as a tie, one outside keeps its
/// whole regret, and the report shows the bands. One pass: no band, regrets as measured.
#[test]
fn pass_replicates_give_every_domain_a_noise_band_and_ties_inside_it() {
    let one = corpus::load(&common::corpus("band-one", &small(31))).unwrap();
    assert!(one.bands.is_empty());
    assert!(one.cells.iter().all(|c| c.band == 0.0 && c.replicates.is_empty()));
    let c = &one.cells[0];
    assert!((0..c.regret.len()).all(|i| c.scored(i) == c.regret[i]));

    let spec = Spec { passes: 2, noise: 0.02, ..small(31) };
    let two = corpus::load(&common::corpus("band-two", &spec)).unwrap();
    let sk = domains::skeleton(&two);
    let keys: BTreeSet<_> = two
        .cells
        .iter()
        .filter_map(|c| {
            let d = domains::domain_of(&sk, c.codebook.name(), c.mode.name(), c.m, c.n, c.k)?;
            Some((d, vnni_learner::noise::octave(c.n, c.k)))
        })
        .collect();
    // Every decode key has a band; the synthetic grouped cells race all but one or two of
    // their five candidates out of the second pass, too little evidence for one.
    let banded: BTreeSet<_> = two.bands.keys().cloned().collect();
    assert!(banded.is_subset(&keys));
    let decode: BTreeSet<_> = keys.iter().filter(|(d, _)| d.bucket == 0).cloned().collect();
    assert_eq!(banded.iter().filter(|(d, _)| d.bucket == 0).cloned().collect::<BTreeSet<_>>(), decode);
    for ((d, o), b) in &two.bands {
        // a lognormal pass shift of sigma 0.02 per candidate (plus the median noise of 15
        // samples) against the cell's median candidate: the p95 of |difference| is about
        // 1.96 x sqrt(2) x 0.02, the band that / sqrt 2 = 3.9% (a grouped cell's one or two
        // candidates move against each other: half of it)
        let lo = if d.bucket == 0 { 0.015 } else { 0.005 };
        assert!(b.band > lo && b.band < 0.08, "{d} 2^{o}: band {}", b.band);
    }
    let mut tied = 0;
    for c in &two.cells {
        assert!(c.m > 1 || c.band > 0.0, "every decode cell has its domain's band");
        for i in 0..c.regret.len() {
            let want = if c.regret[i] <= c.band { 0.0 } else { c.regret[i] };
            assert_eq!(c.scored(i), want);
            tied += usize::from(c.regret[i] > 0.0 && c.scored(i) == 0.0);
        }
    }
    assert!(tied > 0, "no candidate fell inside a band");

    // one pass: the sealed scores carry no "as measured" twin; two: they do, never below
    let f1 = fit(&one.dir, &FitOptions::default()).unwrap();
    assert!(f1.policy.gates.sealed.as_ref().unwrap().named_scores().all(|(_, v)| v.as_measured.is_none()));
    let root = common::scratch("band-report");
    let f = fit(&two.dir, &FitOptions::default()).unwrap();
    let sealed = f.policy.gates.sealed.as_ref().unwrap();
    let measured: Vec<_> =
        sealed.named_scores().filter_map(|(_, v)| v.as_measured.map(|m| (v.geomean_regret, m))).collect();
    assert!(!measured.is_empty());
    assert!(measured.iter().all(|(tied, m)| *tied <= m.geomean_regret));
    assert_eq!((f.passes, f.bands.len()), (2, two.bands.len()));
    let md = std::fs::read_to_string(&vnni_learner::report::write_report(&f, &root).unwrap()[0]).unwrap();
    assert!(md.contains("## Noise band (pass replicates)") && md.contains("timed in 2 independent passes"), "{md}");
}

/// Pair samples of `(candidate, latency)` for one cell, 24 a candidate (a 1% spread).
fn pair_samples(cell: &corpus::Cell, timed: &[(&str, f64)]) -> Vec<vnni_corpus::SampleRow> {
    let mut out = Vec::new();
    for (order, (id, us)) in timed.iter().enumerate() {
        for round in 0..24 {
            out.push(vnni_corpus::SampleRow {
                mode: cell.mode,
                source_format: Some(cell.format),
                codebook: Some(cell.codebook),
                m: cell.m as usize,
                n: cell.n as usize,
                k: cell.k as usize,
                candidate: id.parse().unwrap(),
                pass: 0,
                round,
                order,
                warmup: false,
                latency_us_hex: vnni_corpus::schema::hex_f64(us * (1.0 + 0.01 * (round % 3) as f64 / 2.0)),
            });
        }
    }
    out
}

#[test]
fn pairs_timed_again_replace_their_cells_regrets_and_bounds() {
    let root = common::scratch("pairs");
    let dir = root.join("corpus");
    vnni_learner::synthetic::write(&dir, &small(10)).unwrap();
    let loaded = corpus::load(&dir).unwrap();
    // A development decode cell, its fastest candidate and another eligible one.
    let i = loaded.cells.iter().position(|c| c.m == 1 && !c.sealed).unwrap();
    let cell = loaded.cells[i].clone();
    let best = (0..cell.regret.len()).find(|&c| cell.regret[c] == 0.0).unwrap();
    let other = (0..cell.regret.len()).find(|&c| c != best && cell.regret[c] < REGRET_CAP).unwrap();
    let (b, o) = (loaded.decode[best].id.to_string(), loaded.decode[other].id.to_string());
    let path = root.join("pairs.samples.csv");
    let apply = |timed: &[(&str, f64)]| {
        vnni_corpus::write_csv(&path, &pair_samples(&cell, timed)).unwrap();
        let mut c = corpus::load(&dir).unwrap();
        vnni_learner::pairs::apply(&mut c, &path).map(|a| (a, c.cells[i].clone()))
    };
    // The other 50% behind the best in the pair (whatever the corpus said): its regret is that
    // ratio, its bound the pair's alone; the best stays where the corpus put it.
    let (applied, after) = apply(&[(&b, 10.0), (&o, 15.0)]).unwrap();
    assert_eq!(applied.cells, 1);
    assert!((after.regret[other] - 0.5).abs() < 1e-9, "{}", after.regret[other]);
    assert_eq!((after.regret[best], after.best_us), (0.0, cell.best_us));
    assert!(after.ucb[other] >= 0.5 && after.ucb[other] < 0.53, "{}", after.ucb[other]);
    // Faster than the best in the pair: it becomes the best, every regret follows.
    let (_, after) = apply(&[(&b, 10.0), (&o, 8.0)]).unwrap();
    assert_eq!(after.regret[other], 0.0);
    assert!((after.regret[best] - 0.25).abs() < 1e-9);
    assert!((after.best_us - 0.8 * cell.best_us).abs() < 1e-9 * cell.best_us);
    // A candidate the cell never timed (a pruned sweep skipped it): the pair places it beside
    // the anchor by its ratio; a pair of which the cell timed neither is refused.
    vnni_corpus::write_csv(&path, &pair_samples(&cell, &[(&b, 10.0), (&o, 12.0)])).unwrap();
    let mut c = corpus::load(&dir).unwrap();
    c.cells[i].regret[other] = REGRET_CAP;
    vnni_learner::pairs::apply(&mut c, &path).unwrap();
    assert!((c.cells[i].regret[other] - 0.2).abs() < 1e-9, "{}", c.cells[i].regret[other]);
    c.cells[i].regret[other] = REGRET_CAP;
    c.cells[i].regret[best] = REGRET_CAP;
    let e = vnni_learner::pairs::apply(&mut c, &path).unwrap_err().to_string();
    assert!(e.contains("no eligible row of either candidate"), "{e}");
    // The fit records the file's digest.
    let f = fit(&dir, &FitOptions { pairs: Some(path.clone()), ..FitOptions::default() }).unwrap();
    let evidence = f.policy.provenance.pairs.clone().unwrap();
    assert_eq!(evidence.sha256, vnni_kernels::digest::sha256_hex(&std::fs::read(&path).unwrap()));
    assert_eq!(evidence.cells, 1);
    assert!(fit(&dir, &FitOptions::default()).unwrap().policy.provenance.pairs.is_none());
    // A staged fit copies its M = 1 part: pairs are refused there.
    let staged = FitOptions { pairs: Some(path.clone()), frozen_m1: Some(f.policy.clone()), ..FitOptions::default() };
    let e = fit(&dir, &staged).unwrap_err().to_string();
    assert!(e.contains("whose part a staged fit copies"), "{e}");
    // Refused with the file and the cell named: three candidates, a sealed cell, M > 1.
    let third = (0..cell.regret.len()).find(|&c| c != best && c != other).unwrap();
    let t = loaded.decode[third].id.to_string();
    let e = apply(&[(&b, 10.0), (&o, 8.0), (&t, 9.0)]).unwrap_err().to_string();
    assert!(e.contains("pairs.samples.csv") && e.contains("3 candidates timed, a pair is two"), "{e}");
    let sealed = loaded.cells.iter().find(|c| c.m == 1 && c.sealed).unwrap().clone();
    vnni_corpus::write_csv(&path, &pair_samples(&sealed, &[(&b, 1.0), (&o, 1.0)])).unwrap();
    let e = vnni_learner::pairs::apply(&mut corpus::load(&dir).unwrap(), &path).unwrap_err().to_string();
    assert!(e.contains("not a development cell of the corpus"), "{e}");
    let mut grouped = pair_samples(&cell, &[(&b, 1.0), (&o, 1.0)]);
    grouped[0].m = 4;
    vnni_corpus::write_csv(&path, &grouped).unwrap();
    let e = vnni_learner::pairs::apply(&mut corpus::load(&dir).unwrap(), &path).unwrap_err().to_string();
    assert!(e.contains("pairs are decode cells, M = 1"), "{e}");
}
