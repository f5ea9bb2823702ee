//! Reads raw cumulative counters from /proc (through the `procfs` crate) into plain structs that
//! the delta math can work on without touching the file system.

use std::collections::HashMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use iodig_model::sys::MemSample;
use procfs::process::Process;
use procfs::{Current, CurrentSI};

/// Cumulative CPU ticks of one line of /proc/stat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl From<&procfs::CpuTime> for CpuTicks {
    fn from(c: &procfs::CpuTime) -> Self {
        // Guest time is left out on purpose: the kernel already counts it inside user and nice,
        // adding it again would make the shares sum past 100.
        CpuTicks {
            user: c.user,
            nice: c.nice,
            system: c.system,
            idle: c.idle,
            iowait: c.iowait.unwrap_or(0),
            irq: c.irq.unwrap_or(0),
            softirq: c.softirq.unwrap_or(0),
            steal: c.steal.unwrap_or(0),
        }
    }
}

/// Cumulative counters of one network interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetCounters {
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub tx_packets: u64,
}

/// Cumulative counters of /proc/PID/io.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub rchar: u64,
    pub wchar: u64,
}

/// One reading of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcCounters {
    pub utime: u64,
    pub stime: u64,
    pub rss_bytes: u64,
    pub threads: u64,
    pub io: Option<IoCounters>,
}

/// The system-wide part of one reading of /proc.
#[derive(Debug, Clone)]
pub struct SysCounters {
    pub mono: Instant,
    pub unix_ms: u64,
    pub cpu: CpuTicks,
    pub per_cpu: Vec<CpuTicks>,
    /// CPUs listed in /proc/stat, read even when per-CPU figures are not kept.
    pub cpus: u32,
    pub mem: MemSample,
    pub net: HashMap<String, NetCounters>,
    /// Pressure stall totals; none on a kernel without PSI.
    pub pressure: Option<PressureTotals>,
}

/// Cumulative stall times of `/proc/pressure/{cpu,io,memory}`, in µs since boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PressureTotals {
    pub cpu_some_us: u64,
    pub io_some_us: u64,
    pub io_full_us: u64,
    pub memory_some_us: u64,
}

/// The `total=` of a pressure file's `some` or `full` line.
fn pressure_total(text: &str, line: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(line))?
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

/// Reads the three pressure files; none when the kernel has no PSI (built without it, or
/// booted with `psi=0`, where the files exist but cannot be read).
pub fn read_pressure() -> Option<PressureTotals> {
    let read = |what: &str| std::fs::read_to_string(format!("/proc/pressure/{what}")).ok();
    let (cpu, io, memory) = (read("cpu")?, read("io")?, read("memory")?);
    Some(PressureTotals {
        cpu_some_us: pressure_total(&cpu, "some")?,
        io_some_us: pressure_total(&io, "some")?,
        io_full_us: pressure_total(&io, "full")?,
        memory_some_us: pressure_total(&memory, "some")?,
    })
}

/// Each thread's run delay (ns spent runnable on a run queue, waiting for a CPU) from
/// `/proc/PID/task/TID/schedstat`, by thread id; none when the process is gone or the kernel
/// keeps no schedstats. A thread that exits between the listing and its read is left out.
pub fn read_run_delays(pid: u32) -> Option<HashMap<u32, u64>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut out = HashMap::new();
    let mut any_file = false;
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(t.path().join("schedstat")) else {
            continue;
        };
        any_file = true;
        // "on-CPU ns, run-queue wait ns, timeslices"
        if let Some(wait) = text.split_whitespace().nth(1).and_then(|w| w.parse().ok()) {
            out.insert(tid, wait);
        }
    }
    any_file.then_some(out)
}

pub fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Reads CPU, memory and network counters. The clocks are read first and /proc/stat right
/// after, because CPU ticks are the counters whose share depends most on exact interval ends.
pub fn read_sys(per_cpu: bool) -> anyhow::Result<SysCounters> {
    let mono = Instant::now();
    let unix_ms = unix_ms_now();
    let ks = procfs::KernelStats::current().context("reading /proc/stat")?;
    let m = procfs::Meminfo::current().context("reading /proc/meminfo")?;
    let net = procfs::net::dev_status()
        .context("reading /proc/net/dev")?
        .into_iter()
        .map(|(name, d)| {
            let c = NetCounters {
                rx_bytes: d.recv_bytes,
                tx_bytes: d.sent_bytes,
                rx_packets: d.recv_packets,
                tx_packets: d.sent_packets,
            };
            (name, c)
        })
        .collect();
    Ok(SysCounters {
        mono,
        unix_ms,
        cpu: (&ks.total).into(),
        cpus: ks.cpu_time.len() as u32,
        per_cpu: if per_cpu {
            ks.cpu_time.iter().map(CpuTicks::from).collect()
        } else {
            Vec::new()
        },
        mem: MemSample {
            total_bytes: m.mem_total,
            free_bytes: m.mem_free,
            // Kernels before 3.14 lack MemAvailable; free is the closest lower bound.
            available_bytes: m.mem_available.unwrap_or(m.mem_free),
            cached_bytes: m.cached,
            buffers_bytes: m.buffers,
            dirty_bytes: m.dirty,
            writeback_bytes: m.writeback,
        },
        net,
        pressure: read_pressure(),
    })
}

/// A process followed across samples.
///
/// The `Process` keeps an open descriptor on /proc/PID, so once the process is reaped every read
/// fails instead of silently reading a newer process that got the same pid.
pub struct Tracked {
    pub label: String,
    pub pid: u32,
    proc_: Option<Process>,
    starttime: u64,
    pub comm: String,
    /// Its command line when opened (NUL-separated), by which it is found again after a
    /// restart; empty when unreadable.
    pub cmdline: Vec<u8>,
    /// The last counters read; the baseline of the next interval.
    pub last: Option<ProcCounters>,
    /// Each thread's run delay at the last reading (ns), the baseline of the next interval's
    /// run-queue wait; none when unreadable.
    pub last_run_delays: Option<HashMap<u32, u64>>,
}

/// Why a process reading did not produce counters.
#[derive(Debug)]
pub enum ProcGone {
    /// Exited, zombie, or the pid now belongs to someone else.
    Exited,
    /// Was never found.
    Missing,
}

impl Tracked {
    /// Opens the process; a missing process is not an error, it is recorded as missing.
    pub fn open(label: String, pid: u32) -> (Tracked, Option<String>) {
        let mut t = Tracked {
            label,
            pid,
            proc_: None,
            starttime: 0,
            comm: String::new(),
            cmdline: Vec::new(),
            last: None,
            last_run_delays: None,
        };
        let opened = i32::try_from(pid)
            .map_err(|_| anyhow::anyhow!("pid out of range"))
            .and_then(|p| Ok(Process::new(p)?))
            .and_then(|p| Ok((p.stat()?, p)));
        let why = match opened {
            Ok((st, _)) if is_dead(st.state) => "a zombie".to_string(),
            Ok((st, p)) => {
                t.starttime = st.starttime;
                t.comm = st.comm;
                t.cmdline = command_line(pid).unwrap_or_default();
                t.proc_ = Some(p);
                match t.read() {
                    Ok(c) => {
                        t.last = Some(c);
                        t.last_run_delays = read_run_delays(pid);
                        return (t, None);
                    }
                    Err(_) => "exited while being opened".to_string(),
                }
            }
            Err(e) => format!("{e:#}"),
        };
        let note = format!("process {} (pid {pid}) not sampled: {why}", t.label);
        (t, Some(note))
    }

    pub fn is_open(&self) -> bool {
        self.proc_.is_some()
    }

    /// Reads the process's counters, or says that it is gone for good (after which it is not
    /// read again, so a reused pid is never mistaken for it).
    pub fn read(&mut self) -> Result<ProcCounters, ProcGone> {
        let Some(p) = &self.proc_ else {
            return Err(if self.comm.is_empty() {
                ProcGone::Missing
            } else {
                ProcGone::Exited
            });
        };
        let st = match p.stat() {
            Ok(st) if !is_dead(st.state) && st.starttime == self.starttime => st,
            _ => {
                self.proc_ = None;
                return Err(ProcGone::Exited);
            }
        };
        // /proc/PID/io needs ptrace access; without it CPU and memory are still worth having.
        let io = p.io().ok().map(|io| IoCounters {
            read_bytes: io.read_bytes,
            write_bytes: io.write_bytes,
            rchar: io.rchar,
            wchar: io.wchar,
        });
        Ok(ProcCounters {
            utime: st.utime,
            stime: st.stime,
            rss_bytes: st.rss.saturating_mul(procfs::page_size()),
            threads: u64::try_from(st.num_threads).unwrap_or(0),
            io,
        })
    }
}

/// A process's command line, NUL-separated as the kernel keeps it; None when it is gone or a
/// kernel thread (whose command line is empty).
pub fn command_line(pid: u32) -> Option<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .filter(|c| !c.is_empty())
}

/// The lowest pid running exactly this command line, other than `except`: the same program
/// started again (a database node killed and restarted). A process between fork and exec still
/// shows its parent's command line, and a zombie an empty one, so neither matches.
pub fn find_by_command_line(cmdline: &[u8], except: u32) -> Option<u32> {
    if cmdline.is_empty() {
        return None;
    }
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != except && command_line(*pid).as_deref() == Some(cmdline))
        .min()
}

/// A zombie has released its memory and stopped running: for a database server that is exited.
fn is_dead(state: char) -> bool {
    matches!(state, 'Z' | 'X' | 'x')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pressure_total_reads_the_named_line() {
        let text = "some avg10=8.37 avg60=6.07 avg300=2.10 total=7723717\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=42\n";
        assert_eq!(pressure_total(text, "some"), Some(7_723_717));
        assert_eq!(pressure_total(text, "full"), Some(42));
        assert_eq!(pressure_total("some avg10=1.0\n", "some"), None);
    }

    #[test]
    fn this_process_has_a_run_delay_per_thread() {
        let pid = std::process::id();
        let delays = read_run_delays(pid).expect("this kernel keeps schedstats");
        assert!(
            delays.contains_key(&pid),
            "the main thread is listed: {delays:?}"
        );
    }
}
