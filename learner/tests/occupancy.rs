//! The occupancy formula and the launch model against what the H200 reported: every decode
//! row of the committed CUDA corpora records the device's resident CTAs per SM for its launch
//! and the weight bytes it streamed; the policy's cost-model launch (`vnni_policy::cost`)
//! must reproduce both from the candidate's descriptor and the corpus's preflight resources.

use std::path::Path;

use vnni_corpus::read::{read_resources, read_timing};
use vnni_kernels::registry::find;
use vnni_learner::cost_model::KernelResources;
use vnni_policy::cost::Basis;

#[test]
fn launches_match_the_device_on_every_committed_decode_row() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../lfs-data/corpora/cuda/sm_90");
    let mut checked = 0;
    for corpus in ["14d161adf7dd2d5a-2e35918b2e31", "27df0629a5ccd600-69d16bfaea33", "4364fe0387eeb1aa-10a2c061ae2d"] {
        let dir = root.join(corpus);
        let res: std::collections::BTreeMap<String, KernelResources> = read_resources(&dir.join("resources.csv"))
            .unwrap()
            .into_iter()
            .map(|r| (r.kernel, KernelResources { registers: r.registers, shared_static: r.shared_static_bytes }))
            .collect();
        for phase in ["decode_m1.development.csv", "decode_m1.sealed.csv"] {
            for r in read_timing(&dir.join(phase)).unwrap() {
                let Some(c) = find(&r.candidate) else { continue };
                let cb = r.codebook.expect("candidate rows name their codebook");
                let (n, k) = (r.n as u64, r.k as u64);
                let kr = res[&c.kernel(cb).symbol()];
                let launch = vnni_policy::descriptor(c).model_launch(n, k, 132).unwrap();
                let b = Basis::of(&launch, n, k, 132, kr.registers, kr.shared_static, 64).unwrap();
                let where_ = format!("{corpus}/{phase}: {} {}x{} {}", cb.name(), r.n, r.k, r.candidate);
                assert_eq!(b.occupancy, u64::from(r.occupancy_blocks_per_sm), "{where_}");
                assert_eq!(b.elements / 32 * cb.block_bytes() as u64, r.weight_bytes as u64, "{where_}");
                checked += 1;
            }
        }
    }
    assert!(checked > 90_000, "{checked} rows");
}
