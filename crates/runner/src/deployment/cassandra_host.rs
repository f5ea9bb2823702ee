//! The Cassandra node on the host `iodig agent` runs on (`--observe`): found from its
//! listening socket and command line, its directories, log and nodetool snapshots, through the
//! node manager (`iodig_cassandra`) alone. Apart from `cassandra.rs` so that the agent's build
//! (feature `cassandra-host`, scripts/build-agent.sh) has it without the CQL driver and OpenSSL.

use crate::remote::node::{EventFeed, NodeOnHost};
use iodig_model::cluster::HostNode;
use iodig_model::events::DbEvent;
use std::path::{Path, PathBuf};

/// A node on the host `iodig agent` runs on, found from its listening socket and command line.
struct HostCassandra(iodig_cassandra::local::LocalNode);

/// The Cassandra node at `address` (or the only one) on this host.
pub fn node_on_host(address: Option<&str>) -> Result<Box<dyn NodeOnHost>, String> {
    iodig_cassandra::local::find(address).map(|n| Box::new(HostCassandra(n)) as Box<dyn NodeOnHost>)
}

impl NodeOnHost for HostCassandra {
    fn facts(&self) -> HostNode {
        let n = &self.0;
        let path = |p: &Path| p.display().to_string();
        HostNode {
            address: n.address.clone(),
            pid: n.pid,
            cgroup: iodig_sysstat::cgroup::of_process(n.pid),
            data_dirs: n.data_dirs.iter().map(|d| path(d)).collect(),
            commitlog_dir: n.commitlog_dir.as_deref().map(path),
            log_dir: n.log_dir.as_deref().map(path),
            // The commit log too: what a node just loaded holds sits in its memtables, on
            // disk only there until flushed.
            data_bytes: Some(iodig_cassandra::local::bytes_under(&self.dirs())),
            settings: n.settings.clone(),
        }
    }

    fn dirs(&self) -> Vec<PathBuf> {
        self.0
            .data_dirs
            .iter()
            .chain(&self.0.commitlog_dir)
            .cloned()
            .collect()
    }

    fn events_since(&self, since_unix_ms: u64) -> Result<Vec<DbEvent>, String> {
        self.0.events_since(since_unix_ms)
    }

    fn follow_events(&self) -> Option<Box<dyn EventFeed>> {
        self.0
            .follow_events()
            .map(|f| Box::new(FollowedLog(f)) as Box<dyn EventFeed>)
    }

    fn restore_check(&self, pid: u32) -> Result<String, String> {
        iodig_cassandra::host_snapshot::check(&self.0, pid)
    }

    fn snapshot(&self, pid: u32, keyspace: &str, tag: &str) -> Result<String, String> {
        iodig_cassandra::host_snapshot::snapshot(&self.0, pid, keyspace, tag)
    }

    fn has_snapshot(&self, keyspace: &str, tag: &str) -> Result<(), String> {
        iodig_cassandra::host_snapshot::check_snapshot(&self.0, keyspace, tag)
    }

    fn put_back(&self, keyspace: &str, tag: &str) -> Result<String, String> {
        iodig_cassandra::host_snapshot::put_back(&self.0, keyspace, tag)
    }
}

/// A host node's log followed during a step.
struct FollowedLog(iodig_cassandra::events::LogFollower);

impl EventFeed for FollowedLog {
    fn poll(&mut self) -> Result<Vec<(u64, DbEvent)>, String> {
        self.0
            .poll()
            .map(|v| v.into_iter().map(|(i, e)| (i as u64, e)).collect())
            .map_err(|e| e.to_string())
    }
}
