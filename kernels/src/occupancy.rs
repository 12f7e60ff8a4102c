//! Resident CTAs per SM of a launch on sm_90 (H100 / H200), from the kernel's registers and
//! the launch's threads and shared memory: the occupancy calculator's rules, so the cost
//! model (the learner fits it; policies and generated tables evaluate it) can place CTAs in
//! waves for shapes that were never launched. The corpus records the device's own answer for
//! every timed row; the test below holds launches the device reported in committed corpora.

/// Per-SM limits of compute capability 9.0.
pub const MAX_WARPS: u32 = 64;
pub const MAX_BLOCKS: u32 = 32;
pub const REGISTERS: u32 = 65_536;
/// Registers are allocated per warp in units of 256 ...
pub const REGISTER_UNIT: u32 = 256;
/// ... and warps are granted registers in groups of 4.
pub const WARP_GROUP: u32 = 4;
/// Shared memory an SM can hand out, the share the runtime reserves per CTA, and the
/// allocation unit.
pub const SHARED: u32 = 233_472;
pub const SHARED_RESERVED: u32 = 1024;
pub const SHARED_UNIT: u32 = 128;

/// CTAs of `threads` threads, `registers` registers per thread and `shared` bytes of shared
/// memory (static plus dynamic) that fit on one SM at once; 0 when one does not fit.
pub fn blocks_per_sm(threads: u32, registers: u32, shared: u32) -> u32 {
    if threads == 0 {
        return 0;
    }
    let warps = threads.div_ceil(32);
    let by_warps = MAX_WARPS / warps;
    let by_registers = if registers == 0 {
        MAX_BLOCKS
    } else {
        let per_warp = (registers * 32).div_ceil(REGISTER_UNIT) * REGISTER_UNIT;
        (REGISTERS / per_warp) / WARP_GROUP * WARP_GROUP / warps
    };
    let by_shared = if shared == 0 {
        MAX_BLOCKS
    } else {
        SHARED / ((shared + SHARED_RESERVED).div_ceil(SHARED_UNIT) * SHARED_UNIT)
    };
    MAX_BLOCKS.min(by_warps).min(by_registers).min(by_shared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_launches_of_the_h200_corpora() {
        // (threads, registers, shared) -> what the device reported in the committed corpora.
        assert_eq!(blocks_per_sm(144, 54, 576), 7); // fused c16, KB 9: 36 warps of registers / 5
        assert_eq!(blocks_per_sm(128, 54, 512), 9);
        assert_eq!(blocks_per_sm(288, 54, 1152), 4);
        assert_eq!(blocks_per_sm(32, 96, 0), 20); // 21 warps of registers, granted in fours
        assert_eq!(blocks_per_sm(32, 80, 0), 24);
        assert_eq!(blocks_per_sm(32, 107, 0), 16);
        assert_eq!(blocks_per_sm(64, 109, 0), 8);
        assert_eq!(blocks_per_sm(1024, 255, 0), 0);
        assert_eq!(blocks_per_sm(0, 32, 0), 0);
    }
}
