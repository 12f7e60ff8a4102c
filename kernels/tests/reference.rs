//! Properties of the canonical CPU reference (issue: foundation, item 5).

use vnni_kernels::contract::{block_contribution, canonical_dot, min_sum, BlockDots, ScaleRule};
use vnni_kernels::fixture;
use vnni_kernels::reference::{gemm, gemm_columns};
use vnni_kernels::{quantize_activations, Codebook, PackedMatrix, QuantizedActivations};

fn setup(cb: Codebook, m: usize, n: usize, k: usize, seed: u64) -> (PackedMatrix, QuantizedActivations) {
    let w = fixture::packed_matrix(cb, n, k, seed).unwrap();
    let a = quantize_activations(&fixture::activations(m, k, seed ^ 0xA5), m, k).unwrap();
    (w, a)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Exact real value of one output element, and the sum of the magnitudes of the terms
/// the contract rounds (the scale of its rounding error).
fn exact(w: &PackedMatrix, a: &QuantizedActivations, row: usize, n: usize) -> (f64, f64) {
    let (mut y, mut mag) = (0f64, 0f64);
    for b in 0..w.kblk() {
        let ab = row * a.kblk() + b;
        let sa = a.d[ab] as f64;
        let d = w.block(b, n);
        let q = &a.q[ab * 32..ab * 32 + 32];
        let dots = BlockDots::compute(&d.values, q, min_sum(w.codebook.sub_mins(w.payload_at(b, n)), q, a.sum[ab]));
        let (s, s2) = (d.scale as f64, d.second as f64);
        let terms: Vec<f64> = match w.codebook.scale_rule() {
            ScaleRule::Single => vec![sa * s * (dots.lo + dots.hi) as f64],
            ScaleRule::Asymmetric => vec![sa * s * (dots.lo + dots.hi) as f64, sa * s2 * dots.act_sum as f64],
            ScaleRule::DualScale => vec![sa * s * dots.lo as f64, sa * s2 * dots.hi as f64],
        };
        y += terms.iter().sum::<f64>();
        mag += terms.iter().map(|t| t.abs()).sum::<f64>();
    }
    (y, mag)
}

/// The stated tolerance: (KBLK + 4) * 2^-24 * Σ|terms|.
fn tolerance(kblk: usize, magnitude: f64) -> f64 {
    (kblk as f64 + 4.0) * 2f64.powi(-24) * magnitude
}

#[test]
fn every_row_of_a_batch_equals_its_single_row_product() {
    for cb in Codebook::ALL {
        let (n, k) = (67, 1024);
        let (w, a) = setup(cb, 31, n, k, 7);
        for bpp in [1, 3, 8, 32] {
            let singles: Vec<Vec<u32>> = (0..31).map(|r| bits(&gemm(&w, &a.row(r), bpp).unwrap())).collect();
            for m in (1..=16).chain([31]) {
                let batch = QuantizedActivations {
                    m,
                    k,
                    q: a.q[..m * k].to_vec(),
                    d: a.d[..m * a.kblk()].to_vec(),
                    sum: a.sum[..m * a.kblk()].to_vec(),
                };
                let y = bits(&gemm(&w, &batch, bpp).unwrap());
                for r in 0..m {
                    assert_eq!(y[r * n..(r + 1) * n], singles[r][..], "{cb} bpp {bpp} M {m} row {r}");
                }
            }
        }
    }
}

#[test]
fn reference_matches_the_contract_statement_for_every_column() {
    for cb in Codebook::ALL {
        let (n, k) = (70, 2048);
        let (w, a) = setup(cb, 2, n, k, 11);
        let kblk = w.kblk();
        for bpp in [1, 5, 16, 64] {
            let y = gemm(&w, &a, bpp).unwrap();
            for r in 0..2 {
                for col in 0..n {
                    let want = canonical_dot(kblk, bpp, |b| {
                        let d = w.block(b, col);
                        let ab = r * kblk + b;
                        let q = &a.q[ab * 32..ab * 32 + 32];
                        let dots =
                            BlockDots::compute(&d.values, q, min_sum(cb.sub_mins(w.payload_at(b, col)), q, a.sum[ab]));
                        block_contribution(cb.scale_rule(), a.d[ab], d.scale, d.second, dots)
                    });
                    assert_eq!(y[r * n + col].to_bits(), want.to_bits(), "{cb} bpp {bpp} row {r} col {col}");
                }
            }
        }
    }
}

#[test]
fn results_are_within_the_stated_tolerance_of_an_f64_product() {
    for cb in Codebook::ALL {
        let (n, k) = (45, 4096);
        let (w, a) = setup(cb, 3, n, k, 3);
        for bpp in [1, 7, 128] {
            let y = gemm(&w, &a, bpp).unwrap();
            for r in 0..3 {
                for col in 0..n {
                    let (want, mag) = exact(&w, &a, r, col);
                    let err = (y[r * n + col] as f64 - want).abs();
                    assert!(err <= tolerance(w.kblk(), mag), "{cb} bpp {bpp} ({r},{col}): err {err:e} mag {mag:e}");
                }
            }
        }
    }
}

#[test]
fn the_exact_sum_is_the_f64_product_of_the_dequantized_matrices() {
    // Ties `exact` to the plain definition y = Σ_k w[n][k] * x[k] over dequantized values,
    // both dequantized in f64 (exact: f16 scales times small integers).
    for cb in Codebook::ALL {
        let (w, a) = setup(cb, 2, 9, 512, 5);
        for r in 0..2 {
            for col in 0..9 {
                let (mut plain, mut scale) = (0f64, 0f64);
                for b in 0..w.kblk() {
                    let d = w.block(b, col);
                    // The min's integer weight per half (Q2_K's sub-block mins; one elsewhere).
                    let mins = cb.sub_mins(w.payload_at(b, col));
                    let ab = r * w.kblk() + b;
                    for i in 0..32 {
                        let v = d.values[i] as f64;
                        let wv = match cb.scale_rule() {
                            ScaleRule::Single => d.scale as f64 * v,
                            ScaleRule::Asymmetric => d.scale as f64 * v + d.second as f64 * mins[i / 16] as f64,
                            ScaleRule::DualScale => (if i < 16 { d.scale as f64 } else { d.second as f64 }) * v,
                        };
                        let xv = a.d[ab] as f64 * a.q[ab * 32 + i] as f64;
                        plain += wv * xv;
                        scale += (wv * xv).abs();
                    }
                }
                let (want, _) = exact(&w, &a, r, col);
                assert!(
                    (plain - want).abs() <= 1e-12 * scale.max(f64::MIN_POSITIVE),
                    "{cb} ({r},{col}): {plain} vs {want}"
                );
            }
        }
    }
}

#[test]
fn wide_bpp_and_a_single_partition_agree_bit_for_bit() {
    for cb in Codebook::ALL {
        let (w, a) = setup(cb, 2, 50, 1536, 9);
        let wide = bits(&gemm(&w, &a, w.kblk()).unwrap());
        for bpp in [w.kblk() + 1, 10 * w.kblk(), usize::MAX] {
            assert_eq!(bits(&gemm(&w, &a, bpp).unwrap()), wide, "{cb} bpp {bpp}");
        }
    }
}

#[test]
fn different_bpp_differ_only_by_bounded_rounding() {
    let mut differing = 0;
    for cb in Codebook::ALL {
        let (n, k) = (64, 8192);
        let (w, a) = setup(cb, 1, n, k, 13);
        let wide = gemm(&w, &a, w.kblk()).unwrap();
        for bpp in [1, 4, 33] {
            let y = gemm(&w, &a, bpp).unwrap();
            for col in 0..n {
                let (_, mag) = exact(&w, &a, 0, col);
                let diff = (y[col] as f64 - wide[col] as f64).abs();
                assert!(diff <= 2.0 * tolerance(w.kblk(), mag), "{cb} bpp {bpp} col {col}: {diff:e}");
                differing += usize::from(y[col].to_bits() != wide[col].to_bits());
            }
        }
    }
    // bpp is an arithmetic identity: if no bit ever moved, the partitioning would not be real.
    assert!(differing > 0, "no output changed with bpp");
}

#[test]
fn sampled_columns_equal_the_full_product() {
    let (w, a) = setup(Codebook::S6d, 2, 300, 512, 21);
    let full = gemm(&w, &a, 3).unwrap();
    let cols = [299, 0, 17, 17, 150];
    let some = gemm_columns(&w, &a, 3, &cols).unwrap();
    for r in 0..2 {
        for (i, &c) in cols.iter().enumerate() {
            assert_eq!(some[r * cols.len() + i].to_bits(), full[r * 300 + c].to_bits());
        }
    }
}

#[test]
fn bad_requests_are_typed_errors() {
    let (w, a) = setup(Codebook::S4, 1, 8, 64, 1);
    assert!(matches!(gemm(&w, &a, 0), Err(vnni_kernels::ShapeError::ZeroBpp)));
    assert!(matches!(gemm_columns(&w, &a, 1, &[8]), Err(vnni_kernels::ShapeError::ColumnOutOfRange { col: 8, n: 8 })));
    let short = quantize_activations(&[0.5; 32], 1, 32).unwrap();
    assert!(matches!(gemm(&w, &short, 1), Err(vnni_kernels::ShapeError::Length { .. })));
}
