//! `vnni-dispatch preflight`: compile every kernel specialization and record its resources.

use std::path::PathBuf;

use anyhow::{bail, Result};
use vnni_kernels::cuda::device::Gpu;

use crate::preflight::{compile_all, rejected, rows};

#[derive(clap::Args)]
pub struct Args {
    /// Compile only (NVRTC, no GPU): ptxas registers, stack and spills.
    #[arg(long = "static")]
    static_only: bool,
    /// Target architecture for --static (a GPU run uses the device's own).
    #[arg(long, default_value = "sm_90")]
    arch: String,
    /// Where to write resources.csv.
    #[arg(long, default_value = "resources.csv")]
    out: PathBuf,
    /// Device ordinal (without --static).
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Cubin cache directory.
    #[arg(long)]
    cache: Option<PathBuf>,
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
