//! Exact overlays: for every `exact_overlay` geometry of the development partition, the
//! measured exact winner of each runtime key over every candidate legal for the shape, literal
//! KB included. Aliases collapse by the same minimax as everywhere, so each key gets one
//! physical candidate. Sealed rows never shape what ships: they are the held-out evidence
//! (certified once, overlays off), so a sealed shape is answered by the trees like any shape
//! the corpus never measured.

use std::collections::{BTreeMap, BTreeSet};

use vnni_kernels::registry::Surface;
use vnni_policy::Overlay;

use crate::corpus::Corpus;
use crate::domains::{DomainKey, Sample};
use crate::regret::minimax_winner;

pub fn exact_overlays(corpus: &Corpus, units: u64, development: &BTreeMap<DomainKey, Vec<Sample>>) -> Vec<Overlay> {
    let wanted: BTreeSet<(u64, u64)> =
        corpus.plan.inventory.shapes.iter().filter(|s| s.exact_overlay).map(|s| (s.n as u64, s.k as u64)).collect();
    let mut out = BTreeSet::new();
    for (d, keys) in development {
        for s in keys.iter().filter(|s| wanted.contains(&s.geometry())) {
            let surface = if s.m == 1 { Surface::Decode } else { Surface::Grouped };
            let list = corpus.candidates(surface);
            let legal = |c: usize| {
                surface == Surface::Grouped || list[c].plan(s.n as usize, s.k as usize, units as u32).is_some()
            };
            let per_alias: Vec<&[f64]> = s.cells.iter().map(|&i| corpus.cells[i].regret.as_slice()).collect();
            if let Some(w) = minimax_winner(&per_alias, legal) {
                out.insert(Overlay {
                    codebook: d.codebook.clone(),
                    mode: d.mode.clone(),
                    m_bucket: d.bucket,
                    n: s.n,
                    k: s.k,
                    candidate: list[w].id.to_string(),
                });
            }
        }
    }
    out.into_iter().collect()
}
