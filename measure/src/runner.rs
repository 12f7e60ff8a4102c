//! The cell runners behind one interface: open once per process, describe the machine for
//! the collection plan, run one cell. CUDA needs the `cuda` feature; without it (or without
//! a GPU) `auto` falls back to the CPU runner with a notice.

use std::collections::BTreeSet;

use crate::error::{MeasureError, Result};
use vnni_corpus::collection::CellKey;
use vnni_corpus::staged::InheritedPick;
use vnni_corpus::ResourceRow;
use vnni_kernels::{Backend, BackendChoice, CandidateId, Mode, SourceFormat};

use crate::cell::CellResult;
use crate::cpu_cell::CpuSession;
use crate::protocol::{Protocol, TimingOptions};

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

pub enum CellRunner {
    #[cfg(feature = "cuda")]
    Cuda {
        session: Box<crate::cuda_clock::GpuSession>,
        copy_gbps: f64,
    },
    Cpu(CpuSession),
}

impl CellRunner {
    /// Open `backend` (`auto`: CUDA when a GPU opens, else the CPU with a notice).
    pub fn open(backend: BackendChoice, gpu: &TimingOptions, threads: usize) -> Result<CellRunner> {
        match backend {
            BackendChoice::Cpu => Ok(CellRunner::Cpu(CpuSession::open(threads)?)),
            BackendChoice::Cuda => Self::open_cuda(gpu),
            BackendChoice::Auto => match Self::open_cuda(gpu) {
                Ok(b) => Ok(b),
                Err(e) => {
                    eprintln!("notice: no usable GPU ({e:#}); using the cpu backend");
                    Ok(CellRunner::Cpu(CpuSession::open(threads)?))
                }
            },
        }
    }

    #[cfg(feature = "cuda")]
    fn open_cuda(gpu: &TimingOptions) -> Result<CellRunner> {
        Self::cuda(crate::cuda_clock::GpuSession::open(gpu, &[])?)
    }

    /// The runner of an open GPU session (its copy bandwidth measured now, the roofline of
    /// its rows).
    #[cfg(feature = "cuda")]
    pub fn cuda(session: crate::cuda_clock::GpuSession) -> Result<CellRunner> {
        let (copy_gbps, ..) = crate::vendor::copy_bandwidth(&session.gpu, &session.protocol)?;
        Ok(CellRunner::Cuda { session: Box::new(session), copy_gbps })
    }

    #[cfg(not(feature = "cuda"))]
    fn open_cuda(_: &TimingOptions) -> Result<CellRunner> {
        Err(crate::error::MeasureError::NoCuda)
    }

    pub fn info(&self) -> MachineInfo {
        match self {
            #[cfg(feature = "cuda")]
            CellRunner::Cuda { session, .. } => {
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
            CellRunner::Cpu(cpu) => MachineInfo {
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
            #[cfg(feature = "cuda")]
            CellRunner::Cuda { session, .. } => &session.resources,
            CellRunner::Cpu(_) => &[],
        }
    }

    /// The decode candidates `ids` alone at M = 1 in `mode` (pairs timed again,
    /// [`crate::pairs`]); an id this backend does not have is an error.
    pub fn run_decode(
        &self,
        format: SourceFormat,
        n: usize,
        k: usize,
        mode: Mode,
        ids: &[CandidateId],
        protocol: &Protocol,
    ) -> Result<CellResult> {
        match self {
            CellRunner::Cpu(cpu) => {
                if mode != Mode::Eager {
                    return Err(MeasureError::Invalid(format!(
                        "the cpu backend times eager launches only, not {mode}"
                    )));
                }
                cpu.run_decode(format, n, k, ids, protocol)
            }
            #[cfg(feature = "cuda")]
            CellRunner::Cuda { session, copy_gbps } => {
                use crate::cuda_cell::{run_cell, CellFixture, CellInputs};
                let all = vnni_kernels::registry::candidates(Backend::Cuda, vnni_kernels::Surface::Decode);
                let chosen: Vec<_> = ids
                    .iter()
                    .map(|id| {
                        all.iter().find(|c| &c.id == id).cloned().ok_or_else(|| {
                            MeasureError::Invalid(format!("{id} is not a decode candidate of the cuda backend"))
                        })
                    })
                    .collect::<Result<_>>()?;
                let fx = CellFixture::new(&session.gpu, format, n, k, crate::cell::FIXTURE_SEED, protocol.passes)?;
                let modes = [mode];
                let inputs = CellInputs::decode(&chosen, &modes, protocol, &session.rejected, *copy_gbps);
                run_cell(&session.gpu, &fx, &inputs)
            }
        }
    }

    /// One cell over `m_values` in `modes` (the CPU times eager launches only); given the
    /// frozen M = 1 picks of a staged collection, only the batched rows, at those picks' bpp.
    /// The decode candidates in `skip` are not timed (pruning, CUDA only: [`crate::prune`]).
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    pub fn run_cell(
        &self,
        key: &CellKey,
        m_values: &[usize],
        modes: &[Mode],
        protocol: &Protocol,
        inherit: Option<&[&InheritedPick]>,
        skip: &BTreeSet<CandidateId>,
    ) -> Result<CellResult> {
        match self {
            CellRunner::Cpu(_) if !skip.is_empty() => Err(MeasureError::Invalid(format!(
                "cell {}: the cpu backend prunes no candidates (only CUDA policies carry cost models)",
                key.stem()
            ))),
            CellRunner::Cpu(cpu) => {
                let eager = match inherit {
                    Some(picks) => Some(*picks.iter().find(|p| p.mode == Mode::Eager).ok_or_else(|| {
                        MeasureError::Structural(format!(
                            "cell {}: the frozen M = 1 stage has no eager pick, the only mode the CPU times",
                            key.stem()
                        ))
                    })?),
                    None => None,
                };
                cpu.run_cell(key.format, key.n, key.k, m_values, protocol, eager)
            }
            #[cfg(feature = "cuda")]
            CellRunner::Cuda { session, copy_gbps } => {
                use crate::cuda_cell::{sweep_cell, CellFixture, CellInputs};
                use vnni_kernels::registry::candidates;
                use vnni_kernels::Surface;
                let fx = CellFixture::new(
                    &session.gpu,
                    key.format,
                    key.n,
                    key.k,
                    crate::cell::FIXTURE_SEED,
                    protocol.passes,
                )?;
                let mut decode = candidates(Backend::Cuda, Surface::Decode);
                decode.retain(|c| !skip.contains(&c.id));
                let grouped = candidates(Backend::Cuda, Surface::Grouped);
                let prefill = candidates(Backend::Cuda, Surface::Prefill);
                let inputs = CellInputs::decode(&decode, modes, protocol, &session.rejected, *copy_gbps);
                sweep_cell(&session.gpu, &fx, &inputs, (&grouped, &prefill), m_values, inherit)
            }
        }
    }
}
