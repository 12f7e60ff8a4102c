//! The proxy verdict of a workflow profile: a healthy pipeline passes, each broken stage fails it.

mod common;

use vnni_corpus::Certificate;
use vnni_kernels::{Backend, SourceFormat};
use vnni_learner::proxy::proxy_verdict;
use vnni_learner::synthetic::{half_octaves, Spec};
use vnni_learner::{fit, FitOptions};
use vnni_policy::Node;

fn small(seed: u64) -> Spec {
    Spec {
        ns: half_octaves(256, 2048),
        ks: half_octaves(256, 2048),
        ms: vec![1, 4],
        sealed_every: 0,
        ..Spec::cpu(seed)
    }
}

fn certificate(mismatches: usize) -> Certificate {
    Certificate {
        backend: Backend::Cpu,
        arch: "test".into(),
        codebook: SourceFormat::Q4_0.codebook(),
        source_format: SourceFormat::Q4_0,
        n: 256,
        k: 256,
        m: 4,
        bpp: 8,
        m1_candidate: "cpu.decode.wide.t16".parse().unwrap(),
        candidate: "cpu.grouped.rows.t16".parse().unwrap(),
        outputs: 1024,
        mismatches,
        repeat_mismatches: 0,
        first_mismatch: None,
        grouped_digest: "a".into(),
        serial_digest: "a".into(),
    }
}

#[test]
fn a_healthy_pipeline_passes_and_each_broken_stage_fails() {
    let dir = common::corpus("proxy-healthy", &small(11));
    let policy = fit(&dir, &FitOptions::default()).unwrap().policy;
    let v = proxy_verdict(&dir, &[certificate(0)], &policy).unwrap();
    assert!(v.passed(), "{v:?}");
    assert!(v.in_sample_geomean < 0.05, "{v:?}");

    // Certification found a mismatch, or never ran.
    let v = proxy_verdict(&dir, &[certificate(0), certificate(3)], &policy).unwrap();
    assert!(!v.passed() && v.failures.iter().any(|f| f.contains("certificates have mismatches")), "{v:?}");
    let v = proxy_verdict(&dir, &[], &policy).unwrap();
    assert!(v.failures.iter().any(|f| f.contains("no batch-invariance certificates")), "{v:?}");

    // A learner that points every decode tree at a candidate of another backend.
    let mut broken = policy.clone();
    for d in broken.domains.iter_mut().filter(|d| d.m_bucket == 0) {
        d.tree = Node::Leaf { candidate: "decode.wide.tn256.cpt2".into() };
    }
    let v = proxy_verdict(&dir, &[certificate(0)], &broken).unwrap();
    assert!(v.failures.iter().any(|f| f.contains("cannot answer")), "{v:?}");
}

#[test]
fn a_corpus_with_wrong_bits_fails_the_proxy() {
    let spec = Spec { wrong_bits: Some((SourceFormat::Q4_0, "cpu.decode.wide.t64".parse().unwrap())), ..small(12) };
    let dir = common::corpus("proxy-wrong", &spec);
    let policy = fit(&dir, &FitOptions::default()).unwrap().policy;
    let v = proxy_verdict(&dir, &[certificate(0)], &policy).unwrap();
    assert!(v.failures.iter().any(|f| f.contains("differ from the CPU reference")), "{v:?}");

    // A learner that dispatches to the candidate whose bits were wrong.
    let mut broken = policy.clone();
    let wrong = vnni_kernels::registry::find("cpu.decode.wide.t64").unwrap();
    broken.candidates.retain(|c| c.id != wrong.id.as_str());
    broken.candidates.push(vnni_policy::descriptor(wrong));
    broken.candidates.sort_by(|a, b| a.id.cmp(&b.id));
    for d in broken.domains.iter_mut().filter(|d| d.m_bucket == 0 && d.codebook == "s4") {
        d.tree = Node::Leaf { candidate: wrong.id.to_string() };
    }
    broken.overlays.clear();
    let v = proxy_verdict(&dir, &[certificate(0)], &broken).unwrap();
    assert!(v.failures.iter().any(|f| f.contains("unmeasured or ineligible")), "{v:?}");
}
