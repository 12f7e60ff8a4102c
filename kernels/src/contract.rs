//! The canonical arithmetic contract (DESIGN.md section 3), the one Rust copy of it.
//!
//! Every kernel, batch size and backend must produce the same bits for the same
//! (codebook, N, K, bpp, weights, activation row). That holds only if every float
//! operation below is a separately rounded f32 operation in exactly this order.
//! Rust never contracts `a * b + c` into an FMA on its own; never call `mul_add` here.

use std::ops::Range;

/// How a block's integer dot products become its f32 contribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleRule {
    /// `c = (sa * s) * dot` (s4, nl4, s5, s8, e2m1, nl3, o4, nl2).
    Single,
    /// `c = ((sa * s) * dot) + ((sa * min) * sum)` (u4, u5, u2m); `second` is the min. `sum` is
    /// the activation block's sum, or for sub-block mins (u2m) `m_lo * sum(a[0..16]) + m_hi *
    /// sum(a[16..32])` ([`min_sum`]).
    Asymmetric,
    /// `c = sa * ((s_lo * dot_lo) + (s_hi * dot_hi))` (s6d, s3d, nl2d); `second` scales elements 16..31.
    DualScale,
}

/// Integer products of one (row, column, K-block): exact i32 values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockDots {
    /// Dot over elements 0..16.
    pub lo: i32,
    /// Dot over elements 16..32.
    pub hi: i32,
    /// What the min multiplies (asymmetric codebooks): the sum of the 32 activation values,
    /// weighted by the block's sub-block mins where it has them ([`min_sum`]).
    pub act_sum: i32,
}

impl BlockDots {
    #[inline(always)]
    pub fn compute(w: &[i8; 32], a: &[i8], act_sum: i32) -> BlockDots {
        let dot = |r: Range<usize>| r.map(|i| i32::from(w[i]) * i32::from(a[i])).sum::<i32>();
        BlockDots { lo: dot(0..16), hi: dot(16..32), act_sum }
    }
}

/// The integer an asymmetric block's min multiplies: `mins[0] * sum(a[0..16]) + mins[1] *
/// sum(a[16..32])` (`Codebook::sub_mins`); with mins of one, the block sum `sum`. Exact:
/// |value| <= 2 * 15 * 16 * 127 for Q2_K's 4-bit mins.
#[inline(always)]
pub fn min_sum(mins: [i32; 2], a: &[i8], sum: i32) -> i32 {
    if mins == [1, 1] {
        return sum;
    }
    let lo: i32 = a[..16].iter().map(|&v| i32::from(v)).sum();
    mins[0] * lo + mins[1] * (sum - lo)
}

/// The f32 contribution of one K-block. `sa` is the activation block scale, `scale` and
/// `second` the block's f16 weight scales widened to f32 (exact).
/// The integers convert to f32 exactly: |dot| <= 32 * 128 * 127 < 2^24.
#[inline(always)]
pub fn block_contribution(rule: ScaleRule, sa: f32, scale: f32, second: f32, d: BlockDots) -> f32 {
    match rule {
        ScaleRule::Single => (sa * scale) * ((d.lo + d.hi) as f32),
        ScaleRule::Asymmetric => ((sa * scale) * ((d.lo + d.hi) as f32)) + ((sa * second) * (d.act_sum as f32)),
        ScaleRule::DualScale => sa * ((scale * d.lo as f32) + (second * d.hi as f32)),
    }
}

/// Number of K partitions for `kblk` K-blocks at `bpp` blocks per partition:
/// `ceil(kblk / bpp)`, so no partition is empty. `bpp >= kblk` is the one-partition "wide" tree.
#[inline]
pub fn partition_count(kblk: usize, bpp: usize) -> usize {
    assert!(bpp > 0, "bpp must be positive");
    kblk.div_ceil(bpp)
}

/// The K-block range of partition `p`.
#[inline]
pub fn partition_range(kblk: usize, bpp: usize, p: usize) -> Range<usize> {
    let start = p * bpp;
    start..(start + bpp).min(kblk)
}

/// Fold one partition: `(((0 + c0) + c1) + ...)`, starting from +0.0.
#[inline(always)]
pub fn fold_partition(acc: f32, contribution: f32) -> f32 {
    acc + contribution
}

/// Fold the partition results in ascending order, starting from the first one (not from 0).
#[inline]
pub fn fold_partials(partials: impl IntoIterator<Item = f32>) -> f32 {
    let mut it = partials.into_iter();
    let first = it.next().expect("at least one partition");
    it.fold(first, |y, p| y + p)
}

/// The whole contract for one output element, from per-block contributions: a slow,
/// obviously-correct statement of the tree that faster loops must reproduce.
pub fn canonical_dot(kblk: usize, bpp: usize, contribution: impl Fn(usize) -> f32) -> f32 {
    fold_partials(
        (0..partition_count(kblk, bpp))
            .map(|p| partition_range(kblk, bpp, p).fold(0.0f32, |acc, b| fold_partition(acc, contribution(b)))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_cover_k_without_empty_ones() {
        for kblk in 1..200 {
            for bpp in 1..kblk + 3 {
                let kb = partition_count(kblk, bpp);
                let mut next = 0;
                for p in 0..kb {
                    let r = partition_range(kblk, bpp, p);
                    assert_eq!(r.start, next);
                    assert!(!r.is_empty(), "kblk {kblk} bpp {bpp} partition {p} empty");
                    next = r.end;
                }
                assert_eq!(next, kblk);
            }
        }
    }

    #[test]
    fn fold_order_is_observable() {
        // 1 + 2^-24 rounds back to 1 (ties to even); 2^-24 + 2^-24 does not vanish.
        let half_eps = f32::EPSILON / 2.0;
        let c = [1.0f32, 0.0, half_eps, half_eps];
        assert_eq!(canonical_dot(4, 4, |b| c[b]), 1.0, "wide: the small terms are lost one by one");
        assert_eq!(canonical_dot(4, 1, |b| c[b]), 1.0, "one block per partition folds like wide");
        assert_eq!(canonical_dot(4, 2, |b| c[b]), 1.0 + f32::EPSILON, "two partitions keep their sum");
    }

    #[test]
    fn contributions_follow_the_stated_parenthesization() {
        let d = BlockDots { lo: 1000, hi: -333, act_sum: 77 };
        let (sa, s, m) = (0.013f32, 0.0071f32, -0.25f32);
        assert_eq!(block_contribution(ScaleRule::Single, sa, s, m, d), (sa * s) * 667.0);
        assert_eq!(block_contribution(ScaleRule::Asymmetric, sa, s, m, d), (sa * s) * 667.0 + (sa * m) * 77.0);
        assert_eq!(block_contribution(ScaleRule::DualScale, sa, s, m, d), sa * ((s * 1000.0) + (m * -333.0)));
    }
}
