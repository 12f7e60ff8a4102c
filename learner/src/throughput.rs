//! How fast a corpus was collected: per weight-size class, the cells, the seconds spent
//! measuring them (fixtures, bit checks, timing) and cells per minute, from the time each cell
//! recorded in `cells.csv` (corpora collected before cells recorded it have none). The
//! corpus's stage says which surface the time bought: M = 1 rows, batched rows at frozen
//! picks (decode rows copied), or every M of the plan in one stage.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use vnni_corpus::collection::CollectionPlan;
use vnni_corpus::TimingRow;
use vnni_kernels::{Surface, Vocabulary};

/// Upper edges of the weight-size classes (bytes): small shapes need many weight copies.
const CLASSES: [(u64, &str); 4] =
    [(4 << 20, "< 4 MiB"), (64 << 20, "4-64 MiB"), (512 << 20, "64-512 MiB"), (u64::MAX, ">= 512 MiB")];

/// The class of a weight size.
fn class_of(bytes: u64) -> usize {
    CLASSES.iter().position(|(edge, _)| bytes < *edge).unwrap_or(CLASSES.len() - 1)
}

/// The time the timing rounds kept the device busy, by weight-size class and surface, from
/// the rows alone (so for every corpus, also those collected before cells recorded their
/// time): per row, its launches ((warmups, in each pass it ran, + samples) x replays) x its
/// median. Without fixtures, checks and graph capture; decode rows a batched stage copied
/// belong to the M = 1 stage and are left out.
fn device_time(plan: &CollectionPlan, rows: &[TimingRow]) -> String {
    let mut by: BTreeMap<(usize, Surface), f64> = BTreeMap::new();
    let mut cells: BTreeMap<usize, std::collections::BTreeSet<_>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.codebook.is_some() && r.median_us.is_finite()) {
        let surface = Surface::of_m(r.m);
        if plan.frozen_m1.is_some() && surface == Surface::Decode {
            continue;
        }
        let passes = if r.dropped { 1 } else { plan.inventory.passes.max(1) };
        let launches = (r.warmups * passes + r.samples) * r.replays;
        let class = class_of(r.weight_bytes as u64);
        *by.entry((class, surface)).or_default() += launches as f64 * r.median_us / 1e6;
        cells.entry(class).or_default().insert((r.source_format, r.n, r.k));
    }
    if by.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "Device seconds the timing rounds took (each row's launches x its median: without fixtures, \
         checks and graph capture), by surface:\n\n| weight size | cells | decode | grouped | prefill | \
         device seconds per cell |\n|---|---|---|---|---|---|\n",
    );
    for (class, (_, name)) in CLASSES.iter().enumerate() {
        let Some(n) = cells.get(&class).map(|c| c.len()) else { continue };
        let at = |s: Surface| by.get(&(class, s)).copied().unwrap_or(0.0);
        let all: f64 = Surface::ALL.iter().map(|&s| at(s)).sum();
        // three significant digits at least: a CPU run's rounds take milliseconds
        let secs = |x: f64| if x >= 100.0 { format!("{x:.0}") } else { format!("{x:.3}") };
        let _ = writeln!(
            md,
            "| {name} | {n} | {} | {} | {} | {} |",
            secs(at(Surface::Decode)),
            secs(at(Surface::Grouped)),
            secs(at(Surface::Prefill)),
            secs(all / n as f64)
        );
    }
    md.push('\n');
    md
}

/// The Markdown section; `rows` give each cell's weight bytes.
pub fn section(dir: &Path, plan: &CollectionPlan, rows: &[TimingRow]) -> Result<String, vnni_corpus::read::ReadError> {
    let mut md = String::from("## Collection throughput\n\n");
    let path = dir.join("cells.csv");
    let cells = if path.is_file() { vnni_corpus::read::read_cells(&path)? } else { Vec::new() };
    md.push_str(&device_time(plan, rows));
    let timed: Vec<_> = cells.iter().filter_map(|c| c.millis.map(|ms| (c.cell.as_str(), ms))).collect();
    if timed.is_empty() {
        md.push_str("The corpus's cells did not record how long they took (collected before they did).\n\n");
        return Ok(md);
    }
    let stage = if plan.m1_only {
        "the M = 1 stage of a staged collection: decode rows".to_string()
    } else if plan.frozen_m1.is_some() {
        format!("the batched stage of a staged collection: rows at M = {:?} (decode rows copied)", plan.collected_m())
    } else {
        format!("one stage: rows at M = {:?}", plan.collected_m())
    };
    // each planned cell's weight bytes, by its stem (what cells.csv names)
    let mut by_key: BTreeMap<_, u64> = BTreeMap::new();
    for r in rows {
        by_key.entry((r.source_format, r.n, r.k)).or_insert(r.weight_bytes as u64);
    }
    let bytes: BTreeMap<String, u64> =
        plan.cells().into_iter().filter_map(|c| Some((c.stem(), *by_key.get(&(Some(c.format), c.n, c.k))?))).collect();
    // per class: (cells, milliseconds)
    let mut by_class = [(0u64, 0u64); CLASSES.len()];
    for (cell, ms) in &timed {
        let b = bytes.get(*cell).copied().unwrap_or(0);
        let class = class_of(b);
        by_class[class].0 += 1;
        by_class[class].1 += ms;
    }
    let _ = writeln!(
        md,
        "Seconds each cell took to measure (fixtures, bit checks, timing; not the time between cells), \
         {stage}; {} protocol pass(es) of {} warmup + {} sample rounds{}{}, {} mode(s), on {}.\n\n\
         | weight size | cells | seconds | seconds per cell | cells per minute |\n|---|---|---|---|---|",
        plan.inventory.passes,
        plan.inventory.warmups,
        plan.inventory.samples,
        if plan.whole_rotations { " (samples of whole weight-copy rotations: the older protocol)" } else { "" },
        if plan.programmatic { ", decode launched programmatically" } else { "" },
        plan.inventory.modes.len(),
        plan.device
    );
    let total = by_class.iter().fold((0, 0), |a, c| (a.0 + c.0, a.1 + c.1));
    let named = CLASSES.iter().map(|c| c.1).zip(by_class).chain([("all", total)]);
    for (name, (n, ms)) in named.filter(|(_, (n, _))| *n > 0) {
        let s = ms as f64 / 1000.0;
        let _ = writeln!(md, "| {name} | {n} | {s:.1} | {:.2} | {:.1} |", s / n as f64, n as f64 * 60.0 / s.max(1e-9));
    }
    md.push('\n');
    Ok(md)
}
