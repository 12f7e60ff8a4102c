//! Decision maps: which candidate the policy's trees (overlays off) choose over a log N x
//! log K grid for one (codebook, mode, M bucket), as an RGB PNG. Colour = family (hue) and
//! candidate within the family (shade); black dots mark measured development geometries.
//! No text in the image (no font dependency): the legend lives in the Markdown report.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use vnni_corpus::write_bytes;
use vnni_policy::{Policy, Surface};

use crate::canvas::{hex, Canvas, Rgb, BLACK};
use crate::error::{FitError, Result};

/// Pixels per grid step, and grid steps per octave.
const PIXEL: usize = 3;
const STEPS: usize = 16;

/// A rendered map and the colours it used, by candidate id.
pub struct DecisionMap {
    pub png: Vec<u8>,
    pub legend: BTreeMap<String, Rgb>,
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

/// Render the map over N in [n_lo, n_hi] and K in [k_lo, k_hi] (powers of two).
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
    let (width, height) = (cols * PIXEL, rows * PIXEL);
    let at = |lo: u64, step: usize| lo as f64 * 2f64.powf(step as f64 / STEPS as f64);
    let mut canvas = Canvas::new(width, height);
    let mut legend = BTreeMap::new();
    let pixel = PIXEL as i64;
    for row in 0..rows {
        let k = ((at(k_lo, row) / 32.0).round() as u64).max(1) * 32;
        for col in 0..cols {
            let n = at(n_lo, col).round() as u64;
            let sel = policy.select_with(codebook, mode, m, n, k, false).map_err(|e| e.to_string())?;
            let c = colour(policy, &sel.candidate.id);
            legend.insert(sel.candidate.id.clone(), c);
            canvas.fill_rect(col as i64 * pixel, (rows - 1 - row) as i64 * pixel, pixel, pixel, c);
        }
    }
    for &(n, k) in measured {
        let col = ((n as f64 / n_lo as f64).log2() * STEPS as f64).round();
        let row = ((k as f64 / k_lo as f64).log2() * STEPS as f64).round();
        if col < 0.0 || row < 0.0 || col as usize >= cols || row as usize >= rows {
            continue;
        }
        let (x, y) = (col as i64 * pixel + pixel / 2, (rows - 1 - row as usize) as i64 * pixel + pixel / 2);
        canvas.fill_rect(x, y, 2, 2, BLACK);
    }
    let png = canvas.encode_png()?;
    Ok(DecisionMap { png, legend })
}

/// Write the "Decision maps" section: for each of `codebooks` (first mode), the decode bucket
/// and the first grouped bucket, one map PNG into `dir` and its Markdown, then the colour
/// legend. `measured` geometries are marked; the bounds are the powers of two enclosing them.
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
        "x: log N (left to right), y: log K (bottom to top); black dots: measured geometries; overlays off.\n"
    );
    let (n_lo, n_hi, k_lo, k_hi) = bounds(measured);
    let mut legend = BTreeMap::new();
    let grouped_bucket = policy.m_buckets.iter().position(|b| b.surface == Surface::Grouped);
    let Some(mode) = policy.modes.first() else { return Ok(files) };
    for codebook in codebooks {
        for bucket in [Some(0), grouped_bucket].into_iter().flatten() {
            let m = policy.m_buckets[bucket].lo;
            let map = render(policy, codebook, mode, m, (n_lo, n_hi), (k_lo, k_hi), measured)
                .map_err(|message| FitError::Report { path: dir.into(), message })?;
            let name = format!("map-{codebook}-{mode}-m{m}.png");
            let path = dir.join(&name);
            write_bytes(&path, &map.png)?;
            files.push(path);
            let _ = writeln!(md, "### {codebook} {mode} M = {m}\n\n![{codebook} {mode} M={m}]({name})\n");
            legend.extend(map.legend);
        }
    }
    let _ = writeln!(md, "| colour | candidate |\n|---|---|");
    for (id, c) in legend {
        let _ = writeln!(md, "| `{}` | {id} |", hex(c));
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
