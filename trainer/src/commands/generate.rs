//! `vnni-dispatch generate --policy policy.json --out DIR [--validate] [--install PATH]`:
//! render the policy into `vnni_dispatch.inc`, `vnni_dispatch.h` and `vnni_dispatch.rs`,
//! validate them (compiled C++ and Rust harnesses against the evaluator) when asked and
//! always before an install, then install atomically. An install of a policy with grouped
//! buckets also needs `--certificates` covering its whole matrix (`certify --policy`); an
//! install of a CUDA policy also needs profiler evidence (`profile`) of its corpus for the
//! installed pick and its runner-up in every cell (`--evidence` with `--corpus`).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use vnni_corpus::evidence;
use vnni_corpus::inventory::Inventory;
use vnni_corpus::read::read_certificates;
use vnni_generator::{
    certified, install, render, validate, write_outputs, InstallTargets, InventoryPoints, ValidateOptions, MIN_RANDOM,
};
use vnni_policy::{Policy, Surface};

use super::certify;

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// The policy IR written by `fit`.
    #[arg(long)]
    pub policy: PathBuf,
    /// Directory for the generated .inc, header and Rust module.
    #[arg(long)]
    pub out: PathBuf,
    /// Compile both outputs and check them against the evaluator (implied by --install).
    #[arg(long)]
    pub validate: bool,
    /// Install the validated .inc here (atomic replace).
    #[arg(long)]
    pub install: Option<PathBuf>,
    /// Install the validated header here.
    #[arg(long)]
    pub install_header: Option<PathBuf>,
    /// Install the validated Rust module here.
    #[arg(long)]
    pub install_rust: Option<PathBuf>,
    /// Seeded random queries of the validation (an install needs at least 1,000,000).
    #[arg(long, default_value_t = MIN_RANDOM)]
    pub random: usize,
    /// Seed of the random queries (fixed, so a validation is repeatable).
    #[arg(long, default_value_t = vnni_generator::validate::DEFAULT_SEED)]
    pub seed: u64,
    /// The shape inventory whose every point is validated.
    #[arg(long, default_value = "corpus/inventory")]
    pub inventory: PathBuf,
    /// Fail when rustc is missing (otherwise the Rust module is checked where rustc exists and
    /// the report says when it was not).
    #[arg(long)]
    pub require_rust: bool,
    /// The inventory profile whose shapes and M values are validated.
    #[arg(long, default_value = "all")]
    pub profile: String,
    /// Batch-invariance certificates of the policy's matrix (`certify --policy`): an install of
    /// a policy with grouped buckets needs every planned format x shape x grouped M certified
    /// at the bpp of the policy's own M = 1 pick, with zero mismatches.
    #[arg(long)]
    pub certificates: Option<PathBuf>,
    /// Profiler evidence of the policy's corpus (`profile --corpus C --out DIR`): a CUDA install
    /// needs records of the installed pick and its runner-up in every cell, every claim held.
    #[arg(long, requires = "corpus")]
    pub evidence: Option<PathBuf>,
    /// The sealed corpus the policy was fitted on (with --evidence).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("generate")
            .path("policy", &self.policy)
            .path("out", &self.out)
            .flag("validate", self.validate)
            .opt_path("install", self.install.as_deref())
            .opt_path("install-header", self.install_header.as_deref())
            .opt_path("install-rust", self.install_rust.as_deref())
            .val("random", self.random)
            .val("seed", self.seed)
            .path("inventory", &self.inventory)
            .flag("require-rust", self.require_rust)
            .val("profile", &self.profile)
            .opt_path("certificates", self.certificates.as_deref())
            .opt_path("evidence", self.evidence.as_deref())
            .opt_path("corpus", self.corpus.as_deref())
            .done()
    }
}

/// An install needs the complete batch-invariance matrix of the policy's profile (see
/// `vnni_generator::certified`); the refusal names what is missing.
fn refuse_uncertified(policy: &Policy, a: &Args) -> Result<()> {
    if !policy.m_buckets.iter().any(|b| b.surface == Surface::Grouped) {
        return Ok(());
    }
    let fix = format!(
        "run `vnni-dispatch certify --backend {} --policy {} --out CERTS` and pass --certificates CERTS",
        policy.provenance.backend,
        a.policy.display()
    );
    let Some(path) = &a.certificates else {
        bail!("{}: refusing to install: grouped rows inherit this policy's M = 1 bpp, and no certificates of that matrix were given; {fix}", a.policy.display());
    };
    let plan = certify::policy_plan(policy, None, &a.inventory)?;
    let certs = read_certificates(path)?;
    let gaps = certified::gaps(policy, &plan, &certs)?;
    if let Some(first) = gaps.first() {
        bail!(
            "{}: refusing to install: {} of the planned format x shape x M x mode points of profile {} are not certified in {} (first: {first}); {fix}",
            a.policy.display(),
            gaps.len(),
            plan.profile,
            path.display()
        );
    }
    println!("certified: every planned grouped point of profile {} ({})", plan.profile, path.display());
    Ok(())
}

/// A CUDA install needs profiler evidence of its corpus: records of the installed pick and of
/// its runner-up (the fastest other eligible candidate) in every cell and mode of the corpus,
/// authenticated, with every registry claim held; the refusal names what is missing.
fn refuse_without_evidence(policy: &Policy, a: &Args) -> Result<()> {
    if policy.provenance.backend != "cuda" {
        return Ok(());
    }
    let fix = format!(
        "run `vnni-dispatch profile --corpus CORPUS --policy {} --out EVIDENCE --top 3` on the corpus it was fitted on and pass --evidence EVIDENCE --corpus CORPUS",
        a.policy.display()
    );
    let (Some(dir), Some(corpus)) = (&a.evidence, &a.corpus) else {
        bail!("{}: refusing to install a CUDA policy without profiler evidence; {fix}", a.policy.display());
    };
    let manifest = vnni_corpus::seal::verify(corpus, &Default::default())?;
    if manifest.corpus_id != policy.provenance.corpus_id {
        bail!(
            "{}: the policy was fitted on corpus {}, {} is corpus {}; {fix}",
            a.policy.display(),
            policy.provenance.corpus_id,
            corpus.display(),
            manifest.corpus_id
        );
    }
    let timing = vnni_corpus::collection::read_corpus_rows(corpus)?;
    let (_, rows) = super::profile::authenticate(dir, &manifest.corpus_id, &timing)?;
    let required = evidence::installed_keys(&timing, super::profile::policy_pick(policy))?;
    let have = evidence::by_key(&rows);
    let missing: Vec<_> = required.iter().filter(|k| !have.contains_key(*k)).collect();
    if let Some(first) = missing.first() {
        bail!(
            "{}: refusing to install: {} of the {} installed picks and runners-up have no profiler record (first: {first}); {fix}",
            dir.display(),
            missing.len(),
            required.len()
        );
    }
    println!(
        "profiler evidence: the installed pick and runner-up of every cell ({} keys, {})",
        required.len(),
        dir.display()
    );
    Ok(())
}

pub fn run(a: &Args) -> Result<()> {
    let policy = super::load_policy(&a.policy)?;
    let rendered = render(&policy).with_context(|| format!("{}: cannot render the policy", a.policy.display()))?;
    for path in write_outputs(&rendered, &a.out)? {
        println!("wrote {}", path.display());
    }
    let targets =
        InstallTargets { inc: a.install.clone(), header: a.install_header.clone(), rust: a.install_rust.clone() };
    let installing = targets.inc.is_some() || targets.header.is_some() || targets.rust.is_some();
    if !(a.validate || installing) {
        return Ok(());
    }
    if installing {
        if let Some(why) = policy.not_installable() {
            bail!(
                "{}: refusing to install: {why}; the generated tables in {} are for inspection",
                a.policy.display(),
                a.out.display()
            );
        }
    }
    if installing && a.random < MIN_RANDOM {
        bail!("--random {} is below the {MIN_RANDOM} random queries an install is validated on", a.random);
    }
    let inv = Inventory::load(&a.inventory)
        .with_context(|| format!("{}: cannot load the shape inventory", a.inventory.display()))?;
    let plan = inv.resolve(&a.profile)?;
    let opts = ValidateOptions {
        random: a.random,
        seed: a.seed,
        require_rust: a.require_rust,
        ..ValidateOptions::new(InventoryPoints::from_plan(&plan))
    };
    let validated = validate(&policy, &rendered, &opts).with_context(|| {
        format!("{}: the generated tables failed validation; nothing was installed", a.policy.display())
    })?;
    println!("{}", validated.report());
    if installing {
        refuse_without_evidence(&policy, a)?;
        refuse_uncertified(&policy, a)?;
    }
    for path in install(&validated, &targets)? {
        println!("installed {}", path.display());
    }
    if let (Some(p), Some(why)) = (&targets.rust, &validated.report().rust_not_compiled) {
        println!("not installed {} (the Rust module was not validated here: {why})", p.display());
    }
    Ok(())
}
