//! Storage-bound or not: how many device reads each database read cost, against the page
//! cache and memory the step had, so a run meant to test storage that mostly hit memory says so.

use crate::data::StepData;

/// One step's reads against the device's, with the memory that could have served them.
#[derive(Debug, Clone, PartialEq)]
pub struct StorageBound {
    /// The client's READ and SCAN operations in the step.
    pub db_reads: u64,
    /// Read IOs the block-IO trace saw complete (all traced devices).
    pub device_reads: u64,
    /// Bytes of those reads.
    pub device_read_bytes: u64,
    /// Page cache (`Cached` of /proc/meminfo) mean over the step's system samples, bytes; none
    /// without samples.
    pub page_cache_mean_bytes: Option<f64>,
    /// Largest page cache of those samples, bytes.
    pub page_cache_max_bytes: Option<u64>,
    /// The host's memory (MemTotal), bytes; none when unknown.
    pub memory_bytes: Option<u64>,
}

impl StorageBound {
    /// Device reads per database read.
    pub fn ratio(&self) -> f64 {
        self.device_reads as f64 / self.db_reads.max(1) as f64
    }

    /// With 1,000 database reads or more, fewer than 0.1 device reads per database read: the
    /// reads were served from memory (page cache or the database's own cache).
    pub fn served_from_memory(&self) -> bool {
        self.db_reads >= 1000 && self.ratio() < 0.1
    }
}

/// Only for a traced step whose client read.
pub(crate) fn storage_bound(step: &StepData) -> Option<StorageBound> {
    let trace = step.trace.as_ref()?;
    let db_reads: u64 = ["READ", "SCAN"]
        .iter()
        .filter_map(|s| step.summary.series.get(*s))
        .map(|s| s.count)
        .sum();
    if db_reads == 0 {
        return None;
    }
    let (device_reads, device_read_bytes) = trace.op_totals("read");
    let samples = step
        .sys
        .as_ref()
        .map(|s| &s.samples[..])
        .unwrap_or_default();
    let cached: Vec<u64> = samples.iter().map(|s| s.mem.cached_bytes).collect();
    Some(StorageBound {
        db_reads,
        device_reads,
        device_read_bytes,
        page_cache_mean_bytes: (!cached.is_empty())
            .then(|| cached.iter().sum::<u64>() as f64 / cached.len() as f64),
        page_cache_max_bytes: cached.iter().copied().max(),
        memory_bytes: step
            .sys
            .as_ref()
            .map(|s| s.host.mem_total_bytes)
            .filter(|m| *m > 0),
    })
}

/// The finding: with ≥ 1,000 database reads, fewer than 0.1 device reads per database read
/// means the reads were served from memory (page cache or the database's own cache).
pub(super) fn findings(s: &StorageBound) -> Vec<String> {
    if !s.served_from_memory() {
        return Vec::new();
    }
    let gib = |b: f64| b / (1u64 << 30) as f64;
    let memory = match (s.page_cache_mean_bytes, s.memory_bytes) {
        (Some(c), Some(m)) => format!(
            " (page cache {:.1} GiB on average of {:.1} GiB memory)",
            gib(c),
            gib(m as f64)
        ),
        _ => String::new(),
    };
    vec![format!(
        "Not storage-bound: {:.3} device reads per database read ({} device reads for {} \
         database reads): the reads were mostly served from memory{memory}. To test storage, \
         make the dataset larger than memory, or read directly with a small database cache.",
        s.ratio(),
        crate::doc::thousands(s.device_reads as f64),
        crate::doc::thousands(s.db_reads as f64),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(db_reads: u64, device_reads: u64) -> StorageBound {
        StorageBound {
            db_reads,
            device_reads,
            device_read_bytes: device_reads * 4096,
            page_cache_mean_bytes: Some(3.0 * (1u64 << 30) as f64),
            page_cache_max_bytes: Some(3 << 30),
            memory_bytes: Some(16 << 30),
        }
    }

    #[test]
    fn reads_served_from_memory_are_said_so() {
        let f = findings(&sb(100_000, 500));
        assert_eq!(f.len(), 1);
        assert!(
            f[0].starts_with("Not storage-bound: 0.005 device reads per database read (500 device reads for 100,000 database reads)"),
            "{}",
            f[0]
        );
        assert!(f[0].contains("page cache 3.0 GiB on average of 16.0 GiB memory"));
    }

    #[test]
    fn storage_bound_or_too_few_reads_say_nothing() {
        assert!(
            findings(&sb(100_000, 10_000)).is_empty(),
            "0.1 per read is storage"
        );
        assert!(findings(&sb(999, 0)).is_empty(), "too few reads to tell");
        assert!((sb(200, 300).ratio() - 1.5).abs() < 1e-12);
    }
}
