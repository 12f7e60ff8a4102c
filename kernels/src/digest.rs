//! The one sha256-to-hex of the workspace: every digest a file, plan, registry or corpus
//! carries is lower-case hex of sha256 through these two functions.

use sha2::{Digest, Sha256};

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Lower-case hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A streamed sha256 (files, several named parts) ending in lower-case hex.
#[derive(Default, Clone)]
pub struct Sha256Hex(Sha256);

impl Sha256Hex {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Each part followed by a NUL byte, so ("ab", "c") and ("a", "bc") differ.
    pub fn update_parts(&mut self, parts: &[&[u8]]) {
        for p in parts {
            self.0.update(p);
            self.0.update([0]);
        }
    }

    pub fn finish(self) -> String {
        hex(&self.finish_raw())
    }

    /// The 32 digest bytes.
    pub fn finish_raw(self) -> [u8; 32] {
        self.0.finalize().into()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_digest() {
        assert_eq!(super::sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let mut h = super::Sha256Hex::new();
        h.update(b"a");
        h.update(b"bc");
        assert_eq!(h.finish(), super::sha256_hex(b"abc"));
        let mut p = super::Sha256Hex::new();
        p.update_parts(&[b"ab", b"c"]);
        assert_eq!(p.finish(), super::sha256_hex(b"ab\0c\0"));
    }
}
