//! Activation quantization (contract) and fixtures (issue: foundation, items 5 and 6).

use vnni_kernels::activation::quantize_block;
use vnni_kernels::fixture::{self, fill_bytes};
use vnni_kernels::{quantize_activations, Codebook, ShapeError, SourceFormat};

#[test]
fn activation_blocks_follow_the_contract() {
    // amax = 127 makes d = 1, so x / d = x and round-half-even is visible.
    let mut x = [0f32; 32];
    x[..6].copy_from_slice(&[127.0, 2.5, 3.5, -2.5, -0.5, 126.49]);
    let mut q = [0i8; 32];
    let (d, sum) = quantize_block(&x, &mut q);
    assert_eq!(d, 1.0);
    assert_eq!(&q[..6], &[127, 2, 4, -2, 0, 126]);
    assert_eq!(sum, 127 + 2 + 4 - 2 + 126);

    let (d, sum) = quantize_block(&[0.0; 32], &mut q);
    assert_eq!((d, sum), (1.0, 0), "amax == 0 gives d = 1");
    assert!(q.iter().all(|&v| v == 0));

    let y: Vec<f32> = (0..32).map(|i| (i as f32 - 15.3) * 0.071).collect();
    let (d, sum) = quantize_block(&y, &mut q);
    let amax = y.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert_eq!(d.to_bits(), (amax / 127.0).to_bits());
    for (&v, &qi) in y.iter().zip(&q) {
        assert_eq!(qi as f32, (v / d).round_ties_even().clamp(-127.0, 127.0));
    }
    assert_eq!(sum, q.iter().map(|&v| v as i32).sum::<i32>());
    assert!(q.iter().any(|&v| v.abs() == 127));
}

#[test]
fn activation_quantization_checks_its_input() {
    let x = fixture::activations(3, 96, 1);
    let a = quantize_activations(&x, 3, 96).unwrap();
    assert_eq!((a.q.len(), a.d.len(), a.sum.len()), (288, 9, 9));
    assert_eq!(a.row(2).q, a.q[192..]);
    assert!(matches!(quantize_activations(&x, 3, 95), Err(ShapeError::KNotMultiple { .. })));
    assert!(matches!(quantize_activations(&x[..100], 3, 96), Err(ShapeError::Length { .. })));
    let mut bad = x.clone();
    bad[100] = f32::INFINITY;
    assert!(matches!(quantize_activations(&bad, 3, 96), Err(ShapeError::NonFiniteActivation { row: 1, col: 4, .. })));
}

#[test]
fn fixtures_are_deterministic_and_seed_dependent() {
    for cb in Codebook::ALL {
        let a = fixture::packed_matrix(cb, 100, 512, 42).unwrap();
        let b = fixture::packed_matrix(cb, 100, 512, 42).unwrap();
        let c = fixture::packed_matrix(cb, 100, 512, 43).unwrap();
        assert_eq!(a, b, "{cb}");
        assert_ne!(a.payload, c.payload, "{cb}");
        assert_ne!(a.scale, c.scale, "{cb}");
    }
    assert_eq!(fixture::activations(2, 64, 5), fixture::activations(2, 64, 5));
    for f in SourceFormat::ALL {
        assert_eq!(fixture::source_blocks(f, 10, 1), fixture::source_blocks(f, 10, 1));
    }
}

#[test]
fn fixtures_are_valid_bounded_and_never_zero() {
    for cb in Codebook::ALL {
        let w = fixture::packed_matrix(cb, 33, 256, 7).unwrap();
        assert!(w.payload.iter().any(|&b| b != 0));
        assert_eq!(w.second.len(), if cb.has_second() { w.scale.len() } else { 0 });
        let scales = w.scale.iter().map(|&bits| cb.scale_format().widen(bits));
        for v in scales.chain(w.second.iter().map(|s| s.to_f32())).map(f32::abs) {
            assert!(v.is_finite() && (2f32.powi(-10)..2f32.powi(-4)).contains(&v), "{cb}: {v}");
        }
        if cb == Codebook::S8 {
            assert!(!w.payload.contains(&0x80), "s8 fixtures hold no -128");
        }
    }
    for f in SourceFormat::ALL {
        let bytes = fixture::source_blocks(f, 500, 3);
        vnni_kernels::codec::validate(f, &bytes).unwrap();
    }
}

#[test]
fn byte_stream_is_counter_based() {
    // Any prefix of a long fill equals a short fill: chunks are independent of the total size.
    let mut long = vec![0u8; 300_000];
    let mut short = vec![0u8; 70_001];
    fill_bytes(9, &mut long);
    fill_bytes(9, &mut short);
    assert_eq!(long[..70_001], short[..]);
    let zeros = long.iter().filter(|&&b| b == 0).count();
    assert!((900..1500).contains(&zeros), "{zeros} zero bytes of 300000 is not uniform");
}
