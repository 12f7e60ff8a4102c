//! `vnni-dispatch refresh`: the one command. Collect in stages (M = 1; fit and freeze the M = 1
//! policy; the batched rows at its picks) or resume, or reuse a sealed corpus; certify batch
//! invariance, fit the batched buckets beside the frozen M = 1 part, generate and validate the
//! tables, write the report, and optionally install; then print one summary table. Every step is the typed API of its
//! subcommand called in this process, so a renamed flag is a compile error, not a run-time
//! surprise; a rerun resumes (published cells are kept). The output directory holds
//! everything, each piece reusable: `m1/` (the M = 1 stage: its sealed corpus, the pairs a
//! development fit got wrong timed again in `m1/pairs/`, and the frozen `policy.json`), `corpus/` (sealed), `policy.json`, `tables/`,
//! `certificates.jsonl` (and, for a CUDA profile with prefill M, `prefill-certificates.jsonl`),
//! `report/` (the corpus report; the fit report in `report/fit/`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use vnni_corpus::collection::{CollectionPlan, PLAN_FILE};
use vnni_corpus::inventory::Inventory;
use vnni_corpus::read::read_certificates;
use vnni_kernels::registry::{candidates, PREFILL_MIN_M};
use vnni_kernels::{Backend, BackendChoice, CandidateId, Surface};
use vnni_learner::proxy::proxy_verdict;
use vnni_measure::invariance_plan::default_m1;
use vnni_measure::shapes::Shapes;
use vnni_policy::Policy;

use super::{certify, fit, generate, remeasure, report, sweep};
use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// `cuda`, `cpu`, or `auto` (cuda when a GPU is usable, else cpu with a notice).
    #[arg(long, default_value = "auto")]
    pub backend: BackendChoice,
    #[arg(long, default_value = "family-smoke")]
    pub profile: String,
    #[arg(long, default_value = "corpus/inventory")]
    pub inventory: PathBuf,
    /// Output directory (default: target/refresh/<profile>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Reuse this sealed corpus instead of collecting one.
    #[arg(long, conflicts_with = "prune_with")]
    pub corpus: Option<PathBuf>,
    /// With --corpus of a staged refresh (its batched rows timed at a frozen M = 1 policy):
    /// that policy.
    #[arg(long, requires = "corpus")]
    pub frozen_m1: Option<PathBuf>,
    /// Install the validated `.inc` here (the header and Rust module beside it).
    #[arg(long)]
    pub install: Option<PathBuf>,
    /// Sweep workers, one per device.
    #[arg(long, value_delimiter = ',')]
    pub devices: Vec<usize>,
    /// CPU threads per worker (0: every core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Random queries of the table validation.
    #[arg(long, default_value_t = 1_000_000)]
    pub random: u64,
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Tables for callers that launch the decode kernels with programmatic dependent launch
    /// (CUDA, sm_90): both stages are collected so (`sweep --programmatic`) and the policy
    /// records it. The picks differ from plain launches (docs/PERF.md).
    #[arg(long)]
    pub programmatic: bool,
    /// `dense-m.csv` files of `bench --dense-m` runs on this machine: the batched stage is
    /// planned with the grouped M buckets learned from them (`sweep --m-buckets-from`), so the
    /// policy's grouped buckets start where the fastest candidate changes.
    #[arg(long, value_delimiter = ',', conflicts_with = "corpus")]
    pub m_buckets_from: Vec<PathBuf>,
    // The M = 1 stage pruned by a policy's cost models (`sweep --prune-with`; the batched
    // stage, whose decode rows are copied, refuses it).
    #[command(flatten)]
    pub prune: sweep::PruneArgs,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("refresh")
            .val("backend", self.backend)
            .val("profile", &self.profile)
            .path("inventory", &self.inventory)
            .opt_path("out", self.out.as_deref())
            .opt_path("corpus", self.corpus.as_deref())
            .opt_path("frozen-m1", self.frozen_m1.as_deref())
            .opt_path("install", self.install.as_deref())
            .list("devices", &self.devices)
            .val("threads", self.threads)
            .val("random", self.random)
            .opt_path("cache", self.cache.as_deref())
            .flag("programmatic", self.programmatic)
            .list("m-buckets-from", &self.m_buckets_from.iter().map(|p| p.display()).collect::<Vec<_>>())
            .then(|a| self.prune.argv(a))
            .done()
    }
}

/// One finished step for the summary.
struct Step {
    name: &'static str,
    seconds: f64,
    outcome: String,
}

/// Run one step, timing it; `Ok` carries the step's one-line outcome.
fn step(name: &'static str, steps: &mut Vec<Step>, f: impl FnOnce() -> Result<String>) -> Result<()> {
    eprintln!("== {name}");
    let started = Instant::now();
    let outcome = f().with_context(|| format!("refresh step `{name}`"))?;
    steps.push(Step { name, seconds: started.elapsed().as_secs_f64(), outcome });
    Ok(())
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The CPU backend certifies every CPU decode identity on three small shapes (one narrow, one
/// tall) at M = 2, 5, 16 and 31; the GPU its default shapes and identities.
fn certify_args(plan: &CollectionPlan, out: &Path, cache: Option<&Path>) -> certify::Args {
    let cpu = plan.backend == Backend::Cpu;
    let m1: Vec<CandidateId> =
        if cpu { candidates(Backend::Cpu, Surface::Decode).into_iter().map(|c| c.id).collect() } else { default_m1() };
    certify::Args {
        backend: plan.backend,
        surface: Surface::Grouped,
        formats: Vec::new(),
        shapes: cpu.then(|| Shapes(vec![(512, 512), (2304, 256), (256, 2304)])),
        m: if cpu { vec![2, 5, 16, 31] } else { Vec::new() },
        m1,
        sms: plan.units,
        device: 0,
        cache: cache.map(Path::to_path_buf),
        out: out.join("certificates.jsonl"),
        policy: None,
        profile: None,
        inventory: PathBuf::from("corpus/inventory"),
    }
}

pub fn run(a: &Args) -> Result<()> {
    let inventory = Inventory::load(&a.inventory)?;
    let proxy = inventory.resolve(&a.profile)?.proxy;
    // The tables are validated over every shape of the inventory (its `all` profile); an
    // inventory of one's own without that profile, over the refreshed profile's shapes.
    let validated = if inventory.profiles.contains_key("all") { "all" } else { a.profile.as_str() };
    if a.install.is_some() && proxy {
        bail!(
            "{} is a workflow proxy and never installable: use --profile core (or another production profile) with --install",
            a.profile
        );
    }
    // The tools table validation needs, before anything is collected: a C++ compiler (the
    // tables a node installs are C++); rustc only checks the Rust module, where it exists.
    vnni_generator::harness::cxx().context("the generated tables are validated with a C++ compiler")?;
    if let Some(why) = vnni_generator::harness::rustc_missing() {
        eprintln!("notice: {why}: the generated Rust module will not be compiled or checked (the C++ tables will)");
    }
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from("target/refresh").join(&a.profile));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut steps = Vec::new();

    let (corpus, frozen_m1) = corpus_step(a, &out, &mut steps)?;
    require_sealed(&corpus)?;
    let plan = CollectionPlan::read(&corpus.join(PLAN_FILE))?;

    // 2. Batch invariance on this backend: grouped rows against single-row decodes; prefill
    // tiles too (CUDA) at the plan's prefill M values.
    let certs = certify_steps(a, &plan, &out, &mut steps)?;

    // 3. Fit (a failed gate still writes the policy, for inspection). A policy of an earlier
    // run must not stand in for this one if the fit stops before writing.
    let policy_path = out.join("policy.json");
    if policy_path.exists() {
        std::fs::remove_file(&policy_path)
            .with_context(|| format!("removing the previous {}", policy_path.display()))?;
    }
    let mut gates_passed = false;
    step("fit", &mut steps, || {
        let args = fit_args(&corpus, &policy_path, out.join("report/fit"), frozen_m1.clone());
        gates_passed = fit::fit_and_write(&args)?;
        Ok(match (plan.inventory.proxy, gates_passed) {
            (true, _) => "fitted (a workflow proxy: judged by the proxy verdict below)".into(),
            (false, true) => "gates passed".into(),
            (false, false) => "gates FAILED (the policy is for inspection)".into(),
        })
    })?;

    // 4. Batch invariance of what the policy dispatches: every planned format x shape x
    // grouped M at the bpp of the policy's own M = 1 pick (an install requires all of it).
    let policy_certs = out.join("policy-certificates.jsonl");
    {
        step("certify policy", &mut steps, || {
            let args = certify::Args {
                policy: Some(policy_path.clone()),
                profile: Some(a.profile.clone()),
                inventory: a.inventory.clone(),
                m: Vec::new(),
                out: policy_certs.clone(),
                ..certify_args(&plan, &out, a.cache.as_deref())
            };
            certify::run(&args).context(
                "certification at the policy's bpp failed: grouped rows differ from single-row decodes of the policy's M = 1 picks",
            )?;
            Ok(format!("{} (the policy's matrix)", s(&policy_certs)))
        })?;
    }

    // 5. Generate and validate (and install only a policy that passed its gates).
    if let Some(p) = &a.install {
        if !gates_passed {
            bail!("the policy failed its gates (see the fit report): refusing to install it at {}", p.display());
        }
    }
    // 4. Profiler evidence for a CUDA install: the top 3 candidates of every cell under Nsight
    // Compute, after (never inside) the timing; generate refuses an install without it.
    let evidence_dir = out.join("evidence");
    let profiled = a.install.is_some() && plan.backend == Backend::Cuda;
    if profiled {
        step("profile", &mut steps, || {
            let args = super::profile::Args {
                corpus: corpus.clone(),
                out: evidence_dir.clone(),
                top: Some(3),
                policy: Some(policy_path.clone()),
                chunk: vnni_corpus::evidence::DEFAULT_CHUNK,
                ncu: PathBuf::from("ncu"),
                replay: "kernel".into(),
                reparse: false,
                devices: if a.devices.is_empty() { vec![0] } else { a.devices.clone() },
                cache: a.cache.clone(),
                worker: false,
                first: 0,
                count: 0,
            };
            super::profile::run(&args)?;
            Ok(format!("{} (top 3 and the pick of every cell)", evidence_dir.display()))
        })?;
    }
    step("generate", &mut steps, || {
        let args = generate::Args {
            policy: policy_path.clone(),
            out: out.join("tables"),
            validate: true,
            install: a.install.clone(),
            install_header: a.install.as_ref().map(|p| p.with_extension("h")),
            install_rust: a.install.as_ref().map(|p| p.with_extension("rs")),
            random: usize::try_from(a.random).context("--random")?,
            seed: vnni_generator::validate::DEFAULT_SEED,
            inventory: a.inventory.clone(),
            require_rust: false,
            profile: validated.into(),
            certificates: policy_certs.is_file().then(|| policy_certs.clone()),
            evidence: profiled.then(|| evidence_dir.clone()),
            corpus: profiled.then(|| corpus.clone()),
        };
        generate::run(&args)?;
        Ok(format!("{} (validated)", args.out.display()))
    })?;

    // 6. The corpus report (bandwidth vs roofline, regret CDFs, decision maps).
    step("report", &mut steps, || {
        let args = report::Args {
            corpus: Some(corpus.clone()),
            dense_m: Vec::new(),
            policy: Some(policy_path.clone()),
            evidence: profiled.then(|| evidence_dir.clone()),
            out: out.join("report"),
        };
        report::run(&args)?;
        Ok(s(&args.out.join("report.md")))
    })?;

    let finished = Finished { out: &out, corpus: &corpus, plan: &plan, policy_path: &policy_path, certs: &certs };
    let verdict = summary(&finished, &steps, gates_passed, a.install.as_deref(), &a.inventory)?;
    if let Verdict::ProxyFail(why) = verdict {
        bail!("proxy verdict FAIL: {why}");
    }
    Ok(())
}

/// How a refresh ends: a workflow profile by its proxy verdict, a production profile by its gates.
enum Verdict {
    /// In-sample geomean and p95 regret of the proxy policy.
    ProxyPass(f64, f64),
    ProxyFail(String),
    Production {
        passed: bool,
    },
}

/// The files a finished refresh wrote.
struct Finished<'a> {
    out: &'a Path,
    corpus: &'a Path,
    plan: &'a CollectionPlan,
    policy_path: &'a Path,
    certs: &'a Path,
}

/// The corpus and the frozen M = 1 policy its batched rows inherit: reuse a sealed corpus
/// (verified), or collect one in two stages (resuming whatever is already published in
/// `out`): M = 1 rows into `out/m1/`, fitted into the frozen `out/m1/policy.json`, then the
/// batched rows at that policy's M = 1 picks (the decode rows copied) into `out/corpus`.
fn corpus_step(a: &Args, out: &Path, steps: &mut Vec<Step>) -> Result<(PathBuf, Option<PathBuf>)> {
    if let Some(c) = &a.corpus {
        step("verify", steps, || {
            let m = vnni_corpus::seal::verify(c, &super::verify::expected(&a.inventory)?)
                .with_context(|| format!("{} does not verify: it cannot be reused", c.display()))?;
            Ok(format!("corpus id {}", &m.corpus_id[..16]))
        })?;
        return Ok((c.clone(), a.frozen_m1.clone()));
    }
    let sweep = |out: PathBuf| sweep::Args {
        backend: a.backend,
        profile: a.profile.clone(),
        inventory: a.inventory.clone(),
        out,
        devices: a.devices.clone(),
        shard: None,
        threads: a.threads,
        device: 0,
        cache: a.cache.clone(),
        m1_only: false,
        m1_policy: None,
        m1_corpus: None,
        whole_rotations: false,
        programmatic: a.programmatic,
        m_buckets_from: a.m_buckets_from.clone(),
        prune: sweep::PruneArgs::default(),
        worker: None,
    };
    let stage1 = out.join("m1");
    let (m1_corpus, m1_policy) = (stage1.join("corpus"), stage1.join("policy.json"));
    step("collect M = 1", steps, || {
        // M = 1 rows do not depend on the grouped buckets: a new dense-M bench keeps this stage.
        // Pruning is of M = 1 candidates: this stage only (the batched stage refuses it).
        let m1 =
            sweep::Args { m1_only: true, m_buckets_from: Vec::new(), prune: a.prune.clone(), ..sweep(stage1.clone()) };
        sweep::run(&m1).context("the M = 1 collection failed; rerun the same command to resume")?;
        Ok(s(&m1_corpus))
    })?;
    require_sealed(&m1_corpus)?;
    step("fit M = 1", steps, || {
        // Frozen means fitted once: a rerun keeps the policy of this M = 1 corpus (a resumed
        // batched stage binds it, whatever binary runs now), and fits only when there is none.
        let m1_id = vnni_corpus::seal::verify(&m1_corpus, &Default::default())?.corpus_id;
        let kept = super::load_policy(&m1_policy).ok().filter(|p| p.provenance.corpus_id == m1_id);
        let (p, how) = match kept {
            Some(p) => (p, "kept".to_string()),
            None => {
                // The pair loop: the cells a development fit gets wrong in its failing domains
                // are timed again as pairs on this machine, and the fit that freezes the
                // M = 1 part applies them before its cross-validation.
                let pairs = remeasure::remeasure(&remeasure::Args {
                    corpus: m1_corpus.clone(),
                    out: stage1.join("pairs"),
                    p95_max: GATE,
                    ucb_max: GATE,
                    ledger: PathBuf::from(fit::DEFAULT_LEDGER),
                    device: a.devices.first().copied().unwrap_or(0),
                    cache: a.cache.clone(),
                })
                .context("timing the cells the development fit gets wrong again, as pairs")?;
                let args = fit::Args {
                    pairs: pairs.samples.clone(),
                    ..fit_args(&m1_corpus, &m1_policy, out.join("report/m1-fit"), None)
                };
                fit::fit_and_write(&args)?;
                (super::load_policy(&m1_policy)?, format!("fitted with {} pairs timed again", pairs.pairs))
            }
        };
        // Its sealed rows are the staged corpus's decode rows: a failure here is final.
        if let Some(sealed) = p.gates.sealed.as_ref().filter(|s| !s.passed) {
            bail!(
                "the M = 1 stage failed its sealed certification (decode p95 {:.2}%, recorded in the ledger): the batched stage is not collected; collect a new corpus",
                sealed.p95_regret * 100.0
            );
        }
        Ok(format!("{} {how} and frozen (M = 1 digest {})", s(&m1_policy), vnni_policy::short(&p.m1_digest())))
    })?;
    step("collect batched", steps, || {
        let args = sweep::Args {
            m1_policy: Some(m1_policy.clone()),
            m1_corpus: Some(m1_corpus.clone()),
            ..sweep(out.to_path_buf())
        };
        sweep::run(&args).context("the batched collection failed; rerun the same command to resume")?;
        Ok(format!("{} (batched rows at the frozen M = 1 picks)", out.join("corpus").display()))
    })?;
    Ok((out.join("corpus"), Some(m1_policy)))
}

/// The gates' thresholds a refresh fits with (held-out p95 regret and its confidence bound).
const GATE: f64 = 0.05;

/// The fit a refresh runs: the default gates, the repository's ledger, a report.
fn fit_args(corpus: &Path, policy: &Path, report: PathBuf, frozen_m1: Option<PathBuf>) -> fit::Args {
    fit::Args {
        corpus: corpus.to_path_buf(),
        out: policy.to_path_buf(),
        report: Some(report),
        nested_family_cv: false,
        threads: None,
        p95_max: GATE,
        ucb_max: GATE,
        min_pass: 0.99,
        ledger: PathBuf::from(fit::DEFAULT_LEDGER),
        frozen_m1,
        pairs: None,
        development_only: false,
        development_policy: None,
        correction: fit::CorrectionSpec::default(),
        focus: fit::FocusSpec::default(),
        twins: fit::TwinsSpec::default(),
        reduce_term: fit::ReduceTermSpec::default(),
    }
}

/// A collection left unsealed (another worker's lock, or a SLURM_ARRAY_* shard) stops the refresh.
fn require_sealed(corpus: &Path) -> Result<()> {
    if !corpus.join(vnni_corpus::seal::MANIFEST).is_file() {
        bail!(
            "{} is not a sealed corpus yet: the collection left cells unmeasured (another worker's lock, or a SLURM_ARRAY_* variable making this run a shard); rerun, or `vnni-dispatch merge` the shards",
            corpus.display()
        );
    }
    Ok(())
}

/// Batch-invariance certificates on the corpus's backend; returns the grouped certificates' path.
fn certify_steps(a: &Args, plan: &CollectionPlan, out: &Path, steps: &mut Vec<Step>) -> Result<PathBuf> {
    let certs = out.join("certificates.jsonl");
    step("certify", steps, || {
        let args = certify_args(plan, out, a.cache.as_deref());
        certify::run(&args)
            .context("batch-invariance certification failed: grouped rows differ from single-row decodes")?;
        Ok(format!("{}", certs.display()))
    })?;
    let prefill_m: Vec<usize> = plan.inventory.m.iter().copied().filter(|&m| m >= PREFILL_MIN_M).collect();
    if plan.backend == Backend::Cuda && !prefill_m.is_empty() {
        step("certify prefill", steps, || {
            let args = certify::Args {
                surface: Surface::Prefill,
                shapes: None,
                m: prefill_m.clone(),
                out: out.join("prefill-certificates.jsonl"),
                ..certify_args(plan, out, a.cache.as_deref())
            };
            certify::run(&args).context("prefill certification failed: prefill rows differ from single-row decodes")?;
            Ok(format!("{}", args.out.display()))
        })?;
    }
    Ok(certs)
}

/// The certificates of the policy's own matrix and the gaps left in it (what an install needs).
fn policy_matrix(path: &Path, policy: &Policy, inventory: &Path) -> Result<String> {
    if !path.is_file() {
        return Ok("not certified".into());
    }
    let certs = read_certificates(path)?;
    let plan = certify::policy_plan(policy, None, inventory)?;
    let gaps = vnni_generator::certified::gaps(policy, &plan, &certs)?;
    Ok(format!("{} certificates at the policy's own bpp, {} planned points uncertified", certs.len(), gaps.len()))
}

/// Print the summary table and the verdict line.
fn summary(
    f: &Finished,
    steps: &[Step],
    gates_passed: bool,
    installed: Option<&Path>,
    inventory: &Path,
) -> Result<Verdict> {
    let Finished { out, corpus, plan, policy_path, certs } = *f;
    let bytes = std::fs::read(policy_path).with_context(|| format!("reading {}", policy_path.display()))?;
    let policy = Policy::from_bytes(&bytes).with_context(|| format!("{} is not a policy", policy_path.display()))?;
    let certificates = read_certificates(certs)?;
    let verdict = if plan.inventory.proxy {
        let v = proxy_verdict(corpus, &certificates, &policy)?;
        if v.passed() {
            Verdict::ProxyPass(v.in_sample_geomean, v.in_sample_p95)
        } else {
            Verdict::ProxyFail(v.failures.join("; "))
        }
    } else {
        Verdict::Production { passed: gates_passed }
    };
    let bad = certificates.iter().filter(|c| c.mismatches > 0 || c.repeat_mismatches > 0).count();
    let worst = policy
        .domains
        .iter()
        .filter_map(|d| {
            d.stats.as_ref().map(|st| {
                (st.p95_regret, format!("{} {} bucket {} aspect {:?}", d.codebook, d.mode, d.m_bucket, d.aspect))
            })
        })
        .max_by(|x, y| x.0.total_cmp(&y.0));
    println!();
    println!("{:<16} {:>8}  outcome", "step", "seconds");
    for st in steps {
        println!("{:<16} {:>8.1}  {}", st.name, st.seconds, st.outcome);
    }
    println!();
    let g = &policy.gates;
    let rows: Vec<(&str, String)> = vec![
        ("backend", format!("{} {} ({}, {} units)", plan.backend, plan.arch, plan.device, plan.units)),
        (
            "profile",
            format!(
                "{} ({} cells, inventory {})",
                plan.inventory.profile,
                plan.cells().len(),
                &plan.inventory_digest[..16]
            ),
        ),
        ("candidates", format!("{}", policy.candidates.len())),
        (
            "launch",
            if policy.provenance.programmatic {
                "decode candidates launched programmatically: the tables are for callers that launch so".into()
            } else {
                "plain".into()
            },
        ),
        (
            "domains",
            format!(
                "{} ({} with data, {} passing) -> gates {}",
                policy.domains.len(),
                g.domains_with_data,
                g.domains_passing,
                match (plan.inventory.proxy, gates_passed) {
                    (true, _) => "not applied (a workflow proxy)",
                    (false, true) => "PASSED",
                    (false, false) => "FAILED",
                }
            ),
        ),
        ("worst p95", worst.map_or("-".into(), |(p, d)| format!("{:.2}% ({d})", p * 100.0))),
        (
            "sealed",
            g.sealed.as_ref().map_or("no sealed rows".into(), |s| {
                format!("p95 {:.2}% {}", s.p95_regret * 100.0, if s.passed { "passed" } else { "FAILED" })
            }),
        ),
        (
            "staged",
            policy.provenance.frozen_m1.as_ref().map_or(
                "no: one-stage corpus (batched rows timed at each cell's fastest decode bpp)".into(),
                |f| {
                    format!(
                        "batched rows timed at the frozen M = 1 picks (M = 1 digest {}, corpus {})",
                        vnni_policy::short(&f.m1_digest),
                        vnni_policy::short(&f.m1_corpus_id)
                    )
                },
            ),
        ),
        ("invariance", format!("{} certificates, {bad} with mismatches", certificates.len())),
        ("matrix", policy_matrix(&out.join("policy-certificates.jsonl"), &policy, inventory)?),
        ("corpus", s(corpus)),
        ("policy", format!("{} (sha256 {})", s(policy_path), &policy.digest()[..16])),
        ("tables", s(&out.join("tables"))),
        ("report", s(&out.join("report/report.md"))),
        ("installed", installed.map_or("no (--install PATH)".into(), s)),
    ];
    for (k, v) in rows {
        println!("{k:<11} {v}");
    }
    println!();
    match &verdict {
        Verdict::ProxyPass(g, p) => println!(
            "verdict     PROXY PASS: every stage is healthy (in-sample regret geomean {:.1}%, p95 {:.1}%); {} is a workflow check, never installed: the production gates apply to core and mtp-head",
            g * 100.0,
            p * 100.0,
            plan.inventory.profile
        ),
        Verdict::ProxyFail(why) => println!("verdict     PROXY FAIL: {why}"),
        Verdict::Production { passed: true } => {
            println!("verdict     PASSED: the tables are installable (refresh --install PATH, or generate --install)")
        }
        Verdict::Production { passed: false } => println!(
            "verdict     FAILED: the policy failed its gates; the tables are for inspection, not for installation (see the report)"
        ),
    }
    Ok(verdict)
}
