//! Noise bands. The band that scores a corpus comes from pass replicates: a protocol of two
//! or more independent passes times every surviving candidate of a cell once per pass, on
//! the same bytes (on a GPU on weight copies of their own). How far a candidate's median
//! moves against the cell's median candidate between the first two passes is run-to-run noise
//! of what regret compares ([`cell_replicates`]). Per domain (DESIGN.md section 8) and size
//! octave, the p95 of those differences over the development cells (over sqrt 2) is the band
//! inside which two candidates are not told apart: [`crate::corpus::Cell::scored`] ties a pick
//! inside it with the best. One-pass corpora have none (band 0, regrets scored as measured).
//!
//! The corpus report also shows alias replicates: source formats that share a codebook run the
//! same kernels on the same packed layout (Q4_1 and Q4_K are both `u4`), so two alias cells of
//! one (mode, M, N, K) time every candidate twice on different bytes; their difference is
//! run-to-run noise plus any real difference between the byte patterns.

use std::collections::BTreeMap;

use vnni_corpus::TimingRow;
use vnni_kernels::{CandidateId, Codebook, Mode};

use vnni_policy::Surface;

use crate::corpus::{Cell, Corpus};
use crate::domains::{domain_of, skeleton, DomainKey};
use crate::regret_stats::{nearest_rank, p95};

/// Fewer pass differences than this under one key, or fewer cells than [`MIN_CELLS`]: the
/// next, wider key.
pub const MIN_REPLICATES: usize = 30;
/// The differences of one cell are correlated (one pair of passes): a band needs this many.
pub const MIN_CELLS: usize = 5;

/// Where a band's differences came from, narrowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BandSource {
    /// The domain's development cells of this size octave.
    Own,
    /// Every codebook, aspect and M bucket of the mode and surface (decode, or batched) at this
    /// size octave.
    Pooled,
    /// The domain's development cells of the nearest size octave that has enough (the larger
    /// octave when two are as near: its noise is the smaller).
    Nearest { octave: u32 },
}

/// (differences, cells) under one key.
type Evidence = (Vec<f64>, usize);

/// The noise band of one (domain, size octave).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    /// Pass differences it was computed from.
    pub replicates: usize,
    /// p95 of |pass difference| / sqrt 2: the p95 of the noise in the difference of two
    /// candidates' medians over both passes (each pass median carries the noise once, their
    /// difference sqrt 2 of it, a two-pass median 1 / sqrt 2).
    pub band: f64,
    pub source: BandSource,
}

/// The size octave a band is keyed by, floor(log2(N x K)): run-to-run noise falls with the
/// bytes a launch streams (measured on the H200: bands of 2.55% below 2^25 elements, about 0.9%
/// from 2^27), so one band per domain would tie real regrets of large shapes with the noise of
/// small ones.
pub fn octave(n: u64, k: u64) -> u32 {
    (n * k).max(1).ilog2()
}

/// The (domain, size octave) a cell's band is keyed by (`None`: no domain of the policy holds it).
pub fn band_key(skeleton: &vnni_policy::Policy, c: &Cell) -> Option<(DomainKey, u32)> {
    domain_of(skeleton, c.codebook.name(), c.mode.name(), c.m, c.n, c.k).map(|d| (d, octave(c.n, c.k)))
}

/// The band a cell of `corpus` is scored with, and where it came from.
pub fn band_of<'c>(corpus: &'c Corpus, cell: &Cell) -> Option<&'c Band> {
    band_key(&skeleton(corpus), cell).and_then(|k| corpus.bands.get(&k))
}

/// The replicates of one cell: for every candidate timed in both of the first two passes
/// (two or more such candidates needed: one has no others to move against), its per-pass
/// median over the cell's reference of that pass (the median of those candidates' per-pass
/// medians), and then |pass 1 / pass 0 - 1| of that position. Regret compares candidates timed in the same passes, so a shift the whole
/// cell takes between passes (other weight copies, warmer clocks) cancels out of it and is
/// divided out here too; what remains is how far a candidate moves against the others.
pub fn cell_replicates(per_pass: &[&BTreeMap<usize, Vec<f64>>]) -> Vec<f64> {
    let median = |v: &[f64]| vnni_measure::stats::summarize(v).map(|s| s.median);
    let pairs: Vec<(f64, f64)> = per_pass
        .iter()
        .filter_map(|p| Some((median(p.get(&0)?)?, median(p.get(&1)?)?)))
        .filter(|(a, b)| *a > 0.0 && *b > 0.0)
        .collect();
    if pairs.len() < 2 {
        return Vec::new();
    }
    let reference = |pick: fn(&(f64, f64)) -> f64| {
        median(&pairs.iter().map(pick).collect::<Vec<f64>>()).expect("two or more medians")
    };
    let (r0, r1) = (reference(|p| p.0), reference(|p| p.1));
    pairs.iter().map(|(a, b)| ((b / r1) / (a / r0) - 1.0).abs()).collect()
}

/// The band of every (domain, size octave) a cell of the corpus falls in, from the
/// development cells' pass differences (the cell's own key, else the mode and surface at its
/// octave, else the domain's nearest octave, whichever first has [`MIN_REPLICATES`] from
/// [`MIN_CELLS`]), set on every cell, development and sealed: sealed rows are scored with the
/// band the development rows measured.
pub fn apply_pass_bands(corpus: &mut Corpus) {
    let sk = skeleton(corpus);
    let keys: Vec<Option<(DomainKey, u32)>> = corpus.cells.iter().map(|c| band_key(&sk, c)).collect();
    let pool = |d: &DomainKey, o: u32| (d.mode.clone(), sk.m_buckets[d.bucket].surface == Surface::Decode, o);
    let mut own: BTreeMap<(DomainKey, u32), Evidence> = BTreeMap::new();
    let mut pooled: BTreeMap<(String, bool, u32), Evidence> = BTreeMap::new();
    for (c, key) in corpus.cells.iter().zip(&keys) {
        let Some((d, o)) = key.as_ref().filter(|_| !c.sealed && !c.replicates.is_empty()) else { continue };
        for e in [own.entry((d.clone(), *o)).or_default(), pooled.entry(pool(d, *o)).or_default()] {
            e.0.extend(&c.replicates);
            e.1 += 1;
        }
    }
    fn enough(e: Option<&Evidence>) -> Option<&Evidence> {
        e.filter(|(v, cells)| v.len() >= MIN_REPLICATES && *cells >= MIN_CELLS)
    }
    let mut bands = BTreeMap::new();
    for (d, o) in keys.iter().flatten() {
        if bands.contains_key(&(d.clone(), *o)) {
            continue;
        }
        let nearest = || {
            own.iter()
                .filter(|((od, _), e)| od == d && enough(Some(e)).is_some())
                .min_by_key(|((_, oo), _)| (oo.abs_diff(*o), std::cmp::Reverse(*oo)))
                .map(|((_, oo), e)| (e, BandSource::Nearest { octave: *oo }))
        };
        let found = enough(own.get(&(d.clone(), *o)))
            .map(|e| (e, BandSource::Own))
            .or_else(|| enough(pooled.get(&pool(d, *o))).map(|e| (e, BandSource::Pooled)))
            .or_else(nearest);
        if let Some(((v, _), source)) = found {
            let band = Band { replicates: v.len(), band: p95(v) / std::f64::consts::SQRT_2, source };
            bands.insert((d.clone(), *o), band);
        }
    }
    for (c, key) in corpus.cells.iter_mut().zip(&keys) {
        c.band = key.as_ref().and_then(|k| bands.get(k)).map_or(0.0, |b| b.band);
    }
    corpus.bands = bands;
}

/// The fit report's section: the band of every domain by size octave, or why there is none.
pub fn bands_section(passes: usize, bands: &BTreeMap<(DomainKey, u32), Band>) -> String {
    let mut md = String::from("## Noise band (pass replicates)\n\n");
    if bands.is_empty() {
        md.push_str(&format!(
            "The corpus was timed in {passes} pass(es) per cell: no pass replicates, so no band; regrets are scored \
             as measured.\n\n"
        ));
        return md;
    }
    md.push_str(&format!(
        "Every cell was timed in {passes} independent passes. A candidate's pass-to-pass difference is how far its \
         median moves against the cell's other candidates between the passes (each pass's median over the \
         median candidate of that pass: the shift the whole cell takes cancels out of regret, and out of this). \
         Per domain and size octave (log2 N x K), the band is the p95 of those differences over the development \
         cells, divided by sqrt 2 (the noise of the difference of two candidates' medians over both passes); \
         under {MIN_REPLICATES} differences or {MIN_CELLS} cells it is pooled over the codebooks, aspects and M \
         buckets of the mode and surface at that octave (p), else taken from the domain's nearest octave with \
         enough (that octave in parentheses). A pick whose regret is inside its cell's band is tied with the best \
         (scored 0 in CV's p95 gate, leave-one-family-out and the sealed certification; the confidence-bound gate \
         stays on the measured samples); outside it keeps its whole regret.\n\n\
         | domain | differences | band by octave |\n|---|---|---|\n"
    ));
    let mut by_domain: BTreeMap<&DomainKey, Vec<(u32, &Band)>> = BTreeMap::new();
    for ((d, o), b) in bands {
        by_domain.entry(d).or_default().push((*o, b));
    }
    for (d, v) in by_domain {
        let count: usize = v.iter().filter(|(_, b)| b.source == BandSource::Own).map(|(_, b)| b.replicates).sum();
        let cells: Vec<String> = v
            .iter()
            .map(|(o, b)| {
                let mark = match b.source {
                    BandSource::Own => String::new(),
                    BandSource::Pooled => " p".into(),
                    BandSource::Nearest { octave } => format!(" (2^{octave})"),
                };
                format!("2^{o}: {:.2}%{mark}", b.band * 100.0)
            })
            .collect();
        md.push_str(&format!("| {d} | {count} | {} |\n", cells.join(", ")));
    }
    md.push('\n');
    md
}

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

    /// A shift of the whole cell between passes cancels; a candidate moving against the
    /// others is what remains; one candidate alone gives nothing.
    #[test]
    fn cell_replicates_measure_moves_against_the_cell_not_its_shift() {
        let pass = |a: f64, b: f64| BTreeMap::from([(0, vec![a, a, a]), (1, vec![b, b, b])]);
        let shifted = [pass(10.0, 10.5), pass(20.0, 21.0), pass(30.0, 31.5)];
        let refs: Vec<_> = shifted.iter().collect();
        assert!(cell_replicates(&refs).iter().all(|d| d.abs() < 1e-12), "{:?}", cell_replicates(&refs));
        let moved = [pass(10.0, 10.0), pass(20.0, 20.0), pass(30.0, 33.0)];
        let refs: Vec<_> = moved.iter().collect();
        let d = cell_replicates(&refs);
        assert!((d[2] - 0.1).abs() < 1e-12 && d[0] == 0.0, "{d:?}");
        assert!(cell_replicates(&[&pass(10.0, 12.0)]).is_empty());
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
