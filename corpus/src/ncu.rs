//! Nsight Compute's CSV output (`ncu --csv --page raw --log-file F`): one header row of metric
//! names, one row of units, one row per profiled kernel launch. ncu scales units as it likes
//! (`usecond` in one report, `msecond` in the next; `Kbyte` where another says `byte`), so
//! every value is normalised here to one base unit per class: nanoseconds, bytes, percent, or
//! a plain count. Byte prefixes are SI (`Kbyte` = 1000 bytes), as ncu defines them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum NcuError {
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("{path}:{line}: column {column}: {message}")]
    Cell { path: PathBuf, line: usize, column: String, message: String },
}

/// What a metric measures, which fixes its base unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitClass {
    /// Nanoseconds.
    Time,
    /// Bytes (per block for shared memory).
    Bytes,
    /// Percent of a peak.
    Percent,
    /// Instructions, sectors, requests, registers: a plain number.
    Count,
}

/// The ncu process a metric is collected in. A record that fits one replay pass costs ncu
/// 24-47 ms; two or more passes 150-200 ms, whatever their number, because ncu then backs up
/// device memory and sets its session up again per record (docs/PERF.md). The hardware
/// counters fit one pass together and the SASS-instrumented counts another, so each chunk is
/// profiled by one ncu process per pass and the records are joined in launch order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pass {
    /// Launch statistics: ncu reports them in every pass, so every pass's file carries them
    /// and they must agree (what proves two files describe the same launches).
    Launch,
    /// Hardware performance counters.
    Hardware,
    /// Counts of the SASS-patched (instrumented) pass.
    Instrumented,
}

impl Pass {
    /// The passes that run an ncu process, in the order they run.
    pub const PROFILED: [Pass; 2] = [Pass::Hardware, Pass::Instrumented];

    /// Its name in file names and manifests.
    pub fn name(self) -> &'static str {
        match self {
            Pass::Launch => "launch",
            Pass::Hardware => "hw",
            Pass::Instrumented => "sass",
        }
    }
}

/// One metric the profiling pass asks ncu for: its ncu name, its unit class and its pass.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    pub ncu: &'static str,
    pub class: UnitClass,
    pub pass: Pass,
}

const fn metric(ncu: &'static str, class: UnitClass, pass: Pass) -> Metric {
    Metric { ncu, class, pass }
}

/// Every metric a record must carry (a missing one refuses the record). Throughputs are single
/// counters against their peak (DRAM bytes, L2 sectors), not ncu's composite `__throughput`
/// metrics, which cost extra replay passes; global loads count `LDG` and `cp.async` (`LDGSTS`,
/// how the IMMA tiles stage their operands) together, instructions, bytes and sectors all from
/// the SASS pass: L1's hardware sector counter for global loads also counts `LDGSTS` sectors
/// (counted twice beside the SASS `LDGSTS` sectors, halving an IMMA tile's bytes per sector)
/// and costs the hardware pass a third of its time on the H200. Spills are counted as local load and
/// store instructions in the instrumented pass the other SASS counts need anyway: L1's
/// local-memory request counters alone cost three replay passes on the H200.
pub const METRICS: [Metric; 16] = {
    use Pass::*;
    use UnitClass::*;
    [
        metric("launch__registers_per_thread", Count, Launch),
        metric("launch__shared_mem_per_block_static", Bytes, Launch),
        metric("launch__shared_mem_per_block_dynamic", Bytes, Launch),
        metric("sm__warps_active.avg.pct_of_peak_sustained_active", Percent, Hardware),
        metric("dram__bytes.sum.pct_of_peak_sustained_elapsed", Percent, Hardware),
        metric("lts__t_sectors.sum.pct_of_peak_sustained_elapsed", Percent, Hardware),
        metric("smsp__sass_inst_executed_op_local_ld.sum", Count, Instrumented),
        metric("smsp__sass_inst_executed_op_local_st.sum", Count, Instrumented),
        metric("smsp__sass_inst_executed_op_global_ld.sum", Count, Instrumented),
        metric("smsp__sass_inst_executed_op_ldgsts.sum", Count, Instrumented),
        metric("smsp__sass_data_bytes_mem_global_op_ld.sum", Bytes, Instrumented),
        metric("smsp__sass_data_bytes_mem_global_op_ldgsts.sum", Bytes, Instrumented),
        metric("smsp__sass_l1tex_t_sectors_pipe_lsu_mem_global_op_ld.sum", Count, Instrumented),
        metric("smsp__sass_l1tex_t_sectors_pipe_lsu_mem_global_op_ldgsts.sum", Count, Instrumented),
        metric("sm__inst_executed_pipe_tensor_op_imma.sum", Count, Hardware),
        metric("gpu__time_duration.sum", Time, Hardware),
    ]
};

/// The metrics one ncu process of `pass` collects: the pass's own and the launch statistics.
pub fn metrics_of(pass: Pass) -> impl Iterator<Item = &'static Metric> {
    METRICS.iter().filter(move |m| m.pass == pass || m.pass == Pass::Launch)
}

/// The `--metrics` argument of the ncu process of `pass`.
pub fn metrics_argument(pass: Pass) -> String {
    metrics_of(pass).map(|m| m.ncu).collect::<Vec<_>>().join(",")
}

/// One profiled kernel launch: ncu's record id, the kernel's name, the metrics of its pass (or,
/// once [`join`]ed, of every pass) in their base units.
#[derive(Debug, Clone, PartialEq)]
pub struct NcuRecord {
    pub id: usize,
    pub kernel: String,
    /// The line of `path` the record was read from (for errors).
    pub line: usize,
    pub values: BTreeMap<&'static str, f64>,
    /// How many times ncu replayed the launch (`profiler__replayer_passes`, which ncu adds on
    /// its own); not evidence, but what the record cost: one pass is several times cheaper than
    /// two or more (docs/PERF.md).
    pub replay_passes: Option<u32>,
}

/// ncu's own column of replay passes per record.
pub const REPLAY_PASSES: &str = "profiler__replayer_passes";

impl NcuRecord {
    pub fn value(&self, ncu: &str) -> f64 {
        self.values[ncu]
    }
}

/// The factor from `unit` to the base unit of `class`, or None for a unit of another class.
pub fn unit_scale(unit: &str, class: UnitClass) -> Option<f64> {
    let unit = unit.trim();
    match class {
        UnitClass::Percent => (unit == "%").then_some(1.0),
        UnitClass::Time => match unit {
            "ns" | "nsecond" | "nsec" => Some(1.0),
            "us" | "usecond" | "usec" => Some(1e3),
            "ms" | "msecond" | "msec" => Some(1e6),
            "s" | "second" | "sec" => Some(1e9),
            _ => None,
        },
        UnitClass::Bytes => {
            // shared memory is reported per block: the base unit is then bytes per block
            prefixed(unit.strip_suffix("/block").unwrap_or(unit), |rest| rest == "byte")
        }
        UnitClass::Count => {
            const COUNTS: [&str; 8] = ["", "inst", "sector", "request", "warp", "cycle", "register", "block"];
            prefixed(unit.split('/').next().unwrap_or(unit), |rest| COUNTS.contains(&rest))
        }
    }
}

/// The factor of `unit`: 1 when `known` takes it as it is, else that of a leading SI (`K`,
/// `M`, `G`, `T`) or binary (`Ki`, `Mi`, `Gi`) prefix before a known rest (`Kinst` is a
/// thousand instructions, not a kibi-`nst`).
fn prefixed(unit: &str, known: impl Fn(&str) -> bool) -> Option<f64> {
    const PREFIXES: [(&str, f64); 7] =
        [("Ki", 1024.0), ("Mi", 1_048_576.0), ("Gi", 1_073_741_824.0), ("K", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12)];
    if known(unit) {
        return Some(1.0);
    }
    PREFIXES.iter().find_map(|&(p, f)| unit.strip_prefix(p).filter(|rest| !rest.is_empty() && known(rest)).map(|_| f))
}

/// A value as ncu prints it: thousands separators, possibly a decimal point.
fn parse_value(text: &str) -> Option<f64> {
    let clean: String = text.trim().chars().filter(|&c| c != ',').collect();
    clean.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Parse the CSV text of the ncu process of `pass` (`path` names it in errors). Lines ncu
/// writes for itself (`==PROF==`, `==WARNING==`) are skipped; an `==ERROR==` line refuses the
/// file. Records must be numbered 0, 1, 2, ... in launch order, and every metric of the pass
/// ([`metrics_of`]) must be present with a unit of its class and a number.
pub fn parse(path: &Path, text: &str, pass: Pass) -> Result<Vec<NcuRecord>, NcuError> {
    let file_err = |message: String| NcuError::File { path: path.to_path_buf(), message };
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("==ERROR==") {
            return Err(file_err(format!("line {}: ncu reported an error: {line}", i + 1)));
        }
        if !line.starts_with("==") && !line.trim().is_empty() {
            lines.push((i + 1, line));
        }
    }
    let body: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(false).from_reader(body.as_bytes());
    let mut rows = Vec::new();
    for (i, rec) in reader.records().enumerate() {
        let rec = rec.map_err(|e| file_err(format!("line {}: not CSV: {e}", lines.get(i).map_or(0, |l| l.0))))?;
        rows.push((lines[i].0, rec));
    }
    let [(_, header), (unit_line, units), records @ ..] = rows.as_slice() else {
        return Err(file_err("no header and unit rows: ncu profiled nothing (was the profiler range reached?)".into()));
    };
    let column = |name: &str| header.iter().position(|h| h == name);
    let id_col = column("ID").ok_or_else(|| file_err("no ID column".into()))?;
    let kernel_col = column("Kernel Name").ok_or_else(|| file_err("no Kernel Name column".into()))?;
    let mut metric_cols = Vec::new();
    for m in metrics_of(pass) {
        let col = column(m.ncu).ok_or_else(|| file_err(format!("metric {} was not collected", m.ncu)))?;
        let unit = units.get(col).unwrap_or("");
        let scale = unit_scale(unit, m.class).ok_or_else(|| NcuError::Cell {
            path: path.to_path_buf(),
            line: *unit_line,
            column: m.ncu.to_string(),
            message: format!("unit {unit:?} is not a unit of {:?}", m.class),
        })?;
        metric_cols.push((m.ncu, col, scale));
    }
    let passes_col = column(REPLAY_PASSES);
    let mut out = Vec::with_capacity(records.len());
    for (expected_id, (line, rec)) in records.iter().enumerate() {
        let cell_err = |column: &str, message: String| NcuError::Cell {
            path: path.to_path_buf(),
            line: *line,
            column: column.to_string(),
            message,
        };
        let id: usize = rec
            .get(id_col)
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| cell_err("ID", format!("{:?} is not a record id", rec.get(id_col).unwrap_or(""))))?;
        if id != expected_id {
            return Err(cell_err("ID", format!("record {id} where record {expected_id} was expected (launch order)")));
        }
        let mut values = BTreeMap::new();
        for &(name, col, scale) in &metric_cols {
            let text = rec.get(col).unwrap_or("");
            let v = parse_value(text).ok_or_else(|| cell_err(name, format!("{text:?} is not a number")))?;
            values.insert(name, v * scale);
        }
        let replay_passes = passes_col.and_then(|c| rec.get(c)).and_then(|t| t.trim().parse().ok());
        out.push(NcuRecord {
            id,
            kernel: rec.get(kernel_col).unwrap_or("").to_string(),
            line: *line,
            values,
            replay_passes,
        });
    }
    Ok(out)
}

/// One record per launch with the metrics of every pass: the records of each pass's file
/// (`(path, records)`, in [`Pass::PROFILED`] order) joined in launch order. The files must hold
/// as many records, and each launch the same kernel with the same launch statistics in every
/// file, or they describe different launches. The record keeps the first file's line and the
/// most replay passes any file needed.
pub fn join(parts: Vec<(PathBuf, Vec<NcuRecord>)>) -> Result<Vec<NcuRecord>, NcuError> {
    let mut parts = parts.into_iter();
    let Some((first_path, mut out)) = parts.next() else {
        return Ok(Vec::new());
    };
    for (path, records) in parts {
        let err = |message: String| NcuError::File { path: path.clone(), message };
        if records.len() != out.len() {
            return Err(err(format!(
                "{} records where {} holds {}: the passes profiled different launches",
                records.len(),
                first_path.display(),
                out.len()
            )));
        }
        for (joined, rec) in out.iter_mut().zip(records) {
            // launch statistics are whole numbers: equal once rounded, whatever unit each file used
            let whole = |r: &NcuRecord, m: &str| r.values.get(m).map(|v| v.round());
            let differs = metrics_of(Pass::Launch).map(|m| m.ncu).find(|m| whole(joined, m) != whole(&rec, m));
            if joined.kernel != rec.kernel || differs.is_some() {
                return Err(err(format!(
                    "line {}: record {} is kernel {:?}{}, line {} of {} is {:?}: the passes profiled different launches",
                    rec.line,
                    rec.id,
                    rec.kernel,
                    differs.map_or(String::new(), |m| format!(" with another {m}")),
                    joined.line,
                    first_path.display(),
                    joined.kernel
                )));
            }
            joined.replay_passes = joined.replay_passes.max(rec.replay_passes);
            joined.values.extend(rec.values);
        }
    }
    Ok(out)
}

/// Whether ncu's kernel name is `symbol` (an `extern "C"` kernel is named by its symbol; a
/// demangled C++ one carries its parameter list).
pub fn names_symbol(kernel: &str, symbol: &str) -> bool {
    kernel == symbol || kernel.strip_prefix(symbol).is_some_and(|rest| rest.starts_with('('))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_normalise_to_one_base_per_class() {
        assert_eq!(unit_scale("usecond", UnitClass::Time), Some(1e3));
        assert_eq!(unit_scale("msecond", UnitClass::Time), Some(1e6));
        assert_eq!(unit_scale("ns", UnitClass::Time), Some(1.0));
        assert_eq!(unit_scale("Kbyte/block", UnitClass::Bytes), Some(1e3));
        assert_eq!(unit_scale("Mbyte", UnitClass::Bytes), Some(1e6));
        assert_eq!(unit_scale("KiB", UnitClass::Bytes), None);
        assert_eq!(unit_scale("Kibyte", UnitClass::Bytes), Some(1024.0));
        assert_eq!(unit_scale("register/thread", UnitClass::Count), Some(1.0));
        assert_eq!(unit_scale("Kinst", UnitClass::Count), Some(1e3));
        assert_eq!(unit_scale("%", UnitClass::Count), None);
        assert_eq!(unit_scale("byte", UnitClass::Time), None);
        assert_eq!(parse_value("124,224"), Some(124224.0));
        assert_eq!(parse_value("63,550.06"), Some(63550.06));
        assert_eq!(parse_value("n/a"), None);
    }

    #[test]
    fn symbols_match_plain_and_demangled_names() {
        assert!(names_symbol("vnni_reduce_partials", "vnni_reduce_partials"));
        assert!(names_symbol("vec4(const int4 *, int4 *, int)", "vec4"));
        assert!(!names_symbol("vec4x(const int4 *)", "vec4"));
    }
}
