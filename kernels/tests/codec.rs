//! Codecs, repacking and codebooks (issue: foundation, items 2 and 4). The bit-level
//! oracle against gguf-py lives in the `vnni-tests` crate.

use half::f16;
use vnni_kernels::codebook::IQ4_TABLE;
use vnni_kernels::codec::{self, Block, BlockQ4K, QUANTIZABLE};
use vnni_kernels::contract::ScaleRule;
use vnni_kernels::fixture;
use vnni_kernels::{repack, Codebook, CodecError, RepackError, ShapeError, SourceFormat};

#[test]
fn registry_has_twenty_formats_fourteen_codebooks_five_alias_groups() {
    assert_eq!(SourceFormat::ALL.len(), 20);
    assert_eq!(Codebook::ALL.len(), 14);
    let groups: Vec<Vec<SourceFormat>> =
        Codebook::ALL.iter().map(|&c| SourceFormat::aliases_of(c)).filter(|g| g.len() > 1).collect();
    use SourceFormat::*;
    assert_eq!(
        groups,
        vec![
            vec![IQ4_NL, IQ4_XS],
            vec![Q4_1, Q4_K],
            vec![Q5_1, Q5_K],
            vec![IQ2_XXS, IQ1_S],
            vec![IQ2_XS, IQ2_S, IQ1_M]
        ]
    );
    for c in Codebook::ALL {
        assert!(!SourceFormat::aliases_of(c).is_empty(), "{c} has no source format");
    }
    assert_eq!(Q6_K.bits_per_weight(), 6.5625);
    assert_eq!("q4_k_m".parse::<SourceFormat>(), Ok(Q4_K));
    assert!("Q4_0_M".parse::<SourceFormat>().is_err());
    assert_eq!(SourceFormat::from_ggml_type(23), Some(IQ4_XS));
    assert_eq!(SourceFormat::from_ggml_type(39), Some(MXFP4));
    assert_eq!(MXFP4.bits_per_weight(), 4.25);
    assert_eq!("mxfp4".parse::<SourceFormat>(), Ok(MXFP4));
    assert_eq!(SourceFormat::from_ggml_type(11), Some(Q3_K));
    assert_eq!(Q3_K.bits_per_weight(), 3.4375);
    assert_eq!("Q3_K_M".parse::<SourceFormat>(), Ok(Q3_K));
    assert_eq!(SourceFormat::from_ggml_type(18), Some(IQ3_XXS));
    assert_eq!(IQ3_XXS.bits_per_weight(), 3.0625);
    assert_eq!(SourceFormat::from_ggml_type(21), Some(IQ3_S));
    assert_eq!(IQ3_S.bits_per_weight(), 3.4375);
    // IQ3_S ends in _S but is no K-quant mix: it names itself.
    assert_eq!("iq3_s".parse::<SourceFormat>(), Ok(IQ3_S));
    assert_eq!(SourceFormat::from_ggml_type(10), Some(Q2_K));
    assert_eq!(Q2_K.bits_per_weight(), 2.625);
    assert_eq!("Q2_K_S".parse::<SourceFormat>(), Ok(Q2_K));
    // The 2-bit and 1-bit i-quants (ggml types 16, 17, 22, 19, 29) and their sizes.
    for (f, ty, bpw) in
        [(IQ2_XXS, 16, 2.0625), (IQ2_XS, 17, 2.3125), (IQ2_S, 22, 2.5625), (IQ1_S, 19, 1.5625), (IQ1_M, 29, 1.75)]
    {
        assert_eq!(SourceFormat::from_ggml_type(ty), Some(f));
        assert_eq!(f.bits_per_weight(), bpw, "{f}");
        assert_eq!(f.name().to_ascii_lowercase().parse::<SourceFormat>(), Ok(f));
    }
}

#[test]
fn blocks_parse_and_write_back_to_the_same_bytes() {
    for f in SourceFormat::ALL {
        let bytes = fixture::source_blocks(f, 300, 1);
        let again = codec::reencode(f, &bytes).unwrap();
        assert_eq!(again, bytes, "{f}");
    }
}

#[test]
fn bad_input_gets_typed_errors_naming_the_place() {
    let mut bytes = fixture::source_blocks(SourceFormat::Q4_K, 3, 2);
    assert!(matches!(
        codec::dequantize(SourceFormat::Q4_K, &bytes[..143]),
        Err(CodecError::BadLength { len: 143, block_bytes: 144, .. })
    ));
    bytes[144 * 2 + 2..144 * 2 + 4].copy_from_slice(&f16::NAN.to_le_bytes());
    assert!(matches!(
        codec::dequantize(SourceFormat::Q4_K, &bytes),
        Err(CodecError::NonFiniteScale { block: 2, offset: 2, .. })
    ));
    let mut q6 = fixture::source_blocks(SourceFormat::Q6_K, 1, 2);
    q6[208..210].copy_from_slice(&f16::INFINITY.to_le_bytes());
    assert!(matches!(codec::dequantize(SourceFormat::Q6_K, &q6), Err(CodecError::NonFiniteScale { offset: 208, .. })));

    assert!(matches!(codec::quantize(SourceFormat::Q4_0, &[0.5; 33]), Err(CodecError::BadElementCount { k: 33, .. })));
    let mut x = vec![0.25f32; 64];
    x[40] = f32::NAN;
    assert!(matches!(codec::quantize(SourceFormat::Q8_0, &x), Err(CodecError::NonFiniteInput { index: 40, .. })));
    assert!(matches!(codec::quantize(SourceFormat::Q6_K, &[0.0; 256]), Err(CodecError::NoQuantizer { .. })));
    let huge = vec![1.0e9f32; 32];
    assert!(matches!(codec::quantize(SourceFormat::Q8_0, &huge), Err(CodecError::ScaleOverflow { block: 0, .. })));
    let msg = codec::dequantize(SourceFormat::Q4_K, &bytes).unwrap_err().to_string();
    assert!(msg.contains("block 2") && msg.contains("byte 2"), "{msg}");
}

#[test]
fn repack_rejects_bad_shapes_and_scales() {
    let f = SourceFormat::Q4_K;
    let bytes = fixture::source_blocks(f, 4, 3);
    assert!(matches!(
        repack(f, 2, 384, &bytes),
        Err(RepackError::Shape(ShapeError::KNotMultiple { multiple: 256, .. }))
    ));
    assert!(matches!(repack(f, 2, 256, &bytes[..100]), Err(RepackError::BadLength { expected: 288, got: 100, .. })));
    assert!(matches!(repack(f, 0, 256, &[]), Err(RepackError::Shape(ShapeError::Empty { .. }))));
    let mut bad = bytes.clone();
    bad[144 * 3] = 0x00;
    bad[144 * 3 + 1] = 0x7C; // +inf in d of row 1, source block 1
    assert!(matches!(repack(f, 2, 512, &bad), Err(RepackError::NonFiniteScale { row: 1, block: 1, offset: 0, .. })));
    // d near the f16 maximum times a 6-bit scale overflows f16 after repacking.
    let mut blk = BlockQ4K::read(&bytes[..144]);
    blk.d = f16::from_f32(60000.0);
    blk.scales = [63; 12];
    let one = codec::write_blocks(&[blk]);
    assert!(matches!(repack(f, 1, 256, &one), Err(RepackError::ScaleOverflow { row: 0, block: 0, .. })));
}

/// Half an f16 ulp of `x` (the most f32 -> f16 rounding can move it), at least the subnormal half-step.
fn f16_half_ulp(x: f32) -> f64 {
    (x.abs() as f64 * 2f64.powi(-11)).max(2f64.powi(-25))
}

#[test]
fn packed_weights_match_source_dequantization_within_f16_scale_rounding() {
    // Formats whose packed scales are the stored f16 fields themselves must match exactly.
    let exact = [
        SourceFormat::Q4_0,
        SourceFormat::IQ4_NL,
        SourceFormat::Q4_1,
        SourceFormat::Q5_0,
        SourceFormat::Q5_1,
        SourceFormat::Q8_0,
        // Its power-of-two scale is stored exactly (bf16).
        SourceFormat::MXFP4,
        // d and dmin are stored as they are; the sub-scales and sub-mins stay integers.
        SourceFormat::Q2_K,
    ];
    for f in SourceFormat::ALL {
        let (n, k) = (23, 1024);
        let bytes = fixture::source_blocks(f, n * k / f.block_elems(), 4);
        let source = codec::dequantize(f, &bytes).unwrap();
        let packed = repack(f, n, k, &bytes).unwrap();
        assert_eq!(packed.codebook, f.codebook());
        let mut worst = 0f64;
        for row in 0..n {
            let got = packed.dequantize_row(row);
            let want = &source[row * k..(row + 1) * k];
            for i in 0..k {
                let blk = packed.block(i / 32, row);
                let v = blk.values[i % 32] as f64;
                let (s, second) = match f.codebook().scale_rule() {
                    ScaleRule::DualScale if i % 32 >= 16 => (blk.second, 0.0),
                    ScaleRule::DualScale | ScaleRule::Single => (blk.scale, 0.0),
                    ScaleRule::Asymmetric => (blk.scale, blk.second),
                };
                // f16 rounding of the scale (times |v|) and of the min, plus f32 rounding on both sides.
                let bound = v.abs() * f16_half_ulp(s)
                    + if second != 0.0 { f16_half_ulp(second) } else { 0.0 }
                    + 2f64.powi(-22) * (want[i].abs() as f64 + (s as f64 * v).abs() + (second as f64).abs());
                if exact.contains(&f) {
                    // Bit equality also covers the infinities of MXFP4's largest scales.
                    assert_eq!(got[i].to_bits(), want[i].to_bits(), "{f} row {row} elem {i}");
                    continue;
                }
                let err = (got[i] as f64 - want[i] as f64).abs();
                assert!(err <= bound, "{f} row {row} elem {i}: packed {} source {} bound {bound:e}", got[i], want[i]);
                worst = worst.max(err / bound.max(f64::MIN_POSITIVE));
            }
        }
        assert!(worst <= 1.0, "{f}");
    }
}

#[test]
fn quantizers_round_trip_within_half_a_step() {
    for f in QUANTIZABLE {
        let x = fixture::activations(4, 1024, 17);
        let bytes = codec::quantize(f, &x).unwrap();
        assert_eq!(bytes.len(), x.len() / 32 * f.block_bytes());
        let y = codec::dequantize(f, &bytes).unwrap();
        for (blk, (xs, ys)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
            let (lo, hi) = xs.iter().fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
            let amax = lo.abs().max(hi.abs());
            // (quantization step, worst error in steps): the symmetric formats store levels -8..7
            // (-16..15), so values near +amax on the short side can clip by a whole step.
            let (step, steps) = match f {
                SourceFormat::Q4_0 => (amax / 8.0, 1.0),
                SourceFormat::Q5_0 => (amax / 16.0, 1.0),
                SourceFormat::Q4_1 => ((hi - lo) / 15.0, 0.5),
                SourceFormat::Q5_1 => ((hi - lo) / 31.0, 0.5),
                SourceFormat::Q8_0 => (amax / 127.0, 0.5),
                // Least-squares scale search: per-element error is not bounded by a step, so
                // check instead that it never does worse than the plain max/-127 scale.
                SourceFormat::IQ4_NL => {
                    let sse = |d: f32| -> f32 {
                        xs.iter()
                            .map(|&v| {
                                let t = IQ4_TABLE.iter().map(|&t| d * t as f32).fold(f32::MAX, |m, w| {
                                    if (v - w).abs() < (v - m).abs() {
                                        w
                                    } else {
                                        m
                                    }
                                });
                                (v - t).powi(2)
                            })
                            .sum()
                    };
                    let ours: f32 = xs.iter().zip(ys).map(|(a, b)| (a - b).powi(2)).sum();
                    let max = xs.iter().fold(0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
                    assert!(ours <= sse(max / -127.0) * 1.01 + 1e-9, "{f} block {blk}: sse {ours}");
                    continue;
                }
                // gguf-py's exponent puts amax in [8d, 16d) with d the halved scale: the widest
                // gap of the doubled E2M1 grid is 4d (8 -> 12), and values above 12d clip to it.
                SourceFormat::MXFP4 => {
                    let d = if amax > 0.0 { 2f32.powi(amax.log2().floor() as i32 - 3) } else { 0.0 };
                    for (i, (&a, &b)) in xs.iter().zip(ys).enumerate() {
                        assert!((a - b).abs() <= 4.0 * d, "{f} block {blk} elem {i}: {a} -> {b} (d {d})");
                    }
                    continue;
                }
                _ => unreachable!(),
            };
            for (i, (&a, &b)) in xs.iter().zip(ys).enumerate() {
                let err = (a - b).abs();
                // Plus the f16 rounding of the stored scale (times up to 32 levels) and min.
                let f16_slack = (32.0 * step + amax) * 2f32.powi(-11);
                assert!(err <= steps * step + f16_slack, "{f} block {blk} elem {i}: {a} -> {b} (step {step})");
            }
        }
    }
}

#[test]
fn decode_matches_each_codebooks_documented_value_range() {
    let ranges = [
        (Codebook::S4, -8, 7),
        (Codebook::Nl4, -127, 113),
        (Codebook::U4, 0, 15),
        (Codebook::S5, -16, 15),
        (Codebook::U5, 0, 31),
        (Codebook::S6d, -32, 31),
        (Codebook::S8, -127, 127),
        (Codebook::E2m1, -12, 12),
        (Codebook::S3d, -4, 3),
        (Codebook::Nl3, -62, 62),
        (Codebook::O4, -15, 15),
        (Codebook::U2m, 0, 45),
        (Codebook::Nl2, -43, 43),
        (Codebook::Nl2d, -43, 43),
    ];
    for (cb, lo, hi) in ranges {
        let w = fixture::packed_matrix(cb, 64, 256, 5).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for b in 0..w.kblk() {
            for n in 0..w.n {
                seen.extend(w.block(b, n).values.iter().map(|&v| v as i32));
            }
        }
        assert_eq!(*seen.first().unwrap(), lo, "{cb}");
        assert_eq!(*seen.last().unwrap(), hi, "{cb}");
    }
}

/// `nl2d`'s payload in halves: nibble j of little-endian word i is element 4i + j (j < 4) or
/// 16 + 4i + j - 4 (j >= 4), so each 16-bit half of a word is the GPU's lookup selector of four
/// elements of one half. Every other nibble codebook keeps element j in byte j's low nibble.
#[test]
fn nl2d_words_hold_four_elements_of_each_half_in_order() {
    for i in 0..4 {
        for j in 0..8 {
            let mut payload = [0u8; 16];
            // Table index 2 (value 43) at nibble j of word i; every other nibble 0 (value 8).
            let word = 2u32 << (4 * j);
            payload[4 * i..4 * i + 4].copy_from_slice(&word.to_le_bytes());
            let v = Codebook::Nl2d.decode(&payload);
            let element = if j < 4 { 4 * i + j } else { 16 + 4 * i + j - 4 };
            for (e, &x) in v.iter().enumerate() {
                assert_eq!(x, if e == element { 43 } else { 8 }, "word {i} nibble {j}: element {e}");
            }
            let v = Codebook::Nl2.decode(&payload);
            let element = if j % 2 == 0 { 4 * i + j / 2 } else { 16 + 4 * i + j / 2 };
            assert_eq!(v[element], 43, "nl2 word {i} nibble {j}");
        }
    }
}

/// IQ1_M keeps its f16 scale in the top nibbles of four words: a non-finite one is refused
/// like any stored f16 field, naming the block and the first word's offset, and the other
/// bits of those words stay as they were when the scale is written.
#[test]
fn iq1m_split_scale_is_validated_and_written_in_place() {
    let f = SourceFormat::IQ1_M;
    let mut bytes = fixture::source_blocks(f, 3, 9);
    let split = <codec::BlockIq1M as Block>::SPLIT_F16.unwrap();
    let before = bytes[56..112].to_vec();
    split.write(&mut bytes[56..112], f16::NAN);
    // Only the top nibble of each scale word (its odd byte) may change.
    for (i, (a, b)) in bytes[56..112].iter().zip(&before).enumerate() {
        let top_nibble = (48..56).contains(&i) && i % 2 == 1;
        assert_eq!(a ^ b, (a ^ b) & if top_nibble { 0xF0 } else { 0 }, "byte {i}");
    }
    assert!(split.read(&bytes[56..112]).is_nan());
    assert!(matches!(codec::dequantize(f, &bytes), Err(CodecError::NonFiniteScale { block: 1, offset: 48, .. })));
    // Repacking refuses it the same way, naming the row and block.
    assert!(matches!(repack(f, 3, 256, &bytes), Err(RepackError::NonFiniteScale { row: 1, block: 0, offset: 48, .. })));
}

/// IQ1 values are a grid value -1, 0, 1 plus a delta of +-1/8: packed, eight times that, so
/// only +-1, +-7, +-9 occur, and their blocks decode to the source values within f16 rounding
/// of the scales (packed_weights_match_source_dequantization_within_f16_scale_rounding).
#[test]
fn iq1_values_pack_to_eight_times_grid_plus_delta() {
    for f in [SourceFormat::IQ1_S, SourceFormat::IQ1_M] {
        let bytes = fixture::source_blocks(f, 64, 3);
        let w = repack(f, 8, 2048, &bytes).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for b in 0..w.kblk() {
            for n in 0..w.n {
                seen.extend(w.block(b, n).values.iter().map(|&v| v as i32));
            }
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![-9, -7, -1, 1, 7, 9], "{f}");
    }
}
