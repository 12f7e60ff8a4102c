//! The certification run: for each (source format, N, K, M, M = 1 identity, candidate) the
//! batched candidate on M rows against M separate M = 1 launches, as raw f32 bits, and the
//! candidate against itself; every output and workspace buffer pre-filled with 0xA5 bytes.
//! Every argument is checked before any work; the certificates are written atomically at the
//! end (JSON lines), so an error leaves no partial file behind.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::{invalid, Context, Result};
use vnni_corpus::Certificate;
use vnni_kernels::registry::{candidates, find, GROUPED_M, PREFILL_M};
use vnni_kernels::{fixture, quantize_activations, repack, Backend, CandidateId, PackedMatrix, SourceFormat, Surface};

use crate::invariance::{certify, serial_rows, CertificateSides, Serial, Subject};
use crate::invariance_sides::CpuSides;

/// What to certify, on which backend, and where the certificates go.
#[derive(Debug, Clone)]
pub struct CertifyRequest {
    pub backend: Backend,
    /// Grouped rows or prefill tiles (CUDA only).
    pub surface: Surface,
    /// Source formats (empty: all).
    pub formats: Vec<SourceFormat>,
    /// N x K shapes (empty: [`default_shapes`]).
    pub shapes: Vec<(usize, usize)>,
    /// Row counts (empty: the surface's M values).
    pub m: Vec<usize>,
    /// M = 1 identities whose bpp is inherited.
    pub m1: Vec<CandidateId>,
    /// The matrix of a policy: per (source format, N, K), the M = 1 identities its policy
    /// picks (one per mode). When not empty it replaces `formats` x `shapes` x `m1`.
    pub m1_by_shape: BTreeMap<(SourceFormat, usize, usize), Vec<CandidateId>>,
    /// Refuse a GPU whose SM count is not `sms` (a policy's bpp formulas are for its units).
    pub units_must_match: bool,
    /// Units for the geometry formulas on the CPU backend (the GPU uses its own SM count).
    pub sms: u32,
    pub device: usize,
    pub cache: Option<PathBuf>,
    pub out: PathBuf,
}

/// What a certification run found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertifySummary {
    pub total: usize,
    pub failed: usize,
}

/// Six production shapes for grouped rows and a ragged one (1000 columns: the last CTA and the
/// last warp's upper half run past N, so the kernels' column clamps are certified too); two
/// smaller ones for prefill (whose M = 4096 outputs of a 151936-row LM head would take 2.5 GB
/// per launch), the second ragged likewise.
pub fn default_shapes(surface: Surface) -> Vec<(usize, usize)> {
    match surface {
        Surface::Prefill => vec![(2048, 4096), (1002, 2304)],
        _ => vec![
            (151_936, 4096),
            (4096, 4096),
            (4096, 12_288),
            (12_288, 4096),
            (3072, 1024),
            (1536, 8960),
            (1000, 2304),
        ],
    }
}

/// The default M = 1 identities: a wide, a waves and a fused candidate.
pub const DEFAULT_M1: [&str; 3] = ["decode.wide.tn128.cpt2", "decode.kpar.tn128.cpt1.waves2", "decode.fused.c32.kb8"];

/// [`DEFAULT_M1`] as candidate ids.
pub fn default_m1() -> Vec<CandidateId> {
    DEFAULT_M1.iter().map(|s| s.parse().expect("registry ids are valid")).collect()
}

/// A certification run with every argument resolved and checked: the (format, N, K) points,
/// each with the M = 1 identities whose bpp its batched rows inherit.
struct Resolved {
    points: Vec<(SourceFormat, usize, usize, Vec<CandidateId>)>,
    ms: Vec<usize>,
    batched: Vec<vnni_kernels::registry::Candidate>,
}

fn resolve(req: &CertifyRequest) -> Result<Resolved> {
    let formats = if req.formats.is_empty() { SourceFormat::ALL.to_vec() } else { req.formats.clone() };
    let shapes = if req.shapes.is_empty() { default_shapes(req.surface) } else { req.shapes.clone() };
    let points: Vec<(SourceFormat, usize, usize, Vec<CandidateId>)> = if req.m1_by_shape.is_empty() {
        formats.iter().flat_map(|&f| shapes.iter().map(move |&(n, k)| (f, n, k, req.m1.clone()))).collect()
    } else {
        req.m1_by_shape.iter().map(|(&(f, n, k), m1)| (f, n, k, m1.clone())).collect()
    };
    let ms = match (req.m.is_empty(), req.surface) {
        (false, _) => req.m.clone(),
        (true, Surface::Prefill) => PREFILL_M.to_vec(),
        (true, _) => GROUPED_M.to_vec(),
    };
    match (req.surface, req.backend) {
        (Surface::Decode, _) => {
            invalid!("certificates compare a batched surface with decode: use --surface grouped or prefill")
        }
        (Surface::Prefill, Backend::Cpu) => {
            invalid!("--surface prefill needs --backend cuda: the prefill tiles are CUDA kernels")
        }
        _ => {}
    }
    for &m in &ms {
        if m == 0 || m > crate::shapes::MAX_M {
            invalid!("M = {m}: row counts are 1 to {}", crate::shapes::MAX_M);
        }
        // Grouped kernels launch at any M >= 2: a policy's last grouped bucket serves M >= 32
        // too, and its edges are certified there. Prefill tiles are certified from 32.
        let fits = match req.surface {
            Surface::Grouped => m >= 2,
            _ => Surface::of_m(m) == req.surface,
        };
        if !fits {
            invalid!("M = {m} is not on the {} surface (grouped: >= 2, prefill: >= 32)", req.surface);
        }
    }
    let identities: std::collections::BTreeSet<&CandidateId> = points.iter().flat_map(|p| &p.3).collect();
    for m1 in identities {
        let c = find(m1).with_context(|| format!("--m1 {m1}: no such candidate in the registry"))?;
        if c.surface != Surface::Decode {
            invalid!("--m1 {m1}: not an M = 1 (decode) candidate");
        }
        // The CPU side computes a CUDA identity's rows with the reference at its bpp; the GPU
        // launches its identities, so they must be CUDA kernels.
        if req.backend == vnni_kernels::Backend::Cuda && c.backend != vnni_kernels::Backend::Cuda {
            invalid!("--m1 {m1}: a {} candidate cannot run on the CUDA backend", c.backend);
        }
    }
    for &(f, n, k, _) in &points {
        if k % f.block_elems() != 0 {
            invalid!("shape {n}x{k}: K is not a multiple of {}'s block ({})", f.name(), f.block_elems());
        }
    }
    let batched = candidates(req.backend, req.surface);
    Ok(Resolved { points, ms, batched })
}

/// Run the certification and write `req.out`; mismatches are reported in the summary (the
/// caller decides that they block install).
pub fn certify_all(req: &CertifyRequest) -> Result<(CertifySummary, Vec<Certificate>)> {
    let r = resolve(req)?;
    #[cfg(feature = "cuda")]
    let gpu = match req.backend {
        Backend::Cuda => Some(
            vnni_kernels::cuda::device::Gpu::open(req.device, req.cache.as_deref())
                .context("opening the CUDA device")?,
        ),
        Backend::Cpu => None,
    };
    #[cfg(not(feature = "cuda"))]
    if req.backend == Backend::Cuda {
        return Err(crate::error::MeasureError::NoCuda);
    }
    #[cfg(feature = "cuda")]
    if let Some(g) = gpu.as_ref().filter(|g| req.units_must_match && g.info.sms != req.sms) {
        invalid!(
            "the policy's bpp formulas are for {} SMs but this GPU has {}: certify it on the device it was fitted for",
            req.sms,
            g.info.sms
        );
    }
    let mut certs: Vec<Certificate> = Vec::new();
    let mut failed = 0usize;
    let progress = crate::progress::Progress::new(r.points.len() as u64, "certify");
    for (f, n, k, m1s) in &r.points {
        let (f, n, k) = (*f, *n, *k);
        let src = fixture::source_blocks(f, n * k / f.block_elems(), 0x5EED ^ (n * 31 + k) as u64);
        let w = repack(f, n, k, &src).with_context(|| format!("repacking {f} {n}x{k}"))?;
        drop(src);
        let max_m = *r.ms.iter().max().expect("at least one M");
        let x_all = fixture::activations(max_m, k, 0xA11CE);
        let mut sides = Sides {
            #[cfg(feature = "cuda")]
            cuda: gpu.as_ref().map(|g| crate::invariance_sides::CudaSides::new(g, &w)).transpose()?,
            cpu: None,
            w: &w,
            sms: req.sms,
        };
        #[cfg(feature = "cuda")]
        let sms = gpu.as_ref().map_or(req.sms, |g| g.info.sms);
        #[cfg(not(feature = "cuda"))]
        let sms = req.sms;
        let started = std::time::Instant::now();
        let mut count = 0;
        let ids: Vec<&CandidateId> = r.batched.iter().filter(|c| c.supports(f.codebook())).map(|c| &c.id).collect();
        for m1 in m1s {
            let Some(plan) = find(m1).expect("checked").plan(n, k, sms) else { continue };
            // Rows are quantized independently, so the M-row fixtures are prefixes of the
            // largest: its serial M = 1 rows serve every M.
            let serial_all = serial_rows(sides.with_rows(&x_all, max_m)?, m1, max_m)?;
            for &m in &r.ms {
                let backend = sides.with_rows(&x_all[..m * k], m)?;
                let serial = Serial::new(&serial_all[..m * n]);
                for cand in &ids {
                    let subject = Subject { source_format: f, n, k, m };
                    let cert = certify(backend, &subject, cand, m1, plan.bpp, &serial)?;
                    count += 1;
                    if cert.mismatches > 0 || cert.repeat_mismatches > 0 {
                        eprintln!(
                            "MISMATCH {f} {n}x{k} M={m} {cand} <- {m1} (bpp {}): {} differ, {} differ on repeat; {}",
                            plan.bpp,
                            cert.mismatches,
                            cert.repeat_mismatches,
                            cert.first_mismatch.as_deref().unwrap_or("-")
                        );
                        failed += 1;
                    }
                    certs.push(cert);
                }
            }
        }
        progress.step(format!("{f:<7} {n}x{k}: {count} certificates in {:.1}s", started.elapsed().as_secs_f64()));
    }
    progress.finish();
    let mut text = Vec::new();
    for c in &certs {
        serde_json::to_writer(&mut text, c)?;
        text.push(b'\n');
    }
    vnni_corpus::write_bytes(&req.out, &text)?;
    Ok((CertifySummary { total: certs.len(), failed }, certs))
}

/// The sides of one fixture: the GPU's when a device is open, else the CPU kernels'.
struct Sides<'a> {
    #[cfg(feature = "cuda")]
    cuda: Option<crate::invariance_sides::CudaSides<'a>>,
    cpu: Option<CpuSides<'a>>,
    w: &'a PackedMatrix,
    sms: u32,
}

impl<'a> Sides<'a> {
    /// The sides holding the `m` activation rows `x`.
    fn with_rows(&mut self, x: &[f32], m: usize) -> Result<&mut (dyn CertificateSides + 'a)> {
        #[cfg(feature = "cuda")]
        if let Some(c) = self.cuda.as_mut() {
            c.set_activations(x, m)?;
            return Ok(c);
        }
        Ok(self.cpu.insert(CpuSides::new(self.w, quantize_activations(x, m, self.w.k)?, self.sms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(surface: Surface, backend: Backend, m: Vec<usize>) -> CertifyRequest {
        CertifyRequest {
            backend,
            surface,
            formats: vec![SourceFormat::Q4_0],
            shapes: vec![(256, 2304)],
            m,
            m1: default_m1(),
            m1_by_shape: BTreeMap::new(),
            units_must_match: false,
            sms: 132,
            device: 0,
            cache: None,
            out: PathBuf::from("certificates.jsonl"),
        }
    }

    #[test]
    fn grouped_rows_are_certified_at_any_m_a_bucket_serves() {
        // a policy's last grouped bucket serves M >= 32 too: its edges are certified there
        assert!(resolve(&request(Surface::Grouped, Backend::Cpu, vec![2, 31, 46, 62])).is_ok());
        let e = resolve(&request(Surface::Grouped, Backend::Cpu, vec![1])).err().unwrap().to_string();
        assert!(e.contains("M = 1 is not on the grouped surface"), "{e}");
        let e = resolve(&request(Surface::Prefill, Backend::Cuda, vec![16])).err().unwrap().to_string();
        assert!(e.contains("M = 16 is not on the prefill surface"), "{e}");
    }
}
