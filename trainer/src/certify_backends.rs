//! The two sides of a certificate on each backend.

use anyhow::{Context, Result};
use cudarc::driver::CudaSlice;
use vnni_kernels::cuda::device::{DeviceActivations, DeviceMatrix, Gpu};
use vnni_kernels::reference::gemm;
use vnni_kernels::registry::{find, Backend as Runs};
use vnni_kernels::{cpu, PackedMatrix, QuantizedActivations};

use crate::certify::Backend;

pub struct CpuBackend<'w> {
    w: &'w PackedMatrix,
    a: QuantizedActivations,
    sms: u32,
}

impl<'w> CpuBackend<'w> {
    pub fn new(w: &'w PackedMatrix, a: QuantizedActivations, sms: u32) -> Self {
        CpuBackend { w, a, sms }
    }
}

/// The bpp a registry M = 1 candidate computes with for this matrix.
fn m1_bpp(id: &str, w: &PackedMatrix, sms: u32) -> Result<usize> {
    let c = find(id).with_context(|| format!("no candidate {id}"))?;
    Ok(c.plan(w.n, w.k, sms).with_context(|| format!("{id} is illegal for {} x {}", w.n, w.k))?.bpp)
}

impl Backend for CpuBackend<'_> {
    fn name(&self) -> &str {
        "cpu"
    }
    fn arch(&self) -> &str {
        std::env::consts::ARCH
    }
    /// A CPU grouped candidate (`cpu.grouped.rows.t*`) on all rows at once.
    fn grouped(&mut self, candidate: &str, bpp: usize) -> Result<Vec<f32>> {
        let c = find(candidate).with_context(|| format!("no candidate {candidate}"))?;
        anyhow::ensure!(c.backend == Runs::Cpu, "the CPU backend cannot run the CUDA candidate {candidate}");
        Ok(cpu::grouped(&c, self.w, &self.a, bpp)?)
    }
    /// One row through a CPU decode candidate; a CUDA candidate's side is the reference at
    /// that candidate's bpp (the contract makes them equal bit for bit).
    fn serial(&mut self, m1_candidate: &str, row: usize) -> Result<Vec<f32>> {
        let c = find(m1_candidate).with_context(|| format!("no candidate {m1_candidate}"))?;
        if c.backend == Runs::Cpu {
            return Ok(cpu::decode(&c, self.w, &self.a.row(row), self.sms)?.1);
        }
        Ok(gemm(self.w, &self.a.row(row), m1_bpp(m1_candidate, self.w, self.sms)?)?)
    }
}

pub struct CudaBackend<'g> {
    gpu: &'g Gpu,
    w: DeviceMatrix,
    a: Option<DeviceActivations>,
    y: CudaSlice<f32>,
    ws: CudaSlice<f32>,
}

impl<'g> CudaBackend<'g> {
    pub fn new(gpu: &'g Gpu, w: &PackedMatrix) -> Result<Self> {
        let dw = gpu.upload_matrix(w)?;
        Ok(CudaBackend {
            gpu,
            w: dw,
            a: None,
            y: gpu.stream.alloc_zeros::<f32>(1).context("allocating outputs")?,
            ws: gpu.stream.alloc_zeros::<f32>(1).context("allocating the workspace")?,
        })
    }

    /// Upload and quantize M activation rows on the GPU.
    pub fn set_activations(&mut self, x: &[f32], m: usize) -> Result<()> {
        let mut a = self.gpu.upload_activations(x, m, self.w.k)?;
        self.gpu.quantize(&mut a)?;
        self.a = Some(a);
        Ok(())
    }

    fn ensure(buf: &mut CudaSlice<f32>, gpu: &Gpu, len: usize) -> Result<()> {
        if buf.len() < len {
            *buf = gpu.stream.alloc_zeros::<f32>(len).context("allocating buffers")?;
        }
        Ok(())
    }
}

impl Backend for CudaBackend<'_> {
    fn name(&self) -> &str {
        "cuda"
    }
    fn arch(&self) -> &str {
        &self.gpu.info.arch
    }
    fn grouped(&mut self, candidate: &str, bpp: usize) -> Result<Vec<f32>> {
        let a = self.a.as_ref().context("no activations")?;
        let c = find(candidate).with_context(|| format!("no candidate {candidate}"))?;
        let plan = c
            .plan_batched(self.w.codebook, self.w.n, self.w.k, a.m, bpp)
            .with_context(|| format!("{candidate}: no plan for M = {}", a.m))?;
        Self::ensure(&mut self.y, self.gpu, a.m * self.w.n)?;
        Self::ensure(&mut self.ws, self.gpu, plan.workspace.max(1))?;
        self.gpu.poison_prefix(&mut self.y, a.m * self.w.n)?;
        self.gpu.poison_prefix(&mut self.ws, plan.workspace)?;
        self.gpu.launch_batched(&c, &plan, &self.w, a, &mut self.y, &mut self.ws)?;
        self.gpu.synchronize()?;
        Ok(self.gpu.download_prefix(&self.y, a.m * self.w.n)?)
    }
    fn serial(&mut self, m1_candidate: &str, row: usize) -> Result<Vec<f32>> {
        let a = self.a.as_ref().context("no activations")?;
        let c = find(m1_candidate).with_context(|| format!("no candidate {m1_candidate}"))?;
        let plan = c.plan(self.w.n, self.w.k, self.gpu.info.sms).with_context(|| format!("{m1_candidate}: no plan"))?;
        Self::ensure(&mut self.y, self.gpu, self.w.n)?;
        Self::ensure(&mut self.ws, self.gpu, plan.workspace.max(1))?;
        self.gpu.poison_prefix(&mut self.y, self.w.n)?;
        self.gpu.poison_prefix(&mut self.ws, plan.workspace)?;
        self.gpu.launch_decode(&c, &plan, &self.w, a, row, &mut self.y, &mut self.ws)?;
        self.gpu.synchronize()?;
        Ok(self.gpu.download_prefix(&self.y, self.w.n)?)
    }
}
