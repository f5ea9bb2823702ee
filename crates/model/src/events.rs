//! Database events on the run's time line (`db-events.jsonl.gz` in a step directory): memtable
//! flushes, compactions and file deletions, from Cassandra's logs or RocksDB's LOG.

use serde::{Deserialize, Serialize};

/// One database event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DbEvent {
    /// `flush`, `compaction`, `file_deletion`, a write `stall` (RocksDB), a `gc` its log reported
    /// (Cassandra's GCInspector), or one of iodig's own `fault`s.
    pub kind: String,
    /// When the event began (unix ms); an instant event's only time.
    pub start_unix_ms: u64,
    /// None while the event has not finished (or its end is not in the log); instant events
    /// have `end == start`.
    pub end_unix_ms: Option<u64>,
    /// Bytes written: the flushed table size, or a compaction's output size.
    pub bytes: Option<u64>,
    /// Node address, or `local` for an embedded database.
    pub node: String,
    /// Table and what the log said (flush reason, compaction input, …).
    pub detail: String,
}
