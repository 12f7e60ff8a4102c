//! A small, total policy over the real registry: what tests of the generator, the
//! evaluator and the totality checks start from (and mutate) when no corpus is at hand.

use vnni_kernels::registry::Backend;
use vnni_kernels::Codebook;

use crate::ir::*;

/// Made-up cost models (of a plausible scale: a few us fixed, ~4 TB/s) for every generic decode
/// candidate, varied enough that the argmin moves with the shape; every third candidate
/// carries two, one per size regime (split at [`EXAMPLE_REGIME`] elements), each cheaper than
/// the single models (the small regime's the cheapest), so that the edge decides the answer.
fn models(candidates: &[CandidateDesc]) -> Vec<CostModel> {
    let generic = candidates.iter().filter(|c| c.surface == Surface::Decode && c.generic_legal);
    // Coefficients scaled by `eighths` / 8.
    let model = |i: u64, c: &CandidateDesc, eighths: u64| CostModel {
        candidate: c.id.clone(),
        registers: 32 + 8 * (i % 8) as u32,
        shared_static: 0,
        rate: [4, 8, 16, 32, 64, 128, 256][(i % 7) as usize],
        base: ((3 << 16) + 997 * i) * eighths / 8,
        waves: Coef { mantissa: (40_000 + 97 * i) * eighths / 8, shift: 15 },
        elements: Coef { mantissa: (30_000 + 31 * i) * eighths / 8, shift: 24 },
        partials: Coef { mantissa: 34_000 * eighths / 8, shift: 18 },
        cta_rounds: Coef { mantissa: (50_000 + 13 * i) * eighths / 8, shift: 12 },
        chain: Coef { mantissa: (20_000 + 7 * i) * eighths / 8, shift: 14 },
        // Every other model carries the split-K reduce term, so both forms meet the generated tables.
        reduce: match i % 2 {
            0 => Coef::default(),
            _ => Coef { mantissa: (30_000 + 11 * i) * eighths / 8, shift: 10 },
        },
        from_elements: 0,
        below_elements: None,
        residuals: Vec::new(),
    };
    let mut out = Vec::new();
    for (i, c) in generic.enumerate() {
        let i = i as u64;
        if i % 3 == 0 {
            out.push(CostModel { below_elements: Some(EXAMPLE_REGIME), ..model(i, c, 4) });
            out.push(CostModel { from_elements: EXAMPLE_REGIME, ..model(i + 5, c, 6) });
        } else {
            out.push(model(i, c, 8));
        }
    }
    // Residuals of up to +-40% at some anchors (every model a different subset), so that the
    // correction moves the argmin near them.
    for (i, m) in out.iter_mut().enumerate() {
        m.residuals = (0..EXAMPLE_ANCHORS.len())
            .filter(|a| (i + a) % 3 != 0)
            .map(|a| Residual { anchor: a as u32, value: ((i * 7919 + a * 104_729) % 52_429) as i32 - 26_214 })
            .collect();
    }
    out
}

/// The development shapes of the example's modelled domains (N, K; aspect 1/4 ..< 4).
pub const EXAMPLE_ANCHORS: [[u64; 2]; 6] =
    [[2048, 4096], [4096, 4096], [4096, 14_336], [5120, 5120], [8192, 3072], [14_336, 4096]];

/// Where the example's two-regime candidates change model (N * K).
pub const EXAMPLE_REGIME: u64 = 1 << 24;

/// Every codebook, one mode, buckets {1}, {2..=8}, {9..}, aspect edges 1/4 and 4, decode trees
/// that split on N and on waves (CUDA: cost models in the middle aspect bucket), one overlay
/// per surface.
pub fn example_policy(backend: Backend) -> Policy {
    let candidates = crate::descriptors(backend);
    let first = |surface: Surface, generic: bool, skip: usize| {
        candidates
            .iter()
            .filter(|c| c.surface == surface && (!generic || c.generic_legal))
            .nth(skip)
            .map(|c| c.id.clone())
            .expect("the registry has candidates of every surface")
    };
    let leaf = |id: String| Box::new(Node::Leaf { candidate: id });
    let decode_tree = |aspect: usize| Node::Split {
        feature: Feature::N,
        le: 4096,
        left: Some(leaf(first(Surface::Decode, true, aspect))),
        right: Some(Box::new(Node::Split {
            feature: Feature::Waves { w: 128 },
            le: 2,
            left: Some(leaf(first(Surface::Decode, true, aspect + 1))),
            right: Some(leaf(first(Surface::Decode, true, 0))),
        })),
    };
    let m_buckets = vec![
        MBucket { lo: 1, hi: Some(1), surface: Surface::Decode },
        MBucket { lo: 2, hi: Some(8), surface: Surface::Grouped },
        MBucket { lo: 9, hi: None, surface: Surface::Grouped },
    ];
    let aspect_edges = vec![Ratio { num: 1, den: 4 }, Ratio { num: 4, den: 1 }];
    let modes = vec!["eager".to_string()];
    let mut domains = Vec::new();
    for cb in Codebook::ALL {
        for mode in &modes {
            for (bi, b) in m_buckets.iter().enumerate() {
                let aspects: Vec<Option<usize>> = if b.surface == Surface::Decode {
                    (0..=aspect_edges.len()).map(Some).collect()
                } else {
                    vec![None]
                };
                for aspect in aspects {
                    let tree = match aspect {
                        Some(a) => decode_tree(a),
                        None => Node::Leaf { candidate: first(Surface::Grouped, true, bi - 1) },
                    };
                    let models =
                        if aspect == Some(1) && backend == Backend::Cuda { models(&candidates) } else { vec![] };
                    let anchors = if models.is_empty() { vec![] } else { EXAMPLE_ANCHORS.to_vec() };
                    domains.push(Domain {
                        codebook: cb.name().into(),
                        mode: mode.clone(),
                        m_bucket: bi,
                        aspect,
                        models,
                        anchors,
                        tree,
                        stats: None,
                    });
                }
            }
        }
    }
    domains.sort_by(|a, b| {
        (&a.codebook, &a.mode, a.m_bucket, a.aspect).cmp(&(&b.codebook, &b.mode, b.m_bucket, b.aspect))
    });
    let literal = candidates
        .iter()
        .find(|c| matches!(c.kb, KbFormula::Literal { .. }))
        .map(|c| c.id.clone())
        .expect("the registry has literal-KB candidates");
    let mut overlays = vec![
        Overlay { codebook: "s4".into(), mode: "eager".into(), m_bucket: 0, n: 4096, k: 4096, candidate: literal },
        Overlay {
            codebook: "s4".into(),
            mode: "eager".into(),
            m_bucket: 1,
            n: 4096,
            k: 4096,
            candidate: first(Surface::Grouped, false, 1),
        },
    ];
    overlays.sort();
    let mut codebooks: Vec<String> = Codebook::ALL.iter().map(|c| c.name().to_string()).collect();
    codebooks.sort();
    Policy {
        schema: SCHEMA.into(),
        provenance: Provenance {
            corpus_id: "example".into(),
            registry_digest: vnni_kernels::registry::registry_digest(),
            inventory_digest: "example".into(),
            backend: backend.name().into(),
            arch: "example".into(),
            profile: "example".into(),
            learner_version: "example".into(),
            frozen_m1: None,
            m1_only: false,
            pairs: None,
            programmatic: false,
            development_only: false,
            focus: None,
            twins_pooled: false,
            reduce_term: false,
        },
        units: 132,
        codebooks,
        modes,
        m_buckets,
        aspect_edges,
        correction: (backend == Backend::Cuda).then(|| Correction::gaussian(0.35, 0.5, 0.5)),
        candidates,
        domains,
        overlays,
        gates: Gates {
            p95_max: 0.05,
            ucb_max: 0.05,
            min_pass_fraction: 0.99,
            domains_passing: 0,
            domains_with_data: 0,
            passed: false,
            sealed: None,
        },
    }
}
