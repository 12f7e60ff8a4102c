//! `vnni-dispatch explain`: why a policy picks what it picks for one query. The candidate and
//! bpp, the M bucket, the overlay or the tree path with each split's threshold (and, for a
//! batched M, the decode selection whose bpp the rows inherit), then, where the policy's corpus
//! has this exact key, the measured medians: the pick against the best and the runner-up, the
//! spread of the pick's samples and, for a corpus timed in two or more passes, the cell's noise
//! band and whether the pick is tied with the best inside it; with `--evidence`, the profiler
//! records of the pick and of the measured best there (`profile`). With `--shapes`, the
//! selection alone for many shapes, one CSV line each.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use vnni_corpus::collection::read_corpus_rows;
use vnni_corpus::seal::{Manifest, MANIFEST};
use vnni_corpus::TimingRow;
use vnni_kernels::{Mode, SourceFormat};
use vnni_measure::shapes::Shapes;
use vnni_policy::{Decision, Policy, Via};

use crate::argv::{Argv, ToArgv};

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Args {
    /// The policy IR (`policy.json`).
    #[arg(long)]
    pub policy: PathBuf,
    /// The source format of the weights (its codebook is what the policy is keyed by).
    #[arg(long)]
    pub format: SourceFormat,
    /// Timing mode (default: the policy's first).
    #[arg(long)]
    pub mode: Option<Mode>,
    #[arg(long)]
    pub m: u64,
    #[arg(long, required_unless_present = "shapes")]
    pub n: Option<u64>,
    #[arg(long, required_unless_present = "shapes")]
    pub k: Option<u64>,
    /// Many N x K shapes at once (`NxK,NxK,..`), instead of --n and --k: one CSV line each
    /// (the selection, its bpp and what decided it), the policy read once.
    #[arg(long, conflicts_with_all = ["n", "k", "predictions", "evidence", "corpus"])]
    pub shapes: Option<Shapes>,
    /// The policy's sealed corpus, for the measured margins (default: the one under --root
    /// whose corpus id the policy names).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    #[arg(long, default_value = "lfs-data/corpora")]
    pub root: PathBuf,
    /// Also list every cost model's predicted latency for the decode domain of the query,
    /// fastest first, whatever answered the query (an overlay, the models or a tree).
    #[arg(long)]
    pub predictions: bool,
    /// Profiler evidence of the policy's corpus (`profile`): the pick's records and the best's.
    #[arg(long)]
    pub evidence: Option<PathBuf>,
}

impl ToArgv for Args {
    fn to_argv(&self) -> Vec<String> {
        Argv::new("explain")
            .path("policy", &self.policy)
            .val("format", self.format)
            .opt("mode", self.mode)
            .val("m", self.m)
            .opt("n", self.n)
            .opt("k", self.k)
            .opt("shapes", self.shapes.as_ref())
            .opt_path("corpus", self.corpus.as_deref())
            .path("root", &self.root)
            .flag("predictions", self.predictions)
            .opt_path("evidence", self.evidence.as_deref())
            .done()
    }
}

fn describe(label: &str, d: &Decision, policy: &Policy, (n, k): (u64, u64)) {
    let dom = &policy.domains[d.domain];
    let aspect = dom.aspect.map_or(String::new(), |a| format!(", aspect bucket {a}"));
    println!("{label:<11} {} (domain {} {} bucket {}{aspect})", d.candidate, dom.codebook, dom.mode, dom.m_bucket);
    match d.via {
        Via::Overlay => println!("{:<11} exact overlay for this (codebook, mode, bucket, N, K)", ""),
        Via::Model => {
            let predictions = policy.model_predictions(d.domain, n, k);
            println!("{:<11} least predicted latency of the domain's {} cost models:", "", dom.models.len());
            if policy.correction.is_some() && !dom.anchors.is_empty() {
                use vnni_policy::correction::{anchor_logs, log2_fixed, squared_distance, LOG_FRACTION_BITS};
                let at = (log2_fixed(n), log2_fixed(k));
                let nearest = anchor_logs(&dom.anchors).into_iter().map(|a| squared_distance(at, a)).min().unwrap_or(0);
                let nearest = (nearest as f64).sqrt() / f64::from(1u32 << LOG_FRACTION_BITS);
                println!(
                    "{:<11} (corrected by their residuals at the domain's {} development shapes; the nearest {nearest:.2} octave away)",
                    "",
                    dom.anchors.len()
                );
            }
            for (id, t) in predictions.iter().take(3) {
                let us = *t as f64 / vnni_policy::cost::UNITS_PER_US;
                println!("{:<11}   {us:>9.3} us  {id}", "");
            }
        }
        Via::Tree => {
            for s in &d.path {
                let (op, side) = if s.left { ("<=", "left") } else { (">", "right") };
                println!("{:<11} {} = {} {op} {} -> {side}", "", s.feature.describe(), s.value, s.le);
            }
            println!("{:<11} leaf {}", "", d.candidate);
        }
    }
}

/// The sealed corpus under `root` whose manifest names `corpus_id`.
fn find_corpus(root: &Path, corpus_id: &str) -> Option<PathBuf> {
    super::verify::holding(root, MANIFEST).into_iter().find(|d| {
        let manifest = std::fs::read(d.join(MANIFEST)).ok().and_then(|b| serde_json::from_slice::<Manifest>(&b).ok());
        manifest.is_some_and(|m| m.corpus_id == corpus_id)
    })
}

fn measured(rows: &[TimingRow], picked: &str) {
    let mut formats: Vec<SourceFormat> = rows.iter().filter_map(|r| r.source_format).collect();
    formats.sort();
    formats.dedup();
    for f in formats {
        let mut mine: Vec<&TimingRow> =
            rows.iter().filter(|r| r.source_format == Some(f) && r.eligible && r.median_us.is_finite()).collect();
        mine.sort_by(|a, b| a.median_us.total_cmp(&b.median_us));
        let Some(best) = mine.first() else { continue };
        let pct = |x: f64| format!("{:+.2}%", x * 100.0);
        match mine.iter().find(|r| r.candidate == picked) {
            Some(p) => {
                let runner = mine.iter().find(|r| r.candidate != p.candidate);
                println!(
                    "{f:<11} pick {:.2} us ({} vs the best, {}); runner-up {}; noise of the pick: MAD {}, p95 {}",
                    p.median_us,
                    pct(p.median_us / best.median_us - 1.0),
                    best.candidate,
                    runner.map_or("-".into(), |r| format!(
                        "{} {:.2} us ({})",
                        r.candidate,
                        r.median_us,
                        pct(r.median_us / p.median_us - 1.0)
                    )),
                    pct(p.mad_us / p.median_us),
                    pct(p.p95_us / p.median_us - 1.0),
                );
            }
            None => println!(
                "{f:<11} the pick was not measured eligible here; the best is {} {:.2} us",
                best.candidate, best.median_us
            ),
        }
    }
}

pub fn run(a: &Args) -> Result<()> {
    let bytes = std::fs::read(&a.policy).with_context(|| format!("reading {}", a.policy.display()))?;
    let policy = Policy::from_bytes(&bytes).with_context(|| format!("{} is not a policy", a.policy.display()))?;
    policy.check().with_context(|| format!("{}: not a valid policy", a.policy.display()))?;
    let codebook = a.format.codebook();
    let mode = match a.mode {
        Some(m) => m.to_string(),
        None => policy.modes.first().cloned().context("the policy has no mode")?,
    };
    if let Some(shapes) = &a.shapes {
        return list(a, &policy, &mode, shapes);
    }
    let (n, k) = (a.n.context("--n is required")?, a.k.context("--k is required")?);
    let e = explain_at(a, &policy, &mode, n, k)?;
    let s = &e.selection;
    println!("query       {} ({codebook}) {mode} M={} N={} K={}", a.format, a.m, n, k);
    println!("selection   {} bpp {} ({} partitions), via {:?}", s.candidate.id, s.bpp, s.kb, s.via);
    println!("bucket      {} ({})", e.bucket, e.surface);
    describe("decode", &e.decode, &policy, (n, k));
    if a.predictions {
        for (id, t) in policy.model_predictions(e.decode.domain, n, k) {
            println!("predicted   {:>9.3} us  {id}", t as f64 / vnni_policy::cost::UNITS_PER_US);
        }
    }
    if let Some(b) = &e.batched {
        println!("{:<11} the rows inherit bpp {} from the decode pick", "", s.bpp);
        describe("batched", b, &policy, (n, k));
    }
    let corpus = a.corpus.clone().or_else(|| find_corpus(&a.root, &policy.provenance.corpus_id));
    let Some(corpus) = corpus else {
        println!(
            "measured    the policy's corpus {} is not under {}: no margins (pass --corpus)",
            &policy.provenance.corpus_id[..16],
            a.root.display()
        );
        return Ok(());
    };
    let all = read_corpus_rows(&corpus)?;
    let rows: Vec<TimingRow> = all
        .iter()
        .filter(|r| {
            r.codebook == Some(codebook)
                && r.mode.name() == mode
                && r.m as u64 == a.m
                && r.n as u64 == n
                && r.k as u64 == k
        })
        .cloned()
        .collect();
    if rows.is_empty() {
        println!(
            "measured    {} has no rows for this key: the pick extrapolates from the features above",
            corpus.display()
        );
    } else {
        println!("measured    {} (same policy corpus)", corpus.display());
        measured(&rows, &s.candidate.id);
        let twins = vnni_learner::corpus::Twins::of(&policy);
        band(&corpus, twins, codebook, &mode, (a.m, n, k), &s.candidate.id)?;
    }
    if let Some(dir) = &a.evidence {
        // aliases share a codebook: the evidence is of this source format's own rows
        let own: Vec<TimingRow> = rows.into_iter().filter(|r| r.source_format == Some(a.format)).collect();
        evidence(dir, &corpus, &all, &own, &s.candidate.id)?;
    }
    Ok(())
}

/// The policy's explanation of the query `a` at N x K, or an error naming the query.
fn explain_at<'p>(a: &Args, policy: &'p Policy, mode: &str, n: u64, k: u64) -> Result<vnni_policy::Explanation<'p>> {
    policy
        .explain(a.format.codebook().name(), mode, a.m, n, k)
        .with_context(|| format!("{}: no selection for {} {mode} M={} {n}x{k}", a.policy.display(), a.format, a.m))
}

/// `--shapes`: one CSV line per shape (the selection of each, the policy read once), for
/// scripts that score a policy on many shapes and for a model's layers at a glance.
fn list(a: &Args, policy: &Policy, mode: &str, shapes: &Shapes) -> Result<()> {
    let codebook = a.format.codebook();
    println!("format,codebook,mode,m,n,k,candidate,bpp,partitions,via,decode_candidate");
    for &(n, k) in &shapes.0 {
        let (n, k) = (n as u64, k as u64);
        let e = explain_at(a, policy, mode, n, k)?;
        let s = &e.selection;
        println!(
            "{},{codebook},{mode},{},{n},{k},{},{},{},{:?},{}",
            a.format, a.m, s.candidate.id, s.bpp, s.kb, s.via, e.decode.candidate
        );
    }
    Ok(())
}

/// The profiler records of the pick and of the measured best among `rows` (one key's rows of
/// the corpus whose every row is `all`).
fn evidence(dir: &Path, corpus: &Path, all: &[TimingRow], rows: &[TimingRow], picked: &str) -> Result<()> {
    let id = super::profile::corpus_id(corpus)?;
    let (_, records) = super::profile::authenticate(dir, &id, all)?;
    let by_key = vnni_corpus::evidence::by_key(&records);
    let best = rows.iter().filter(|r| r.eligible).min_by(|a, b| a.median_us.total_cmp(&b.median_us));
    let mut shown: Vec<&TimingRow> = rows.iter().filter(|r| r.candidate.as_str() == picked).collect();
    shown.extend(best.filter(|b| b.candidate.as_str() != picked));
    if shown.is_empty() {
        println!("evidence    the corpus has no row of the pick here: nothing was profiled");
    }
    for r in shown {
        let role = if r.candidate.as_str() == picked { "pick" } else { "best" };
        let key = vnni_corpus::evidence::ProfileKey::of_row(r);
        match key.as_ref().and_then(|k| by_key.get(k)) {
            None => println!(
                "evidence    {role} {} ({}): no record in {}",
                r.candidate,
                r.source_format.map_or("-".into(), |f| f.to_string()),
                dir.display()
            ),
            Some(recs) => {
                for e in recs {
                    println!(
                        "evidence    {role} {} {}{}: {} regs, occupancy {:.1}%, DRAM {:.1}%, L2 {:.1}%, {} spill instructions, ld128 {}, {} B/sector, {} IMMA",
                        e.candidate,
                        e.kernel,
                        if e.profiled_mode == e.mode { String::new() } else { format!(" (profiled {})", e.profiled_mode) },
                        e.registers,
                        e.achieved_occupancy_pct,
                        e.dram_pct,
                        e.l2_pct,
                        e.spill_insts(),
                        e.ld128_share.map_or("-".into(), |v| format!("{v:.2}")),
                        e.bytes_per_sector.map_or("-".into(), |v| format!("{v:.1}")),
                        e.imma_insts
                    );
                }
            }
        }
    }
    Ok(())
}

/// The noise band of each alias cell of the key (`vnni_learner::noise`), and whether the pick
/// is inside it, the corpus read as the policy's fit read it. A one-pass corpus has none (its
/// plan says so; the corpus is not read again).
fn band(
    corpus: &Path,
    twins: vnni_learner::corpus::Twins,
    codebook: vnni_kernels::Codebook,
    mode: &str,
    key: (u64, u64, u64),
    picked: &str,
) -> Result<()> {
    let plan = vnni_corpus::collection::CollectionPlan::read(&corpus.join(vnni_corpus::collection::PLAN_FILE))?;
    if plan.inventory.passes < 2 {
        println!("noise band  none: the corpus was timed in one pass per cell (no pass replicates)");
        return Ok(());
    }
    let c = vnni_learner::corpus::load_with(corpus, twins)?;
    let (m, n, k) = key;
    let octave = vnni_learner::noise::octave(n, k);
    for cell in c.cells.iter().filter(|x| x.codebook == codebook && x.mode.name() == mode && (x.m, x.n, x.k) == key) {
        let from = vnni_learner::noise::band_of(&c, cell).map_or(String::new(), |b| {
            let source = match b.source {
                vnni_learner::noise::BandSource::Own => "this domain at this size".to_string(),
                vnni_learner::noise::BandSource::Pooled => "every domain of the mode and surface at this size".into(),
                vnni_learner::noise::BandSource::Nearest { octave } => format!("this domain at size octave 2^{octave}"),
            };
            format!(", from {} pass differences of {source}", b.replicates)
        });
        let list = c.candidates(cell.surface());
        let verdict = match list.iter().position(|x| x.id.as_str() == picked) {
            Some(i) if cell.scored(i) == 0.0 => {
                format!("the pick ({:+.2}%) is inside it: tied with the best", cell.regret[i] * 100.0)
            }
            Some(i) => format!("the pick ({:+.2}%) is outside it", cell.regret[i] * 100.0),
            None => "the pick was not measured here".into(),
        };
        println!(
            "{:<11} noise band {:.2}% (M={m} {n}x{k}, size octave 2^{octave}{from}); {verdict}",
            cell.format.name(),
            cell.band * 100.0
        );
    }
    Ok(())
}
