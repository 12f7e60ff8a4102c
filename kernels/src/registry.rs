//! The candidate registry: the one owner of candidate identity. A candidate is a named
//! kernel configuration; its id is stable text, its arithmetic identity is the bpp it
//! derives for a shape, and the registry digest binds every corpus to this exact list.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Serialize;

use crate::digest::sha256_hex;
pub use crate::vocab::{Backend, CandidateId, Surface, PREFILL_MIN_M};
use crate::Codebook;

/// The ordered reduce a two-phase launch runs after its partials (`kernels/cuda/reduce.cu`).
pub const REDUCE_SYMBOL: &str = "vnni_reduce_partials";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// One CTA column tile walks all of K (bpp = KBLK); tiles 128..512, 1-4 columns per thread.
    /// CPU: one task per column tile, all of K.
    Wide,
    /// The wide arithmetic with small tiles (32, 64 columns) for narrow N.
    Direct,
    /// Grid of N-tiles x KB partitions writing partials, then an ordered reduce kernel.
    /// CPU: one task per (tile, partition), then the ordered fold.
    Kpar,
    /// Columns x partitions threads in one CTA, CTA-local ordered fold, one launch.
    FusedKpar,
    /// Grouped: each weight block decoded once, streamed against R rows with dp4a.
    /// CPU: one task per column tile, every block decoded once for all M rows.
    Rows,
    /// Grouped: int8 `mma.sync m16n8k32` tiles (16 columns x 8 rows x one K-block, weights
    /// as the 16-row operand) give the exact per-block dots, then the same per-block contract.
    Mma16,
    /// Prefill: int8 IMMA GEMM tiles (`mma.sync m16n8k32`, operands staged by `cp.async`),
    /// one K-block per mma, the per-block contract per output element.
    Imma,
}

impl Family {
    /// Whether the family's kernel runs its dots on the integer tensor cores (`mma.sync` s8).
    pub fn tensor_cores(self) -> bool {
        matches!(self, Family::Mma16 | Family::Imma)
    }

    /// Whether the family's kernels (and the ordered reduce after them) hold the programmatic
    /// dependent launch protocol: no read of another kernel's output and no store before
    /// `griddepcontrol.wait`. The decode families do; the grouped and prefill kernels do not,
    /// so they must never be launched with the attribute.
    pub fn programmatic(self) -> bool {
        matches!(self, Family::Wide | Family::Direct | Family::Kpar | Family::FusedKpar)
    }
}

/// The tile of a prefill candidate: a BM x BN output tile of WM x WN warps, K walked
/// KSTEP K-blocks (32 values each) per pipeline stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PrefillTile {
    pub bm: u32,
    pub bn: u32,
    pub warps_m: u32,
    pub warps_n: u32,
    /// K-blocks per stage: 2 (BK64) or 8 (BK256).
    pub kstep: u32,
    /// `kpart`: one CTA per partition and an ordered reduce; else (`std`) one CTA walks all of K.
    pub kpart: bool,
}

impl PrefillTile {
    pub fn threads(&self) -> u32 {
        32 * self.warps_m * self.warps_n
    }

    /// Bytes of one pipeline stage (`PrefillStage` in kernels/cuda/prefill.cuh, mirrored).
    fn stage_bytes(&self, codebook: Codebook) -> u32 {
        let (bm, bn, ks) = (self.bm, self.bn, self.kstep);
        let asym = codebook.scale_rule() == crate::contract::ScaleRule::Asymmetric;
        let a = bm * (ks * 32 + 16);
        let d = ks * bm * 4;
        let sum = if asym { ks * bm * 4 } else { 0 };
        let w = ks * bn * codebook.payload_bytes() as u32;
        let s = ks * bn * 2;
        let s2 = if codebook.has_second() { s } else { 0 };
        a + d + sum + w + s + s2
    }

    /// Pipeline depth: as many stages as fit in 96 KiB (2 to 8), so loads are issued
    /// several microseconds ahead of their use whatever the stage size.
    pub fn stages(&self, codebook: Codebook) -> u32 {
        ((96 << 10) / self.stage_bytes(codebook)).clamp(2, 8)
    }

    /// Dynamic shared memory of one launch: the stages, the consumed stage converted to
    /// f32 (`PrefillPrep`: scales, second scales, sums) and the BM x BN f32 outputs.
    pub fn shared_bytes(&self, codebook: Codebook) -> u32 {
        let (bm, bn, ks) = (self.bm, self.bn, self.kstep);
        let asym = codebook.scale_rule() == crate::contract::ScaleRule::Asymmetric;
        let scales = if codebook.has_second() { 2 } else { 1 };
        let prep = scales * ks * bn * 4 + if asym { ks * bm * 4 } else { 0 };
        self.stages(codebook) * self.stage_bytes(codebook) + prep + bm * bn * 4
    }

    /// Output elements (accumulator registers) per thread.
    pub fn elements_per_thread(&self) -> u32 {
        self.bm * self.bn / self.threads()
    }
}

/// How a candidate derives its partition count, hence its bpp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KbRule {
    /// One partition: bpp = KBLK.
    Wide,
    /// A literal partition count. Overlay-only: illegal where KB > KBLK.
    Literal(u32),
    /// `KB = min(kb, cap)`: the literal count where K allows it, else every K-block its own
    /// partition. Legal for every shape, so generic leaves may use it.
    Capped(u32),
    /// `KB = clamp(ceil(waves * SMs / ceil(N / tile)), 1, min(KBLK, cap))`: about `waves`
    /// CTAs per SM. Legal for every shape, so generic leaves may use it.
    Waves(u32),
    /// Grouped kernels never choose: the bpp of the M = 1 candidate for (codebook, N, K).
    Inherited,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub id: CandidateId,
    pub backend: Backend,
    pub surface: Surface,
    pub family: Family,
    /// Columns per CTA.
    pub tile: u32,
    /// Columns per thread (tile families).
    pub cpt: u32,
    /// Activation rows per CTA (1 for decode).
    pub rows: u32,
    pub kb: KbRule,
    /// Prefill candidates only (absent from the serialized form of the others, so adding the
    /// prefill surface left the digest of the decode and grouped registry unchanged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill: Option<PrefillTile>,
}

/// The most threads one CTA may have.
pub const MAX_THREADS: u32 = 1024;

/// The compiled kernel a candidate launches for one codebook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KernelSpec {
    Tile {
        codebook: Codebook,
        tile: u32,
        cpt: u32,
    },
    Fused {
        codebook: Codebook,
        columns: u32,
    },
    GroupedRows {
        codebook: Codebook,
        rows: u32,
    },
    GroupedMma16 {
        codebook: Codebook,
    },
    /// One kernel serves both forms (`kpart` is a launch argument): `tile.kpart` is false.
    Prefill {
        codebook: Codebook,
        tile: PrefillTile,
    },
}

/// Threads per CTA of the grouped kernels.
pub const GROUPED_THREADS: u32 = 128;

impl KernelSpec {
    /// The extern "C" entry point name.
    pub fn symbol(&self) -> String {
        match self {
            KernelSpec::Tile { codebook, tile, cpt } => format!("vnni_tile_{codebook}_tn{tile}_cpt{cpt}"),
            KernelSpec::Fused { codebook, columns } => format!("vnni_fused_{codebook}_c{columns}"),
            KernelSpec::GroupedRows { codebook, rows } => format!("vnni_grouped_rows_{codebook}_r{rows}"),
            KernelSpec::GroupedMma16 { codebook } => format!("vnni_grouped_mma16_{codebook}"),
            KernelSpec::Prefill { codebook, tile: t } => {
                format!("vnni_prefill_{codebook}_{}x{}_w{}x{}_bk{}", t.bm, t.bn, t.warps_m, t.warps_n, t.kstep * 32)
            }
        }
    }

    pub fn codebook(&self) -> Codebook {
        match *self {
            KernelSpec::Tile { codebook, .. }
            | KernelSpec::Fused { codebook, .. }
            | KernelSpec::GroupedRows { codebook, .. }
            | KernelSpec::GroupedMma16 { codebook }
            | KernelSpec::Prefill { codebook, .. } => codebook,
        }
    }

    /// Threads per CTA the kernel is compiled for (its launch bound).
    pub fn max_threads(&self) -> u32 {
        match *self {
            KernelSpec::Tile { tile, cpt, .. } => tile / cpt,
            KernelSpec::Fused { .. } => MAX_THREADS,
            KernelSpec::GroupedRows { .. } | KernelSpec::GroupedMma16 { .. } => GROUPED_THREADS,
            KernelSpec::Prefill { tile, .. } => tile.threads(),
        }
    }

    /// The prefill tile a kernel implements (either form: `kpart` is a launch argument).
    pub fn prefill_tile(&self) -> Option<PrefillTile> {
        match *self {
            KernelSpec::Prefill { tile, .. } => Some(tile),
            _ => None,
        }
    }

    /// Dynamic shared memory every launch of this kernel takes (prefill tiles; the fused
    /// family's depends on the shape and is 0 here).
    pub fn dynamic_shared(&self) -> u32 {
        self.prefill_tile().map_or(0, |t| t.shared_bytes(self.codebook()))
    }
}

/// A candidate's launch geometry for one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchPlan {
    /// K-blocks per partition: the arithmetic identity.
    pub bpp: usize,
    /// Partitions actually launched: `ceil(KBLK / bpp)`.
    pub kb: usize,
    pub grid: (u32, u32),
    /// Row slices (grouped kernels; 1 for decode).
    pub z: u32,
    pub threads: u32,
    /// Dynamic shared memory bytes.
    pub shared: u32,
    /// f32 partials the candidate needs as workspace (kpar).
    pub workspace: usize,
}

/// Block rows of each partition a decode kernel asks of L2 before it waits for the previous
/// kernel (`prefetch_first` in decode_m1.cuh): a sixteenth of L2 over the whole grid, at
/// least one row and at most the partition. Measured on the H200 (docs/PERF.md, "Programmatic
/// dependent launch"): 4 or 8 MB in all beat one round of loads by 7% (geomean, graph mode,
/// plain launches; 5% programmatic) on 2-60 MB layers, and tie with each other; 16 and 32 MB
/// lose 3-8% again. `weight_bytes` over `kblk` block rows of all N columns.
pub fn prefetch_rows(l2_bytes: usize, weight_bytes: usize, kblk: usize, plan: &LaunchPlan) -> usize {
    let row_bytes = (weight_bytes / kblk.max(1)).max(1);
    (l2_bytes / 16 / row_bytes / plan.kb.max(1)).clamp(1, plan.bpp.max(1))
}

/// (bpp, partitions) of a surface that inherits the M = 1 bpp: clamped to KBLK, so a
/// partition is never empty; `None` for an empty or non-block-aligned shape.
fn inherited_partitions(n: usize, k: usize, m: usize, bpp: usize) -> Option<(usize, usize)> {
    if n == 0 || k == 0 || k % 32 != 0 || m == 0 || bpp == 0 {
        return None;
    }
    let bpp = bpp.min(k / 32);
    Some((bpp, (k / 32).div_ceil(bpp)))
}

impl Candidate {
    /// Generic (fallback) leaves may use only candidates legal for every shape.
    pub fn generic_legal(&self) -> bool {
        !matches!(self.kb, KbRule::Literal(_))
    }

    /// Whether `other` differs from this candidate at most in how it derives its partition
    /// count: where both derive the same bpp for a shape, they launch the same kernel with the
    /// same grid, threads and shared memory (launch twins; [`Candidate::plan`] reads nothing
    /// else of the rule).
    pub fn same_launch_as(&self, other: &Candidate) -> bool {
        (self.backend, self.surface, self.family, self.tile, self.cpt, self.rows, self.prefill)
            == (other.backend, other.surface, other.family, other.tile, other.cpt, other.rows, other.prefill)
    }

    /// Launch geometry of a prefill candidate for M rows of `codebook` at the inherited `bpp`.
    pub fn plan_prefill(&self, codebook: Codebook, n: usize, k: usize, m: usize, bpp: usize) -> Option<LaunchPlan> {
        let tile = self.prefill?;
        if !self.supports(codebook) {
            return None;
        }
        let (bpp, kb) = inherited_partitions(n, k, m, bpp)?;
        let tiles_n = n.div_ceil(tile.bn as usize);
        let tiles_m = m.div_ceil(tile.bm as usize);
        let z = if tile.kpart { kb } else { 1 };
        if tiles_n > u32::MAX as usize || tiles_m > 65_535 || z > 65_535 || m * n > i32::MAX as usize {
            return None;
        }
        // The partials would not fit beside the weights: the std form serves. Grouped rows
        // (M <= 31) are exempt, as the dp4a and mma16 forms are: a grouped leaf must launch
        // at every shape whatever bpp it inherits.
        if tile.kpart && kb > 1 && self.surface == Surface::Prefill && kb * m * n * 4 > MAX_WORKSPACE_BYTES {
            return None;
        }
        Some(LaunchPlan {
            bpp,
            kb,
            grid: (tiles_n as u32, tiles_m as u32),
            z: z as u32,
            threads: tile.threads(),
            shared: tile.shared_bytes(codebook),
            workspace: if tile.kpart && kb > 1 { kb * m * n } else { 0 },
        })
    }

    /// Launch geometry of a grouped or prefill candidate for M rows at the inherited `bpp`.
    pub fn plan_batched(&self, codebook: Codebook, n: usize, k: usize, m: usize, bpp: usize) -> Option<LaunchPlan> {
        match self.surface {
            // Grouped IMMA tiles launch the prefill kernel (std form) over M <= 31 rows.
            Surface::Grouped if self.prefill.is_some() => self.plan_prefill(codebook, n, k, m, bpp),
            Surface::Grouped => self.plan_grouped(n, k, m, bpp),
            Surface::Prefill => self.plan_prefill(codebook, n, k, m, bpp),
            Surface::Decode => None,
        }
    }

    /// Launch geometry of a dp4a or mma16 grouped candidate for M rows at the inherited `bpp`
    /// (grouped IMMA tiles plan as prefill tiles: [`Candidate::plan_batched`]).
    pub fn plan_grouped(&self, n: usize, k: usize, m: usize, bpp: usize) -> Option<LaunchPlan> {
        if self.surface != Surface::Grouped || self.prefill.is_some() {
            return None;
        }
        let (bpp, kb) = inherited_partitions(n, k, m, bpp)?;
        let tiles = n.div_ceil(self.tile as usize);
        let slices = m.div_ceil(self.rows as usize);
        if tiles > u32::MAX as usize || slices > 65_535 || kb > 65_535 {
            return None;
        }
        Some(LaunchPlan {
            bpp,
            kb,
            grid: (tiles as u32, kb as u32),
            z: slices as u32,
            threads: GROUPED_THREADS,
            shared: 0,
            workspace: if kb > 1 { kb * m * n } else { 0 },
        })
    }

    /// Every codebook is supported by every candidate except the BK256 prefill tiles (`s4`).
    pub fn supports(&self, codebook: Codebook) -> bool {
        match self.prefill {
            Some(t) if t.kstep > 2 => codebook == Codebook::S4,
            _ => true,
        }
    }

    /// Whether a launch with `kb` K partitions writes partials that the ordered reduce folds
    /// (a second kernel): dp4a and mma16 grouped kernels whenever there are partitions, kpar
    /// decode and kpart IMMA tiles too; fused and wide forms fold in the CTA.
    pub fn two_phase(&self, kb: usize) -> bool {
        kb > 1
            && match self.family {
                Family::Kpar | Family::Rows | Family::Mma16 => true,
                Family::Imma => self.prefill.is_some_and(|t| t.kpart),
                Family::Wide | Family::Direct | Family::FusedKpar => false,
            }
    }

    /// The symbols of the kernels one launch on `codebook` with `kb` K partitions runs, in
    /// launch order (what a profiler must see).
    pub fn launched_symbols(&self, codebook: Codebook, kb: usize) -> Vec<String> {
        let mut out = vec![self.kernel(codebook).symbol()];
        if self.two_phase(kb) {
            out.push(REDUCE_SYMBOL.to_string());
        }
        out
    }

    /// The CUDA kernel this candidate launches for `codebook` (CPU candidates have none).
    pub fn kernel(&self, codebook: Codebook) -> KernelSpec {
        debug_assert_eq!(self.backend, Backend::Cuda, "{} is not a CUDA candidate", self.id);
        match self.family {
            Family::FusedKpar => KernelSpec::Fused { codebook, columns: self.tile },
            Family::Rows => KernelSpec::GroupedRows { codebook, rows: self.rows },
            Family::Mma16 => KernelSpec::GroupedMma16 { codebook },
            Family::Imma => {
                let tile = self.prefill.expect("prefill candidates carry their tile");
                KernelSpec::Prefill { codebook, tile: PrefillTile { kpart: false, ..tile } }
            }
            Family::Wide | Family::Direct | Family::Kpar => {
                KernelSpec::Tile { codebook, tile: self.tile, cpt: self.cpt }
            }
        }
    }

    /// The partition cap besides KBLK (fused kernels: one thread column per partition).
    pub fn max_kb(&self) -> Option<usize> {
        match self.family {
            Family::FusedKpar => Some((MAX_THREADS / self.tile) as usize),
            _ => None,
        }
    }

    /// The partition cap of this candidate for `kblk` K-blocks.
    fn kb_cap(&self, kblk: usize) -> usize {
        self.max_kb().map_or(kblk, |c| c.min(kblk))
    }

    /// Derive bpp and the launch geometry for N x K on a device with `sms` multiprocessors;
    /// `None` where the candidate is illegal for the shape.
    pub fn plan(&self, n: usize, k: usize, sms: u32) -> Option<LaunchPlan> {
        if self.surface != Surface::Decode || n == 0 || k == 0 || k % 32 != 0 {
            return None;
        }
        let kblk = k / 32;
        let tiles = n.div_ceil(self.tile as usize);
        let requested = match self.kb {
            KbRule::Wide => 1,
            KbRule::Inherited => return None,
            KbRule::Literal(kb) => {
                if kb as usize > self.kb_cap(kblk) {
                    return None;
                }
                kb as usize
            }
            KbRule::Capped(kb) => (kb as usize).clamp(1, self.kb_cap(kblk)),
            KbRule::Waves(w) => (w as usize * sms as usize).div_ceil(tiles).clamp(1, self.kb_cap(kblk)),
        };
        let bpp = kblk.div_ceil(requested);
        let kb = kblk.div_ceil(bpp);
        let (threads, grid, shared, workspace) = match self.family {
            Family::FusedKpar => {
                let threads = self.tile * kb as u32;
                (threads, (tiles as u32, 1), threads * 4, 0)
            }
            _ => (self.tile / self.cpt, (tiles as u32, kb as u32), 0, if kb > 1 { kb * n } else { 0 }),
        };
        if threads > MAX_THREADS || tiles > u32::MAX as usize {
            return None;
        }
        Some(LaunchPlan { bpp, kb, grid, z: 1, threads, shared, workspace })
    }
}

fn candidate(family: Family, tile: u32, cpt: u32, kb: KbRule) -> Candidate {
    let base = match family {
        Family::Wide => format!("decode.wide.tn{tile}.cpt{cpt}"),
        Family::Direct => format!("decode.direct.tn{tile}.cpt{cpt}"),
        Family::Kpar => format!("decode.kpar.tn{tile}.cpt{cpt}"),
        Family::FusedKpar => format!("decode.fused.c{tile}"),
        Family::Rows | Family::Mma16 | Family::Imma => {
            unreachable!("grouped and prefill candidates are built by their own functions")
        }
    };
    let name = match kb {
        KbRule::Wide => base,
        KbRule::Literal(k) => format!("{base}.kb{k}"),
        KbRule::Capped(k) => format!("{base}.cap{k}"),
        KbRule::Waves(w) => format!("{base}.waves{w}"),
        KbRule::Inherited => base,
    };
    Candidate {
        id: id(name),
        backend: Backend::Cuda,
        surface: Surface::Decode,
        family,
        tile,
        cpt,
        rows: 1,
        kb,
        prefill: None,
    }
}

/// A registry id; the registry's own spellings are valid by construction (tested).
fn id(name: String) -> CandidateId {
    CandidateId::new(name).expect("registry ids are valid candidate ids")
}

fn build_grouped() -> Vec<Candidate> {
    let mut out: Vec<Candidate> = [2, 4, 8, 16]
        .into_iter()
        .map(|r| Candidate {
            id: id(format!("grouped.rows.r{r}")),
            backend: Backend::Cuda,
            surface: Surface::Grouped,
            family: Family::Rows,
            tile: GROUPED_THREADS,
            cpt: 1,
            rows: r,
            kb: KbRule::Inherited,
            prefill: None,
        })
        .collect();
    out.push(Candidate {
        id: id("grouped.mma16".into()),
        backend: Backend::Cuda,
        surface: Surface::Grouped,
        family: Family::Mma16,
        tile: GROUPED_THREADS / 32 * 16,
        cpt: 1,
        rows: 16,
        kb: KbRule::Inherited,
        prefill: None,
    });
    out
}

/// The grouped IMMA tiles (BM, BN, warps along M, warps along N), BK64, each in the `std` and
/// the `kpart` form: the prefill kernel with one or two 16-row fragments, so a CTA streams its
/// columns' weights once for all M <= BM rows (the dp4a rows kernels decode a block once per
/// R rows and mma16 keeps few weight bytes in flight: 3.6x the M = 1 time at M = 16 on an LM
/// head). Measured on the H200 (docs/PERF.md, 2026-12-03) against `rows`/`mma16` on four shapes
/// and seven codebooks: fastest at M = 16 in 27 of 28 pairs and at M = 31 in all 28 (up to
/// 1.8x), slower at M <= 8 (16 rows of FP32 contract work whatever M); `kpart` is what shapes
/// of few column tiles need; a 16 x 64 tile of two warps won nowhere.
pub const GROUPED_IMMA_TILES: [(u32, u32, u32, u32); 3] = [(16, 128, 1, 4), (16, 256, 1, 8), (32, 128, 1, 4)];

/// Generation 3's grouped candidates: [`GROUPED_IMMA_TILES`], `std` then `kpart` per tile.
fn build_grouped_imma() -> Vec<Candidate> {
    GROUPED_IMMA_TILES
        .iter()
        .flat_map(|&(bm, bn, warps_m, warps_n)| {
            let tile = PrefillTile { bm, bn, warps_m, warps_n, kstep: 2, kpart: false };
            imma_candidates(&format!("grouped.imma.{bm}x{bn}.w{warps_m}x{warps_n}"), Surface::Grouped, tile)
        })
        .collect()
}

/// One IMMA tile of `surface` in both forms, `<base>.std` then `<base>.kpart`.
fn imma_candidates(base: &str, surface: Surface, tile: PrefillTile) -> [Candidate; 2] {
    [false, true].map(|kpart| Candidate {
        id: id(format!("{base}.{}", if kpart { "kpart" } else { "std" })),
        backend: Backend::Cuda,
        surface,
        family: Family::Imma,
        tile: tile.bn,
        cpt: 1,
        rows: tile.bm,
        kb: KbRule::Inherited,
        prefill: Some(PrefillTile { kpart, ..tile }),
    })
}

/// The BK64 prefill tiles (BM, BN, warps along M, warps along N), from 64 x 64 with 128
/// threads to 128 x 128 with 512; warp tiles 32 x 32 up to 64 x 32 / 32 x 64.
pub const PREFILL_BK64_TILES: [(u32, u32, u32, u32); 6] =
    [(64, 64, 2, 2), (64, 128, 2, 2), (64, 128, 2, 4), (128, 64, 4, 2), (128, 128, 2, 4), (128, 128, 4, 4)];

/// The BK256 prefill tiles of `s4`: (name, BM, BN, warps along M, warps along N).
pub const PREFILL_BK256_TILES: [(&str, u32, u32, u32, u32); 2] = [("wide", 128, 128, 2, 4), ("narrow", 128, 64, 4, 2)];

fn build_prefill() -> Vec<Candidate> {
    let mut tiles: Vec<(String, PrefillTile)> = Vec::new();
    for (i, &(bm, bn, warps_m, warps_n)) in PREFILL_BK64_TILES.iter().enumerate() {
        tiles.push((format!("prefill.bk64.t{i}"), PrefillTile { bm, bn, warps_m, warps_n, kstep: 2, kpart: false }));
    }
    for &(name, bm, bn, warps_m, warps_n) in &PREFILL_BK256_TILES {
        tiles.push((format!("prefill.bk256.{name}"), PrefillTile { bm, bn, warps_m, warps_n, kstep: 8, kpart: false }));
    }
    tiles.into_iter().flat_map(|(base, tile)| imma_candidates(&base, Surface::Prefill, tile)).collect()
}

/// The M buckets the prefill surface is certified and timed at.
pub const PREFILL_M: [usize; 8] = [32, 64, 128, 256, 512, 1024, 2048, 4096];

/// The `auto` hand heuristic (a baseline, not a policy): the largest BK64 tile (by area,
/// then registry order) whose tile count fills every SM once; the smallest tile when none
/// does. Always the `std` form.
pub fn prefill_auto(n: usize, m: usize, sms: u32) -> Candidate {
    let cands: Vec<Candidate> =
        prefill_candidates().into_iter().filter(|c| c.prefill.is_some_and(|t| t.kstep == 2 && !t.kpart)).collect();
    let tiles = |c: &Candidate| n.div_ceil(c.tile as usize) * m.div_ceil(c.rows as usize);
    let area = |c: &Candidate| c.tile * c.rows;
    let filling =
        cands.iter().filter(|c| tiles(c) >= sms as usize).fold(None, |best: Option<&Candidate>, c| match best {
            Some(b) if area(b) >= area(c) => Some(b),
            _ => Some(c),
        });
    filling.unwrap_or(&cands[0]).clone()
}

/// The M values the grouped surface serves.
pub const GROUPED_M: [usize; 16] = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 31];

/// The CUDA decode candidates generation 2 added: a capped twin for every literal KB that
/// had none, and the fused thread-target rules.
fn build_decode_generation2() -> Vec<Candidate> {
    let mut out = Vec::new();
    for tile in [64, 128, 256] {
        for cap in [2, 3, 4, 6, 12, 32] {
            out.push(candidate(Family::Kpar, tile, 1, KbRule::Capped(cap)));
        }
    }
    for columns in [16, 32] {
        for cap in [4, 6, 12] {
            out.push(candidate(Family::FusedKpar, columns, 1, KbRule::Capped(cap)));
        }
    }
    // waves x SMs / (N / columns) partitions of `columns` threads: c16.waves64 and
    // c32.waves32 both aim at about 1,000 threads per SM (the fused winners of generation 1
    // follow KB ~ 135,000 / N from N = 4096 to 32768), the others at half of that.
    for (columns, waves) in [(16, 32), (16, 64), (32, 16), (32, 32)] {
        out.push(candidate(Family::FusedKpar, columns, 1, KbRule::Waves(waves)));
    }
    out
}

fn build_decode() -> Vec<Candidate> {
    let mut out = Vec::new();
    for tile in [128, 256, 512] {
        for cpt in [1, 2, 4] {
            out.push(candidate(Family::Wide, tile, cpt, KbRule::Wide));
        }
    }
    for tile in [32, 64] {
        out.push(candidate(Family::Direct, tile, 1, KbRule::Wide));
    }
    for tile in [64, 128, 256] {
        for kb in [2, 3, 4, 6, 8, 12, 16, 32] {
            out.push(candidate(Family::Kpar, tile, 1, KbRule::Literal(kb)));
        }
        for waves in [1, 2, 4] {
            out.push(candidate(Family::Kpar, tile, 1, KbRule::Waves(waves)));
        }
        for cap in [8, 16] {
            out.push(candidate(Family::Kpar, tile, 1, KbRule::Capped(cap)));
        }
    }
    for columns in [16, 32] {
        for kb in [4, 6, 8, 12, 16, 32] {
            out.push(candidate(Family::FusedKpar, columns, 1, KbRule::Literal(kb)));
        }
        for waves in [1, 2] {
            out.push(candidate(Family::FusedKpar, columns, 1, KbRule::Waves(waves)));
        }
        for cap in [8, 16, 32] {
            out.push(candidate(Family::FusedKpar, columns, 1, KbRule::Capped(cap)));
        }
    }
    out
}

/// The CPU backend's decode candidates: row tiles over N with all of K (`wide`), and K
/// partitions with an ordered fold (`kpar`, literal KB or the waves formula with
/// units = worker threads). Tiles are columns per rayon task.
fn build_cpu_decode() -> Vec<Candidate> {
    let cpu = |family: Family, tile: u32, kb: KbRule| {
        let base = match family {
            Family::Wide => format!("cpu.decode.wide.t{tile}"),
            _ => format!("cpu.decode.kpar.t{tile}"),
        };
        let name = match kb {
            KbRule::Literal(k) => format!("{base}.kb{k}"),
            KbRule::Capped(k) => format!("{base}.cap{k}"),
            KbRule::Waves(w) => format!("{base}.waves{w}"),
            _ => base,
        };
        Candidate {
            id: id(name),
            backend: Backend::Cpu,
            surface: Surface::Decode,
            family,
            tile,
            cpt: 1,
            rows: 1,
            kb,
            prefill: None,
        }
    };
    let mut out = Vec::new();
    for tile in [16, 64, 256] {
        out.push(cpu(Family::Wide, tile, KbRule::Wide));
    }
    for kb in [2, 4] {
        out.push(cpu(Family::Kpar, 64, KbRule::Literal(kb)));
    }
    for (tile, waves) in [(16, 1), (64, 1), (64, 2)] {
        out.push(cpu(Family::Kpar, tile, KbRule::Waves(waves)));
    }
    out.push(cpu(Family::Kpar, 64, KbRule::Capped(4)));
    out
}

/// The CPU backend's grouped candidates: column tiles, each weight block decoded once for all rows.
fn build_cpu_grouped() -> Vec<Candidate> {
    [16, 64]
        .into_iter()
        .map(|tile| Candidate {
            id: id(format!("cpu.grouped.rows.t{tile}")),
            backend: Backend::Cpu,
            surface: Surface::Grouped,
            family: Family::Rows,
            tile,
            cpt: 1,
            rows: u32::MAX,
            kb: KbRule::Inherited,
            prefill: None,
        })
        .collect()
}

/// The registry generation this checkout sweeps. A generation is a candidate set: corpora
/// bind its digest, and a corpus of an older generation stays fittable as long as every one
/// of its candidates is still here (retired candidates stay, unswept, for that reason).
///
/// - 1: the first H200 corpora (2026-11).
/// - 2: every literal-KB CUDA decode candidate retired for its capped twin (identical where
///   the literal is legal, and legal everywhere, so a fallback tree may use what an overlay
///   could), plus fused thread-target rules (about `waves` x 16 or 32 columns of threads per
///   SM: the KB that fused winners follow as N grows).
/// - 3: grouped IMMA tiles (`grouped.imma.*`, the prefill kernel over M <= 31 rows).
pub const GENERATION: u32 = 3;

/// The generations a candidate belongs to: `since..retired`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Life {
    since: u32,
    retired: Option<u32>,
}

impl Life {
    const FIRST: Life = Life { since: 1, retired: None };

    fn covers(self, generation: u32) -> bool {
        self.since <= generation && self.retired.is_none_or(|r| generation < r)
    }
}

/// The registry, built once: every candidate of every generation in registry order (CUDA
/// decode of generation 1, then those added since, grouped, prefill, then CPU decode,
/// grouped), its generations, and an index by id. Appending keeps the order of an older
/// generation's candidates, hence its digest and its tie-break order.
struct Registry {
    all: Vec<Candidate>,
    life: Vec<Life>,
    by_id: BTreeMap<CandidateId, usize>,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut all = build_decode();
        let mut life: Vec<Life> = all
            .iter()
            .map(|c| match c.kb {
                KbRule::Literal(_) => Life { since: 1, retired: Some(2) },
                _ => Life::FIRST,
            })
            .collect();
        let added = build_decode_generation2();
        life.extend(added.iter().map(|_| Life { since: 2, retired: None }));
        all.extend(added);
        let grouped = build_grouped();
        life.extend(grouped.iter().map(|_| Life::FIRST));
        all.extend(grouped);
        let grouped_imma = build_grouped_imma();
        life.extend(grouped_imma.iter().map(|_| Life { since: 3, retired: None }));
        all.extend(grouped_imma);
        for more in [build_prefill(), build_cpu_decode(), build_cpu_grouped()] {
            life.extend(more.iter().map(|_| Life::FIRST));
            all.extend(more);
        }
        let by_id = all.iter().enumerate().map(|(i, c)| (c.id.clone(), i)).collect();
        Registry { all, life, by_id }
    })
}

/// The candidates of one backend and surface in the current generation, registry order:
/// what a sweep times.
pub fn candidates(backend: Backend, surface: Surface) -> Vec<Candidate> {
    candidates_in(backend, surface, GENERATION)
}

/// The candidates of one backend and surface in `generation`, registry order: what a corpus
/// of that generation holds.
pub fn candidates_in(backend: Backend, surface: Surface, generation: u32) -> Vec<Candidate> {
    in_generation(generation).filter(|c| c.backend == backend && c.surface == surface).cloned().collect()
}

/// Every candidate of `generation`, registry order.
fn in_generation(generation: u32) -> impl Iterator<Item = &'static Candidate> {
    let r = registry();
    r.all.iter().zip(&r.life).filter(move |(_, l)| l.covers(generation)).map(|(c, _)| c)
}

/// Whether the current generation still sweeps this candidate (false for retired ones).
pub fn is_current(id: &str) -> bool {
    let r = registry();
    r.by_id.get(id).is_some_and(|&i| r.life[i].covers(GENERATION))
}

/// Every decode (M = 1) CUDA candidate, in registry order (the deterministic tie-break order).
pub fn decode_candidates() -> Vec<Candidate> {
    candidates(Backend::Cuda, Surface::Decode)
}

/// Every grouped (M = 2..16, 31) CUDA candidate, in registry order.
pub fn grouped_candidates() -> Vec<Candidate> {
    candidates(Backend::Cuda, Surface::Grouped)
}

/// Every prefill (M >= 32) candidate, in registry order: each tile in the `std` form, then
/// the `kpart` form.
pub fn prefill_candidates() -> Vec<Candidate> {
    candidates(Backend::Cuda, Surface::Prefill)
}

/// The CPU backend's decode candidates (see `build_cpu_decode`).
pub fn cpu_decode_candidates() -> Vec<Candidate> {
    candidates(Backend::Cpu, Surface::Decode)
}

/// The CPU backend's grouped candidates (see `build_cpu_grouped`).
pub fn cpu_grouped_candidates() -> Vec<Candidate> {
    candidates(Backend::Cpu, Surface::Grouped)
}

/// All candidates of every backend, surface and generation (retired ones included, so
/// older corpora and policies resolve), in registry order.
pub fn all_candidates() -> &'static [Candidate] {
    &registry().all
}

/// The candidate with this id (an index lookup).
pub fn find(id: &str) -> Option<&'static Candidate> {
    let r = registry();
    r.by_id.get(id).map(|&i| &r.all[i])
}

/// Every distinct kernel specialization the registry needs, sorted.
pub fn kernel_specs() -> Vec<KernelSpec> {
    let mut specs: Vec<KernelSpec> = all_candidates()
        .iter()
        .filter(|c| c.backend == Backend::Cuda)
        .flat_map(|c| Codebook::ALL.into_iter().filter(|&cb| c.supports(cb)).map(|cb| c.kernel(cb)))
        .collect();
    specs.sort();
    specs.dedup();
    specs
}

/// The canonical descriptor of one candidate: the text its registry digest hashes. It is
/// written field by field here, not derived from the Rust type, so refactoring `Candidate`
/// cannot move a digest that committed corpora bind. The form is one JSON object:
/// `{"id":…,"backend":…,"surface":…,"family":…,"tile":…,"cpt":…,"rows":…,"kb":…}` where
/// `kb` is `"wide"`, `"inherited"`, or `{"literal"|"capped"|"waves":count}`, and prefill
/// candidates append `"prefill":{"bm":…,"bn":…,"warps_m":…,"warps_n":…,"kstep":…,"kpart":…}`.
/// Families are `wide`, `direct`, `kpar`, `fused_kpar`, `rows`, `mma16`, `imma`.
pub fn descriptor(c: &Candidate) -> String {
    let family = match c.family {
        Family::Wide => "wide",
        Family::Direct => "direct",
        Family::Kpar => "kpar",
        Family::FusedKpar => "fused_kpar",
        Family::Rows => "rows",
        Family::Mma16 => "mma16",
        Family::Imma => "imma",
    };
    let kb = match c.kb {
        KbRule::Wide => "\"wide\"".to_string(),
        KbRule::Inherited => "\"inherited\"".to_string(),
        KbRule::Literal(k) => format!("{{\"literal\":{k}}}"),
        KbRule::Capped(k) => format!("{{\"capped\":{k}}}"),
        KbRule::Waves(w) => format!("{{\"waves\":{w}}}"),
    };
    let mut d = format!(
        "{{\"id\":\"{}\",\"backend\":\"{}\",\"surface\":\"{}\",\"family\":\"{family}\",\"tile\":{},\"cpt\":{},\"rows\":{},\"kb\":{kb}",
        c.id,
        c.backend.name(),
        c.surface.name(),
        c.tile,
        c.cpt,
        c.rows
    );
    if let Some(t) = c.prefill {
        d.push_str(&format!(
            ",\"prefill\":{{\"bm\":{},\"bn\":{},\"warps_m\":{},\"warps_n\":{},\"kstep\":{},\"kpart\":{}}}",
            t.bm, t.bn, t.warps_m, t.warps_n, t.kstep, t.kpart
        ));
    }
    d.push('}');
    d
}

/// sha256 of `[descriptor,descriptor,…]` over the candidates of `surfaces` in `generation`,
/// registry order.
fn digest_of(surfaces: &[Surface], generation: u32) -> String {
    let descriptors: Vec<String> =
        in_generation(generation).filter(|c| surfaces.contains(&c.surface)).map(descriptor).collect();
    sha256_hex(format!("[{}]", descriptors.join(",")).as_bytes())
}

/// The digest of the decode and grouped registry (candidates of both backends, in order,
/// with parameters): what decode/grouped corpora and their policies bind.
pub fn registry_digest() -> String {
    digest_of(&[Surface::Decode, Surface::Grouped], GENERATION)
}

/// The digest of the prefill candidates: what prefill certificates and benchmarks bind.
pub fn prefill_registry_digest() -> String {
    digest_of(&[Surface::Prefill], GENERATION)
}

/// The registry digest a collection over `m_values` binds: the decode and grouped registry,
/// plus the prefill candidates when some M reaches the prefill surface (M >= 32).
pub fn registry_digest_for(m_values: &[usize]) -> String {
    registry_digest_in(m_values, GENERATION)
}

/// [`registry_digest_for`] of an earlier (or the current) generation.
pub fn registry_digest_in(m_values: &[usize], generation: u32) -> String {
    if m_values.iter().any(|&m| m >= PREFILL_MIN_M) {
        digest_of(&[Surface::Decode, Surface::Grouped, Surface::Prefill], generation)
    } else {
        digest_of(&[Surface::Decode, Surface::Grouped], generation)
    }
}

/// The generation whose registry digest over `m_values` is `digest`, newest first; `None`
/// when no generation of this checkout matches (the corpus needs a new collection).
pub fn generation_of(digest: &str, m_values: &[usize]) -> Option<u32> {
    (1..=GENERATION).rev().find(|&g| registry_digest_in(m_values, g) == digest)
}

/// The registry digests a corpus over `m_values` may bind to be fitted by this checkout: one
/// per generation, current first. Collecting, merging and resuming accept only the first.
pub fn fittable_digests(m_values: &[usize]) -> Vec<String> {
    (1..=GENERATION).rev().map(|g| registry_digest_in(m_values, g)).collect()
}

/// Ids of the baselines the bench and sweep time beside the candidates (rows and samples
/// carry them in the candidate column): device copy bandwidth, cuBLAS fp16 GEMV and GEMM on
/// dequantized weights, cuBLASLt int8 GEMM without scales. Never dispatched.
pub const BASELINE_IDS: [&str; 4] = ["copy", "cublas.f16.gemv", "cublas.f16.gemm", "cublaslt.i8.gemm"];

/// The largest f32 partials workspace a prefill candidate may need; a `kpart` prefill launch
/// that would need more is illegal for the shape (an LM head at M = 4096 with 32 partitions
/// would need 128 GiB).
pub const MAX_WORKSPACE_BYTES: usize = 8 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_rows_ask_a_sixteenth_of_l2_within_the_partition() {
        let l2 = 60 << 20;
        // s4 4096 x 4096: 128 block rows of 4096 x 18 B; the wide tile is one partition.
        let wide = find("decode.wide.tn256.cpt2").unwrap().plan(4096, 4096, 132).unwrap();
        let bytes = 4096 * 128 * 18;
        assert_eq!(prefetch_rows(l2, bytes, 128, &wide), (l2 / 16) / (4096 * 18));
        // Split over partitions, and never past one.
        let fused = find("decode.fused.c16.kb8").unwrap().plan(4096, 4096, 132).unwrap();
        assert_eq!(fused.kb, 8);
        assert_eq!(prefetch_rows(l2, bytes, 128, &fused), ((l2 / 16) / (4096 * 18) / 8).min(fused.bpp));
        assert_eq!(prefetch_rows(l2, 1024 * 128 * 18, 128, &fused), fused.bpp, "a small matrix is asked whole");
        // A huge row still gets one.
        let vocab = find("decode.wide.tn256.cpt2").unwrap().plan(1 << 24, 4096, 132).unwrap();
        assert_eq!(prefetch_rows(l2, (1 << 24) * 128 * 18, 128, &vocab), 1);
    }

    #[test]
    fn ids_are_unique_and_stable() {
        // Across every generation: a new generation may not reuse a retired id.
        let c = all_candidates();
        let mut ids: Vec<&str> = c.iter().map(|c| c.id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), c.len());
        assert!(find("decode.wide.tn256.cpt2").is_some());
        assert!(find("decode.kpar.tn128.cpt1.kb8").is_some());
        assert!(find("decode.kpar.tn128.cpt1.waves4").is_some());
        assert!(find("decode.fused.c16.kb8").is_some());
    }

    #[test]
    fn plans_follow_the_formulas() {
        let wide = find("decode.wide.tn256.cpt2").unwrap().plan(151_936, 4096, 132).unwrap();
        assert_eq!((wide.bpp, wide.kb, wide.grid, wide.threads), (128, 1, (594, 1), 128));
        // waves: KB = clamp(ceil(2 * 132 / ceil(4096 / 128)), 1, 384) = ceil(264 / 32) = 9; bpp = ceil(384 / 9) = 43.
        let waves = find("decode.kpar.tn128.cpt1.waves2").unwrap().plan(4096, 12288, 132).unwrap();
        assert_eq!((waves.bpp, waves.kb, waves.workspace), (43, 9, 9 * 4096));
        // A literal KB larger than KBLK is illegal (small K), and fused threads stay <= 1024.
        assert!(find("decode.kpar.tn128.cpt1.kb32").unwrap().plan(4096, 512, 132).is_none());
        let fused = find("decode.fused.c32.waves2").unwrap().plan(4096, 12288, 132).unwrap();
        assert!(fused.threads <= MAX_THREADS && fused.kb <= 32);
        // A literal KB that does not divide KBLK may launch fewer partitions: KBLK 10, KB 6 -> bpp 2 -> 5.
        let odd = find("decode.fused.c16.kb8").unwrap().plan(64, 320, 132).unwrap();
        assert_eq!((odd.bpp, odd.kb), (2, 5));
    }

    #[test]
    fn every_generic_candidate_is_legal_for_every_shape() {
        for c in decode_candidates().iter().filter(|c| c.generic_legal()) {
            for (n, k) in [(1, 32), (7, 64), (4096, 32768), (262_144, 256), (2_147_483_647, 32)] {
                assert!(c.plan(n, k, 132).is_some(), "{} at {n} x {k}", c.id);
            }
        }
    }

    #[test]
    fn every_grouped_candidate_launches_at_every_shape_and_inherited_bpp() {
        for c in grouped_candidates() {
            for (n, k) in [(1, 32), (7, 64), (4096, 32768), (262_144, 256), (262_144, 32_768)] {
                for m in [2, 16, 31] {
                    for bpp in [1, 3, k / 32] {
                        assert!(
                            c.plan_batched(Codebook::S4, n, k, m, bpp).is_some(),
                            "{} at {m} x {n} x {k}, bpp {bpp}",
                            c.id
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn prefill_plans_inherit_bpp_and_fit_the_device() {
        let std = find("prefill.bk64.t5.std").unwrap();
        let kpart = find("prefill.bk64.t5.kpart").unwrap();
        // 24576 x 4096 at M = 512 with bpp 22 (KBLK 128 -> 6 partitions).
        let p = std.plan_prefill(Codebook::S4, 24_576, 4096, 512, 22).unwrap();
        assert_eq!((p.bpp, p.kb, p.grid, p.z, p.threads, p.workspace), (22, 6, (192, 4), 1, 512, 0));
        let q = kpart.plan_prefill(Codebook::S4, 24_576, 4096, 512, 22).unwrap();
        assert_eq!((q.z, q.workspace), (6, 6 * 512 * 24_576));
        // One partition: kpart needs no workspace; bpp above KBLK is clamped.
        assert_eq!(kpart.plan_prefill(Codebook::S4, 100, 320, 40, 1000).unwrap().workspace, 0);
        // kpart partials beyond MAX_WORKSPACE_BYTES are illegal; the std form still serves.
        assert!(kpart.plan_prefill(Codebook::S4, 248_320, 4096, 4096, 4).is_none());
        assert!(std.plan_prefill(Codebook::S4, 248_320, 4096, 4096, 4).is_some());
        // BK256 tiles are s4 only.
        let wide = find("prefill.bk256.wide.std").unwrap();
        assert!(wide.plan_prefill(Codebook::S4, 4096, 4096, 64, 128).is_some());
        assert!(wide.plan_prefill(Codebook::Nl4, 4096, 4096, 64, 128).is_none());
        assert!(!kernel_specs().iter().any(
            |s| matches!(s, KernelSpec::Prefill { codebook, tile } if tile.kstep == 8 && *codebook != Codebook::S4)
        ));
        // Every prefill kernel fits the 227 KiB of shared memory an sm_90 CTA may have.
        for spec in kernel_specs() {
            if let Some(t) = spec.prefill_tile() {
                assert!(spec.dynamic_shared() <= 232_448, "{}: {} B", spec.symbol(), spec.dynamic_shared());
                assert!((2..=8).contains(&t.stages(spec.codebook())));
            }
        }
    }

    #[test]
    fn the_auto_heuristic_takes_the_largest_tile_that_fills_the_device() {
        // 24576 x 512 rows: 128 x 128 gives 192 x 4 = 768 tiles >= 132.
        assert_eq!(prefill_auto(24_576, 512, 132).id, "prefill.bk64.t4.std");
        // 1024 x 32 rows: no tile reaches 132 CTAs: the smallest.
        assert_eq!(prefill_auto(1024, 32, 132).id, "prefill.bk64.t0.std");
    }

    #[test]
    fn digests_are_pinned() {
        // What the committed corpora, policies and certificates bind: decode + grouped (the
        // H200 session/grid corpora), prefill alone, and all three (the h200-prefill corpus).
        // A change here orphans them: it needs a new collection (or a new generation that
        // keeps the old one's candidates), never a new pin.
        assert_eq!(registry_digest_in(&[1], 1), "8741fc9c4344e1d4548d5f346693b94b086f61834c5422cbaaccd8c996c3f717");
        assert_eq!(prefill_registry_digest(), "c8ced69a27815182bbccd866f18584c44d59560659615a3a73e99ea80b89d49f");
        assert_eq!(
            registry_digest_in(&[1, 2, 32], 1),
            "69a5f1e4720096e612a2db65036e613b76ba5ed7553f5ec45c5761da98fe8571"
        );
        // Generation 2 (the corpora collected since 2026-12-01).
        assert_eq!(registry_digest_in(&[1], 2), "88506c8ea1b973c618e2da47a0db4a62fc7cd7116f657188702ad2816fab9358");
        assert_eq!(
            registry_digest_in(&[1, 2, 32], 2),
            "7f2a2d1beb00c4d7133b7e4cc64750023cb2632be7cd6c5cc527caf14b538e08"
        );
        // Generation 3 (grouped IMMA tiles).
        assert_eq!(registry_digest(), "ce05dae66ed4a620d3a6675949a475a18172f71613fe579b22025cd4bb6255f9");
        assert_eq!(
            registry_digest_for(&[1, 2, 32]),
            "ba727d80f34046c51404afd42ea6f5b709ce629f02223516d950ae448565cc21"
        );
        assert_eq!(registry_digest_for(&[1, 16, 31]), registry_digest());
        assert_eq!(generation_of(&registry_digest_in(&[1], 1), &[1, 16]), Some(1));
        assert_eq!(generation_of(&registry_digest(), &[1]), Some(GENERATION));
        assert_eq!(generation_of(&registry_digest(), &[1, 64]), None, "a prefill corpus binds the prefill candidates");
        assert_eq!(fittable_digests(&[1])[0], registry_digest());
    }

    #[test]
    fn generations_keep_their_candidates_and_order() {
        let g1 = candidates_in(Backend::Cuda, Surface::Decode, 1);
        let g2 = decode_candidates();
        assert_eq!((g1.len(), g2.len()), (72, 64));
        // Every literal KB is retired and has a capped twin with the same launch where it is legal.
        assert!(!g2.iter().any(|c| matches!(c.kb, KbRule::Literal(_))));
        for lit in g1.iter().filter(|c| matches!(c.kb, KbRule::Literal(_))) {
            let KbRule::Literal(kb) = lit.kb else { unreachable!() };
            let twin = g2
                .iter()
                .find(|c| c.family == lit.family && c.tile == lit.tile && c.kb == KbRule::Capped(kb))
                .unwrap_or_else(|| panic!("{} has no capped twin", lit.id));
            for (n, k) in [(4096, 4096), (24_576, 1024), (300, 32 * kb as usize), (151_936, 8192)] {
                assert_eq!(lit.plan(n, k, 132), twin.plan(n, k, 132), "{} at {n} x {k}", lit.id);
            }
            assert!(find(&lit.id).is_some() && !is_current(&lit.id));
        }
        // Generation 1's candidates that generation 2 keeps appear in the same relative order.
        let kept: Vec<&str> = g1.iter().filter(|c| is_current(&c.id)).map(|c| c.id.as_str()).collect();
        let order: Vec<&str> = g2.iter().map(|c| c.id.as_str()).filter(|id| kept.contains(id)).collect();
        assert_eq!(kept, order);
        // The thread-target rule: c16.waves64 at N = 8192 launches ceil(64 * 132 / 512) = 17 partitions.
        let t = find("decode.fused.c16.waves64").unwrap().plan(8192, 8192, 132).unwrap();
        assert_eq!((t.kb, t.threads), (16, 256));
    }

    #[test]
    fn the_descriptor_does_not_follow_the_rust_type() {
        // The descriptor is written by hand: it equals today's serde form of a candidate, but
        // a renamed field or a new one would change serde's, not the descriptor.
        let c = find("decode.kpar.tn128.cpt1.waves2").unwrap();
        assert_eq!(
            descriptor(c),
            r#"{"id":"decode.kpar.tn128.cpt1.waves2","backend":"cuda","surface":"decode","family":"kpar","tile":128,"cpt":1,"rows":1,"kb":{"waves":2}}"#
        );
        let p = find("prefill.bk256.narrow.kpart").unwrap();
        assert!(descriptor(p).ends_with(
            r#""kb":"inherited","prefill":{"bm":128,"bn":64,"warps_m":4,"warps_n":2,"kstep":8,"kpart":true}}"#
        ));
    }

    #[test]
    fn the_index_finds_every_candidate() {
        for c in all_candidates() {
            assert_eq!(find(&c.id).map(|f| &f.id), Some(&c.id));
        }
        assert!(find("decode.nosuch").is_none());
        assert!(std::ptr::eq(find("grouped.mma16").unwrap(), find("grouped.mma16").unwrap()));
    }

    #[test]
    fn digest_is_a_sha256() {
        assert_eq!(registry_digest().len(), 64);
        assert_eq!(registry_digest(), registry_digest());
    }
}
