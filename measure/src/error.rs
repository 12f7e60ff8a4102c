//! The measuring library's errors: typed, each naming what failed (the cell, the candidate,
//! the file or the argument). `Context` adds a line of where it happened, as the command
//! line prints an error's chain.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error(transparent)]
    Cuda(#[from] vnni_kernels::cuda::CudaError),
    #[error(transparent)]
    Shape(#[from] vnni_kernels::ShapeError),
    #[error(transparent)]
    Repack(#[from] vnni_kernels::RepackError),
    #[error(transparent)]
    Collection(#[from] vnni_corpus::collection::CollectionError),
    #[error(transparent)]
    Inventory(#[from] vnni_corpus::inventory::InventoryError),
    #[error(transparent)]
    Seal(#[from] vnni_corpus::seal::SealError),
    #[error(transparent)]
    Write(#[from] vnni_corpus::WriteError),
    #[error(transparent)]
    Read(#[from] vnni_corpus::read::ReadError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// An I/O error whose path a context line names.
    #[error(transparent)]
    Os(#[from] std::io::Error),
    #[error("starting the CPU worker pool: {0}")]
    Pool(#[from] rayon::ThreadPoolBuildError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A request that cannot be measured as asked (the argument and why).
    #[error("{0}")]
    Invalid(String),
    /// The device or a kernel disagrees with the arithmetic contract.
    #[error("{0}")]
    Structural(String),
    /// The CUDA backend was asked for in a build without it.
    #[error("this build has no CUDA support (built without the `cuda` feature)")]
    NoCuda,
    /// Where `source` happened.
    #[error("{context}")]
    Context { context: String, source: Box<MeasureError> },
}

pub type Result<T, E = MeasureError> = std::result::Result<T, E>;

/// `io::Error` of a path.
pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> MeasureError {
    let path = path.into();
    move |source| MeasureError::Io { path, source }
}

/// Context lines on results (wrapping the error) and options (`None` becomes `Invalid`).
pub trait Context<T> {
    fn context(self, context: impl Into<String>) -> Result<T>;
    fn with_context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<MeasureError>> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl Into<String>) -> Result<T> {
        self.map_err(|e| MeasureError::Context { context: context.into(), source: Box::new(e.into()) })
    }

    fn with_context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| MeasureError::Context { context: context(), source: Box::new(e.into()) })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, context: impl Into<String>) -> Result<T> {
        self.ok_or_else(|| MeasureError::Invalid(context.into()))
    }

    fn with_context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.ok_or_else(|| MeasureError::Invalid(context()))
    }
}

/// Return `MeasureError::Invalid` (a request that cannot be measured) with a formatted message.
macro_rules! invalid {
    ($($arg:tt)*) => {
        return Err($crate::error::MeasureError::Invalid(format!($($arg)*)))
    };
}
pub(crate) use invalid;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_keeps_the_cause() {
        let e: Result<()> = Err(MeasureError::Invalid("inner".into())).context("outer");
        let e = e.unwrap_err();
        assert_eq!(e.to_string(), "outer");
        assert_eq!(std::error::Error::source(&e).unwrap().to_string(), "inner");
        assert!(matches!(None::<u8>.context("missing"), Err(MeasureError::Invalid(m)) if m == "missing"));
    }
}
