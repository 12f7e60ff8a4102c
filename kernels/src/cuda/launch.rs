//! What a launch is given, and the checks that run before any unsafe launch: the plan must
//! be the one the registry derives for this candidate, shape and bpp (so the grid covers
//! exactly the buffers), and every buffer must hold what the kernel reads or writes. The
//! checks are plain arithmetic on lengths, so they are tested without a GPU.

use crate::registry::{Candidate, LaunchPlan};
use crate::{Codebook, Surface};

/// The lengths and shapes of one launch, checked by [`LaunchCheck::verify`].
#[derive(Debug, Clone)]
pub struct LaunchCheck<'a> {
    pub candidate: &'a Candidate,
    pub plan: &'a LaunchPlan,
    pub codebook: Codebook,
    pub n: usize,
    pub k: usize,
    pub sms: u32,
    /// Elements of the weight payload, scales and second scales (if any).
    pub payload_len: usize,
    pub scale_len: usize,
    pub second_len: Option<usize>,
    pub activation_rows: usize,
    pub activation_k: usize,
    /// Elements of the quantized activations: q, d, sum.
    pub activation_lens: (usize, usize, usize),
    pub first_row: usize,
    pub rows: usize,
    pub batched: bool,
    pub y_len: usize,
    pub workspace_len: usize,
    /// With programmatic dependent launch: only for families whose kernels wait for the
    /// previous grid before reading its output or storing ([`Family::programmatic`]).
    pub programmatic: bool,
}

/// Whether `arch` (`sm_<major><minor>`) has programmatic dependent launch (sm_90 and later):
/// below it the kernels compile without their wait, so the attribute must never be set.
pub fn programmatic_arch(arch: &str) -> bool {
    arch.strip_prefix("sm_")
        .and_then(|v| v.trim_end_matches(|c: char| c.is_ascii_alphabetic()).parse::<u32>().ok())
        .is_some_and(|v| v >= 90)
}

/// Why a launch was refused before it reached the device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refusing to launch {candidate} on {n} x {k} (M = {rows}): {why}")]
pub struct LaunchRefused {
    pub candidate: String,
    pub n: usize,
    pub k: usize,
    pub rows: usize,
    pub why: String,
}

impl LaunchCheck<'_> {
    /// Everything the kernel relies on; returns whether the launch is two-phase (partials
    /// then the ordered reduce).
    pub fn verify(&self) -> Result<bool, LaunchRefused> {
        let refuse = |why: String| LaunchRefused {
            candidate: self.candidate.id.to_string(),
            n: self.n,
            k: self.k,
            rows: self.rows,
            why,
        };
        let (c, p, n, k, m) = (self.candidate, self.plan, self.n, self.k, self.rows);
        if n == 0 || k == 0 || k % 32 != 0 || m == 0 {
            return Err(refuse("N, K and M must be positive and K a multiple of 32".into()));
        }
        if c.backend != crate::Backend::Cuda {
            return Err(refuse(format!("{} is a {} candidate, not a CUDA kernel", c.id, c.backend)));
        }
        if self.programmatic && !c.family.programmatic() {
            return Err(refuse(format!(
                "a {:?} kernel does not wait for the previous grid, so it cannot launch programmatically",
                c.family
            )));
        }
        if !c.supports(self.codebook) {
            return Err(refuse(format!("the candidate does not support codebook {}", self.codebook)));
        }
        let expected = match (c.surface, self.batched) {
            (Surface::Decode, false) if m == 1 => c.plan(n, k, self.sms),
            (Surface::Grouped | Surface::Prefill, true) => c.plan_batched(self.codebook, n, k, m, p.bpp),
            _ => return Err(refuse(format!("a {} candidate cannot launch this way", c.surface))),
        };
        if expected.as_ref() != Some(p) {
            return Err(refuse(format!("the plan {p:?} is not the registry's ({expected:?})")));
        }
        let kblk = k / 32;
        let blocks = kblk.checked_mul(n).ok_or_else(|| refuse("N x KBLK overflows".into()))?;
        if self.payload_len != blocks * self.codebook.payload_bytes() || self.scale_len != blocks {
            return Err(refuse(format!(
                "weights hold {} payload bytes and {} scales, the shape needs {} and {blocks}",
                self.payload_len,
                self.scale_len,
                blocks * self.codebook.payload_bytes()
            )));
        }
        if self.second_len != self.codebook.has_second().then_some(blocks) {
            return Err(refuse(format!("second scales {:?} do not fit codebook {}", self.second_len, self.codebook)));
        }
        let last = self.first_row.checked_add(m).ok_or_else(|| refuse("row range overflows".into()))?;
        let (q, d, sum) = self.activation_lens;
        let rows_held = self.activation_rows;
        if self.activation_k != k
            || last > rows_held
            || q < rows_held * k
            || d < rows_held * kblk
            || sum < rows_held * kblk
        {
            return Err(refuse(format!(
                "activations hold {rows_held} rows of K = {} (q {q}, d {d}, sum {sum}); rows {}..{last} of K = {k} are needed",
                self.activation_k, self.first_row
            )));
        }
        let outputs = m * n;
        if self.y_len < outputs {
            return Err(refuse(format!("the output holds {} floats, {outputs} are written", self.y_len)));
        }
        let two_phase = c.two_phase(p.kb);
        if two_phase && self.workspace_len < p.kb * outputs {
            return Err(refuse(format!(
                "the workspace holds {} floats, {} partials are written",
                self.workspace_len,
                p.kb * outputs
            )));
        }
        Ok(two_phase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::find;

    fn check<'a>(c: &'a Candidate, p: &'a LaunchPlan, n: usize, k: usize, m: usize, batched: bool) -> LaunchCheck<'a> {
        let blocks = n * k / 32;
        LaunchCheck {
            candidate: c,
            plan: p,
            codebook: Codebook::S4,
            n,
            k,
            sms: 132,
            payload_len: blocks * 16,
            scale_len: blocks,
            second_len: None,
            activation_rows: m,
            activation_k: k,
            activation_lens: (m * k, m * k / 32, m * k / 32),
            first_row: 0,
            rows: m,
            batched,
            y_len: m * n,
            workspace_len: p.workspace,
            programmatic: false,
        }
    }

    #[test]
    fn programmatic_launch_needs_sm_90() {
        assert!(programmatic_arch("sm_90") && programmatic_arch("sm_90a") && programmatic_arch("sm_100"));
        assert!(!programmatic_arch("sm_89") && !programmatic_arch("sm_80") && !programmatic_arch("gfx90a"));
    }

    #[test]
    fn only_decode_families_launch_programmatically() {
        for id in ["decode.kpar.tn128.cpt1.kb8", "decode.wide.tn256.cpt2", "decode.fused.c16.kb8"] {
            let c = find(id).unwrap();
            let p = c.plan(4096, 4096, 132).unwrap();
            let pdl = LaunchCheck { programmatic: true, ..check(c, &p, 4096, 4096, 1, false) };
            assert!(pdl.verify().is_ok(), "{id}");
        }
        // The grouped and prefill kernels store without waiting for the previous grid.
        for (id, m) in [("grouped.rows.r8", 8), ("grouped.imma.16x128.w1x4.std", 16), ("prefill.bk256.wide.std", 64)] {
            let c = find(id).unwrap();
            let p = c.plan_batched(Codebook::S4, 4096, 4096, m, 32).unwrap();
            assert!(check(c, &p, 4096, 4096, m, true).verify().is_ok(), "{id}");
            let pdl = LaunchCheck { programmatic: true, ..check(c, &p, 4096, 4096, m, true) };
            assert!(pdl.verify().unwrap_err().why.contains("programmatically"), "{id}");
        }
    }

    #[test]
    fn a_consistent_launch_passes_and_each_short_buffer_is_refused() {
        let c = find("decode.kpar.tn128.cpt1.kb8").unwrap();
        let p = c.plan(4096, 4096, 132).unwrap();
        assert_eq!(check(c, &p, 4096, 4096, 1, false).verify(), Ok(true));
        let short_y = LaunchCheck { y_len: 4095, ..check(c, &p, 4096, 4096, 1, false) };
        assert!(short_y.verify().unwrap_err().why.contains("output"));
        let short_ws = LaunchCheck { workspace_len: 8 * 4096 - 1, ..check(c, &p, 4096, 4096, 1, false) };
        assert!(short_ws.verify().unwrap_err().why.contains("workspace"));
        let short_w = LaunchCheck { payload_len: 10, ..check(c, &p, 4096, 4096, 1, false) };
        assert!(short_w.verify().unwrap_err().why.contains("weights"));
        let wrong_k = LaunchCheck { activation_k: 2048, ..check(c, &p, 4096, 4096, 1, false) };
        assert!(wrong_k.verify().unwrap_err().why.contains("activations"));
        let past_rows = LaunchCheck { first_row: 1, ..check(c, &p, 4096, 4096, 1, false) };
        assert!(past_rows.verify().is_err());
        // A plan of another shape would launch a grid over memory that is not there.
        let other = c.plan(8192, 4096, 132).unwrap();
        assert!(check(c, &other, 4096, 4096, 1, false).verify().unwrap_err().why.contains("registry"));
    }

    #[test]
    fn batched_plans_are_checked_at_their_inherited_bpp() {
        let g = find("grouped.rows.r8").unwrap();
        let p = g.plan_batched(Codebook::S4, 4096, 4096, 8, 32).unwrap();
        assert_eq!(check(g, &p, 4096, 4096, 8, true).verify(), Ok(true));
        assert!(check(g, &p, 4096, 4096, 8, false).verify().is_err(), "a grouped candidate is not a decode launch");
        let bk256 = find("prefill.bk256.wide.std").unwrap();
        let p = bk256.plan_batched(Codebook::S4, 4096, 4096, 64, 128).unwrap();
        assert_eq!(check(bk256, &p, 4096, 4096, 64, true).verify(), Ok(false));
        let nl4 = LaunchCheck { codebook: Codebook::Nl4, ..check(bk256, &p, 4096, 4096, 64, true) };
        assert!(nl4.verify().unwrap_err().why.contains("codebook"));
        // A grouped IMMA tile plans as its prefill kernel and folds the partitions in the CTA.
        let imma = find("grouped.imma.16x128.w1x4.std").unwrap();
        let p = imma.plan_batched(Codebook::S4, 4096, 4096, 16, 32).unwrap();
        assert_eq!((p.kb, p.grid, p.z, p.workspace, p.threads), (4, (32, 1), 1, 0, 128));
        assert_eq!(p.shared, imma.prefill.unwrap().shared_bytes(Codebook::S4));
        assert_eq!(check(imma, &p, 4096, 4096, 16, true).verify(), Ok(false));
        assert!(imma.plan_grouped(4096, 4096, 16, 32).is_none(), "not a dp4a / mma16 launch");
        // Its kpart form: one CTA z-slice per partition, partials and the ordered reduce.
        let kpart = find("grouped.imma.16x128.w1x4.kpart").unwrap();
        let p = kpart.plan_batched(Codebook::S4, 4096, 4096, 16, 32).unwrap();
        assert_eq!((p.kb, p.grid, p.z, p.workspace), (4, (32, 1), 4, 4 * 16 * 4096));
        assert_eq!(check(kpart, &p, 4096, 4096, 16, true).verify(), Ok(true));
        let cpu = find("cpu.decode.wide.t16").unwrap();
        let p = cpu.plan(4096, 4096, 132).unwrap();
        assert!(check(cpu, &p, 4096, 4096, 1, false).verify().unwrap_err().why.contains("not a CUDA kernel"));
    }
}
