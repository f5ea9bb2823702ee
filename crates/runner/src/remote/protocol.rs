//! What iodig and its observer on another host say to each other over the SSH channel: one JSON
//! object per line, requests on the agent's stdin, replies on its stdout (its stderr carries
//! notes for the user). Closing stdin ends the agent and detaches everything it attached.

use iodig_model::cluster::{HostNode, NodeObservation};
use serde::{Deserialize, Serialize};

/// From iodig to the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Reply with the host's clock at once.
    Clock,
    /// Load the tracer before a step (the slow part), without attaching it yet.
    Prepare,
    /// Start the tracer (attaching what was prepared) and the sampler: measurement starts.
    Start,
    /// `--drop-caches`: empty the host's page cache now.
    DropCaches,
    /// Stop them; events of the node since the time come with the results.
    Stop {
        /// Start of the step's window, warm-up included (Unix ms).
        since_unix_ms: u64,
    },
    /// `--restore-each-step`, before the run starts: can the node's dataset be snapshotted,
    /// and the node stopped and started again as it was? Answered by
    /// [`Reply::RestoreReady`] or an [`Reply::Error`] saying why not.
    RestoreCheck {
        /// What the database calls the dataset (Cassandra's keyspace).
        dataset: String,
    },
    /// After the load: snapshot the dataset on the running node ([`Reply::SnapshotTaken`]).
    Snapshot {
        /// The dataset (keyspace).
        dataset: String,
        /// The snapshot's name.
        tag: String,
    },
    /// Before a run step: stop the node, put snapshot `tag` back, start the node again as it
    /// was and wait until it serves ([`Reply::Restored`]).
    Restore {
        /// The dataset (keyspace).
        dataset: String,
        /// The snapshot's name.
        tag: String,
    },
}

/// From the agent to iodig.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// First line after start: who and what the agent is.
    Hello(Box<Hello>),
    /// The answer to [`Request::Clock`].
    Clock {
        /// The host's wall clock, in ns since the Unix epoch.
        unix_ns: u64,
    },
    /// The tracer is loaded (or could not be: the error comes with the step's results).
    Prepared,
    /// Measurement started on the host.
    Started {
        /// The trace mode that runs: `ebpf`, `diskstats` or `off`.
        mode: String,
    },
    /// Measurement stopped: the host's trace, samples and the node's events.
    Stopped(Box<NodeObservation>),
    /// The page cache was dropped: its size before and after, bytes.
    CachesDropped {
        /// `Cached` before, bytes.
        before: u64,
        /// `Cached` after, bytes.
        after: u64,
    },
    /// A request the agent could not do, said plainly.
    Error(String),
    /// The answer to [`Request::RestoreCheck`]: how the snapshot and restore will be done.
    RestoreReady {
        /// In words, for the user.
        how: String,
    },
    /// The answer to [`Request::Snapshot`].
    SnapshotTaken {
        /// What the snapshot holds, in words.
        detail: String,
    },
    /// The answer to [`Request::Restore`]: the node runs again on the snapshot.
    Restored {
        /// The node's new pid.
        pid: u32,
        /// From the stop to serving again on the host, ms.
        took_ms: u64,
        /// What was done, in words.
        detail: String,
    },
}

/// The agent's introduction.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Hello {
    /// iodig version and git revision the agent runs.
    pub version: String,
    /// Git revision of its binary, when known.
    pub revision: Option<String>,
    /// From /proc/sys/kernel/hostname; empty when unreadable.
    pub hostname: String,
    /// The kernel's boot id: hosts that share one (containers) share their devices' IO.
    pub boot_id: String,
    /// Runs as root: eBPF tracing is possible; otherwise block IO comes from diskstats.
    pub root: bool,
    /// The database node found on the host.
    pub node: Option<HostNode>,
    /// Devices it will trace.
    pub devices: Vec<String>,
    /// Fallbacks, one line each (no node found, diskstats instead of eBPF, …).
    pub notes: Vec<String>,
    /// The host described as iodig describes its own machine (OS, kernel, CPU, memory, the
    /// storage under the node's first data directory, kernel settings); none from an older
    /// agent.
    #[serde(default)]
    pub environment: Option<iodig_model::Environment>,
}

/// One line of JSON (no newline inside: serde_json escapes them).
pub fn line<T: Serialize>(msg: &T) -> String {
    let mut s = serde_json::to_string(msg).expect("protocol messages serialise");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_one_line_each_and_read_back() {
        for r in [
            Request::Clock,
            Request::Start,
            Request::Stop { since_unix_ms: 42 },
            Request::Restore {
                dataset: "ycsb".into(),
                tag: "iodig-loaded".into(),
            },
        ] {
            let l = line(&r);
            assert_eq!(l.matches('\n').count(), 1);
            assert_eq!(serde_json::from_str::<Request>(l.trim()).unwrap(), r);
        }
        assert_eq!(line(&Request::Clock), "{\"op\":\"clock\"}\n");
    }
}
