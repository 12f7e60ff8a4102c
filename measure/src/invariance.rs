//! Batch-invariance certification: every row of a grouped or prefill candidate's output
//! must carry exactly the bits of a one-row (M = 1) decode of that row with the inherited
//! candidate. Backend-independent: [`CertificateSides`] runs the two sides, this module
//! compares bit patterns.

use crate::error::{MeasureError, Result};
use vnni_corpus::Certificate;
use vnni_kernels::{Backend, CandidateId, SourceFormat};

/// Runs the two sides of a certificate for one (weights, M activation rows) fixture.
pub trait CertificateSides {
    fn backend(&self) -> Backend;
    fn arch(&self) -> &str;
    /// `y[M][N]` of batched candidate `candidate` at `bpp` (buffers pre-filled with 0xA5).
    fn batched(&mut self, candidate: &CandidateId, bpp: usize) -> Result<Vec<f32>>;
    /// `y[N]` of M = 1 candidate `m1_candidate` on activation row `row` (buffers pre-filled).
    fn serial(&mut self, m1_candidate: &CandidateId, row: usize) -> Result<Vec<f32>>;
}

/// sha256 of the f32 bits (little-endian, row-major).
pub fn digest(v: &[f32]) -> String {
    let mut h = vnni_kernels::digest::Sha256Hex::new();
    for chunk in v.chunks(1 << 16) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect();
        h.update(&bytes);
    }
    h.finish()
}

/// What identifies one certificate besides the candidates.
pub struct Subject {
    pub source_format: SourceFormat,
    pub n: usize,
    pub k: usize,
    pub m: usize,
}

/// The serial (M = 1) reference: M launches, one per row, concatenated row-major.
pub fn serial_rows(backend: &mut dyn CertificateSides, m1_candidate: &CandidateId, m: usize) -> Result<Vec<f32>> {
    let mut out = Vec::new();
    for row in 0..m {
        out.extend(backend.serial(m1_candidate, row)?);
    }
    Ok(out)
}

/// The serial side of certificates: M = 1 rows and their digest, computed once for every
/// candidate certified against them.
pub struct Serial<'s> {
    pub rows: &'s [f32],
    pub digest: String,
}

impl<'s> Serial<'s> {
    pub fn new(rows: &'s [f32]) -> Self {
        Serial { rows, digest: digest(rows) }
    }
}

/// Certify batched `candidate` at `bpp` against precomputed `serial` rows of `m1_candidate`.
pub fn certify(
    backend: &mut dyn CertificateSides,
    s: &Subject,
    candidate: &CandidateId,
    m1_candidate: &CandidateId,
    bpp: usize,
    serial: &Serial,
) -> Result<Certificate> {
    let (serial, serial_digest) = (serial.rows, &serial.digest);
    let grouped = backend.batched(candidate, bpp)?;
    let again = backend.batched(candidate, bpp)?;
    if grouped.len() != s.m * s.n || serial.len() != s.m * s.n {
        return Err(MeasureError::Structural(format!("{candidate}: output sizes differ")));
    }
    let mut mismatches = 0;
    let mut first = None;
    for (i, (g, r)) in grouped.iter().zip(serial).enumerate() {
        if g.to_bits() != r.to_bits() {
            if first.is_none() {
                first = Some(format!(
                    "row {} col {}: grouped {:#010x} serial {:#010x}",
                    i / s.n,
                    i % s.n,
                    g.to_bits(),
                    r.to_bits()
                ));
            }
            mismatches += 1;
        }
    }
    let repeat_mismatches = grouped.iter().zip(&again).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
    Ok(Certificate {
        backend: backend.backend(),
        arch: backend.arch().to_string(),
        codebook: s.source_format.codebook(),
        source_format: s.source_format,
        n: s.n,
        k: s.k,
        m: s.m,
        bpp,
        m1_candidate: m1_candidate.clone(),
        candidate: candidate.clone(),
        outputs: grouped.len(),
        mismatches,
        repeat_mismatches,
        first_mismatch: first,
        // Equal bits have the serial side's digest; hashing again would only cost time.
        grouped_digest: if mismatches == 0 { serial_digest.clone() } else { digest(&grouped) },
        serial_digest: serial_digest.clone(),
    })
}

#[cfg(test)]
mod tests {
    use vnni_kernels::contract::{block_contribution, min_sum, partition_count, partition_range, BlockDots};
    use vnni_kernels::{fixture, quantize_activations, repack, PackedMatrix, QuantizedActivations, SourceFormat};

    use super::*;
    use crate::invariance_sides::CpuSides;

    fn id(s: &str) -> CandidateId {
        s.parse().unwrap()
    }

    /// A deliberately wrong grouped kernel: the right per-block contract, but the partitions
    /// folded in descending order. Equal in real arithmetic, different in f32 bits.
    struct ReversedFold<'w> {
        inner: CpuSides<'w>,
        w: &'w PackedMatrix,
        a: QuantizedActivations,
    }

    impl CertificateSides for ReversedFold<'_> {
        fn backend(&self) -> Backend {
            Backend::Cpu
        }
        fn arch(&self) -> &str {
            "test"
        }
        fn batched(&mut self, _: &CandidateId, bpp: usize) -> Result<Vec<f32>> {
            let (w, a) = (self.w, &self.a);
            let kblk = w.kblk();
            let mut y = Vec::new();
            for r in 0..a.m {
                for n in 0..w.n {
                    let partial = |p| {
                        partition_range(kblk, bpp, p).fold(0f32, |acc, b| {
                            let d = w.block(b, n);
                            let ab = r * kblk + b;
                            let q = &a.q[ab * 32..ab * 32 + 32];
                            let mins = w.codebook.sub_mins(w.payload_at(b, n));
                            let dots = BlockDots::compute(&d.values, q, min_sum(mins, q, a.sum[ab]));
                            acc + block_contribution(w.codebook.scale_rule(), a.d[ab], d.scale, d.second, dots)
                        })
                    };
                    let kb = partition_count(kblk, bpp);
                    y.push((0..kb - 1).rev().fold(partial(kb - 1), |acc, p| acc + partial(p)));
                }
            }
            Ok(y)
        }
        fn serial(&mut self, m1: &CandidateId, row: usize) -> Result<Vec<f32>> {
            self.inner.serial(m1, row)
        }
    }

    fn fixture_for(f: SourceFormat, n: usize, k: usize) -> PackedMatrix {
        repack(f, n, k, &fixture::source_blocks(f, n * k / f.block_elems(), 3)).unwrap()
    }

    #[test]
    fn the_cpu_grouped_loop_is_certified() {
        let w = fixture_for(SourceFormat::Q4_K, 96, 1024);
        for m in [2, 5, 31] {
            let a = quantize_activations(&fixture::activations(m, 1024, 8), m, 1024).unwrap();
            let mut b = CpuSides::new(&w, a, 132);
            for m1 in [
                "decode.wide.tn128.cpt2",
                "decode.kpar.tn128.cpt1.waves2",
                "decode.fused.c32.kb8",
                "cpu.decode.wide.t64",
                "cpu.decode.kpar.t64.waves2",
                "cpu.decode.kpar.t64.kb4",
            ] {
                let bpp = vnni_kernels::registry::find(m1).unwrap().plan(96, 1024, 132).unwrap().bpp;
                let serial = serial_rows(&mut b, &id(m1), m).unwrap();
                let s = Subject { source_format: SourceFormat::Q4_K, n: 96, k: 1024, m };
                let c = certify(&mut b, &s, &id("cpu.grouped.rows.t16"), &id(m1), bpp, &Serial::new(&serial)).unwrap();
                assert_eq!((c.mismatches, c.repeat_mismatches), (0, 0), "{m1} M={m}: {:?}", c.first_mismatch);
                assert_eq!(c.grouped_digest, c.serial_digest);
                assert_eq!(c.outputs, m * 96);
            }
        }
    }

    #[test]
    fn a_grouped_kernel_with_another_fold_order_is_caught() {
        let w = fixture_for(SourceFormat::Q8_0, 200, 4096);
        let m = 4;
        let a = quantize_activations(&fixture::activations(m, 4096, 9), m, 4096).unwrap();
        let mut wrong = ReversedFold { inner: CpuSides::new(&w, a.clone(), 132), w: &w, a };
        let m1 = "decode.kpar.tn128.cpt1.kb32";
        let bpp = vnni_kernels::registry::find(m1).unwrap().plan(200, 4096, 132).unwrap().bpp;
        let serial = serial_rows(&mut wrong, &id(m1), m).unwrap();
        let s = Subject { source_format: SourceFormat::Q8_0, n: 200, k: 4096, m };
        let c = certify(&mut wrong, &s, &id("wrong.reversed"), &id(m1), bpp, &Serial::new(&serial)).unwrap();
        assert!(c.mismatches > 0, "reversing the partition fold went unnoticed");
        assert!(c.first_mismatch.unwrap().starts_with("row "));
        assert_ne!(c.grouped_digest, c.serial_digest);
        assert_eq!(c.repeat_mismatches, 0, "the wrong kernel is still deterministic");
    }
}
