pub mod bench;
pub mod candidates;
pub mod certify;
pub mod formats;
pub mod inventory;
pub mod preflight;
pub mod seal;
pub mod sweep;
