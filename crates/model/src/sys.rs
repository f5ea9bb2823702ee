//! System samples (CPU, memory, network, database process) stored with each step; filled in by crates/sysstat.
//!
//! One [`SysDoc`] is written per step as `sys.json`. Every [`SysSample`] covers the interval that
//! ends at `unix_ms` and lasts `secs`, the same convention as the client's per-second samples and
//! the block-IO trace, so all three join on one time axis. Units are in the field names: `_pct` is
//! percent, `_bytes` bytes, `_per_s` per second. The format is described in `docs/sysstat.md`.

use serde::{Deserialize, Serialize};

/// The system samples of one step (`sys.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SysDoc {
    /// The machine the samples were taken on.
    pub host: HostFacts,
    /// Requested sampling interval in milliseconds.
    pub interval_ms: u64,
    /// True when samples were taken on whole multiples of the interval of the wall clock, so a
    /// sample's `unix_ms` rounds to the same second as the other series' samples.
    pub aligned: bool,
    /// Unix time in ms of the baseline reading (start of the first interval).
    pub started_unix_ms: u64,
    /// Unix time in ms of the last reading (end of the last interval).
    pub ended_unix_ms: u64,
    /// The processes that were asked for, in the order of `SysSample::procs`.
    #[serde(default)]
    pub processes: Vec<ProcInfo>,
    /// One per interval, oldest first.
    pub samples: Vec<SysSample>,
    /// Why the per-CPU samples are summarised (busiest CPU, spread) rather than kept, when
    /// they are (more than [`PER_CPU_KEPT`] CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_cpu_summarised: Option<String>,
    /// Readings that failed and were skipped (a file missing from /proc, a permission), one line
    /// each, deduplicated, so a gap in the series has a stated reason.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Facts about the machine that the percentages and rates are relative to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    /// CPUs listed in /proc/stat at the start (online CPUs).
    pub cpus: u32,
    /// Physical memory (`MemTotal` of /proc/meminfo) in bytes.
    pub mem_total_bytes: u64,
    /// USER_HZ: the unit of the CPU tick counters in /proc (usually 100).
    pub clock_ticks_per_s: u64,
    /// Memory page size in bytes (usually 4096): the unit of RSS in /proc/PID/stat.
    pub page_size_bytes: u64,
    /// Interfaces summed into `NetSample::ext` at the start (every interface but `lo`).
    #[serde(default)]
    pub net_interfaces: Vec<String>,
}

/// A process that was asked to be sampled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcInfo {
    /// Who the process is, as the caller named it (`iodig`, `cassandra 127.0.0.2:9042`, `node …` on
    /// an observed host).
    pub label: String,
    /// Process id on the sampled host.
    pub pid: u32,
    /// Command name from /proc/PID/stat at the start; empty when the process was not found.
    pub comm: String,
    /// What became of it by the end of sampling.
    pub state: ProcState,
    /// Unix time in ms of the first sample that found the process gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exited_unix_ms: Option<u64>,
    /// The same program found running again under a new pid after it went (a node killed and
    /// restarted), in order; its samples from then on carry the new pid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarts: Vec<ProcRestart>,
}

/// A sampled process found running again after it went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcRestart {
    /// Unix time in ms of the first sample that found it back.
    pub unix_ms: u64,
    /// Its new process id.
    pub pid: u32,
}

/// Whether a sampled process could be read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcState {
    /// Alive and readable.
    #[default]
    Running,
    /// Seen at the start, then gone: exited, a zombie, or the pid reused by another process.
    Exited,
    /// Not found when sampling started.
    Missing,
}

/// One interval of system activity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SysSample {
    /// Unix time in ms at the end of the interval (when /proc was read).
    pub unix_ms: u64,
    /// Length of the interval in seconds (measured on the monotonic clock).
    pub secs: f64,
    /// All CPUs together: each field is a percent of all CPU time in the interval (sums to 100).
    pub cpu: CpuPct,
    /// Per CPU, in /proc/stat order; empty unless per-CPU sampling was asked for, and empty in
    /// files of hosts with more than [`PER_CPU_KEPT`] CPUs, which keep [`SysSample::cpu_spread`]
    /// instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_cpu: Vec<CpuPct>,
    /// The per-CPU samples summarised (busiest CPU, spread), written in place of `per_cpu` for a
    /// host with more than [`PER_CPU_KEPT`] CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_spread: Option<CpuSpread>,
    /// Memory at the end of the interval.
    pub mem: MemSample,
    /// Network rates over the interval.
    pub net: NetSample,
    /// One per `SysDoc::processes`, same order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub procs: Vec<ProcSample>,
    /// Time in the interval during which tasks stalled for want of CPU, IO or memory, from the
    /// kernel's pressure stall information (`/proc/pressure/*`); absent on kernels without PSI
    /// and in files of iodig versions before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure: Option<Pressure>,
}

/// The kernel's pressure stall information over one interval, in ms of that interval: `some` is
/// time during which at least one task stalled, `full` time during which every non-idle task
/// did (docs/sysstat.md). Host-wide, so another process's stall counts too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Pressure {
    /// Some runnable task waited for a CPU.
    pub cpu_some_ms: f64,
    /// Some task waited for block IO.
    pub io_some_ms: f64,
    /// Every non-idle task waited for block IO at once.
    pub io_full_ms: f64,
    /// Some task waited for memory (reclaim, refaults, swap-in).
    pub memory_some_ms: f64,
}

/// The most CPUs whose samples a file keeps one by one; beyond it each sample keeps
/// [`CpuSpread`] instead, because 96 CPUs × 8 states a second is most of an hour-long step's
/// bytes and the report reads the busiest CPU and the spread, not each CPU.
pub const PER_CPU_KEPT: usize = 16;

/// One interval's per-CPU busy percentages summarised: which CPU was busiest and how far apart
/// the CPUs were, enough to see one saturated CPU (a single-threaded compaction, an IRQ bound to
/// one core) behind a low average.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSpread {
    /// The number of CPUs summarised.
    pub cpus: u32,
    /// Index (in /proc/stat order) of the busiest CPU.
    pub busiest_cpu: u32,
    /// Its busy percent ([`CpuPct::busy`]).
    pub busiest_pct: f64,
    /// The least busy CPU's busy percent.
    pub least_busy_pct: f64,
    /// The median CPU's busy percent.
    pub median_busy_pct: f64,
    /// Standard deviation of the CPUs' busy percents.
    pub stddev_busy_pct: f64,
    /// The busiest CPU's iowait percent.
    pub busiest_iowait_pct: f64,
    /// The busiest CPU's softirq percent (block and network completions).
    pub busiest_softirq_pct: f64,
}

impl CpuSpread {
    /// The spread of one interval's per-CPU samples; none when there are none.
    pub fn of(per_cpu: &[CpuPct]) -> Option<CpuSpread> {
        let (busiest_cpu, busiest) = per_cpu
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.busy().total_cmp(&b.1.busy()))?;
        let mut busy: Vec<f64> = per_cpu.iter().map(CpuPct::busy).collect();
        busy.sort_by(f64::total_cmp);
        let n = busy.len() as f64;
        let mean = busy.iter().sum::<f64>() / n;
        let var = busy.iter().map(|b| (b - mean).powi(2)).sum::<f64>() / n;
        Some(CpuSpread {
            cpus: u32::try_from(per_cpu.len()).unwrap_or(u32::MAX),
            busiest_cpu: u32::try_from(busiest_cpu).unwrap_or(u32::MAX),
            busiest_pct: busiest.busy(),
            least_busy_pct: busy[0],
            median_busy_pct: busy[busy.len() / 2],
            stddev_busy_pct: var.sqrt(),
            busiest_iowait_pct: busiest.iowait,
            busiest_softirq_pct: busiest.softirq,
        })
    }
}

/// CPU time split by state, in percent of the interval's CPU time (0–100, summing to 100).
///
/// `user` and `nice` include guest time, as the kernel counts it there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuPct {
    /// User mode, guest time included.
    pub user: f64,
    /// User mode of niced (positive nice) processes, niced guest time included.
    pub nice: f64,
    /// Kernel mode, interrupt handling excluded.
    pub system: f64,
    /// Idle with IO outstanding: not work (see [`CpuPct::busy`]), but a sign of waiting for
    /// storage.
    pub iowait: f64,
    /// Hardware interrupt handling.
    pub irq: f64,
    /// Softirq handling (network and block completions, timers).
    pub softirq: f64,
    /// Taken by the hypervisor for other guests (virtual machines only).
    pub steal: f64,
    /// Idle with no IO outstanding.
    pub idle: f64,
}

impl CpuPct {
    /// Percent of time doing work: everything except idle and iowait (iowait is idle time with
    /// IO outstanding, not work).
    pub fn busy(&self) -> f64 {
        (100.0 - self.idle - self.iowait).clamp(0.0, 100.0)
    }
}

/// Memory at the end of the interval, from /proc/meminfo, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MemSample {
    /// MemTotal: physical memory usable by the kernel.
    pub total_bytes: u64,
    /// MemFree: memory not used at all (page cache is not free).
    pub free_bytes: u64,
    /// MemAvailable: the kernel's estimate of memory usable without swapping.
    pub available_bytes: u64,
    /// Page cache (Cached), excluding buffers.
    pub cached_bytes: u64,
    /// Buffers: block-device cache, mostly file-system metadata.
    pub buffers_bytes: u64,
    /// Page cache waiting to be written back.
    pub dirty_bytes: u64,
    /// Page cache being written back right now.
    pub writeback_bytes: u64,
}

/// Network rates over the interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NetSample {
    /// Every interface but `lo`, summed.
    pub ext: NetRates,
    /// Loopback alone: a local database and its clients talk over it.
    pub lo: NetRates,
}

/// Traffic of a set of interfaces over the interval, from /proc/net/dev, per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NetRates {
    /// Bytes received per second.
    pub rx_bytes_per_s: f64,
    /// Bytes sent per second.
    pub tx_bytes_per_s: f64,
    /// Packets received per second.
    pub rx_packets_per_s: f64,
    /// Packets sent per second.
    pub tx_packets_per_s: f64,
}

/// One process over the interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcSample {
    /// As in the matching [`ProcInfo`].
    pub label: String,
    /// As in the matching [`ProcInfo`].
    pub pid: u32,
    /// Whether the process could be read in this interval.
    pub state: ProcState,
    /// Absent when the process could not be read for this interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<ProcStats>,
}

/// CPU, memory and IO of one process over one interval (/proc/PID/stat, /proc/PID/io), its children
/// not included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcStats {
    /// User CPU as percent of one CPU (all threads; 250 means two and a half CPUs), like top.
    pub cpu_user_pct: f64,
    /// System (kernel-mode) CPU as percent of one CPU, all threads.
    pub cpu_system_pct: f64,
    /// Resident set size at the end of the interval.
    pub rss_bytes: u64,
    /// Threads at the end of the interval.
    pub threads: u64,
    /// From /proc/PID/io; absent when that file is unreadable (permission, no task IO accounting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<ProcIo>,
    /// Time the process's threads spent runnable but waiting for a CPU in the interval, from
    /// the scheduler's own accounting (`/proc/PID/task/*/schedstat`, its run delay); absent
    /// when unreadable (a kernel without schedstats) and in files of older iodig versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_queue: Option<RunQueueWait>,
    /// Stop-the-world time of the process's JVM (its safepoints) that came to light in the
    /// interval, ms: from HotSpot's own probes, in a step where iodig watched them
    /// (`jvm-pauses.json` has each pause's exact times); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jvm_pause_ms: Option<f64>,
}

/// Run-queue wait of one process's threads over one interval: how long work that was ready to
/// run sat waiting for a CPU. A thread that exited inside the interval takes its last part of
/// it along (the kernel keeps no count for gone threads), so this is a floor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RunQueueWait {
    /// Summed over the threads, in ms: 400 means, for example, four threads waiting 100 ms each.
    pub wait_ms: f64,
    /// The thread that waited longest, its wait in ms.
    pub max_thread_ms: f64,
    /// Threads that waited at all in the interval.
    pub threads_waiting: u32,
}

impl ProcStats {
    /// User + system CPU, in percent of one CPU.
    pub fn cpu_pct(&self) -> f64 {
        self.cpu_user_pct + self.cpu_system_pct
    }
}

/// Process IO rates from /proc/PID/io.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcIo {
    /// Bytes the process caused to be read from storage (page-cache misses, direct IO).
    pub read_bytes_per_s: f64,
    /// Bytes the process caused to be written to storage: counted when pages are dirtied or
    /// written directly, not when writeback reaches the device.
    pub write_bytes_per_s: f64,
    /// Bytes passed to read-like syscalls, whether or not they hit storage.
    pub rchar_per_s: f64,
    /// Bytes passed to write-like syscalls.
    pub wchar_per_s: f64,
}

/// Mean (weighted by interval length) and maximum of one series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MeanMax {
    /// Mean over the samples, each weighted by its length in seconds.
    pub mean: f64,
    /// Highest sample; 0 when there was none.
    pub max: f64,
}

/// What a report shows about the system next to the benchmark figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SysSummary {
    /// Samples summarised.
    pub samples: usize,
    /// Total seconds covered by the samples.
    pub secs: f64,
    /// All-CPU busy percent (see [`CpuPct::busy`]).
    pub cpu_busy_pct: MeanMax,
    /// All-CPU iowait percent (see [`CpuPct::iowait`]).
    pub cpu_iowait_pct: MeanMax,
    /// Page cache waiting to be written back, in bytes.
    pub dirty_bytes: MeanMax,
    /// Page cache being written back, in bytes.
    pub writeback_bytes: MeanMax,
    /// One per `SysDoc::processes`, same order, over the intervals where the process was read.
    pub procs: Vec<ProcSummary>,
}

/// One sampled process over the step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcSummary {
    /// As in the matching [`ProcInfo`].
    pub label: String,
    /// As in the matching [`ProcInfo`].
    pub pid: u32,
    /// User + system CPU in percent of one CPU.
    pub cpu_pct: MeanMax,
    /// Resident set size in bytes.
    pub rss_bytes: MeanMax,
}

/// Accumulates a time-weighted mean and a maximum.
#[derive(Default)]
struct Acc {
    weighted: f64,
    secs: f64,
    max: Option<f64>,
}

impl Acc {
    fn add(&mut self, value: f64, secs: f64) {
        self.weighted += value * secs;
        self.secs += secs;
        self.max = Some(self.max.map_or(value, |m| m.max(value)));
    }

    fn get(&self) -> MeanMax {
        MeanMax {
            mean: if self.secs > 0.0 {
                self.weighted / self.secs
            } else {
                0.0
            },
            max: self.max.unwrap_or(0.0),
        }
    }
}

impl SysDoc {
    /// Mean and max of the figures a report shows. Means are weighted by interval length because
    /// the last sample of a step is usually a short partial one and must not count as a full
    /// second.
    pub fn summary(&self) -> SysSummary {
        let (mut busy, mut iowait, mut dirty, mut wb) = (
            Acc::default(),
            Acc::default(),
            Acc::default(),
            Acc::default(),
        );
        let mut procs: Vec<(Acc, Acc)> =
            self.processes.iter().map(|_| Default::default()).collect();
        for s in &self.samples {
            busy.add(s.cpu.busy(), s.secs);
            iowait.add(s.cpu.iowait, s.secs);
            dirty.add(s.mem.dirty_bytes as f64, s.secs);
            wb.add(s.mem.writeback_bytes as f64, s.secs);
            for (acc, p) in procs.iter_mut().zip(&s.procs) {
                if let Some(st) = &p.stats {
                    acc.0.add(st.cpu_pct(), s.secs);
                    acc.1.add(st.rss_bytes as f64, s.secs);
                }
            }
        }
        SysSummary {
            samples: self.samples.len(),
            secs: self.samples.iter().map(|s| s.secs).sum(),
            cpu_busy_pct: busy.get(),
            cpu_iowait_pct: iowait.get(),
            dirty_bytes: dirty.get(),
            writeback_bytes: wb.get(),
            procs: self
                .processes
                .iter()
                .zip(&procs)
                .map(|(info, acc)| ProcSummary {
                    label: info.label.clone(),
                    pid: info.pid,
                    cpu_pct: acc.0.get(),
                    rss_bytes: acc.1.get(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(secs: f64, idle: f64, iowait: f64, dirty: u64, proc_cpu: Option<f64>) -> SysSample {
        SysSample {
            unix_ms: 0,
            secs,
            cpu: CpuPct {
                user: 100.0 - idle - iowait,
                idle,
                iowait,
                ..Default::default()
            },
            mem: MemSample {
                dirty_bytes: dirty,
                writeback_bytes: dirty / 2,
                ..Default::default()
            },
            procs: vec![ProcSample {
                label: "db".into(),
                pid: 7,
                state: if proc_cpu.is_some() {
                    ProcState::Running
                } else {
                    ProcState::Exited
                },
                stats: proc_cpu.map(|c| ProcStats {
                    cpu_user_pct: c,
                    cpu_system_pct: 10.0,
                    rss_bytes: 1000,
                    ..Default::default()
                }),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn summary_weights_means_by_interval_length() {
        let doc = SysDoc {
            processes: vec![ProcInfo {
                label: "db".into(),
                pid: 7,
                ..Default::default()
            }],
            samples: vec![
                sample(1.0, 50.0, 10.0, 1000, Some(90.0)),
                sample(1.0, 70.0, 0.0, 3000, Some(190.0)),
                // A short final sample: must weigh a quarter, and the exited process must not
                // drag its mean down.
                sample(0.25, 0.0, 0.0, 5000, None),
            ],
            ..Default::default()
        };
        let s = doc.summary();
        assert_eq!(s.samples, 3);
        assert!((s.secs - 2.25).abs() < 1e-9);
        // busy: 40, 30, 100 weighted 1, 1, 0.25 → (40 + 30 + 25) / 2.25
        assert!(
            (s.cpu_busy_pct.mean - 95.0 / 2.25).abs() < 1e-9,
            "{:?}",
            s.cpu_busy_pct
        );
        assert_eq!(s.cpu_busy_pct.max, 100.0);
        assert!((s.cpu_iowait_pct.mean - 10.0 / 2.25).abs() < 1e-9);
        assert_eq!(s.dirty_bytes.max, 5000.0);
        assert!((s.dirty_bytes.mean - (1000.0 + 3000.0 + 1250.0) / 2.25).abs() < 1e-6);
        assert_eq!(s.writeback_bytes.max, 2500.0);
        assert_eq!(s.procs.len(), 1);
        assert!(
            (s.procs[0].cpu_pct.mean - 150.0).abs() < 1e-9,
            "{:?}",
            s.procs[0]
        );
        assert_eq!(s.procs[0].cpu_pct.max, 200.0);
        assert_eq!(s.procs[0].rss_bytes.max, 1000.0);
    }

    #[test]
    fn empty_doc_summary_is_zero_not_nan() {
        let s = SysDoc::default().summary();
        assert_eq!(s.cpu_busy_pct, MeanMax::default());
        assert!(s.procs.is_empty());
    }

    #[test]
    fn busy_excludes_idle_and_iowait() {
        let c = CpuPct {
            user: 30.0,
            system: 10.0,
            iowait: 20.0,
            idle: 40.0,
            ..Default::default()
        };
        assert!((c.busy() - 40.0).abs() < 1e-9);
    }

    #[test]
    fn json_round_trip_keeps_states_and_omits_empty_parts() {
        let doc = SysDoc {
            processes: vec![ProcInfo {
                label: "db".into(),
                pid: 1,
                comm: "java".into(),
                state: ProcState::Exited,
                exited_unix_ms: Some(5),
                restarts: Vec::new(),
            }],
            samples: vec![sample(1.0, 90.0, 0.0, 1, None)],
            ..Default::default()
        };
        let text = serde_json::to_string(&doc).unwrap();
        assert!(text.contains("\"state\":\"exited\""), "{text}");
        assert!(
            !text.contains("per_cpu") && !text.contains("restarts"),
            "empty per_cpu and restarts must be omitted: {text}"
        );
        let back: SysDoc = serde_json::from_str(&text).unwrap();
        assert_eq!(back, doc);
        let mut restarted = doc.clone();
        restarted.processes[0].restarts = vec![ProcRestart { unix_ms: 9, pid: 2 }];
        let text = serde_json::to_string(&restarted).unwrap();
        assert!(
            text.contains("\"restarts\":[{\"unix_ms\":9,\"pid\":2}]"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<SysDoc>(&text).unwrap(), restarted);
    }
}
