//! Views of a run directory, one exporter per format. Every view is computed from the run
//! directory alone, so a run taken on a lab server can be reported on a laptop.
//!
//! [`report::write_report`] is `iodig report`; [`compare::write_compare`] is `iodig compare`.

pub mod analysis;
pub mod compare;
pub mod csv;
pub mod data;
pub mod doc;
pub mod error;
pub mod html;
pub mod markdown;
pub mod outcome;
pub mod report;
pub mod stat;
pub mod svg;
pub mod ycsb;

pub use analysis::LatencyOp;
pub use compare::{write_compare, CompareOptions, CompareOutput};
pub use data::{load_run, DbEvent, RunData};
pub use error::ReportError;
pub use report::{write_report, write_report_with, ReportOptions, ReportOutput};
