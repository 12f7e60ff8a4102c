//! `bench --dense-m`: every M of the dense grid (`vnni_measure::shapes::dense_m_grid`) for
//! each (shape, codebook, mode): at M = 1 every decode candidate, at each M >= 2 the batched
//! candidates that can serve it at the inherited bpp, and, given `--policy`, the candidate
//! the policy dispatches at that M beside the fastest one measured. Writes `dense-m.csv`
//! (one row per M), `dense-rows.csv.zst` (every candidate), `samples.csv.zst`, and the
//! dense-M report (`vnni_learner::dense_m`: cliffs, charts) under `report/`, each rewritten
//! after every (shape, codebook) so a run cut short keeps what it measured.

use anyhow::{bail, Context, Result};
use vnni_corpus::schema::DenseMRow;
use vnni_corpus::{SampleRow, TimingRow};
use vnni_kernels::registry::{find, Candidate, Family, MAX_WORKSPACE_BYTES, PREFILL_MIN_M};
use vnni_kernels::{CandidateId, Codebook, Mode, SourceFormat, Surface};
use vnni_measure::cell::{best_row, FIXTURE_SEED};
use vnni_measure::cuda_cell::{run_cell, CellFixture, CellInputs, CellTarget};
use vnni_measure::shapes::dense_m_grid;
use vnni_policy::Policy;

use super::Bench;

/// The dp4a and mma16 grouped kernels stream the weights once per slice of 8 or 16 rows:
/// beyond this M they only lose to the IMMA tiles, so they are timed only when dispatched.
pub const ROWS_KERNELS_MAX_M: usize = 64;

/// The batched candidates timed at M rows: the dp4a / mma16 grouped kernels up to
/// [`ROWS_KERNELS_MAX_M`], the grouped IMMA tiles at every M, the prefill tiles from
/// `PREFILL_MIN_M`; the dispatched candidate always (from any registry generation).
pub fn dense_candidates(m: usize, batched: &[Candidate], dispatched: Option<&Candidate>) -> Vec<Candidate> {
    let serves = |c: &Candidate| match (c.surface, c.family) {
        (Surface::Grouped, Family::Imma) => true,
        (Surface::Grouped, _) => m <= ROWS_KERNELS_MAX_M,
        (Surface::Prefill, _) => m >= PREFILL_MIN_M,
        (Surface::Decode, _) => false,
    };
    let mut out: Vec<Candidate> = batched.iter().filter(|c| serves(c)).cloned().collect();
    include(&mut out, dispatched);
    out
}

/// `c` added to `cands` unless it is there.
fn include(cands: &mut Vec<Candidate>, c: Option<&Candidate>) {
    if let Some(c) = c.filter(|c| !cands.iter().any(|x| x.id == c.id)) {
        cands.push(c.clone());
    }
}

/// The registry candidate a policy names (any generation).
fn named(id: &str) -> Result<&'static Candidate> {
    find(id).with_context(|| format!("the policy names {id}, which is not in the registry"))
}

/// Why a candidate cannot be timed on M x N x K at `bpp` (no plan, or partials over the
/// workspace budget), or `None`.
pub fn unrunnable(c: &Candidate, cb: Codebook, n: usize, k: usize, m: usize, bpp: usize) -> Option<String> {
    match c.plan_batched(cb, n, k, m, bpp) {
        None => Some(format!("{} has no launch plan for M = {m} at bpp {bpp}", c.id)),
        Some(p) if p.workspace * 4 > MAX_WORKSPACE_BYTES => Some(format!(
            "{} needs {:.1} GiB of partials (kb {} x M x N), over the {} GiB workspace budget",
            c.id,
            (p.workspace * 4) as f64 / (1u64 << 30) as f64,
            p.kb,
            MAX_WORKSPACE_BYTES >> 30
        )),
        Some(_) => None,
    }
}

/// The policy must answer every requested codebook and mode, with the device's SM count
/// (its bpp formulas are for that many units).
pub fn check_policy(policy: &Policy, codebooks: &[Codebook], modes: &[Mode], sms: u32) -> Result<()> {
    if policy.units != sms as u64 {
        bail!(
            "the policy is fitted for {} SMs, this device has {sms}: its bpp would not be this device's",
            policy.units
        );
    }
    if let Some(cb) = codebooks.iter().find(|c| !policy.codebooks.iter().any(|p| p == c.name())) {
        bail!("the policy has no codebook {cb} (it has {})", policy.codebooks.join(", "));
    }
    if let Some(mode) = modes.iter().find(|m| !policy.modes.iter().any(|p| p == m.name())) {
        bail!("the policy has no mode {mode} (it has {})", policy.modes.join(", "));
    }
    Ok(())
}

/// What the dense run has measured so far.
#[derive(Default)]
struct Dense {
    rows: Vec<DenseMRow>,
    timing: Vec<TimingRow>,
    samples: Vec<SampleRow>,
    /// M values where no candidate was eligible (every one mismatched or none could run).
    empty: Vec<usize>,
}

impl Dense {
    fn push(&mut self, m: usize, row: Option<DenseMRow>) {
        match row {
            Some(r) => self.rows.push(r),
            None => self.empty.push(m),
        }
    }

    /// Every file, rewritten (atomically) with everything measured so far.
    fn write(&self, bench: &Bench, policy: Option<&Policy>) -> Result<()> {
        use vnni_learner::dense_m::{bucket_maps, write_report};
        let out = &bench.args.out;
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let csv = out.join("dense-m.csv");
        vnni_corpus::write_csv(&csv, &self.rows)?;
        vnni_corpus::write_csv(&out.join(vnni_corpus::schema::DENSE_ROWS_FILE), &self.timing)?;
        vnni_corpus::write_csv(&out.join("samples.csv.zst"), &self.samples)?;
        vnni_corpus::write_csv(&out.join("resources.csv"), &bench.session.resources)?;
        write_report(&self.rows, &self.timing, &bucket_maps(policy), &[csv], &out.join("report"))?;
        Ok(())
    }
}

/// One (shape, codebook, mode) line of the dense grid, after its M = 1 rows.
struct Line<'a> {
    policy: Option<&'a Policy>,
    format: SourceFormat,
    n: usize,
    k: usize,
    mode: Mode,
}

impl Line<'_> {
    /// The policy's pick at M rows and the bpp it runs at.
    fn dispatched(&self, m: usize) -> Result<Option<(&'static Candidate, usize)>> {
        let Some(p) = self.policy else { return Ok(None) };
        let cb = self.format.codebook();
        let s = p
            .select(cb.name(), self.mode.name(), m as u64, self.n as u64, self.k as u64)
            .with_context(|| format!("the policy's pick for {cb} {} M = {m} {}x{}", self.mode, self.n, self.k))?;
        Ok(Some((named(&s.candidate.id)?, s.bpp as usize)))
    }

    /// A dense row from the timing rows of one M; `dispatched` is the policy's pick. `None`
    /// (said on stderr) when no candidate was eligible there: the run goes on and fails at the end.
    fn row(
        &self,
        m: usize,
        m1: (&CandidateId, usize),
        rows: &[TimingRow],
        dispatched: Option<&CandidateId>,
        why: Option<String>,
    ) -> Option<DenseMRow> {
        let Some(best) = best_row(rows, self.mode) else {
            eprintln!("no eligible candidate at M = {m} ({} {}x{} {}): no row", self.format, self.n, self.k, self.mode);
            return None;
        };
        let pick = dispatched.and_then(|d| rows.iter().find(|r| r.mode == self.mode && r.candidate == *d));
        let note = match (dispatched, pick) {
            (None, _) => String::new(),
            (Some(_), Some(r)) if r.mismatches > 0 => format!("{} mismatches: not eligible", r.mismatches),
            (Some(_), Some(r)) if r.dropped => "dropped by racing: a partial median".into(),
            (Some(_), Some(_)) => String::new(),
            (Some(d), None) => {
                why.unwrap_or_else(|| format!("{d} was not timed (rejected by preflight or not runnable)"))
            }
        };
        let dispatched_us = pick.filter(|r| r.eligible && r.median_us.is_finite()).map(|r| r.median_us);
        Some(DenseMRow {
            mode: self.mode,
            source_format: self.format,
            codebook: self.format.codebook(),
            n: self.n,
            k: self.k,
            m,
            m1_candidate: m1.0.clone(),
            bpp: m1.1,
            timed: rows.iter().filter(|r| r.mode == self.mode && r.eligible).count(),
            best: best.candidate.clone(),
            best_us: best.median_us,
            dispatched: dispatched.cloned(),
            dispatched_us,
            note,
        })
    }
}

/// `bench --dense-m`.
pub(super) fn run(bench: &Bench, policy: Option<&Policy>) -> Result<()> {
    let (gpu, s) = (&bench.session.gpu, bench.session);
    if let Some(p) = policy {
        check_policy(p, &s.codebooks, &s.modes, gpu.info.sms)?;
    }
    let grid = dense_m_grid(bench.args.dense_m_max as usize);
    let batched: Vec<Candidate> = bench.grouped.iter().chain(&bench.prefill).cloned().collect();
    let mut dense = Dense::default();
    for &(n, k) in &bench.args.shapes.0 {
        for &cb in &s.codebooks {
            let started = std::time::Instant::now();
            let format = SourceFormat::aliases_of(cb)[0];
            let fx = CellFixture::new(gpu, format, n, k, FIXTURE_SEED, s.protocol.passes)?;
            // The policy's M = 1 pick per mode, timed too (it may be of an older registry generation).
            let lines: Vec<Line> = s.modes.iter().map(|&mode| Line { policy, format, n, k, mode }).collect();
            let m1_picks = lines.iter().map(|l| l.dispatched(1)).collect::<Result<Vec<_>>>()?;
            let mut decode_cands = bench.decode.clone();
            for pick in &m1_picks {
                include(&mut decode_cands, pick.map(|p| p.0));
            }
            let inputs = CellInputs::decode(&decode_cands, &s.modes, &s.protocol, &s.rejected, bench.copy_gbps);
            let decode = run_cell(gpu, &fx, &inputs)?;
            for (line, m1_pick) in lines.iter().zip(&m1_picks) {
                let mode = line.mode;
                let m1_best = best_row(&decode.rows, mode)
                    .with_context(|| format!("no eligible decode row ({format} {n}x{k} {mode})"))?;
                let m1 = match m1_pick {
                    Some((c, bpp)) => {
                        let planned = c.plan(n, k, gpu.info.sms).map(|p| p.bpp);
                        if planned != Some(*bpp) {
                            bail!("the policy's M = 1 pick {} has bpp {bpp} on {n}x{k}, the registry plans {planned:?} on this device", c.id);
                        }
                        (c.id.clone(), *bpp)
                    }
                    None => (m1_best.candidate.clone(), m1_best.bpp),
                };
                let m1_row = line.row(1, (&m1.0, m1.1), &decode.rows, m1_pick.map(|p| &p.0.id), None);
                dense.push(1, m1_row);
                for &m in grid.iter().filter(|&&m| m >= 2) {
                    let pick = line.dispatched(m)?.map(|p| p.0);
                    let mut why = None;
                    let cands: Vec<Candidate> = dense_candidates(m, &batched, pick)
                        .into_iter()
                        .filter(|c| match unrunnable(c, cb, n, k, m, m1.1) {
                            Some(reason) => {
                                if pick.is_some_and(|p| p.id == c.id) {
                                    why = Some(reason);
                                }
                                false
                            }
                            None => true,
                        })
                        .collect();
                    let target = CellTarget::Inherited { m, m1_candidate: m1.0.clone(), bpp: m1.1 };
                    let cell = run_cell(gpu, &fx, &inputs.retarget(target, &cands, &[mode]))?;
                    dense.push(m, line.row(m, (&m1.0, m1.1), &cell.rows, pick.map(|p| &p.id), why));
                    dense.timing.extend(cell.rows);
                    dense.samples.extend(cell.samples);
                }
            }
            dense.timing.extend(decode.rows);
            dense.samples.extend(decode.samples);
            dense.write(bench, policy)?;
            eprintln!("dense M {format} {n}x{k}: {} M values in {:.1}s", grid.len(), started.elapsed().as_secs_f64());
        }
    }
    let mismatched = dense.timing.iter().filter(|r| r.mismatches > 0).count();
    // The short table printed last: per series the worst steps and the dispatched regret.
    print!("\n{}", vnni_learner::dense_m::summary_table(&dense.rows));
    if mismatched > 0 {
        bail!("{mismatched} candidate rows differ from the CPU reference (dense-rows.csv.zst)");
    }
    if !dense.empty.is_empty() {
        bail!(
            "no eligible candidate at {} (shape, codebook, mode, M) points, M = {:?}",
            dense.empty.len(),
            dense.empty
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vnni_kernels::registry::{grouped_candidates, prefill_candidates};

    #[test]
    fn each_m_times_the_kernels_that_can_serve_it() {
        let batched: Vec<Candidate> = grouped_candidates().into_iter().chain(prefill_candidates()).collect();
        let ids = |m, d| dense_candidates(m, &batched, d).into_iter().map(|c| c.id.to_string()).collect::<Vec<_>>();
        let small = ids(9, None);
        assert!(small.iter().any(|c| c == "grouped.rows.r8"));
        assert!(small.iter().any(|c| c.starts_with("grouped.imma.")));
        assert!(!small.iter().any(|c| c.starts_with("prefill.")));
        let large = ids(4096, None);
        assert!(!large.iter().any(|c| c == "grouped.rows.r16"));
        assert!(
            large.iter().any(|c| c.starts_with("grouped.imma.")) && large.iter().any(|c| c.starts_with("prefill."))
        );
        // a policy that dispatches a rows kernel at M = 4096 gets it timed there
        assert!(ids(4096, find("grouped.rows.r16")).iter().any(|c| c == "grouped.rows.r16"));
    }

    #[test]
    fn partials_over_the_budget_are_named() {
        let r16 = find("grouped.rows.r16").unwrap();
        // an LM head at M = 4096 in 16 partitions: 40 GB of partials
        let why = unrunnable(r16, Codebook::S4, 151_936, 4096, 4096, 8).unwrap();
        assert!(why.contains("GiB of partials") && why.contains("grouped.rows.r16"), "{why}");
        assert_eq!(unrunnable(r16, Codebook::S4, 151_936, 4096, 16, 128), None);
    }

    #[test]
    fn a_policy_for_other_units_or_words_is_refused() {
        let p = vnni_policy::example::example_policy(vnni_kernels::Backend::Cuda);
        let cb: Codebook = p.codebooks[0].parse().unwrap();
        let mode: Mode = p.modes[0].parse().unwrap();
        assert!(check_policy(&p, &[cb], &[mode], p.units as u32).is_ok());
        assert!(check_policy(&p, &[cb], &[mode], p.units as u32 + 1).unwrap_err().to_string().contains("SMs"));
    }
}
