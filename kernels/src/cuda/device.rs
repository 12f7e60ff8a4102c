//! The cudarc device runtime: one context, one explicit non-blocking stream, event
//! tracking off (timed buffers must not add event records), modules compiled by NVRTC for
//! the device's own arch, and the launchers of every kernel family.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::path::Path;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use super::launch::LaunchCheck;
use super::{driver, nvrtc, ptxas, source, CudaError};
use crate::activation::QuantizedActivations;
use crate::registry::{kernel_specs, prefetch_rows, Candidate, Family, KernelSpec, LaunchPlan};
use crate::{Codebook, L2Prefetch, PackedMatrix};

/// What the device says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub sms: u32,
    pub l2_bytes: usize,
    /// `sm_<major><minor>`.
    pub arch: String,
    pub driver_version: i32,
    pub memory_bytes: usize,
}

/// On-device resources of one kernel at one block size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceResources {
    pub registers: i32,
    pub local_bytes: i32,
    pub shared_static_bytes: i32,
    pub max_threads: i32,
    pub occupancy_blocks_per_sm: u32,
}

/// A device buffer (cudarc's, re-exported so callers need no cudarc of their own).
pub type DeviceBuffer<T> = CudaSlice<T>;

/// The device. Its context and stream stay inside this crate: callers allocate, copy,
/// launch, time and capture through the methods here, which check what they are given.
pub struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub info: DeviceInfo,
    /// Kept alive for the functions resolved from them.
    _modules: Vec<Arc<CudaModule>>,
    /// Entry points resolved once at open: launches are on the timed hot path.
    functions: BTreeMap<String, CudaFunction>,
    /// ptxas resources of every compiled kernel, by symbol.
    pub static_resources: BTreeMap<String, ptxas::StaticResources>,
    /// Which decode launches issue the L2 prefetch of their first weight rows (set it to what
    /// a corpus was timed with to time it again: `CollectionPlan::l2_prefetch`).
    pub l2_prefetch: L2Prefetch,
}

/// A packed matrix on the device.
pub struct DeviceMatrix {
    pub codebook: Codebook,
    pub n: usize,
    pub k: usize,
    pub payload: CudaSlice<u8>,
    pub scale: CudaSlice<u16>,
    pub second: Option<CudaSlice<u16>>,
}

impl DeviceMatrix {
    pub fn bytes(&self) -> usize {
        self.payload.len() + 2 * (self.scale.len() + self.second.as_ref().map_or(0, |s| s.len()))
    }
}

/// Activation rows on the device: the f32 input and its quantized form.
pub struct DeviceActivations {
    pub m: usize,
    pub k: usize,
    pub x: CudaSlice<f32>,
    pub q: CudaSlice<i8>,
    pub d: CudaSlice<f32>,
    pub sum: CudaSlice<i32>,
}

/// One launch of a candidate on device weights and activation rows.
pub struct Launch<'a> {
    pub candidate: &'a Candidate,
    pub plan: &'a LaunchPlan,
    pub weights: &'a DeviceMatrix,
    pub activations: &'a DeviceActivations,
    pub first_row: usize,
    pub rows: usize,
    /// Grouped or prefill (all rows at an inherited bpp), else decode (one row).
    pub batched: bool,
    /// Launch with the programmatic stream serialization attribute (decode only:
    /// [`Family::programmatic`]).
    pub programmatic: bool,
}

impl<'a> Launch<'a> {
    /// A decode (M = 1) candidate on activation row `row`.
    pub fn decode(
        candidate: &'a Candidate,
        plan: &'a LaunchPlan,
        weights: &'a DeviceMatrix,
        activations: &'a DeviceActivations,
        row: usize,
    ) -> Self {
        Launch { candidate, plan, weights, activations, first_row: row, rows: 1, batched: false, programmatic: false }
    }

    /// The same launch with programmatic dependent launch (Hopper) on or off: the kernel may
    /// begin while the stream's previous kernel drains; it waits for it before reading
    /// activations or partials and before any store (`pdl_wait` in decode_m1.cuh).
    pub fn programmatic(self, on: bool) -> Self {
        Launch { programmatic: on, ..self }
    }

    /// A grouped or prefill candidate on every activation row.
    pub fn batched(
        candidate: &'a Candidate,
        plan: &'a LaunchPlan,
        weights: &'a DeviceMatrix,
        activations: &'a DeviceActivations,
    ) -> Self {
        Launch {
            candidate,
            plan,
            weights,
            activations,
            first_row: 0,
            rows: activations.m,
            batched: true,
            programmatic: false,
        }
    }
}

/// Kernel arguments of the decode families (matches `vnni::DecodeArgs`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct DecodeArgs {
    payload: u64,
    scale: u64,
    second: u64,
    aq: u64,
    ad: u64,
    asum: u64,
    out: u64,
    n: i32,
    kblk: i32,
    bpp: i32,
    m: i32,
    prefetch_rows: i32,
}
// SAFETY: plain-old-data with the C layout of the CUDA struct.
unsafe impl DeviceRepr for DecodeArgs {}

pub fn driver_available() -> Result<(), CudaError> {
    // SAFETY: only tries to dlopen the library.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(CudaError::MissingLibrary {
            library: "libcuda (the NVIDIA driver)",
            fix: "run on a machine with an NVIDIA GPU and driver (sweep, certify and refresh also run on the CPU with --backend cpu)",
        })
    }
}

impl Gpu {
    /// Open device `ordinal`, compile (or load from `cache`) every registry kernel for its arch.
    pub fn open(ordinal: usize, cache: Option<&Path>) -> Result<Gpu, CudaError> {
        driver_available()?;
        nvrtc::ensure_available()?;
        let ctx = CudaContext::new(ordinal).map_err(|e| CudaError::NoDevice { ordinal, message: format!("{e:?}") })?;
        // SAFETY: we never share buffers across streams; timing must not see event records.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(driver("creating a non-blocking stream"))?;
        let attr = |a: CUdevice_attribute| ctx.attribute(a).map_err(driver(format!("reading {a:?}")));
        let major = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let mut driver_version = 0;
        // SAFETY: out-parameter.
        unsafe { sys::cuDriverGetVersion(&mut driver_version) }.result().map_err(driver("cuDriverGetVersion"))?;
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().map_err(driver("reading the device name"))?,
            sms: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            l2_bytes: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize,
            arch: format!("sm_{major}{minor}"),
            driver_version,
            memory_bytes: ctx.total_mem().map_err(driver("reading memory size"))?,
        };
        let mut static_resources = BTreeMap::new();
        let mut load = |name: &str, src: String| -> Result<Arc<CudaModule>, CudaError> {
            let compiled = nvrtc::compile(&src, name, &info.arch, cache)?;
            static_resources.extend(ptxas::parse(&compiled.log));
            ctx.load_module(Ptx::from_binary(compiled.cubin)).map_err(driver(format!("loading module {name}")))
        };
        let common = load("vnni_common", source::common_module())?;
        let mut modules = BTreeMap::new();
        let specs = kernel_specs();
        for cb in Codebook::ALL {
            let mine: Vec<KernelSpec> = specs.iter().copied().filter(|s| s.codebook() == cb).collect();
            modules.insert(cb, load(&format!("vnni_decode_{cb}"), source::decode_module(&mine))?);
        }
        let mut functions = BTreeMap::new();
        for spec in &specs {
            let f = modules[&spec.codebook()]
                .load_function(&spec.symbol())
                .map_err(driver(format!("loading {}", spec.symbol())))?;
            let shared = spec.dynamic_shared();
            if shared > 48 << 10 {
                // Above 48 KiB a kernel must opt in to its dynamic shared memory.
                f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared as i32)
                    .map_err(driver(format!("granting {} {shared} B of shared memory", spec.symbol())))?;
            }
            functions.insert(spec.symbol(), f);
        }
        for name in ["vnni_quantize_activations", "vnni_reduce_partials", "vnni_delay", "vnni_gather_columns"] {
            functions.insert(name.to_string(), common.load_function(name).map_err(driver(format!("loading {name}")))?);
        }
        let _modules = modules.into_values().chain([common]).collect();
        Ok(Gpu { ctx, stream, info, _modules, functions, static_resources, l2_prefetch: L2Prefetch::default() })
    }

    pub fn function(&self, spec: &KernelSpec) -> Result<&CudaFunction, CudaError> {
        self.common_function(&spec.symbol())
    }

    pub(super) fn common_function(&self, name: &str) -> Result<&CudaFunction, CudaError> {
        self.functions
            .get(name)
            .ok_or_else(|| CudaError::Driver { what: format!("finding {name}"), message: "not compiled".into() })
    }

    /// cuFuncGetAttribute and occupancy for `spec` launched with `threads` and `shared` bytes.
    pub fn resources(&self, spec: &KernelSpec, threads: u32, shared: usize) -> Result<DeviceResources, CudaError> {
        let f = self.function(spec)?;
        let attr = |a: CUfunction_attribute| f.get_attribute(a).map_err(driver(format!("{a:?}")));
        Ok(DeviceResources {
            registers: attr(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            local_bytes: attr(CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            shared_static_bytes: attr(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            max_threads: attr(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            occupancy_blocks_per_sm: f
                .occupancy_max_active_blocks_per_multiprocessor(threads, shared, None)
                .map_err(driver("occupancy"))?,
        })
    }

    /// Copy host data to a new device buffer through a pinned staging buffer.
    pub fn upload<T: DeviceRepr + Copy + Default + cudarc::driver::ValidAsZeroBits>(
        &self,
        host: &[T],
    ) -> Result<CudaSlice<T>, CudaError> {
        const STAGE_BYTES: usize = 64 << 20;
        let mut dst = self.stream.alloc_zeros::<T>(host.len().max(1)).map_err(driver("allocating device memory"))?;
        let per = (STAGE_BYTES / std::mem::size_of::<T>()).max(1).min(host.len().max(1));
        // SAFETY: the pinned buffer is fully written before each copy reads it.
        let mut pinned = unsafe { self.ctx.alloc_pinned::<T>(per) }.map_err(driver("allocating pinned memory"))?;
        for (i, chunk) in host.chunks(per).enumerate() {
            pinned.as_mut_slice().map_err(driver("pinned buffer"))?[..chunk.len()].copy_from_slice(chunk);
            let mut view = dst.slice_mut(i * per..i * per + chunk.len());
            let src = pinned.as_slice().map_err(driver("pinned buffer"))?;
            self.stream.memcpy_htod(&src[..chunk.len()], &mut view).map_err(driver("host-to-device copy"))?;
            self.stream.synchronize().map_err(driver("synchronizing a copy"))?;
        }
        Ok(dst)
    }

    pub fn download<T: DeviceRepr + Default + Clone>(&self, src: &CudaSlice<T>) -> Result<Vec<T>, CudaError> {
        self.download_prefix(src, src.len())
    }

    /// The first `len` elements of a (possibly larger) buffer.
    pub fn download_prefix<T: DeviceRepr + Default + Clone>(
        &self,
        src: &CudaSlice<T>,
        len: usize,
    ) -> Result<Vec<T>, CudaError> {
        self.stream.clone_dtoh(&src.slice(..len.min(src.len()))).map_err(driver("device-to-host copy"))
    }

    /// The columns `cols` of the first `m` rows of width `n` in `y`, `[m][cols]` (what the
    /// host compares), gathered on the device so only they cross the bus.
    pub fn download_columns(
        &self,
        y: &CudaSlice<f32>,
        cols: &CudaSlice<i32>,
        m: usize,
        n: usize,
    ) -> Result<Vec<f32>, CudaError> {
        let ncols = cols.len();
        if ncols == 0 || m == 0 {
            return Ok(Vec::new());
        }
        if m * n > y.len() || n > i64::MAX as usize || ncols > i32::MAX as usize {
            return Err(CudaError::NotApplicable {
                candidate: "column download".into(),
                n: m,
                k: n,
                why: format!("{m} rows of {n} outputs do not fit a buffer of {}", y.len()),
            });
        }
        let total = m * ncols;
        let mut out = self.stream.alloc_zeros::<f32>(total).map_err(driver("allocating gathered columns"))?;
        let f = self.common_function("vnni_gather_columns")?;
        let blocks = total.div_ceil(256).min(65_535) as u32;
        let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        let (ncols_arg, n_arg, m_arg) = (ncols as i32, n as i64, m as i64);
        let mut b = self.stream.launch_builder(f);
        b.arg(y).arg(cols).arg(&ncols_arg).arg(&n_arg).arg(&m_arg).arg(&mut out);
        // SAFETY: the argument list is vnni_gather_columns's; y holds m * n outputs (checked
        // above), out holds m * ncols, and the caller's columns are below n (`gather_index`).
        unsafe { b.launch(cfg) }.map_err(driver("launching the column gather"))?;
        self.download(&out)
    }

    /// Device column indices for [`Gpu::download_columns`]; every one must be below `n`.
    pub fn gather_index(&self, cols: &[usize], n: usize) -> Result<CudaSlice<i32>, CudaError> {
        if let Some(&bad) = cols.iter().find(|&&c| c >= n || c > i32::MAX as usize) {
            return Err(CudaError::NotApplicable {
                candidate: "column index".into(),
                n: cols.len(),
                k: n,
                why: format!("column {bad} is outside 0..{n}"),
            });
        }
        let idx: Vec<i32> = cols.iter().map(|&c| c as i32).collect();
        self.upload(&idx)
    }

    pub fn upload_matrix(&self, w: &PackedMatrix) -> Result<DeviceMatrix, CudaError> {
        let bits = |v: &[half::f16]| v.iter().map(|h| h.to_bits()).collect::<Vec<u16>>();
        Ok(DeviceMatrix {
            codebook: w.codebook,
            n: w.n,
            k: w.k,
            payload: self.upload(&w.payload)?,
            scale: self.upload(&w.scale)?,
            second: if w.second.is_empty() { None } else { Some(self.upload(&bits(&w.second))?) },
        })
    }

    /// A second device copy of `w` (weight copies are rotated to defeat L2).
    pub fn duplicate_matrix(&self, w: &DeviceMatrix) -> Result<DeviceMatrix, CudaError> {
        let s = &self.stream;
        Ok(DeviceMatrix {
            codebook: w.codebook,
            n: w.n,
            k: w.k,
            payload: s.clone_dtod(&w.payload).map_err(driver("copying weights"))?,
            scale: s.clone_dtod(&w.scale).map_err(driver("copying weights"))?,
            second: w.second.as_ref().map(|x| s.clone_dtod(x)).transpose().map_err(driver("copying weights"))?,
        })
    }

    pub fn upload_activations(&self, x: &[f32], m: usize, k: usize) -> Result<DeviceActivations, CudaError> {
        if k % 32 != 0 || x.len() != m * k {
            return Err(CudaError::NotApplicable {
                candidate: "activation upload".into(),
                n: m,
                k,
                why: format!("{} values are not M = {m} rows of K = {k} (a multiple of 32)", x.len()),
            });
        }
        let alloc = driver("allocating activations");
        Ok(DeviceActivations {
            m,
            k,
            x: self.upload(x)?,
            q: self.stream.alloc_zeros::<i8>(m * k).map_err(driver("allocating activations"))?,
            d: self.stream.alloc_zeros::<f32>(m * k / 32).map_err(driver("allocating activations"))?,
            sum: self.stream.alloc_zeros::<i32>(m * k / 32).map_err(alloc)?,
        })
    }

    /// Quantize `a.x` into `a.q`, `a.d`, `a.sum` on the stream.
    pub fn quantize(&self, a: &mut DeviceActivations) -> Result<(), CudaError> {
        self.quantize_launch(a, false)
    }

    /// [`Gpu::quantize`], launched programmatically when `programmatic` (sm_90): it reads `x`
    /// while the previous kernel drains and waits for it before storing (activation.cu).
    pub fn quantize_launch(&self, a: &mut DeviceActivations, programmatic: bool) -> Result<(), CudaError> {
        let values = a.m * a.k;
        if a.k % 32 != 0
            || a.x.len() < values
            || a.q.len() < values
            || a.d.len() < values / 32
            || a.sum.len() < values / 32
        {
            return Err(CudaError::NotApplicable {
                candidate: "activation quantization".into(),
                n: a.m,
                k: a.k,
                why: "the activation buffers are shorter than M x K".into(),
            });
        }
        let f = self.common_function("vnni_quantize_activations")?;
        let blocks = (a.m * a.k / 32) as i64;
        let cfg =
            LaunchConfig { grid_dim: ((blocks as u32).div_ceil(8), 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        let (mut x, mut q, mut d, mut sum, mut blocks) =
            (self.ptr(&a.x), self.ptr(&a.q), self.ptr(&a.d), self.ptr(&a.sum), blocks);
        let mut params: Vec<*mut c_void> = vec![
            (&raw mut x).cast(),
            (&raw mut q).cast(),
            (&raw mut d).cast(),
            (&raw mut sum).cast(),
            (&raw mut blocks).cast(),
        ];
        // SAFETY: the parameters match the kernel signature (four pointers and a long long);
        // the buffers hold m*k and m*k/32 elements (checked above).
        unsafe { self.launch_raw(f, cfg, &mut params, programmatic, "activation quantization") }
    }

    /// The quantized activations, read back (to compare with the CPU quantizer).
    pub fn download_activations(&self, a: &DeviceActivations) -> Result<QuantizedActivations, CudaError> {
        Ok(QuantizedActivations {
            m: a.m,
            k: a.k,
            q: self.download(&a.q)?,
            d: self.download(&a.d)?,
            sum: self.download(&a.sum)?,
        })
    }

    fn ptr<T>(&self, s: &CudaSlice<T>) -> u64 {
        s.device_ptr(&self.stream).0
    }

    /// A zeroed device buffer of `len` elements.
    pub fn alloc_zeros<T: DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        len: usize,
    ) -> Result<DeviceBuffer<T>, CudaError> {
        self.stream.alloc_zeros::<T>(len).map_err(driver(format!("allocating {len} elements")))
    }

    /// Launch one candidate (`Launch::decode` for one row, `Launch::batched` for all rows)
    /// writing `y[rows][N]`; two-phase forms write `[KB][rows][N]` partials into `workspace`
    /// and the ordered reduce folds them into `y`. Every length, the plan and the codebook are
    /// checked (`LaunchCheck`) before anything unsafe happens.
    pub fn launch(
        &self,
        l: &Launch,
        y: &mut DeviceBuffer<f32>,
        workspace: &mut DeviceBuffer<f32>,
    ) -> Result<(), CudaError> {
        let (cand, plan, w, a) = (l.candidate, l.plan, l.weights, l.activations);
        let check = LaunchCheck {
            candidate: cand,
            plan,
            codebook: w.codebook,
            n: w.n,
            k: w.k,
            sms: self.info.sms,
            payload_len: w.payload.len(),
            scale_len: w.scale.len(),
            second_len: w.second.as_ref().map(|s| s.len()),
            activation_rows: a.m,
            activation_k: a.k,
            activation_lens: (a.q.len(), a.d.len(), a.sum.len()),
            first_row: l.first_row,
            rows: l.rows,
            batched: l.batched,
            y_len: y.len(),
            workspace_len: workspace.len(),
            programmatic: l.programmatic,
        };
        let two_phase = check.verify()?;
        let (row0, m) = (l.first_row, l.rows);
        let spec = cand.kernel(w.codebook);
        let f = self.function(&spec)?;
        let kblk = w.k / 32;
        let out = if two_phase { self.ptr(workspace) } else { self.ptr(y) };
        let mut args = DecodeArgs {
            payload: self.ptr(&w.payload),
            scale: self.ptr(&w.scale),
            second: w.second.as_ref().map_or(0, |s| self.ptr(s)),
            aq: self.ptr(&a.q) + (row0 * w.k) as u64,
            ad: self.ptr(&a.d) + (row0 * kblk * 4) as u64,
            asum: self.ptr(&a.sum) + (row0 * kblk * 4) as u64,
            out,
            n: w.n as i32,
            kblk: kblk as i32,
            bpp: plan.bpp as i32,
            m: m as i32,
            prefetch_rows: if cand.family.programmatic() && self.l2_prefetch.applies(l.programmatic) {
                prefetch_rows(self.info.l2_bytes, w.bytes(), kblk, plan) as i32
            } else {
                0
            },
        };
        let cfg = LaunchConfig {
            grid_dim: (plan.grid.0, plan.grid.1, plan.z),
            block_dim: (plan.threads, 1, 1),
            shared_mem_bytes: plan.shared,
        };
        let mut kb = plan.kb as i32;
        let mut kpart = i32::from(cand.prefill.is_some_and(|t| t.kpart));
        let mut params: Vec<*mut c_void> = vec![(&raw mut args).cast()];
        if cand.family == Family::FusedKpar {
            params.push((&raw mut kb).cast());
        }
        if cand.family == Family::Imma {
            params.push((&raw mut kpart).cast());
        }
        // SAFETY: the parameters are DecodeArgs (matching vnni::DecodeArgs) and the family's
        // int, alive until the call returns (the driver copies them); `check` proved the plan
        // is the registry's for this shape (so the grid covers exactly the buffers), the
        // weights, activation rows, outputs and partials hold what the kernel reads and writes.
        unsafe { self.launch_raw(f, cfg, &mut params, l.programmatic, cand.id.as_str()) }?;
        if two_phase {
            let r = self.common_function(crate::registry::REDUCE_SYMBOL)?;
            let mut outputs = (m * w.n) as i32;
            let cfg = LaunchConfig {
                grid_dim: ((outputs as u32).div_ceil(256), 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let (mut partials, mut out) = (self.ptr(workspace), self.ptr(y));
            let mut params: Vec<*mut c_void> = vec![
                (&raw mut partials).cast(),
                (&raw mut out).cast(),
                (&raw mut outputs).cast(),
                (&raw mut kb).cast(),
            ];
            // SAFETY: checked above: workspace holds kb * m * n partials, y holds m * n
            // outputs; the reduce waits for the grid that wrote the partials.
            unsafe { self.launch_raw(r, cfg, &mut params, l.programmatic, "the ordered reduce") }?;
        }
        Ok(())
    }

    /// `cuLaunchKernelEx` of kernel `what` on the device's stream, with the programmatic stream
    /// serialization attribute when `programmatic` (cudarc's launch builder has no launch
    /// attributes), which devices before sm_90 refuse: their kernels compile without the wait.
    ///
    /// # Safety
    /// `params` must point at the kernel's parameters, in order and of its types.
    unsafe fn launch_raw(
        &self,
        f: &CudaFunction,
        cfg: LaunchConfig,
        params: &mut [*mut c_void],
        programmatic: bool,
        what: &str,
    ) -> Result<(), CudaError> {
        if programmatic && !super::launch::programmatic_arch(&self.info.arch) {
            return Err(CudaError::NoProgrammaticLaunch { what: what.into(), arch: self.info.arch.clone() });
        }
        // SAFETY: a zeroed attribute is a valid "ignore" entry; only its id and value are set.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &raw mut attr,
            numAttrs: u32::from(programmatic),
        };
        let launching = || driver(format!("launching {what}"));
        self.ctx.bind_to_thread().map_err(launching())?;
        // SAFETY: the caller vouches for `params`; the function belongs to this context.
        unsafe { sys::cuLaunchKernelEx(&config, f.cu_function(), params.as_mut_ptr(), std::ptr::null_mut()) }
            .result()
            .map_err(launching())
    }

    /// Fill a buffer with 0xA5 bytes so values a kernel failed to write show up.
    pub fn poison<T>(&self, s: &mut CudaSlice<T>) -> Result<(), CudaError> {
        self.poison_prefix(s, s.len())
    }

    /// Fill the first `len` elements with 0xA5 bytes.
    pub fn poison_prefix<T>(&self, s: &mut CudaSlice<T>, len: usize) -> Result<(), CudaError> {
        let bytes = len.min(s.len()) * std::mem::size_of::<T>();
        // SAFETY: the range is exactly the buffer.
        unsafe { cudarc::driver::result::memset_d8_async(self.ptr(s), 0xA5, bytes, self.stream.cu_stream()) }
            .map_err(driver("memset"))
    }

    /// Make the device's context current on this thread (for driver calls outside cudarc).
    pub(crate) fn bind_context(&self) -> Result<(), CudaError> {
        self.ctx.bind_to_thread().map_err(driver("binding the context"))
    }

    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.stream.synchronize().map_err(driver("synchronizing the stream"))
    }
}
