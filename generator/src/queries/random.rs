//! Seeded random queries: log-uniform dimensions over the whole legal range, the extremes
//! (1 and 2^31 - 1) often, small M often (where the buckets are), and about 3% illegal
//! queries of every kind.

use vnni_kernels::fixture::splitmix64;
use vnni_policy::{Policy, MAX_DIM};

use super::Query;

const MAX_KBLK: u64 = MAX_DIM / 32;

/// 2^e plus e random low bits, e uniform in 0..=30, capped at `max`.
fn log_uniform(r: u64, max: u64) -> u64 {
    let e = r % 31;
    ((1u64 << e) + ((r >> 32) & ((1u64 << e) - 1))).min(max)
}

/// 1 or `max` one time in sixteen each, else log-uniform.
fn dimension(r: u64, max: u64) -> u64 {
    match r % 16 {
        0 => 1,
        1 => max,
        _ => log_uniform(r >> 4, max),
    }
}

pub fn queries(policy: &Policy, count: usize, seed: u64) -> Vec<Query> {
    let codebooks = policy.codebooks.len() as u64;
    let modes = policy.modes.len() as u64;
    (0..count as u64)
        .map(|i| {
            let r = |j: u64| splitmix64(seed, i * 8 + j);
            let m = match r(2) % 4 {
                0 => 1 + r(3) % 64,
                _ => dimension(r(3), MAX_DIM),
            };
            let mut q = Query {
                codebook: (r(0) % codebooks) as i32,
                mode: (r(1) % modes) as i32,
                m,
                n: dimension(r(4), MAX_DIM),
                k: 32 * dimension(r(5), MAX_KBLK),
            };
            let illegal = r(6);
            if illegal % 32 == 0 {
                let extra = illegal >> 8;
                match (illegal >> 5) % 8 {
                    0 => q.m = 0,
                    1 => q.n = 0,
                    2 => q.k = 0,
                    3 => q.k += 1 + extra % 31,
                    4 => q.m = MAX_DIM + 1 + extra % (1 << 31),
                    5 => q.n = MAX_DIM + 1 + extra % (1 << 31),
                    6 => q.k = (MAX_DIM + 1) + 32 * (extra % 1024),
                    _ if extra % 2 == 0 => q.codebook = -1,
                    _ => q.mode = -1,
                }
            }
            q
        })
        .collect()
}
