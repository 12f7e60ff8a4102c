//! `vnni-dispatch seal DIR` and `vnni-dispatch verify [--corpus DIR]`: bind a finished corpus
//! directory into `corpus.manifest.json`, and re-check committed corpora against this checkout
//! (registry and inventory digests, every payload's size and sha256).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use vnni_corpus::collection::{inventory_sources, CollectionPlan, PLAN_FILE};
use vnni_corpus::inventory::Inventory;
use vnni_corpus::provenance::{git_state, toolchain};
use vnni_corpus::seal::{seal, verify, BuildIdentity, Expected, SealInputs, MANIFEST};
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

#[derive(clap::Args)]
pub struct VerifyArgs {
    /// A corpus directory; without it every corpus committed under lfs-data/corpora.
    #[arg(long)]
    corpus: Vec<PathBuf>,
    #[arg(long, default_value = "corpus/inventory")]
    inventory: PathBuf,
    #[arg(long, default_value = "lfs-data/corpora")]
    root: PathBuf,
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

/// Directories under `root` holding a manifest, sorted.
fn committed(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        if d.join(MANIFEST).is_file() {
            out.push(d.clone());
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()));
        }
    }
    out.sort();
    out
}

pub fn run_verify(a: &VerifyArgs) -> Result<()> {
    let inv =
        Inventory::load(&a.inventory).with_context(|| format!("loading the inventory {}", a.inventory.display()))?;
    let mut expected = Expected { registry_digest: Some(registry_digest()), ..Default::default() };
    for name in inv.profiles.keys() {
        expected.inventory_digests.insert(name.clone(), inv.resolve(name)?.digest());
    }
    let dirs = if a.corpus.is_empty() { committed(&a.root) } else { a.corpus.clone() };
    if dirs.is_empty() {
        println!("verify: no sealed corpus under {} (nothing to check yet)", a.root.display());
        return Ok(());
    }
    let mut bad = 0;
    for d in &dirs {
        match verify(d, &expected) {
            Ok(m) => {
                println!("ok   {} ({} payloads, corpus id {})", d.display(), m.identity.payloads.len(), m.corpus_id)
            }
            Err(e) => {
                bad += 1;
                println!("FAIL {}: {e}", d.display());
            }
        }
    }
    if bad > 0 {
        bail!("{bad} of {} corpora failed verification", dirs.len());
    }
    Ok(())
}
