//! Storage-bound or not: how many device reads each database read cost, against the page
//! cache and memory the step had, so a run meant to test storage that mostly hit memory says so.

use crate::data::StepData;

/// One step's reads against the device's, with the memory that could have served them.
#[derive(Debug, Clone, PartialEq)]
pub struct StorageBound {
    /// The database reads the device reads are set against: the client's READ and SCAN
    /// operations, or on a node the reads that node served itself (see `reads_of`).
    pub db_reads: u64,
    /// Whose reads `db_reads` counts.
    pub reads_of: ReadsOf,
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
    /// On a database node: its share of the dataset and how it is known; none on the client
    /// host, whose memory is not the database's when the database runs elsewhere.
    pub node_share: Option<NodeShare>,
}

/// Whose database reads a storage-bound figure counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadsOf {
    /// The client's READ and SCAN operations: where the database is embedded, or the nodes
    /// summed (each client read served by at least one node).
    Client,
    /// The reads one node served from its own storage engine (its replica reads, from the
    /// node's own counters, `node_reads` in run.json).
    Node,
    /// A node whose own reads are not known (an older run, a count that could not be read):
    /// only the client's are, which are the whole cluster's, so no per-node ratio is told.
    NodeUnknown,
}

/// A node's share of the dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeShare {
    /// Bytes.
    pub bytes: u64,
    /// How they are known: "its data directories at the start" (measured on the host) or
    /// "25.0 % effective ownership of the 2.000 GB logical dataset".
    pub how: String,
}

/// The dataset's logical size: records × fields × field length (YCSB's defaults 10 × 100 B
/// where not set); none without a record count. Not the size on disk (compression, keys and
/// the database's own overhead change that).
pub fn logical_dataset_bytes(props: &std::collections::BTreeMap<String, String>) -> Option<u64> {
    let num = |k: &str, d: u64| {
        props
            .get(k)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(d)
    };
    let records = props.get("recordcount")?.trim().parse::<u64>().ok()?;
    Some(
        records
            .saturating_mul(num("fieldcount", 10))
            .saturating_mul(num("fieldlength", 100)),
    )
}

/// A node's share of the dataset against its memory, when both are known: whether the node
/// can hold its share in memory is what makes its reads storage-bound or not.
pub(super) fn node_share_finding(s: &StorageBound) -> Option<String> {
    let share = s.node_share.as_ref()?;
    let mem = s.memory_bytes?;
    let ratio = share.bytes as f64 / mem as f64;
    let verdict = if ratio >= 1.0 {
        format!("{ratio:.1}× its memory: its reads must reach the device")
    } else {
        format!(
            "{:.0} % of its memory: its share fits in memory, so its reads can be served from its page cache and caches",
            100.0 * ratio
        )
    };
    let reads = match s.reads_of {
        ReadsOf::NodeUnknown => {
            "; its own reads were not counted, so no device reads per read are told for it"
                .to_string()
        }
        _ => format!(
            "; {:.3} device reads per read it served ({} device reads for {} reads)",
            s.ratio(),
            crate::doc::thousands(s.device_reads as f64),
            crate::doc::thousands(s.db_reads as f64)
        ),
    };
    Some(format!(
        "Holds {:.3} GB of the dataset ({}) against {:.1} GiB of memory, {verdict}{reads}.",
        share.bytes as f64 / 1e9,
        share.how,
        mem as f64 / (1u64 << 30) as f64,
    ))
}

impl StorageBound {
    /// Device reads per database read.
    pub fn ratio(&self) -> f64 {
        self.device_reads as f64 / self.db_reads.max(1) as f64
    }

    /// With 1,000 database reads or more, fewer than 0.1 device reads per database read: the
    /// reads were served from memory (page cache or the database's own cache).
    pub fn served_from_memory(&self) -> bool {
        self.reads_of != ReadsOf::NodeUnknown && self.db_reads >= 1000 && self.ratio() < 0.1
    }
}

/// The nodes' figures as one: their device reads summed against the client's database reads
/// `client_reads` (every database read is served by at least one node), their page caches and
/// memory summed; none without a node. A node's own share of the dataset is its own, so none
/// is kept.
pub fn summed(nodes: &[StorageBound], client_reads: u64) -> Option<StorageBound> {
    nodes.first()?;
    let sum_opt = |f: &dyn Fn(&StorageBound) -> Option<f64>| -> Option<f64> {
        nodes.iter().map(f).sum::<Option<f64>>()
    };
    Some(StorageBound {
        db_reads: client_reads,
        reads_of: ReadsOf::Client,
        device_reads: nodes.iter().map(|n| n.device_reads).sum(),
        device_read_bytes: nodes.iter().map(|n| n.device_read_bytes).sum(),
        page_cache_mean_bytes: sum_opt(&|n| n.page_cache_mean_bytes),
        page_cache_max_bytes: sum_opt(&|n| n.page_cache_max_bytes.map(|b| b as f64))
            .map(|b| b as u64),
        memory_bytes: sum_opt(&|n| n.memory_bytes.map(|b| b as f64)).map(|b| b as u64),
        node_share: None,
    })
}

/// The start of the not-storage-bound finding, by which the client host's is left out when
/// the database runs elsewhere.
pub const NOT_STORAGE_BOUND: &str = "Not storage-bound";

/// Only for a traced step whose client read.
pub(crate) fn storage_bound(step: &StepData) -> Option<StorageBound> {
    let trace = step.trace.as_ref()?;
    let client_reads = client_reads(step);
    if client_reads == 0 {
        return None;
    }
    // On a node: the reads it served itself, as its own counters say.
    let (db_reads, reads_of) = match &step.place {
        crate::data::Place::Node { .. } => match step.summary.node_reads.get(&step.place.name()) {
            Some(n) => (*n, ReadsOf::Node),
            None => (client_reads, ReadsOf::NodeUnknown),
        },
        crate::data::Place::ClientHost => (client_reads, ReadsOf::Client),
    };
    let (device_reads, device_read_bytes) = trace.op_totals("read");
    let samples = step
        .sys
        .as_ref()
        .map(|s| &s.samples[..])
        .unwrap_or_default();
    let cached: Vec<u64> = samples.iter().map(|s| s.mem.cached_bytes).collect();
    Some(StorageBound {
        db_reads,
        reads_of,
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
        node_share: None,
    })
}

/// The client's READ and SCAN operations in the step.
pub(crate) fn client_reads(step: &StepData) -> u64 {
    ["READ", "SCAN"]
        .iter()
        .filter_map(|s| step.summary.series.get(*s))
        .map(|s| s.count)
        .sum()
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
    let reads = match s.reads_of {
        ReadsOf::Node => "reads it served",
        _ => "database reads",
    };
    vec![format!(
        "{NOT_STORAGE_BOUND}: {:.3} device reads per database read ({} device reads for {} \
         {reads}): the reads were mostly served from memory{memory}. To test storage, \
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
            reads_of: ReadsOf::Client,
            device_reads,
            device_read_bytes: device_reads * 4096,
            page_cache_mean_bytes: Some(3.0 * (1u64 << 30) as f64),
            page_cache_max_bytes: Some(3 << 30),
            memory_bytes: Some(16 << 30),
            node_share: None,
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
    fn a_nodes_share_is_weighed_against_its_own_memory() {
        let mut s = sb(100_000, 50_000);
        assert_eq!(node_share_finding(&s), None, "the client host has no share");
        s.node_share = Some(NodeShare {
            bytes: 32 << 30,
            how: "its data directories at the start".into(),
        });
        let f = node_share_finding(&s).unwrap();
        assert!(
            f.starts_with("Holds 34.360 GB of the dataset (its data directories at the start) against 16.0 GiB of memory, 2.0× its memory: its reads must reach the device; 0.500 device reads per read it served (50,000 device reads for 100,000 reads)"),
            "{f}"
        );
        // A node whose own reads are unknown gets no ratio, and no memory verdict of its reads.
        s.reads_of = ReadsOf::NodeUnknown;
        let f = node_share_finding(&s).unwrap();
        assert!(
            f.ends_with(
                "its own reads were not counted, so no device reads per read are told for it."
            ),
            "{f}"
        );
        s.device_reads = 0;
        assert!(!s.served_from_memory());
        s.node_share.as_mut().unwrap().bytes = 4 << 30;
        assert!(node_share_finding(&s)
            .unwrap()
            .contains("25 % of its memory: its share fits"));
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

    #[test]
    fn nodes_are_summed_against_the_clients_reads() {
        // Each node against the reads it served; the cluster against the client's.
        let (mut a, mut b) = (sb(40_000, 300), sb(50_000, 600));
        a.reads_of = ReadsOf::Node;
        b.reads_of = ReadsOf::Node;
        let s = summed(&[a, b], 90_000).unwrap();
        assert_eq!((s.db_reads, s.device_reads), (90_000, 900));
        assert_eq!(s.reads_of, ReadsOf::Client);
        assert!((s.ratio() - 0.01).abs() < 1e-12);
        assert_eq!(s.memory_bytes, Some(32 << 30));
        assert!(summed(&[], 1).is_none());
    }
}
