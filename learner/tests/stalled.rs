//! Suspect records on real data: `core`'s M = 1 corpus (timed 2026-12-04, racing bounded by
//! the sample rounds alone, calibration by one launch) holds the rows behind its worst
//! leave-one-family-out picks; the loader must flag them and the fit must list them as pairs
//! to time again. The corpora timed before racing had optimistic steps flag none.

use std::path::Path;

use vnni_learner::{corpus, fit, FitOptions};

fn committed(id: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../lfs-data/corpora/cuda/sm_90").join(id)
}

#[test]
fn stalled_records_of_core_are_flagged_and_listed() {
    let dir = committed("4364fe0387eeb1aa-10a2c061ae2d");
    let c = corpus::load(&dir).unwrap();
    let flagged = |format: &str, mode: &str, n: u64, k: u64, cand: &str| {
        let cell = c
            .cells
            .iter()
            .find(|x| x.m == 1 && x.format.name() == format && x.mode.name() == mode && (x.n, x.k) == (n, k))
            .unwrap();
        let i = c.decode.iter().position(|x| x.id.as_str() == cand).unwrap();
        (cell.stalled[i], cell.regret[i])
    };
    // dropped after one stalled 14-launch sample (35.6 us; its warmups 16.6 us, the best 16.5 us)
    let (s, r) = flagged("Q5_1", "eager", 4096, 14336, "decode.fused.c32.waves32");
    assert!(s && r > 1.0, "{r}");
    // calibrated by one stalled launch: one replay a sample, recorded 1.6-2.1x slow in both modes
    for mode in ["graph", "eager"] {
        let (s, r) = flagged("Q4_1", mode, 1536, 3072, "decode.fused.c16.waves64");
        assert!(s && r > 0.5, "{mode} {r}");
    }
    // its alias twin, the same kernel on the same layout, was timed honestly
    assert_eq!(flagged("Q5_K", "eager", 4096, 14336, "decode.fused.c32.waves32"), (false, 0.0));
    let total: usize = c.cells.iter().map(|x| x.stalled.iter().filter(|&&s| s).count()).sum();
    assert!((300..2000).contains(&total), "{total}");

    // Read as measured, the fit lists both for pairs. With launch twins pooled (the default),
    // waves32's record is read as cap32's, the same launch there (32 partitions of 14 blocks),
    // which kept all its samples: nothing to time again. waves64's has no fuller twin.
    let opts = FitOptions { certify_sealed: false, family_cv: false, ..FitOptions::default() };
    for twins in [corpus::Twins::AsMeasured, corpus::Twins::Pooled] {
        let f = fit(&dir, &FitOptions { twins, ..opts.clone() }).unwrap();
        let pairs = vnni_learner::remeasure::all(&f.domains);
        let listed = |format: &str, n: usize, k: usize, pick: &str| {
            pairs.iter().any(|p| p.source_format.name() == format && (p.n, p.k) == (n, k) && p.pick.as_str() == pick)
        };
        let pooled = twins == corpus::Twins::Pooled;
        assert_eq!(listed("Q5_1", 4096, 14336, "decode.fused.c32.waves32"), !pooled, "{twins:?}");
        assert!(listed("Q4_1", 1536, 3072, "decode.fused.c16.waves64"), "{twins:?}");
        assert!(pairs.iter().filter(|p| p.limit == "stalled").count() > 300, "{twins:?}");
    }

    for old in ["14d161adf7dd2d5a-2e35918b2e31", "70f6c89825324e07-6c07c079c0f3"] {
        let c = corpus::load(&committed(old)).unwrap();
        assert!(c.cells.iter().all(|x| x.stalled.iter().all(|&s| !s)), "{old}");
    }
}
