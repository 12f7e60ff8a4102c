//! `vnni-dispatch seal DIR`: bind a finished corpus directory into `corpus.manifest.json`
//! (a sweep seals its corpus itself; this is for re-sealing and hand-assembled directories).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use vnni_corpus::collection::{inventory_sources, CollectionPlan, PLAN_FILE};
use vnni_corpus::inventory::Inventory;
use vnni_corpus::provenance::{git_state, toolchain};
use vnni_corpus::seal::{seal, BuildIdentity, SealInputs};
use vnni_kernels::cuda::source::kernel_source_digest;
use vnni_kernels::digest::sha256_hex;
use vnni_kernels::registry::registry_digest_for;
use vnni_kernels::Backend;

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// The corpus directory (every cell published, nothing in progress). When it holds a
    /// sweep's plan.json, backend, arch, profile and build identity come from there.
    pub dir: PathBuf,
    /// The profile (needed without a plan.json; with one it must agree).
    #[arg(long)]
    pub profile: Option<String>,
    /// The backend (needed without a plan.json; with one it must agree).
    #[arg(long)]
    pub backend: Option<Backend>,
    /// Take everything from DIR/plan.json (the default when it exists).
    #[arg(long)]
    pub from_plan: bool,
    #[arg(long, default_value = "sm_90")]
    pub arch: String,
    #[arg(long, default_value = "corpus/inventory")]
    pub inventory: PathBuf,
    /// Device name, driver and NVRTC version of the collection (GPU corpora).
    #[arg(long, default_value = "-")]
    pub device: String,
    #[arg(long, default_value = "-")]
    pub driver: String,
    #[arg(long, default_value = "-")]
    pub nvrtc: String,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("seal")
            .pos(self.dir.display())
            .opt("profile", self.profile.as_ref())
            .opt("backend", self.backend)
            .flag("from-plan", self.from_plan)
            .val("arch", &self.arch)
            .path("inventory", &self.inventory)
            .val("device", &self.device)
            .val("driver", &self.driver)
            .val("nvrtc", &self.nvrtc)
            .done()
    }
}

pub fn run(a: &Args) -> Result<()> {
    let inv = Inventory::load(&a.inventory)?;
    let plan_path = a.dir.join(PLAN_FILE);
    let inputs = if a.from_plan || plan_path.is_file() {
        let plan = CollectionPlan::read(&plan_path)?;
        if let Some(p) = a.profile.as_ref().filter(|p| **p != plan.inventory.profile) {
            bail!(
                "--profile {p} disagrees with {} (profile {}): drop the flag",
                plan_path.display(),
                plan.inventory.profile
            );
        }
        if let Some(b) = a.backend.filter(|b| *b != plan.backend) {
            bail!("--backend {b} disagrees with {} (backend {}): drop the flag", plan_path.display(), plan.backend);
        }
        let current = inv.resolve(&plan.inventory.profile)?.digest();
        if current != plan.inventory_digest {
            bail!(
                "{}: collected for inventory digest {} but {} resolves profile {} to {current}: the inventory changed; collect again",
                plan_path.display(),
                plan.inventory_digest,
                a.inventory.display(),
                plan.inventory.profile
            );
        }
        plan.seal_inputs()
    } else {
        // A directory assembled by hand: the flags say what it is.
        let (Some(profile), Some(backend)) = (a.profile.clone(), a.backend) else {
            bail!("{} has no {PLAN_FILE}: say what it holds with --profile and --backend", a.dir.display());
        };
        let plan = inv.resolve(&profile)?;
        let (git_commit, git_dirty) = git_state(Path::new("."));
        let args_text =
            format!("{:?} {} {} {}", a.backend.map(|b| b.name().to_string()), a.arch, profile, plan.digest());
        SealInputs {
            backend,
            arch: a.arch.clone(),
            profile,
            inventory_digest: plan.digest(),
            inventory_sources: inventory_sources(&a.inventory)?,
            // The digest of the profile's surfaces: a profile with prefill M binds the prefill
            // candidates too, as a sweep's plan does (the learner checks it at load).
            registry_digest: registry_digest_for(&plan.m),
            arguments_digest: sha256_hex(args_text.as_bytes()),
            build: BuildIdentity {
                kernel_source_digest: kernel_source_digest(),
                nvrtc: a.nvrtc.clone(),
                driver: a.driver.clone(),
                device: format!("{} ({})", a.device, toolchain()),
                git_commit,
                git_dirty,
            },
        }
    };
    let m = seal(&a.dir, &inputs)?;
    println!("sealed {} payloads in {}: corpus id {}", m.identity.payloads.len(), a.dir.display(), m.corpus_id);
    Ok(())
}
