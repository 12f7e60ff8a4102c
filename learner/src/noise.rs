//! The noise band of a corpus from its alias replicates: source formats that share a codebook
//! run the same kernels on the same packed layout (Q4_1 and Q4_K are both `u4`), so two alias
//! cells of one (mode, M, N, K) time every candidate twice on different bytes. The relative
//! difference of one candidate's two medians is run-to-run noise (plus any real difference
//! between the byte patterns); its p95 per group is the band inside which two candidates are
//! not told apart.

use std::collections::BTreeMap;

use vnni_corpus::TimingRow;
use vnni_kernels::{CandidateId, Codebook, Mode};

use crate::regret_stats::{nearest_rank, p95};

/// The key under which alias cells time the same kernel: (codebook, mode, M, N, K, candidate).
type ReplicateKey = (Codebook, Mode, usize, usize, usize, CandidateId);

/// Per (codebook, `decode` or `grouped`): |median_a / median_b - 1| of every candidate timed
/// eligible in two alias cells of the same (mode, M, N, K).
pub fn alias_differences(rows: &[TimingRow]) -> BTreeMap<(String, &'static str), Vec<f64>> {
    let mut by_key: BTreeMap<ReplicateKey, Vec<f64>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.eligible && r.median_us.is_finite() && r.median_us > 0.0) {
        let (Some(cb), Some(_)) = (r.codebook, r.source_format) else { continue };
        let key = (cb, r.mode, r.m, r.n, r.k, r.candidate.clone());
        by_key.entry(key).or_default().push(r.median_us);
    }
    let mut out: BTreeMap<(String, &'static str), Vec<f64>> = BTreeMap::new();
    for ((cb, _, m, ..), medians) in by_key {
        let cb = cb.to_string();
        let surface = if m == 1 { "decode" } else { "grouped" };
        for (i, a) in medians.iter().enumerate() {
            for b in &medians[i + 1..] {
                out.entry((cb.clone(), surface)).or_default().push((a / b - 1.0).abs());
            }
        }
    }
    out
}

/// The Markdown section: per group, pairs / median / p95 (the band).
pub fn section(rows: &[TimingRow]) -> String {
    let diffs = alias_differences(rows);
    let mut md = String::from(
        "## Noise band (alias replicates)\n\nThe same candidate timed in two alias cells (source formats sharing a \
         codebook and its kernels) at one (mode, M, N, K): |median ratio - 1|. Its p95 is the band inside which \
         two candidates are not told apart.\n\n",
    );
    if diffs.is_empty() {
        md.push_str("No codebook has two source formats in this corpus: no replicates.\n\n");
        return md;
    }
    md.push_str("| codebook | surface | pairs | median | p95 (band) |\n|---|---|---|---|---|\n");
    for ((cb, surface), v) in &diffs {
        let median = nearest_rank(v, 0.5).unwrap_or(0.0);
        md.push_str(&format!("| {cb} | {surface} | {} | {:.2}% | {:.2}% |\n", v.len(), median * 100.0, p95(v) * 100.0));
    }
    md.push('\n');
    md
}

#[cfg(test)]
mod tests {
    use vnni_kernels::{Backend, SourceFormat};

    use super::*;

    fn row(format: SourceFormat, candidate: &str, m: usize, median: f64) -> TimingRow {
        TimingRow {
            backend: Backend::Cuda,
            arch: "sm_90".into(),
            device: "test".into(),
            mode: Mode::Graph,
            source_format: Some(format),
            codebook: Some(format.codebook()),
            m,
            n: 4096,
            k: 4096,
            candidate: candidate.parse().unwrap(),
            m1_candidate: None,
            bpp: 1,
            warmups: 1,
            samples: 3,
            replays: 1,
            weight_copies: 1,
            seed: 0,
            min_us: median,
            median_us: median,
            p95_us: median,
            mad_us: 0.0,
            cv: 0.0,
            weight_bytes: 1,
            gbps: 1.0,
            pct_copy_bw: 1.0,
            checked: 1,
            mismatches: 0,
            first_mismatch: String::new(),
            eligible: true,
            dropped: false,
            registers: 0,
            occupancy_blocks_per_sm: 0,
        }
    }

    #[test]
    fn alias_pairs_give_the_band_and_single_formats_none() {
        let rows = vec![
            row(SourceFormat::Q4_1, "decode.wide.tn256.cpt2", 1, 10.0),
            row(SourceFormat::Q4_K, "decode.wide.tn256.cpt2", 1, 10.5),
            row(SourceFormat::Q4_1, "decode.wide.tn128.cpt1", 1, 20.0),
            row(SourceFormat::Q4_K, "decode.wide.tn128.cpt1", 1, 19.0),
            // No alias partner: no pair.
            row(SourceFormat::Q8_0, "decode.wide.tn256.cpt2", 1, 7.0),
        ];
        let d = alias_differences(&rows);
        let u4 = &d[&(Codebook::U4.to_string(), "decode")];
        assert_eq!(u4.len(), 2);
        assert!((u4[0] - (20.0 / 19.0 - 1.0)).abs() < 1e-12 || (u4[1] - (20.0 / 19.0 - 1.0)).abs() < 1e-12);
        assert!(!d.contains_key(&(Codebook::S8.to_string(), "decode")));
        assert!(section(&rows).contains("| u4 | decode | 2 |"));
        assert!(section(&rows[4..]).contains("no replicates"));
    }
}
