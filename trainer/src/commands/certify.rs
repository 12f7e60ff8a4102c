//! `vnni-dispatch certify`: batch-invariance certificates for the grouped (M = 2..16, 31) or
//! prefill (M = 32..4096) surface (`vnni_measure::invariance_plan`), or with `--policy` the
//! matrix a policy's install needs (`vnni_generator::certified`). Writes
//! `certificates.jsonl`; any mismatch fails the command (it blocks install).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use vnni_corpus::inventory::{Inventory, InventoryPlan};
use vnni_generator::certified;
use vnni_kernels::{Backend, CandidateId, SourceFormat, Surface};
use vnni_measure::invariance_plan::{certify_all, default_m1, CertifyRequest};
use vnni_measure::shapes::Shapes;
use vnni_policy::Policy;

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    #[arg(long, default_value = "cuda")]
    pub backend: Backend,
    /// Which batched surface: grouped rows or prefill tiles (CUDA only).
    #[arg(long, default_value = "grouped")]
    pub surface: Surface,
    /// Source formats (default: all of them).
    #[arg(long, value_delimiter = ',')]
    pub formats: Vec<SourceFormat>,
    /// N x K shapes (K a multiple of 256 so every format applies). Default: six production
    /// shapes and the ragged 1000x2304 (grouped); 2048x4096 and 1002x2304 (prefill).
    #[arg(long)]
    pub shapes: Option<Shapes>,
    /// Row counts (default: 2..16 and 31 grouped, 32..4096 by powers of two prefill).
    #[arg(long, value_delimiter = ',')]
    pub m: Vec<usize>,
    /// M = 1 identities to inherit bpp from (registry ids).
    #[arg(long, value_delimiter = ',', default_values_t = default_m1())]
    pub m1: Vec<CandidateId>,
    /// Units (SMs or threads) for geometry formulas on the CPU backend (the GPU uses its own).
    #[arg(long, default_value_t = 132)]
    pub sms: u32,
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    #[arg(long)]
    pub cache: Option<PathBuf>,
    #[arg(long, default_value = "certificates.jsonl")]
    pub out: PathBuf,
    /// Certify a policy's matrix instead: every planned (format, N, K) of its profile, at the
    /// bpp of the policy's own M = 1 pick in each of its modes, at every grouped M (2..16, 31,
    /// and the first, last and one inner M of each of the policy's grouped buckets, an unbounded
    /// one up to twice its first M; --m narrows it: what `generate --install` requires is all of
    /// them). Replaces --formats, --shapes, --m1 and --sms.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// The profile whose plan the policy was fitted on (default: the policy's own).
    #[arg(long, requires = "policy")]
    pub profile: Option<String>,
    /// The inventory directory the profile is resolved in.
    #[arg(long, default_value = "corpus/inventory")]
    pub inventory: PathBuf,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("certify")
            .val("backend", self.backend)
            .val("surface", self.surface)
            .list("formats", &self.formats)
            .opt("shapes", self.shapes.as_ref())
            .list("m", &self.m)
            .list("m1", &self.m1)
            .val("sms", self.sms)
            .val("device", self.device)
            .opt_path("cache", self.cache.as_deref())
            .path("out", &self.out)
            .opt_path("policy", self.policy.as_deref())
            .opt("profile", self.profile.as_ref())
            .path("inventory", &self.inventory)
            .done()
    }
}

/// The plan a policy was fitted on: `profile` (default: the policy's) resolved in
/// `inventory`, refused when its digest is not the one the policy records.
pub fn policy_plan(policy: &Policy, profile: Option<&str>, inventory: &Path) -> Result<InventoryPlan> {
    let name = profile.unwrap_or(&policy.provenance.profile);
    let plan = Inventory::load(inventory)
        .with_context(|| format!("loading the inventory {}", inventory.display()))?
        .resolve(name)?;
    if plan.digest() != policy.provenance.inventory_digest {
        bail!(
            "profile {name} in {} resolves to inventory digest {} but the policy was fitted on {}: the inventory changed since, or this is another profile",
            inventory.display(),
            plan.digest(),
            policy.provenance.inventory_digest
        );
    }
    Ok(plan)
}

impl Args {
    /// The request; with `--policy`, its matrix (see [`Args::policy`]).
    pub fn resolve(&self) -> Result<CertifyRequest> {
        let mut req = self.request();
        let Some(path) = &self.policy else { return Ok(req) };
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let policy = Policy::from_bytes(&bytes).with_context(|| format!("{} is not a policy", path.display()))?;
        if policy.provenance.backend != self.backend.name() {
            bail!(
                "{} is a {} policy: certify it with --backend {}",
                path.display(),
                policy.provenance.backend,
                policy.provenance.backend
            );
        }
        let plan = policy_plan(&policy, self.profile.as_deref(), &self.inventory)?;
        req.m1_by_shape = certified::m1_identities(&policy, &plan)?;
        if req.m1_by_shape.is_empty() {
            bail!("profile {} plans no (format, shape): there is no matrix to certify", plan.profile);
        }
        if req.m.is_empty() {
            req.m = certified::certified_m(&policy);
        }
        // The bpp the policy computes is for its units; the CUDA side refuses a device with
        // another SM count (`CertifyRequest::units_must_match`).
        req.sms = policy.units as u32;
        req.units_must_match = true;
        Ok(req)
    }

    pub fn request(&self) -> CertifyRequest {
        CertifyRequest {
            backend: self.backend,
            surface: self.surface,
            formats: self.formats.clone(),
            shapes: self.shapes.clone().map(|s| s.0).unwrap_or_default(),
            m: self.m.clone(),
            m1: self.m1.clone(),
            sms: self.sms,
            device: self.device,
            cache: self.cache.clone(),
            out: self.out.clone(),
            m1_by_shape: Default::default(),
            units_must_match: false,
        }
    }
}

pub fn run(args: &Args) -> Result<()> {
    let (summary, _) = certify_all(&args.resolve()?)?;
    println!("{} certificates, {} failed -> {}", summary.total, summary.failed, args.out.display());
    if summary.failed > 0 {
        bail!(
            "{} {} results differ from their M = 1 decode: a structural failure that blocks install",
            summary.failed,
            args.surface
        );
    }
    Ok(())
}
