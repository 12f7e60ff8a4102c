//! One module per subcommand: typed arguments (clap, and `ToArgv` back to a command line)
//! and a `run` over the libraries.

pub mod bench;
pub mod candidates;
pub mod certify;
pub mod explain;
pub mod fit;
pub mod formats;
pub mod generate;
pub mod inventory;
pub mod merge;
pub mod preflight;
pub mod refresh;
pub mod report;
pub mod seal;
pub mod shell;
pub mod sweep;
pub mod verify;

/// The build identity a collection records: `vnni-dispatch 0.1.0 (rustc ...)`.
pub fn version() -> String {
    format!("vnni-dispatch {} ({})", env!("CARGO_PKG_VERSION"), env!("VNNI_RUSTC_VERSION"))
}
