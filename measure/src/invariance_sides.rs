//! The two sides of a certificate on each backend: the CPU kernels, and (feature `cuda`) the
//! GPU's.

use crate::error::{Context, MeasureError, Result};
use vnni_kernels::reference::gemm;
use vnni_kernels::registry::{find, Candidate};
use vnni_kernels::{cpu, Backend, CandidateId, PackedMatrix, QuantizedActivations};

use crate::invariance::CertificateSides;

fn candidate(id: &CandidateId) -> Result<&'static Candidate> {
    find(id).with_context(|| format!("no candidate {id} in the registry"))
}

pub struct CpuSides<'w> {
    w: &'w PackedMatrix,
    a: QuantizedActivations,
    sms: u32,
}

impl<'w> CpuSides<'w> {
    pub fn new(w: &'w PackedMatrix, a: QuantizedActivations, sms: u32) -> Self {
        CpuSides { w, a, sms }
    }
}

/// The bpp a registry M = 1 candidate computes with for this matrix.
fn m1_bpp(id: &CandidateId, w: &PackedMatrix, sms: u32) -> Result<usize> {
    let c = candidate(id)?;
    Ok(c.plan(w.n, w.k, sms).with_context(|| format!("{id} is illegal for {} x {}", w.n, w.k))?.bpp)
}

impl CertificateSides for CpuSides<'_> {
    fn backend(&self) -> Backend {
        Backend::Cpu
    }
    fn arch(&self) -> &str {
        std::env::consts::ARCH
    }
    /// A CPU grouped candidate (`cpu.grouped.rows.t*`) on all rows at once.
    fn batched(&mut self, id: &CandidateId, bpp: usize) -> Result<Vec<f32>> {
        let c = candidate(id)?;
        if c.backend != Backend::Cpu {
            return Err(MeasureError::Invalid(format!("the CPU backend cannot run the CUDA candidate {id}")));
        }
        Ok(cpu::grouped(c, self.w, &self.a, bpp)?)
    }
    /// One row through a CPU decode candidate; a CUDA candidate's side is the reference at
    /// that candidate's bpp (the contract makes them equal bit for bit).
    fn serial(&mut self, m1_candidate: &CandidateId, row: usize) -> Result<Vec<f32>> {
        let c = candidate(m1_candidate)?;
        if c.backend == Backend::Cpu {
            return Ok(cpu::decode(c, self.w, &self.a.row(row), self.sms)?.1);
        }
        Ok(gemm(self.w, &self.a.row(row), m1_bpp(m1_candidate, self.w, self.sms)?)?)
    }
}

#[cfg(feature = "cuda")]
pub use cuda::CudaSides;

#[cfg(feature = "cuda")]
mod cuda {
    use crate::error::{Context, Result};
    use vnni_kernels::cuda::device::Launch;
    use vnni_kernels::cuda::device::{DeviceActivations, DeviceBuffer, DeviceMatrix, Gpu};
    use vnni_kernels::{Backend, CandidateId, PackedMatrix};

    use super::candidate;
    use crate::invariance::CertificateSides;

    pub struct CudaSides<'g> {
        gpu: &'g Gpu,
        w: DeviceMatrix,
        a: Option<DeviceActivations>,
        y: DeviceBuffer<f32>,
        ws: DeviceBuffer<f32>,
    }

    impl<'g> CudaSides<'g> {
        pub fn new(gpu: &'g Gpu, w: &PackedMatrix) -> Result<Self> {
            let dw = gpu.upload_matrix(w)?;
            Ok(CudaSides {
                gpu,
                w: dw,
                a: None,
                y: gpu.alloc_zeros::<f32>(1).context("allocating outputs")?,
                ws: gpu.alloc_zeros::<f32>(1).context("allocating the workspace")?,
            })
        }

        /// Upload and quantize M activation rows on the GPU.
        pub fn set_activations(&mut self, x: &[f32], m: usize) -> Result<()> {
            let mut a = self.gpu.upload_activations(x, m, self.w.k)?;
            self.gpu.quantize(&mut a)?;
            self.a = Some(a);
            Ok(())
        }

        fn ensure(buf: &mut DeviceBuffer<f32>, gpu: &Gpu, len: usize) -> Result<()> {
            if buf.len() < len {
                *buf = gpu.alloc_zeros::<f32>(len).context("allocating buffers")?;
            }
            Ok(())
        }
    }

    impl CertificateSides for CudaSides<'_> {
        fn backend(&self) -> Backend {
            Backend::Cuda
        }
        fn arch(&self) -> &str {
            &self.gpu.info.arch
        }
        fn batched(&mut self, id: &CandidateId, bpp: usize) -> Result<Vec<f32>> {
            let a = self.a.as_ref().context("no activations")?;
            let c = candidate(id)?;
            let plan = c
                .plan_batched(self.w.codebook, self.w.n, self.w.k, a.m, bpp)
                .with_context(|| format!("{id}: no plan for M = {}", a.m))?;
            Self::ensure(&mut self.y, self.gpu, a.m * self.w.n)?;
            Self::ensure(&mut self.ws, self.gpu, plan.workspace.max(1))?;
            self.gpu.poison_prefix(&mut self.y, a.m * self.w.n)?;
            self.gpu.poison_prefix(&mut self.ws, plan.workspace)?;
            self.gpu.launch(&Launch::batched(c, &plan, &self.w, a), &mut self.y, &mut self.ws)?;
            self.gpu.synchronize()?;
            Ok(self.gpu.download_prefix(&self.y, a.m * self.w.n)?)
        }
        fn serial(&mut self, m1_candidate: &CandidateId, row: usize) -> Result<Vec<f32>> {
            let a = self.a.as_ref().context("no activations")?;
            let c = candidate(m1_candidate)?;
            let plan =
                c.plan(self.w.n, self.w.k, self.gpu.info.sms).with_context(|| format!("{m1_candidate}: no plan"))?;
            Self::ensure(&mut self.y, self.gpu, self.w.n)?;
            Self::ensure(&mut self.ws, self.gpu, plan.workspace.max(1))?;
            self.gpu.poison_prefix(&mut self.y, self.w.n)?;
            self.gpu.poison_prefix(&mut self.ws, plan.workspace)?;
            self.gpu.launch(&Launch::decode(c, &plan, &self.w, a, row), &mut self.y, &mut self.ws)?;
            self.gpu.synchronize()?;
            Ok(self.gpu.download_prefix(&self.y, self.w.n)?)
        }
    }
}
