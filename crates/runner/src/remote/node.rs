//! The database node on an observed host, as the agent sees it: what a deployment's
//! `node_on_host` finds (its facts, directories, log events) and how its dataset is snapshotted
//! and put back. The agent drives it ([`super::agent`]); the restore works on it
//! ([`super::restore`]).

use iodig_model::cluster::HostNode;
use iodig_model::events::DbEvent;
use std::path::PathBuf;

/// A database node on this host, as a deployment finds it.
pub trait NodeOnHost {
    /// What run.json records of the node: address, pid, cgroup, directories, data bytes.
    fn facts(&self) -> HostNode;
    /// Directories whose devices are traced (data, commit log).
    fn dirs(&self) -> Vec<PathBuf>;
    /// The node's flushes and compactions that started at or after the time (Unix ms), or why
    /// its log tells none.
    fn events_since(&self, since_unix_ms: u64) -> Result<Vec<DbEvent>, String>;
    /// The node's events as its log tells them from now on, read a little at a time while a
    /// step runs; none where the node's log tells none.
    fn follow_events(&self) -> Option<Box<dyn EventFeed>> {
        None
    }
    /// `--restore-each-step`: how the node's dataset will be snapshotted and put back while
    /// it runs as `pid`, or why it cannot be (a database without a restore here says so).
    fn restore_check(&self, _pid: u32) -> Result<String, String> {
        Err("iodig has no snapshot and restore for this database on an observed host".into())
    }
    /// Takes snapshot `tag` of `dataset` on the node running as `pid`: what it holds.
    fn snapshot(&self, _pid: u32, _dataset: &str, _tag: &str) -> Result<String, String> {
        Err("iodig has no snapshot for this database on an observed host".into())
    }
    /// Whether snapshot `tag` of `dataset` is there to put back, asked while the node runs.
    fn has_snapshot(&self, _dataset: &str, _tag: &str) -> Result<(), String> {
        Err("iodig has no snapshot for this database on an observed host".into())
    }
    /// With the node down: `dataset` back to snapshot `tag`, and whatever would replay later
    /// writes over it emptied; what was done.
    fn put_back(&self, _dataset: &str, _tag: &str) -> Result<String, String> {
        Err("iodig has no restore for this database on an observed host".into())
    }
}

/// A node's events followed as they are logged ([`NodeOnHost::follow_events`]).
pub trait EventFeed: Send {
    /// Events that appeared or completed since the last call, each with an id that stays the
    /// same for the same event (a completed one comes again under its id).
    fn poll(&mut self) -> Result<Vec<(u64, DbEvent)>, String>;
}

/// Finds the node of a database (`--db`) at an address (or the only one) on this host.
pub type NodeFinder = fn(&str, Option<&str>) -> Result<Box<dyn NodeOnHost>, String>;
