//! What iodig and its observer on another host say to each other over the SSH channel: one JSON
//! object per line, requests on the agent's stdin, replies on its stdout (its stderr carries
//! notes for the user). Closing stdin ends the agent and detaches everything it attached.

use iodig_model::cluster::{HostNode, NodeObservation};
use iodig_model::events::DbEvent;
use iodig_model::sys::{SysDoc, SysSample};
use iodig_model::trace::LiveSecond;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How often an agent sends what completed during a step ([`Reply::Chunk`]): a lost link
/// costs at most this much more than the seconds still in the tracer's hands.
pub const CHUNK_EVERY: Duration = Duration::from_secs(2);

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
    /// Sent by the agent on its own between `started` and `stopped`, every [`CHUNK_EVERY`]:
    /// what completed since its previous chunk, so a link lost mid-step keeps what arrived.
    /// Not an answer to a request: iodig takes chunks aside as they come.
    Chunk(Box<StreamChunk>),
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

/// What completed on a host since the agent's previous chunk of the step, on the host's clock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamChunk {
    /// 0 for a step's first chunk, then one more each: a gap means a chunk was lost.
    pub seq: u64,
    /// The tracer's seconds that completed (each sent once).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seconds: Vec<LiveSecond>,
    /// The sampler's document as it started (host facts, processes), without samples: in
    /// the first chunk only, so a step cut short still has a `sys.json` around its samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sys_header: Option<Box<SysDoc>>,
    /// The system samples taken since (each sent once).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<SysSample>,
    /// The node's flushes and compactions that appeared in its log or changed (one that
    /// started earlier now completed) since the previous chunk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<StreamedEvent>,
}

impl StreamChunk {
    /// Nothing completed: a quiet host sends nothing.
    pub fn is_empty(&self) -> bool {
        self.seconds.is_empty()
            && self.sys_header.is_none()
            && self.samples.is_empty()
            && self.events.is_empty()
    }
}

/// One of the node's events as it stands now; a later chunk may bring the same `id` again,
/// completed, and then replaces it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamedEvent {
    /// Stable within the step's stream.
    pub id: u64,
    /// The event as far as the log told it.
    pub event: DbEvent,
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

    #[test]
    fn a_chunk_is_one_line_and_reads_back_whole() {
        use iodig_model::trace::{DeviceSecond, LiveDevice, OpSecond};
        let second = LiveSecond {
            unix_ms: 1_700_000_001_000,
            so_far: None,
            devices: vec![LiveDevice {
                name: "vda".into(),
                second: DeviceSecond {
                    unix_ms: 1_700_000_001_000,
                    covered_ms: 1000,
                    ops: [(
                        "write".to_string(),
                        OpSecond {
                            ios: 12,
                            bytes: 49_152,
                            ..Default::default()
                        },
                    )]
                    .into(),
                    qd_max: Some(3),
                    ..Default::default()
                },
                classes: [(
                    "cassandra.flush".to_string(),
                    [("write".to_string(), (12, 49_152))].into(),
                )]
                .into(),
            }],
        };
        let chunk = StreamChunk {
            seq: 3,
            seconds: vec![second],
            sys_header: Some(Box::new(SysDoc {
                interval_ms: 1000,
                notes: vec!["a note\nwith a newline".into()],
                ..Default::default()
            })),
            samples: vec![SysSample {
                unix_ms: 1_700_000_002_000,
                secs: 1.0,
                ..Default::default()
            }],
            events: vec![StreamedEvent {
                id: 7,
                event: DbEvent {
                    kind: "flush".into(),
                    start_unix_ms: 1_700_000_001_500,
                    end_unix_ms: None,
                    bytes: None,
                    node: "10.0.0.1".into(),
                    detail: "ycsb.usertable".into(),
                },
            }],
        };
        let l = line(&Reply::Chunk(Box::new(chunk.clone())));
        assert_eq!(l.matches('\n').count(), 1, "{l}");
        assert!(l.starts_with("{\"chunk\":{\"seq\":3,"), "{l}");
        match serde_json::from_str::<Reply>(l.trim()).unwrap() {
            Reply::Chunk(back) => assert_eq!(*back, chunk),
            other => panic!("read back as {other:?}"),
        }
        // A quiet second's chunk carries only its number, and is not sent at all.
        let quiet = StreamChunk {
            seq: 4,
            ..Default::default()
        };
        assert!(quiet.is_empty());
        assert_eq!(
            line(&Reply::Chunk(Box::new(quiet))),
            "{\"chunk\":{\"seq\":4}}\n"
        );
    }
}
