//! The sealed-certification ledger (the repository's `lfs-data/sealed-ledger.json` unless
//! told otherwise): one entry per corpus id. A corpus
//! whose seal failed is never fitted again (otherwise one could refit until the sealed
//! partition passes by chance, and it would no longer be held out).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use vnni_policy::SealedCertification;

use crate::error::{FitError, Result};

pub const LEDGER_FILE: &str = "sealed-ledger.json";
const SCHEMA: &str = "vnni-sealed-ledger-v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    pub schema: String,
    /// By corpus id.
    pub entries: BTreeMap<String, SealedCertification>,
}

pub fn read(path: &Path) -> Result<Ledger> {
    let bad = |message: String| FitError::Ledger { path: path.into(), message };
    match std::fs::read(path) {
        Ok(bytes) => {
            let l: Ledger = serde_json::from_slice(&bytes).map_err(|e| bad(format!("not a sealed ledger: {e}")))?;
            if l.schema != SCHEMA {
                return Err(bad(format!("schema {:?} is not {SCHEMA:?}", l.schema)));
            }
            Ok(l)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(Ledger { schema: SCHEMA.into(), entries: BTreeMap::new() })
        }
        Err(e) => Err(bad(e.to_string())),
    }
}

/// Refuse a corpus whose sealed certification failed before.
pub fn refuse_failed(path: &Path, corpus_id: &str) -> Result<()> {
    match read(path)?.entries.get(corpus_id) {
        Some(c) if !c.passed => Err(FitError::SealFailedBefore { corpus_id: corpus_id.into(), ledger: path.into() }),
        _ => Ok(()),
    }
}

/// Record one certification (atomically).
pub fn record(path: &Path, corpus_id: &str, outcome: &SealedCertification) -> Result<()> {
    let mut l = read(path)?;
    l.entries.insert(corpus_id.into(), outcome.clone());
    let mut bytes = serde_json::to_vec_pretty(&l).expect("ledgers serialize");
    bytes.push(b'\n');
    Ok(vnni_corpus::write_bytes(path, &bytes)?)
}
