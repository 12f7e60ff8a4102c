//! Boundary queries. For every split of every tree: shapes that reach the split (through its
//! domain's aspect bucket and its ancestors) with the feature just at the threshold (the
//! largest reachable value <= le, ideally le itself) and just past it (ideally le + 1), so a
//! predicate changed by one flips an answer. Also: exact aspect-edge ratios and their
//! neighbours, every M bucket edge, every overlay and its neighbours, the extreme corners,
//! and shapes at the cost models' element limit and just past it (the tree answers there).

use std::ptr;

use vnni_policy::{Feature, Node, Policy, Surface, MAX_DIM};

use super::{bucket_edge_ms, codebook_modes, InventoryPoints, Query};

const MAX_K: u64 = MAX_DIM / 32 * 32;
/// Boundary shapes kept per side of a split (exact threshold hits first).
const PER_SIDE: usize = 4;

/// How well the split boundaries were reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SplitCoverage {
    pub splits: usize,
    /// Splits reached with the feature on both sides of the threshold.
    pub both_sides: usize,
    /// Splits reached with the feature exactly `le` and exactly `le + 1`.
    pub exact: usize,
    /// Splits of the fallback trees of domains with cost models (the tree answers only where
    /// the models do not: beyond their element limit), not counted above ...
    pub fallback_splits: usize,
    /// ... and of those, the ones reached on both sides by shapes the tree answers.
    pub fallback_both_sides: usize,
}

pub fn queries(policy: &Policy, points: &InventoryPoints) -> (Vec<Query>, SplitCoverage) {
    let mut out = Vec::new();
    let coverage = split_queries(policy, &mut out);
    aspect_edge_queries(policy, &mut out);
    bucket_edge_queries(policy, points, &mut out);
    overlay_queries(policy, &mut out);
    corner_queries(policy, &mut out);
    model_limit_queries(policy, &mut out);
    anchor_queries(policy, &mut out);
    (out, coverage)
}

fn legal_n(n: u64) -> bool {
    (1..=MAX_DIM).contains(&n)
}

fn legal_k(k: u64) -> bool {
    (32..=MAX_K).contains(&k) && k % 32 == 0
}

/// `x` as u64 when it is a legal N (`n`) or K (otherwise).
fn clip(x: i128, n: bool) -> Option<u64> {
    let v = u64::try_from(x).ok()?;
    (if n { legal_n(v) } else { legal_k(v) }).then_some(v)
}

fn floor32(x: i128) -> i128 {
    x.div_euclid(32) * 32
}

/// The split nodes of a tree, pre-order.
fn splits(node: &Node) -> Vec<&Node> {
    let mut out = Vec::new();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if let Node::Split { left, right, .. } = n {
            out.push(n);
            stack.extend(right.as_deref());
            stack.extend(left.as_deref());
        }
    }
    out
}

fn reaches(policy: &Policy, root: &Node, target: &Node, n: u64, k: u64) -> bool {
    let mut node = root;
    loop {
        if ptr::eq(node, target) {
            return true;
        }
        let Node::Split { feature, le, left, right } = node else { return false };
        let next = if feature.value(n, k, policy.units) <= *le { left } else { right };
        let Some(next) = next.as_deref() else { return false };
        node = next;
    }
}

/// Geometric N values 1 .. 2^30 and 2^31 - 1.
fn geometric_n() -> impl Iterator<Item = u64> {
    (0..31).map(|e| 1u64 << e).chain([MAX_DIM])
}

/// Geometric K values 32 .. 2^30 and the largest legal K.
fn geometric_k() -> impl Iterator<Item = u64> {
    (0..26).map(|e| 32u64 << e).chain([MAX_K])
}

/// For a fixed N, the K values where some split or aspect edge changes side.
fn k_partners(policy: &Policy, tree: &Node, n: u64) -> Vec<u64> {
    let n = n as i128;
    let mut ks: Vec<i128> = geometric_k().map(i128::from).collect();
    for e in &policy.aspect_edges {
        if e.num > 0 {
            let k0 = floor32(n * e.den as i128 / e.num as i128);
            ks.extend([k0, k0 + 32]);
        }
    }
    for s in splits(tree) {
        let Node::Split { feature, le, .. } = s else { continue };
        let le = *le as i128;
        match feature {
            Feature::K => ks.extend([floor32(le), floor32(le) + 32]),
            Feature::Kblk => ks.extend([32 * le, 32 * (le + 1)]),
            Feature::NK => ks.extend([floor32(le / n), floor32(le / n) + 32]),
            Feature::AspectQ10 if le >= 0 => {
                let k0 = floor32(n * 1024 / (le + 1));
                ks.extend([k0, k0 + 32, k0 + 64]);
            }
            _ => {}
        }
    }
    ks.into_iter().filter_map(|k| clip(k, false)).collect()
}

/// For a fixed K, the N values where some split or aspect edge changes side.
fn n_partners(policy: &Policy, tree: &Node, k: u64) -> Vec<u64> {
    let k = k as i128;
    let mut ns: Vec<i128> = geometric_n().map(i128::from).collect();
    for e in &policy.aspect_edges {
        if e.den > 0 {
            let n0 = k * e.num as i128 / e.den as i128;
            ns.extend([n0 - 1, n0, n0 + 1]);
        }
    }
    for s in splits(tree) {
        let Node::Split { feature, le, .. } = s else { continue };
        let t = n_threshold(policy, *feature, *le as i128, k);
        if let Some(t) = t {
            ns.extend([t, t + 1]);
        }
    }
    ns.into_iter().filter_map(|n| clip(n, true)).collect()
}

/// The largest N with `feature(N, k) <= le` for features monotone in N (None: K-only).
fn n_threshold(policy: &Policy, feature: Feature, le: i128, k: i128) -> Option<i128> {
    let le0 = le.max(0);
    Some(match feature {
        Feature::N => le,
        Feature::Tiles { w } => sat_mul(le0, w as i128),
        Feature::Waves { w } => sat_mul(sat_mul(le0, w as i128), policy.units as i128),
        Feature::NK => le0 / k,
        Feature::AspectQ10 => ((le + 1) * k - 1).div_euclid(1024),
        Feature::K | Feature::Kblk => return None,
    })
}

/// A product past every legal dimension saturates (it only has to fail `clip`).
fn sat_mul(a: i128, b: i128) -> i128 {
    a.checked_mul(b).unwrap_or(i128::MAX)
}

/// Boundary shapes of one split: (n, k) pairs on each side, before the reach filter.
fn straddling(policy: &Policy, tree: &Node, feature: Feature, le: i64) -> Vec<(u64, u64)> {
    let le = le as i128;
    let mut pairs = Vec::new();
    let n_side = |k: u64, pairs: &mut Vec<(u64, u64)>| {
        if let Some(t) = n_threshold(policy, feature, le, k as i128) {
            for n in [t, t + 1] {
                if let Some(n) = clip(n, true) {
                    pairs.push((n, k));
                }
            }
        }
    };
    match feature {
        Feature::K | Feature::Kblk => {
            let t = if feature == Feature::K { floor32(le) } else { 32 * le };
            for k in [t, t + 32].into_iter().filter_map(|k| clip(k, false)) {
                pairs.extend(n_partners(policy, tree, k).into_iter().map(|n| (n, k)));
            }
        }
        Feature::N | Feature::Tiles { .. } | Feature::Waves { .. } => {
            n_side(32, &mut pairs);
            let ns: Vec<u64> = pairs.iter().map(|p| p.0).collect();
            pairs.clear();
            for n in ns {
                pairs.extend(k_partners(policy, tree, n).into_iter().map(|k| (n, k)));
            }
        }
        Feature::NK | Feature::AspectQ10 => {
            let mut ks: Vec<u64> = geometric_k().collect();
            for s in splits(tree) {
                if let Node::Split { feature: Feature::K | Feature::Kblk, le: l, .. } = s {
                    ks.extend([floor32(*l as i128), 32 * *l as i128].into_iter().filter_map(|k| clip(k, false)));
                }
            }
            for k in ks {
                n_side(k, &mut pairs);
            }
            // The other way round: for each N partner, K just inside and outside.
            for n in geometric_n() {
                for k in k_partners(policy, tree, n) {
                    pairs.push((n, k));
                }
            }
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// Boundary queries of every split; returns the coverage.
fn split_queries(policy: &Policy, out: &mut Vec<Query>) -> SplitCoverage {
    let mut cov = SplitCoverage::default();
    for d in &policy.domains {
        let (Some(cb), Some(mode)) = (index(&policy.codebooks, &d.codebook), index(&policy.modes, &d.mode)) else {
            continue;
        };
        let bucket = &policy.m_buckets[d.m_bucket];
        let ms: Vec<u64> = [Some(bucket.lo), bucket.hi.filter(|&h| h != bucket.lo)].into_iter().flatten().collect();
        let modelled = !d.models.is_empty();
        let domain = policy.domains.iter().position(|x| ptr::eq(x, d)).expect("d is one of them");
        for s in splits(&d.tree) {
            let Node::Split { feature, le, .. } = s else { continue };
            // Only shapes the tree answers test it (where models answer, they are tested).
            let in_domain = |&(n, k): &(u64, u64)| {
                (bucket.surface != Surface::Decode || Some(policy.aspect_bucket(n, k)) == d.aspect)
                    && reaches(policy, &d.tree, s, n, k)
                    && (!modelled || policy.model_pick(domain, n, k).is_none())
            };
            let reached: Vec<(u64, u64)> =
                straddling(policy, &d.tree, *feature, *le).into_iter().filter(in_domain).collect();
            let value = |&(n, k): &(u64, u64)| i128::from(feature.value(n, k, policy.units));
            let le = i128::from(*le);
            let (mut left, mut right): (Vec<_>, Vec<_>) = reached.into_iter().partition(|p| value(p) <= le);
            // Closest to the threshold first: exact hits of le and le + 1 lead.
            left.sort_by_key(|p| (le - value(p), *p));
            right.sort_by_key(|p| (value(p) - le, *p));
            let both = usize::from(!left.is_empty() && !right.is_empty());
            if modelled {
                cov.fallback_splits += 1;
                cov.fallback_both_sides += both;
            } else {
                cov.splits += 1;
                cov.both_sides += both;
                cov.exact += usize::from(
                    left.first().is_some_and(|p| value(p) == le) && right.first().is_some_and(|p| value(p) == le + 1),
                );
            }
            for &(n, k) in left.iter().take(PER_SIDE).chain(right.iter().take(PER_SIDE)) {
                out.extend(ms.iter().map(|&m| Query { codebook: cb as i32, mode: mode as i32, m, n, k }));
            }
        }
    }
    cov
}

fn index(names: &[String], name: &str) -> Option<usize> {
    names.iter().position(|x| x == name)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Shapes with N/K exactly on each aspect edge, and their neighbours, at every bucket.
fn aspect_edge_queries(policy: &Policy, out: &mut Vec<Query>) {
    let mut shapes = Vec::new();
    for e in policy.aspect_edges.iter().filter(|e| e.num > 0) {
        let g = gcd(e.num, e.den);
        let (a, b) = (e.num / g, e.den / g);
        // n * den == k * num with n = a t, k = b t; k a multiple of 32 needs t a multiple of this.
        let step = 32 / gcd(b, 32);
        let mut t = step;
        while a.checked_mul(t).is_some_and(legal_n) && b.checked_mul(t).is_some_and(legal_k) {
            let (n, k) = (a * t, b * t);
            shapes.extend([(n, k), (n - 1, k), (n + 1, k), (n, k + 32), (n, k - 32)]);
            t = t.saturating_mul(2);
        }
    }
    shapes.retain(|&(n, k)| legal_n(n) && legal_k(k));
    let ms: Vec<u64> = policy.m_buckets.iter().map(|b| b.lo).collect();
    for (codebook, mode) in codebook_modes(policy) {
        for &(n, k) in &shapes {
            out.extend(ms.iter().map(|&m| Query { codebook, mode, m, n, k }));
        }
    }
}

/// Every M bucket edge (one past each too) with a few shapes.
fn bucket_edge_queries(policy: &Policy, points: &InventoryPoints, out: &mut Vec<Query>) {
    let shapes: Vec<(u64, u64)> = points.shapes.iter().copied().take(4).chain([(4096, 4096), (1, 32)]).collect();
    for (codebook, mode) in codebook_modes(policy) {
        for m in bucket_edge_ms(policy) {
            out.extend(shapes.iter().map(|&(n, k)| Query { codebook, mode, m, n, k }));
        }
    }
}

/// Every overlay at both ends of its bucket, in every mode, and its neighbouring shapes.
fn overlay_queries(policy: &Policy, out: &mut Vec<Query>) {
    for o in &policy.overlays {
        let Some(cb) = index(&policy.codebooks, &o.codebook) else { continue };
        let Some(bucket) = policy.m_buckets.get(o.m_bucket) else { continue };
        let ms = [Some(bucket.lo), bucket.hi].into_iter().flatten();
        let shapes = [(o.n, o.k), (o.n - 1, o.k), (o.n + 1, o.k), (o.n, o.k + 32), (o.n, o.k.saturating_sub(32))];
        for m in ms {
            for mode in 0..policy.modes.len() as i32 {
                out.extend(shapes.iter().map(|&(n, k)| Query { codebook: cb as i32, mode, m, n, k }));
            }
        }
    }
}

/// Every anchor of the correction and shapes around it inside the weights' reach (N and K
/// scaled by 2^(j/8), |j| <= 6, and off by one column or one K-block), at M = 1 in its
/// domain's codebook and mode: where the correction moves predictions.
fn anchor_queries(policy: &Policy, out: &mut Vec<Query>) {
    for d in policy.domains.iter().filter(|d| !d.anchors.is_empty()) {
        let (Some(cb), Some(mode)) = (index(&policy.codebooks, &d.codebook), index(&policy.modes, &d.mode)) else {
            continue;
        };
        for &[n, k] in &d.anchors {
            // 2^(j/8) in thousandths (integers: the same queries everywhere).
            const STEPS: [u64; 7] = [1000, 1091, 1189, 1297, 1414, 1542, 1682];
            let scaled = |x: u64, j: i32| {
                let s = STEPS[j.unsigned_abs() as usize];
                if j >= 0 {
                    x * s / 1000
                } else {
                    x * 1000 / s
                }
            };
            let mut shapes = vec![(n + 1, k), (n.saturating_sub(1), k), (n, k + 32), (n, k.saturating_sub(32))];
            for j in -6..=6 {
                shapes.push((scaled(n, j), k));
                shapes.push((n, scaled(k, j) / 32 * 32));
                shapes.push((scaled(n, j), scaled(k, -j) / 32 * 32));
            }
            for (n, k) in shapes.into_iter().filter(|&(n, k)| legal_n(n) && legal_k(k)) {
                out.push(Query { codebook: cb as i32, mode: mode as i32, m: 1, n, k });
            }
        }
    }
}

/// All corners of the legal cube (1 and 2^31 - 1; K 32 and the largest multiple of 32).
fn corner_queries(policy: &Policy, out: &mut Vec<Query>) {
    for (codebook, mode) in codebook_modes(policy) {
        for m in [1, MAX_DIM] {
            for n in [1, MAX_DIM] {
                for k in [32, MAX_K] {
                    out.push(Query { codebook, mode, m, n, k });
                }
            }
        }
    }
}

/// N * K at the cost models' limit (2^36 elements) and just past it, and at every edge of a
/// model's size range and beside it, at several aspects.
fn model_limit_queries(policy: &Policy, out: &mut Vec<Query>) {
    if policy.domains.iter().all(|d| d.models.is_empty()) {
        return;
    }
    let mut edges = std::collections::BTreeSet::from([vnni_policy::cost::MAX_ELEMENTS]);
    for m in policy.domains.iter().flat_map(|d| &d.models) {
        edges.extend([m.from_elements, m.below_elements.unwrap_or(0)].into_iter().filter(|&e| e > 0));
    }
    for ((codebook, mode), &edge) in codebook_modes(policy).flat_map(|cm| edges.iter().map(move |e| (cm, e))) {
        for k in [256u64, 4096, 1 << 18, 1 << 26].into_iter().filter(|&k| k <= edge) {
            let n = edge / k;
            for (n, k) in [(n, k), (n + 1, k), (n - 1, k), (n, k + 32)] {
                if legal_n(n) && legal_k(k) {
                    out.push(Query { codebook, mode, m: 1, n, k });
                }
            }
        }
    }
}
