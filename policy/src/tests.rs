use vnni_kernels::registry::{all_candidates, Backend};

use crate::example::{example_policy, EXAMPLE_REGIME};
use crate::*;

#[test]
fn the_example_is_total_and_matches_the_registry() {
    for backend in [Backend::Cuda, Backend::Cpu] {
        let p = example_policy(backend);
        p.check().unwrap();
        p.check_registry().unwrap();
        assert_eq!(Policy::from_bytes(&p.to_bytes()).unwrap(), p);
    }
}

#[test]
fn bpp_formulas_equal_the_registry_plans() {
    for c in all_candidates().iter().filter(|c| c.surface == Surface::Decode) {
        let d = descriptor(c);
        for units in [2u32, 132] {
            for (n, k) in
                [(1, 32), (64, 320), (4096, 12288), (151_936, 4096), (300, 32 * 97), (2_147_483_647, 32 * 1024)]
            {
                let want = c.plan(n, k, units).map(|p| p.bpp as u64);
                assert_eq!(d.bpp(n as u64, k as u64, units as u64), want, "{} {n}x{k} units {units}", c.id);
            }
        }
    }
}

#[test]
fn overlays_win_and_grouped_rows_inherit_the_decode_bpp() {
    let p = example_policy(Backend::Cuda);
    let d = p.select("s4", "eager", 1, 4096, 4096).unwrap();
    assert_eq!(d.via, Via::Overlay);
    assert!(d.candidate.id.contains(".kb"));
    let off = p.select_with("s4", "eager", 1, 4096, 4096, false).unwrap();
    assert_eq!(off.via, Via::Model);
    for m in [2, 5, 8, 9, 31, 4096, MAX_DIM] {
        let g = p.select("s4", "eager", m, 4096, 4096).unwrap();
        assert_eq!(g.bpp, d.bpp, "M={m}");
        assert_eq!(g.candidate.surface, Surface::Grouped);
    }
    assert!(matches!(p.select("s4", "graph", 1, 64, 64), Err(PolicyError::UnknownMode { .. })));
    assert!(matches!(p.select("s4", "eager", 0, 64, 64), Err(PolicyError::BadQuery { .. })));
    assert!(matches!(p.select("q4", "eager", 1, 64, 64), Err(PolicyError::UnknownCodebook { .. })));
    // Extremes stay in range.
    let e = p.select("s8", "eager", MAX_DIM, MAX_DIM, MAX_DIM / 32 * 32).unwrap();
    assert!(e.bpp >= 1);
}

fn rejected(p: &Policy) -> String {
    p.check().expect_err("a broken policy must be rejected").to_string()
}

#[test]
fn deleting_a_domain_a_codebook_a_branch_or_a_bucket_is_rejected() {
    let base = example_policy(Backend::Cuda);
    assert!(!base.overlays.is_empty());

    let mut p = base.clone();
    p.domains.remove(3);
    assert!(rejected(&p).contains("is missing"), "{}", rejected(&p));

    let mut p = base.clone();
    p.domains.retain(|d| d.codebook != "u5");
    assert!(rejected(&p).contains("u5"), "{}", rejected(&p));

    let mut p = base.clone();
    if let Node::Split { right, .. } = &mut p.domains[0].tree {
        *right = None;
    }
    assert!(rejected(&p).contains("right branch is missing"), "{}", rejected(&p));
    // The JSON route: a branch deleted from the file parses, then fails the check.
    let text = String::from_utf8(base.to_bytes()).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["domains"][0]["tree"].as_object_mut().unwrap().remove("left");
    let p: Policy = serde_json::from_value(v).unwrap();
    assert!(rejected(&p).contains("left branch is missing"));

    let mut p = base.clone();
    p.m_buckets.remove(1);
    assert!(rejected(&p).contains("reaches no bucket"), "{}", rejected(&p));
    let mut p = base.clone();
    p.m_buckets.last_mut().unwrap().hi = Some(1000);
    assert!(rejected(&p).contains("reaches no bucket"));
}

#[test]
fn leaves_must_be_generic_and_of_their_surface() {
    let mut p = example_policy(Backend::Cuda);
    let literal = p.overlays.iter().find(|o| o.m_bucket == 0).unwrap().candidate.clone();
    p.domains[0].tree = Node::Leaf { candidate: literal };
    assert!(rejected(&p).contains("overlay-only"));
    let mut p = example_policy(Backend::Cuda);
    p.domains[0].tree = Node::Leaf { candidate: "grouped.rows.r2".into() };
    assert!(rejected(&p).contains("serves"));
    let mut p = example_policy(Backend::Cuda);
    p.candidates[0].tile += 1;
    assert!(p.check_registry().is_err());
}

#[test]
fn cost_models_answer_where_they_apply_and_trees_elsewhere() {
    let p = example_policy(Backend::Cuda);
    let mut picked = std::collections::BTreeSet::new();
    for n in [256u64, 1024, 4096, 5120, 14_336, 65_536] {
        for k in [256u64, 2048, 4096, 14_336, 65_536] {
            let s = p.select("s8", "eager", 1, n, k).unwrap();
            let in_middle = p.aspect_bucket(n, k) == 1;
            assert_eq!(s.via == Via::Model, in_middle, "{n}x{k}");
            if in_middle {
                let (i, t) = p.model_pick(s.domain, n, k).unwrap();
                assert_eq!(p.domains[s.domain].models[i].candidate, s.candidate.id);
                assert!(t > 0);
                picked.insert(s.candidate.id.clone());
            }
        }
    }
    assert!(picked.len() >= 2, "the example's argmin moves with the shape: {picked:?}");
    // A two-regime candidate answers from one model on each side of its edge.
    let d = p.domains.iter().find(|d| !d.models.is_empty()).unwrap();
    let (small, large) = (&d.models[0], &d.models[1]);
    let desc = p.candidate(&small.candidate).unwrap();
    let (n, k) = (4096u64, EXAMPLE_REGIME / 4096);
    assert_eq!(large.predict(desc, n, k - 32, p.units), None);
    assert!(small.predict(desc, n, k - 32, p.units).is_some());
    assert_eq!(small.predict(desc, n, k, p.units), None);
    assert!(large.predict(desc, n, k, p.units).is_some());
    // Beyond 2^36 elements the tree answers.
    let big = p.select("s8", "eager", 1, 1 << 19, 1 << 18).unwrap();
    assert_eq!((p.aspect_bucket(1 << 19, 1 << 18), big.via), (1, Via::Tree));
}

#[test]
fn broken_cost_models_are_rejected() {
    let base = example_policy(Backend::Cuda);
    let d = base.domains.iter().position(|d| !d.models.is_empty()).unwrap();
    let mut p = base.clone();
    p.domains[d].models[0].rate = 0;
    assert!(rejected(&p).contains("rate 0"), "{}", rejected(&p));
    let mut p = base.clone();
    p.domains[d].models[0].waves.mantissa = 1 << 16;
    assert!(rejected(&p).contains("waves coefficient"));
    let mut p = base.clone();
    p.domains[d].models.swap(0, 1);
    assert!(rejected(&p).contains("size ranges overlap"), "{}", rejected(&p));
    // The example's first candidate has two regimes; overlapping or empty ranges are refused.
    assert_eq!(base.domains[d].models[0].candidate, base.domains[d].models[1].candidate);
    let mut p = base.clone();
    p.domains[d].models[0].below_elements = Some(EXAMPLE_REGIME + 1);
    assert!(rejected(&p).contains("size ranges overlap"));
    let mut p = base.clone();
    p.domains[d].models[1].below_elements = Some(EXAMPLE_REGIME);
    assert!(rejected(&p).contains("is empty"));
    let mut p = base.clone();
    p.domains[d].models[1].from_elements = cost::MAX_ELEMENTS + 1;
    assert!(rejected(&p).contains("model limit"));
    let mut p = base.clone();
    let grouped = p.domains.iter().position(|d| d.aspect.is_none()).unwrap();
    p.domains[grouped].models = p.domains[d].models.clone();
    assert!(rejected(&p).contains("decode domains only"));
}

#[test]
fn unsorted_overlays_are_rejected() {
    // The evaluator finds overlays by binary search: an unsorted list would hide entries.
    let mut p = example_policy(Backend::Cuda);
    assert!(p.overlays.len() >= 2);
    p.overlays.swap(0, 1);
    assert!(rejected(&p).contains("not sorted"), "{}", rejected(&p));
}

#[test]
fn the_m1_digest_follows_m1_selection_only() {
    let p = example_policy(Backend::Cuda);
    let digest = p.m1_digest();
    // Batched buckets and recorded statistics do not enter it ...
    let mut q = p.clone();
    for d in q.domains.iter_mut() {
        d.stats = None;
        if !p.is_decode_bucket(d.m_bucket) {
            d.tree = Node::Leaf { candidate: "grouped.rows.r4".into() };
        }
    }
    q.overlays.retain(|o| p.is_decode_bucket(o.m_bucket));
    q.gates.passed = !q.gates.passed;
    assert_eq!(q.m1_digest(), digest);
    // ... a decode tree, a decode overlay or the units do.
    let decode = p.domains.iter().position(|d| p.is_decode_bucket(d.m_bucket)).unwrap();
    let mut q = p.clone();
    let other = p.candidates.iter().find(|c| c.surface == Surface::Decode && c.generic_legal).unwrap().id.clone();
    let leaf = Node::Leaf { candidate: other.clone() };
    q.domains[decode].tree = if q.domains[decode].tree == leaf {
        Node::Leaf {
            candidate: p
                .candidates
                .iter()
                .rev()
                .find(|c| c.surface == Surface::Decode && c.generic_legal)
                .unwrap()
                .id
                .clone(),
        }
    } else {
        leaf
    };
    assert_ne!(q.m1_digest(), digest);
    let mut q = p.clone();
    q.units += 1;
    assert_ne!(q.m1_digest(), digest);
    let overlay =
        p.overlays.iter().position(|o| p.is_decode_bucket(o.m_bucket)).expect("the example has a decode overlay");
    let mut q = p.clone();
    q.overlays[overlay].n += 1;
    assert_ne!(q.m1_digest(), digest);

    // A staged policy whose M = 1 part changed is not installable, and says why.
    let mut staged = p.clone();
    staged.gates.passed = true;
    staged.provenance.frozen_m1 =
        Some(FrozenStage { m1_corpus_id: "c".into(), m1_digest: digest.clone(), m1_pairs: None });
    assert_eq!(staged.frozen_m1_changed(), None);
    staged.units += 1;
    let why = staged.not_installable().expect("an edited M = 1 part is refused");
    assert!(why.contains("M = 1 part changed"), "{why}");
}

#[test]
fn broken_corrections_are_rejected() {
    let base = example_policy(Backend::Cuda);
    let d = base.domains.iter().position(|d| !d.anchors.is_empty()).unwrap();
    let mut p = base.clone();
    p.correction = None;
    assert!(rejected(&p).contains("without cost models and a correction rule"), "{}", rejected(&p));
    let mut p = base.clone();
    p.correction.as_mut().unwrap().strength = 257;
    assert!(rejected(&p).contains("out of range"));
    let mut p = base.clone();
    p.correction.as_mut().unwrap().weights[0] = correction::ONE + 1;
    assert!(rejected(&p).contains("out of range"));
    let mut p = base.clone();
    p.domains[d].anchors.swap(0, 1);
    assert!(rejected(&p).contains("not sorted and distinct"));
    let mut p = base.clone();
    p.domains[d].anchors[0] = [0, 4096];
    assert!(rejected(&p).contains("not a legal shape"));
    let mut p = base.clone();
    let m = p.domains[d].models.iter().position(|m| !m.residuals.is_empty()).unwrap();
    p.domains[d].models[m].residuals[0].anchor = 99;
    assert!(rejected(&p).contains("naming no anchor"));
    let mut p = base.clone();
    p.domains[d].models[m].residuals[0].value = correction::MAX_RESIDUAL + 1;
    assert!(rejected(&p).contains("beyond"));
    // i32::MIN has no positive twin: its magnitude must not wrap past the bound.
    let mut p = base.clone();
    p.domains[d].models[m].residuals[0].value = i32::MIN;
    assert!(rejected(&p).contains("beyond"));
}

#[test]
fn the_correction_moves_the_pick_near_anchors_only() {
    // Without the rule the models' own argmin answers; with it, some shape on or near an
    // anchor gets another candidate, and a shape far from every anchor never does.
    let with = example_policy(Backend::Cuda);
    let mut without = with.clone();
    without.correction = None;
    for d in &mut without.domains {
        d.anchors.clear();
        for m in &mut d.models {
            m.residuals.clear();
        }
    }
    without.check().unwrap();
    let d = with.domains.iter().position(|d| !d.anchors.is_empty()).unwrap();
    let near = with.domains[d]
        .anchors
        .iter()
        .any(|&[n, k]| with.model_pick(d, n, k).map(|x| x.0) != without.model_pick(d, n, k).map(|x| x.0));
    assert!(near, "the correction changes no pick on the anchors");
    for (n, k) in [(65_536u64, 65_536u64), (256, 256), (100_000, 50_000)] {
        assert_eq!(with.model_pick(d, n, k).map(|x| x.0), without.model_pick(d, n, k).map(|x| x.0), "{n}x{k}");
    }
}

#[test]
fn a_development_only_policy_is_never_installable() {
    let mut p = example_policy(Backend::Cuda);
    p.gates.passed = true;
    assert_eq!(p.not_installable(), None);
    p.provenance.development_only = true;
    assert!(p.not_installable().unwrap().contains("development rows alone"));
    assert_eq!(Policy::from_bytes(&p.to_bytes()).unwrap(), p);
}

#[test]
fn a_focus_weighs_the_fastest_fully_and_far_rows_at_its_floor() {
    let f = Focus { scale_permille: 150, floor_permille: 50 };
    assert_eq!(f.weight(0.0), 1.0);
    assert!((f.weight(0.15) - 0.5).abs() < 1e-12);
    assert!(f.weight(0.05) > f.weight(0.10) && f.weight(0.10) > f.weight(0.30));
    assert_eq!(f.weight(5.0), 0.05);
    // Recorded in the provenance, absent from the JSON without one (policies from before).
    let mut p = example_policy(Backend::Cuda);
    assert!(!String::from_utf8(p.to_bytes()).unwrap().contains("focus"));
    p.provenance.focus = Some(f);
    assert!(String::from_utf8(p.to_bytes()).unwrap().contains("\"scale_permille\": 150"));
    assert_eq!(Policy::from_bytes(&p.to_bytes()).unwrap(), p);
}
