//! The sweep's backends behind one interface: open once per worker, describe the machine
//! for the collection plan, run one cell.

use anyhow::{bail, Result};
use vnni_corpus::collection::CellKey;
use vnni_corpus::ResourceRow;
use vnni_kernels::registry::{candidates, Backend, Surface};

use crate::cell::{sweep_cell, CellFixture, CellInputs, CellResult, FIXTURE_SEED};
use crate::cpu_backend::CpuSession;
use crate::gpu_timing::{GpuSession, GpuTimingArgs};
use crate::timing::{Mode, Protocol};

/// What the collection plan records about the machine.
pub struct MachineInfo {
    pub backend: Backend,
    pub arch: String,
    pub device: String,
    pub driver: String,
    pub nvrtc: String,
    /// SMs or worker threads.
    pub units: u32,
    /// Modes this backend can time.
    pub modes: Vec<Mode>,
}

pub enum SweepBackend {
    Cuda { session: GpuSession, copy_gbps: f64 },
    Cpu(CpuSession),
}

impl SweepBackend {
    /// Open `backend` (`cuda`, `cpu`, or `auto`: cuda when a GPU opens, else cpu with a notice).
    pub fn open(backend: &str, gpu: &GpuTimingArgs, threads: usize) -> Result<SweepBackend> {
        match backend {
            "cpu" => Ok(SweepBackend::Cpu(CpuSession::open(threads)?)),
            "cuda" => Self::open_cuda(gpu),
            "auto" => match Self::open_cuda(gpu) {
                Ok(b) => Ok(b),
                Err(e) => {
                    eprintln!("notice: no usable GPU ({e:#}); using the cpu backend");
                    Ok(SweepBackend::Cpu(CpuSession::open(threads)?))
                }
            },
            other => bail!("unknown backend {other:?} (cuda, cpu, auto)"),
        }
    }

    fn open_cuda(gpu: &GpuTimingArgs) -> Result<SweepBackend> {
        let session = gpu.open()?;
        let (copy_gbps, ..) = crate::baselines::copy_bandwidth(&session.gpu, &session.protocol)?;
        Ok(SweepBackend::Cuda { session, copy_gbps })
    }

    pub fn info(&self) -> MachineInfo {
        match self {
            SweepBackend::Cuda { session, .. } => {
                let nvrtc = vnni_kernels::cuda::nvrtc::version().map_or("unknown".into(), |(a, b)| format!("{a}.{b}"));
                MachineInfo {
                    backend: Backend::Cuda,
                    arch: session.gpu.info.arch.clone(),
                    device: session.gpu.info.name.clone(),
                    driver: session.gpu.info.driver_version.to_string(),
                    nvrtc,
                    units: session.gpu.info.sms,
                    modes: vec![Mode::Eager, Mode::Graph],
                }
            }
            SweepBackend::Cpu(cpu) => MachineInfo {
                backend: Backend::Cpu,
                arch: cpu.arch.clone(),
                device: cpu.device.clone(),
                driver: "-".into(),
                nvrtc: "-".into(),
                units: cpu.threads as u32,
                modes: vec![Mode::Eager],
            },
        }
    }

    /// Preflight rows (CUDA), for `resources.csv`.
    pub fn resources(&self) -> &[ResourceRow] {
        match self {
            SweepBackend::Cuda { session, .. } => &session.resources,
            SweepBackend::Cpu(_) => &[],
        }
    }

    /// One cell over `m_values` in `modes`.
    pub fn run_cell(&self, key: &CellKey, m_values: &[usize], modes: &[Mode], protocol: &Protocol) -> Result<CellResult> {
        match self {
            SweepBackend::Cpu(cpu) => cpu.run_cell(key.format, key.n, key.k, m_values, protocol),
            SweepBackend::Cuda { session, copy_gbps } => {
                let fx = CellFixture::new(&session.gpu, key.format, key.n, key.k, FIXTURE_SEED)?;
                let decode = candidates(Backend::Cuda, Surface::Decode);
                let grouped = candidates(Backend::Cuda, Surface::Grouped);
                let prefill = candidates(Backend::Cuda, Surface::Prefill);
                let inputs = CellInputs::decode(&decode, modes, protocol, &session.rejected, *copy_gbps);
                sweep_cell(&session.gpu, &fx, &inputs, &grouped, &prefill, m_values)
            }
        }
    }
}
