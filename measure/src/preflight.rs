//! Resource preflight: every kernel specialization compiled for the target arch, its
//! ptxas resources (static, no GPU needed) and, on a GPU, cuFuncGetAttribute and occupancy.
//! Local memory (stack or spills) or zero occupancy rejects a kernel: it is never timed.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::Result;
use vnni_corpus::ResourceRow;
use vnni_kernels::cuda::device::Gpu;
use vnni_kernels::cuda::{nvrtc, ptxas, source};
use vnni_kernels::registry::{all_candidates, kernel_specs, Backend, KernelSpec};
use vnni_kernels::Codebook;

/// ptxas resources of every kernel of every module, compiled with NVRTC for `arch`.
pub fn compile_all(arch: &str, cache: Option<&Path>) -> Result<BTreeMap<String, ptxas::StaticResources>> {
    let mut out = BTreeMap::new();
    let specs = kernel_specs();
    let common = nvrtc::compile(&source::common_module(), "vnni_common", arch, cache)?;
    out.extend(ptxas::parse(&common.log));
    for cb in Codebook::ALL {
        let mine: Vec<KernelSpec> = specs.iter().copied().filter(|s| s.codebook() == cb).collect();
        let c = nvrtc::compile(&source::decode_module(&mine), &format!("vnni_decode_{cb}"), arch, cache)?;
        out.extend(ptxas::parse(&c.log));
    }
    Ok(out)
}

/// One row per registry kernel; device columns filled when `gpu` is given.
pub fn rows(
    arch: &str,
    statics: &BTreeMap<String, ptxas::StaticResources>,
    gpu: Option<&Gpu>,
) -> Result<Vec<ResourceRow>> {
    let cands: Vec<_> = all_candidates().iter().filter(|c| c.backend == Backend::Cuda).collect();
    let mut rows = Vec::new();
    for spec in kernel_specs() {
        let sym = spec.symbol();
        let users: Vec<&str> =
            cands.iter().filter(|c| c.kernel(spec.codebook()) == spec).map(|c| c.id.as_str()).collect();
        let st = statics.get(&sym).cloned();
        let dev = gpu.map(|g| g.resources(&spec, spec.max_threads(), spec.dynamic_shared() as usize)).transpose()?;
        let mut why = Vec::new();
        match &st {
            None => why.push("missing from the ptxas log".to_string()),
            Some(s) if s.uses_local() => why.push(format!(
                "local memory: {} B stack, {} B spill stores, {} B spill loads",
                s.stack_bytes, s.spill_store_bytes, s.spill_load_bytes
            )),
            _ => {}
        }
        if let Some(d) = &dev {
            if d.local_bytes > 0 {
                why.push(format!("{} B local memory on the device", d.local_bytes));
            }
            if d.occupancy_blocks_per_sm == 0 {
                why.push("occupancy 0".into());
            }
        }
        let st = st.unwrap_or_default();
        rows.push(ResourceRow {
            arch: arch.to_string(),
            kernel: sym,
            codebook: spec.codebook(),
            threads: spec.max_threads(),
            registers: st.registers,
            stack_bytes: st.stack_bytes,
            spill_store_bytes: st.spill_store_bytes,
            spill_load_bytes: st.spill_load_bytes,
            shared_static_bytes: st.shared_static_bytes,
            device_local_bytes: dev.as_ref().map(|d| d.local_bytes),
            device_max_threads: dev.as_ref().map(|d| d.max_threads),
            device_occupancy_blocks_per_sm: dev.as_ref().map(|d| d.occupancy_blocks_per_sm),
            verdict: if why.is_empty() { "ok".into() } else { format!("rejected: {}", why.join("; ")) },
            candidates: users.join(";"),
        });
    }
    Ok(rows)
}

/// Kernels rejected by `rows`, symbol -> reason.
pub fn rejected(rows: &[ResourceRow]) -> BTreeMap<String, String> {
    rows.iter().filter(|r| r.verdict != "ok").map(|r| (r.kernel.clone(), r.verdict.clone())).collect()
}
