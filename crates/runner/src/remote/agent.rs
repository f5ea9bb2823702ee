//! `iodig agent`: the observer iodig runs on another host over SSH. It finds the database node
//! there, then on request traces the devices under the node's directories, samples the system
//! and the node's process, and hands back what it measured with the node's own events. It keeps
//! nothing running once its stdin closes (iodig ended, or the link died).

use super::node::{EventFeed, NodeFinder};
use super::protocol::{line, Hello, Reply, Request, StreamChunk, StreamedEvent, CHUNK_EVERY};
use crate::device_stats::stat_devices;
use crate::device_stats::DeviceStatsProbe;
use crate::environment;
use anyhow::Context;
use iodig_iotrace::{PreparedTrace, TraceMode, TraceOptions, TraceSession, WatchOptions};
use iodig_model::cluster::NodeObservation;
use iodig_model::sys::{SysDoc, SysSample};
use iodig_model::trace::LiveSecond;
use iodig_sysstat::{command_line, find_by_command_line, Sampler, SysOptions};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

/// What `iodig agent` was started with.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// The binding whose node to look for (`cassandra`); others observe the host only.
    pub db: String,
    /// The node's client address on this host, when several share it.
    pub node: Option<String>,
    /// The trace mode and slot iodig asked for; the devices under the node's directories are
    /// added, and a non-root agent falls back to diskstats.
    pub trace: TraceOptions,
    /// Git revision of this binary, told to iodig in the [`Hello`].
    pub revision: Option<String>,
    /// `--events`: the tracer streams every IO to a file here, sent back with each step.
    pub io_events: bool,
}

/// The largest per-IO stream an agent sends back over its channel (about 5 million IOs):
/// a longer one stays on the host, and the step's notes say where.
pub const MAX_IO_EVENTS_BYTES: u64 = 256 << 20;

/// The agent's directory for the per-IO stream (under the host's temporary directory, named
/// after the agent's pid), removed with what is left in it when the agent ends.
struct EventsDir(PathBuf);

impl EventsDir {
    fn create() -> std::io::Result<EventsDir> {
        let d = std::env::temp_dir().join(format!("iodig-agent-{}", std::process::id()));
        std::fs::create_dir_all(&d)?;
        Ok(EventsDir(d))
    }
}

impl Drop for EventsDir {
    fn drop(&mut self) {
        // A stream too long to send was kept beside the directory, not in it.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The step's per-IO stream as sent back: its text, or why it is not sent (then it is kept
/// on the host). Removes the file it sends.
fn take_io_events(path: &std::path::Path) -> Result<Option<String>, String> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(None);
    };
    if meta.len() > MAX_IO_EVENTS_BYTES {
        let kept = std::env::temp_dir().join(format!(
            "iodig-io-events-{}.csv",
            super::clock::unix_now_ns()
        ));
        let _ = std::fs::rename(path, &kept);
        return Err(format!(
            "the per-IO stream ({:.0} MB) is over the {} MB an agent sends back; kept on the host at {}",
            meta.len() as f64 / 1e6,
            MAX_IO_EVENTS_BYTES >> 20,
            kept.display()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let _ = std::fs::remove_file(path);
    Ok(Some(text))
}

/// Serves requests on stdin until it closes.
pub fn serve(opts: &AgentOptions, find: NodeFinder) -> anyhow::Result<()> {
    let mut notes = Vec::new();
    let node = match find(&opts.db, opts.node.as_deref()) {
        Ok(n) => Some(n),
        Err(e) => {
            notes.push(format!("no {} node observed here: {e}", opts.db));
            None
        }
    };
    let mut trace = opts.trace.clone();
    // `--events`: one stream file per step, in a directory of this agent's, gone with it.
    let events_dir = opts
        .io_events
        .then(EventsDir::create)
        .transpose()
        .context("cannot make a directory for the per-IO stream")?;
    if let Some(d) = &events_dir {
        trace.events_file = Some(d.0.join(iodig_model::files::IO_EVENTS));
    }
    for dir in node.as_ref().map(|n| n.dirs()).unwrap_or_default() {
        if let Some(dev) = environment::storage_of(&dir).and_then(|s| s.device) {
            if !trace.devices.contains(&dev) {
                trace.devices.push(dev);
            }
        }
    }
    if let Some(n) = &node {
        if n.dirs().is_empty() {
            notes.push("the node's data directories could not be read from its configuration: tracing every busy disk here".into());
        }
    }
    let facts = node.as_ref().map(|n| n.facts());
    // Caps on the node's cgroup may be set while the agent runs; however it ends (stdin closed
    // because iodig finished or was killed, the link died, an error), one left on goes.
    let _caps = facts
        .as_ref()
        .and_then(|f| f.cgroup.as_deref())
        .filter(|cg| *cg != "/")
        .and_then(super::caps::Lease::take);
    // The node as it runs now: a node killed and started again (by a fault of this run, or by
    // its service manager) is the same command line under a new pid, found again at each step.
    let mut node_now = facts.as_ref().map(|f| RunningNode::of(f.pid));
    // The node's cgroup when it has one of its own (a service, a container, a managed node):
    // its share then includes IO its threads start through the page cache; else its process.
    let watch_of = |pid: u32| match facts.as_ref() {
        Some(f) => match f.cgroup.as_deref().filter(|c| *c != "/") {
            Some(cg) => WatchOptions {
                cgroups: vec![PathBuf::from(cg.trim_start_matches('/'))],
                ..Default::default()
            },
            None => WatchOptions {
                pids: vec![pid],
                ..Default::default()
            },
        },
        None => WatchOptions::default(),
    };
    let root = effective_uid() == 0;
    if !root && trace.mode != TraceMode::Off {
        notes.push(
            "not root and no password-less sudo here: block IO from /proc/diskstats, not eBPF"
                .into(),
        );
        trace.mode = TraceMode::Diskstats;
    }
    let hello = Hello {
        version: env!("CARGO_PKG_VERSION").into(),
        revision: opts.revision.clone(),
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
        root,
        node: facts.clone(),
        devices: trace.devices.clone(),
        notes,
        environment: Some(environment::describe(
            facts
                .as_ref()
                .and_then(|n| n.data_dirs.first())
                .map(std::path::Path::new),
        )),
    };
    send(&Reply::Hello(Box::new(hello)))?;
    let mut running: Option<Running> = None;
    // The tracer loaded by `Prepare`, or why it could not be.
    let mut prepared: Option<Result<PreparedTrace, String>> = None;
    // The traced disks' controllers, found with the tracer: read as measurement starts and
    // ends, inside the trace's window, as on iodig's own machine.
    let mut device_stats: Option<DeviceStatsProbe> = None;
    let locate_stats =
        || (trace.mode != TraceMode::Off).then(|| DeviceStatsProbe::locate(&stat_devices(&trace)));
    // The tracer's completed seconds, streamed during the step: a feed made with each load.
    let mut seconds_feed: Option<Receiver<LiveSecond>> = None;
    // The node's JVM's pause probe, attached by `Prepare` in a traced step.
    let mut jvm: Option<iodig_jvm::JvmWatch> = None;
    let prepare = |pid: u32| {
        if trace.mode == TraceMode::Off {
            return (None, None);
        }
        let (opts, feed) = with_seconds_feed(&trace);
        let loaded =
            iodig_iotrace::prepare_watching(&opts, &watch_of(pid)).map_err(|e| e.to_string());
        (Some(loaded), feed)
    };
    // The node's log, followed from before the step's warm-up so its events stream too.
    let mut events_feed: Option<Box<dyn EventFeed>> = None;
    let mut streamer: Option<Streamer> = None;
    // 0 without a node, where neither the sampler nor the watch asks for a pid.
    let mut refind = || node_now.as_mut().map_or(0, RunningNode::refind);
    for request in std::io::stdin().lock().lines() {
        let request = request?;
        let reply = match serde_json::from_str::<Request>(&request) {
            Err(e) => Reply::Error(format!("unreadable request {request:?}: {e}")),
            Ok(Request::Clock) => Reply::Clock {
                unix_ns: super::clock::unix_now_ns(),
            },
            Ok(Request::DropCaches) => match crate::page_cache::drop_page_cache() {
                Ok((before, after)) => Reply::CachesDropped { before, after },
                Err(e) => Reply::Error(e),
            },
            Ok(Request::RestoreCheck { dataset }) => {
                super::restore::check(node.as_deref(), refind(), &dataset)
            }
            Ok(Request::Snapshot { dataset, tag }) => {
                super::restore::snapshot(node.as_deref(), refind(), &dataset, &tag)
            }
            Ok(Request::Restore { dataset, tag }) => {
                super::restore::restore(node.as_deref(), refind(), &dataset, &tag)
            }
            Ok(Request::Prepare) => {
                let pid = refind();
                (prepared, seconds_feed) = prepare(pid);
                // The node's JVM's pauses in a traced step (uprobes are eBPF too), attached
                // before the step, as reading libjvm.so and loading take a while.
                jvm = prepared
                    .as_ref()
                    .is_some_and(Result::is_ok)
                    .then(|| iodig_jvm::JvmWatch::start(&node_process(facts.as_ref(), pid)));
                device_stats = locate_stats();
                events_feed = node.as_ref().and_then(|n| n.follow_events());
                Reply::Prepared
            }
            Ok(Request::Start) => {
                let pid = refind();
                // Started without a Prepare first (an older observer): load now.
                if prepared.is_none() {
                    (prepared, seconds_feed) = prepare(pid);
                }
                // The same: probe the JVM now, before the sampler that reads its pauses.
                let jvm = jvm.take().or_else(|| {
                    prepared
                        .as_ref()
                        .is_some_and(Result::is_ok)
                        .then(|| iodig_jvm::JvmWatch::start(&node_process(facts.as_ref(), pid)))
                });
                let (samples_tx, samples_feed) = mpsc::channel();
                let sampler = Sampler::start_with_live(
                    SysOptions {
                        interval: Duration::from_secs(1),
                        pids: facts
                            .iter()
                            .map(|f| (format!("node {}", f.address), pid))
                            .collect(),
                        per_cpu: true,
                        // A node killed and started again within the step (a fault of this
                        // run, or its service manager) is sampled on under its new pid.
                        follow_restarts: true,
                        pause_totals: jvm
                            .as_ref()
                            .map(iodig_jvm::JvmWatch::pause_totals)
                            .unwrap_or_default(),
                    },
                    Some(samples_tx),
                )
                .ok();
                let sys_header = sampler.as_ref().map(|s| Box::new(s.header().clone()));
                let (session, error) = match prepared.take() {
                    None => (None, None),
                    Some(Ok(p)) => match p.start() {
                        Ok(s) => (Some(s), None),
                        Err(e) => (None, Some(e.to_string())),
                    },
                    Some(Err(e)) => (None, Some(e)),
                };
                let mode = session.as_ref().map_or("off", |s| s.mode()).to_string();
                if events_feed.is_none() {
                    events_feed = node.as_ref().and_then(|n| n.follow_events());
                }
                streamer = Some(Streamer::start(StreamFeeds {
                    seconds: session.as_ref().and(seconds_feed.take()),
                    sys_header,
                    samples: sampler.as_ref().map(|_| samples_feed),
                    events: events_feed.take(),
                }));
                let mut stats = device_stats.take().or_else(locate_stats);
                if let Some(d) = stats.as_mut() {
                    d.read_before();
                }
                running = Some(Running {
                    session,
                    sampler,
                    error,
                    device_stats: stats,
                    jvm,
                });
                Reply::Started { mode }
            }
            Ok(Request::Stop { since_unix_ms }) => {
                // No chunk after `stopped`: the results below hold the whole step.
                if let Some(s) = streamer.take() {
                    s.stop();
                }
                let Running {
                    session,
                    sampler,
                    error: mut trace_error,
                    device_stats: mut stats,
                    jvm,
                } = running.take().unwrap_or_default();
                let jvm_pauses = jvm.and_then(iodig_jvm::JvmWatch::stop);
                if let Some(d) = stats.as_mut() {
                    d.read_after();
                }
                let trace = session.and_then(|s| match s.stop() {
                    Ok(doc) => Some(doc),
                    Err(e) => {
                        trace_error = Some(format!("{e:#}"));
                        None
                    }
                });
                let traced: Option<Vec<String>> = trace
                    .as_ref()
                    .map(|t| t.devices.iter().map(|d| d.name.clone()).collect());
                let io_events = match trace.as_ref().and_then(|t| t.events_file.as_ref()) {
                    Some(f) => take_io_events(std::path::Path::new(f)).unwrap_or_else(|e| {
                        eprintln!("note: {e}");
                        None
                    }),
                    None => None,
                };
                let mut notes = Vec::new();
                let events = match node.as_ref().map(|n| n.events_since(since_unix_ms)) {
                    Some(Ok(events)) => events,
                    Some(Err(e)) => {
                        notes.push(format!("the node's events: {e}"));
                        Vec::new()
                    }
                    None => Vec::new(),
                };
                Reply::Stopped(Box::new(NodeObservation {
                    device_stats: stats.map(|d| d.into_doc(traced.as_deref())),
                    trace,
                    sys: sampler.map(Sampler::stop),
                    events,
                    trace_error,
                    io_events,
                    notes,
                    jvm_pauses,
                }))
            }
        };
        send(&reply)?;
    }
    // stdin closed: dropping the sessions detaches the BPF programs.
    if let Some(s) = streamer.take() {
        s.stop();
    }
    drop(running);
    Ok(())
}

/// The node's process as the samples and the pause probe name it; none without a node.
fn node_process(facts: Option<&iodig_model::cluster::HostNode>, pid: u32) -> Vec<(String, u32)> {
    facts
        .iter()
        .map(|f| (format!("node {}", f.address), pid))
        .collect()
}

/// What runs between `Start` and `Stop`.
#[derive(Default)]
struct Running {
    /// The node's JVM's pause probe, when the step is traced.
    jvm: Option<iodig_jvm::JvmWatch>,
    session: Option<TraceSession>,
    sampler: Option<Sampler>,
    /// Why the trace could not start.
    error: Option<String>,
    device_stats: Option<DeviceStatsProbe>,
}

/// The node's process, followed across restarts by its command line.
struct RunningNode {
    pid: u32,
    cmdline: Vec<u8>,
}

impl RunningNode {
    fn of(pid: u32) -> RunningNode {
        RunningNode {
            pid,
            cmdline: command_line(pid).unwrap_or_default(),
        }
    }

    /// The pid the node runs as now: the known one while it still runs that command line,
    /// else a process that does (the node started again), else the known one (the node is
    /// down: the sampler then says it is gone).
    fn refind(&mut self) -> u32 {
        if self.cmdline.is_empty() || command_line(self.pid).as_ref() == Some(&self.cmdline) {
            return self.pid;
        }
        if let Some(pid) = find_by_command_line(&self.cmdline, self.pid) {
            self.pid = pid;
        }
        self.pid
    }
}

/// One reply, whole, on stdout: the streamer's chunks and the answers to requests come from
/// two threads, and each line is written under the lock.
fn send(reply: &Reply) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(line(reply).as_bytes())?;
    out.flush()
}

/// The tracer's options with a feed of its completed seconds (and, every few seconds, the
/// histograms so far, so a lost link keeps them too), and the feed's end.
fn with_seconds_feed(trace: &TraceOptions) -> (TraceOptions, Option<Receiver<LiveSecond>>) {
    let (tx, rx) = mpsc::channel();
    let mut opts = trace.clone();
    opts.live = Some(tx);
    opts.live_histograms = true;
    (opts, Some(rx))
}

/// What a step streams from.
struct StreamFeeds {
    /// The tracer's completed seconds.
    seconds: Option<Receiver<LiveSecond>>,
    /// The sampler's document as it started, sent with the first chunk.
    sys_header: Option<Box<SysDoc>>,
    /// The sampler's samples as they are taken.
    samples: Option<Receiver<SysSample>>,
    /// The node's log, followed.
    events: Option<Box<dyn EventFeed>>,
}

/// Sends, every [`CHUNK_EVERY`] of a step, what completed since its last chunk
/// ([`Reply::Chunk`]), until the step stops.
struct Streamer {
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Streamer {
    fn start(mut feeds: StreamFeeds) -> Streamer {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let mut seq = 0;
            let mut events_said = false;
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(CHUNK_EVERY) {
                let events = match feeds.events.as_mut().map(|f| f.poll()) {
                    Some(Ok(e)) => e,
                    Some(Err(e)) => {
                        // Said once: the whole step's events still come at `stop`, read anew.
                        if !events_said {
                            eprintln!(
                                "note: the node's log cannot be followed during the step: {e}"
                            );
                            events_said = true;
                        }
                        Vec::new()
                    }
                    None => Vec::new(),
                };
                let chunk = StreamChunk {
                    seq,
                    seconds: newest_so_far_only(
                        feeds
                            .seconds
                            .as_ref()
                            .map(|r| r.try_iter().collect())
                            .unwrap_or_default(),
                    ),
                    sys_header: feeds.sys_header.take(),
                    samples: feeds
                        .samples
                        .as_ref()
                        .map(|r| r.try_iter().collect())
                        .unwrap_or_default(),
                    events: events
                        .into_iter()
                        .map(|(id, event)| StreamedEvent { id, event })
                        .collect(),
                };
                // A quiet host sends nothing.
                if chunk.is_empty() {
                    continue;
                }
                if send(&Reply::Chunk(Box::new(chunk))).is_err() {
                    // iodig is gone; the request loop ends on its own.
                    return;
                }
                seq += 1;
            }
        });
        Streamer { stop, thread }
    }

    /// Stops streaming; returns once no chunk can follow.
    fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// The seconds of a chunk with only the newest histograms so far: each supersedes the ones
/// before it (a chunk after a stall can hold several).
fn newest_so_far_only(mut seconds: Vec<LiveSecond>) -> Vec<LiveSecond> {
    let mut newest_seen = false;
    for s in seconds.iter_mut().rev() {
        if s.so_far.is_some() {
            if newest_seen {
                s.so_far = None;
            }
            newest_seen = true;
        }
    }
    seconds
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The effective user id, from /proc (no libc call, so no unsafe block).
fn effective_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|u| u.parse().ok()))
        })
        .unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::RunningNode;
    use std::process::{Child, Command};

    /// A process with a command line no other process has, standing in for a node; returned
    /// once it runs that command line (until its exec it shows the test's).
    fn node(tag: &str) -> Child {
        spawned(Command::new("sleep").arg(format!("1000.{tag}")))
    }

    fn spawned(c: &mut Command) -> Child {
        let child = c.spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !super::command_line(child.id()).is_some_and(|c| c.starts_with(b"sleep\0")) {
            assert!(std::time::Instant::now() < deadline, "sleep did not start");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child
    }

    fn end(mut c: Child) {
        c.kill().unwrap();
        c.wait().unwrap();
    }

    #[test]
    fn a_node_started_again_is_followed_to_its_new_pid() {
        let tag = format!("{}4242", std::process::id());
        let first = node(&tag);
        let mut n = RunningNode::of(first.id());
        assert_eq!(n.refind(), first.id(), "still running: the same pid");
        end(first);
        let old = n.pid;
        assert_eq!(
            n.refind(),
            old,
            "down and not back: the known pid, which the sampler reports gone"
        );
        let other = spawned(Command::new("sleep").arg("1000.1"));
        let again = node(&tag);
        assert_eq!(
            n.refind(),
            again.id(),
            "back under a new pid, another command line ignored"
        );
        end(again);
        end(other);
    }
}
