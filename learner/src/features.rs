//! The integer features a tree may split on (`vnni_policy::Feature`), grouped into the
//! feature sets that cross-validation chooses between. Order within a set is the canonical
//! order: among features that split a node's rows identically, the first one is used.

use std::collections::BTreeSet;

use vnni_policy::Feature;

use crate::corpus::Corpus;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FeatureSet {
    /// N and K.
    Dims,
    /// N, K, N*K and the aspect.
    Shape,
    /// Shape plus K-blocks and, per registry tile width, tiles and waves.
    Launch,
}

impl FeatureSet {
    /// Simplest first (the cross-validation tie-break prefers earlier sets).
    pub const ALL: [FeatureSet; 3] = [FeatureSet::Dims, FeatureSet::Shape, FeatureSet::Launch];

    pub fn features(self, widths: &[u64]) -> Vec<Feature> {
        let mut f = vec![Feature::N, Feature::K];
        if self >= FeatureSet::Shape {
            f.extend([Feature::NK, Feature::AspectQ10]);
        }
        if self == FeatureSet::Launch {
            f.push(Feature::Kblk);
            f.extend(widths.iter().map(|&w| Feature::Tiles { w }));
            f.extend(widths.iter().map(|&w| Feature::Waves { w }));
        }
        f
    }
}

/// The distinct tile widths of the backend's candidates (both surfaces), ascending.
pub fn tile_widths(corpus: &Corpus) -> Vec<u64> {
    corpus.decode.iter().chain(&corpus.grouped).map(|c| c.tile as u64).collect::<BTreeSet<_>>().into_iter().collect()
}
