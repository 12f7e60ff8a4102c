//! Validation: both generated outputs, compiled, must answer every query exactly as the
//! Rust evaluator does (candidate table, selections, statuses of illegal queries), every id
//! must be in this registry and every legal query must have a selection. Only a
//! [`Validated`] value can be installed.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use vnni_policy::Policy;

use crate::error::{io, Disagreement, GenerateError, Result};
use crate::harness::{build_cpp, build_rust, write_sources, Harness};
use crate::protocol::{candidate_line, expected_answer};
use crate::queries::{self, InventoryPoints, Query, SplitCoverage};
use crate::render::Rendered;

/// The design's floor for random queries of an installable validation.
pub const MIN_RANDOM: usize = 1_000_000;
pub const DEFAULT_SEED: u64 = 0x7e57_ab1e_5eed_0001;

#[derive(Debug, Clone)]
pub struct ValidateOptions {
    pub inventory: InventoryPoints,
    pub random: usize,
    pub seed: u64,
    /// Where harnesses are built; a fresh temporary directory when `None`. Removed on
    /// success, kept (and named in the error) on failure.
    pub work_dir: Option<PathBuf>,
    /// Fail when rustc is missing. Otherwise the Rust module is validated where rustc
    /// exists, and the report says why it was not (a GPU node often has no Rust toolchain;
    /// the C++ tables, what such a node installs, are always compiled and checked).
    pub require_rust: bool,
}

impl ValidateOptions {
    pub fn new(inventory: InventoryPoints) -> ValidateOptions {
        ValidateOptions { inventory, random: MIN_RANDOM, seed: DEFAULT_SEED, work_dir: None, require_rust: false }
    }
}

#[derive(Debug, Clone)]
pub struct Report {
    pub queries: usize,
    pub inventory: usize,
    pub boundary: usize,
    pub random: usize,
    pub illegal: usize,
    pub coverage: SplitCoverage,
    pub compilers: Vec<String>,
    /// Why the Rust module was not compiled (rustc missing), when it was not.
    pub rust_not_compiled: Option<String>,
    pub evaluate: Duration,
    pub compile: Duration,
    pub run: Duration,
    pub total: Duration,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.coverage;
        writeln!(
            f,
            "validated {} queries ({} inventory, {} boundary, {} random; {} illegal) with {}",
            self.queries,
            self.inventory,
            self.boundary,
            self.random,
            self.illegal,
            self.compilers.join(" and ")
        )?;
        if let Some(why) = &self.rust_not_compiled {
            writeln!(f, "the Rust module was NOT compiled or checked: {why}")?;
        }
        writeln!(
            f,
            "split thresholds: {} splits, {} reached on both sides, {} at exactly le and le + 1",
            c.splits, c.both_sides, c.exact
        )?;
        if c.fallback_splits > 0 {
            writeln!(
                f,
                "fallback trees of domains with cost models (they answer beyond the models' limit): {} splits, {} \
                 reached on both sides there",
                c.fallback_splits, c.fallback_both_sides
            )?;
        }
        write!(
            f,
            "time: {:.1} s (evaluator {:.1} s, compile {:.1} s, harnesses {:.1} s)",
            self.total.as_secs_f64(),
            self.evaluate.as_secs_f64(),
            self.compile.as_secs_f64(),
            self.run.as_secs_f64()
        )
    }
}

/// Proof that `rendered` passed validation; [`crate::install()`] takes only this, and only
/// [`validate()`] makes one (the fields are private).
#[derive(Debug)]
pub struct Validated<'r> {
    rendered: &'r Rendered,
    report: Report,
}

impl<'r> Validated<'r> {
    pub fn rendered(&self) -> &'r Rendered {
        self.rendered
    }

    pub fn report(&self) -> &Report {
        &self.report
    }
}

static WORK_DIRS: AtomicUsize = AtomicUsize::new(0);

fn work_dir(opts: &ValidateOptions) -> Result<PathBuf> {
    let dir = opts.work_dir.clone().unwrap_or_else(|| {
        let n = WORK_DIRS.fetch_add(1, Ordering::Relaxed);
        std::env::temp_dir().join(format!("vnni-generate-{}-{n}", std::process::id()))
    });
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    Ok(dir)
}

pub fn validate<'r>(policy: &Policy, rendered: &'r Rendered, opts: &ValidateOptions) -> Result<Validated<'r>> {
    let start = Instant::now();
    policy.check()?;
    policy.check_registry()?;
    let digest = policy.digest();
    for (name, text) in rendered.files() {
        if !text.contains(&digest) {
            return Err(GenerateError::OtherPolicy { file: name.into(), digest });
        }
        crate::integer_only::check(name, text)?;
    }
    let set = queries::build(policy, &opts.inventory, opts.random, opts.seed);
    let expected_candidates: Vec<String> = policy.candidates.iter().map(candidate_line).collect();
    let expected = set.queries.iter().map(|q| expected_answer(policy, q)).collect::<Result<Vec<String>>>()?;
    let illegal = expected.iter().filter(|a| !a.starts_with("ok ")).count();
    let evaluate = start.elapsed();

    let dir = work_dir(opts)?;
    let outcome =
        compile_and_compare(policy, rendered, &dir, &set.queries, &expected_candidates, &expected, opts.require_rust);
    if matches!(outcome, Err(GenerateError::ToolMissing { .. } | GenerateError::Io { .. })) {
        // Nothing there to inspect.
        let _ = std::fs::remove_dir_all(&dir);
    }
    let Compared { compilers, rust_not_compiled, compile, run } = outcome?;
    let _ = std::fs::remove_dir_all(&dir);
    let report = Report {
        queries: set.queries.len(),
        inventory: set.inventory,
        boundary: set.boundary,
        random: set.random,
        illegal,
        coverage: set.coverage,
        compilers,
        rust_not_compiled,
        evaluate,
        compile,
        run,
        total: start.elapsed(),
    };
    Ok(Validated { rendered, report })
}

/// What the harnesses did: the compilers, why the Rust module was skipped (if it was), and
/// the time spent compiling and running.
struct Compared {
    compilers: Vec<String>,
    rust_not_compiled: Option<String>,
    compile: Duration,
    run: Duration,
}

/// Build each harness, run it over the query file, compare. A missing rustc skips the Rust
/// module unless `require_rust`; a missing C++ compiler is always an error.
fn compile_and_compare(
    policy: &Policy,
    rendered: &Rendered,
    dir: &Path,
    queries: &[Query],
    candidates: &[String],
    expected: &[String],
    require_rust: bool,
) -> Result<Compared> {
    let queries_path = dir.join("queries.txt");
    write_queries(&queries_path, queries)?;
    write_sources(rendered, dir)?;
    let (mut compile, mut run) = (Duration::ZERO, Duration::ZERO);
    let mut compilers = Vec::new();
    let mut rust_not_compiled = None;
    // C++ first: a broken .inc fails before rustc spends time on the Rust module.
    for (build, optional) in [(build_cpp as fn(&Path) -> Result<Harness>, false), (build_rust, !require_rust)] {
        let t = Instant::now();
        let h = match build(dir) {
            Err(e @ GenerateError::ToolMissing { .. }) if optional => {
                rust_not_compiled = Some(e.to_string());
                continue;
            }
            other => other?,
        };
        compile += t.elapsed();
        let t = Instant::now();
        let answers = dir.join(format!("answers_{}.txt", h.binary.file_name().unwrap_or_default().to_string_lossy()));
        h.run(&queries_path, &answers, dir)?;
        compare(policy, &h, &answers, candidates, queries, expected, dir)?;
        run += t.elapsed();
        compilers.push(h.compiler);
    }
    Ok(Compared { compilers, rust_not_compiled, compile, run })
}

fn write_queries(path: &Path, queries: &[Query]) -> Result<()> {
    let file = std::fs::File::create(path).map_err(io(path))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    for q in queries {
        writeln!(w, "{}", q.line()).map_err(io(path))?;
    }
    w.flush().map_err(io(path))
}

/// Compare a harness's answers with the evaluator's, line by line; the first difference
/// is the error.
fn compare(
    policy: &Policy,
    h: &Harness,
    answers: &Path,
    candidates: &[String],
    queries: &[Query],
    expected: &[String],
    dir: &Path,
) -> Result<()> {
    let harness = h.language.name().to_string();
    let file = std::fs::File::open(answers).map_err(io(answers))?;
    let mut lines = BufReader::with_capacity(1 << 20, file).lines();
    let mut next = || lines.next().transpose().map_err(io(answers));
    for want in candidates {
        let got = next()?.unwrap_or_else(|| "(end of output)".into());
        if &got != want {
            return Err(GenerateError::CandidateTable { harness, expected: want.clone(), got, dir: dir.into() });
        }
    }
    for (index, (q, want)) in queries.iter().zip(expected).enumerate() {
        let got = next()?.unwrap_or_else(|| "(end of output)".into());
        if &got != want {
            return Err(GenerateError::Disagree(Box::new(Disagreement {
                harness,
                index,
                query: q.describe(policy),
                expected: want.clone(),
                got,
                dir: dir.into(),
            })));
        }
    }
    if let Some(extra) = next()? {
        return Err(GenerateError::Harness {
            harness,
            dir: dir.into(),
            message: format!("extra output line {extra:?}"),
        });
    }
    Ok(())
}
