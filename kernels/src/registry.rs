//! The candidate registry: the one owner of candidate identity. A candidate is a named
//! kernel configuration; its id is stable text, its arithmetic identity is the bpp it
//! derives for a shape, and the registry digest binds every corpus to this exact list.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::Codebook;

/// Where a candidate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// CUDA kernels compiled by NVRTC (`kernels/cuda/`).
    Cuda,
    /// rayon kernels on the host (`cpu.rs`), the same contract.
    Cpu,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cuda => "cuda",
            Backend::Cpu => "cpu",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Surface {
    /// M = 1.
    Decode,
    /// M = 2..16 and 31 (speculative-decoding verifier rows); bpp inherited from M = 1.
    Grouped,
}

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
    pub id: String,
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
}

/// The most threads one CTA may have.
pub const MAX_THREADS: u32 = 1024;

/// The compiled kernel a candidate launches for one codebook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KernelSpec {
    Tile { codebook: Codebook, tile: u32, cpt: u32 },
    Fused { codebook: Codebook, columns: u32 },
    GroupedRows { codebook: Codebook, rows: u32 },
    GroupedMma16 { codebook: Codebook },
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
        }
    }

    pub fn codebook(&self) -> Codebook {
        match *self {
            KernelSpec::Tile { codebook, .. }
            | KernelSpec::Fused { codebook, .. }
            | KernelSpec::GroupedRows { codebook, .. }
            | KernelSpec::GroupedMma16 { codebook } => codebook,
        }
    }

    /// Threads per CTA the kernel is compiled for (its launch bound).
    pub fn max_threads(&self) -> u32 {
        match *self {
            KernelSpec::Tile { tile, cpt, .. } => tile / cpt,
            KernelSpec::Fused { .. } => MAX_THREADS,
            KernelSpec::GroupedRows { .. } | KernelSpec::GroupedMma16 { .. } => GROUPED_THREADS,
        }
    }
}

/// A candidate's launch geometry for one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
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

impl Candidate {
    /// Generic (fallback) leaves may use only candidates legal for every shape.
    pub fn generic_legal(&self) -> bool {
        !matches!(self.kb, KbRule::Literal(_))
    }

    /// Launch geometry of a grouped candidate for M rows at the inherited `bpp`.
    pub fn plan_grouped(&self, n: usize, k: usize, m: usize, bpp: usize) -> Option<Plan> {
        if self.surface != Surface::Grouped || n == 0 || k == 0 || k % 32 != 0 || m == 0 || bpp == 0 {
            return None;
        }
        let kblk = k / 32;
        let bpp = bpp.min(kblk);
        let kb = kblk.div_ceil(bpp);
        let tiles = n.div_ceil(self.tile as usize);
        let slices = m.div_ceil(self.rows as usize);
        if tiles > u32::MAX as usize || slices > 65_535 || kb > 65_535 {
            return None;
        }
        Some(Plan {
            bpp,
            kb,
            grid: (tiles as u32, kb as u32),
            z: slices as u32,
            threads: GROUPED_THREADS,
            shared: 0,
            workspace: if kb > 1 { kb * m * n } else { 0 },
        })
    }

    /// Every codebook is supported by every decode candidate.
    pub fn supports(&self, _codebook: Codebook) -> bool {
        true
    }

    /// The CUDA kernel this candidate launches for `codebook` (CPU candidates have none).
    pub fn kernel(&self, codebook: Codebook) -> KernelSpec {
        debug_assert_eq!(self.backend, Backend::Cuda, "{} is not a CUDA candidate", self.id);
        match self.family {
            Family::FusedKpar => KernelSpec::Fused { codebook, columns: self.tile },
            Family::Rows => KernelSpec::GroupedRows { codebook, rows: self.rows },
            Family::Mma16 => KernelSpec::GroupedMma16 { codebook },
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
    pub fn plan(&self, n: usize, k: usize, sms: u32) -> Option<Plan> {
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
        Some(Plan { bpp, kb, grid, z: 1, threads, shared, workspace })
    }
}

fn candidate(family: Family, tile: u32, cpt: u32, kb: KbRule) -> Candidate {
    let base = match family {
        Family::Wide => format!("decode.wide.tn{tile}.cpt{cpt}"),
        Family::Direct => format!("decode.direct.tn{tile}.cpt{cpt}"),
        Family::Kpar => format!("decode.kpar.tn{tile}.cpt{cpt}"),
        Family::FusedKpar => format!("decode.fused.c{tile}"),
        Family::Rows | Family::Mma16 => unreachable!("grouped candidates are built by grouped_candidates"),
    };
    let id = match kb {
        KbRule::Wide => base,
        KbRule::Literal(k) => format!("{base}.kb{k}"),
        KbRule::Capped(k) => format!("{base}.cap{k}"),
        KbRule::Waves(w) => format!("{base}.waves{w}"),
        KbRule::Inherited => base,
    };
    Candidate { id, backend: Backend::Cuda, surface: Surface::Decode, family, tile, cpt, rows: 1, kb }
}

/// Every grouped (M = 2..16, 31) candidate, in registry order.
pub fn grouped_candidates() -> Vec<Candidate> {
    let mut out: Vec<Candidate> = [2, 4, 8, 16]
        .into_iter()
        .map(|r| Candidate {
            id: format!("grouped.rows.r{r}"),
            backend: Backend::Cuda,
            surface: Surface::Grouped,
            family: Family::Rows,
            tile: GROUPED_THREADS,
            cpt: 1,
            rows: r,
            kb: KbRule::Inherited,
        })
        .collect();
    out.push(Candidate {
        id: "grouped.mma16".into(),
        backend: Backend::Cuda,
        surface: Surface::Grouped,
        family: Family::Mma16,
        tile: GROUPED_THREADS / 32 * 16,
        cpt: 1,
        rows: 16,
        kb: KbRule::Inherited,
    });
    out
}

/// The M values the grouped surface serves.
pub const GROUPED_M: [usize; 16] = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 31];

/// Every decode (M = 1) candidate, in registry order (the deterministic tie-break order).
pub fn decode_candidates() -> Vec<Candidate> {
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
pub fn cpu_decode_candidates() -> Vec<Candidate> {
    let cpu = |family: Family, tile: u32, kb: KbRule| {
        let base = match family {
            Family::Wide => format!("cpu.decode.wide.t{tile}"),
            _ => format!("cpu.decode.kpar.t{tile}"),
        };
        let id = match kb {
            KbRule::Literal(k) => format!("{base}.kb{k}"),
            KbRule::Capped(k) => format!("{base}.cap{k}"),
            KbRule::Waves(w) => format!("{base}.waves{w}"),
            _ => base,
        };
        Candidate { id, backend: Backend::Cpu, surface: Surface::Decode, family, tile, cpt: 1, rows: 1, kb }
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
pub fn cpu_grouped_candidates() -> Vec<Candidate> {
    [16, 64]
        .into_iter()
        .map(|tile| Candidate {
            id: format!("cpu.grouped.rows.t{tile}"),
            backend: Backend::Cpu,
            surface: Surface::Grouped,
            family: Family::Rows,
            tile,
            cpt: 1,
            rows: u32::MAX,
            kb: KbRule::Inherited,
        })
        .collect()
}

/// The candidates of one backend and surface, in registry order.
pub fn candidates(backend: Backend, surface: Surface) -> Vec<Candidate> {
    match (backend, surface) {
        (Backend::Cuda, Surface::Decode) => decode_candidates(),
        (Backend::Cuda, Surface::Grouped) => grouped_candidates(),
        (Backend::Cpu, Surface::Decode) => cpu_decode_candidates(),
        (Backend::Cpu, Surface::Grouped) => cpu_grouped_candidates(),
    }
}

/// All candidates of every backend and surface.
pub fn all_candidates() -> Vec<Candidate> {
    let mut all = decode_candidates();
    all.extend(grouped_candidates());
    all.extend(cpu_decode_candidates());
    all.extend(cpu_grouped_candidates());
    all
}

pub fn find(id: &str) -> Option<Candidate> {
    all_candidates().into_iter().find(|c| c.id == id)
}

/// Every distinct kernel specialization the registry needs, sorted.
pub fn kernel_specs() -> Vec<KernelSpec> {
    let mut specs: Vec<KernelSpec> = all_candidates()
        .iter()
        .filter(|c| c.backend == Backend::Cuda)
        .flat_map(|c| Codebook::ALL.map(|cb| c.kernel(cb)))
        .collect();
    specs.sort();
    specs.dedup();
    specs
}

/// sha256 of the canonical JSON of the registry (candidates, in order, with parameters).
pub fn registry_digest() -> String {
    let json = serde_json::to_vec(&all_candidates()).expect("candidates serialize");
    hex(&Sha256::digest(json))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_stable() {
        let c = decode_candidates();
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
    fn digest_is_a_sha256() {
        assert_eq!(registry_digest().len(), 64);
        assert_eq!(registry_digest(), registry_digest());
    }
}
