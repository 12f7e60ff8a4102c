//! Parse the `--ptxas-options=--verbose` lines of an NVRTC log into per-kernel resources.

use std::collections::BTreeMap;

/// What ptxas reports for one kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaticResources {
    pub registers: u32,
    pub stack_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    pub shared_static_bytes: u32,
}

impl StaticResources {
    /// Local memory in use (stack frame or spills): such a kernel is rejected.
    pub fn uses_local(&self) -> bool {
        self.stack_bytes > 0 || self.spill_store_bytes > 0 || self.spill_load_bytes > 0
    }
}

fn number_before(text: &str, unit: &str) -> Option<u32> {
    let at = text.find(unit)?;
    text[..at].split(|c: char| !c.is_ascii_digit()).rev().find(|s| !s.is_empty())?.parse().ok()
}

/// Resources per entry-point name, from a ptxas verbose log.
pub fn parse(log: &str) -> BTreeMap<String, StaticResources> {
    let mut out: BTreeMap<String, StaticResources> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            current = rest.split('\'').next().map(str::to_string);
        } else if let Some(rest) = line.split("Function properties for ").nth(1) {
            current = Some(rest.trim().to_string());
        }
        let Some(name) = current.clone() else { continue };
        let r = out.entry(name).or_default();
        if line.contains("bytes stack frame") {
            r.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
            r.spill_store_bytes = number_before(line, "bytes spill stores").unwrap_or(0);
            r.spill_load_bytes = number_before(line, "bytes spill loads").unwrap_or(0);
        }
        if line.contains("Used ") && line.contains("registers") {
            r.registers = number_before(line, "registers").unwrap_or(0);
            r.shared_static_bytes = number_before(line, "bytes smem").unwrap_or(0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_ptxas_verbose_lines() {
        let log = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'vnni_tile_s4_tn128_cpt1' for 'sm_90'\n\
ptxas info    : Function properties for vnni_tile_s4_tn128_cpt1\n\
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]\n\
ptxas info    : Compiling entry function 'vnni_fused_s4_c16' for 'sm_90'\n\
ptxas info    : Function properties for vnni_fused_s4_c16\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 32 registers, 400 bytes cmem[0]\n";
        let r = super::parse(log);
        let a = &r["vnni_tile_s4_tn128_cpt1"];
        assert_eq!(
            (a.registers, a.stack_bytes, a.spill_store_bytes, a.spill_load_bytes, a.shared_static_bytes),
            (40, 8, 4, 12, 4096)
        );
        assert!(a.uses_local());
        let b = &r["vnni_fused_s4_c16"];
        assert_eq!((b.registers, b.shared_static_bytes), (32, 0));
        assert!(!b.uses_local());
    }
}
