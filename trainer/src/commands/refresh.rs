//! `vnni-dispatch refresh`: the one command. Collect (or resume, or reuse a sealed corpus),
//! certify batch invariance, fit, generate and validate the tables, write the report, and
//! optionally install; then print one summary table. Each step is this binary's own
//! subcommand run as a child process, so a step's failure names itself and a rerun resumes
//! (published cells are kept). The output directory holds everything, each piece reusable:
//! `corpus/` (sealed), `policy.json`, `tables/`, `certificates.jsonl` (and, for a CUDA
//! profile with prefill M, `prefill-certificates.jsonl`), `report/` (the corpus report; the fit
//! report in `report/fit/`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use vnni_corpus::collection::{CollectionPlan, PLAN_FILE};
use vnni_corpus::read::read_certificates;
use vnni_kernels::registry::{candidates, Backend, Surface, PREFILL_MIN_M};
use vnni_policy::Policy;

#[derive(clap::Args)]
pub struct Args {
    /// `cuda`, `cpu`, or `auto` (cuda when a GPU is usable, else cpu with a notice).
    #[arg(long, default_value = "auto", value_parser = ["cuda", "cpu", "auto"])]
    backend: String,
    #[arg(long, default_value = "family-smoke")]
    profile: String,
    #[arg(long, default_value = "corpus/inventory")]
    inventory: PathBuf,
    /// Output directory (default: target/refresh/<profile>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Reuse this sealed corpus instead of collecting one.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Install the validated `.inc` here (the header and Rust module beside it).
    #[arg(long)]
    install: Option<PathBuf>,
    /// Sweep workers, one per device.
    #[arg(long, value_delimiter = ',')]
    devices: Vec<usize>,
    /// CPU threads per worker (0: every core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Random queries of the table validation.
    #[arg(long, default_value_t = 1_000_000)]
    random: u64,
    #[arg(long)]
    cache: Option<PathBuf>,
}

/// One finished step for the summary.
struct Step {
    name: &'static str,
    seconds: f64,
    outcome: String,
}

/// Run this binary's subcommand `args`; stdout is captured (and echoed), stderr streams.
fn step(name: &'static str, args: &[String], steps: &mut Vec<Step>) -> Result<(bool, String)> {
    let exe = std::env::current_exe().context("locating the vnni-dispatch binary")?;
    eprintln!("== {name}: vnni-dispatch {}", args.join(" "));
    let started = Instant::now();
    let out = Command::new(exe).args(args).stderr(std::process::Stdio::inherit()).output().with_context(|| format!("running {name}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprint!("{stdout}");
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
    steps.push(Step { name, seconds: started.elapsed().as_secs_f64(), outcome: last });
    Ok((out.status.success(), stdout))
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

pub fn run(a: &Args) -> Result<()> {
    if a.install.is_some() && a.profile == "family-smoke" {
        bail!("family-smoke is an end-to-end proxy and never installable: use --profile core (or another production profile) with --install");
    }
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from("target/refresh").join(&a.profile));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut steps = Vec::new();

    // 1. The corpus: reuse, or collect (resuming whatever is already published in `out`).
    let corpus = match &a.corpus {
        Some(c) => {
            let (ok, _) = step("verify", &["verify".into(), "--corpus".into(), s(c), "--inventory".into(), s(&a.inventory)], &mut steps)?;
            if !ok {
                bail!("{} does not verify: it cannot be reused", c.display());
            }
            c.clone()
        }
        None => {
            let mut args: Vec<String> = vec![
                "sweep".into(),
                "--backend".into(),
                a.backend.clone(),
                "--profile".into(),
                a.profile.clone(),
                "--inventory".into(),
                s(&a.inventory),
                "--out".into(),
                s(&out),
                "--threads".into(),
                a.threads.to_string(),
            ];
            if !a.devices.is_empty() {
                args.push("--devices".into());
                args.push(a.devices.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(","));
            }
            if let Some(c) = &a.cache {
                args.extend(["--cache".into(), s(c)]);
            }
            let (ok, _) = step("collect", &args, &mut steps)?;
            if !ok {
                bail!("collection failed (see above); rerun the same command to resume");
            }
            out.join("corpus")
        }
    };
    if !corpus.join(vnni_corpus::seal::MANIFEST).is_file() {
        bail!(
            "{} is not a sealed corpus yet: the collection left cells unmeasured (another worker's lock, or a SLURM_ARRAY_* variable making this run a shard); rerun, or `vnni-dispatch merge` the shards",
            corpus.display()
        );
    }
    let plan = CollectionPlan::read(&corpus.join(PLAN_FILE))?;
    let backend = if plan.backend == "cuda" { Backend::Cuda } else { Backend::Cpu };

    // 2. Batch invariance on this backend: grouped rows against single-row decodes.
    let certs = out.join("certificates.jsonl");
    let mut cert_args: Vec<String> =
        vec!["certify".into(), "--backend".into(), plan.backend.clone(), "--out".into(), s(&certs)];
    if backend == Backend::Cpu {
        let m1: Vec<String> = candidates(Backend::Cpu, Surface::Decode).into_iter().map(|c| c.id).collect();
        cert_args.extend([
            "--shapes".into(),
            "512x512,2304x256,256x2304".into(),
            "--m".into(),
            "2,5,16,31".into(),
            "--m1".into(),
            m1.join(","),
            "--sms".into(),
            plan.units.to_string(),
        ]);
    } else if let Some(c) = &a.cache {
        cert_args.extend(["--cache".into(), s(c)]);
    }
    let (ok, _) = step("certify", &cert_args, &mut steps)?;
    if !ok {
        bail!("batch-invariance certification failed (see above): grouped rows differ from single-row decodes");
    }
    // Prefill tiles (CUDA only) at the plan's prefill M values.
    let prefill_m: Vec<String> =
        plan.inventory.m.iter().filter(|&&m| m >= PREFILL_MIN_M).map(|m| m.to_string()).collect();
    if backend == Backend::Cuda && !prefill_m.is_empty() {
        let mut args: Vec<String> = vec![
            "certify".into(),
            "--backend".into(),
            "cuda".into(),
            "--surface".into(),
            "prefill".into(),
            "--m".into(),
            prefill_m.join(","),
            "--out".into(),
            s(&out.join("prefill-certificates.jsonl")),
        ];
        if let Some(c) = &a.cache {
            args.extend(["--cache".into(), s(c)]);
        }
        let (ok, _) = step("certify prefill", &args, &mut steps)?;
        if !ok {
            bail!("prefill certification failed (see above): prefill rows differ from single-row decodes");
        }
    }

    // 3. Fit (a failed gate still writes the policy, for inspection). A policy of an earlier
    // run must not stand in for this one if the fit stops before writing.
    let policy_path = out.join("policy.json");
    if policy_path.exists() {
        std::fs::remove_file(&policy_path).with_context(|| format!("removing the previous {}", policy_path.display()))?;
    }
    let (fit_ok, _) = step(
        "fit",
        &["fit".into(), "--corpus".into(), s(&corpus), "--out".into(), s(&policy_path), "--report".into(), s(&out.join("report/fit"))],
        &mut steps,
    )?;
    if !policy_path.is_file() {
        bail!("fit wrote no policy (see above)");
    }

    // 4. Generate and validate (and install only a policy that passed its gates).
    let mut gen_args: Vec<String> = vec![
        "generate".into(),
        "--policy".into(),
        s(&policy_path),
        "--out".into(),
        s(&out.join("tables")),
        "--validate".into(),
        "--random".into(),
        a.random.to_string(),
        "--inventory".into(),
        s(&a.inventory),
    ];
    if let Some(p) = &a.install {
        if !fit_ok {
            bail!("the policy failed its gates (see the fit report): refusing to install it at {}", p.display());
        }
        gen_args.extend(["--install".into(), s(p)]);
        gen_args.extend(["--install-header".into(), s(&p.with_extension("h"))]);
        gen_args.extend(["--install-rust".into(), s(&p.with_extension("rs"))]);
    }
    let (ok, _) = step("generate", &gen_args, &mut steps)?;
    if !ok {
        bail!("the generated tables failed validation (see above); nothing was installed");
    }

    // 5. The corpus report (bandwidth vs roofline, regret CDFs, decision maps).
    let (ok, _) = step(
        "report",
        &["report".into(), "--corpus".into(), s(&corpus), "--policy".into(), s(&policy_path), "--out".into(), s(&out.join("report"))],
        &mut steps,
    )?;
    if !ok {
        bail!("the report failed (see above)");
    }

    summary(&out, &corpus, &plan, &policy_path, &certs, &steps, fit_ok, a.install.as_deref())
}

#[allow(clippy::too_many_arguments)]
fn summary(
    out: &Path,
    corpus: &Path,
    plan: &CollectionPlan,
    policy_path: &Path,
    certs: &Path,
    steps: &[Step],
    gates_passed: bool,
    installed: Option<&Path>,
) -> Result<()> {
    let bytes = std::fs::read(policy_path).with_context(|| format!("reading {}", policy_path.display()))?;
    let policy = Policy::from_bytes(&bytes).with_context(|| format!("{} is not a policy", policy_path.display()))?;
    let certificates = read_certificates(certs)?;
    let bad = certificates.iter().filter(|c| c.mismatches > 0 || c.repeat_mismatches > 0).count();
    let worst = policy
        .domains
        .iter()
        .filter_map(|d| d.stats.as_ref().map(|st| (st.p95_regret, format!("{} {} bucket {} aspect {:?}", d.codebook, d.mode, d.m_bucket, d.aspect))))
        .max_by(|x, y| x.0.total_cmp(&y.0));
    println!();
    println!("{:<10} {:>8}  outcome", "step", "seconds");
    for st in steps {
        println!("{:<10} {:>8.1}  {}", st.name, st.seconds, st.outcome);
    }
    println!();
    let g = &policy.gates;
    let rows: Vec<(&str, String)> = vec![
        ("backend", format!("{} {} ({}, {} units)", plan.backend, plan.arch, plan.device, plan.units)),
        ("profile", format!("{} ({} cells, inventory {})", plan.inventory.profile, plan.cells().len(), &plan.inventory_digest[..16])),
        ("candidates", format!("{}", policy.candidates.len())),
        ("domains", format!("{} ({} with data, {} passing) -> gates {}", policy.domains.len(), g.domains_with_data, g.domains_passing, if gates_passed { "PASSED" } else { "FAILED" })),
        ("worst p95", worst.map_or("-".into(), |(p, d)| format!("{:.2}% ({d})", p * 100.0))),
        ("sealed", g.sealed.as_ref().map_or("no sealed rows".into(), |s| format!("p95 {:.2}% {}", s.p95_regret * 100.0, if s.passed { "passed" } else { "FAILED" }))),
        ("invariance", format!("{} certificates, {bad} with mismatches", certificates.len())),
        ("corpus", s(corpus)),
        ("policy", format!("{} (sha256 {})", s(policy_path), &policy.digest()[..16])),
        ("tables", s(&out.join("tables"))),
        ("report", s(&out.join("report/report.md"))),
        ("installed", installed.map_or("no (--install PATH)".into(), s)),
    ];
    for (k, v) in rows {
        println!("{k:<11} {v}");
    }
    if !gates_passed {
        println!("\nThe policy failed its gates: the tables are for inspection, not for installation (see the report).");
    }
    Ok(())
}
