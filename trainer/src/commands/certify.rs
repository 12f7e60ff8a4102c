//! `vnni-dispatch certify`: batch-invariance certificates for the grouped (M = 2..16, 31) or
//! prefill (M = 32..4096) surface. For each (source format, N, K, M, M = 1 identity,
//! candidate): the candidate on M rows against M separate M = 1 launches, as raw f32 bits,
//! and the candidate against itself; every output and workspace buffer is pre-filled with
//! 0xA5 bytes. Writes `certificates.jsonl`; any mismatch fails the command (it blocks install).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use vnni_corpus::Certificate;
use vnni_kernels::registry::{find, grouped_candidates, prefill_candidates, GROUPED_M, PREFILL_M};
use vnni_kernels::{fixture, quantize_activations, repack, PackedMatrix, SourceFormat};

use crate::certify::{certify, serial_rows, Backend, Serial, Subject};
use crate::certify_backends::{CpuBackend, CudaBackend};
use crate::shapes::parse_shapes;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_parser = ["cuda", "cpu"], default_value = "cuda")]
    backend: String,
    /// Which batched surface: grouped rows or prefill tiles (CUDA only).
    #[arg(long, value_parser = ["grouped", "prefill"], default_value = "grouped")]
    surface: String,
    /// Source formats (default: all ten).
    #[arg(long, value_delimiter = ',')]
    formats: Vec<SourceFormat>,
    /// N x K shapes (K a multiple of 256 so every format applies). Default: six production
    /// shapes (grouped); 2048x4096 and 1002x2304 (prefill, whose M = 4096 outputs of a
    /// 151936-row LM head would take 2.5 GB per launch).
    #[arg(long)]
    shapes: Option<String>,
    /// Row counts (default: 2..16 and 31 grouped, 32..4096 by powers of two prefill).
    #[arg(long, value_delimiter = ',')]
    m: Vec<usize>,
    /// M = 1 identities to inherit bpp from (registry ids).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "decode.wide.tn128.cpt2,decode.kpar.tn128.cpt1.waves2,decode.fused.c32.kb8"
    )]
    m1: Vec<String>,
    /// Units (SMs or threads) for geometry formulas on the CPU backend (the GPU uses its own).
    #[arg(long, default_value_t = 132)]
    sms: u32,
    #[arg(long, default_value_t = 0)]
    device: usize,
    #[arg(long)]
    cache: Option<PathBuf>,
    #[arg(long, default_value = "certificates.jsonl")]
    out: PathBuf,
}

pub fn run(args: &Args) -> Result<()> {
    let formats = if args.formats.is_empty() { SourceFormat::ALL.to_vec() } else { args.formats.clone() };
    let prefill = args.surface == "prefill";
    if prefill && args.backend != "cuda" {
        bail!("--surface prefill needs --backend cuda: the prefill tiles are CUDA kernels");
    }
    let ms = match (args.m.is_empty(), prefill) {
        (false, _) => args.m.clone(),
        (true, false) => GROUPED_M.to_vec(),
        (true, true) => PREFILL_M.to_vec(),
    };
    let shapes = parse_shapes(args.shapes.as_deref().unwrap_or(if prefill {
        "2048x4096,1002x2304"
    } else {
        "151936x4096,4096x4096,4096x12288,12288x4096,3072x1024,1536x8960"
    }))?;
    for m1 in &args.m1 {
        find(m1).with_context(|| format!("--m1 {m1}: no such candidate in the registry"))?;
    }
    let gpu = if args.backend == "cuda" {
        Some(
            vnni_kernels::cuda::device::Gpu::open(args.device, args.cache.as_deref())
                .context("opening the CUDA device")?,
        )
    } else {
        None
    };
    let batched = match (&gpu, prefill) {
        (Some(_), true) => prefill_candidates(),
        (Some(_), false) => grouped_candidates(),
        (None, _) => vnni_kernels::registry::cpu_grouped_candidates(),
    };
    let tmp = args.out.with_extension("inprogress");
    let mut file =
        std::io::BufWriter::new(std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?);
    let (mut total, mut failed) = (0usize, Vec::<Certificate>::new());
    let mut summary: Vec<String> = Vec::new();
    let progress = crate::progress::Progress::new((formats.len() * shapes.len()) as u64, "certify");
    for &f in &formats {
        for &(n, k) in &shapes {
            if k % f.block_elems() != 0 {
                bail!("shape {n}x{k}: K is not a multiple of {}'s block ({})", f.name(), f.block_elems());
            }
            let src = fixture::source_blocks(f, n * k / f.block_elems(), 0x5EED ^ (n * 31 + k) as u64);
            let w = repack(f, n, k, &src).with_context(|| format!("repacking {f} {n}x{k}"))?;
            drop(src);
            let max_m = *ms.iter().max().unwrap();
            let x_all = fixture::activations(max_m, k, 0xA11CE);
            let mut cuda = gpu.as_ref().map(|g| CudaBackend::new(g, &w)).transpose()?;
            let mut cpu = None;
            let started = std::time::Instant::now();
            let mut count = 0;
            let sms = gpu.as_ref().map_or(args.sms, |g| g.info.sms);
            let ids: Vec<&str> =
                batched.iter().filter(|c| c.supports(f.codebook())).map(|c| c.id.as_str()).collect();
            for m1 in &args.m1 {
                let Some(plan) = find(m1).unwrap().plan(n, k, sms) else { continue };
                // Rows are quantized independently, so the M-row fixtures are prefixes of the
                // largest: its serial M = 1 rows serve every M.
                let serial_all = serial_rows(with_rows(&mut cuda, &mut cpu, &w, &x_all, max_m, args.sms)?, m1, max_m)?;
                for &m in &ms {
                    let backend = with_rows(&mut cuda, &mut cpu, &w, &x_all[..m * k], m, args.sms)?;
                    let serial = Serial::new(&serial_all[..m * n]);
                    for cand in &ids {
                        let subject = Subject { codebook: f.codebook().name(), source_format: f.name(), n, k, m };
                        let cert = certify(backend, &subject, cand, m1, plan.bpp, &serial)?;
                        serde_json::to_writer(&mut file, &cert)?;
                        file.write_all(b"\n")?;
                        total += 1;
                        count += 1;
                        if cert.mismatches > 0 || cert.repeat_mismatches > 0 {
                            eprintln!(
                                "MISMATCH {f} {n}x{k} M={m} {cand} <- {m1} (bpp {}): {} differ, {} differ on repeat; {}",
                                plan.bpp,
                                cert.mismatches,
                                cert.repeat_mismatches,
                                cert.first_mismatch.as_deref().unwrap_or("-")
                            );
                            failed.push(cert);
                        }
                    }
                }
            }
            summary.push(format!("{f:<7} {n}x{k}: {count} certificates in {:.1}s", started.elapsed().as_secs_f64()));
            progress.step(summary.last().unwrap().clone());
        }
    }
    progress.finish();
    file.flush()?;
    let file = file.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, &args.out)?;
    println!("{total} certificates, {} failed -> {}", failed.len(), args.out.display());
    if !failed.is_empty() {
        bail!(
            "{} {} results differ from their M = 1 decode: a structural failure that blocks install",
            failed.len(),
            args.surface
        );
    }
    Ok(())
}

/// The backend (CUDA when open, else the CPU kernels) holding the `m` activation rows `x`.
fn with_rows<'b, 'w>(
    cuda: &'b mut Option<CudaBackend<'w>>,
    cpu: &'b mut Option<CpuBackend<'w>>,
    w: &'w PackedMatrix,
    x: &[f32],
    m: usize,
    sms: u32,
) -> Result<&'b mut (dyn Backend + 'w)> {
    Ok(match cuda {
        Some(c) => {
            c.set_activations(x, m)?;
            c
        }
        None => cpu.insert(CpuBackend::new(w, quantize_activations(x, m, w.k)?, sms)),
    })
}
