//! `vnni-dispatch inventory` as a user runs it, including `import` of a GGUF file written by
//! gguf-py (the reader walks its real header, metadata and tensor table).

mod common;
use common::vnni;

use vnni_corpus::gguf;
use vnni_corpus::inventory::Inventory;
use vnni_kernels::SourceFormat;
use vnni_tests::{python_with, run_python, workspace_root};

#[test]
fn inventory_prints_plans_and_digests() {
    let dir = workspace_root().join("corpus/inventory");
    let (ok, out, err) = vnni(&["inventory", "--dir", dir.to_str().unwrap(), "--profile", "family-smoke"]);
    assert!(ok, "{err}");
    let digest = out.lines().last().unwrap().rsplit(' ').next().unwrap().to_string();
    let plan = Inventory::load(&dir).unwrap().resolve("family-smoke").unwrap();
    assert_eq!(digest, plan.digest());
    assert!(out.contains("180 cells, 2 pass(es) of 1 warmup + 3 sample rounds (a pass ends after 4 once"), "{out}");
    let (ok, json, _) = vnni(&["inventory", "--dir", dir.to_str().unwrap(), "--profile", "family-smoke", "--json"]);
    assert!(ok);
    assert_eq!(json.trim(), plan.canonical_json());
    let (ok, _, err) = vnni(&["inventory", "--dir", dir.to_str().unwrap(), "--profile", "nope"]);
    assert!(!ok && err.contains("unknown profile \"nope\"") && err.contains("family-smoke"), "{err}");
}

#[test]
fn a_model_written_by_gguf_py_imports_into_the_inventory() {
    let Some(py) = python_with(&["gguf", "numpy"]) else { return };
    let dir = std::env::temp_dir().join(format!("vnni-gguf-{}", std::process::id()));
    let inv_dir = dir.join("inventory");
    std::fs::create_dir_all(&inv_dir).unwrap();
    let model = dir.join("tiny.gguf");
    run_python(&py, &workspace_root().join("tests/oracle/write_gguf.py"), &[model.to_str().unwrap()], None);

    let m = gguf::read(&model).unwrap();
    assert_eq!(m.name.as_deref(), Some("tiny-model"));
    assert_eq!(m.tensors.len(), 15);
    let tensor = |name: &str| m.tensors.iter().find(|t| t.name == name).unwrap();
    assert_eq!(tensor("blk.1.attn_q.weight").weight(), Some((64, 256, SourceFormat::Q4_K)));
    let experts = tensor("blk.0.ffn_up_exps.weight");
    assert_eq!(experts.dims, vec![256, 128, 4]);
    assert_eq!(experts.weight(), Some((128, 256, SourceFormat::MXFP4)));
    assert!(tensor("token_embd.weight").weight().is_none());
    assert_eq!(tensor("blk.0.attn_k.weight").weight(), Some((32, 256, SourceFormat::Q3_K)));
    assert_eq!(tensor("blk.0.attn_output.weight").weight(), Some((40, 256, SourceFormat::IQ3_XXS)));
    assert_eq!(tensor("blk.0.ffn_gate.weight").weight(), Some((48, 256, SourceFormat::IQ3_S)));
    assert_eq!(tensor("blk.0.ffn_up.weight").weight(), Some((56, 256, SourceFormat::Q2_K)));
    assert_eq!(tensor("blk.0.ffn_down_shexp.weight").weight(), Some((72, 256, SourceFormat::IQ2_XXS)));
    assert_eq!(tensor("blk.0.ffn_gate_shexp.weight").weight(), Some((80, 256, SourceFormat::IQ1_M)));
    assert_eq!(tensor("blk.0.attn_v.weight").unsupported_type().as_deref(), Some("TQ1_0"));

    let (ok, out, err) = vnni(&["inventory", "--dir", inv_dir.to_str().unwrap(), "import", model.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("10 shapes"), "{out}");
    // Matrices of types not supported yet are named with their type and skipped.
    assert!(
        err.contains("1 tensor(s) of type TQ1_0, not supported yet, skipped: blk.0.attn_v.weight")
            && err.contains("1 tensor(s) of type F32, not supported yet, skipped: token_embd.weight"),
        "{err}"
    );
    let inv = Inventory::load(&inv_dir).unwrap();
    let get = |name: &str| inv.shapes.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no {name}"));
    let attn = get("tiny-model.attn_q");
    assert_eq!((attn.n, attn.k, attn.formats.clone(), attn.exact_overlay), (64, 256, vec![SourceFormat::Q4_K], true));
    let down = get("tiny-model.ffn_down");
    assert_eq!((down.n, down.k, down.formats.clone()), (96, 512, vec![SourceFormat::Q8_0]));
    let head = get("tiny-model.output");
    assert_eq!((head.n, head.k, head.formats.clone()), (320, 256, vec![SourceFormat::Q6_K]));
    let up = get("tiny-model.ffn_up_exps");
    assert_eq!((up.n, up.k, up.formats.clone()), (128, 256, vec![SourceFormat::MXFP4]));
    let k = get("tiny-model.attn_k");
    assert_eq!((k.n, k.k, k.formats.clone()), (32, 256, vec![SourceFormat::Q3_K]));
    let gate = get("tiny-model.ffn_gate");
    assert_eq!((gate.n, gate.k, gate.formats.clone()), (48, 256, vec![SourceFormat::IQ3_S]));
    let dense_up = get("tiny-model.ffn_up");
    assert_eq!((dense_up.n, dense_up.k, dense_up.formats.clone()), (56, 256, vec![SourceFormat::Q2_K]));
    let shexp = get("tiny-model.ffn_down_shexp");
    assert_eq!((shexp.n, shexp.k, shexp.formats.clone()), (72, 256, vec![SourceFormat::IQ2_XXS]));
    let gate_shexp = get("tiny-model.ffn_gate_shexp");
    assert_eq!((gate_shexp.n, gate_shexp.k, gate_shexp.formats.clone()), (80, 256, vec![SourceFormat::IQ1_M]));
    assert_eq!(inv.shapes.len(), 10, "two layers of one role collapse to one shape; F32 and TQ1_0 are skipped");
    // Importing again would overwrite: refused.
    let (ok, _, err) = vnni(&["inventory", "--dir", inv_dir.to_str().unwrap(), "import", model.to_str().unwrap()]);
    assert!(!ok && err.contains("exists"), "{err}");

    // A truncated file is an error that names the file, never a panic.
    let bytes = std::fs::read(&model).unwrap();
    let cut = dir.join("cut.gguf");
    std::fs::write(&cut, &bytes[..200]).unwrap();
    let (ok, _, err) = vnni(&["inventory", "--dir", inv_dir.to_str().unwrap(), "import", cut.to_str().unwrap()]);
    assert!(!ok && err.contains("cut.gguf") && err.contains("truncated"), "{err}");
    std::fs::write(&cut, b"GGML0000").unwrap();
    assert!(gguf::read(&cut).unwrap_err().to_string().contains("not a GGUF file"));
    let _ = std::fs::remove_dir_all(&dir);
}
