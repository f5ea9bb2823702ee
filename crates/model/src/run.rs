//! `run.json` and the per-step summaries: the configuration, the environment and the results of
//! one `iodig run` or `iodig load` invocation.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The root document of a run directory (`run.json`), rewritten atomically after every step.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunDoc {
    /// The [`crate::SCHEMA_VERSION`] it was written in; readers refuse versions they do not read
    /// ([`crate::reading::check_schema`]).
    pub schema_version: u32,
    /// The iodig that wrote the run, and the command line it was given.
    pub tool: ToolInfo,
    /// Unix time in milliseconds when the run started.
    pub started_unix_ms: u64,
    /// Unix time in milliseconds of the last update of this file.
    pub updated_unix_ms: u64,
    /// `running`, `completed`, `interrupted` (Ctrl-C / SIGTERM), `failed`, or `killed` (its
    /// iodig was gone while it said `running`; see [`crate::reading`]).
    pub status: String,
    /// What was asked for: enough to repeat the run, given the secrets again.
    pub config: RunConfig,
    /// The machine and the storage under the data directory, as found when the run started.
    pub environment: Environment,
    /// Steps in the order they ran (the load step first when there was one).
    pub steps: Vec<StepSummary>,
    /// Notes the user should read with the results (fallbacks, normalised proportions, …).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The database's nodes: ownership and versions from the database, the hosts observed over
    /// SSH; absent for an embedded database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::cluster::ClusterDoc>,
    /// The iodig process writing the run, so a reader can tell a run still going from a killed
    /// one. Absent in runs of older iodig versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<crate::writer::Writer>,
    /// The read-back of every acknowledged versioned write (`versionedwrites`), when checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity: Option<crate::integrity::IntegrityDoc>,
}

/// The program that wrote a run (`run.json`'s `tool`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolInfo {
    /// Always `iodig`.
    pub name: String,
    /// Its version (`0.1.0`), named when a reader refuses the file's schema version.
    pub version: String,
    /// The command line as typed, secret values replaced by `***` ([`crate::secret`]).
    pub command_line: Vec<String>,
    /// Git revision the binary was built from (`-modified`: the tree differed from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// Everything needed to repeat the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunConfig {
    /// Binding name (`rocksdb`, `basic`, `cassandra`).
    pub db: String,
    /// Workload files given with `-P`, in order.
    pub property_files: Vec<String>,
    /// The effective properties after files, `-p` overrides and iodig's defaults, secret
    /// values replaced by `***` ([`crate::secret`]).
    pub properties: BTreeMap<String, String>,
    /// Thread counts of the sweep.
    pub threads: Vec<u64>,
    /// Target rate in ops/s for the whole client (YCSB's `-target`); none = as fast as possible.
    pub target_ops_per_sec: Option<f64>,
    /// Unmeasured warm-up per step, in seconds.
    pub warmup_secs: f64,
    /// Seed of every random generator; the same seed and thread count repeat the op sequence.
    pub seed: u64,
    /// Trace mode asked for (`auto`, `ebpf`, `diskstats`, `off`).
    pub trace: String,
    /// The sweep's stop rule (`--stop-when`, e.g. `read.p99 > 50ms`), when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_when: Option<String>,
    /// The configuration's name (`--label`, an experiment file's `label`), e.g. `Micron 9300`:
    /// how `iodig compare` and `iodig report` name the run; none names it by its directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// Why `label` cannot name a run, or `Ok`: a label is shown in titles, table headers, chart
/// legends and CSV files, so it must say something (not empty or blank) and stay on one line
/// (no control characters: a newline or escape would break the tables and the terminal).
pub fn check_label(label: &str) -> Result<(), String> {
    if label.trim().is_empty() {
        return Err(
            "a label must name the configuration (e.g. \"Micron 9300\"); it is empty".into(),
        );
    }
    if let Some(c) = label.chars().find(|c| c.is_control()) {
        return Err(format!(
            "a label must be one line of text; it holds the control character {c:?}"
        ));
    }
    Ok(())
}

/// The machine and storage the run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// The machine's name (`/proc/sys/kernel/hostname`); empty when unreadable.
    pub hostname: String,
    /// Kernel release (`/proc/sys/kernel/osrelease`, e.g. `6.1.0-18-amd64`).
    pub kernel: String,
    /// The operating system as `/etc/os-release` names it (`AlmaLinux 8.7 (Stone Smilodon)`);
    /// absent when unreadable (and in run.json files from before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// The first `model name` of /proc/cpuinfo; empty where it has none (many ARM machines).
    pub cpu_model: String,
    /// CPUs iodig could use (CPU affinity and cgroup quota applied); 0 when unknown.
    pub cpus: u64,
    /// Physical memory (`MemTotal` of /proc/meminfo) in bytes; 0 when unreadable.
    pub memory_bytes: u64,
    /// The database's data directory, when it is local.
    pub data_dir: Option<String>,
    /// The mount and disk holding `data_dir`; none without a local data directory or when its mount
    /// could not be found.
    pub storage: Option<StorageInfo>,
    /// Kernel settings that shape storage IO, as read from /proc/sys/vm and /sys/kernel/mm:
    /// `vm.dirty_ratio`, `vm.dirty_background_ratio`, `vm.dirty_bytes`,
    /// `vm.dirty_background_bytes`, `vm.dirty_expire_centisecs`,
    /// `vm.dirty_writeback_centisecs`, `vm.swappiness`, `transparent_hugepage.enabled`,
    /// `transparent_hugepage.defrag`; a key is absent when it could not be read (and in run.json
    /// files from before it was kept).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_settings: BTreeMap<String, String>,
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`): an observed host with the
    /// same one is this machine, so the report can tell client and server machines apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// The database and its version as it reported them (`RocksDB 10.4.2`, `Apache Cassandra
    /// 5.0.2`); absent when it could not tell (and in run.json files from before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_version: Option<String>,
}

/// The file system and block device under the data directory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageInfo {
    /// Mount point of the file system holding the data directory.
    pub mount_point: String,
    /// File system type (`ext4`, `xfs`, …).
    pub fs_type: String,
    /// The mount's source as /proc/self/mountinfo gives it (`/dev/nvme0n1p2`, `/dev/mapper/…`).
    pub source: String,
    /// Whole-disk block device name (e.g. `nvme0n1`, `vda`), when one could be resolved.
    pub device: Option<String>,
    /// `MAJ:MIN` of that whole disk.
    pub dev_t: Option<String>,
    /// The whole disk's `device/model` in sysfs; none when it reports none (virtio disks).
    pub model: Option<String>,
    /// `queue/rotational`: true for a spinning disk (a virtual disk may say either).
    pub rotational: Option<bool>,
    /// `queue/scheduler` as read: the schedulers on offer, the active one in brackets, e.g.
    /// `none [mq-deadline] kyber`.
    pub scheduler: Option<String>,
    /// Fields below: none in run.json files from before they were kept.
    /// The drive's firmware revision (`device/firmware_rev`, `device/rev`), when it tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<String>,
    /// Capacity of the whole disk in bytes (`size` × 512).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    /// Mount options of the file system (`rw,relatime,…` from /proc/self/mountinfo, the mount's
    /// own then the super block's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_options: Option<String>,
    /// Read-ahead of the whole disk in KiB (`queue/read_ahead_kb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ahead_kb: Option<u64>,
    /// Requests the block layer may queue for the disk, per hardware queue (`queue/nr_requests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nr_requests: Option<u64>,
    /// `write back` or `write through` (queue/write_cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_cache: Option<String>,
    /// Members of an md or dm device (its `slaves`), each with its model when known:
    /// `nvme0n1 (Samsung PM1733)`; empty for a plain disk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    /// Whether the device reports its own latency statistics, and why not when it does not:
    /// e.g. `not available: vda is not an NVMe device`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_latency_stats: Option<String>,
}

/// One step's result as stored in `run.json`; the step directory holds the details.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepSummary {
    /// Position in the run, from 0.
    pub index: usize,
    /// `load` or `run`.
    pub phase: String,
    /// Directory of the step's files, relative to the run directory.
    pub dir: String,
    /// Workload label (`workloada`, …).
    pub workload: String,
    /// Worker threads (YCSB's `-threads`) of this step.
    pub threads: u64,
    /// Target rate of the whole client in ops/s (YCSB's `-target`); none = as fast as possible.
    pub target_ops_per_sec: Option<f64>,
    /// Unix time (ms) when measurement started (after warm-up).
    pub started_unix_ms: u64,
    /// Measured wall time in ms (YCSB's `[OVERALL], RunTime(ms)`).
    pub runtime_ms: u64,
    /// Operations done in the measured window, failed ones included (as YCSB counts them).
    pub operations: u64,
    /// `operations` per second of `runtime_ms` (YCSB's `[OVERALL], Throughput(ops/sec)`); 0 when
    /// the runtime is 0.
    pub throughput_ops_per_sec: f64,
    /// True when Ctrl-C, SIGTERM or a fatal error ended the step early.
    pub interrupted: bool,
    /// Latency summaries by series name (`READ`, `UPDATE`, `READ-FAILED`, `Intended-READ`, …).
    pub series: BTreeMap<String, SeriesSummary>,
    /// Return codes by op name then status name (`READ` → `OK` → 1234).
    pub returns: BTreeMap<String, BTreeMap<String, u64>>,
    /// How the block IO underneath was observed (`ebpf`, `diskstats`, `off`), and why.
    #[serde(default)]
    pub trace_mode: Option<String>,
    /// Why the trace ran in that mode when it is not the one asked for (the trace's `note`).
    #[serde(default)]
    pub trace_note: Option<String>,
    /// CPU time (user + system, seconds) iodig's own process used in the measured window
    /// (samplers included; an embedded database too): the client's cost, so `client_cpu_s / operations` says whether the client could be the
    /// bottleneck. Absent in merged steps and older runs.
    #[serde(default)]
    pub client_cpu_s: Option<f64>,
    /// Each observed host's part of the step: its files, its clock against this machine's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<crate::cluster::NodeStep>,
    /// Set on the step that met the run's stop rule (`config.stop_when`): its workload's sweep
    /// ended there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_stop: Option<SweepStop>,
    /// Why the step ended before its time when the database became unusable (every operation
    /// failing for `unusableafter` seconds); the run goes on with the next step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_early: Option<String>,
    /// Reads each database node served from its own storage engine in the measured window,
    /// by node IP (Cassandra's per-node `system_views.local_read_latency` and
    /// `local_scan_latency` counts for the benchmark's table, read at the window's start and
    /// end): what a node's device reads are set against. Empty for a database without nodes;
    /// a node whose count could not be read is left out, with why in `node_reads_notes`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_reads: BTreeMap<String, u64>,
    /// See `node_reads`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_reads_notes: Vec<String>,
}

/// Why a workload's thread sweep ended at a step, and what it left out, as the briefs stop
/// testing a drive "due to unreasonably high read latency".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepStop {
    /// The rule with what the step measured, e.g. `read.p99 62.3 ms > 50 ms`.
    pub reason: String,
    /// Thread counts of the workload's sweep that were not run because of it.
    pub skipped: Vec<u64>,
}

impl StepSummary {
    /// Client CPU per operation in µs, when measured.
    pub fn client_cpu_us_per_op(&self) -> Option<f64> {
        self.client_cpu_s
            .filter(|_| self.operations > 0)
            .map(|s| s * 1e6 / self.operations as f64)
    }
}

/// Latency distribution of one series, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesSummary {
    /// Operations recorded.
    pub count: u64,
    /// Mean latency in µs.
    pub mean_us: f64,
    /// Lowest latency in µs.
    pub min_us: u64,
    /// Highest latency in µs.
    pub max_us: u64,
    /// Median latency in µs.
    pub p50_us: u64,
    /// 90th percentile latency in µs.
    pub p90_us: u64,
    /// 95th percentile latency in µs.
    pub p95_us: u64,
    /// 99th percentile latency in µs.
    pub p99_us: u64,
    /// 99.9th percentile latency in µs.
    pub p999_us: u64,
    /// 99.99th percentile latency in µs.
    pub p9999_us: u64,
}

/// One second of client measurements (a line of `timeseries.jsonl.gz` in a step directory).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the step's measurement start (end of the interval).
    pub t: f64,
    /// Unix time in ms at the end of the interval: the clock shared with traces and samplers.
    pub unix_ms: u64,
    /// Length of the interval in seconds (1 except for the last one).
    pub secs: f64,
    /// All operations completed in the interval.
    pub operations: u64,
    /// `operations` over `secs`; 0 for an interval of no length.
    pub ops_per_sec: f64,
    /// Per-series figures for the interval.
    pub series: BTreeMap<String, SeriesSummary>,
}

/// The files of a step directory, by role.
pub mod files {
    /// The root document at the top of the run directory ([`crate::RunDoc`]).
    pub const RUN: &str = "run.json";
    /// The step's [`crate::StepSummary`]; written last, so a step directory that has it is whole.
    pub const STEP_SUMMARY: &str = "summary.json";
    /// The client's per-second samples ([`crate::Sample`]), one a line, gzip; schema 1 wrote
    /// `timeseries.json` ([`crate::series`] reads both).
    pub const TIMESERIES: &str = crate::series::TIMESERIES;
    /// Whole-step HDR histograms per series ([`crate::StepHistograms`]).
    pub const HISTOGRAMS: &str = "histograms.json";
    /// Schema 1's HdrHistogram interval log: one tagged histogram per series per second, in µs;
    /// schema 2 writes it gzip-compressed as `latency.hlog.gz` ([`crate::series::read_hlog`]).
    pub const HDR_LOG: &str = "latency.hlog";
    /// The same histograms keyed by the second each operation started in (not ended), written
    /// whole by schema 1 and by merges (gzip in schema 2: `latency-by-start.hlog.gz`); a run
    /// step writes [`HDR_SHIFT_LOG`] instead, from which readers rebuild it.
    pub const HDR_START_LOG: &str = "latency-by-start.hlog";
    /// What turns [`HDR_LOG`] into [`HDR_START_LOG`]: the operations that started in one
    /// interval and ended in another, as an interval log (`latency-start-shift.hlog.gz`;
    /// `iodig_stats::for_each_start_interval_in` rebuilds the log by start from both).
    pub const HDR_SHIFT_LOG: &str = "latency-start-shift.hlog";
    /// Every traced IO of the step, one CSV line each (`run --events`, eBPF only).
    pub const IO_EVENTS: &str = "io-events.csv";
    /// YCSB's summary text, as printed on stdout.
    pub const YCSB_TEXT: &str = "ycsb.txt";
    /// Schema 1's block-IO trace of the measured window ([`crate::trace::TraceDoc`]), its series
    /// inline; schema 2 writes `trace.json.gz` and the series beside it ([`crate::series`]).
    pub const TRACE: &str = "trace.json";
    /// System samples of the step ([`crate::sys::SysDoc`]); since schema 2 without the samples,
    /// which [`crate::series`] keeps beside it.
    pub const SYSSTAT: &str = "sys.json";
    /// The traced disks' own statistics before and after the step, or why there are none
    /// ([`crate::device_stats::DeviceStatsDoc`]).
    pub const DEVICE_STATS: &str = "device-stats.json";
    /// The database's flushes, compactions and file deletions, and faults injected
    /// ([`crate::events::DbEvent`]), as a JSON array: what earlier versions wrote; steps now
    /// write `db-events.jsonl.gz` ([`crate::series::EVENTS`], read alike by
    /// [`crate::series::read_events`]).
    pub const EVENTS: &str = "db-events.json";
    /// The database's JVMs' stop-the-world pauses over the step
    /// ([`crate::jvm::JvmPausesDoc`]); absent for a database that is not a JVM.
    pub const JVM_PAUSES: &str = "jvm-pauses.json";
    /// The client's latency per coordinator node, op and second
    /// ([`crate::by_node::ClientByNodeDoc`]); absent for a binding that names no node.
    pub const CLIENT_BY_NODE: &str = "client-by-node.json";
    /// In a merged step: each client's part ([`super::ClientStep`]).
    pub const CLIENTS: &str = "clients.json";
}

/// One client's part of a merged step (`clients.json`, written by `iodig merge` and
/// `run --clients`): where its own trace, system samples, events and observed nodes are kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientStep {
    /// The client's number: I of `--client I/N` with `--clients`, else its place in the list.
    pub client: u64,
    /// The host it ran on, when iodig started it there (`--clients`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Its run directory as it was merged.
    pub run: String,
    /// Directory of its files in the merged run, relative to the run directory.
    pub dir: String,
    /// Start of its measured window (unix ms).
    pub started_unix_ms: u64,
    /// Its measured wall time in ms.
    pub runtime_ms: u64,
    /// Its operations in the measured window, failed ones included.
    pub operations: u64,
    /// How it observed the block IO (`ebpf`, `diskstats`, `off`); none when it traced nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_mode: Option<String>,
    /// The files kept under `dir` (`trace.json`, `sys.json`, `db-events.json`, `nodes/…`).
    pub files: Vec<String>,
}

/// Whole-run histograms of one step (`histograms.json`): HDR V2 deflate, base64, per series, so
/// steps, repetitions and clients merge exactly.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StepHistograms {
    /// Unit of the recorded values: `us` (microseconds).
    pub unit: String,
    /// By YCSB series name, the whole step's histogram: HDR V2 deflate encoding, base64.
    pub series: BTreeMap<String, String>,
}

/// The operation types measured, with YCSB's series names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// `READ`: one record read by key.
    Read,
    /// `UPDATE`: fields of an existing record written.
    Update,
    /// `INSERT`: a new record written.
    Insert,
    /// `SCAN`: records read in key order from a start key.
    Scan,
    /// `READ-MODIFY-WRITE`: a read then an update of the same record, timed as one operation.
    ReadModifyWrite,
    /// `DELETE`: one record removed.
    Delete,
    /// Data-integrity check of a read (`dataintegrity=true`), as YCSB's `VERIFY`.
    Verify,
    /// Per-worker cleanup, as YCSB's `CLEANUP`.
    Cleanup,
}

impl OpKind {
    /// Every kind, in the order of [`OpKind::index`].
    pub const ALL: [OpKind; 8] = [
        OpKind::Read,
        OpKind::Update,
        OpKind::Insert,
        OpKind::Scan,
        OpKind::ReadModifyWrite,
        OpKind::Delete,
        OpKind::Verify,
        OpKind::Cleanup,
    ];

    /// YCSB's name for the series (`[READ]`, `[READ-MODIFY-WRITE]`, …).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "READ",
            OpKind::Update => "UPDATE",
            OpKind::Insert => "INSERT",
            OpKind::Scan => "SCAN",
            OpKind::ReadModifyWrite => "READ-MODIFY-WRITE",
            OpKind::Delete => "DELETE",
            OpKind::Verify => "VERIFY",
            OpKind::Cleanup => "CLEANUP",
        }
    }

    /// Position in [`OpKind::ALL`], for arrays indexed by kind.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Counted in `[OVERALL]` operations and throughput (YCSB counts workload ops, not the
    /// inner read/update of a read-modify-write, nor verification or cleanup).
    pub fn is_workload_op(self) -> bool {
        !matches!(self, OpKind::Verify | OpKind::Cleanup)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_from_before_the_configuration_fields_still_reads() {
        let old = r#"{"hostname":"h","kernel":"6.1","cpu_model":"c","cpus":2,
            "memory_bytes":1024,"data_dir":"/d","storage":{"mount_point":"/","fs_type":"ext4",
            "source":"/dev/vda","device":"vda","dev_t":"254:0","model":null,
            "rotational":false,"scheduler":"none"}}"#;
        let e: Environment = serde_json::from_str(old).unwrap();
        let s = e.storage.as_ref().unwrap();
        assert_eq!((s.firmware.as_ref(), s.capacity_bytes), (None, None));
        assert!(s.members.is_empty() && e.kernel_settings.is_empty());
        // Written back, absent facts stay absent.
        let back = serde_json::to_string(&e).unwrap();
        assert!(!back.contains("kernel_settings") && !back.contains("firmware"));
    }

    #[test]
    fn labels_are_one_line_of_text() {
        assert_eq!(check_label("Micron 9300 NVMe"), Ok(()));
        assert_eq!(check_label("Solidigm D5-P5316 · xfs"), Ok(()));
        assert!(check_label("").unwrap_err().contains("empty"));
        assert!(check_label("  ").unwrap_err().contains("empty"));
        for bad in ["a\nb", "tab\there", "esc\u{1b}[31m"] {
            assert!(
                check_label(bad).unwrap_err().contains("control character"),
                "{bad:?}"
            );
        }
    }
}
