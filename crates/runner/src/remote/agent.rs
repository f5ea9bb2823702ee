//! `iodig agent`: the observer iodig runs on another host over SSH. It finds the database node
//! there, then on request traces the devices under the node's directories, samples the system
//! and the node's process, and hands back what it measured with the node's own events. It keeps
//! nothing running once its stdin closes (iodig ended, or the link died).

use super::protocol::{line, Hello, Reply, Request};
use crate::environment;
use iodig_iotrace::{PreparedTrace, TraceMode, TraceOptions, TraceSession, WatchOptions};
use iodig_model::cluster::{HostNode, NodeObservation};
use iodig_model::events::DbEvent;
use iodig_sysstat::{Sampler, SysOptions};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Duration;

/// A database node on this host, as a deployment finds it.
pub trait NodeOnHost {
    /// What run.json records of the node: address, pid, cgroup, directories, data bytes.
    fn facts(&self) -> HostNode;
    /// Directories whose devices are traced (data, commit log).
    fn dirs(&self) -> Vec<PathBuf>;
    /// The node's flushes and compactions that started at or after the time (Unix ms).
    fn events_since(&self, since_unix_ms: u64) -> Vec<DbEvent>;
}

/// Finds the node of a database (`--db`) at an address (or the only one) on this host.
pub type NodeFinder = fn(&str, Option<&str>) -> Result<Box<dyn NodeOnHost>, String>;

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
    // The node's cgroup when it has one of its own (a service, a container, a managed node):
    // its share then includes IO its threads start through the page cache; else its process.
    let watch = match facts.as_ref() {
        Some(f) => match f.cgroup.as_deref().filter(|c| *c != "/") {
            Some(cg) => WatchOptions {
                cgroups: vec![PathBuf::from(cg.trim_start_matches('/'))],
                ..Default::default()
            },
            None => WatchOptions {
                pids: vec![f.pid],
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
    };
    let mut out = std::io::stdout().lock();
    send(&mut out, &Reply::Hello(Box::new(hello)))?;
    let mut running: Option<(Option<TraceSession>, Option<Sampler>, Option<String>)> = None;
    // The tracer loaded by `Prepare`, or why it could not be.
    let mut prepared: Option<Result<PreparedTrace, String>> = None;
    let prepare = || {
        if trace.mode == TraceMode::Off {
            return None;
        }
        Some(iodig_iotrace::prepare_watching(&trace, &watch).map_err(|e| e.to_string()))
    };
    for request in std::io::stdin().lock().lines() {
        let request = request?;
        let reply = match serde_json::from_str::<Request>(&request) {
            Err(e) => Reply::Error(format!("unreadable request {request:?}: {e}")),
            Ok(Request::Clock) => Reply::Clock {
                unix_ns: super::clock::unix_now_ns(),
            },
            Ok(Request::Prepare) => {
                prepared = prepare();
                Reply::Prepared
            }
            Ok(Request::Start) => {
                let sampler = Sampler::start(SysOptions {
                    interval: Duration::from_secs(1),
                    pids: facts
                        .iter()
                        .map(|f| (format!("node {}", f.address), f.pid))
                        .collect(),
                    per_cpu: true,
                })
                .ok();
                // Started without a Prepare first (an older observer): load now.
                let (session, error) = match prepared.take().or_else(prepare) {
                    None => (None, None),
                    Some(Ok(p)) => match p.start() {
                        Ok(s) => (Some(s), None),
                        Err(e) => (None, Some(e.to_string())),
                    },
                    Some(Err(e)) => (None, Some(e)),
                };
                let mode = session.as_ref().map_or("off", |s| s.mode()).to_string();
                running = Some((session, sampler, error));
                Reply::Started { mode }
            }
            Ok(Request::Stop { since_unix_ms }) => {
                let (session, sampler, mut trace_error) = running.take().unwrap_or_default();
                let trace = session.and_then(|s| match s.stop() {
                    Ok(doc) => Some(doc),
                    Err(e) => {
                        trace_error = Some(format!("{e:#}"));
                        None
                    }
                });
                Reply::Stopped(Box::new(NodeObservation {
                    trace,
                    sys: sampler.map(Sampler::stop),
                    events: node
                        .as_ref()
                        .map(|n| n.events_since(since_unix_ms))
                        .unwrap_or_default(),
                    trace_error,
                }))
            }
        };
        send(&mut out, &reply)?;
    }
    // stdin closed: dropping the sessions detaches the BPF programs.
    drop(running);
    Ok(())
}

fn send(out: &mut impl Write, reply: &Reply) -> std::io::Result<()> {
    out.write_all(line(reply).as_bytes())?;
    out.flush()
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
