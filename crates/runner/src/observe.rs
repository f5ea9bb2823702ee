//! What watches a step from outside the database: the block-IO tracer on the devices under the
//! data, the traced disks' own statistics (`device_stats`), the system sampler on iodig and the
//! database's processes, and the agents on observed hosts (`remote`), started when measurement
//! starts and stopped after it.

use crate::device_stats::{stat_devices, DeviceStatsProbe};
use crate::environment;
use crate::errors::{PrivilegeError, UsageError};
use crate::fault::{Fault, FaultHandler, FaultRunner};
use crate::live::{LiveSink, NoLive};
use crate::remote::{NodeResult, RemoteHosts};
use crate::step::StepObserver;
use anyhow::Result;
use iodig_iotrace::{
    BadTarget, PreparedTrace, TraceError, TraceMode, TraceOptions, TraceSession, WatchOptions,
};
use iodig_model::device_stats::DeviceStatsDoc;
use iodig_model::sys::SysDoc;
use iodig_model::trace::LiveSecond;
use iodig_model::trace::TraceDoc;
use iodig_sysstat::{Sampler, SysOptions};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The trace covers the devices named with `--device` and the one under the data directory.
pub fn trace_options(requested: &TraceOptions, data_dir: Option<&Path>) -> TraceOptions {
    let mut opts = requested.clone();
    if let Some(dev) = data_dir
        .and_then(environment::storage_of)
        .and_then(|s| s.device)
    {
        if !opts.devices.contains(&dev) {
            opts.devices.push(dev);
        }
    }
    opts
}

/// Checks the tracer once before anything runs: an explicit `--trace ebpf` that cannot work
/// fails now (exit 3), not after the load; a fallback is said once and returned as a note.
pub fn preflight_trace(opts: &TraceOptions, watch: &WatchOptions) -> Result<Option<String>> {
    if opts.mode == TraceMode::Off {
        return Ok(None);
    }
    match iodig_iotrace::start_watching(opts, watch) {
        Ok(session) => {
            let note = session.note().map(str::to_string);
            drop(session);
            if let Some(n) = &note {
                iodig_model::eprintln_lossy!("note: {n}");
            }
            Ok(note)
        }
        Err(TraceError::Privilege { reason }) => {
            Err(PrivilegeError(format!("--trace ebpf: {reason}")).into())
        }
        Err(e @ TraceError::UnknownDevice { .. }) => {
            Err(UsageError(format!("--device: {e}")).into())
        }
        Err(TraceError::Other(e)) => match e.downcast::<BadTarget>() {
            Ok(BadTarget(m)) => Err(UsageError(m).into()),
            Err(e) => Err(e.context("cannot start block-IO tracing")),
        },
    }
}

/// Starts the block-IO tracer, the system sampler and the remote agents when measurement
/// starts, stops them after.
pub struct Observer<'r> {
    trace_opts: Option<TraceOptions>,
    remote: Option<&'r mut RemoteHosts>,
    /// The step's fault schedule and what carries it out; started with measurement.
    faults: Option<(Vec<Fault>, FaultHandler)>,
    fault_runner: Option<FaultRunner>,
    watch: WatchOptions,
    pids: Vec<(String, u32)>,
    /// The tracer loaded before the step, attached when measurement starts.
    prepared: Option<PreparedTrace>,
    trace: Option<TraceSession>,
    /// The traced disks' controllers, opened before the step, read around it.
    device_stats: Option<DeviceStatsProbe>,
    sys: Option<Sampler>,
    /// The stop-the-world pauses of the JVMs among `pids` (managed Cassandra nodes), probed
    /// with eBPF when the step is traced.
    jvm: Option<iodig_jvm::JvmWatch>,
    /// Why the trace of this step is missing, when it is.
    pub trace_error: Option<String>,
    /// Who watches the run live: the faults as they fire, the local tracer's seconds.
    live: Arc<dyn LiveSink>,
    /// The local tracer's seconds as they complete, until someone watches them.
    live_seconds: Option<Receiver<LiveSecond>>,
    /// Hands the local tracer's seconds to `live` as the client host's; ends with the trace.
    live_forwarder: Option<JoinHandle<()>>,
    /// Set once the trace has stopped: the forwarder ends when nothing is left to hand over.
    live_done: Arc<AtomicBool>,
    /// Reads each database node's count of reads it served (the binding's
    /// [`iodig_db::DbFactory::node_reads`]), and the reading taken as measurement started.
    node_reads: Option<(NodeReadsProbe<'r>, Option<iodig_db::NodeReads>)>,
}

/// A reading of each database node's served reads so far.
pub type NodeReadsProbe<'r> = Box<dyn FnMut() -> Option<iodig_db::NodeReads> + 'r>;

/// What the observers measured over one step.
pub struct Observed {
    /// The block-IO trace of the step here (`trace.json`); None when tracing was off or failed.
    pub trace: Option<TraceDoc>,
    /// Per-second system and process samples (`sys.json`); None when the sampler did not start.
    pub sys: Option<SysDoc>,
    /// The traced disks' own statistics before and after the step, or why there are none
    /// (`device-stats.json`); None when tracing was off.
    pub device_stats: Option<DeviceStatsDoc>,
    /// Why `trace` is missing when tracing was asked for (printed as a warning).
    pub trace_error: Option<String>,
    /// Each observed host's part.
    pub nodes: Vec<NodeResult>,
    /// The faults injected during the step, as events on its time line.
    pub fault_events: Vec<iodig_model::events::DbEvent>,
    /// The JVMs' pauses (`jvm-pauses.json`); none when no sampled process is a JVM or the
    /// step was not traced.
    pub jvm_pauses: Option<iodig_model::jvm::JvmPausesDoc>,
    /// Reads each database node served in the measured window, by node IP, and why a node's
    /// could not be read; empty for a database without nodes.
    pub node_reads: std::collections::BTreeMap<String, u64>,
    /// See `node_reads`.
    pub node_reads_notes: Vec<String>,
}

impl<'r> Observer<'r> {
    /// An observer tracing with `trace_opts` (none: no trace), sampling the processes, and
    /// driving the remote hosts' agents when there are some.
    pub fn new(
        trace_opts: Option<TraceOptions>,
        watch: WatchOptions,
        pids: Vec<(String, u32)>,
        remote: Option<&'r mut RemoteHosts>,
    ) -> Observer<'r> {
        let mut o = Observer {
            trace_opts,
            remote,
            faults: None,
            fault_runner: None,
            watch,
            pids,
            prepared: None,
            trace: None,
            device_stats: None,
            sys: None,
            jvm: None,
            trace_error: None,
            live: Arc::new(NoLive),
            live_seconds: None,
            live_forwarder: None,
            live_done: Arc::new(AtomicBool::new(false)),
            node_reads: None,
        };
        o.prepare();
        o
    }

    /// Loads the tracers here and on the observed hosts before the step, all at once: loading
    /// takes a few hundred ms on an idle machine and seconds on a busy one (a loopback cluster
    /// under load attached its tracers up to 6.4 s into an 11 s step when they loaded at its
    /// start), while attaching when measurement starts takes milliseconds.
    fn prepare(&mut self) {
        if let Some(r) = self.remote.as_deref_mut() {
            r.prepare();
        }
        if let Some(opts) = &mut self.trace_opts {
            let (feed, seconds) = std::sync::mpsc::channel();
            opts.live = Some(feed);
            self.live_seconds = Some(seconds);
        }
        if let Some(opts) = &self.trace_opts {
            match iodig_iotrace::prepare_watching(opts, &self.watch) {
                Ok(p) => self.prepared = Some(p),
                Err(e) => self.trace_error = Some(e.to_string()),
            }
            self.device_stats = Some(DeviceStatsProbe::locate(&stat_devices(opts)));
            // Uprobes on the JVMs' pause probes: eBPF like the tracer, so only in a traced
            // step, and attached now, as reading libjvm.so and loading take a while: the
            // report reads the pauses of the step's own seconds.
            self.jvm = Some(iodig_jvm::JvmWatch::start(&self.pids));
        }
        if let Some(r) = self.remote.as_deref_mut() {
            r.await_prepared();
        }
    }

    /// Publishes what it sees as it happens to `live`: set before the step starts.
    pub fn watched_by(mut self, live: Arc<dyn LiveSink>) -> Self {
        if let Some(seconds) = self.live_seconds.take() {
            let sink = Arc::clone(&live);
            let done = Arc::clone(&self.live_done);
            // The tracer sends and goes on: a sink is quick, but it is never the tracer's
            // thread that waits for it.
            self.live_forwarder = std::thread::Builder::new()
                .name("iodig-live-io".into())
                .spawn(move || loop {
                    match seconds.recv_timeout(Duration::from_millis(100)) {
                        Ok(second) => sink.io_second("client", &second),
                        Err(RecvTimeoutError::Timeout) if !done.load(Ordering::Relaxed) => {}
                        Err(_) => return,
                    }
                })
                .ok();
        }
        self.live = live;
        self
    }

    /// Reads each database node's served reads as measurement starts and after it ends.
    pub fn with_node_reads(mut self, probe: NodeReadsProbe<'r>) -> Self {
        self.node_reads = Some((probe, None));
        self
    }

    /// Injects these faults at their offsets from the start of measurement.
    pub fn with_faults(mut self, faults: Vec<Fault>, handler: FaultHandler) -> Self {
        if !faults.is_empty() {
            self.faults = Some((faults, handler));
        }
        self
    }

    /// Stops what runs and hands over what it measured; the remote hosts' database events
    /// since `since_unix_ms` come with theirs.
    pub fn finish(mut self, since_unix_ms: u64) -> Observed {
        let fault_events = self
            .fault_runner
            .take()
            .map(FaultRunner::finish)
            .unwrap_or_default();
        let nodes = self
            .remote
            .take()
            .map(|r| r.stop(since_unix_ms))
            .unwrap_or_default();
        // Read before the trace stops, so the device's window lies inside the trace's.
        if let Some(d) = self.device_stats.as_mut() {
            d.read_after();
        }
        let trace = self.trace.take().and_then(|t| match t.stop() {
            Ok(doc) => Some(doc),
            Err(e) => {
                self.trace_error = Some(format!("{e:#}"));
                None
            }
        });
        // The trace's last second is sent when it stops; the feed ends with it (or with the
        // tracer that never started).
        self.prepared = None;
        self.trace_opts = None;
        self.live_done.store(true, Ordering::Relaxed);
        if let Some(f) = self.live_forwarder.take() {
            let _ = f.join();
        }
        let traced: Option<Vec<String>> = trace
            .as_ref()
            .map(|t| t.devices.iter().map(|d| d.name.clone()).collect());
        let device_stats = self
            .device_stats
            .take()
            .map(|d| d.into_doc(traced.as_deref()));
        let (node_reads, node_reads_notes) = match self.node_reads.take() {
            Some((mut probe, Some(before))) => {
                served_between(&before, &probe().unwrap_or_default())
            }
            _ => Default::default(),
        };
        Observed {
            trace,
            sys: self.sys.take().map(Sampler::stop),
            device_stats,
            trace_error: self.trace_error,
            nodes,
            fault_events,
            jvm_pauses: self.jvm.take().and_then(iodig_jvm::JvmWatch::stop),
            node_reads,
            node_reads_notes,
        }
    }
}

/// Each node's reads between two readings, and why a node has none: a failed reading, or a
/// count that went back (the node restarted and its counters with it).
fn served_between(
    before: &iodig_db::NodeReads,
    after: &iodig_db::NodeReads,
) -> (std::collections::BTreeMap<String, u64>, Vec<String>) {
    let mut served = std::collections::BTreeMap::new();
    let mut notes = Vec::new();
    for (node, a) in after {
        match (before.get(node), a) {
            (Some(Ok(b)), Ok(a)) if a >= b => {
                served.insert(node.clone(), a - b);
            }
            (Some(Ok(_)), Ok(_)) => notes.push(format!(
                "{node}: its read count went back in the step (the node restarted): its reads are not known"
            )),
            (Some(Err(e)), _) | (_, Err(e)) => {
                notes.push(format!("{node}: its read count could not be read: {e}"));
            }
            (None, Ok(_)) => notes.push(format!(
                "{node}: not in the ring when the step started: its reads are not known"
            )),
        }
    }
    (served, notes)
}

impl StepObserver for Observer<'_> {
    fn measurement_started(&mut self) {
        // The sampler first: it starts in microseconds; the tracers were loaded before the
        // step and only attach now (milliseconds).
        let opts = SysOptions {
            interval: Duration::from_secs(1),
            pids: self.pids.clone(),
            per_cpu: true,
            // A managed node killed and restarted by a fault of the step is sampled on under
            // its new pid.
            follow_restarts: true,
            pause_totals: self
                .jvm
                .as_ref()
                .map(iodig_jvm::JvmWatch::pause_totals)
                .unwrap_or_default(),
        };
        // The client host's samples reach the live view as they are taken, through a thread of
        // their own so the sampler never waits on it.
        let (feed, samples) = std::sync::mpsc::channel();
        let sink = Arc::clone(&self.live);
        let forwarder = std::thread::Builder::new()
            .name("iodig-live-sys".into())
            .spawn(move || {
                for s in samples {
                    sink.sys_sample("client", &s);
                }
            });
        self.sys = Sampler::start_with_live(opts, forwarder.is_ok().then_some(feed)).ok();
        if let Some(r) = self.remote.as_deref_mut() {
            r.start();
        }
        if let Some(p) = self.prepared.take() {
            match p.start() {
                Ok(s) => self.trace = Some(s),
                Err(e) => self.trace_error = Some(e.to_string()),
            }
        }
        // After the trace attaches (a read takes milliseconds), so the device's window lies
        // inside the trace's.
        if let Some(d) = self.device_stats.as_mut() {
            d.read_before();
        }
        if let Some(r) = self.remote.as_deref_mut() {
            r.await_started();
        }
        if let Some((faults, handler)) = self.faults.take() {
            self.fault_runner = Some(FaultRunner::start(&faults, handler, Arc::clone(&self.live)));
        }
        // Once the traces run, so every read counted lies inside the nodes' traced windows.
        if let Some((probe, before)) = self.node_reads.as_mut() {
            *before = probe();
        }
    }
}
