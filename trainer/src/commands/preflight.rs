//! `vnni-dispatch preflight`: compile every kernel specialization and record its resources.

use std::path::PathBuf;

use anyhow::{bail, Result};
use vnni_kernels::cuda::device::Gpu;

use vnni_measure::preflight::{compile_all, rejected, rows};

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// Compile only (NVRTC, no GPU): ptxas registers, stack and spills.
    #[arg(long = "static")]
    pub static_only: bool,
    /// Target architecture for --static (a GPU run uses the device's own).
    #[arg(long, default_value = "sm_90")]
    pub arch: String,
    /// Where to write resources.csv.
    #[arg(long, default_value = "resources.csv")]
    pub out: PathBuf,
    /// Device ordinal (without --static).
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Cubin cache directory.
    #[arg(long)]
    pub cache: Option<PathBuf>,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("preflight")
            .flag("static", self.static_only)
            .val("arch", &self.arch)
            .path("out", &self.out)
            .val("device", self.device)
            .opt_path("cache", self.cache.as_deref())
            .done()
    }
}

pub fn run(args: &Args) -> Result<()> {
    let (arch, statics, gpu) = if args.static_only {
        (args.arch.clone(), compile_all(&args.arch, args.cache.as_deref())?, None)
    } else {
        let gpu = Gpu::open(args.device, args.cache.as_deref())?;
        (gpu.info.arch.clone(), gpu.static_resources.clone(), Some(gpu))
    };
    let rows = rows(&arch, &statics, gpu.as_ref())?;
    vnni_corpus::write_csv(&args.out, &rows)?;
    let bad = rejected(&rows);
    println!("{:<32} {:>7} {:>4} {:>6} {:>6}  verdict", "kernel", "threads", "regs", "stack", "spill");
    for r in &rows {
        println!(
            "{:<32} {:>7} {:>4} {:>6} {:>6}  {}",
            r.kernel,
            r.threads,
            r.registers,
            r.stack_bytes,
            r.spill_store_bytes + r.spill_load_bytes,
            r.verdict
        );
    }
    println!("\n{} kernels for {arch}, {} rejected; wrote {}", rows.len(), bad.len(), args.out.display());
    if !bad.is_empty() {
        bail!(
            "{} kernel(s) rejected by preflight (first: {} {})",
            bad.len(),
            bad.keys().next().unwrap(),
            bad.values().next().unwrap()
        );
    }
    Ok(())
}
