//! Decision maps: which candidate the policy's trees (overlays off) choose over a log N x
//! log K grid for one (codebook, mode, M bucket). Colour = family (hue) and candidate within
//! the family (shade); black dots mark measured development geometries. Drawn with
//! [`crate::chart`]: title, labelled axes and the candidates' legend in the image.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::{Circle, DrawingArea, DrawingBackend, Rectangle};
use plotters::style::Color;

use vnni_policy::{Policy, Surface};

use crate::chart::{self, err, legend, legend_height, rgb, Axes, Draw, Rgb, BLACK};
use crate::error::{FitError, Result};

/// Pixels per grid step, and grid steps per octave.
const PIXEL: u32 = 3;
const STEPS: usize = 16;
/// The legend column right of the map.
const LEGEND_WIDTH: u32 = 300;
/// Room for the title and the axes around the map's cells.
const FRAME: (u32, u32) = (80, 90);

/// A map's chosen colours over the grid and the candidates it used.
pub struct DecisionMap {
    title: String,
    /// `cells[row][col]`, row 0 at the smallest K.
    cells: Vec<Vec<Rgb>>,
    /// (log2 N, log2 K) of the grid's first cell.
    origin: (f64, f64),
    measured: Vec<(f64, f64)>,
    /// The colours used, by candidate id.
    pub legend: BTreeMap<String, Rgb>,
}

impl DecisionMap {
    /// The image size: the cells at [`PIXEL`] each, the frame, the legend column.
    pub fn size(&self) -> (u32, u32) {
        let (rows, cols) = (self.cells.len() as u32, self.cells.first().map_or(0, Vec::len) as u32);
        let height = (rows * PIXEL + FRAME.1).max(legend_height(self.legend.len() + 1, 1) + 48);
        (cols * PIXEL + FRAME.0 + LEGEND_WIDTH, height)
    }
}

/// The log2 extent of `count` grid steps from `origin`: half a step beyond the first and the
/// last cell centre.
fn extent(origin: f64, count: usize) -> (f64, f64) {
    let half = 0.5 / STEPS as f64;
    (origin - half, origin + (count as f64 - 0.5) / STEPS as f64)
}

/// A count at a power of two, for axis labels: "256", "4K", "128K".
fn count_label(log2: f64) -> String {
    let v = 2f64.powf(log2).round() as u64;
    if v >= 1024 && v % 1024 == 0 {
        format!("{}K", v / 1024)
    } else {
        v.to_string()
    }
}

impl Draw for DecisionMap {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let (width, _) = root.dim_in_pixel();
        let (map, side) = root.split_horizontally(width - LEGEND_WIDTH);
        let (rows, cols) = (self.cells.len(), self.cells.first().map_or(0, Vec::len));
        let (x, y) = (extent(self.origin.0, cols), extent(self.origin.1, rows));
        let axes = Axes {
            title: self.title.clone(),
            x,
            y,
            x_desc: "N, output rows (log2 axis)".into(),
            y_desc: "K, reduction length (log2 axis)".into(),
            x_step: 1.0,
            y_step: 1.0,
            x_format: &count_label,
            y_format: &count_label,
        };
        let mut chart = axes.build(&map, 17)?;
        let at = |i: usize, o: f64| o + i as f64 / STEPS as f64;
        // One rectangle per run of equal cells in a row (a small SVG).
        for (row, cells) in self.cells.iter().enumerate() {
            let mut start = 0;
            for col in 1..=cells.len() {
                if col < cells.len() && cells[col] == cells[start] {
                    continue;
                }
                let (x0, x1) = extent(at(start, self.origin.0), col - start);
                let (y0, y1) = extent(at(row, self.origin.1), 1);
                chart.draw_series([Rectangle::new([(x0, y0), (x1, y1)], rgb(cells[start]).filled())]).map_err(err)?;
                start = col;
            }
        }
        chart.draw_series(self.measured.iter().map(|&p| Circle::new(p, 2, rgb(BLACK).filled()))).map_err(err)?;
        let mut entries: Vec<(String, Rgb)> = self.legend.iter().map(|(id, c)| (id.clone(), *c)).collect();
        entries.push(("measured geometry".into(), BLACK));
        legend(&side.margin(36, 0, 0, 0), &entries, 1)
    }
}

fn family_hue(family: &str) -> Rgb {
    match family {
        "wide" => [40, 90, 200],
        "direct" => [20, 170, 190],
        "kpar" => [230, 120, 20],
        "fused_kpar" => [200, 40, 40],
        "rows" => [40, 160, 60],
        "mma16" => [140, 60, 170],
        _ => [120, 120, 120],
    }
}

/// The colour of candidate `id`: its family's hue, lighter for later members of the family.
pub fn colour(policy: &Policy, id: &str) -> Rgb {
    let Some(c) = policy.candidate(id) else { return BLACK };
    let members: Vec<&str> = policy.candidates.iter().filter(|d| d.family == c.family).map(|d| d.id.as_str()).collect();
    let i = members.iter().position(|m| *m == id).unwrap_or(0);
    let lighten = (i as f64 / members.len().max(1) as f64) * 0.6;
    family_hue(&c.family).map(|v| (v as f64 + (255.0 - v as f64) * lighten) as u8)
}

/// The map over N in [n_lo, n_hi] and K in [k_lo, k_hi] (powers of two).
pub fn render(
    policy: &Policy,
    codebook: &str,
    mode: &str,
    m: u64,
    (n_lo, n_hi): (u64, u64),
    (k_lo, k_hi): (u64, u64),
    measured: &[(u64, u64)],
) -> std::result::Result<DecisionMap, String> {
    let octaves = |lo: u64, hi: u64| ((hi as f64 / lo as f64).log2().ceil() as usize).max(1);
    let (cols, rows) = (octaves(n_lo, n_hi) * STEPS + 1, octaves(k_lo, k_hi) * STEPS + 1);
    let at = |lo: u64, step: usize| lo as f64 * 2f64.powf(step as f64 / STEPS as f64);
    let mut legend = BTreeMap::new();
    let mut cells = Vec::with_capacity(rows);
    for row in 0..rows {
        let k = ((at(k_lo, row) / 32.0).round() as u64).max(1) * 32;
        let mut line = Vec::with_capacity(cols);
        for col in 0..cols {
            let n = at(n_lo, col).round() as u64;
            let sel = policy.select_with(codebook, mode, m, n, k, false).map_err(|e| e.to_string())?;
            let c = colour(policy, &sel.candidate.id);
            legend.insert(sel.candidate.id.clone(), c);
            line.push(c);
        }
        cells.push(line);
    }
    let origin = ((n_lo as f64).log2(), (k_lo as f64).log2());
    let inside = |v: f64, o: f64, count: usize| {
        let (lo, hi) = extent(o, count);
        v >= lo && v <= hi
    };
    let measured = measured
        .iter()
        .map(|&(n, k)| ((n as f64).log2(), (k as f64).log2()))
        .filter(|&(x, y)| inside(x, origin.0, cols) && inside(y, origin.1, rows))
        .collect();
    let title = format!("{codebook} {mode} M = {m}: the trees' pick (overlays off)");
    Ok(DecisionMap { title, cells, origin, measured, legend })
}

/// Write the "Decision maps" section: for each of `codebooks` (first mode), the decode bucket
/// and the first grouped bucket, one map (PNG and SVG) into `dir` and its Markdown, naming the
/// candidates it shows. `measured` geometries are marked; the bounds are the powers of two
/// enclosing them.
pub fn write_maps(
    policy: &Policy,
    codebooks: &[String],
    measured: &[(u64, u64)],
    dir: &Path,
    md: &mut String,
) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let _ = writeln!(md, "## Decision maps\n");
    let _ = writeln!(
        md,
        "Which candidate the trees choose (overlays off) over N (left to right) and K (bottom to top), both on \
         log2 axes, 16 steps an octave; black dots: measured geometries.\n"
    );
    let (n_lo, n_hi, k_lo, k_hi) = bounds(measured);
    let grouped_bucket = policy.m_buckets.iter().position(|b| b.surface == Surface::Grouped);
    let Some(mode) = policy.modes.first() else { return Ok(files) };
    for codebook in codebooks {
        for bucket in [Some(0), grouped_bucket].into_iter().flatten() {
            let m = policy.m_buckets[bucket].lo;
            let map = render(policy, codebook, mode, m, (n_lo, n_hi), (k_lo, k_hi), measured)
                .map_err(|message| FitError::Report { path: dir.into(), message })?;
            let stem = format!("map-{codebook}-{mode}-m{m}");
            files.extend(chart::write(&map, map.size(), dir, &stem)?);
            let ids: Vec<&str> = map.legend.keys().map(String::as_str).collect();
            let _ = writeln!(
                md,
                "### {codebook} {mode} M = {m}\n\n![{codebook} {mode} M={m}]({stem}.png) ([SVG]({stem}.svg))\n\nCandidates on this map: {}.\n",
                ids.join(", ")
            );
        }
    }
    Ok(files)
}

/// Powers of two enclosing the measured geometries.
fn bounds(g: &[(u64, u64)]) -> (u64, u64, u64, u64) {
    let pow = |v: u64, up: bool| if up { v.next_power_of_two() } else { 1u64 << (63 - v.max(1).leading_zeros()) };
    let n_lo = g.iter().map(|x| x.0).min().unwrap_or(256);
    let n_hi = g.iter().map(|x| x.0).max().unwrap_or(65536);
    let k_lo = g.iter().map(|x| x.1).min().unwrap_or(256);
    let k_hi = g.iter().map(|x| x.1).max().unwrap_or(16384);
    (pow(n_lo, false), pow(n_hi, true), pow(k_lo, false).max(32), pow(k_hi, true))
}
