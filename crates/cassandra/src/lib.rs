//! Real local Apache Cassandra nodes for iodig: find or fetch the distribution, start N nodes on
//! 127.0.0.1 … 127.0.0.N, wait until they accept CQL, report their status, stop exactly the
//! processes started (by pid), snapshot and restore a loaded dataset, and read memtable-flush and
//! compaction events from their logs.
//!
//! Everything a later command needs is kept in a state file in the node directory
//! ([`STATE_FILE`]), so `up`, `status`, `down` and `restore` can be separate processes.
//!
//! This file holds what every part shares (the ports, what `up` starts) and the crate's face;
//! the parts: `state` (the state file), `lifecycle` (up, restart, down), `status` (nodetool's
//! table), `snapshot` (snapshot and restore), `error`.

pub mod dist;
mod error;
pub mod events;
mod fault;
pub mod host_snapshot;
mod isolate;
mod lifecycle;
pub mod local;
mod nodetool;
mod ports;
mod proc;
mod snapshot;
mod state;
mod status;
pub mod tls;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use dist::{Distribution, DEFAULT_VERSION};
pub use error::{Error, Result};
pub use events::DbEvent;
pub use fault::{inject, NodeFault};
pub use isolate::{await_all_up, isolate, thaw, Isolated};
pub use lifecycle::{down, restart, up, Guard, Stopped};
pub use nodetool::NodeStatus;
pub use snapshot::{restore, snapshot};
pub use state::{Cluster, NodeInfo};
pub use status::status;

/// Name of the state file `up` writes into the node directory.
pub const STATE_FILE: &str = "iodig-cassandra.json";

/// CQL port of every node (each node has its own loopback address, so the port is shared).
pub const CQL_PORT: u16 = 9042;

/// Inter-node (gossip, streaming) port of every node.
pub const STORAGE_PORT: u16 = 7000;

/// The main class a node runs; also how a port's holder is recognized as a node.
pub(crate) const DAEMON_CLASS: &str = "org.apache.cassandra.service.CassandraDaemon";

/// JMX port of node 1; node i uses `JMX_BASE_PORT + i - 1` because local JMX binds to 127.0.0.1
/// for every node.
pub const JMX_BASE_PORT: u16 = 7199;

/// What `up` starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpOptions {
    /// Number of nodes, on 127.0.0.1 … 127.0.0.N.
    pub nodes: u32,
    /// JVM heap per node (`-Xms`/`-Xmx`), as java spells it: `1G`, `2048M`.
    pub heap: String,
    /// Directory holding every node's data, commit log, caches, hints, cdc and logs.
    pub dir: PathBuf,
    /// Cassandra version resolved from Maven Central when `$CASSANDRA_HOME` is not set.
    pub cassandra_version: String,
    /// Virtual nodes per node (`num_tokens`); the briefs use 256, Cassandra 5's default is 16.
    pub num_tokens: u32,
    /// Enable `PasswordAuthenticator` (default superuser `cassandra`/`cassandra`).
    pub password_auth: bool,
    /// Serve CQL over TLS only, with a certificate from a local CA (see [`tls`]).
    #[serde(default)]
    pub tls: bool,
    /// How long to wait for each node to accept CQL.
    pub ready_timeout: Duration,
    /// `memtable_heap_space` as cassandra.yaml spells it (`16MiB`); none keeps Cassandra's
    /// default (a quarter of the heap). Small memtables flush, and so compact, within a short
    /// step: the briefs' flush bursts in seconds instead of minutes.
    #[serde(default)]
    pub memtable_space: Option<String>,
}

impl Default for UpOptions {
    fn default() -> Self {
        Self {
            nodes: 1,
            heap: "1G".into(),
            dir: PathBuf::from("cassandra-nodes"),
            cassandra_version: DEFAULT_VERSION.into(),
            num_tokens: 16,
            password_auth: false,
            tls: false,
            ready_timeout: Duration::from_secs(300),
            memtable_space: None,
        }
    }
}

/// Memtable flushes and compactions of every managed node, read from its logs, in start order.
/// `since_unix_ms` keeps only events that started at or after that time (one step's window).
pub fn events(dir: &Path, since_unix_ms: Option<u64>) -> Result<Vec<DbEvent>> {
    let cluster = Cluster::load(dir)?;
    let mut all = Vec::new();
    for node in &cluster.nodes {
        all.extend(events::read_node_logs(&node.log_dir(), &node.address)?);
    }
    if let Some(since) = since_unix_ms {
        all.retain(|e| e.start_unix_ms >= since);
    }
    all.sort_by(|a, b| {
        a.start_unix_ms
            .cmp(&b.start_unix_ms)
            .then_with(|| a.node.cmp(&b.node))
    });
    Ok(all)
}
