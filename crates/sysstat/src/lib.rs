//! Per-second system samplers from /proc: CPU, memory, network and the database process; and
//! the cgroups iodig puts the servers it starts in ([`cgroup`]).
//!
//! [`Sampler::start`] reads a baseline and starts a background thread that samples on whole
//! multiples of the interval of the wall clock; [`Sampler::stop`] takes a final partial sample
//! and returns the [`SysDoc`] that the runner stores as `sys.json`. The format is in
//! `docs/sysstat.md`.

pub mod cgroup;
mod delta;
mod read;
mod sampler;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};
use iodig_model::sys::{HostFacts, ProcInfo, ProcState, SysDoc};

pub use iodig_model::sys;
pub use read::{command_line, find_by_command_line, read_run_delays};
pub use sampler::MIN_FINAL_SECS;

/// What to sample.
#[derive(Debug, Clone)]
pub struct SysOptions {
    /// Sampling interval; 1 s to line up with the client's per-second samples.
    pub interval: Duration,
    /// Processes to follow, as (label, pid): the database server (possibly this very process
    /// for an embedded engine), and cluster nodes.
    pub pids: Vec<(String, u32)>,
    /// Also record each CPU separately.
    pub per_cpu: bool,
    /// A process found gone is looked for again at each sample by its command line, and
    /// sampled under its new pid once it runs again (a node killed and restarted in the step).
    pub follow_restarts: bool,
    /// Running totals of a process's stop-the-world time in µs, as (pid, total), kept by a
    /// probe of its JVM (`iodig-jvm`): each sample takes their growth as the process's
    /// `jvm_pause_ms`. A process restarted under another pid has none.
    pub pause_totals: Vec<(u32, Arc<AtomicU64>)>,
}

impl Default for SysOptions {
    fn default() -> Self {
        SysOptions {
            interval: Duration::from_secs(1),
            pids: Vec::new(),
            per_cpu: false,
            follow_restarts: false,
            pause_totals: Vec::new(),
        }
    }
}

/// A running sampler. Dropping it without [`Sampler::stop`] ends the thread and loses the samples.
pub struct Sampler {
    stop_tx: mpsc::Sender<()>,
    handle: JoinHandle<SysDoc>,
    /// The document as it started: host facts and processes, no samples yet.
    header: SysDoc,
}

/// Shortest interval accepted: CPU figures come in ticks of 1/HZ (10 ms at the usual 100 Hz),
/// so anything shorter is mostly rounding.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

impl Sampler {
    /// Reads the baseline on the calling thread, so that a missing /proc is reported here and the
    /// first interval starts now, then starts sampling in the background. A process that is not
    /// running is not an error: it is recorded as `missing`, with a note.
    pub fn start(opts: SysOptions) -> anyhow::Result<Sampler> {
        Self::start_with_live(opts, None)
    }

    /// [`Sampler::start`], also sending each sample to `live` as it is taken (a live view of
    /// the run); the document is the same.
    pub fn start_with_live(
        opts: SysOptions,
        live: Option<mpsc::Sender<sys::SysSample>>,
    ) -> anyhow::Result<Sampler> {
        if opts.interval < MIN_INTERVAL {
            bail!(
                "system sampling interval {:?} is too short: the minimum is {:?} (one CPU tick)",
                opts.interval,
                MIN_INTERVAL
            );
        }
        let base = read::read_sys(opts.per_cpu).context("system sampler cannot read /proc")?;
        let host = HostFacts {
            cpus: base.cpus,
            mem_total_bytes: base.mem.total_bytes,
            clock_ticks_per_s: procfs::ticks_per_second(),
            page_size_bytes: procfs::page_size(),
            net_interfaces: {
                let mut v: Vec<String> = base
                    .net
                    .keys()
                    .filter(|n| *n != delta::LOOPBACK)
                    .cloned()
                    .collect();
                v.sort();
                v
            },
        };
        let mut doc = SysDoc {
            host,
            interval_ms: opts.interval.as_millis() as u64,
            aligned: true,
            started_unix_ms: base.unix_ms,
            ended_unix_ms: base.unix_ms,
            ..Default::default()
        };
        let mut procs = Vec::with_capacity(opts.pids.len());
        for (label, pid) in opts.pids {
            let (t, note) = read::Tracked::open(label, pid);
            doc.processes.push(ProcInfo {
                label: t.label.clone(),
                pid,
                comm: t.comm.clone(),
                state: if t.is_open() {
                    ProcState::Running
                } else if t.comm.is_empty() {
                    ProcState::Missing
                } else {
                    ProcState::Exited
                },
                exited_unix_ms: None,
                restarts: Vec::new(),
            });
            doc.notes.extend(note);
            procs.push(t);
        }
        let header = doc.clone();
        let state = sampler::State {
            doc,
            per_cpu: opts.per_cpu,
            follow_restarts: opts.follow_restarts,
            prev: base,
            procs,
            live,
            pauses: opts
                .pause_totals
                .into_iter()
                .map(|(pid, total)| {
                    let seen = total.load(Ordering::Relaxed);
                    (pid, (total, seen))
                })
                .collect(),
        };
        let (stop_tx, stop_rx) = mpsc::channel();
        let interval = opts.interval;
        let handle = std::thread::Builder::new()
            .name("iodig-sysstat".into())
            .spawn(move || sampler::run(state, interval, stop_rx))
            .context("starting the system sampler thread")?;
        Ok(Sampler {
            stop_tx,
            handle,
            header,
        })
    }

    /// What the document held when sampling started: host facts, processes, notes, no samples.
    pub fn header(&self) -> &SysDoc {
        &self.header
    }

    /// Stops promptly (the thread is woken, not waited out), takes a final partial sample unless
    /// it would be shorter than [`MIN_FINAL_SECS`], and returns all samples.
    pub fn stop(self) -> SysDoc {
        // An error only means the thread already ended; join tells how.
        let _ = self.stop_tx.send(());
        self.handle.join().unwrap_or_else(|_| SysDoc {
            notes: vec!["system sampler thread panicked; samples lost".into()],
            ..Default::default()
        })
    }
}
