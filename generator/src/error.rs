//! Errors of rendering, validating and installing generated tables. Each names what is at
//! fault and, where there is one, what to do.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("the policy is not installable: {0} (fix the policy or refit; nothing was generated)")]
    Policy(#[from] vnni_policy::PolicyError),
    #[error("the policy's {what} = {value} does not fit the generated int64 arithmetic")]
    OutOfRange { what: String, value: u64 },
    #[error("template {template}: {message}")]
    Template { template: String, message: String },
    #[error("{tool} is missing ({source}): {fix}")]
    ToolMissing { tool: String, fix: String, source: std::io::Error },
    #[error("{tool} failed to compile {file} (work files kept in {dir}):\n{stderr}")]
    Compile { tool: String, file: PathBuf, dir: PathBuf, stderr: String },
    #[error("the {harness} harness failed (work files kept in {dir}): {message}")]
    Harness { harness: String, dir: PathBuf, message: String },
    #[error(transparent)]
    Disagree(Box<Disagreement>),
    #[error("the {harness} candidate table disagrees with the policy: expected `{expected}`, got `{got}` (work files kept in {dir})")]
    CandidateTable { harness: String, expected: String, got: String, dir: PathBuf },
    #[error("the policy is not total: legal query {query} has no selection ({reason})")]
    NotTotal { query: String, reason: String },
    #[error("{file}:{line}: generated code uses floating point (`{text}`); the tables must be integer-only")]
    FloatingPoint { file: String, line: usize, text: String },
    #[error("{file} was not rendered from this policy (its digest {digest} is not in the file); render it again")]
    OtherPolicy { file: String, digest: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Write(#[from] vnni_corpus::WriteError),
}

/// The first query on which generated code and the evaluator answer differently.
#[derive(Debug, thiserror::Error)]
#[error(
    "the {harness} tables disagree with the Rust evaluator at query #{index} ({query}): \
     evaluator says `{expected}`, generated code says `{got}` (work files kept in {dir})"
)]
pub struct Disagreement {
    pub harness: String,
    pub index: usize,
    pub query: String,
    pub expected: String,
    pub got: String,
    pub dir: PathBuf,
}

pub type Result<T, E = GenerateError> = std::result::Result<T, E>;

/// Wrap an I/O error with the path it concerns.
pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> GenerateError {
    let path = path.into();
    move |source| GenerateError::Io { path, source }
}
