//! CUDA source assembly: the hand-written sources in `kernels/cuda/` with their local
//! includes inlined (NVRTC gets one string), plus generated `extern "C"` entry points,
//! one per registry kernel specialization.

use crate::digest::Sha256Hex;
use crate::registry::{KernelSpec, GROUPED_THREADS};
use crate::Codebook;

/// The CUDA files, by name. Their digest is part of every build identity.
pub const FILES: [(&str, &str); 10] = [
    ("contract.cuh", include_str!("../../cuda/contract.cuh")),
    ("launch.cuh", include_str!("../../cuda/launch.cuh")),
    ("codebook.cuh", include_str!("../../cuda/codebook.cuh")),
    ("decode_m1.cuh", include_str!("../../cuda/decode_m1.cuh")),
    ("grouped.cuh", include_str!("../../cuda/grouped.cuh")),
    ("prefill.cuh", include_str!("../../cuda/prefill.cuh")),
    ("activation.cu", include_str!("../../cuda/activation.cu")),
    ("reduce.cu", include_str!("../../cuda/reduce.cu")),
    ("delay.cu", include_str!("../../cuda/delay.cu")),
    ("gather.cu", include_str!("../../cuda/gather.cu")),
];

fn file(name: &str) -> &'static str {
    FILES.iter().find(|(n, _)| *n == name).map(|(_, s)| *s).unwrap_or_else(|| panic!("no CUDA file {name}"))
}

/// Inline `#include "x"` of our own files, each once (they all `#pragma once`).
fn inline(name: &str, seen: &mut Vec<&'static str>, out: &mut String) {
    let text = file(name);
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(inc) = trimmed.strip_prefix("#include \"").and_then(|r| r.strip_suffix('"')) {
            let inc = FILES
                .iter()
                .find(|(n, _)| *n == inc)
                .map(|(n, _)| *n)
                .unwrap_or_else(|| panic!("{name}: unknown include {inc}"));
            if !seen.contains(&inc) {
                seen.push(inc);
                inline(inc, seen, out);
            }
        } else if trimmed != "#pragma once" {
            out.push_str(line);
            out.push('\n');
        }
    }
}

fn assemble(roots: &[&str]) -> String {
    let mut out = String::new();
    let mut seen = Vec::new();
    for root in roots {
        inline(root, &mut seen, &mut out);
    }
    out
}

fn codebook_constant(cb: Codebook) -> &'static str {
    match cb {
        Codebook::S4 => "vnni::CB_S4",
        Codebook::Nl4 => "vnni::CB_NL4",
        Codebook::U4 => "vnni::CB_U4",
        Codebook::S5 => "vnni::CB_S5",
        Codebook::U5 => "vnni::CB_U5",
        Codebook::S6d => "vnni::CB_S6D",
        Codebook::S8 => "vnni::CB_S8",
        Codebook::E2m1 => "vnni::CB_E2M1",
        Codebook::S3d => "vnni::CB_S3D",
        Codebook::Nl3 => "vnni::CB_NL3",
        Codebook::O4 => "vnni::CB_O4",
        Codebook::U2m => "vnni::CB_U2M",
        Codebook::Nl2 => "vnni::CB_NL2",
        Codebook::Nl2d => "vnni::CB_NL2D",
    }
}

/// Registers per thread a tile kernel may use, so ptxas neither squeezes to 32 registers
/// for full occupancy nor spills (the preflight proves none does): 64 with two columns per
/// thread (half occupancy), 80 with one (its tail round needs them; 96 for one-warp CTAs,
/// where ptxas rounds the budget down further), 128 with four, whose loads in flight need
/// the room.
pub fn tile_register_budget(threads: u32, cpt: u32) -> u32 {
    match cpt {
        1 if threads <= 32 => 96,
        1 => 80,
        2 => 64,
        _ => 128,
    }
}

/// `__launch_bounds__` minimum blocks per SM that yields the register budget.
fn tile_min_blocks(threads: u32, cpt: u32) -> u32 {
    (65536 / (tile_register_budget(threads, cpt) * threads)).max(1)
}

/// The generated entry point of one specialization.
pub fn entry_point(spec: &KernelSpec) -> String {
    let name = spec.symbol();
    match *spec {
        KernelSpec::Tile { codebook, tile, cpt } => format!(
            "extern \"C\" __global__ void __launch_bounds__({threads}, {min_blocks}) {name}(const vnni::DecodeArgs a) {{\n  vnni::decode_tile<{cb}, {tile}, {cpt}>(a);\n}}\n",
            threads = tile / cpt,
            min_blocks = tile_min_blocks(tile / cpt, cpt),
            cb = codebook_constant(codebook),
        ),
        KernelSpec::Fused { codebook, columns } => format!(
            "extern \"C\" __global__ void __launch_bounds__({max}) {name}(const vnni::DecodeArgs a, int kb) {{\n  vnni::decode_fused<{cb}, {columns}>(a, kb);\n}}\n",
            max = spec.max_threads(),
            cb = codebook_constant(codebook),
        ),
        KernelSpec::GroupedRows { codebook, rows } => format!(
            "extern \"C\" __global__ void __launch_bounds__({t}, {min}) {name}(const vnni::DecodeArgs a) {{\n  vnni::grouped_rows<{cb}, {rows}>(a);\n}}\n",
            t = GROUPED_THREADS,
            min = if rows >= 16 { GROUPED_MIN_BLOCKS - 1 } else { GROUPED_MIN_BLOCKS },
            cb = codebook_constant(codebook),
        ),
        KernelSpec::GroupedMma16 { codebook } => format!(
            "extern \"C\" __global__ void __launch_bounds__({t}, {min}) {name}(const vnni::DecodeArgs a) {{\n  vnni::grouped_mma16<{cb}>(a);\n}}\n",
            t = GROUPED_THREADS,
            min = GROUPED_MIN_BLOCKS,
            cb = codebook_constant(codebook),
        ),
        KernelSpec::Prefill { codebook, tile } => {
            format!(
                "extern \"C\" __global__ void __launch_bounds__({t}, {min}) {name}(const vnni::DecodeArgs a, int kpart) {{\n  vnni::prefill_tile<{cb}, {bm}, {bn}, {warps_m}, {warps_n}, {kstep}, {stages}>(a, kpart);\n}}\n",
                bm = tile.bm,
                bn = tile.bn,
                warps_m = tile.warps_m,
                warps_n = tile.warps_n,
                kstep = tile.kstep,
                t = spec.max_threads(),
                min = (65536 / (prefill_register_budget(tile) * spec.max_threads())).max(1),
                cb = codebook_constant(codebook),
                stages = tile.stages(codebook),
            )
        }
    }
}

/// Registers per thread of a prefill tile: 128 where a thread holds 32 partition
/// accumulators (32 x 32 warp tiles: the 512-thread tile fits one CTA per SM), all 255 where
/// it holds 64.
fn prefill_register_budget(tile: crate::registry::PrefillTile) -> u32 {
    if tile.elements_per_thread() <= 32 {
        128
    } else {
        255
    }
}

/// Grouped kernels get 128 registers per thread (4 CTAs of 128 threads per SM), 168 for
/// 16 rows (3 CTAs): R accumulators and R activation blocks in flight need them.
const GROUPED_MIN_BLOCKS: u32 = 4;

/// Source of the module holding `specs` (decode, grouped and prefill kernels).
pub fn decode_module(specs: &[KernelSpec]) -> String {
    let mut src = assemble(&["prefill.cuh"]);
    src.push_str("\n// Generated entry points (registry specializations).\n");
    for spec in specs {
        src.push_str(&entry_point(spec));
    }
    src
}

/// Source of the module with the shape-independent kernels (activation quantization, reduce,
/// the timing clock's delay, the checked columns' gather).
pub fn common_module() -> String {
    assemble(&["activation.cu", "reduce.cu", "delay.cu", "gather.cu"])
}

/// sha256 over every CUDA file (name and content, in order).
pub fn kernel_source_digest() -> String {
    let mut h = Sha256Hex::new();
    for (name, text) in FILES {
        h.update_parts(&[name.as_bytes(), text.as_bytes()]);
    }
    h.finish()
}
