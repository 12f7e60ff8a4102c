//! A small GGUF reader: the header, the metadata keys (values skipped except the model name)
//! and the tensor table, enough to turn a model file into inventory shapes. Tensor data is
//! never read. GGUF versions 2 and 3 (64-bit counts and lengths).

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use vnni_kernels::SourceFormat;

#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("{path}: not a GGUF file (magic {magic:?})")]
    Magic { path: PathBuf, magic: [u8; 4] },
    #[error("{path}: GGUF version {version} is not supported (2 or 3)")]
    Version { path: PathBuf, version: u32 },
    #[error("{path}: malformed at byte {offset}: {message}")]
    Malformed { path: PathBuf, offset: u64, message: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// GGUF order: `dims[0]` is the fastest-varying (K for a weight matrix).
    pub dims: Vec<u64>,
    pub ggml_type: u32,
}

impl TensorInfo {
    /// (N, K, format) for a weight in a supported format: a 2-D matrix, or a 3-D stack of
    /// expert matrices (`dims[2]` experts of N x K each, as MoE GGUFs store `ffn_*_exps`),
    /// which every expert runs as its own N x K product.
    pub fn weight(&self) -> Option<(usize, usize, SourceFormat)> {
        let f = SourceFormat::from_ggml_type(self.ggml_type)?;
        match self.dims.as_slice() {
            [k, n] | [k, n, _] => Some((*n as usize, *k as usize, f)),
            _ => None,
        }
    }

    /// The ggml type's name when this is a matrix (2-D or more) in a type no codec here reads:
    /// import names it and skips it, never reading its bytes as another format.
    pub fn unsupported_type(&self) -> Option<String> {
        (self.dims.len() >= 2 && SourceFormat::from_ggml_type(self.ggml_type).is_none())
            .then(|| ggml_type_name(self.ggml_type))
    }
}

/// A ggml type id's name (gguf-py's spelling) for messages; an id not listed prints as
/// `type N`.
pub fn ggml_type_name(id: u32) -> String {
    const NAMES: [(u32, &str); 33] = [
        (0, "F32"),
        (1, "F16"),
        (2, "Q4_0"),
        (3, "Q4_1"),
        (6, "Q5_0"),
        (7, "Q5_1"),
        (8, "Q8_0"),
        (9, "Q8_1"),
        (10, "Q2_K"),
        (11, "Q3_K"),
        (12, "Q4_K"),
        (13, "Q5_K"),
        (14, "Q6_K"),
        (15, "Q8_K"),
        (16, "IQ2_XXS"),
        (17, "IQ2_XS"),
        (18, "IQ3_XXS"),
        (19, "IQ1_S"),
        (20, "IQ4_NL"),
        (21, "IQ3_S"),
        (22, "IQ2_S"),
        (23, "IQ4_XS"),
        (24, "I8"),
        (25, "I16"),
        (26, "I32"),
        (27, "I64"),
        (28, "F64"),
        (29, "IQ1_M"),
        (30, "BF16"),
        (34, "TQ1_0"),
        (35, "TQ2_0"),
        (39, "MXFP4"),
        (40, "NVFP4"),
    ];
    NAMES.iter().find(|(i, _)| *i == id).map_or_else(|| format!("type {id}"), |(_, n)| (*n).to_string())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufModel {
    pub version: u32,
    /// `general.name` when present.
    pub name: Option<String>,
    pub tensors: Vec<TensorInfo>,
}

struct Cursor<R> {
    r: R,
    offset: u64,
    path: PathBuf,
    /// The file's size: no count may promise more entries than the bytes left can hold.
    len: u64,
}

const MAX_STRING: u64 = 1 << 20;
const MAX_COUNT: u64 = 1 << 32;
/// Arrays of arrays deeper than this are refused (the format uses one level).
const MAX_ARRAY_DEPTH: u32 = 4;

impl<R: Read> Cursor<R> {
    fn bytes<const L: usize>(&mut self) -> Result<[u8; L], GgufError> {
        let mut b = [0u8; L];
        self.r.read_exact(&mut b).map_err(|e| GgufError::Malformed {
            path: self.path.clone(),
            offset: self.offset,
            message: format!("truncated ({e})"),
        })?;
        self.offset += L as u64;
        Ok(b)
    }
    fn u32(&mut self) -> Result<u32, GgufError> {
        self.bytes::<4>().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Result<u64, GgufError> {
        self.bytes::<8>().map(u64::from_le_bytes)
    }
    fn bad(&self, message: String) -> GgufError {
        GgufError::Malformed { path: self.path.clone(), offset: self.offset, message }
    }
    /// A count of entries of at least `min_bytes` bytes each, bounded by the bytes left.
    fn count(&mut self, what: &str, min_bytes: u64) -> Result<u64, GgufError> {
        let n = self.u64()?;
        let left = self.len.saturating_sub(self.offset);
        if n > MAX_COUNT || n.saturating_mul(min_bytes) > left {
            return Err(self
                .bad(format!("{what} count {n} is more than the {left} bytes left can hold (truncated or corrupt)")));
        }
        Ok(n)
    }
    fn string(&mut self) -> Result<String, GgufError> {
        let len = self.u64()?;
        if len > MAX_STRING {
            return Err(self.bad(format!("string of {len} bytes is implausible")));
        }
        let mut b = vec![0u8; len as usize];
        self.r.read_exact(&mut b).map_err(|e| self.bad(format!("truncated string ({e})")))?;
        self.offset += len;
        String::from_utf8(b).map_err(|_| self.bad("string is not UTF-8".into()))
    }
    fn skip(&mut self, n: u64) -> Result<(), GgufError> {
        let copied =
            std::io::copy(&mut (&mut self.r).take(n), &mut std::io::sink()).map_err(|e| self.bad(e.to_string()))?;
        if copied != n {
            return Err(self.bad("truncated value".into()));
        }
        self.offset += n;
        Ok(())
    }
    /// Skip (or, for a string, return) one metadata value of type `t`, inside `depth` arrays.
    fn value(&mut self, t: u32, depth: u32) -> Result<Option<String>, GgufError> {
        match t {
            0 | 1 | 7 => self.skip(1)?,
            2 | 3 => self.skip(2)?,
            4..=6 => self.skip(4)?,
            10..=12 => self.skip(8)?,
            8 => return self.string().map(Some),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(self.bad(format!("arrays nested deeper than {MAX_ARRAY_DEPTH}")));
                }
                let inner = self.u32()?;
                let n = self.count("array", 1)?;
                for _ in 0..n {
                    self.value(inner, depth + 1)?;
                }
            }
            other => return Err(self.bad(format!("unknown metadata value type {other}"))),
        }
        Ok(None)
    }
}

/// Read the header and tensor table of a GGUF file.
pub fn read(path: &Path) -> Result<GgufModel, GgufError> {
    let file =
        std::fs::File::open(path).map_err(|e| GgufError::Io { path: path.to_path_buf(), message: e.to_string() })?;
    let len = file.metadata().map_err(|e| GgufError::Io { path: path.to_path_buf(), message: e.to_string() })?.len();
    let mut c = Cursor { r: BufReader::new(file), offset: 0, path: path.to_path_buf(), len };
    let magic = c.bytes::<4>()?;
    if &magic != b"GGUF" {
        return Err(GgufError::Magic { path: path.to_path_buf(), magic });
    }
    let version = c.u32()?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::Version { path: path.to_path_buf(), version });
    }
    // A tensor entry is at least 32 bytes (name length, one dimension, type, offset); a
    // metadata entry at least 13 (key length, type, a one-byte value).
    let tensors_n = c.count("tensor", 32)?;
    let kv_n = c.count("metadata", 13)?;
    let mut name = None;
    for _ in 0..kv_n {
        let key = c.string()?;
        let t = c.u32()?;
        let v = c.value(t, 0)?;
        if key == "general.name" {
            name = v;
        }
    }
    let mut tensors = Vec::with_capacity(tensors_n as usize);
    for _ in 0..tensors_n {
        let tname = c.string()?;
        let nd = c.u32()?;
        if nd == 0 || nd > 4 {
            return Err(c.bad(format!("tensor {tname:?} has {nd} dimensions")));
        }
        let dims = (0..nd).map(|_| c.u64()).collect::<Result<Vec<_>, _>>()?;
        let ggml_type = c.u32()?;
        let _offset = c.u64()?;
        tensors.push(TensorInfo { name: tname, dims, ggml_type });
    }
    Ok(GgufModel { version, name, tensors })
}

/// The inventory role of a tensor: its name without the `blk.<i>.` prefix and `.weight` suffix.
pub fn role(tensor: &str) -> String {
    let t = tensor.strip_suffix(".weight").unwrap_or(tensor);
    match t.strip_prefix("blk.") {
        Some(rest) => rest.split_once('.').map_or(rest, |(_, r)| r).to_string(),
        None => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    fn file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("vnni-gguf-{name}-{}.gguf", std::process::id()));
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        p
    }

    fn header(tensors: u64, kv: u64) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(tensors.to_le_bytes());
        b.extend(kv.to_le_bytes());
        b
    }

    #[test]
    fn counts_are_bounded_by_the_bytes_present() {
        // 24 bytes promising 2^31 tensors: refused at once (it reserved 120 GB and aborted).
        let p = file("count", &header(1 << 31, 0));
        let e = super::read(&p).unwrap_err().to_string();
        assert!(e.contains("tensor count 2147483648") && e.contains("bytes left"), "{e}");
        let p2 = file("kv", &header(0, 1 << 40));
        assert!(super::read(&p2).unwrap_err().to_string().contains("metadata count"));
        let _ = (std::fs::remove_file(p), std::fs::remove_file(p2));
    }

    #[test]
    fn deeply_nested_arrays_are_refused_not_recursed() {
        let mut b = header(0, 1);
        b.extend(1u64.to_le_bytes());
        b.push(b'k');
        b.extend(9u32.to_le_bytes()); // an array ...
        for _ in 0..100_000 {
            b.extend(9u32.to_le_bytes()); // ... of arrays ...
            b.extend(1u64.to_le_bytes()); // ... of one element, again and again
        }
        let p = file("nested", &b);
        let e = super::read(&p).unwrap_err().to_string();
        assert!(e.contains("nested deeper"), "{e}");
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn type_names_follow_gguf_py_and_every_supported_format_is_listed() {
        for f in vnni_kernels::SourceFormat::ALL {
            assert_eq!(super::ggml_type_name(f.info().ggml_type), f.name());
        }
        assert_eq!(super::ggml_type_name(11), "Q3_K");
        assert_eq!(super::ggml_type_name(99), "type 99");
    }

    #[test]
    fn roles_drop_the_block_index() {
        assert_eq!(super::role("blk.17.attn_q.weight"), "attn_q");
        assert_eq!(super::role("output.weight"), "output");
        assert_eq!(super::role("blk.3.ffn_down_exps.weight"), "ffn_down_exps");
    }
}
