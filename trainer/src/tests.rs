//! The command line as a typed API: every subcommand's arguments render back to a command
//! line that parses to the same value (the sweep's workers are started that way), and a
//! misspelled word is refused with the list of valid ones.

use std::path::PathBuf;

use clap::Parser;
use vnni_corpus::collection::Shard;
use vnni_kernels::{Backend, BackendChoice, Codebook, Mode, SourceFormat, Surface};
use vnni_measure::shapes::Shapes;

use super::argv::ToArgv;
use super::commands::*;
use super::{Cli, Command};

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

/// One value of every subcommand, with every option away from its default.
fn every_subcommand() -> Vec<Command> {
    vec![
        Command::Refresh(refresh::Args {
            backend: BackendChoice::Cpu,
            profile: "core".into(),
            inventory: p("inv dir"),
            out: Some(p("out")),
            corpus: Some(p("c")),
            frozen_m1: Some(p("m1/policy.json")),
            install: Some(p("t/x.inc")),
            devices: vec![0, 1],
            threads: 3,
            random: 7,
            cache: Some(p("cache")),
            programmatic: true,
            m_buckets_from: Vec::new(),
            prune: sweep::PruneArgs::default(),
        }),
        Command::Refresh(refresh::Args {
            backend: BackendChoice::Cuda,
            profile: "core".into(),
            inventory: p("inv"),
            out: None,
            corpus: None,
            frozen_m1: None,
            install: None,
            devices: Vec::new(),
            threads: 0,
            random: 1,
            cache: None,
            programmatic: false,
            m_buckets_from: vec![p("d/dense-m.csv"), p("e/dense-m.csv")],
            prune: sweep::PruneArgs { prune_with: Some(p("h100/policy.json")), prune_above: 1.1, prune_audit: 0.5 },
        }),
        Command::Formats(formats::Args { json: true }),
        Command::Inventory(inventory::Args { action: None, dir: p("inv"), profile: "all".into(), json: true }),
        Command::Inventory(inventory::Args {
            action: Some(inventory::Action::Import { model: p("m.gguf"), family: Some("qwen".into()) }),
            dir: p("inv"),
            profile: "core".into(),
            json: false,
        }),
        Command::Candidates(candidates::Args {
            surface: Some(Surface::Prefill),
            backend: Some(Backend::Cpu),
            json: true,
        }),
        Command::Preflight(preflight::Args {
            static_only: true,
            arch: "sm_89".into(),
            out: p("r.csv"),
            device: 2,
            cache: Some(p("c")),
        }),
        Command::Bench(bench::Args {
            backend: "cuda".into(),
            shapes: Shapes(vec![(64, 32), (128, 256)]),
            codebooks: vec![Codebook::S4, Codebook::S6d],
            modes: vec![Mode::Graph],
            samples: 3,
            warmups: 1,
            passes: 2,
            whole_rotations: true,
            programmatic: true,
            l2_prefetch: vnni_kernels::L2Prefetch::Programmatic,
            device: 1,
            cache: Some(p("c")),
            grouped_shapes: Shapes(vec![(64, 32)]),
            grouped_m: vnni_measure::shapes::MValues(vec![2, 31]),
            prefill_shapes: Shapes(vec![(128, 256)]),
            prefill_m: vnni_measure::shapes::MValues(vec![64]),
            chain: Shapes(vec![(128, 256), (64, 32)]),
            pairs: Some(p("remeasure.csv")),
            dense_m: false,
            dense_m_max: 4096,
            policy: None,
            out: p("b"),
        }),
        Command::Bench(bench::Args {
            backend: "cuda".into(),
            shapes: Shapes(vec![(28_672, 8192)]),
            codebooks: vec![Codebook::U4],
            modes: vec![Mode::Graph],
            samples: 8,
            warmups: 2,
            passes: 1,
            whole_rotations: false,
            programmatic: false,
            l2_prefetch: vnni_kernels::L2Prefetch::Always,
            device: 0,
            cache: None,
            grouped_shapes: Shapes(vec![]),
            grouped_m: vnni_measure::shapes::MValues(vec![]),
            prefill_shapes: Shapes(vec![]),
            prefill_m: vnni_measure::shapes::MValues(vec![]),
            chain: Shapes(vec![]),
            pairs: None,
            dense_m: true,
            dense_m_max: 512,
            policy: Some(p("policy.json")),
            out: p("b"),
        }),
        Command::Seal(seal::Args {
            dir: p("d"),
            profile: Some("core".into()),
            backend: Some(Backend::Cuda),
            from_plan: true,
            arch: "sm_80".into(),
            inventory: p("inv"),
            device: "dev".into(),
            driver: "580".into(),
            nvrtc: "13.0".into(),
        }),
        Command::Verify(verify::Args {
            corpus: vec![p("a"), p("b")],
            inventory: p("inv"),
            root: p("r"),
            tables: p("t"),
            evidence: p("ev"),
        }),
        Command::Certify(certify::Args {
            backend: Backend::Cpu,
            surface: Surface::Prefill,
            formats: vec![SourceFormat::Q4_K, SourceFormat::Q8_0],
            shapes: Some(Shapes(vec![(512, 512)])),
            m: vec![32, 64],
            m1: vec!["decode.wide.tn128.cpt1".parse().unwrap()],
            sms: 8,
            device: 1,
            cache: Some(p("c")),
            out: p("o.jsonl"),
            policy: Some(p("p.json")),
            profile: Some("core".into()),
            inventory: p("inv"),
        }),
        Command::Sweep(sweep::Args {
            backend: BackendChoice::Cuda,
            profile: "core".into(),
            inventory: p("inv"),
            out: p("w"),
            devices: vec![0, 1, 2],
            shard: Some("1/4".parse::<Shard>().unwrap()),
            threads: 2,
            device: 1,
            cache: Some(p("c")),
            m1_only: false,
            whole_rotations: false,
            programmatic: true,
            m1_policy: Some(p("m1/policy.json")),
            m1_corpus: Some(p("m1/corpus")),
            m_buckets_from: vec![p("a/dense-m.csv"), p("b/dense-m.csv")],
            prune: sweep::PruneArgs { prune_with: Some(p("h200/policy.json")), prune_above: 1.5, prune_audit: 0.25 },
            worker: Some(2),
        }),
        Command::Sweep(sweep::Args {
            backend: BackendChoice::Cpu,
            profile: "core".into(),
            inventory: p("inv"),
            out: p("w"),
            devices: Vec::new(),
            shard: None,
            threads: 2,
            device: 0,
            cache: None,
            m1_only: true,
            whole_rotations: true,
            programmatic: false,
            m1_policy: None,
            m1_corpus: None,
            m_buckets_from: Vec::new(),
            prune: sweep::PruneArgs::default(),
            worker: None,
        }),
        Command::Merge(merge::Args { out: p("m"), shards: vec![p("s0"), p("s1")] }),
        Command::Fit(fit::Args {
            corpus: p("c"),
            out: p("policy.json"),
            report: Some(p("r")),
            nested_family_cv: true,
            threads: Some(3),
            p95_max: 0.01,
            ucb_max: 0.02,
            min_pass: 0.5,
            ledger: p("l.json"),
            frozen_m1: Some(p("m1.json")),
            pairs: Some(p("pairs.samples.csv")),
            development_only: true,
            development_policy: Some(p("dev.json")),
            correction: fit::CorrectionSpec(Some((0.5, 1.0, 0.25))),
            focus: fit::FocusSpec(Some(vnni_policy::Focus { scale_permille: 125, floor_permille: 0 })),
            twins: fit::TwinsSpec(vnni_learner::corpus::Twins::AsMeasured),
            reduce_term: fit::ReduceTermSpec(false),
        }),
        Command::Remeasure(remeasure::Args {
            corpus: p("c"),
            out: p("o"),
            p95_max: 0.02,
            ucb_max: 0.03,
            ledger: p("l.json"),
            device: 1,
            cache: Some(p("cache")),
        }),
        Command::Profile(profile::Args {
            corpus: p("c"),
            out: p("e"),
            top: Some(3),
            policy: Some(p("p.json")),
            chunk: 64,
            ncu: p("/opt/ncu"),
            replay: "application".into(),
            reparse: true,
            devices: vec![1, 3],
            cache: Some(p("cache")),
            worker: true,
            first: 128,
            count: 64,
        }),
        Command::Generate(generate::Args {
            policy: p("p.json"),
            out: p("t"),
            validate: true,
            install: Some(p("i.inc")),
            install_header: Some(p("i.h")),
            install_rust: Some(p("i.rs")),
            random: 5,
            seed: 9,
            inventory: p("inv"),
            require_rust: true,
            profile: "core".into(),
            certificates: Some(p("certs.jsonl")),
            evidence: Some(p("ev")),
            corpus: Some(p("c")),
        }),
        Command::Report(report::Args {
            corpus: Some(p("c")),
            dense_m: vec![],
            policy: Some(p("p")),
            evidence: Some(p("ev")),
            out: p("o"),
        }),
        Command::Report(report::Args {
            corpus: None,
            dense_m: vec![p("a.csv"), p("b.csv")],
            policy: None,
            evidence: None,
            out: p("o"),
        }),
        Command::Explain(explain::Args {
            policy: p("p.json"),
            format: SourceFormat::Q4_K,
            mode: Some(Mode::Graph),
            m: 8,
            n: Some(151_936),
            k: Some(4096),
            shapes: None,
            corpus: Some(p("c")),
            root: p("r"),
            predictions: true,
            evidence: Some(p("ev")),
        }),
        Command::Explain(explain::Args {
            policy: p("p.json"),
            format: SourceFormat::Q4_0,
            mode: None,
            m: 1,
            n: None,
            k: None,
            shapes: Some("4096x4096,151936x4096".parse().unwrap()),
            corpus: None,
            root: p("r"),
            predictions: false,
            evidence: None,
        }),
        Command::Completions(shell::CompletionsArgs { shell: clap_complete::Shell::Zsh }),
        Command::Man(shell::ManArgs { out: p("man dir") }),
    ]
}

#[test]
fn every_subcommand_round_trips() {
    let all = every_subcommand();
    let names: std::collections::BTreeSet<String> = all.iter().map(|c| c.to_argv()[0].clone()).collect();
    let declared: std::collections::BTreeSet<String> = {
        use clap::CommandFactory;
        Cli::command().get_subcommands().map(|s| s.get_name().to_string()).collect()
    };
    assert_eq!(names, declared, "a subcommand is missing from this test");
    for c in all {
        let argv = c.to_argv();
        let parsed = Cli::try_parse_from(std::iter::once("vnni-dispatch".to_string()).chain(argv.clone()))
            .unwrap_or_else(|e| panic!("{argv:?} does not parse: {e}"));
        assert_eq!(parsed.command, c, "{argv:?}");
    }
}

#[test]
fn defaults_round_trip_too() {
    for sub in ["sweep", "certify", "refresh", "bench", "fit", "candidates"] {
        let extra: &[&str] = match sub {
            "fit" => &["--corpus", "c"],
            _ => &[],
        };
        let args = std::iter::once("vnni-dispatch").chain(std::iter::once(sub)).chain(extra.iter().copied());
        let parsed = Cli::try_parse_from(args).unwrap();
        let again =
            Cli::try_parse_from(std::iter::once("vnni-dispatch".to_string()).chain(parsed.command.to_argv())).unwrap();
        assert_eq!(again, parsed, "{sub}");
    }
}

#[test]
fn misspelled_words_are_refused_with_the_valid_ones() {
    let err = |args: &[&str]| Cli::try_parse_from(args).expect_err("refused").to_string();
    let e = err(&["vnni-dispatch", "sweep", "--backend", "cdua"]);
    assert!(e.contains("cdua") && e.contains("cuda") && e.contains("cpu") && e.contains("auto"), "{e}");
    let e = err(&["vnni-dispatch", "bench", "--modes", "eager,graf"]);
    assert!(e.contains("graf") && e.contains("eager") && e.contains("graph"), "{e}");
    let e = err(&["vnni-dispatch", "certify", "--surface", "decod"]);
    assert!(e.contains("decode") && e.contains("grouped") && e.contains("prefill"), "{e}");
    let e = err(&["vnni-dispatch", "certify", "--formats", "Q4_9"]);
    assert!(e.contains("Q4_0") && e.contains("Q8_0"), "{e}");
    let e = err(&["vnni-dispatch", "certify", "--m1", "Decode/../x"]);
    assert!(e.contains("not a candidate id"), "{e}");
    let e = err(&["vnni-dispatch", "certify", "--shapes", "99999999999x4096"]);
    assert!(e.contains("at most"), "{e}");
    let e = err(&["vnni-dispatch", "bench", "--grouped-m", "2,99999999"]);
    assert!(e.contains("row counts are 1 to"), "{e}");
    // An empty list means none, as documented.
    let ok = Cli::try_parse_from(["vnni-dispatch", "bench", "--prefill-m", "", "--grouped-m", ""]).unwrap();
    let Command::Bench(b) = ok.command else { panic!() };
    assert!(b.prefill_m.0.is_empty() && b.grouped_m.0.is_empty());
}

#[test]
fn fit_thresholds_are_finite_fractions() {
    for bad in ["nan", "inf", "0", "-0.1", "1.5", "x"] {
        for flag in ["--p95-max", "--ucb-max", "--min-pass"] {
            let r = Cli::try_parse_from(["vnni-dispatch", "fit", "--corpus", "c", flag, bad]);
            assert!(r.is_err(), "{flag} {bad} accepted");
        }
    }
    let ok = Cli::try_parse_from(["vnni-dispatch", "fit", "--corpus", "c", "--min-pass", "1", "--p95-max", "0.02"]);
    assert!(ok.is_ok());
}

#[test]
fn fit_focus_is_off_or_a_scale_and_a_floor() {
    use super::commands::fit::FocusSpec;
    for bad in ["", "scale=0.15", "floor=0.05", "scale=0,floor=0.05", "scale=0.15,floor=2", "scale=x,floor=0", "w=1"] {
        assert!(FocusSpec::parse(bad).is_err(), "{bad:?} accepted");
    }
    assert_eq!(FocusSpec::parse("off").unwrap(), FocusSpec::default());
    let f = FocusSpec::parse("scale=0.15,floor=0.05").unwrap();
    assert_eq!(f, FocusSpec(Some(vnni_policy::Focus { scale_permille: 150, floor_permille: 50 })));
    assert_eq!(FocusSpec::parse(&f.to_string()).unwrap(), f);
}

#[test]
fn oversized_requests_are_refused_before_any_work() {
    // M beyond the bound is refused while resolving the request, before any fixture exists.
    let args = certify::Args {
        backend: Backend::Cpu,
        surface: Surface::Grouped,
        formats: vec![SourceFormat::Q8_0],
        shapes: Some(Shapes(vec![(64, 256)])),
        m: vec![99_999_999],
        m1: vec!["cpu.decode.wide.t16".parse().unwrap()],
        sms: 2,
        device: 0,
        cache: None,
        out: std::env::temp_dir().join(format!("vnni-oversized-{}.jsonl", std::process::id())),
        policy: None,
        profile: None,
        inventory: PathBuf::from("corpus/inventory"),
    };
    let e = vnni_measure::invariance_plan::certify_all(&args.request()).unwrap_err().to_string();
    assert!(e.contains("M = 99999999"), "{e}");
    assert!(!args.out.exists(), "nothing is written for a refused request");
}

/// Every subcommand's `--help` ends with an example, and the example parses (shell
/// redirections after it aside).
#[test]
fn every_subcommand_shows_an_example_that_parses() {
    use clap::CommandFactory;
    for sub in Cli::command().get_subcommands() {
        let help = sub.get_after_help().map(|h| h.to_string()).unwrap_or_default();
        let example = help
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("vnni-dispatch "))
            .unwrap_or_else(|| panic!("`{}` has no example in its help", sub.get_name()));
        let words: Vec<&str> = example.split_whitespace().take_while(|w| *w != ">").collect();
        assert_eq!(words[1], sub.get_name(), "{example}");
        Cli::try_parse_from(&words).unwrap_or_else(|e| panic!("the example `{example}` does not parse: {e}"));
    }
}

#[test]
fn a_dense_run_takes_neither_pairs_nor_a_policy_alone() {
    let parse = |args: &[&str]| Cli::try_parse_from(std::iter::once("vnni-dispatch").chain(args.iter().copied()));
    assert!(parse(&["bench", "--dense-m", "--pairs", "r.csv"]).is_err());
    assert!(parse(&["bench", "--policy", "p.json"]).is_err(), "--policy needs --dense-m");
    assert!(
        parse(&["bench", "--dense-m", "--policy", "p.json", "--dense-m-max", "1"]).is_err(),
        "the grid starts at 2"
    );
    assert!(parse(&["bench", "--dense-m", "--policy", "p.json"]).is_ok());
}
