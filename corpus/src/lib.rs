//! vnni-corpus: the owner of every file format of the project: the shape inventory and
//! profiles, GGUF tensor tables, row schemas and their validating readers, atomic
//! publication, the collection plan and cell store, and sealed corpus bundles.

pub mod collection;
pub mod evidence;
pub mod gguf;
pub mod inventory;
pub mod ncu;
pub mod provenance;
pub mod read;
pub mod schema;
pub mod seal;
pub mod staged;
pub mod write;

pub use schema::{Certificate, ResourceRow, SampleRow, TimingRow};
pub use write::{write_bytes, write_csv, WriteError};
