//! The learner's errors: each names the corpus file, domain or corpus id at fault.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("corpus {dir} is not sealed or fails verification (seal it with `vnni-dispatch seal`, or collect it again): {source}")]
    Unauthenticated { dir: PathBuf, source: Box<vnni_corpus::seal::SealError> },
    #[error(transparent)]
    Read(#[from] vnni_corpus::read::ReadError),
    #[error(transparent)]
    Collection(#[from] vnni_corpus::collection::CollectionError),
    #[error(transparent)]
    Write(#[from] vnni_corpus::WriteError),
    #[error("{path}: {message}")]
    Corpus { path: PathBuf, message: String },
    #[error(
        "corpus {corpus_id} failed its sealed certification before (recorded in {ledger}); \
         a failed seal is never refit: collect a new corpus"
    )]
    SealFailedBefore { corpus_id: String, ledger: PathBuf },
    #[error("{path}: {message}")]
    Ledger { path: PathBuf, message: String },
    #[error("domain {domain}: {message}")]
    Tree { domain: String, message: String },
    #[error("the fitted policy is invalid (a learner bug): {0}")]
    Policy(#[from] vnni_policy::PolicyError),
    #[error("{path}: {message}")]
    Report { path: PathBuf, message: String },
    #[error("corpus {dir}: {message}")]
    Frozen { dir: PathBuf, message: String },
}

pub type Result<T, E = FitError> = std::result::Result<T, E>;
