//! Trees for domains without data, chosen deterministically: the tree of the nearest domain
//! with data of the same codebook, mode and surface (decode: nearest aspect bucket; grouped:
//! nearest M bucket; ties to the lower index), else a single leaf with the best generic
//! candidate over the development keys of the same mode and surface (any codebook), else of
//! any mode, else the first generic candidate in registry order.

use std::collections::BTreeMap;

use vnni_policy::{Node, Surface};

use crate::domains::{DomainKey, Sample};
use crate::tree::Trainer;

/// The domain whose tree `key` borrows, if any has data.
pub fn nearest<'k>(
    key: &DomainKey,
    fitted: impl IntoIterator<Item = &'k DomainKey>,
    surface_of: impl Fn(usize) -> Surface,
) -> Option<&'k DomainKey> {
    let surface = surface_of(key.bucket);
    fitted
        .into_iter()
        .filter(|d| d.codebook == key.codebook && d.mode == key.mode && surface_of(d.bucket) == surface)
        .min_by_key(|d| {
            let distance = match (d.aspect, key.aspect) {
                (Some(a), Some(b)) => a.abs_diff(b),
                _ => d.bucket.abs_diff(key.bucket),
            };
            (distance, d.bucket, d.aspect)
        })
}

/// The single-leaf fallback.
pub fn best_single_leaf(
    t: &Trainer,
    key: &DomainKey,
    dev: &BTreeMap<DomainKey, Vec<Sample>>,
    surface_of: impl Fn(usize) -> Surface,
) -> Node {
    let surface = surface_of(key.bucket);
    let pool = |same_mode: bool| -> Vec<&Sample> {
        dev.iter()
            .filter(|(d, _)| surface_of(d.bucket) == surface && (!same_mode || d.mode == key.mode))
            .flat_map(|(_, s)| s.iter())
            .collect()
    };
    let mut samples = pool(true);
    if samples.is_empty() {
        samples = pool(false);
    }
    // With no samples at all every p95 is 0 and the tie band picks the first generic candidate.
    Node::Leaf { candidate: t.id(t.best_for(&samples)).into() }
}
