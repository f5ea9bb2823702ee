//! The run directory's data types: what iodig writes, and what every view (report, compare,
//! YCSB text) reads back. Versioned by [`SCHEMA_VERSION`]; documented in `docs/run-directory.md`.

/// `eprintln!` that never panics. iodig's notes and progress go to stderr while results are
/// being written; a closed stderr (`iodig run … 2>&1 | head -1`) must not kill the run halfway.
#[macro_export]
macro_rules! eprintln_lossy {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr(), $($arg)*);
    }};
}

pub mod by_node;
pub mod cluster;
pub mod device_stats;
pub mod duration;
pub mod events;
pub mod fsio;
pub mod integrity;
pub mod jvm;
pub mod props;
pub mod reading;
pub mod run;
pub mod secret;
pub mod series;
pub mod sys;
pub mod trace;
pub mod utc;
pub mod writer;

pub use run::*;

/// Bumped on any change that an older reader would misread. Readers accept equal or lower.
/// Version 2: the per-second and per-slot series in gzip-compressed JSON lines beside compact
/// documents ([`series`]); version 1 held them inside pretty-printed JSON and is still read.
pub const SCHEMA_VERSION: u32 = 2;
