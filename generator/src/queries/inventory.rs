//! Every inventory point: shapes x codebooks x modes x (the plan's M values, M = 1, a large
//! M and every bucket edge).

use vnni_policy::Policy;

use super::{bucket_edge_ms, codebook_modes, InventoryPoints, Query};

pub fn queries(policy: &Policy, points: &InventoryPoints) -> Vec<Query> {
    let mut ms: Vec<u64> =
        points.m.iter().copied().chain([1]).chain(bucket_edge_ms(policy)).filter(|&m| m > 0).collect();
    ms.sort_unstable();
    ms.dedup();
    let mut out = Vec::new();
    for &(n, k) in &points.shapes {
        for (codebook, mode) in codebook_modes(policy) {
            out.extend(ms.iter().map(|&m| Query { codebook, mode, m, n, k }));
        }
    }
    out
}
