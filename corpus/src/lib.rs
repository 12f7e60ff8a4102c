//! vnni-corpus: the owner of every file format of the project. Today: the row schemas
//! the sweep and bench write (aggregate timing rows, raw samples, kernel resources) and
//! atomic CSV publication. The inventory, cell store and sealing come with the corpus issue.

pub mod gguf;
pub mod inventory;
pub mod provenance;
pub mod read;
pub mod schema;
pub mod seal;
pub mod write;

pub use schema::{Certificate, ResourceRow, SampleRow, TimingRow};
pub use write::{write_bytes, write_csv, WriteError};
