//! Latency measurement. Workers append raw [`Entry`] records to their own [`WorkerLog`]; one
//! collector drains the logs every second into HDR histograms per series ([`SeriesSet`]). Keeping
//! histograms out of the workers keeps 1024 workers cheap in memory and each op to a push.

mod hlog;
mod log;
mod series;

pub use hlog::for_each_interval;
pub use log::{Entry, Variant, WorkerLog};
pub use series::{
    new_histogram, series_name, summarize, Histogram, IntervalMode, SeriesId, SeriesSet, HIGHEST_US,
};
