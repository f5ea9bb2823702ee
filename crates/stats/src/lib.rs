//! Latency measurement. Each worker records its operations into its own [`WorkerRecorder`]
//! (counts per series and start second, in HDR's bucket layout, one [`Recording`] per interval
//! the operations ended in); one collector takes the recordings of each interval that is over
//! and merges them into HDR histograms per series ([`SeriesSet`]), so its work per interval
//! does not grow with the op rate.

mod hlog;
mod log;
mod recorder;
mod series;

pub use hlog::for_each_interval;
pub use log::{Entry, Variant};
pub use recorder::{Recording, WorkerRecorder};
pub use series::{
    new_histogram, series_name, summarize, Histogram, IntervalMode, SeriesId, SeriesSet, HIGHEST_US,
};
