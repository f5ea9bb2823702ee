//! The client's latency per coordinator node (`client-by-node.json` in a step directory):
//! which node answered the requests of each second, and how fast, so a slow second can be
//! pinned to the node that served it. Written for bindings that know their coordinator
//! (Cassandra's CQL driver); the step's per-op series stay the measurement of record.

use serde::{Deserialize, Serialize};

/// Every node's answers per op and second of one step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientByNodeDoc {
    /// What the latency is: the service time of each request, from the client's call to the
    /// driver's answer, as the op's own series (`READ`) records it.
    pub latency: String,
    /// One row per (second, node, op) with requests, in time order.
    pub seconds: Vec<NodeSecondRow>,
}

/// One node's answers to one op in one of the step's seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeSecondRow {
    /// The end of the second, unix ms, and its length in seconds: as the step's samples
    /// (`timeseries`) stamp the same second.
    pub unix_ms: u64,
    /// See `unix_ms`.
    pub secs: f64,
    /// The coordinator's address as the driver connected to it (`127.0.0.2`).
    pub node: String,
    /// The op's series (`READ`, `UPDATE`, …).
    pub op: String,
    /// Requests it answered in the second.
    pub count: u64,
    /// Their latency's median, µs.
    pub p50_us: u64,
    /// Their latency's 99th percentile, µs.
    pub p99_us: u64,
    /// The slowest of them, µs.
    pub max_us: u64,
}
