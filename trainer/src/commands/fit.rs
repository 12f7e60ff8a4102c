//! `vnni-dispatch fit --corpus DIR`: fit a dispatch policy from a sealed corpus, write it
//! atomically (default `policy.json`), record the sealed certification in the repository's
//! ledger, and optionally write the fit report (Markdown and decision maps). A staged corpus
//! is fitted with `--frozen-m1 P`: P's M = 1 part is kept, the batched buckets are fitted.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use vnni_learner::corpus::Twins;
use vnni_learner::report::write_report;
use vnni_learner::{fit, FitOptions};

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// A sealed corpus directory (corpus.manifest.json, plan.json, the phase files).
    #[arg(long)]
    pub corpus: PathBuf,
    /// Where the policy goes.
    #[arg(long, default_value = "policy.json")]
    pub out: PathBuf,
    /// Write the fit report (report.md and decision maps, PNG and SVG) into this directory.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// In the report, choose each left-out family's hyperparameters again without it (nested
    /// leave-one-family-out; about 10x the cross-validation's work; the policy is the same).
    #[arg(long)]
    pub nested_family_cv: bool,
    /// Threads fitting the domains (default: one per core); the policy is the same for any.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// A domain passes when its held-out p95 regret is below this fraction ...
    #[arg(long, default_value_t = 0.05, value_parser = fraction)]
    pub p95_max: f64,
    /// ... and the p95 of its per-cell regret upper confidence bounds is below this.
    #[arg(long, default_value_t = 0.05, value_parser = fraction)]
    pub ucb_max: f64,
    /// The fraction of domains with data that must pass.
    #[arg(long, default_value_t = 0.99, value_parser = fraction)]
    pub min_pass: f64,
    /// The sealed-certification ledger, keyed by corpus id: the repository's, so a new --out
    /// cannot reset it (a corpus whose sealed certification failed is never fitted again).
    #[arg(long, default_value = DEFAULT_LEDGER)]
    pub ledger: PathBuf,
    /// A staged corpus (`sweep --m1-policy`): the frozen M = 1 policy its batched rows were
    /// timed at; its M = 1 part is copied into the new policy and only the batched buckets are fitted.
    #[arg(long)]
    pub frozen_m1: Option<PathBuf>,
    /// Development cells timed again as pairs (the pairs.samples.csv of `remeasure`, or the
    /// samples.csv of `bench --pairs R/remeasure.csv`), applied before cross-validation; the
    /// policy records the file's sha256. `remeasure` lists them without the sealed look; a
    /// fit that lists them (`--report`) spends it: give that one a scratch --ledger.
    #[arg(long)]
    pub pairs: Option<PathBuf>,
    /// A learner experiment: fit and report on the development rows alone. The sealed rows
    /// are not looked at, the ledger is neither read nor written, and no policy is written
    /// (nothing of it can be installed); --out is ignored.
    #[arg(long)]
    pub development_only: bool,
    /// With --development-only: write the policy here anyway, marked as fitted on the
    /// development rows alone (never installable), to score it on fresh shapes.
    #[arg(long, requires = "development_only")]
    pub development_policy: Option<PathBuf>,
    /// How the cost models' predictions are corrected by their residuals at the development
    /// shapes: `off`, or `h=OCTAVES,lambda=STRENGTH,prior=WEIGHT` (a Gaussian in log2 N,
    /// log2 K); the policy records the rule.
    #[arg(long, default_value_t = CorrectionSpec::default(), value_parser = CorrectionSpec::parse)]
    pub correction: CorrectionSpec,
    /// How much a development row weighs in its cost model's fit: `off` (every row 1, the
    /// default), or `scale=R,floor=W` (a row R behind its cell's fastest weighs 1/2, none less
    /// than W); the policy records it.
    #[arg(long, default_value_t = FocusSpec::default(), value_parser = FocusSpec::parse)]
    pub focus: FocusSpec,
    /// How launch twins' records are read (candidates that launch one kernel the same way at
    /// a shape): `pooled`, the default (a record racing cut short is read as its twin's
    /// fullest), or `as-measured`; the policy records it.
    #[arg(long, default_value_t = TwinsSpec::default(), value_parser = TwinsSpec::parse)]
    pub twins: TwinsSpec,
    /// Whether the graph-mode decode cost models carry the split-K reduce term (the serial
    /// fold of a split launch's partials): `on`, or `off`, the default (as policies from before
    /// it); the policy records it.
    #[arg(long, default_value_t = ReduceTermSpec::default(), value_parser = ReduceTermSpec::parse)]
    pub reduce_term: ReduceTermSpec,
}

/// `--reduce-term`: `on` or `off` (`vnni_learner::FitOptions::reduce_term`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReduceTermSpec(pub bool);

impl Default for ReduceTermSpec {
    /// The learner's default (`vnni_learner::FitOptions`).
    fn default() -> Self {
        ReduceTermSpec(FitOptions::default().reduce_term)
    }
}

impl ReduceTermSpec {
    pub fn parse(s: &str) -> Result<ReduceTermSpec, String> {
        match s {
            "on" => Ok(ReduceTermSpec(true)),
            "off" => Ok(ReduceTermSpec(false)),
            _ => Err(format!("{s:?}: give on or off")),
        }
    }
}

impl std::fmt::Display for ReduceTermSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0 { "on" } else { "off" })
    }
}

/// `--twins`: `pooled` or `as-measured` (`vnni_learner::corpus::Twins`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TwinsSpec(pub Twins);

impl Default for TwinsSpec {
    /// The learner's default (`vnni_learner::FitOptions`).
    fn default() -> Self {
        TwinsSpec(FitOptions::default().twins)
    }
}

impl TwinsSpec {
    pub fn parse(s: &str) -> Result<TwinsSpec, String> {
        match s {
            "pooled" => Ok(TwinsSpec(Twins::Pooled)),
            "as-measured" => Ok(TwinsSpec(Twins::AsMeasured)),
            _ => Err(format!("{s:?}: give pooled or as-measured")),
        }
    }
}

impl std::fmt::Display for TwinsSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Twins::Pooled => "pooled",
            Twins::AsMeasured => "as-measured",
        })
    }
}

/// `key=value,...` with numbers for `keys` (each at most once: a repeated key keeps the last);
/// a missing key is `None`.
fn key_values<const N: usize>(s: &str, keys: [&str; N]) -> Result<[Option<f64>; N], String> {
    let mut v = [None; N];
    for part in s.split(',') {
        let (key, value) = part.split_once('=').ok_or_else(|| format!("{part:?} is not key=value"))?;
        let i = keys
            .iter()
            .position(|k| *k == key.trim())
            .ok_or_else(|| format!("unknown key {key:?} ({})", keys.join(", ")))?;
        v[i] = Some(value.trim().parse().map_err(|_| format!("{value:?} is not a number"))?);
    }
    Ok(v)
}

/// `--focus`: `off` or the scale and floor of `vnni_policy::Focus` (fractions, kept in 1/1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FocusSpec(pub Option<vnni_policy::Focus>);

impl Default for FocusSpec {
    /// Off, the learner's default (`vnni_learner::FitOptions`).
    fn default() -> Self {
        FocusSpec(None)
    }
}

impl FocusSpec {
    pub fn parse(s: &str) -> Result<FocusSpec, String> {
        if s == "off" {
            return Ok(FocusSpec(None));
        }
        match key_values(s, ["scale", "floor"])?.map(|x| x.map(|x| (x * 1000.0).round())) {
            [Some(scale), Some(floor)] if (1.0..=10_000.0).contains(&scale) && (0.0..=1000.0).contains(&floor) => {
                Ok(FocusSpec(Some(vnni_policy::Focus { scale_permille: scale as u32, floor_permille: floor as u32 })))
            }
            _ => Err(format!("{s:?}: give off or scale=[0.001, 10],floor=[0, 1], both (kept in 1/1000)")),
        }
    }
}

impl std::fmt::Display for FocusSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            None => write!(f, "off"),
            Some(x) => {
                write!(
                    f,
                    "scale={},floor={}",
                    f64::from(x.scale_permille) / 1000.0,
                    f64::from(x.floor_permille) / 1000.0
                )
            }
        }
    }
}

/// `--correction`: `off` or a Gaussian's bandwidth, strength and prior weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CorrectionSpec(pub Option<(f64, f64, f64)>);

impl Default for CorrectionSpec {
    /// The learner's default rule (`vnni_learner::default_correction`).
    fn default() -> Self {
        CorrectionSpec(Some(vnni_learner::DEFAULT_CORRECTION))
    }
}

impl CorrectionSpec {
    pub fn parse(s: &str) -> Result<CorrectionSpec, String> {
        if s == "off" {
            return Ok(CorrectionSpec(None));
        }
        match key_values(s, ["h", "lambda", "prior"])? {
            [Some(h), Some(l), Some(p)]
                if h > 0.0 && h <= 4.0 && (0.0..=1.0).contains(&l) && (1.0 / 65536.0..=16.0).contains(&p) =>
            {
                Ok(CorrectionSpec(Some((h, l, p))))
            }
            _ => Err(format!("{s:?}: give off or h=(0, 4],lambda=[0, 1],prior=[2^-16, 16], all three")),
        }
    }

    pub fn rule(self) -> Option<vnni_policy::Correction> {
        self.0.map(|(h, l, p)| vnni_policy::Correction::gaussian(h, l, p))
    }
}

impl std::fmt::Display for CorrectionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            None => write!(f, "off"),
            Some((h, l, p)) => write!(f, "h={h},lambda={l},prior={p}"),
        }
    }
}

/// The repository's sealed ledger.
pub const DEFAULT_LEDGER: &str = "lfs-data/sealed-ledger.json";

/// The ledger to use: a path given explicitly as is; the default resolved against the
/// repository this command runs in (the nearest ancestor of the current directory holding
/// `lfs-data/`), so the working directory cannot start a fresh one; outside a repository,
/// beside the policy, said in a notice.
pub fn resolve_ledger(given: &std::path::Path, out: &std::path::Path) -> PathBuf {
    if given != std::path::Path::new(DEFAULT_LEDGER) {
        return given.to_path_buf();
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    if let Some(root) = cwd.ancestors().find(|d| d.join("lfs-data").is_dir()) {
        return root.join(DEFAULT_LEDGER);
    }
    let beside = out.parent().filter(|p| !p.as_os_str().is_empty()).map_or_else(PathBuf::new, PathBuf::from);
    let path = beside.join("sealed-ledger.json");
    eprintln!("notice: no repository (lfs-data/) above {}: the sealed ledger is {}", cwd.display(), path.display());
    path
}

/// A threshold: a finite fraction in (0, 1] (0 would pass everything or nothing; NaN and
/// infinities would write a policy `generate` refuses).
pub fn fraction(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("{s} is not a fraction in (0, 1]"))
    }
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("fit")
            .path("corpus", &self.corpus)
            .path("out", &self.out)
            .opt_path("report", self.report.as_deref())
            .flag("nested-family-cv", self.nested_family_cv)
            .opt("threads", self.threads)
            .val("p95-max", self.p95_max)
            .val("ucb-max", self.ucb_max)
            .val("min-pass", self.min_pass)
            .path("ledger", &self.ledger)
            .opt_path("frozen-m1", self.frozen_m1.as_deref())
            .opt_path("pairs", self.pairs.as_deref())
            .flag("development-only", self.development_only)
            .opt_path("development-policy", self.development_policy.as_deref())
            .val("correction", self.correction)
            .val("focus", self.focus)
            .val("twins", self.twins)
            .val("reduce-term", self.reduce_term)
            .done()
    }
}

pub fn run(a: &Args) -> Result<()> {
    if !fit_and_write(a)? && !a.development_only {
        bail!("the policy failed its gates: written for inspection only, do not install it");
    }
    Ok(())
}

/// Fit, write the policy (also one that failed its gates, for inspection) and the report;
/// returns whether the policy passed every gate.
pub fn fit_and_write(a: &Args) -> Result<bool> {
    let started = Instant::now();
    let ledger = resolve_ledger(&a.ledger, &a.out);
    let opts = FitOptions {
        p95_max: a.p95_max,
        ucb_max: a.ucb_max,
        min_pass: a.min_pass,
        ledger: (!a.development_only).then(|| ledger.clone()),
        certify_sealed: !a.development_only,
        nested_family_cv: a.nested_family_cv,
        threads: a.threads.map(usize::from),
        frozen_m1: a.frozen_m1.as_deref().map(super::load_policy).transpose()?,
        pairs: a.pairs.clone(),
        family_cv: a.report.is_some(),
        correction: a.correction.rule(),
        focus: a.focus.0,
        twins: a.twins.0,
        reduce_term: a.reduce_term.0,
        ..Default::default()
    };
    let mut f = fit(&a.corpus, &opts)?;
    if !a.development_only {
        vnni_corpus::write_bytes(&a.out, &f.policy.to_bytes())
            .with_context(|| format!("writing {}", a.out.display()))?;
    }
    if let Some(path) = &a.development_policy {
        f.policy.provenance.development_only = true;
        vnni_corpus::write_bytes(path, &f.policy.to_bytes()).with_context(|| format!("writing {}", path.display()))?;
    }
    let g = &f.policy.gates;
    let worst = f
        .policy
        .domains
        .iter()
        .filter_map(|d| d.stats.as_ref().map(|s| (s.p95_regret, d)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    println!(
        "fit {} domains ({} with data, {} passing, {} overlays) in {:.1} s",
        f.policy.domains.len(),
        g.domains_with_data,
        g.domains_passing,
        f.policy.overlays.len(),
        started.elapsed().as_secs_f64()
    );
    if let Some((p95, d)) = worst {
        println!(
            "worst held-out p95 regret {:.2}% ({} {} M-bucket {} aspect {:?})",
            p95 * 100.0,
            d.codebook,
            d.mode,
            d.m_bucket,
            d.aspect
        );
    }
    match &g.sealed {
        None if a.development_only => {
            println!("development only: sealed rows not looked at, no ledger entry, nothing written to --out")
        }
        Some(s) => {
            println!(
                "sealed certification: {} rows, p95 {:.2}%, {}",
                s.rows,
                s.p95_regret * 100.0,
                if s.passed { "passed" } else { "FAILED (recorded; this corpus is never refit)" }
            );
            for (name, v) in s.named_scores() {
                let measured = v.as_measured.map_or(String::new(), |m| {
                    format!(
                        "  (as measured: p95 {:.2}%  geomean {:.2}%  max {:.2}%)",
                        m.p95_regret * 100.0,
                        m.geomean_regret * 100.0,
                        m.max_regret * 100.0
                    )
                });
                println!(
                    "  {name:<24} {:>5} rows  p95 {:>6.2}%  geomean {:>5.2}%  max {:>6.2}%{measured}",
                    v.rows,
                    v.p95_regret * 100.0,
                    v.geomean_regret * 100.0,
                    v.max_regret * 100.0
                );
            }
        }
        None => println!("sealed certification: no sealed rows, not run"),
    }
    if let Some(path) = a.development_policy.as_ref().filter(|_| a.development_only) {
        println!("development policy {} (sha256 {}; never installable)", path.display(), f.policy.digest());
    } else if a.development_only {
        println!("policy sha256 {} (not written)", f.policy.digest());
    } else if g.sealed.is_some() {
        println!("policy {} (sha256 {}), sealed ledger {}", a.out.display(), f.policy.digest(), ledger.display());
    } else {
        println!("policy {} (sha256 {}); no sealed rows, no ledger entry", a.out.display(), f.policy.digest());
    }
    if let Some(dir) = &a.report {
        let files = write_report(&f, dir)?;
        println!("report {} ({} files)", dir.join("report.md").display(), files.len());
    }
    Ok(g.passed && g.sealed.as_ref().is_none_or(|s| s.passed))
}
