//! The CPU backend's kernels against the reference: every candidate of every codebook gives
//! the reference's bits for its bpp, and grouped rows give the bits of single-row decodes.

use vnni_kernels::registry::{cpu_decode_candidates, cpu_grouped_candidates};
use vnni_kernels::{cpu, fixture, quantize_activations, reference, Codebook};

#[test]
fn every_cpu_candidate_matches_the_reference_bit_for_bit() {
    for cb in Codebook::ALL {
        // Odd N (partial tiles), K with a partition count that does not divide KBLK.
        for (n, k, units) in [(200, 32 * 11, 2u32), (1000, 1024, 3), (33, 256, 8)] {
            let w = fixture::packed_matrix(cb, n, k, 7).unwrap();
            let a = quantize_activations(&fixture::activations(1, k, 9), 1, k).unwrap();
            for c in cpu_decode_candidates() {
                let Some(plan) = c.plan(n, k, units) else { continue };
                let (bpp, y) = cpu::decode(&c, &w, &a, units).unwrap();
                assert_eq!(bpp, plan.bpp);
                let want = reference::gemm(&w, &a, bpp).unwrap();
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&y), bits(&want), "{} {cb} {n}x{k}", c.id);
            }
        }
    }
}

#[test]
fn cpu_grouped_rows_equal_single_row_decodes() {
    let (n, k, m) = (300, 32 * 9, 5);
    for cb in [Codebook::S4, Codebook::U5, Codebook::S6d] {
        let w = fixture::packed_matrix(cb, n, k, 3).unwrap();
        let a = quantize_activations(&fixture::activations(m, k, 4), m, k).unwrap();
        for bpp in [1, 4, 9] {
            for c in cpu_grouped_candidates() {
                let y = cpu::grouped(&c, &w, &a, bpp).unwrap();
                for r in 0..m {
                    let single = reference::gemm(&w, &a.row(r), bpp).unwrap();
                    for col in 0..n {
                        assert_eq!(y[r * n + col].to_bits(), single[col].to_bits(), "{} row {r} col {col}", c.id);
                    }
                }
            }
        }
    }
}

#[test]
fn cuda_candidates_are_refused() {
    let w = fixture::packed_matrix(Codebook::S4, 64, 64, 1).unwrap();
    let a = quantize_activations(&fixture::activations(1, 64, 1), 1, 64).unwrap();
    let cuda = vnni_kernels::registry::find("decode.wide.tn128.cpt1").unwrap();
    assert!(cpu::decode(cuda, &w, &a, 2).is_err());
}
