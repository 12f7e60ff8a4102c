//! What a dense-M bench found (issue 24): per series (mode, source format, N, K), the cliffs
//! (a step from one measured M to the next above what the extra rows explain, a dispatched
//! candidate behind the measured best, a dispatched candidate that could not run), where the
//! fastest candidate changes, and a chart of time per row against M; written as `dense-m.md`,
//! `cliffs.csv` and one PNG/SVG per series.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Serialize;
use vnni_corpus::schema::DenseMRow;
use vnni_corpus::TimingRow;

use crate::chart::{self, lines, series_legend, Axes, Draw, Series, PALETTE};
use crate::error::Result;

/// A step from M to the next measured M is a cliff above this ratio when the two are adjacent.
pub const STEP_LIMIT: f64 = 1.2;
/// A dispatched candidate more than this fraction behind the measured best is a cliff.
pub const BEHIND_LIMIT: f64 = 0.05;

/// The largest ratio time(next) / time(m) that is not a cliff: [`STEP_LIMIT`] between
/// adjacent M; across a gap of the grid the extra rows alone may scale a compute-bound time,
/// so the limit grows by next / (m + 1).
pub fn step_allowed(m: usize, next: usize) -> f64 {
    STEP_LIMIT * (next as f64 / (m + 1) as f64).max(1.0)
}

/// (mode, source format, N, K): one line of M values.
pub type SeriesKey = (String, String, usize, usize);

/// Rows grouped by series, each sorted by M.
pub fn series(rows: &[DenseMRow]) -> BTreeMap<SeriesKey, Vec<&DenseMRow>> {
    let mut out: BTreeMap<SeriesKey, Vec<&DenseMRow>> = BTreeMap::new();
    for r in rows {
        out.entry((r.mode.to_string(), r.source_format.to_string(), r.n, r.k)).or_default().push(r);
    }
    for v in out.values_mut() {
        v.sort_by_key(|r| r.m);
    }
    out
}

/// One cliff: `kind` is `step` (time(next_m) / time(m) = `ratio` above `limit`), `behind`
/// (the dispatched candidate's time over the best's at `m`) or `untimed` (the dispatched
/// candidate has no time at `m`: `note` says why). `whose` is `dispatched` or `best`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cliff {
    pub mode: String,
    pub source_format: String,
    pub n: usize,
    pub k: usize,
    pub kind: &'static str,
    pub whose: &'static str,
    pub m: usize,
    pub next_m: Option<usize>,
    pub ratio: f64,
    pub limit: f64,
    /// The candidate at `m`, and at `next_m` for a step.
    pub from: String,
    pub to: String,
    pub note: String,
}

/// Every cliff of every series, in series then M order.
pub fn cliffs(rows: &[DenseMRow]) -> Vec<Cliff> {
    let mut out = Vec::new();
    for ((mode, format, n, k), line) in series(rows) {
        let cliff = |kind, whose, m, next_m, ratio, limit, from: String, to: String, note: String| Cliff {
            mode: mode.clone(),
            source_format: format.clone(),
            n,
            k,
            kind,
            whose,
            m,
            next_m,
            ratio,
            limit,
            from,
            to,
            note,
        };
        let name = |c: &Option<vnni_kernels::CandidateId>| c.as_ref().map_or_else(String::new, |c| c.to_string());
        for r in &line {
            match (&r.dispatched, r.dispatched_us) {
                (Some(d), None) => out.push(cliff(
                    "untimed",
                    "dispatched",
                    r.m,
                    None,
                    f64::INFINITY,
                    1.0,
                    d.to_string(),
                    String::new(),
                    r.note.clone(),
                )),
                (Some(d), Some(t)) if t > r.best_us * (1.0 + BEHIND_LIMIT) => out.push(cliff(
                    "behind",
                    "dispatched",
                    r.m,
                    None,
                    t / r.best_us,
                    1.0 + BEHIND_LIMIT,
                    d.to_string(),
                    r.best.to_string(),
                    r.note.clone(),
                )),
                _ => {}
            }
        }
        for w in line.windows(2) {
            let (a, b) = (w[0], w[1]);
            let limit = step_allowed(a.m, b.m);
            let best = b.best_us / a.best_us;
            if best > limit {
                let c = cliff(
                    "step",
                    "best",
                    a.m,
                    Some(b.m),
                    best,
                    limit,
                    a.best.to_string(),
                    b.best.to_string(),
                    String::new(),
                );
                out.push(c);
            }
            if let (Some(ta), Some(tb)) = (a.dispatched_us, b.dispatched_us) {
                if tb / ta > limit {
                    let (from, to) = (name(&a.dispatched), name(&b.dispatched));
                    out.push(cliff("step", "dispatched", a.m, Some(b.m), tb / ta, limit, from, to, String::new()));
                }
            }
        }
    }
    out
}

/// Where the fastest candidate of a series changes: (M before, M after, from, to).
pub fn best_changes<'a>(line: &[&'a DenseMRow]) -> Vec<(usize, usize, &'a str, &'a str)> {
    line.windows(2)
        .filter(|w| w[0].best != w[1].best)
        .map(|w| (w[0].m, w[1].m, w[0].best.as_str(), w[1].best.as_str()))
        .collect()
}

/// Per series and M (>= 2), each timed candidate's median: what a bucket map is judged on.
/// Rows racing dropped keep their partial medians (they lost); rows with mismatches are out.
pub type Times = BTreeMap<SeriesKey, BTreeMap<usize, BTreeMap<String, f64>>>;

pub fn times(rows: &[TimingRow]) -> Times {
    let mut out = Times::new();
    for r in rows.iter().filter(|r| r.m >= 2 && r.eligible && r.median_us.is_finite() && r.median_us > 0.0) {
        let Some(format) = r.source_format else { continue };
        out.entry((r.mode.to_string(), format.to_string(), r.n, r.k))
            .or_default()
            .entry(r.m)
            .or_default()
            .insert(r.candidate.to_string(), r.median_us);
    }
    out
}

/// The one candidate that serves every M of `ms` in a series with the least worst regret
/// (ties: the smaller name), with that regret: infinite when no candidate was timed at every
/// one of them (so such a bucket is never feasible); `None` when the series has none of `ms`.
pub fn bucket_pick(line: &BTreeMap<usize, BTreeMap<String, f64>>, ms: &[usize]) -> Option<(String, f64)> {
    let present: Vec<(&BTreeMap<String, f64>, f64)> = ms
        .iter()
        .filter_map(|m| line.get(m))
        .map(|at| (at, at.values().copied().fold(f64::INFINITY, f64::min)))
        .collect();
    let (first, _) = present.first()?;
    let mut best: Option<(String, f64)> = None;
    for cand in first.keys() {
        let mut worst = 0f64;
        for (at, fastest) in &present {
            match at.get(cand) {
                Some(t) => worst = worst.max(t / fastest - 1.0),
                None => worst = f64::INFINITY,
            }
        }
        if best.as_ref().is_none_or(|b| worst < b.1) {
            best = Some((cand.clone(), worst));
        }
    }
    best
}

/// One M bucket of a map judged on dense measurements: its first M and last measured M, and
/// per series the candidate [`bucket_pick`] gives it with its worst regret over the bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgedBucket {
    pub lo: usize,
    pub hi: usize,
    pub picks: BTreeMap<SeriesKey, (String, f64)>,
}

impl JudgedBucket {
    pub fn worst(&self) -> f64 {
        self.picks.values().map(|p| p.1).fold(0.0, f64::max)
    }
}

/// The measured M values (>= 2) of every series, ascending.
fn measured(t: &Times) -> Vec<usize> {
    let all: std::collections::BTreeSet<usize> = t.values().flat_map(|l| l.keys().copied()).collect();
    all.into_iter().collect()
}

fn judge(t: &Times, ms: &[usize]) -> JudgedBucket {
    let picks = t.iter().filter_map(|(key, line)| Some((key.clone(), bucket_pick(line, ms)?))).collect();
    JudgedBucket { lo: ms[0], hi: ms[ms.len() - 1], picks }
}

/// M buckets learned from the measurements: the fewest contiguous buckets (of the measured
/// M values from 2 up) such that in every series one candidate is within `tolerance` of the
/// fastest at every M of the bucket. Greedy from M = 2, each bucket as long as it stays
/// feasible, which is optimal because a sub-range of a feasible range is feasible. The last
/// bucket is unbounded above, as the policy's is.
pub fn learn_buckets(t: &Times, tolerance: f64) -> Vec<JudgedBucket> {
    let ms = measured(t);
    let mut out = Vec::new();
    let (mut start, mut current) = (0, None);
    for i in 0..ms.len() {
        let grown = judge(t, &ms[start..=i]);
        if grown.worst() <= tolerance {
            current = Some(grown);
            continue;
        }
        // One M alone is always feasible (its fastest candidate), so `current` holds
        // ms[start..i]: close it and start again at M = ms[i].
        out.extend(current.take());
        start = i;
        current = Some(judge(t, &ms[i..=i]));
    }
    out.extend(current);
    out
}

/// The grouped bucket starts (2 <= M < 32, the grouped surface) learned from every
/// candidate's dense-M rows: [`learn_buckets`] at [`BEHIND_LIMIT`] over the grouped M. The
/// starts below 32 are the same as those of learning over every M (greedy from the left: a
/// start depends only on the M before it).
pub fn grouped_starts(timing: &[TimingRow]) -> Vec<usize> {
    let grouped = vnni_kernels::registry::PREFILL_MIN_M;
    let mut t = times(timing);
    for line in t.values_mut() {
        line.retain(|&m, _| m < grouped);
    }
    t.retain(|_, line| !line.is_empty());
    learn_buckets(&t, BEHIND_LIMIT).iter().map(|b| b.lo).collect()
}

/// A given bucket map (the first M of each bucket from 2 up, as a policy's `m_buckets`)
/// judged on the same measurements.
pub fn judge_buckets(t: &Times, starts: &[usize]) -> Vec<JudgedBucket> {
    let ms = measured(t);
    let mut out = Vec::new();
    // Buckets start at M = 2 or later (M = 1 is the decode bucket).
    let starts: Vec<usize> = starts.iter().copied().filter(|&m| m >= 2).collect();
    for (i, &lo) in starts.iter().enumerate() {
        let hi = starts.get(i + 1).map_or(usize::MAX, |&next| next.saturating_sub(1));
        let inside: Vec<usize> = ms.iter().copied().filter(|&m| m >= lo && m <= hi).collect();
        if !inside.is_empty() {
            out.push(judge(t, &inside));
        }
    }
    out
}

/// A series summed up for the report's table.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub ms: usize,
    /// Largest step ratio over its allowed limit (<= 1: no step cliff), of the best and of the
    /// dispatched times, with the M where it starts.
    pub worst_best_step: Option<(f64, usize)>,
    pub worst_dispatched_step: Option<(f64, usize)>,
    /// Largest dispatched time over the best (as a fraction behind), with its M.
    pub worst_behind: Option<(f64, usize)>,
    /// M values whose dispatched candidate is within [`BEHIND_LIMIT`] of the best.
    pub within: usize,
    pub untimed: usize,
}

pub fn summarize(line: &[&DenseMRow]) -> Summary {
    // The largest, the first of equals.
    let worst = |it: &mut dyn Iterator<Item = (f64, usize)>| it.reduce(|w, x| if w.0 >= x.0 { w } else { x });
    let steps = |t: &dyn Fn(&DenseMRow) -> Option<f64>| {
        let mut it = line.windows(2).filter_map(|w| Some((t(w[1])? / t(w[0])? / step_allowed(w[0].m, w[1].m), w[0].m)));
        worst(&mut it)
    };
    let behind = |r: &&DenseMRow| r.dispatched_us.map(|t| (t / r.best_us - 1.0, r.m));
    Summary {
        ms: line.len(),
        worst_best_step: steps(&|r| Some(r.best_us)),
        worst_dispatched_step: steps(&|r| r.dispatched_us),
        worst_behind: worst(&mut line.iter().filter_map(behind)),
        within: line.iter().filter_map(behind).filter(|(b, _)| *b <= BEHIND_LIMIT).count(),
        untimed: line.iter().filter(|r| r.dispatched.is_some() && r.dispatched_us.is_none()).count(),
    }
}

/// Per series: its M values, the worst steps (over their limits) of the fastest and of the
/// dispatched candidate, the worst dispatched regret and how many M are within
/// [`BEHIND_LIMIT`] (a Markdown table: the report's and the one `bench --dense-m` prints last).
pub fn summary_table(rows: &[DenseMRow]) -> String {
    let mut md = format!(
        "| mode | format | N x K | M values | worst step, fastest (x limit, at M) | worst step, dispatched | worst dispatched behind (at M) | dispatched within {:.0}% | untimed |\n|---|---|---|---|---|---|---|---|---|\n",
        100.0 * BEHIND_LIMIT
    );
    for ((mode, format, n, k), line) in &series(rows) {
        let s = summarize(line);
        let step = |w: Option<(f64, usize)>| w.map_or_else(|| "-".into(), |(r, m)| format!("{r:.2} (M = {m})"));
        let behind = s.worst_behind.map_or_else(|| "-".into(), |(b, m)| format!("{:.1}% (M = {m})", 100.0 * b));
        let within = if s.worst_behind.is_some() { format!("{} of {}", s.within, s.ms) } else { "-".into() };
        let _ = writeln!(
            md,
            "| {mode} | {format} | {n}x{k} | {} | {} | {} | {behind} | {within} | {} |",
            s.ms,
            step(s.worst_best_step),
            step(s.worst_dispatched_step),
            s.untimed
        );
    }
    md
}

/// Time per row against M (both on log2 axes): the fastest measured candidate and the
/// dispatched one.
struct PerRow {
    title: String,
    series: Vec<Series>,
    x: (f64, f64),
    y: (f64, f64),
}

impl PerRow {
    fn new(key: &SeriesKey, line: &[&DenseMRow]) -> PerRow {
        let point = |m: usize, t: f64| ((m as f64).log2(), (t / m as f64).log2());
        let best: Vec<(f64, f64)> = line.iter().map(|r| point(r.m, r.best_us)).collect();
        let dispatched: Vec<(f64, f64)> = line.iter().filter_map(|r| Some(point(r.m, r.dispatched_us?))).collect();
        let mut series =
            vec![Series { label: "fastest measured (inherited bpp)".into(), colour: PALETTE[0], points: best }];
        if !dispatched.is_empty() {
            series.push(Series { label: "dispatched by the policy".into(), colour: PALETTE[1], points: dispatched });
        }
        let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
        let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| (lo.min(y), hi.max(y)));
        let x_hi = line.last().map_or(1.0, |r| (r.m as f64).log2()).max(1.0);
        let (mode, format, n, k) = key;
        PerRow {
            title: format!("{format} {n}x{k} {mode}: time per row against M"),
            series,
            x: (0.0, x_hi.ceil()),
            y: (lo.floor() - 0.25, hi.ceil() + 0.25),
        }
    }
}

/// A power of two from its log2, as a short number ("0.25", "4", "1024").
fn pow2_label(v: f64) -> String {
    let x = 2f64.powf(v);
    if x >= 1.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}").trim_end_matches('0').to_string()
    }
}

impl Draw for PerRow {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let axes = Axes {
            title: self.title.clone(),
            x: self.x,
            y: self.y,
            x_desc: "M (rows, log2 axis)".into(),
            y_desc: "microseconds per row (log2 axis)".into(),
            x_step: 1.0,
            y_step: 1.0,
            x_format: &pow2_label,
            y_format: &pow2_label,
        };
        let mut chart = axes.build(root, 20)?;
        lines(&mut chart, &self.series)?;
        series_legend(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

const PLOT: (u32, u32) = (960, 560);

/// One (bucket map, bucket, series) of `buckets.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketRow {
    pub map: String,
    pub lo: usize,
    /// The bucket's last measured M (the last bucket is unbounded above).
    pub hi: usize,
    pub mode: String,
    pub source_format: String,
    pub n: usize,
    pub k: usize,
    pub candidate: String,
    pub worst_regret: f64,
}

/// A bucket map named for the report: the first M of each bucket from M = 2 up.
pub struct BucketMap {
    pub name: String,
    pub starts: Vec<usize>,
}

/// The bucket maps a dense report judges beside the learned one: the sweep's default grouped
/// M values (one bucket from each) and the policy's.
pub fn bucket_maps(policy: Option<&vnni_policy::Policy>) -> Vec<BucketMap> {
    let grouped = vnni_kernels::registry::GROUPED_M.to_vec();
    let mut maps = vec![BucketMap { name: "GROUPED_M (2..16, 31)".into(), starts: grouped }];
    if let Some(p) = policy {
        let starts = p.m_buckets.iter().map(|b| b.lo as usize).filter(|&m| m >= 2).collect();
        maps.push(BucketMap { name: "the policy's".into(), starts });
    }
    maps
}

/// The M-bucket section: the learned map and every given one judged on `timing`.
fn bucket_section(timing: &[TimingRow], maps: &[BucketMap], md: &mut String) -> Vec<BucketRow> {
    let t = times(timing);
    if t.is_empty() {
        return Vec::new();
    }
    let learned = learn_buckets(&t, BEHIND_LIMIT);
    let starts: Vec<String> = learned.iter().map(|b| b.lo.to_string()).collect();
    let grouped: Vec<String> = grouped_starts(timing).iter().map(|m| m.to_string()).collect();
    let _ = writeln!(
        md,
        "## M buckets learned from these measurements

The fewest buckets of the measured M values in which every series has one candidate within \
         {:.0}% of the fastest at every M of the bucket (greedy from M = 2; `buckets.csv` has each series' candidate). \
         Bucket starts: **{}**. A sweep that measures these M values gives a policy these buckets: \
         `sweep --m-buckets-from` with these files times the grouped rows at M = {} (the starts \
         below 32; prefill buckets are not swept from them).\n",
        100.0 * BEHIND_LIMIT,
        starts.join(", "),
        if grouped.is_empty() { "none (no M in 2..32 measured)".to_string() } else { grouped.join(", ") }
    );
    let _ = writeln!(md, "| bucket map | buckets | worst regret of its best single candidate per (series, bucket) | where |\n|---|---|---|---|");
    let mut judged = vec![("learned".to_string(), learned)];
    judged.extend(maps.iter().map(|m| (m.name.clone(), judge_buckets(&t, &m.starts))));
    // Out of sample: each shape judged on the map learned from the other shapes' series.
    let shapes: std::collections::BTreeSet<(usize, usize)> = t.keys().map(|k| (k.2, k.3)).collect();
    if shapes.len() > 1 {
        for &(n, k) in &shapes {
            let (held, rest): (Times, Times) = t.clone().into_iter().partition(|(key, _)| (key.2, key.3) == (n, k));
            let starts: Vec<usize> = learn_buckets(&rest, BEHIND_LIMIT).iter().map(|b| b.lo).collect();
            judged.push((format!("learned without {n}x{k}, judged on it"), judge_buckets(&held, &starts)));
        }
    }
    let mut rows = Vec::new();
    for (name, buckets) in &judged {
        let worst = buckets.iter().flat_map(|b| b.picks.iter().map(move |(k, p)| (p.1, b, k))).reduce(|w, x| {
            if w.0 >= x.0 {
                w
            } else {
                x
            }
        });
        let (regret, place) = worst.map_or((0.0, String::new()), |(r, b, (mode, f, n, k))| {
            let pick = &b.picks[&(mode.clone(), f.clone(), *n, *k)].0;
            let pick = if r.is_finite() { pick.as_str() } else { "no single candidate was timed at every M" };
            (r, format!("{f} {n}x{k} {mode}, M {}..{}: {pick}", b.lo, b.hi))
        });
        let _ = writeln!(md, "| {name} | {} | {:.1}% | {place} |", buckets.len(), 100.0 * regret);
        for b in buckets {
            for ((mode, f, n, k), (cand, r)) in &b.picks {
                rows.push(BucketRow {
                    map: name.clone(),
                    lo: b.lo,
                    hi: b.hi,
                    mode: mode.clone(),
                    source_format: f.clone(),
                    n: *n,
                    k: *k,
                    candidate: cand.clone(),
                    worst_regret: *r,
                });
            }
        }
    }
    let _ = writeln!(md);
    rows
}

/// `dense-m.md`, `cliffs.csv`, a chart per series and, given every candidate's rows
/// (`timing`), the M buckets learned from them beside `maps` (`buckets.csv`) into `out`;
/// the files written.
pub fn write_report(
    rows: &[DenseMRow],
    timing: &[TimingRow],
    maps: &[BucketMap],
    sources: &[PathBuf],
    out: &Path,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out)
        .map_err(|e| crate::error::FitError::Report { path: out.into(), message: e.to_string() })?;
    let mut files = Vec::new();
    let all = cliffs(rows);
    let cliffs_csv = out.join("cliffs.csv");
    vnni_corpus::write_csv(&cliffs_csv, &all)?;
    files.push(cliffs_csv);
    let mut md = String::from("# Dense-M report\n\n");
    let names: Vec<String> = sources.iter().map(|p| format!("`{}`", p.display())).collect();
    let _ = writeln!(
        md,
        "From {}. At every M >= 2 the candidates run at the bpp of the M = 1 identity (the policy's M = 1 pick, or \
         the fastest decode candidate without a policy); \"fastest\" is the fastest of them that racing kept. A \
         step is a cliff when time(next M) / time(M) exceeds {STEP_LIMIT} x max(1, next M / (M + 1)) (adjacent M: \
         {STEP_LIMIT}); a dispatched candidate is a cliff when it is more than {:.0}% behind the fastest, or has no \
         time. Every cliff is in `cliffs.csv`.\n",
        names.join(", "),
        100.0 * BEHIND_LIMIT
    );
    md.push_str(&summary_table(rows));
    let grouped = series(rows);
    let _ = writeln!(md, "\n## Cliffs\n");
    if all.is_empty() {
        let _ = writeln!(md, "None.\n");
    } else {
        let _ = writeln!(md, "| mode | format | N x K | kind | whose | M | next M | ratio | limit | from | to | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|");
        for c in &all {
            let next = c.next_m.map_or_else(|| "-".into(), |m| m.to_string());
            let _ = writeln!(
                md,
                "| {} | {} | {}x{} | {} | {} | {} | {next} | {:.2} | {:.2} | {} | {} | {} |",
                c.mode, c.source_format, c.n, c.k, c.kind, c.whose, c.m, c.ratio, c.limit, c.from, c.to, c.note
            );
        }
        let _ = writeln!(md);
    }
    let buckets = bucket_section(timing, maps, &mut md);
    if !buckets.is_empty() {
        let path = out.join("buckets.csv");
        vnni_corpus::write_csv(&path, &buckets)?;
        files.push(path);
    }
    let _ = writeln!(md, "## Series\n");
    for (key, line) in &grouped {
        let (mode, format, n, k) = key;
        let stem = format!("dense-m-{mode}-{format}-{n}x{k}").to_lowercase();
        files.extend(chart::write(&PerRow::new(key, line), PLOT, out, &stem)?);
        let _ = writeln!(md, "### {format} {n}x{k} {mode}\n\n![time per row]({stem}.png) ([SVG]({stem}.svg))\n");
        let changes = best_changes(line);
        if !changes.is_empty() {
            let text: Vec<String> = changes.iter().map(|(a, b, f, t)| format!("{a} -> {b}: {f} -> {t}")).collect();
            let _ = writeln!(md, "Where the fastest candidate changes (M before -> M after): {}.\n", text.join("; "));
        }
    }
    let path = out.join("dense-m.md");
    vnni_corpus::write_bytes(&path, md.as_bytes())?;
    files.push(path);
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vnni_kernels::{CandidateId, Mode, SourceFormat};

    fn id(s: &str) -> CandidateId {
        s.parse().unwrap()
    }

    fn row(m: usize, best: &str, best_us: f64, dispatched: Option<(&str, Option<f64>)>) -> DenseMRow {
        DenseMRow {
            mode: Mode::Graph,
            source_format: SourceFormat::Q4_0,
            codebook: SourceFormat::Q4_0.codebook(),
            n: 4096,
            k: 4096,
            m,
            m1_candidate: id("decode.wide.tn128.cpt2"),
            bpp: 128,
            timed: 3,
            best: id(best),
            best_us,
            dispatched: dispatched.map(|(d, _)| id(d)),
            dispatched_us: dispatched.and_then(|(_, t)| t),
            note: String::new(),
        }
    }

    #[test]
    fn steps_are_judged_by_the_rows_they_add() {
        assert_eq!(step_allowed(8, 9), STEP_LIMIT);
        assert!((step_allowed(64, 80) - STEP_LIMIT * 80.0 / 65.0).abs() < 1e-12);
        // Doubling M may double a compute-bound time, and a little more.
        assert!(step_allowed(512, 1024) > 2.0 * STEP_LIMIT - 0.01);
    }

    #[test]
    fn cliffs_find_steps_behind_and_untimed_picks() {
        let r8 = "grouped.rows.r8";
        let r16 = "grouped.rows.r16";
        let rows = vec![
            row(8, r8, 10.0, Some((r8, Some(10.0)))),
            // the dispatched r8 needs a second pass at M = 9: 1.9x; the best steps by 1.1x
            row(9, r16, 11.0, Some((r8, Some(19.0)))),
            row(10, r16, 11.5, Some((r8, Some(19.5)))),
            row(11, r16, 12.0, Some((r8, None))),
        ];
        let found = cliffs(&rows);
        let kinds: Vec<(&str, &str, usize)> = found.iter().map(|c| (c.kind, c.whose, c.m)).collect();
        assert_eq!(
            kinds,
            vec![
                ("behind", "dispatched", 9),
                ("behind", "dispatched", 10),
                ("untimed", "dispatched", 11),
                ("step", "dispatched", 8),
            ]
        );
        assert!((found[3].ratio - 1.9).abs() < 1e-12);
        assert_eq!((found[3].from.as_str(), found[3].to.as_str()), (r8, r8));
        // a healthy series has none, and rows without a policy are judged on the best alone
        let healthy = vec![row(8, r8, 10.0, Some((r8, Some(10.2)))), row(9, r8, 11.0, Some((r8, Some(11.0))))];
        assert!(cliffs(&healthy).is_empty());
        let unpoliced = vec![row(1, "decode.wide.tn128.cpt2", 10.0, None), row(2, r8, 12.5, None)];
        let c = cliffs(&unpoliced);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].kind, c[0].whose, c[0].next_m), ("step", "best", Some(2)));
    }

    #[test]
    fn summaries_and_changes_follow_the_rows_in_m_order() {
        let r8 = "grouped.rows.r8";
        let imma = "grouped.imma.16x128.w1x4.std";
        let rows = vec![
            row(10, imma, 11.0, Some((r8, Some(12.0)))),
            row(8, r8, 10.0, Some((r8, Some(10.0)))),
            row(9, imma, 10.5, Some((r8, Some(19.0)))),
        ];
        let s = series(&rows);
        let line = &s[&("graph".to_string(), "Q4_0".to_string(), 4096, 4096)];
        assert_eq!(line.iter().map(|r| r.m).collect::<Vec<_>>(), vec![8, 9, 10]);
        assert_eq!(best_changes(line), vec![(8, 9, r8, imma)]);
        let sum = summarize(line);
        assert_eq!(summarize(&line[..1]).worst_best_step, None, "one M has no step");
        assert_eq!(sum.ms, 3);
        assert_eq!(sum.within, 1);
        assert_eq!(sum.worst_behind.unwrap().1, 9);
        assert!((sum.worst_dispatched_step.unwrap().0 - 1.9 / STEP_LIMIT).abs() < 1e-12);
    }

    #[test]
    fn the_report_draws_every_series_and_lists_every_cliff() {
        let dir = std::env::temp_dir().join(format!("vnni-dense-m-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let r8 = "grouped.rows.r8";
        let rows = vec![row(8, r8, 10.0, Some((r8, Some(10.0)))), row(9, r8, 19.0, Some((r8, Some(19.0))))];
        let files = write_report(&rows, &[], &[], &[PathBuf::from("dense-m.csv")], dir.as_path()).unwrap();
        let names: Vec<String> = files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(
            names,
            ["cliffs.csv", "dense-m-graph-q4_0-4096x4096.png", "dense-m-graph-q4_0-4096x4096.svg", "dense-m.md"]
        );
        let md = std::fs::read_to_string(dir.as_path().join("dense-m.md")).unwrap();
        assert!(md.contains("| graph | Q4_0 | 4096x4096 | step | best | 8 | 9 | 1.90 | 1.20 |"), "{md}");
        let csv = std::fs::read_to_string(dir.as_path().join("cliffs.csv")).unwrap();
        assert_eq!(csv.lines().count(), 3, "{csv}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn timed(m: usize, cands: &[(&str, f64)]) -> Vec<TimingRow> {
        cands
            .iter()
            .map(|(c, t)| {
                let mut r = timing_row();
                r.m = m;
                r.candidate = id(c);
                r.median_us = *t;
                r
            })
            .collect()
    }

    fn timing_row() -> TimingRow {
        TimingRow {
            source_format: Some(SourceFormat::Q4_0),
            backend: "cuda".parse().unwrap(),
            arch: "sm_90".into(),
            device: "NVIDIA H200".into(),
            mode: Mode::Graph,
            codebook: Some(SourceFormat::Q4_0.codebook()),
            m: 2,
            n: 4096,
            k: 4096,
            candidate: id("grouped.rows.r2"),
            m1_candidate: Some(id("decode.wide.tn128.cpt2")),
            bpp: 128,
            warmups: 2,
            samples: 8,
            replays: 1,
            weight_copies: 1,
            seed: 7,
            min_us: 1.0,
            median_us: 1.0,
            p95_us: 1.0,
            mad_us: 0.0,
            cv: 0.0,
            weight_bytes: 1 << 20,
            gbps: 1.0,
            pct_copy_bw: 1.0,
            checked: 64,
            mismatches: 0,
            first_mismatch: String::new(),
            eligible: true,
            dropped: false,
            registers: 64,
            occupancy_blocks_per_sm: 4,
        }
    }

    #[test]
    fn buckets_are_placed_where_the_fastest_candidate_changes() {
        let (a, b, c) = ("grouped.rows.r8", "grouped.imma.16x128.w1x4.std", "grouped.imma.32x128.w1x4.std");
        let mut rows = Vec::new();
        // a wins 2..=8, b 9..=16 (a 1.5x behind there), c from 17 (b 2x behind: a second tile)
        for m in 2..=8 {
            rows.extend(timed(m, &[(a, 10.0), (b, 10.3), (c, 14.0)]));
        }
        for m in 9..=16 {
            rows.extend(timed(m, &[(a, 15.0), (b, 10.0), (c, 12.0)]));
        }
        for m in 17..=32 {
            rows.extend(timed(m, &[(a, 30.0), (b, 20.0), (c, 10.0)]));
        }
        let t = times(&rows);
        let learned = learn_buckets(&t, 0.05);
        let spans: Vec<(usize, usize)> = learned.iter().map(|b| (b.lo, b.hi)).collect();
        // b is within 3% on 2..=8, so one bucket serves 2..=16
        assert_eq!(spans, vec![(2, 16), (17, 32)]);
        assert!(learned.iter().all(|b| b.worst() <= 0.05));
        assert_eq!(learned[0].picks.values().next().unwrap().0, b);
        // the fixed map {2, 4, 8, 16, 31}: its bucket 16..30 straddles the change at 17
        let fixed = judge_buckets(&t, &[2, 4, 8, 16, 31]);
        assert_eq!(
            fixed.iter().map(|b| (b.lo, b.hi)).collect::<Vec<_>>(),
            vec![(2, 3), (4, 7), (8, 15), (16, 30), (31, 32)]
        );
        assert!((fixed[2].worst() - 0.03).abs() < 1e-9, "8..15 with b: 3% at M = 8");
        assert!((fixed[3].worst() - 0.2).abs() < 1e-9, "16..30: c, 20% behind b at M = 16");
        // starts below 2 (M = 1 is the decode bucket) are ignored, not underflowed
        assert_eq!(judge_buckets(&t, &[0, 1, 2, 17]), judge_buckets(&t, &[2, 17]));
        // a candidate missing at some M of the bucket cannot serve it
        let mut gap = rows.clone();
        gap.retain(|r| !(r.m == 12 && r.candidate.as_str() == b));
        let t = times(&gap);
        assert_eq!(bucket_pick(t.values().next().unwrap(), &[11, 12, 13]).unwrap().0, c);
    }

    #[test]
    fn grouped_starts_are_the_learned_starts_below_the_prefill_surface() {
        let (a, b, c, d) = (
            "grouped.rows.r8",
            "grouped.imma.16x128.w1x4.std",
            "grouped.imma.32x128.w1x4.std",
            "grouped.imma.32x128.w1x4.kpart",
        );
        let mut rows = Vec::new();
        for m in 2..=40 {
            let at = match m {
                2..=8 => [10.0, 15.0, 20.0, 20.0],
                9..=16 => [15.0, 10.0, 12.0, 12.0],
                17..=35 => [30.0, 20.0, 10.0, 11.0],
                _ => [30.0, 20.0, 12.0, 10.0],
            };
            rows.extend(timed(m, &[(a, at[0]), (b, at[1]), (c, at[2]), (d, at[3])]));
        }
        let every: Vec<usize> = learn_buckets(&times(&rows), BEHIND_LIMIT).iter().map(|b| b.lo).collect();
        assert_eq!(every, vec![2, 9, 17, 36]);
        assert_eq!(grouped_starts(&rows), vec![2, 9, 17]);
        // only prefill M measured: nothing to learn for the grouped surface
        rows.retain(|r| r.m >= 32);
        assert!(grouped_starts(&rows).is_empty());
    }

    #[test]
    fn each_shape_is_also_judged_on_buckets_learned_without_it() {
        let (a, b) = ("grouped.rows.r8", "grouped.imma.16x128.w1x4.std");
        let mut rows = Vec::new();
        for (n, edge) in [(4096, 9), (8192, 13)] {
            for m in 2..=16 {
                let (ta, tb) = if m < edge { (10.0, 12.0) } else { (15.0, 10.0) };
                rows.extend(timed(m, &[(a, ta), (b, tb)]).into_iter().map(|mut r| {
                    r.n = n;
                    r
                }));
            }
        }
        let mut md = String::new();
        let judged = bucket_section(&rows, &[BucketMap { name: "one bucket".into(), starts: vec![2] }], &mut md);
        assert!(md.contains("Bucket starts: **2, 9, 13**"), "{md}");
        assert!(
            md.contains("`sweep --m-buckets-from` with these files times the grouped rows at M = 2, 9, 13 "),
            "{md}"
        );
        // learned on 8192 alone (edge 13), 4096 (edge 9) gets one of 2..12 with b: 20% at M < 9
        assert!(
            md.contains("| learned without 4096x4096, judged on it | 2 | 20.0% | Q4_0 4096x4096 graph, M 2..12:"),
            "{md}"
        );
        assert!(
            md.contains("| learned without 8192x4096, judged on it | 2 | 20.0% | Q4_0 8192x4096 graph, M 9..16:"),
            "{md}"
        );
        assert!(md.contains("| learned | 3 | 0.0% |"), "{md}");
        assert!(md.contains("| one bucket | 1 | 20.0% |"), "{md}");
        assert!(judged.iter().any(|r| r.map == "learned" && r.lo == 9 && r.hi == 12));
    }
}
