//! One decode (M = 1) cell on the GPU: fixtures, GPU activation quantization checked
//! against the CPU, every applicable candidate checked byte for byte against the CPU
//! reference for its bpp, then the eligible ones timed under the protocol.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use vnni_corpus::schema::hex_f64;
use vnni_corpus::{SampleRow, TimingRow};
use vnni_kernels::cuda::device::{DeviceMatrix, Gpu};
use vnni_kernels::fixture::{self, derive_seed, splitmix64};
use vnni_kernels::reference::gemm_columns;
use vnni_kernels::registry::{Candidate, Plan};
use vnni_kernels::{quantize_activations, Codebook};

use crate::stats::summarize;
use crate::timing::{time_candidates, Mode, Protocol};

/// Columns compared with the CPU reference: all of them up to this N, else a seeded sample this large.
pub const FULL_CHECK_MAX_N: usize = 8192;
pub const SAMPLED_COLUMNS: usize = 4096;

pub struct CellResult {
    pub rows: Vec<TimingRow>,
    pub samples: Vec<SampleRow>,
}

/// Distinct sorted columns to check.
pub fn check_columns(n: usize, seed: u64) -> Vec<usize> {
    if n <= FULL_CHECK_MAX_N {
        return (0..n).collect();
    }
    let mut cols: Vec<usize> =
        (0..SAMPLED_COLUMNS as u64 * 2).map(|i| (splitmix64(seed, i) % n as u64) as usize).collect();
    cols.push(0);
    cols.push(n - 1);
    cols.sort_unstable();
    cols.dedup();
    cols.truncate(SAMPLED_COLUMNS.max(2));
    cols
}

/// Weight copies so that the bytes touched between two uses of one copy exceed 3 x L2.
pub fn copies_for(bytes: usize, l2: usize) -> usize {
    if bytes >= 3 * l2 {
        1
    } else {
        (3 * l2).div_ceil(bytes) + 1
    }
}

pub struct CellInputs<'a> {
    pub codebook: Codebook,
    pub n: usize,
    pub k: usize,
    pub seed: u64,
    pub candidates: &'a [Candidate],
    pub modes: &'a [Mode],
    pub protocol: &'a Protocol,
    /// Kernels rejected by preflight (symbol -> why): never timed.
    pub rejected: &'a BTreeMap<String, String>,
    pub copy_gbps: f64,
}

pub fn run_decode_cell(gpu: &Gpu, c: &CellInputs) -> Result<CellResult> {
    let (cb, n, k) = (c.codebook, c.n, c.k);
    let w = fixture::packed_matrix(cb, n, k, c.seed).with_context(|| format!("fixture {cb} {n}x{k}"))?;
    let x = fixture::activations(1, k, c.seed);
    let a_cpu = quantize_activations(&x, 1, k)?;

    let first = gpu.upload_matrix(&w)?;
    let copies = copies_for(first.bytes(), gpu.info.l2_bytes);
    let mut mats: Vec<DeviceMatrix> = vec![first];
    for _ in 1..copies {
        mats.push(gpu.duplicate_matrix(&mats[0])?);
    }
    let mut act = gpu.upload_activations(&x, 1, k)?;
    gpu.quantize(&mut act)?;
    gpu.synchronize()?;
    if gpu.download_activations(&act)? != a_cpu {
        bail!("GPU activation quantization differs from the CPU contract ({cb} K={k}): a structural failure");
    }

    let cols = check_columns(n, derive_seed(c.seed, "columns"));
    let mut reference: BTreeMap<usize, Vec<f32>> = BTreeMap::new();
    let mut y = gpu.stream.alloc_zeros::<f32>(n).context("allocating outputs")?;
    struct Run<'c> {
        cand: &'c Candidate,
        plan: Plan,
        mismatches: usize,
        first: String,
        registers: u32,
        occupancy: u32,
    }
    let mut runs: Vec<Run> = Vec::new();
    let max_ws =
        c.candidates.iter().filter_map(|cand| cand.plan(n, k, gpu.info.sms)).map(|p| p.workspace).max().unwrap_or(0);
    let mut ws = gpu.stream.alloc_zeros::<f32>(max_ws.max(1)).context("allocating the workspace")?;
    for cand in c.candidates {
        let Some(plan) = cand.plan(n, k, gpu.info.sms) else { continue };
        let spec = cand.kernel(cb);
        if c.rejected.contains_key(&spec.symbol()) {
            continue;
        }
        let res = gpu.resources(&spec, plan.threads, plan.shared as usize)?;
        if res.local_bytes > 0 || res.occupancy_blocks_per_sm == 0 {
            continue;
        }
        gpu.poison(&mut y)?;
        gpu.poison(&mut ws)?;
        gpu.launch_decode(cand, &plan, &mats[0], &act, 0, &mut y, &mut ws)?;
        gpu.synchronize()?;
        let got = gpu.download(&y)?;
        let want = match reference.get(&plan.bpp) {
            Some(r) => r,
            None => {
                let r = gemm_columns(&w, &a_cpu, plan.bpp, &cols)?;
                reference.entry(plan.bpp).or_insert(r)
            }
        };
        let mut mismatches = 0;
        let mut first = String::new();
        for (i, &col) in cols.iter().enumerate() {
            if got[col].to_bits() != want[i].to_bits() {
                if mismatches == 0 {
                    first = format!("col {col}: got {:#010x} want {:#010x}", got[col].to_bits(), want[i].to_bits());
                }
                mismatches += 1;
            }
        }
        runs.push(Run {
            cand,
            plan,
            mismatches,
            first,
            registers: res.registers as u32,
            occupancy: res.occupancy_blocks_per_sm,
        });
    }

    let mut rows = Vec::new();
    let mut samples = Vec::new();
    let eligible: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].mismatches == 0).collect();
    for &mode in c.modes {
        let protocol = Protocol { seed: derive_seed(c.seed, &format!("{cb} {n} {k}")), ..c.protocol.clone() };
        let timed = if eligible.is_empty() {
            Vec::new()
        } else {
            let mut launch = |i: usize, copy: usize| {
                let r = &runs[eligible[i]];
                gpu.launch_decode(r.cand, &r.plan, &mats[copy], &act, 0, &mut y, &mut ws)
            };
            time_candidates(gpu, mode, &protocol, eligible.len(), copies, &mut launch)?
        };
        for (ri, run) in runs.iter().enumerate() {
            let t = eligible.iter().position(|&e| e == ri).map(|p| &timed[p]);
            let measured = t.map(|t| t.measured()).unwrap_or_default();
            let s = summarize(&measured);
            let median = s.map_or(f64::NAN, |s| s.median);
            let bytes = mats[0].bytes();
            let gbps = bytes as f64 / (median * 1e-6) / 1e9;
            rows.push(TimingRow {
                backend: "cuda".into(),
                arch: gpu.info.arch.clone(),
                device: gpu.info.name.clone(),
                mode: mode.name().into(),
                codebook: cb.name().into(),
                m: 1,
                n,
                k,
                candidate: run.cand.id.clone(),
                bpp: run.plan.bpp,
                warmups: protocol.warmups,
                samples: measured.len(),
                replays: t.map_or(0, |t| t.replays),
                weight_copies: copies,
                seed: protocol.seed,
                min_us: s.map_or(f64::NAN, |s| s.min),
                median_us: median,
                p95_us: s.map_or(f64::NAN, |s| s.p95),
                mad_us: s.map_or(f64::NAN, |s| s.mad),
                cv: s.map_or(f64::NAN, |s| s.cv),
                weight_bytes: bytes,
                gbps,
                pct_copy_bw: 100.0 * gbps / c.copy_gbps,
                checked: cols.len(),
                mismatches: run.mismatches,
                first_mismatch: run.first.clone(),
                eligible: run.mismatches == 0,
                dropped: t.is_some_and(|t| t.dropped),
                registers: run.registers,
                occupancy_blocks_per_sm: run.occupancy,
            });
            if let Some(t) = t {
                samples.extend(t.samples.iter().map(|s| SampleRow {
                    mode: mode.name().into(),
                    codebook: cb.name().into(),
                    m: 1,
                    n,
                    k,
                    candidate: run.cand.id.clone(),
                    round: s.round,
                    order: s.order,
                    warmup: s.warmup,
                    latency_us_hex: hex_f64(s.latency_us),
                }));
            }
        }
    }
    Ok(CellResult { rows, samples })
}
