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
    /// (N, K, format) for a 2-D weight in a milestone-1 format.
    pub fn weight(&self) -> Option<(usize, usize, SourceFormat)> {
        let f = SourceFormat::from_ggml_type(self.ggml_type)?;
        match self.dims.as_slice() {
            [k, n] => Some((*n as usize, *k as usize, f)),
            _ => None,
        }
    }
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
}

const MAX_STRING: u64 = 1 << 20;
const MAX_COUNT: u64 = 1 << 32;

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
    fn count(&mut self, what: &str) -> Result<u64, GgufError> {
        let n = self.u64()?;
        if n > MAX_COUNT {
            return Err(self.bad(format!("{what} count {n} is implausible")));
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
    /// Skip (or, for a string, return) one metadata value of type `t`.
    fn value(&mut self, t: u32) -> Result<Option<String>, GgufError> {
        match t {
            0 | 1 | 7 => self.skip(1)?,
            2 | 3 => self.skip(2)?,
            4..=6 => self.skip(4)?,
            10..=12 => self.skip(8)?,
            8 => return self.string().map(Some),
            9 => {
                let inner = self.u32()?;
                let n = self.count("array")?;
                for _ in 0..n {
                    self.value(inner)?;
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
    let mut c = Cursor { r: BufReader::new(file), offset: 0, path: path.to_path_buf() };
    let magic = c.bytes::<4>()?;
    if &magic != b"GGUF" {
        return Err(GgufError::Magic { path: path.to_path_buf(), magic });
    }
    let version = c.u32()?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::Version { path: path.to_path_buf(), version });
    }
    let tensors_n = c.count("tensor")?;
    let kv_n = c.count("metadata")?;
    let mut name = None;
    for _ in 0..kv_n {
        let key = c.string()?;
        let t = c.u32()?;
        let v = c.value(t)?;
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
    #[test]
    fn roles_drop_the_block_index() {
        assert_eq!(super::role("blk.17.attn_q.weight"), "attn_q");
        assert_eq!(super::role("output.weight"), "output");
        assert_eq!(super::role("blk.3.ffn_down_exps.weight"), "ffn_down_exps");
    }
}
