//! Latency measurement. Each worker records its operations into its own [`WorkerRecorder`]
//! (counts per series and start interval, in HDR's bucket layout, one [`Recording`] per
//! interval the operations ended in); one collector takes the recordings of each interval that
//! is over and merges them into HDR histograms per series ([`SeriesSet`]), so its work per
//! interval does not grow with the op rate. The operations that started in another interval
//! than they ended in are set apart ([`Carried`]): with the log by end they make the log by
//! start ([`for_each_start_interval_in`]).

mod by_node;
mod hlog;
mod log;
mod recorder;
mod series;
mod shift;

pub use by_node::{NodeLatencies, NodeSecond};
pub use hlog::for_each_interval;
pub use log::{Entry, Variant};
pub use recorder::{Recording, WorkerRecorder};
pub use series::{
    new_histogram, series_name, summarize, Histogram, IntervalMode, SeriesId, SeriesSet, HIGHEST_US,
};
pub use shift::{
    for_each_start_interval, for_each_start_interval_in, Carried, StoredV2Serializer, ENDED_LATER,
    STARTED_EARLIER,
};
