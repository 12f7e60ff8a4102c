//! The CUDA decode and dot functions of `kernels/cuda/codebook.cuh`, compiled for the CPU
//! against emulated intrinsics (`tests/cuda_host/`), checked against the Rust reference for
//! every codebook on random blocks: decode in element order, the word pairs of an mma fragment
//! (`decode_pair`, in the interleaved order of the single-scale tables), the M = 1 block dots
//! and the f32 contribution bit for bit. No GPU is needed, so CI checks the CUDA decode of
//! every codebook, those whose GPU certificates are not committed yet included.

use std::path::{Path, PathBuf};
use std::process::Command;

use vnni_kernels::contract::{block_contribution, min_sum, BlockDots};
use vnni_kernels::{fixture, quantize_activations, Codebook};
use vnni_tests::{missing_tool, workspace_root};

/// The compiler the generated tables are validated with; `None` (outside CI) when there is none.
fn cxx() -> Option<String> {
    match vnni_generator::harness::cxx() {
        Ok(c) => Some(c),
        Err(vnni_generator::GenerateError::ToolMissing { tool, fix, .. }) => {
            missing_tool(&tool, &fix);
            None
        }
        Err(e) => panic!("{e}"),
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vnni-cuda-host-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The harness, built from the kernels' own header: no FMA contraction, like the device build.
fn harness(dir: &Path) -> Option<PathBuf> {
    let cxx = cxx()?;
    let root = workspace_root();
    let exe = dir.join("harness");
    let out = Command::new(&cxx)
        .args(["-std=c++17", "-O1", "-ffp-contract=off", "-fno-strict-aliasing", "-Wall", "-Wno-unknown-pragmas"])
        .arg("-I")
        .arg(root.join("kernels/cuda"))
        .arg("-I")
        .arg(root.join("tests/cuda_host"))
        .arg(root.join("tests/cuda_host/harness.cpp"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(out.status.success(), "{cxx} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    Some(exe)
}

/// The CUDA enum's id of a codebook: kernels/cuda/codebook.cuh lists them in `Codebook::ALL`'s order.
fn cuda_id(cb: Codebook) -> u32 {
    Codebook::ALL.iter().position(|&c| c == cb).unwrap() as u32
}

fn word(v: [i8; 4]) -> u32 {
    u32::from_le_bytes(v.map(|x| x as u8))
}

/// The single-scale table codebooks, whose dots and fragments the GPU forms in the
/// interleaved element order (4i, 4i+16, 4i+1, 4i+17, ...); `o4` answers its dot in one sum too.
fn interleaved(cb: Codebook) -> bool {
    matches!(cb, Codebook::Nl4 | Codebook::E2m1 | Codebook::Nl3 | Codebook::Nl2)
}

#[test]
fn cuda_decode_and_dots_match_the_rust_reference_for_every_codebook() {
    let dir = scratch("blocks");
    let Some(exe) = harness(&dir) else { return };
    let (n, k) = (24, 512);
    let mut input = Vec::new();
    let mut expect = Vec::new(); // (codebook, block, [u32; 8 + 8 + 2 + 1])
    for cb in Codebook::ALL {
        let w = fixture::packed_matrix(cb, n, k, 0xC0DA + u64::from(cuda_id(cb))).unwrap();
        // One quantized activation block per weight block: a row of n x K values.
        let x =
            quantize_activations(&fixture::activations(1, n * k, 0xAC7 + u64::from(cuda_id(cb))), 1, n * k).unwrap();
        for b in 0..w.kblk() {
            for col in 0..n {
                let payload = w.payload_at(b, col);
                let at = b * w.n + col;
                let act: [i8; 32] = x.q[32 * at..32 * (at + 1)].try_into().unwrap();
                let (sa, sum) = (x.d[at], x.sum[at]);
                let (scale_bits, second_bits) =
                    (w.scale[at], if w.second.is_empty() { 0 } else { w.second[at].to_bits() });
                input.extend(cuda_id(cb).to_le_bytes());
                let mut p = [0u8; 32];
                p[..payload.len()].copy_from_slice(payload);
                input.extend(p);
                input.extend(act.map(|x| x as u8));
                input.extend(sa.to_le_bytes());
                input.extend(sum.to_le_bytes());
                input.extend(scale_bits.to_le_bytes());
                input.extend(second_bits.to_le_bytes());

                let v = cb.decode(payload);
                let mut want = Vec::with_capacity(19);
                want.extend((0..8).map(|i| word([v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]])));
                for t in 0..4 {
                    let (lo, hi) = if interleaved(cb) {
                        (
                            [v[4 * t], v[4 * t + 16], v[4 * t + 1], v[4 * t + 17]],
                            [v[4 * t + 2], v[4 * t + 18], v[4 * t + 3], v[4 * t + 19]],
                        )
                    } else {
                        (
                            [v[4 * t], v[4 * t + 1], v[4 * t + 2], v[4 * t + 3]],
                            [v[16 + 4 * t], v[17 + 4 * t], v[18 + 4 * t], v[19 + 4 * t]],
                        )
                    };
                    want.extend([word(lo), word(hi)]);
                }
                let dots = BlockDots::compute(&v, &act, min_sum(cb.sub_mins(payload), &act, sum));
                let (x, y) =
                    if interleaved(cb) || cb == Codebook::O4 { (dots.lo + dots.hi, 0) } else { (dots.lo, dots.hi) };
                want.extend([x as u32, y as u32]);
                let scale = cb.scale_format().widen(scale_bits);
                let second = if cb.has_second() { half::f16::from_bits(second_bits).to_f32() } else { 0.0 };
                want.push(block_contribution(cb.scale_rule(), sa, scale, second, dots).to_bits());
                expect.push((cb, b, col, want));
            }
        }
    }
    let (inp, out) = (dir.join("in.bin"), dir.join("out.bin"));
    std::fs::write(&inp, &input).unwrap();
    let run = Command::new(&exe).arg("blocks").arg(&inp).arg(&out).output().unwrap();
    assert!(run.status.success(), "harness failed:\n{}", String::from_utf8_lossy(&run.stderr));
    let got: Vec<u32> =
        std::fs::read(&out).unwrap().chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(got.len(), expect.len() * 19, "one output record per input record");
    const WHAT: [&str; 5] = ["decode word", "decode_pair word", "block_dots", "block_dots", "block_term"];
    for ((cb, b, col, want), got) in expect.iter().zip(got.chunks_exact(19)) {
        if let Some(i) = (0..19).find(|&i| want[i] != got[i]) {
            let what = WHAT[[0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 4][i]];
            panic!("{cb} block {b} column {col}: {what} (output {i}): CUDA {:#010x}, Rust {:#010x}", got[i], want[i]);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The emulated f16 widening (`h2f`, the `cvt.f32.f16` the kernels use) on every bit pattern.
#[test]
fn emulated_f16_widening_is_exact() {
    let dir = scratch("h2f");
    let Some(exe) = harness(&dir) else { return };
    let out = dir.join("h2f.bin");
    assert!(Command::new(&exe).arg("h2f").arg(&out).status().unwrap().success());
    let got = std::fs::read(&out).unwrap();
    for (h, c) in got.chunks_exact(4).enumerate() {
        let (got, want) =
            (f32::from_bits(u32::from_le_bytes(c.try_into().unwrap())), half::f16::from_bits(h as u16).to_f32());
        assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{h:#06x}: {got:e} vs {want:e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
