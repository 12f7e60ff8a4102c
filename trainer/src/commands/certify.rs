//! `vnni-dispatch certify`: batch-invariance certificates for the grouped (M = 2..16, 31) or
//! prefill (M = 32..4096) surface (`vnni_measure::invariance_plan`). Writes
//! `certificates.jsonl`; any mismatch fails the command (it blocks install).

use std::path::PathBuf;

use anyhow::{bail, Result};
use vnni_kernels::{Backend, CandidateId, SourceFormat, Surface};
use vnni_measure::invariance_plan::{certify_all, default_m1, CertifyRequest};
use vnni_measure::shapes::Shapes;

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    #[arg(long, default_value = "cuda")]
    pub backend: Backend,
    /// Which batched surface: grouped rows or prefill tiles (CUDA only).
    #[arg(long, default_value = "grouped")]
    pub surface: Surface,
    /// Source formats (default: all ten).
    #[arg(long, value_delimiter = ',')]
    pub formats: Vec<SourceFormat>,
    /// N x K shapes (K a multiple of 256 so every format applies). Default: six production
    /// shapes (grouped); 2048x4096 and 1002x2304 (prefill).
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
            .done()
    }
}

impl Args {
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
        }
    }
}

pub fn run(args: &Args) -> Result<()> {
    let (summary, _) = certify_all(&args.request())?;
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
