//! Rendering: byte stability, provenance, escaping, refusal of broken policies, and policies
//! far from the example (every feature, extreme thresholds, odd aspect edges, two modes).

mod common;

use common::{example, expect_valid, inventory_points};
use vnni_generator::{render, validate, GenerateError, ValidateOptions};
use vnni_kernels::registry::Backend;
use vnni_policy::{Feature, Node, Policy, Ratio, Surface};

#[test]
fn rendering_is_byte_stable_and_depends_only_on_the_policy() {
    let p = example(Backend::Cuda);
    let a = render(&p).unwrap();
    let b = render(&Policy::from_bytes(&p.to_bytes()).unwrap()).unwrap();
    assert_eq!(a, b);
    assert_ne!(a.inc, render(&example(Backend::Cpu)).unwrap().inc);
    let mut q = p.clone();
    q.units += 1;
    assert_ne!(a.inc, render(&q).unwrap().inc, "units is part of the tables");
}

#[test]
fn every_output_carries_the_provenance() {
    let p = example(Backend::Cuda);
    let r = render(&p).unwrap();
    for (name, text) in r.files() {
        for want in [
            p.provenance.registry_digest.as_str(),
            &format!("corpus id        {}", p.provenance.corpus_id),
            &format!("inventory digest {}", p.provenance.inventory_digest),
            &format!("policy digest    {}", p.digest()),
            "gates NOT passed: 0/0 domains",
            &vnni_generator::provenance::generator_version(),
        ] {
            assert!(text.contains(want), "{name} lacks {want:?}");
        }
    }
}

#[test]
fn a_policy_that_fails_its_check_is_not_rendered() {
    let mut p = example(Backend::Cuda);
    p.m_buckets.pop();
    let e = render(&p).expect_err("an M bucket is missing");
    assert!(matches!(e, GenerateError::Policy(_)), "{e}");
    assert!(e.to_string().contains("reaches no bucket"), "{e}");
}

#[test]
fn hostile_provenance_strings_are_escaped_in_both_languages() {
    let mut p = example(Backend::Cuda);
    p.provenance.corpus_id = "quote\" backslash\\ newline\n trigraph??= */ tab\t é \\".into();
    p.provenance.arch = "sm_90\\".into();
    let r = render(&p).unwrap();
    let opts = ValidateOptions { random: 1000, ..ValidateOptions::new(inventory_points()) };
    expect_valid(validate(&p, &r, &opts));
}

fn leaf(id: &str) -> Option<Box<Node>> {
    Some(Box::new(Node::Leaf { candidate: id.into() }))
}

fn split(feature: Feature, le: i64, left: Option<Box<Node>>, right: Option<Box<Node>>) -> Option<Box<Node>> {
    Some(Box::new(Node::Split { feature, le, left, right }))
}

/// A tree over every feature, with thresholds at and beyond the edges of their ranges.
fn every_feature_tree(ids: &[String]) -> Node {
    let l = |i: usize| leaf(&ids[i % ids.len()]);
    *split(
        Feature::NK,
        1 << 40,
        split(
            Feature::AspectQ10,
            3000,
            split(Feature::Kblk, 100, l(0), l(1)),
            split(Feature::K, 65_535, l(2), split(Feature::Tiles { w: 64 }, 1000, l(3), l(4))),
        ),
        split(
            Feature::Waves { w: 256 },
            0,
            l(5),
            split(
                Feature::N,
                i64::MAX,
                split(Feature::NK, -3, l(0), l(1)),
                split(Feature::Tiles { w: 1 << 40 }, 1, l(2), l(3)),
            ),
        ),
    )
    .unwrap()
}

#[test]
fn a_policy_over_every_feature_two_modes_and_odd_aspect_edges_validates() {
    let mut p = example(Backend::Cuda);
    p.units = 7;
    p.aspect_edges =
        vec![Ratio { num: 1, den: 1_000_000 }, Ratio { num: 3, den: 7 }, Ratio { num: 2_147_483_647, den: 1 }];
    let generic: Vec<String> =
        p.candidates.iter().filter(|c| c.surface == Surface::Decode && c.generic_legal).map(|c| c.id.clone()).collect();
    let template = p.domains.clone();
    p.domains.clear();
    for mode in ["eager", "graph"] {
        for d in template.iter().filter(|d| d.aspect.is_none_or(|a| a == 0)) {
            let aspects: Vec<Option<usize>> = match d.aspect {
                Some(_) => (0..=p.aspect_edges.len()).map(Some).collect(),
                None => vec![None],
            };
            for aspect in aspects {
                let mut nd = d.clone();
                nd.mode = mode.into();
                nd.aspect = aspect;
                if let Some(a) = aspect {
                    let shift = a + usize::from(mode == "graph");
                    let ids: Vec<String> =
                        generic.iter().cycle().skip(shift * 3).take(generic.len()).cloned().collect();
                    nd.tree = every_feature_tree(&ids);
                }
                p.domains.push(nd);
            }
        }
    }
    p.domains.sort_by(|a, b| {
        (&a.codebook, &a.mode, a.m_bucket, a.aspect).cmp(&(&b.codebook, &b.mode, b.m_bucket, b.aspect))
    });
    p.modes = vec!["eager".into(), "graph".into()];
    p.check().unwrap();
    let r = render(&p).unwrap();
    let opts = ValidateOptions { random: 200_000, ..ValidateOptions::new(inventory_points()) };
    if let Some(v) = expect_valid(validate(&p, &r, &opts)) {
        eprintln!("{}", v.report());
        let c = v.report().coverage;
        // Per (codebook, mode) the two-sided splits are: aspect bucket 0 (N/K < 1e-6): NK;
        // bucket 1 (< 3/7): NK, Kblk; bucket 2: NK, AspectQ10, Kblk, K; bucket 3 (N/K >=
        // 2^31 - 1) is empty. The others have one side only (Waves <= 0, N <= i64::MAX,
        // NK <= -3, ...). Every two-sided split must be reached on both sides.
        let codebooks = vnni_kernels::Codebook::ALL.len();
        assert_eq!(c.splits, codebooks * 2 * 4 * 9, "{}", v.report());
        assert_eq!(c.both_sides, codebooks * 2 * (1 + 2 + 4), "{}", v.report());
    }
}
