//! Row schemas. Field order is column order; every file starts with a header row.

use serde::{Deserialize, Serialize};
use vnni_kernels::{Backend, CandidateId, Codebook, Mode, SourceFormat};

/// One kernel specialization's resources (`resources.csv`). Static fields come from the
/// ptxas log (NVRTC, no GPU needed); device fields from cuFuncGetAttribute and the
/// occupancy calculator, empty when no GPU was used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceRow {
    pub arch: String,
    pub kernel: String,
    pub codebook: Codebook,
    /// Threads per CTA the kernel is compiled for (launch bound).
    pub threads: u32,
    pub registers: u32,
    pub stack_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    pub shared_static_bytes: u32,
    pub device_local_bytes: Option<i32>,
    pub device_max_threads: Option<i32>,
    pub device_occupancy_blocks_per_sm: Option<u32>,
    /// `ok`, or `rejected: <why>`; rejected kernels are never timed.
    pub verdict: String,
    /// The candidates that launch this kernel, `;`-separated.
    pub candidates: String,
}

/// The aggregate of one candidate in one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimingRow {
    pub backend: Backend,
    pub arch: String,
    pub device: String,
    pub mode: Mode,
    /// The GGUF source format whose packed weights were measured (aliases share a codebook);
    /// `-` for a baseline (copy, cuBLAS), which has none.
    #[serde(with = "dash")]
    pub source_format: Option<SourceFormat>,
    #[serde(with = "dash")]
    pub codebook: Option<Codebook>,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// A registry candidate id, or a baseline (`copy`, `cublas.f16.gemv`).
    pub candidate: CandidateId,
    /// Grouped and prefill rows: the M = 1 candidate whose bpp they inherit (empty for decode).
    pub m1_candidate: Option<CandidateId>,
    pub bpp: usize,
    pub warmups: usize,
    pub samples: usize,
    /// Launches per sample (back-to-back, rotating weight copies).
    pub replays: usize,
    pub weight_copies: usize,
    pub seed: u64,
    pub min_us: f64,
    pub median_us: f64,
    pub p95_us: f64,
    pub mad_us: f64,
    pub cv: f64,
    pub weight_bytes: usize,
    pub gbps: f64,
    pub pct_copy_bw: f64,
    /// Outputs compared with the CPU reference, and how many differed in any bit.
    pub checked: usize,
    pub mismatches: usize,
    pub first_mismatch: String,
    pub eligible: bool,
    pub dropped: bool,
    pub registers: u32,
    pub occupancy_blocks_per_sm: u32,
}

/// The file of a pruned corpus's [`PruningRow`]s.
pub const PRUNING_FILE: &str = "pruning.csv";

/// One (cell, mode) of a pruned corpus (`pruning.csv`, a sealed payload beside the rows; a sweep
/// with `--prune-with` writes it): what was skipped and, for an audited cell, what it would have
/// cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PruningRow {
    pub cell: String,
    pub mode: Mode,
    pub audited: bool,
    /// Decode candidates with a row (timed) and those pruned (skipped, or for an audited cell
    /// timed although they would have been skipped).
    pub timed: usize,
    pub pruned: usize,
    /// Audited cells: the fastest eligible decode median over every candidate, and over the
    /// candidates pruning would have kept; `loss` = kept / all - 1.
    pub best_us: Option<f64>,
    pub best_kept_us: Option<f64>,
    pub loss: Option<f64>,
}

/// One raw timing sample (the sidecar). The latency is per launch, as a hex float so the
/// exact f64 survives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleRow {
    pub mode: Mode,
    /// `-` for a baseline's samples.
    #[serde(with = "dash")]
    pub source_format: Option<SourceFormat>,
    #[serde(with = "dash")]
    pub codebook: Option<Codebook>,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub candidate: CandidateId,
    /// The protocol pass (0 in corpora collected before passes existed, which had one).
    #[serde(default)]
    pub pass: usize,
    /// Round within the pass.
    pub round: usize,
    /// Position of the candidate in this round's shuffled order.
    pub order: usize,
    pub warmup: bool,
    pub latency_us_hex: String,
}

/// One batch-invariance certificate (`certificates.jsonl`, one JSON object per line): the
/// grouped candidate on M rows against M separate M = 1 launches of the inherited candidate,
/// compared as raw f32 bit patterns, plus the grouped candidate against itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Certificate {
    pub backend: Backend,
    pub arch: String,
    pub codebook: Codebook,
    pub source_format: SourceFormat,
    pub n: usize,
    pub k: usize,
    pub m: usize,
    pub bpp: usize,
    pub m1_candidate: CandidateId,
    pub candidate: CandidateId,
    /// Outputs (M x N) compared.
    pub outputs: usize,
    pub mismatches: usize,
    pub repeat_mismatches: usize,
    /// `row r col c: grouped 0x... serial 0x...`, or null.
    pub first_mismatch: Option<String>,
    /// sha256 of the grouped output's f32 bits (little-endian, row-major).
    pub grouped_digest: String,
    pub serial_digest: String,
}

/// A word that may be absent, written `-` when it is (baseline rows have no source format or
/// codebook).
mod dash {
    use std::fmt::Display;
    use std::str::FromStr;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<T: Display, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.collect_str(v),
            None => s.serialize_str("-"),
        }
    }

    pub fn deserialize<'de, T, D>(d: D) -> Result<Option<T>, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: Deserializer<'de>,
    {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        if s == "-" {
            Ok(None)
        } else {
            s.parse().map(Some).map_err(serde::de::Error::custom)
        }
    }
}

/// `f64` as C99 hex-float text (`0x1.8p+1`), exact and locale-free.
pub fn hex_f64(v: f64) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() { "-0x0p+0".into() } else { "0x0p+0".into() };
    }
    let bits = v.to_bits();
    let sign = if bits >> 63 == 1 { "-" } else { "" };
    let exp = ((bits >> 52) & 0x7FF) as i64;
    let mant = bits & ((1u64 << 52) - 1);
    let (lead, e) = if exp == 0 { (0, -1022) } else { (1, exp - 1023) };
    let digits = format!("{mant:013x}");
    let digits = digits.trim_end_matches('0');
    if digits.is_empty() {
        format!("{sign}0x{lead}p{e:+}")
    } else {
        format!("{sign}0x{lead}.{digits}p{e:+}")
    }
}

/// Inverse of [`hex_f64`].
pub fn parse_hex_f64(s: &str) -> Option<f64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let body = body.strip_prefix("0x")?;
    let (mantissa, exp) = body.split_once('p')?;
    let exp: i32 = exp.parse().ok()?;
    let (lead, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let lead: u64 = u64::from_str_radix(lead, 16).ok()?;
    let frac_val = if frac.is_empty() { 0 } else { u64::from_str_radix(frac, 16).ok()? };
    let v = (lead as f64 + frac_val as f64 / 16f64.powi(frac.len() as i32)) * 2f64.powi(exp);
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_floats_round_trip_exactly() {
        for v in [1.0, 3.0, 0.1, 123.456, 1e-300, 5e-324, -2.5, 0.0, 97.123456789] {
            let h = hex_f64(v);
            assert_eq!(parse_hex_f64(&h).unwrap().to_bits(), v.to_bits(), "{v} -> {h}");
        }
        assert_eq!(hex_f64(3.0), "0x1.8p+1");
    }
}

/// One development cell whose held-out pick failed cross-validation (`remeasure.csv`, written
/// by `fit --report`): the pick and the cell's measured fastest candidate, to be timed again
/// as a pair (issue 16, item 4) before cross-validation repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairRequest {
    pub source_format: SourceFormat,
    pub codebook: Codebook,
    pub mode: Mode,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// What the domain's policy picked with the cell's geometry held out; for a `stalled`
    /// pair, the candidate whose recorded evidence its own launches contradict.
    pub pick: CandidateId,
    /// The cell's fastest measured candidate.
    pub best: CandidateId,
    /// The pick's measured regret (fraction) and its upper confidence bound.
    pub regret: f64,
    pub ucb: f64,
    /// `regret`: the pick's regret reaches the gate's p95 threshold; `bound`: only its upper
    /// confidence bound does (more samples could settle it); `stalled`: the pick's own
    /// record is suspect ([`PAIR_LIMITS`]).
    pub limit: String,
}

/// One candidate of one development cell scored with its model family left out of the fit
/// (`family-cv.csv.zst`, written by `fit --report`): what each cost model predicted there
/// and what the candidate measured, so a selection rule can be replayed on the held-out
/// predictions without fitting again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyCvRow {
    pub family: String,
    pub source_format: SourceFormat,
    pub codebook: Codebook,
    pub mode: Mode,
    pub n: usize,
    pub k: usize,
    pub candidate: CandidateId,
    /// The quantized cost model's latency (us) fitted without the family; empty where no
    /// model of the candidate answers.
    pub predicted_us: Option<f64>,
    /// Measured regret against the cell's fastest candidate (fraction; the cap where the
    /// candidate was not measured or failed its check).
    pub regret: f64,
    /// `regret` as scored: 0 inside the cell's noise band.
    pub scored: f64,
    /// What ships picked here (the models' argmin, else the tree's leaf).
    pub shipped: bool,
    /// The fallback tree's leaf.
    pub tree: bool,
}

/// The words of [`PairRequest::limit`]: why a cell is timed again.
pub const PAIR_LIMITS: [&str; 3] = ["regret", "bound", "stalled"];

/// Every candidate's rows of a dense-M bench ([`TimingRow`]s), beside its `dense-m.csv`: what
/// M buckets are learned from.
pub const DENSE_ROWS_FILE: &str = "dense-rows.csv.zst";

/// One M of a dense-M bench (`dense-m.csv`, `bench --dense-m`): at a (mode, source format,
/// N, K) and M rows, the fastest candidate measured at the inherited bpp beside the one a
/// policy dispatches. At M = 1 the decode candidates race with their own bpp.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DenseMRow {
    pub mode: Mode,
    pub source_format: SourceFormat,
    pub codebook: Codebook,
    pub n: usize,
    pub k: usize,
    pub m: usize,
    /// The M = 1 identity whose bpp every M >= 2 row inherits: the policy's M = 1 pick, or
    /// the fastest decode candidate without a policy.
    pub m1_candidate: CandidateId,
    pub bpp: usize,
    /// Candidates timed at this M (eligible, bit-exact).
    pub timed: usize,
    /// The fastest of them (not dropped by racing) and its median.
    pub best: CandidateId,
    pub best_us: f64,
    /// The policy's pick at this M; empty without a policy.
    pub dispatched: Option<CandidateId>,
    /// Its median (a partial one when racing dropped it); empty when it was not timed.
    pub dispatched_us: Option<f64>,
    /// Why the dispatched candidate has no time, or that racing dropped it; else empty.
    pub note: String,
}
