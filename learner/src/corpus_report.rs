//! The corpus report (`vnni-dispatch report`): `report.md` and charts (PNG and SVG) from a sealed corpus and,
//! optionally, a fitted policy.
//!
//! - Bandwidth: per codebook, the fastest eligible decode (M = 1) candidate of every alias cell
//!   in GB/s over the weight bytes, against the measured copy roofline of the run
//!   (`gbps / (pct_copy_bw / 100)`), with a table of % of that roofline.
//! - Regret CDFs per domain group (codebook x decode/grouped): the learner's cross-validated
//!   policy and its three baselines on the same held-out rows, plus the given policy's
//!   in-sample regret (overlays on) over every cell; and one CDF per codebook.
//! - Decision maps through [`crate::map::write_maps`].
//!
//! Every image is drawn with [`crate::chart`] (title, labelled axes and legend in the image,
//! PNG and SVG); the Markdown beside it gives the numbers.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use vnni_corpus::collection::PHASES;
use vnni_corpus::read::{read_timing, BASELINES};
use vnni_corpus::write_bytes;
use vnni_policy::{Policy, Surface};

use plotters::coord::Shift;
use plotters::prelude::{Circle, DrawingArea, DrawingBackend, EmptyElement, SeriesLabelPosition};
use plotters::style::Color;

use crate::chart::{
    self, err, legend, legend_height, lines, rgb, series_legend, tick_step, Axes, Draw, Rgb, Series, BLACK, GATE,
    PALETTE,
};
use crate::corpus::{load, Corpus};
use crate::cv::METHODS;
use crate::error::Result;
use crate::in_sample::{in_sample, surface_name, Group, InSample};
use crate::map::write_maps;
use crate::regret_stats::{geomean, nearest_rank, p95};
use crate::report::{pct, BASELINES_LEGEND};
use crate::{fit, FitOptions};

/// Codebooks whose decision maps the report draws (the first ones, sorted by name).
const MAP_CODEBOOKS: usize = 3;
/// Small multiples of the regret CDFs: panels per row and panel size in pixels.
pub const PANELS_PER_ROW: usize = 4;
pub const PANEL: (u32, u32) = (360, 250);
/// Legend entries per row under the small multiples.
const LEGEND_COLUMNS: usize = 3;
/// A single-panel chart (bandwidth per codebook, CDF per codebook).
pub const PLOT: (u32, u32) = (800, 450);
/// Room left and right of the bandwidth plots' outermost octaves, so edge dots are whole.
const PAD_OCTAVES: f64 = 0.25;

/// The fastest eligible decode candidate of one alias cell (source format, mode, N, K).
#[derive(Debug, Clone)]
struct CellBest {
    n: usize,
    k: usize,
    weight_bytes: usize,
    median_us: f64,
    gbps: f64,
    /// % of the run's measured copy bandwidth; `None` where the corpus has none.
    pct_copy: Option<f64>,
    candidate: String,
}

impl CellBest {
    /// The copy bandwidth this row was measured against.
    fn copy_gbps(&self) -> Option<f64> {
        self.pct_copy.map(|p| self.gbps / (p / 100.0))
    }
}

/// One plotted series: a codebook's alias (source format) in one mode.
type SeriesKey = (String, String);

/// Per codebook, per (source format, mode), the best of every decode cell, by weight bytes.
fn decode_bests(dir: &Path) -> Result<BTreeMap<String, BTreeMap<SeriesKey, Vec<CellBest>>>> {
    let mut best: BTreeMap<(String, SeriesKey, usize, usize), CellBest> = BTreeMap::new();
    for phase in PHASES.iter().filter(|p| p.starts_with("decode_m1")) {
        for r in read_timing(&dir.join(format!("{phase}.csv")))? {
            if r.m != 1 || !r.eligible || BASELINES.contains(&r.candidate.as_str()) {
                continue;
            }
            let row = CellBest {
                n: r.n,
                k: r.k,
                weight_bytes: r.weight_bytes,
                median_us: r.median_us,
                gbps: r.gbps,
                pct_copy: (r.pct_copy_bw > 0.0).then_some(r.pct_copy_bw),
                candidate: r.candidate.to_string(),
            };
            let word = |w: Option<String>| w.unwrap_or_else(|| "-".into());
            let series = (word(r.source_format.map(|f| f.to_string())), r.mode.to_string());
            let key = (word(r.codebook.map(|c| c.to_string())), series, r.n, r.k);
            // Strictly faster replaces: of equal medians the first row (registry order) stays.
            match best.get(&key) {
                Some(b) if b.median_us <= row.median_us => {}
                _ => {
                    best.insert(key, row);
                }
            }
        }
    }
    let mut out: BTreeMap<String, BTreeMap<SeriesKey, Vec<CellBest>>> = BTreeMap::new();
    for ((codebook, series, ..), b) in best {
        out.entry(codebook).or_default().entry(series).or_default().push(b);
    }
    for b in out.values_mut().flat_map(|s| s.values_mut()) {
        b.sort_by_key(|x| (x.weight_bytes, x.n, x.k));
    }
    Ok(out)
}

/// A byte count in MiB with one decimal, for the tables.
fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// A byte count at a power of two, for axis labels: "512 KiB", "4 MiB", "1.5 GiB".
fn bytes_label(log2_bytes: f64) -> String {
    let b = 2f64.powf(log2_bytes);
    let (v, unit) = if b >= (1u64 << 30) as f64 {
        (b / (1u64 << 30) as f64, "GiB")
    } else if b >= (1 << 20) as f64 {
        (b / (1 << 20) as f64, "MiB")
    } else {
        (b / 1024.0, "KiB")
    };
    if (v - v.round()).abs() < 0.05 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

/// One codebook's bandwidth chart: a dot per alias cell (x = weight bytes on a log2 axis,
/// y = GB/s from 0) coloured by series, and the median copy roofline as a black line.
struct Bandwidth {
    codebook: String,
    series: Vec<Series>,
    roofline: Option<f64>,
    x: (f64, f64),
    y_hi: f64,
    y_step: f64,
}

impl Bandwidth {
    fn new(codebook: &str, series: &BTreeMap<SeriesKey, Vec<CellBest>>, roofline: Option<f64>) -> Bandwidth {
        let log_bytes = |b: &CellBest| (b.weight_bytes.max(1) as f64).log2();
        let all: Vec<&CellBest> = series.values().flatten().collect();
        let x_lo = all.iter().map(|b| log_bytes(b)).fold(f64::INFINITY, f64::min).floor();
        let x_hi = all.iter().map(|b| log_bytes(b)).fold(f64::NEG_INFINITY, f64::max).ceil().max(x_lo + 1.0);
        let peak = all.iter().map(|b| b.gbps).fold(roofline.unwrap_or(0.0), f64::max).max(1e-9);
        let y_step = tick_step(peak * 1.05, 8);
        let series = series
            .iter()
            .enumerate()
            .map(|(i, ((format, mode), points))| Series {
                label: format!("{format} {mode}"),
                colour: PALETTE[i % PALETTE.len()],
                points: points.iter().map(|b| (log_bytes(b), b.gbps)).collect(),
            })
            .collect();
        Bandwidth {
            codebook: codebook.to_string(),
            series,
            roofline,
            x: (x_lo - PAD_OCTAVES, x_hi + PAD_OCTAVES),
            y_hi: (peak * 1.05 / y_step).ceil() * y_step,
            y_step,
        }
    }
}

impl Draw for Bandwidth {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let axes = Axes {
            title: format!("{}: fastest decode candidate per shape (M = 1)", self.codebook),
            x: self.x,
            y: (0.0, self.y_hi),
            x_desc: "weight bytes (log2 axis)".into(),
            y_desc: "effective GB/s".into(),
            x_step: 1.0,
            y_step: self.y_step,
            x_format: &bytes_label,
            y_format: &|v| format!("{v:.0}"),
        };
        let mut chart = axes.build(root, 22)?;
        if let Some(r) = self.roofline {
            lines(
                &mut chart,
                &[Series {
                    label: format!("copy roofline {r:.0} GB/s"),
                    colour: BLACK,
                    points: vec![(self.x.0, r), (self.x.1, r)],
                }],
            )?;
        }
        for s in &self.series {
            let colour = rgb(s.colour);
            chart
                .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                .map_err(err)?
                .label(s.label.as_str())
                .legend(move |(x, y)| EmptyElement::at((x + 9, y)) + Circle::new((0, 0), 4, colour.filled()));
        }
        series_legend(&mut chart, SeriesLabelPosition::LowerRight)
    }
}

/// The bandwidth section: per codebook a PNG and its legend, then the tables.
fn bandwidth_section(dir: &Path, out: &Path, md: &mut String, files: &mut Vec<PathBuf>) -> Result<()> {
    let bests = decode_bests(dir)?;
    let _ = writeln!(md, "## Decode bandwidth vs the measured copy roofline\n");
    let _ = writeln!(
        md,
        "Each dot is one decode (M = 1) cell: the fastest candidate whose bits matched the reference, \
         at its effective GB/s (weight bytes / median latency). The black line is the copy bandwidth measured \
         in the same run (`gbps / (pct_copy_bw / 100)`; the median over the codebook's cells). \
         Development and sealed shapes are both shown.\n"
    );
    if bests.is_empty() {
        let _ = writeln!(md, "The corpus has no eligible decode rows.\n");
        return Ok(());
    }
    let mut summary = String::from("| codebook | source format | mode | cells | median % copy | min % copy (N x K) | max % copy |\n|---|---|---|---|---|---|---|\n");
    let mut largest = String::from("| codebook | source format | mode | N x K | weight | best candidate | GB/s | % copy |\n|---|---|---|---|---|---|---|---|\n");
    for (codebook, series) in &bests {
        let copies: Vec<f64> = series.values().flatten().filter_map(CellBest::copy_gbps).collect();
        let roofline = nearest_rank(&copies, 0.5);
        let stem = format!("bandwidth-{codebook}");
        files.extend(chart::write(&Bandwidth::new(codebook, series, roofline), PLOT, out, &stem)?);
        let _ = writeln!(md, "### {codebook}\n\n![{codebook} decode bandwidth]({stem}.png) ([SVG]({stem}.svg))\n");
        match (roofline, nearest_rank(&copies, 1e-9), nearest_rank(&copies, 1.0)) {
            (Some(r), Some(lo), Some(hi)) if hi > lo * 1.01 => {
                let _ = writeln!(md, "Copy roofline {r:.1} GB/s (runs measured {lo:.1} to {hi:.1} GB/s).\n");
            }
            (Some(r), ..) => {
                let _ = writeln!(md, "Copy roofline {r:.1} GB/s.\n");
            }
            _ => {
                let _ = writeln!(md, "The corpus has no copy bandwidth for this codebook: no roofline.\n");
            }
        }
        for ((format, mode), points) in series {
            let pcts: Vec<f64> = points.iter().filter_map(|b| b.pct_copy).collect();
            let worst = points
                .iter()
                .filter(|b| b.pct_copy.is_some())
                .min_by(|a, b| a.pct_copy.unwrap().total_cmp(&b.pct_copy.unwrap()));
            let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}%"));
            let _ = writeln!(
                summary,
                "| {codebook} | {format} | {mode} | {} | {} | {} | {} |",
                points.len(),
                show(nearest_rank(&pcts, 0.5)),
                worst.map_or("-".into(), |w| format!("{} ({} x {})", show(w.pct_copy), w.n, w.k)),
                show(nearest_rank(&pcts, 1.0)),
            );
            for b in points.iter().rev().take(3) {
                let _ = writeln!(
                    largest,
                    "| {codebook} | {format} | {mode} | {} x {} | {} | {} | {:.1} | {} |",
                    b.n,
                    b.k,
                    mib(b.weight_bytes),
                    b.candidate,
                    b.gbps,
                    show(b.pct_copy)
                );
            }
        }
    }
    let _ = writeln!(md, "### % of the copy roofline over shapes\n\n{summary}");
    let _ = writeln!(md, "### The three largest shapes of each series\n\n{largest}");
    Ok(())
}

/// One CDF curve: its label, colour and regrets.
struct Curve {
    label: String,
    colour: Rgb,
    regrets: Vec<f64>,
    /// A policy's curve (not a baseline's): the plot's x range is chosen to show it.
    policy: bool,
}

/// The x range of a CDF plot (regret as a fraction) and its grid step: covering the p95 of
/// the `policy` curves with room, at least twice the gate, at most 100%; larger regrets (the
/// baselines' tails) sit on the right edge.
fn regret_range(curves: &[&Curve], gate: f64) -> (f64, f64) {
    let worst = curves.iter().filter(|c| c.policy).map(|c| p95(&c.regrets)).fold(0.0, f64::max);
    let hi = (worst * 1.25).clamp(2.0 * gate, 1.0);
    let step = tick_step(hi, 10);
    ((hi / step).ceil() * step, step)
}

/// The step CDF of `regrets` as % regret x fraction of cells; regrets beyond `x_hi` sit on
/// the right edge.
fn cdf_points(regrets: &[f64], x_hi: f64) -> Vec<(f64, f64)> {
    let mut v = regrets.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut points = vec![(0.0, 0.0)];
    for (i, r) in v.iter().enumerate() {
        let x = r.min(x_hi) * 100.0;
        points.push((x, i as f64 / n));
        points.push((x, (i + 1) as f64 / n));
    }
    points.push((x_hi * 100.0, 1.0));
    points.dedup();
    points
}

/// The legend entry of the gate line.
fn gate_label(gate: f64) -> String {
    format!("p95 gate {}", pct(gate))
}

/// One panel of regret CDFs: its axes at `x_hi`, the gate line, the curves in order (the last
/// on top); the legend in the chart when `with_legend`.
fn draw_cdf_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: String,
    curves: &[&Curve],
    gate: f64,
    title_px: u32,
    with_legend: bool,
) -> Result<(), String> {
    let (x_hi, x_step) = regret_range(curves, gate);
    let axes = Axes {
        title,
        x: (0.0, x_hi * 100.0),
        y: (0.0, 1.0),
        x_desc: "regret vs the fastest candidate (%)".into(),
        y_desc: "fraction of cells".into(),
        x_step: x_step * 100.0,
        y_step: 0.25,
        x_format: &|v| format!("{v:.0}"),
        y_format: &|v| format!("{v:.2}"),
    };
    let mut chart = axes.build(area, title_px)?;
    let mut series =
        vec![Series { label: gate_label(gate), colour: GATE, points: vec![(gate * 100.0, 0.0), (gate * 100.0, 1.0)] }];
    series.extend(curves.iter().map(|c| Series {
        label: c.label.clone(),
        colour: c.colour,
        points: cdf_points(&c.regrets, x_hi),
    }));
    lines(&mut chart, &series)?;
    if with_legend {
        series_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    }
    Ok(())
}

/// The small multiples: one panel per domain group, the legend under them.
struct CdfPanels<'a> {
    per_group: &'a [(Group, Vec<Curve>)],
    gate: f64,
    cols: usize,
}

impl CdfPanels<'_> {
    fn legend(&self) -> Vec<(String, Rgb)> {
        let mut entries = vec![(gate_label(self.gate), GATE)];
        entries.extend(self.per_group[0].1.iter().rev().map(|c| (c.label.clone(), c.colour)));
        entries
    }

    /// Legend entries per row: no more than there are panel columns to hold them.
    fn legend_columns(&self) -> usize {
        LEGEND_COLUMNS.min(self.cols)
    }

    fn size(&self) -> (u32, u32) {
        let rows = self.per_group.len().div_ceil(self.cols) as u32;
        (self.cols as u32 * PANEL.0, rows * PANEL.1 + legend_height(self.legend().len(), self.legend_columns()))
    }
}

impl Draw for CdfPanels<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let rows = self.per_group.len().div_ceil(self.cols);
        let (panels, bottom) = root.split_vertically(rows as u32 * PANEL.1);
        let areas = panels.split_evenly((rows, self.cols));
        for (((codebook, surface), curves), area) in self.per_group.iter().zip(&areas) {
            let drawn: Vec<&Curve> = curves.iter().filter(|c| !c.regrets.is_empty()).collect();
            draw_cdf_panel(area, format!("{codebook} {surface}"), &drawn, self.gate, 17, false)?;
        }
        legend(&bottom, &self.legend(), self.legend_columns())
    }
}

/// One CDF per codebook in one chart.
struct CodebookCdf<'a> {
    curves: &'a [Curve],
    whose: &'a str,
    gate: f64,
}

impl Draw for CodebookCdf<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let drawn: Vec<&Curve> = self.curves.iter().filter(|c| !c.regrets.is_empty()).collect();
        draw_cdf_panel(root, format!("Regret per codebook: {}", self.whose), &drawn, self.gate, 22, true)
    }
}

/// What every CDF chart's Markdown says about its axes.
fn cdf_axes() -> &'static str {
    "x: regret of the chosen candidate against the fastest one in the cell, y: fraction of cells at or below it; \
     regrets beyond the x range sit on the right edge"
}

/// The learner's held-out regrets per group and method (`cv::METHODS` order).
fn heldout_by_group(fitted: &crate::Fit) -> BTreeMap<Group, [Vec<f64>; crate::cv::METHOD_COUNT]> {
    let mut out: BTreeMap<Group, [Vec<f64>; crate::cv::METHOD_COUNT]> = BTreeMap::new();
    for d in &fitted.domains {
        let Some(h) = &d.heldout else { continue };
        let decode = fitted.policy.m_buckets[d.key.bucket].surface == Surface::Decode;
        let entry = out.entry((d.key.codebook.clone(), surface_name(decode))).or_default();
        for (m, rows) in h.rows.iter().enumerate() {
            entry[m].extend(rows.iter().map(|r| r.0));
        }
    }
    out
}

/// The curves of every group: the baselines first, the policies last (drawn on top).
fn group_curves(
    heldout: &BTreeMap<Group, [Vec<f64>; crate::cv::METHOD_COUNT]>,
    given: &[(&str, InSample)],
) -> Vec<(Group, Vec<Curve>)> {
    let groups: std::collections::BTreeSet<&Group> =
        heldout.keys().chain(given.iter().flat_map(|g| g.1.by_group.keys())).collect();
    groups
        .into_iter()
        .map(|g| {
            let mut curves = Vec::new();
            for m in (0..METHODS.len()).rev() {
                let regrets = heldout.get(g).map(|h| h[m].clone()).unwrap_or_default();
                let label = if m == 0 { "policy (cross-validated)".to_string() } else { METHODS[m].to_string() };
                curves.push(Curve { label, colour: PALETTE[m], regrets, policy: m == 0 });
            }
            for (i, (label, s)) in given.iter().enumerate() {
                let regrets = s.by_group.get(g).cloned().unwrap_or_default();
                curves.push(Curve {
                    label: label.to_string(),
                    colour: PALETTE[METHODS.len() + i],
                    regrets,
                    policy: true,
                });
            }
            (g.clone(), curves)
        })
        .collect()
}

/// The small multiples (one panel per group, each with its own x range) and their table.
fn small_multiples(per_group: &[(Group, Vec<Curve>)], gate: f64, out: &Path, md: &mut String) -> Result<Vec<PathBuf>> {
    let panels = CdfPanels { per_group, gate, cols: PANELS_PER_ROW.min(per_group.len()) };
    let stem = "regret-cdf";
    let files = chart::write(&panels, panels.size(), out, stem)?;
    let _ = writeln!(md, "### Per domain group\n\n![regret CDFs per domain group]({stem}.png) ([SVG]({stem}.svg))\n");
    let _ = writeln!(md, "One panel per domain group; {}.\n", cdf_axes());
    let mut header = String::from("| domain group |");
    for c in per_group[0].1.iter().rev() {
        let _ = write!(header, " {}: rows / median / p95 / max |", c.label);
    }
    let _ = writeln!(md, "{header}\n|---|{}", "---|".repeat(per_group[0].1.len()));
    for ((codebook, surface), curves) in per_group {
        let mut line = format!("| {codebook} {surface} |");
        for c in curves.iter().rev() {
            let q = |p: f64| nearest_rank(&c.regrets, p).map_or("-".into(), pct);
            let _ = write!(line, " {} / {} / {} / {} |", c.regrets.len(), q(0.5), q(0.95), q(1.0));
        }
        let _ = writeln!(md, "{line}");
    }
    Ok(files.into())
}

/// One CDF per codebook of `regrets` (decode and grouped together), with its table.
fn codebook_cdf(
    regrets: BTreeMap<String, Vec<f64>>,
    whose: &str,
    gate: f64,
    out: &Path,
    md: &mut String,
) -> Result<Vec<PathBuf>> {
    let curves: Vec<Curve> = regrets
        .into_iter()
        .enumerate()
        .map(|(i, (codebook, regrets))| Curve {
            label: codebook,
            colour: PALETTE[i % PALETTE.len()],
            regrets,
            policy: true,
        })
        .collect();
    let stem = "regret-cdf-codebooks";
    let files = chart::write(&CodebookCdf { curves: &curves, whose, gate }, PLOT, out, stem)?;
    let _ = writeln!(
        md,
        "\n### Per codebook\n\nRegret of {whose}, decode and grouped cells together.\n\n![regret CDF per codebook]({stem}.png) ([SVG]({stem}.svg))\n\n{}.\n",
        cdf_axes()
    );
    let _ = writeln!(md, "| codebook | cells | median | p95 | max |\n|---|---|---|---|---|");
    for c in &curves {
        let q = |p: f64| nearest_rank(&c.regrets, p).map_or("-".into(), pct);
        let _ = writeln!(md, "| {} | {} | {} | {} | {} |", c.label, c.regrets.len(), q(0.5), q(0.95), q(1.0));
    }
    let _ = writeln!(md);
    Ok(files.into())
}

/// The regret section (small multiples per group, one CDF per codebook), then the decision
/// maps of the given policy, else of the policy the learner fits from this corpus.
fn regret_section(
    corpus: &Corpus,
    policy: Option<&Policy>,
    out: &Path,
    md: &mut String,
    files: &mut Vec<PathBuf>,
) -> Result<()> {
    // A staged corpus is fitted beside its frozen M = 1 part: the given policy's, when that
    // is the part the corpus binds (the frozen policy itself, or a staged policy fitted on it).
    let frozen_m1 =
        policy.filter(|p| corpus.plan.frozen_m1.as_ref().is_some_and(|f| f.m1_digest == p.m1_digest())).cloned();
    // The corpus report reads cross-validation, not the leave-one-family-out rows. A given
    // policy's fitting rules are the ones its held-out rows show.
    let opts = FitOptions { frozen_m1, family_cv: false, ..FitOptions::default() };
    let opts = match policy {
        Some(p) => opts.with_rules_of(p),
        None => opts,
    };
    let fitted = fit(&corpus.dir, &opts)?;
    let gate = opts.p95_max;
    let heldout = heldout_by_group(&fitted);
    let given: Vec<(&str, InSample)> = match policy {
        Some(p) => vec![
            ("given policy, trees only (in-sample)", in_sample(p, corpus, false)),
            ("given policy (in-sample)", in_sample(p, corpus, true)),
        ],
        None => Vec::new(),
    };
    let _ = writeln!(md, "## Regret CDFs\n");
    let _ = writeln!(
        md,
        "Regret of a cell = median of the chosen candidate / fastest eligible median - 1. \
         *policy (cross-validated)* and the baselines are the learner's held-out rows: grouped {}-fold cross-validation \
         over (N, K) geometries of the development partition, every method scored on the same rows. {BASELINES_LEGEND}\n",
        opts.folds
    );
    match (policy, given.last()) {
        (Some(p), Some((_, deployed))) => {
            let same =
                if p.provenance.corpus_id == corpus.manifest.corpus_id { "this corpus" } else { "another corpus" };
            let _ = writeln!(
                md,
                "*given policy (in-sample)*: the `--policy` file (sha256 `{}`, fitted on {same}) through `Policy::select`, overlays on, \
                 on every development and sealed cell ({} of them answered by an exact overlay); *trees only*: the same with overlays off. \
                 {} cells it cannot answer are left out.\n",
                p.digest(),
                deployed.via_overlay,
                deployed.unanswered
            );
        }
        _ => {
            let _ =
                writeln!(md, "No policy was given (`--policy`): the curves are the learner's own cross-validation.\n");
        }
    }
    if let Some((_, trees_only)) = given.first().filter(|(_, g)| !g.sealed.is_empty()) {
        let _ = writeln!(
            md,
            "The given policy on the sealed cells (overlays off, as the sealed certification scores them):\n\n\
             | surface | cells | geomean | p95 | max |\n|---|---|---|---|---|"
        );
        for (surface, r) in &trees_only.sealed {
            let max = r.iter().copied().fold(0.0, f64::max);
            let _ = writeln!(md, "| {surface} | {} | {} | {} | {} |", r.len(), pct(geomean(r)), pct(p95(r)), pct(max));
        }
        let _ = writeln!(md);
    }
    let per_group = group_curves(&heldout, &given);
    if per_group.is_empty() {
        let _ = writeln!(md, "The corpus has no development rows to cross-validate.\n");
    } else {
        files.extend(small_multiples(&per_group, gate, out, md)?);
        // The policy drawn last in each group: the given one (overlays on) if any.
        let mut by_codebook: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for ((codebook, _), curves) in &per_group {
            by_codebook
                .entry(codebook.clone())
                .or_default()
                .extend(curves.last().map(|c| c.regrets.clone()).unwrap_or_default());
        }
        let whose = if policy.is_some() {
            "the given policy (in-sample, overlays on)"
        } else {
            "the cross-validated policy (held-out)"
        };
        files.extend(codebook_cdf(by_codebook, whose, gate, out, md)?);
    }
    let maps_policy = policy.unwrap_or(&fitted.policy);
    let mut measured: Vec<(u64, u64)> = corpus.cells.iter().map(|c| (c.n, c.k)).collect();
    measured.sort();
    measured.dedup();
    let codebooks = &maps_policy.codebooks[..maps_policy.codebooks.len().min(MAP_CODEBOOKS)];
    let _ = writeln!(
        md,
        "Decision maps below: {}.\n",
        if policy.is_some() { "the given policy" } else { "the policy fitted from this corpus" }
    );
    files.extend(write_maps(maps_policy, codebooks, &measured, out, md)?);
    Ok(())
}

/// Authenticate the corpus in `dir` (as the learner does), then write `report.md` and its charts
/// into `out`; returns the files written, `report.md` first. Same corpus and policy, same bytes.
pub fn write_corpus_report(dir: &Path, policy: Option<&Policy>, out: &Path) -> Result<Vec<PathBuf>> {
    let corpus = load(dir)?;
    let plan = &corpus.plan;
    let mut md = String::new();
    let _ = writeln!(md, "# Corpus report\n");
    let _ = writeln!(
        md,
        "Corpus `{}`: {} backend, arch {}, device {}, {} units, profile {}; {} alias cells.\n",
        corpus.manifest.corpus_id,
        plan.backend,
        plan.arch,
        plan.device,
        plan.units,
        plan.inventory.profile,
        corpus.cells.len()
    );
    let mut files = Vec::new();
    bandwidth_section(dir, out, &mut md, &mut files)?;
    regret_section(&corpus, policy, out, &mut md, &mut files)?;
    md.push_str(&crate::generic_floor::section(&corpus));
    md.push_str(&crate::noise::bands_section(plan.inventory.passes, &corpus.bands));
    let rows = vnni_corpus::collection::read_corpus_rows(dir)?;
    md.push_str(&crate::noise::section(&rows));
    md.push_str(&crate::throughput::section(dir, plan, &rows)?);
    let path = out.join("report.md");
    write_bytes(&path, md.as_bytes())?;
    files.insert(0, path);
    Ok(files)
}
