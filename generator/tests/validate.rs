//! Generated tables, compiled, agree with the evaluator; changed predicates are caught.

mod common;

use common::{example, expect_valid, inventory_points, unless_tool_missing};
use vnni_generator::{render, validate, GenerateError, ValidateOptions, MIN_RANDOM};
use vnni_kernels::registry::Backend;

#[test]
fn the_example_policy_validates_on_a_million_random_queries_for_both_backends() {
    for backend in [Backend::Cuda, Backend::Cpu] {
        let policy = example(backend);
        let rendered = render(&policy).unwrap();
        let opts = ValidateOptions::new(inventory_points());
        assert!(opts.random >= MIN_RANDOM);
        let Some(v) = expect_valid(validate(&policy, &rendered, &opts)) else { return };
        let r = v.report();
        eprintln!("{backend:?}: {r}");
        assert!(r.random >= 1_000_000 && r.inventory > 10_000 && r.boundary > 0, "{r}");
        assert!(r.illegal > 10_000, "illegal queries are part of the mix: {r}");
        assert_eq!(r.compilers.len(), 2);
        // Every split of the example is reached on both sides, exactly at le and le + 1.
        assert!(r.coverage.splits > 0);
        assert_eq!(r.coverage.exact, r.coverage.splits, "{r}");
    }
}

/// Validate `policy` with `inc` / `rust` text edited by `edit`; boundary and inventory
/// queries only (no random ones), so they alone must catch the change.
fn mutated(edit: impl Fn(&mut vnni_generator::Rendered)) -> Option<GenerateError> {
    let policy = example(Backend::Cuda);
    let mut rendered = render(&policy).unwrap();
    let before = rendered.clone();
    edit(&mut rendered);
    assert_ne!(rendered, before, "the mutation must change the text");
    // A failed validation keeps its work files for inspection; here they are removed.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let work = std::env::temp_dir().join(format!("vnni-generator-mutation-{}-{n}", std::process::id()));
    let opts = ValidateOptions { random: 0, work_dir: Some(work.clone()), ..ValidateOptions::new(inventory_points()) };
    let r = validate(&policy, &rendered, &opts).map(|_| ());
    let _ = std::fs::remove_dir_all(&work);
    Some(unless_tool_missing(r)?.expect_err("validation must catch the mutation"))
}

/// The example's first grouped leaf (the first grouped candidate in id order) swapped for the
/// next candidate in id order (another grouped one), by candidate index: the same text in
/// both outputs.
fn leaf_swap() -> (String, String) {
    let candidates = example(Backend::Cuda).candidates;
    let i = candidates.iter().position(|c| c.id.starts_with("grouped.")).unwrap();
    assert!(candidates[i + 1].id.starts_with("grouped."));
    let id = &candidates[i].id;
    (format!("return {i}; // {id}"), format!("return {}; // {id}", i + 1))
}

fn replace_once(text: &mut String, from: &str, to: &str) {
    assert!(text.contains(from), "{from:?} is not in the generated text");
    *text = text.replacen(from, to, 1);
}

fn assert_disagrees(e: Option<GenerateError>, harness: &str) {
    let Some(e) = e else { return };
    eprintln!("caught: {e}");
    match &e {
        GenerateError::Disagree(d) => {
            assert_eq!(d.harness, harness, "{e}");
            assert_ne!(d.expected, d.got);
            assert!(d.query.contains("M=") && e.to_string().contains(&d.expected), "{e}");
        }
        other => panic!("expected a disagreement, got: {other}"),
    }
}

#[test]
fn a_cpp_threshold_moved_by_one_is_caught() {
    assert_disagrees(mutated(|r| replace_once(&mut r.inc, "if (n <= 4096) {", "if (n <= 4097) {")), "C++");
    assert_disagrees(mutated(|r| replace_once(&mut r.inc, "if (n <= 4096) {", "if (n <= 4095) {")), "C++");
    assert_disagrees(mutated(|r| replace_once(&mut r.inc, ", 128), kUnits) <= 2)", ", 128), kUnits) <= 1)")), "C++");
}

#[test]
fn a_cpp_leaf_swap_aspect_edge_or_overlay_change_is_caught() {
    let (from, to) = leaf_swap();
    assert_disagrees(mutated(|r| replace_once(&mut r.inc, &from, &to)), "C++");
    assert_disagrees(
        mutated(|r| replace_once(&mut r.inc, "if (n * 4 >= k * 1) ++a;", "if (n * 4 > k * 1) ++a;")),
        "C++",
    );
    assert_disagrees(mutated(|r| replace_once(&mut r.inc, "{0, 0, 4096, 4096,", "{0, 0, 4096, 4128,")), "C++");
}

#[test]
fn a_changed_rust_module_is_caught() {
    assert_disagrees(mutated(|r| replace_once(&mut r.rust, "if n <= 4096 {", "if n <= 4097 {")), "Rust");
    let (from, to) = leaf_swap();
    assert_disagrees(mutated(|r| replace_once(&mut r.rust, &from, &to)), "Rust");
    assert_disagrees(mutated(|r| replace_once(&mut r.rust, "let kblk = k / 32;", "let kblk = k / 32 + 1;")), "Rust");
}

#[test]
fn a_changed_cost_model_is_caught() {
    // A model's waves coefficient, the tail wave, the wave's knee, the occupancy's register
    // rule, in either language.
    assert_disagrees(mutated(|r| replace_once(&mut r.inc, "{{40097, 15}", "{{400, 15}")), "C++");
    assert_disagrees(mutated(|r| replace_once(&mut r.inc, "if (tail > 0) w +=", "if (tail > 1) w +=")), "C++");
    assert_disagrees(mutated(|r| replace_once(&mut r.inc, "3 * (draw < kFullDraw", "4 * (draw < kFullDraw")), "C++");
    assert_disagrees(
        mutated(|r| replace_once(&mut r.rust, "3 * draw.min(FULL_DRAW)", "4 * draw.min(FULL_DRAW)")),
        "Rust",
    );
    assert_disagrees(
        mutated(|r| replace_once(&mut r.inc, "ceil_div(registers * 32, 256)", "ceil_div(registers * 40, 256)")),
        "C++",
    );
    assert_disagrees(mutated(|r| replace_once(&mut r.rust, "coef: [(40097, 15)", "coef: [(400, 15)")), "Rust");
    assert_disagrees(mutated(|r| replace_once(&mut r.rust, "if tail > 0 {", "if tail > 1 {")), "Rust");
}

#[test]
fn a_moved_size_regime_edge_is_caught() {
    // The example's two-regime candidates change model at 2^24 elements: the edge owned by
    // the other side, in either language.
    assert_disagrees(mutated(|r| replace_once(&mut r.inc, "n * k >= e.below", "n * k > e.below")), "C++");
    assert_disagrees(mutated(|r| replace_once(&mut r.inc, "n * k < e.from", "n * k <= e.from")), "C++");
    assert_disagrees(mutated(|r| replace_once(&mut r.rust, "(e.from..e.below)", "(e.from..=e.below)")), "Rust");
}

#[test]
fn a_wrong_candidate_table_or_uncompilable_inc_is_caught() {
    let e =
        mutated(|r| replace_once(&mut r.inc, "\"direct\", Surface::kDecode, 32,", "\"direct\", Surface::kDecode, 33,"));
    if let Some(e) = e {
        assert!(matches!(e, GenerateError::CandidateTable { .. }), "{e}");
    }
    let e = mutated(|r| replace_once(&mut r.inc, "constexpr int32_t kSlots", "constexpr int32_t kSlots = 1 +"));
    if let Some(e) = e {
        assert!(matches!(e, GenerateError::Compile { .. }), "{e}");
        assert!(e.to_string().contains("vnni_dispatch.inc"), "{e}");
    }
}

#[test]
fn floating_point_in_generated_code_is_refused() {
    let policy = example(Backend::Cuda);
    let mut rendered = render(&policy).unwrap();
    replace_once(&mut rendered.inc, "constexpr int64_t kUnits", "constexpr double kUnits");
    let opts = ValidateOptions { random: 0, ..ValidateOptions::new(inventory_points()) };
    let e = validate(&policy, &rendered, &opts).map(|_| ()).expect_err("a double must be refused");
    assert!(matches!(e, GenerateError::FloatingPoint { .. }), "{e}");
    assert!(e.to_string().contains("vnni_dispatch.inc:"), "{e}");
    // Comments and strings may mention floats (the gate summary has percentages).
    assert!(render(&policy).unwrap().inc.contains("5.00%"));
}

#[test]
fn tables_rendered_from_another_policy_are_refused() {
    let rendered = render(&example(Backend::Cpu)).unwrap();
    let opts = ValidateOptions { random: 0, ..ValidateOptions::new(inventory_points()) };
    let e = validate(&example(Backend::Cuda), &rendered, &opts).map(|_| ()).expect_err("another policy's tables");
    assert!(matches!(e, GenerateError::OtherPolicy { .. }), "{e}");
}
