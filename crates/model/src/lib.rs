//! The run directory's data types: what iodig writes, and what every view (report, compare,
//! YCSB text) reads back. Versioned by [`SCHEMA_VERSION`]; documented in `docs/run-directory.md`.

pub mod events;
pub mod fsio;
pub mod props;
pub mod run;
pub mod sys;
pub mod trace;

pub use run::*;

/// Bumped on any change that an older reader would misread. Readers accept equal or lower.
pub const SCHEMA_VERSION: u32 = 1;
