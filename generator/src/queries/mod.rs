//! The queries both harnesses answer: every inventory point, boundary queries around every
//! split threshold, aspect edge, M bucket edge and overlay, and seeded random queries with
//! the extremes and illegal shapes mixed in.

mod boundary;
mod inventory;
mod random;

use vnni_policy::Policy;

pub use boundary::SplitCoverage;

/// The name both harnesses and the evaluator use for a codebook or mode index of -1.
pub const UNKNOWN_NAME: &str = "(unknown)";

/// One query. Codebook and mode are indices into the policy's lists; -1 names
/// [`UNKNOWN_NAME`]. Dimensions may be illegal (zero, >= 2^31, K not a multiple of 32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Query {
    pub codebook: i32,
    pub mode: i32,
    pub m: u64,
    pub n: u64,
    pub k: u64,
}

impl Query {
    pub fn names<'p>(&self, policy: &'p Policy) -> (&'p str, &'p str) {
        let pick = |names: &'p [String], i: i32| {
            usize::try_from(i).ok().and_then(|i| names.get(i)).map_or(UNKNOWN_NAME, |s| s.as_str())
        };
        (pick(&policy.codebooks, self.codebook), pick(&policy.modes, self.mode))
    }

    /// The harness input line: `codebook mode m n k`.
    pub fn line(&self) -> String {
        format!("{} {} {} {} {}", self.codebook, self.mode, self.m, self.n, self.k)
    }

    pub fn describe(&self, policy: &Policy) -> String {
        let (cb, mode) = self.names(policy);
        format!("codebook {cb:?} mode {mode:?} M={} N={} K={}", self.m, self.n, self.k)
    }
}

/// Where the inventory points come from: (N, K) shapes and the plan's M values.
#[derive(Debug, Clone, Default)]
pub struct InventoryPoints {
    pub shapes: Vec<(u64, u64)>,
    pub m: Vec<u64>,
}

impl InventoryPoints {
    /// The points of a resolved inventory profile.
    pub fn from_plan(plan: &vnni_corpus::inventory::InventoryPlan) -> InventoryPoints {
        InventoryPoints {
            shapes: plan.shapes.iter().map(|s| (s.n as u64, s.k as u64)).collect(),
            m: plan.m.iter().map(|&m| m as u64).collect(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct QuerySet {
    pub queries: Vec<Query>,
    pub inventory: usize,
    pub boundary: usize,
    pub random: usize,
    pub coverage: SplitCoverage,
}

/// Every query of one validation, in a deterministic order.
pub fn build(policy: &Policy, points: &InventoryPoints, random: usize, seed: u64) -> QuerySet {
    let mut queries = inventory::queries(policy, points);
    let inventory = queries.len();
    let (edges, coverage) = boundary::queries(policy, points);
    let boundary = edges.len();
    queries.extend(edges);
    queries.extend(random::queries(policy, random, seed));
    QuerySet { queries, inventory, boundary, random, coverage }
}

/// Each (codebook, mode) index pair of the policy.
fn codebook_modes(policy: &Policy) -> impl Iterator<Item = (i32, i32)> + '_ {
    (0..policy.codebooks.len() as i32).flat_map(move |cb| (0..policy.modes.len() as i32).map(move |mode| (cb, mode)))
}

/// M values that exercise every bucket: both ends of each (and one past each end).
fn bucket_edge_ms(policy: &Policy) -> Vec<u64> {
    let mut ms = Vec::new();
    for b in &policy.m_buckets {
        ms.extend([b.lo.saturating_sub(1), b.lo]);
        if let Some(hi) = b.hi {
            ms.extend([hi, hi + 1]);
        }
    }
    ms.push(vnni_policy::MAX_DIM);
    ms.sort_unstable();
    ms.dedup();
    ms
}
