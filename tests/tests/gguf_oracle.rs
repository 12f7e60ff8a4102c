//! gguf-py (the `gguf` package on PyPI) is the authority for every bit of the source
//! formats. These tests compare our codecs with it on random valid blocks.
//! Agreement is exact (bit for bit) for every format: our dequantizers use gguf-py's
//! operation order (e.g. Q4_K: `(d * sc) * q - (dmin * m)` in f32).

use std::path::{Path, PathBuf};

use vnni_kernels::codec::{self, QUANTIZABLE};
use vnni_kernels::{fixture, SourceFormat};
use vnni_tests::{python_with, run_python, workspace_root};

fn oracle() -> Option<(PathBuf, PathBuf)> {
    let py = python_with(&["gguf", "numpy"])?;
    Some((py, workspace_root().join("tests/oracle/gguf_oracle.py")))
}

/// A fresh file path: tests run in parallel, so every call gets its own name.
fn tmp(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!("vnni-oracle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{}-{name}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)))
}

fn f32_from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn f32_bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Runs the oracle's `verb` on `input` and returns what it wrote. Both files are removed:
/// the inputs are tens of MB, and a temp directory that grows every run fills small disks.
fn gguf_run(py: &Path, script: &Path, verb: &str, f: SourceFormat, input: &[u8]) -> Vec<u8> {
    let (src, dst) = (tmp(&format!("{f}.{verb}.in")), tmp(&format!("{f}.{verb}.out")));
    std::fs::write(&src, input).unwrap();
    run_python(py, script, &[verb, f.name(), src.to_str().unwrap(), dst.to_str().unwrap()], None);
    let out = std::fs::read(&dst).unwrap();
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&dst);
    out
}

fn gguf_dequantize(py: &Path, script: &Path, f: SourceFormat, bytes: &[u8]) -> Vec<f32> {
    f32_from_bytes(&gguf_run(py, script, "dequantize", f, bytes))
}

/// First position where two f32 slices differ in bits, with both values.
fn first_difference(a: &[f32], b: &[f32]) -> Option<(usize, f32, f32)> {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).enumerate().find(|(_, (x, y))| x.to_bits() != y.to_bits()).map(|(i, (x, y))| (i, *x, *y))
}

#[test]
fn format_table_matches_gguf_py() {
    let Some((py, script)) = oracle() else { return };
    let names: Vec<&str> = SourceFormat::ALL.iter().map(|f| f.name()).collect();
    let out = run_python(&py, &script, &["types"], Some(&names.join(" ")));
    for f in SourceFormat::ALL {
        let key = format!("\"{}\": [{}, {}, {}]", f.name(), f.info().ggml_type, f.block_elems(), f.block_bytes());
        assert!(out.contains(&key), "{f}: want {key} in gguf-py's table {out}");
    }
}

#[test]
fn dequantization_agrees_bit_for_bit_on_random_blocks() {
    let Some((py, script)) = oracle() else { return };
    for f in SourceFormat::ALL {
        let bytes = fixture::source_blocks(f, 4096, 0x5EED + f.info().ggml_type as u64);
        let theirs = gguf_dequantize(&py, &script, f, &bytes);
        let ours = codec::dequantize(f, &bytes).unwrap();
        if let Some((i, a, b)) = first_difference(&ours, &theirs) {
            panic!(
                "{f}: element {i} (block {}): ours {a:e} ({:#010x}), gguf-py {b:e}",
                i / f.block_elems(),
                a.to_bits()
            );
        }
    }
}

/// Rows with the shapes quantizers trip on: zeros, constants, one outlier, tiny and large magnitudes.
fn quantizer_inputs() -> Vec<f32> {
    let mut x = fixture::activations(64, 256, 77);
    x[..32].fill(0.0);
    x[32..64].fill(-0.75);
    x[64..96].fill(0.001);
    x[100] = 40.0;
    for (i, v) in x[256..512].iter_mut().enumerate() {
        *v *= 1e-3 * (1 + i % 7) as f32;
    }
    for v in &mut x[512..768] {
        *v *= 300.0;
    }
    x
}

#[test]
fn quantization_agrees_byte_for_byte_with_gguf_py() {
    let Some((py, script)) = oracle() else { return };
    let x = quantizer_inputs();
    for f in QUANTIZABLE {
        if f == SourceFormat::IQ4_NL {
            continue; // gguf-py has no IQ4_NL quantizer: see the next test.
        }
        let theirs = gguf_run(&py, &script, "quantize", f, &f32_bytes(&x));
        let ours = codec::quantize(f, &x).unwrap();
        assert_eq!(ours.len(), theirs.len(), "{f}");
        if let Some(i) = ours.iter().zip(&theirs).position(|(a, b)| a != b) {
            panic!("{f}: byte {i} (block {}) ours {:#04x} gguf-py {:#04x}", i / f.block_bytes(), ours[i], theirs[i]);
        }
        // Blocks quantized by gguf-py decode identically here.
        let back = codec::dequantize(f, &theirs).unwrap();
        assert!(first_difference(&back, &gguf_dequantize(&py, &script, f, &theirs)).is_none(), "{f}");
    }
}

#[test]
fn blocks_we_quantize_decode_identically_in_gguf_py() {
    let Some((py, script)) = oracle() else { return };
    let x = quantizer_inputs();
    for f in QUANTIZABLE {
        let ours = codec::quantize(f, &x).unwrap();
        let theirs = gguf_dequantize(&py, &script, f, &ours);
        if let Some((i, a, b)) = first_difference(&codec::dequantize(f, &ours).unwrap(), &theirs) {
            panic!("{f}: element {i}: ours {a:e}, gguf-py {b:e}");
        }
    }
}

/// The committed grid tables are what `scripts/gen/iq_grids.py` writes from gguf-py's grids
/// (compared without whitespace: the committed files went through rustfmt).
#[test]
fn committed_grid_tables_are_their_generators_output() {
    let Some((py, _)) = oracle() else { return };
    let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    let script = workspace_root().join("scripts/gen/iq_grids.py");
    for (which, file) in [("iq3", "kernels/src/codec/iq3_grid.rs"), ("iq12", "kernels/src/codec/iq12_grid.rs")] {
        let generated = run_python(&py, &script, &[which], None);
        let committed = std::fs::read_to_string(workspace_root().join(file)).unwrap();
        assert!(squeeze(&generated) == squeeze(&committed), "{file} differs from `iq_grids.py {which}`: regenerate it");
    }
}
