//! `vnni-dispatch seal DIR`: bind a finished corpus directory into `corpus.manifest.json`
//! (a sweep seals its corpus itself; this is for re-sealing and hand-assembled directories).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use sha2::{Digest, Sha256};
use vnni_corpus::collection::{inventory_sources, CollectionPlan, PLAN_FILE};
use vnni_corpus::inventory::Inventory;
use vnni_corpus::provenance::{git_state, toolchain};
use vnni_corpus::seal::{seal, BuildIdentity, SealInputs};
use vnni_kernels::cuda::source::kernel_source_digest;
use vnni_kernels::registry::registry_digest;

#[derive(clap::Args)]
pub struct SealArgs {
    /// The corpus directory (every cell published, nothing in progress). When it holds a
    /// sweep's plan.json, backend, arch, profile and build identity come from there.
    dir: PathBuf,
    #[arg(long, required_unless_present = "from_plan")]
    profile: Option<String>,
    #[arg(long, value_parser = ["cuda", "cpu"], required_unless_present = "from_plan")]
    backend: Option<String>,
    /// Take everything from DIR/plan.json (the default when it exists).
    #[arg(long)]
    from_plan: bool,
    #[arg(long, default_value = "sm_90")]
    arch: String,
    #[arg(long, default_value = "corpus/inventory")]
    inventory: PathBuf,
    /// Device name, driver and NVRTC version of the collection (GPU corpora).
    #[arg(long, default_value = "-")]
    device: String,
    #[arg(long, default_value = "-")]
    driver: String,
    #[arg(long, default_value = "-")]
    nvrtc: String,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn run_seal(a: &SealArgs) -> Result<()> {
    let inv = Inventory::load(&a.inventory)?;
    let plan_path = a.dir.join(PLAN_FILE);
    let inputs = if a.from_plan || plan_path.is_file() {
        let plan = CollectionPlan::read(&plan_path)?;
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
        let profile = a.profile.clone().expect("clap requires --profile");
        let plan = inv.resolve(&profile)?;
        let (git_commit, git_dirty) = git_state(Path::new("."));
        let args_text = format!("{:?} {} {} {}", a.backend, a.arch, profile, plan.digest());
        SealInputs {
            backend: a.backend.clone().expect("clap requires --backend"),
            arch: a.arch.clone(),
            profile,
            inventory_digest: plan.digest(),
            inventory_sources: inventory_sources(&a.inventory)?,
            registry_digest: registry_digest(),
            arguments_digest: hex(&Sha256::digest(args_text.as_bytes())),
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
