//! The database's nodes as a run saw them: cluster facts read from the database (ownership,
//! versions, directories), the hosts iodig observed over SSH, and each observed node's clock
//! against the client's, step by step.

use crate::events::DbEvent;
use crate::sys::SysDoc;
use crate::trace::TraceDoc;
use serde::{Deserialize, Serialize};

/// `run.json`'s `cluster`: what the database and the observed hosts said about the nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterDoc {
    /// The keyspace (or database) the ownership figures are for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyspace: Option<String>,
    /// Replication as the database states it (`SimpleStrategy rf=3`, `dc1:3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<String>,
    /// One per node of the ring, in address order.
    pub nodes: Vec<NodeFacts>,
    /// Hosts observed over SSH (`--observe`), in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed: Vec<ObservedHost>,
    /// How the facts were read, and what could not be.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl ClusterDoc {
    /// Sum of the nodes' effective ownership, in percent (RF × 100 on a healthy ring).
    pub fn owns_total_pct(&self) -> f64 {
        self.nodes.iter().filter_map(|n| n.owns_pct).sum()
    }
}

/// One node as the database's own metadata describes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeFacts {
    /// The node's client (CQL) address.
    pub address: String,
    /// Data center the node is in, as the database reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datacenter: Option<String>,
    /// Rack within the data center, as the database reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// Database version the node reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Tokens (virtual nodes) it holds.
    pub tokens: u64,
    /// Effective ownership of the keyspace's data, in percent, replication included (what
    /// `nodetool status KEYSPACE` prints as "Owns (effective)").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owns_pct: Option<f64>,
}

/// A host iodig observed over SSH, and the node it found there.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ObservedHost {
    /// As given to `--observe` (`host`, `user@host`, `host:port`, an ssh_config alias); also the
    /// directory name under a step's `nodes/`.
    pub host: String,
    /// The host's own name (`uname -n`).
    pub hostname: String,
    /// The host's kernel boot id: observed hosts with the same one share one kernel and its
    /// devices, so their device totals are the same IO and only the per-node (cgroup) shares
    /// tell the nodes apart.
    pub boot_id: String,
    /// How iodig got there: the binary it ran and whether it had to send it.
    pub agent: String,
    /// The database node found on the host, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<HostNode>,
    /// Devices traced on the host.
    #[serde(default)]
    pub devices: Vec<String>,
    /// Fallbacks and limits on that host, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The host as its agent describes it (OS, kernel, CPU, memory, the storage under the
    /// node's data directory, kernel settings), as run.json's `environment` describes this
    /// machine; none from agents before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<crate::run::Environment>,
}

/// A database node found running on an observed host, from the process itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostNode {
    /// Its client address (`127.0.0.2:9042`).
    pub address: String,
    /// Process id of the node on that host.
    pub pid: u32,
    /// The cgroup its IO is charged to, relative to the IO hierarchy's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// Its data directories (cassandra.yaml's `data_file_directories`, else `<storagedir>/data`).
    pub data_dirs: Vec<String>,
    /// Its commit-log directory (`commitlog_directory`, else `<storagedir>/commitlog`); none when
    /// neither is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commitlog_dir: Option<String>,
    /// Its log directory (the JVM's `-Dcassandra.logdir`), where `debug.log` is read; none when not
    /// given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_dir: Option<String>,
    /// Bytes under the data and commit-log directories when the run started (the node's load,
    /// with what still sits in its memtables, which only the commit log holds on disk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_bytes: Option<u64>,
    /// What shapes the node's IO, as the briefs tabulate it: its configuration's memtable,
    /// commit log, compaction and concurrency settings (`memtable_heap_space`, …, `unset`
    /// when the file leaves Cassandra's default), its JVM's heap and collector (`jvm.heap`,
    /// `jvm.gc`) and its process limits (`limits.open_files`, …); empty from agents before
    /// it was kept.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub settings: std::collections::BTreeMap<String, String>,
}

/// One clock comparison with an observed host over the SSH channel: the best of a few pings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ClockSample {
    /// Host clock minus this machine's clock, in ms, at the ping with the shortest round trip.
    pub offset_ms: f64,
    /// That ping's round trip, in ms: the offset is known to ± half of it.
    pub rtt_ms: f64,
}

/// One observed host's part of a step (in `StepSummary::nodes`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeStep {
    /// The host as given to `--observe` ([`ObservedHost::host`]).
    pub host: String,
    /// Directory of its files, relative to the run directory.
    pub dir: String,
    /// The host's clock against this machine's just before the step; none when it did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_before: Option<ClockSample>,
    /// The same just after the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_after: Option<ClockSample>,
    /// Milliseconds subtracted from every timestamp of the host's files, so they are on this
    /// machine's clock; 0 when the offset is within its own uncertainty.
    pub applied_offset_ms: i64,
    /// `ebpf`, `diskstats` or `off`, as the host traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_mode: Option<String>,
    /// Why the host's data for the step is incomplete (the host or its link died), when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
    /// The first second (unix ms, on this machine's clock) the host's files lack, when its
    /// link died mid-step: they hold what its agent streamed before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_from_unix_ms: Option<u64>,
    /// What is missing from the host's part and why (a node log that cannot be read), one
    /// line each; the rest of its part stands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// What an observer on another host measured over one step, before it is written.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NodeObservation {
    /// The host's block-IO trace of the step; none when it took none (see `trace_error`).
    pub trace: Option<TraceDoc>,
    /// The host's system samples of the step; none when its sampler could not start.
    pub sys: Option<SysDoc>,
    /// The node's flushes and compactions during the step, from its own logs.
    #[serde(default)]
    pub events: Vec<DbEvent>,
    /// Why the trace is missing, when it is.
    #[serde(default)]
    pub trace_error: Option<String>,
    /// The host's traced disks' own statistics over the step (NVMe SMART / OCP latency
    /// monitor), or why each has none; none when the host took no trace, or from an agent
    /// older than them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_stats: Option<crate::device_stats::DeviceStatsDoc>,
    /// `--events`: the host's per-IO stream of the step (`io-events.csv`'s text), when the
    /// agent wrote one no larger than it sends; the trace's `events_file` then names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_events: Option<String>,
    /// What the agent could not measure of the step and why, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The node's JVM's stop-the-world pauses over the step (HotSpot's probes), or why they
    /// could not be watched; none when the node is not a JVM, the step was not traced, or
    /// from an agent older than them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jvm_pauses: Option<crate::jvm::JvmPausesDoc>,
}

impl NodeObservation {
    /// Moves every timestamp by `-delta_ms`: from the host's clock to this machine's.
    pub fn shift_to_local(&mut self, delta_ms: i64) {
        if delta_ms == 0 {
            return;
        }
        let shift = |t: &mut u64| *t = t.saturating_add_signed(-delta_ms);
        if let Some(t) = &mut self.trace {
            t.shift_clock(&shift);
        }
        if let Some(d) = &mut self.device_stats {
            let snapshots = d
                .devices
                .iter_mut()
                .flat_map(|d| [&mut d.before, &mut d.after]);
            for snapshot in snapshots.flatten() {
                shift(&mut snapshot.unix_ms);
            }
        }
        if let Some(s) = &mut self.sys {
            shift(&mut s.started_unix_ms);
            shift(&mut s.ended_unix_ms);
            for p in &mut s.processes {
                if let Some(t) = &mut p.exited_unix_ms {
                    shift(t);
                }
                for r in &mut p.restarts {
                    shift(&mut r.unix_ms);
                }
            }
            for sample in &mut s.samples {
                shift(&mut sample.unix_ms);
            }
        }
        for e in &mut self.events {
            shift(&mut e.start_unix_ms);
            if let Some(t) = &mut e.end_unix_ms {
                shift(t);
            }
        }
        if let Some(j) = &mut self.jvm_pauses {
            for p in &mut j.processes {
                shift(&mut p.started_unix_ms);
                shift(&mut p.ended_unix_ms);
                for pause in &mut p.pauses {
                    pause.start_unix_us = pause
                        .start_unix_us
                        .saturating_add_signed(-delta_ms.saturating_mul(1000));
                }
            }
        }
    }
}

/// The offset to apply from two clock samples: their mean when it is larger than its own
/// uncertainty (half the round trip), else 0, so hosts sharing this machine's clock keep their
/// timestamps exactly.
pub fn applied_offset_ms(before: Option<ClockSample>, after: Option<ClockSample>) -> i64 {
    let samples: Vec<ClockSample> = before.into_iter().chain(after).collect();
    if samples.is_empty() {
        return 0;
    }
    let n = samples.len() as f64;
    let offset = samples.iter().map(|s| s.offset_ms).sum::<f64>() / n;
    let uncertainty = samples.iter().map(|s| s.rtt_ms / 2.0).fold(0.0, f64::max);
    if offset.abs() <= uncertainty.max(1.0) {
        0
    } else {
        offset.round() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(offset_ms: f64, rtt_ms: f64) -> Option<ClockSample> {
        Some(ClockSample { offset_ms, rtt_ms })
    }

    #[test]
    fn an_offset_within_its_uncertainty_is_not_applied() {
        assert_eq!(applied_offset_ms(sample(0.4, 2.0), sample(-0.3, 1.5)), 0);
        assert_eq!(applied_offset_ms(None, None), 0);
    }

    #[test]
    fn a_real_offset_is_the_mean_of_both_samples() {
        assert_eq!(
            applied_offset_ms(sample(250.0, 2.0), sample(254.0, 3.0)),
            252
        );
        assert_eq!(applied_offset_ms(sample(-40.0, 1.0), None), -40);
    }

    #[test]
    fn shifting_moves_events_and_samples_back_to_the_local_clock() {
        let mut obs = NodeObservation {
            events: vec![DbEvent {
                kind: "flush".into(),
                start_unix_ms: 10_000,
                end_unix_ms: Some(10_500),
                bytes: None,
                node: "n".into(),
                detail: String::new(),
            }],
            sys: Some(SysDoc {
                processes: vec![crate::sys::ProcInfo {
                    exited_unix_ms: Some(11_000),
                    restarts: vec![crate::sys::ProcRestart {
                        unix_ms: 12_000,
                        pid: 7,
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        obs.shift_to_local(250);
        assert_eq!(obs.events[0].start_unix_ms, 9_750);
        assert_eq!(obs.events[0].end_unix_ms, Some(10_250));
        let node = &obs.sys.as_ref().unwrap().processes[0];
        assert_eq!(node.exited_unix_ms, Some(10_750));
        assert_eq!(node.restarts[0].unix_ms, 11_750);
    }
}
