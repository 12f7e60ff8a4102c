//! The one certification on the sealed partition: the finished policy, overlays off, on
//! every sealed alias cell. Decode (M = 1) and grouped rows are scored and gated apart
//! (nearest-rank p95 regret below the p95 threshold each), and decode rows are also reported
//! per source of their shape: the model family a sealed shape belongs to, or `grid`.

use std::collections::BTreeMap;

use vnni_kernels::registry::Surface;
use vnni_policy::{MeasuredScore, Policy, PolicyError, SealedCertification, SealedScore};

use crate::corpus::Corpus;
use crate::domains::{DomainKey, Sample};
use crate::family_cv::sources;
use crate::regret::REGRET_CAP;
use crate::regret_stats::{geomean, p95};

/// One scored alias cell: its surface, its shape and the regret of the policy's pick (tied
/// inside the noise band, and as measured).
struct Scored {
    surface: Surface,
    n: u64,
    k: u64,
    regret: f64,
    measured: f64,
}

fn scored(
    policy: &Policy,
    corpus: &Corpus,
    samples: &BTreeMap<DomainKey, Vec<Sample>>,
    overlays: bool,
) -> Result<Vec<Scored>, PolicyError> {
    let mut out = Vec::new();
    for (d, keys) in samples {
        for s in keys {
            let sel = policy.select_with(&d.codebook, &d.mode, s.m, s.n, s.k, overlays)?;
            let surface = if s.m == 1 { Surface::Decode } else { Surface::Grouped };
            let c = corpus.candidates(surface).iter().position(|c| c.id == sel.candidate.id);
            out.extend(s.cells.iter().map(|&i| Scored {
                surface,
                n: s.n,
                k: s.k,
                regret: c.map_or(REGRET_CAP, |c| corpus.cells[i].scored(c)),
                measured: c.map_or(REGRET_CAP, |c| corpus.cells[i].regret[c]),
            }));
        }
    }
    Ok(out)
}

/// The regret of the policy's choice (overlays as given) in every alias cell of `samples`.
pub fn policy_regrets(
    policy: &Policy,
    corpus: &Corpus,
    samples: &BTreeMap<DomainKey, Vec<Sample>>,
    overlays: bool,
) -> Result<Vec<f64>, PolicyError> {
    Ok(scored(policy, corpus, samples, overlays)?.into_iter().map(|s| s.regret).collect())
}

fn score(rows: &[&Scored]) -> SealedScore {
    let stats = |r: &[f64]| (p95(r), geomean(r), r.iter().copied().fold(0.0, f64::max));
    let tied: Vec<f64> = rows.iter().map(|s| s.regret).collect();
    let measured: Vec<f64> = rows.iter().map(|s| s.measured).collect();
    let (p95_regret, geomean_regret, max_regret) = stats(&tied);
    let (mp, mg, mm) = stats(&measured);
    SealedScore {
        rows: rows.len() as u64,
        p95_regret,
        geomean_regret,
        max_regret,
        as_measured: (tied != measured).then_some(MeasuredScore { p95_regret: mp, geomean_regret: mg, max_regret: mm }),
    }
}

/// `None` when the corpus has no sealed rows (nothing to certify on).
pub fn certify(
    policy: &Policy,
    corpus: &Corpus,
    sealed: &BTreeMap<DomainKey, Vec<Sample>>,
    p95_max: f64,
) -> Result<Option<SealedCertification>, PolicyError> {
    let rows = scored(policy, corpus, sealed, false)?;
    if rows.is_empty() {
        return Ok(None);
    }
    let all: Vec<f64> = rows.iter().map(|s| s.regret).collect();
    let mut by_surface: BTreeMap<String, Vec<&Scored>> = BTreeMap::new();
    let mut by_source: BTreeMap<String, Vec<&Scored>> = BTreeMap::new();
    let from = sources(corpus);
    for s in &rows {
        by_surface.entry(s.surface.name().to_string()).or_default().push(s);
        if s.surface == Surface::Decode {
            let source = from.get(&(s.n, s.k)).cloned().unwrap_or_else(|| "unknown".into());
            by_source.entry(source).or_default().push(s);
        }
    }
    let surfaces: BTreeMap<String, SealedScore> = by_surface.iter().map(|(k, r)| (k.clone(), score(r))).collect();
    let passed = surfaces.values().all(|s| s.p95_regret < p95_max);
    Ok(Some(SealedCertification {
        rows: all.len() as u64,
        p95_regret: p95(&all),
        geomean_regret: geomean(&all),
        passed,
        surfaces,
        decode_sources: by_source.iter().map(|(k, r)| (k.clone(), score(r))).collect(),
    }))
}
