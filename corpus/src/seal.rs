//! Sealing and verifying corpus bundles. `corpus.manifest.json` (plain text, never in LFS)
//! binds the schema version, backend, arch, profile, inventory digest, registry digest,
//! build identity and every payload's path, size and sha256; the corpus id is the sha256 of
//! all of that. Sealing refuses `.inprogress` files, symlinks and unresolved Git LFS
//! pointers; verifying re-checks everything and names the first bad file.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vnni_kernels::digest::{sha256_hex, Sha256Hex};
use vnni_kernels::Backend;

pub const MANIFEST: &str = "corpus.manifest.json";
pub const SCHEMA: &str = "vnni-corpus-manifest-v1";
const LFS_POINTER: &[u8] = b"version https://git-lfs.github.com/spec/v1";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("{path}: in-progress file: the collection did not finish; rerun it before sealing")]
    InProgress { path: PathBuf },
    #[error("{path}: symbolic links are not allowed in a corpus")]
    Symlink { path: PathBuf },
    #[error("{path}: is a Git LFS pointer, not the payload: run `git lfs pull`")]
    LfsPointer { path: PathBuf },
    #[error("{path}: missing (listed in the manifest)")]
    Missing { path: PathBuf },
    #[error("{path}: not listed in the manifest (extra file)")]
    Extra { path: PathBuf },
    #[error("{path}: {what} differs from the manifest (expected {expected}, found {found})")]
    Changed { path: PathBuf, what: &'static str, expected: String, found: String },
    #[error("{path}: corpus id {found} does not match its contents ({expected}): the manifest was edited")]
    CorpusId { path: PathBuf, expected: String, found: String },
    #[error("{path}: {what} is {found} but this checkout has {expected}: {fix}")]
    Stale { path: PathBuf, what: &'static str, expected: String, found: String, fix: &'static str },
    #[error("{path}: manifest schema {found:?} is not {SCHEMA:?}")]
    Schema { path: PathBuf, found: String },
}

/// Identity of the machine and code that produced a corpus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildIdentity {
    pub kernel_source_digest: String,
    pub nvrtc: String,
    pub driver: String,
    pub device: String,
    pub git_commit: String,
    pub git_dirty: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// Everything the corpus id covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub schema: String,
    #[serde(flatten)]
    pub inputs: SealInputs,
    /// Sorted by path.
    pub payloads: Vec<Payload>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub corpus_id: String,
    #[serde(flatten)]
    pub identity: Identity,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> SealError + '_ {
    move |e| SealError::Io { path: path.to_path_buf(), message: e.to_string() }
}

/// sha256 and size of a file, streamed.
pub fn file_digest(path: &Path) -> Result<(u64, String), SealError> {
    let mut f = std::fs::File::open(path).map_err(io(path))?;
    let mut h = Sha256Hex::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        total += n as u64;
    }
    Ok((total, h.finish()))
}

fn is_lfs_pointer(path: &Path) -> Result<bool, SealError> {
    let mut head = [0u8; 64];
    let mut f = std::fs::File::open(path).map_err(io(path))?;
    let n = f.read(&mut head).map_err(io(path))?;
    Ok(head[..n].starts_with(LFS_POINTER))
}

/// Every file under `dir` except the manifest, as sorted relative paths, refusing what a
/// sealed corpus must never contain.
fn payload_files(dir: &Path) -> Result<Vec<String>, SealError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(io(&d))? {
            let p = e.map_err(io(&d))?.path();
            let meta = std::fs::symlink_metadata(&p).map_err(io(&p))?;
            if meta.file_type().is_symlink() {
                return Err(SealError::Symlink { path: p });
            }
            if meta.is_dir() {
                stack.push(p);
                continue;
            }
            if !meta.is_file() {
                // A FIFO, socket or device: reading it could block forever, and it is no payload.
                return Err(SealError::Io { path: p, message: "not a regular file (FIFO, socket or device)".into() });
            }
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if name.ends_with(".inprogress") {
                return Err(SealError::InProgress { path: p });
            }
            let rel = p.strip_prefix(dir).expect("under dir").to_string_lossy().replace('\\', "/");
            if rel != MANIFEST {
                out.push(rel);
            }
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(SealError::Io { path: dir.to_path_buf(), message: "no payload files: nothing to seal".into() });
    }
    Ok(out)
}

impl Identity {
    pub fn corpus_id(&self) -> String {
        sha256_hex(&serde_json::to_vec(self).expect("identity serializes"))
    }
}

/// One inventory source file and its digest (so a corpus says which inventory text made it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFile {
    pub path: String,
    pub sha256: String,
}

/// What a seal records besides the payloads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealInputs {
    pub backend: Backend,
    pub arch: String,
    pub profile: String,
    pub inventory_digest: String,
    /// The inventory files the profile was resolved from.
    pub inventory_sources: Vec<SourceFile>,
    pub registry_digest: String,
    pub arguments_digest: String,
    pub build: BuildIdentity,
}

/// Seal `dir`: digest every payload and write `corpus.manifest.json` atomically.
pub fn seal(dir: &Path, inputs: &SealInputs) -> Result<Manifest, SealError> {
    let mut payloads = Vec::new();
    for rel in payload_files(dir)? {
        let path = dir.join(&rel);
        if is_lfs_pointer(&path)? {
            return Err(SealError::LfsPointer { path });
        }
        let (bytes, sha256) = file_digest(&path)?;
        payloads.push(Payload { path: rel, bytes, sha256 });
    }
    let identity = Identity { schema: SCHEMA.into(), inputs: inputs.clone(), payloads };
    let manifest = Manifest { corpus_id: identity.corpus_id(), identity };
    let text = serde_json::to_string_pretty(&manifest).expect("manifest serializes") + "\n";
    let path = dir.join(MANIFEST);
    crate::write::write_bytes(&path, text.as_bytes())
        .map_err(|e| SealError::Io { path: path.clone(), message: e.to_string() })?;
    Ok(manifest)
}

/// What the current checkout expects a corpus to match (None: not checked).
#[derive(Debug, Clone, Default)]
pub struct Expected {
    /// The registry digests a corpus may bind (one per registry generation this checkout can
    /// still fit); empty: not checked.
    pub registry_digest: Vec<String>,
    /// The same per profile, where it depends on the profile (profiles with prefill rows
    /// bind the prefill candidates too); takes precedence over `registry_digest`.
    pub registry_digests: BTreeMap<String, Vec<String>>,
    /// Inventory digest per profile.
    pub inventory_digests: BTreeMap<String, String>,
}

/// Verify a sealed corpus; the error names the first bad file.
pub fn verify(dir: &Path, expected: &Expected) -> Result<Manifest, SealError> {
    let mpath = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&mpath).map_err(io(&mpath))?;
    if text.as_bytes().starts_with(LFS_POINTER) {
        return Err(SealError::LfsPointer { path: mpath });
    }
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| SealError::Io { path: mpath.clone(), message: format!("not a manifest: {e}") })?;
    if manifest.identity.schema != SCHEMA {
        return Err(SealError::Schema { path: mpath, found: manifest.identity.schema });
    }
    let id = manifest.identity.corpus_id();
    if id != manifest.corpus_id {
        return Err(SealError::CorpusId { path: mpath, expected: id, found: manifest.corpus_id });
    }
    let reg = expected.registry_digests.get(&manifest.identity.inputs.profile).unwrap_or(&expected.registry_digest);
    if !reg.is_empty() && !reg.contains(&manifest.identity.inputs.registry_digest) {
        return Err(SealError::Stale {
            path: mpath,
            what: "the registry digest",
            expected: reg.join(" or "),
            found: manifest.identity.inputs.registry_digest.clone(),
            fix: "the candidate registry changed since this corpus was collected; collect a new corpus",
        });
    }
    if let Some(inv) = expected.inventory_digests.get(&manifest.identity.inputs.profile) {
        if inv != &manifest.identity.inputs.inventory_digest {
            return Err(SealError::Stale {
                path: mpath,
                what: "the inventory digest",
                expected: inv.clone(),
                found: manifest.identity.inputs.inventory_digest.clone(),
                fix: "the shape inventory or profile changed since this corpus was collected; collect a new corpus",
            });
        }
    }
    let listed: BTreeMap<&str, &Payload> = manifest.identity.payloads.iter().map(|p| (p.path.as_str(), p)).collect();
    let present = payload_files(dir)?;
    for rel in &present {
        if !listed.contains_key(rel.as_str()) {
            return Err(SealError::Extra { path: dir.join(rel) });
        }
    }
    for p in &manifest.identity.payloads {
        let path = dir.join(&p.path);
        if !present.contains(&p.path) {
            return Err(SealError::Missing { path });
        }
        if is_lfs_pointer(&path)? {
            return Err(SealError::LfsPointer { path });
        }
        let (bytes, sha) = file_digest(&path)?;
        if bytes != p.bytes {
            return Err(SealError::Changed {
                path,
                what: "size",
                expected: p.bytes.to_string(),
                found: bytes.to_string(),
            });
        }
        if sha != p.sha256 {
            return Err(SealError::Changed { path, what: "sha256", expected: p.sha256.clone(), found: sha });
        }
    }
    Ok(manifest)
}
