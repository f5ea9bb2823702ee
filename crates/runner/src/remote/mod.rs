//! Observing the database's nodes on other hosts (`--observe`): over the user's OpenSSH, iodig
//! starts its own binary there as an agent (sending it when the host has none), which finds the
//! node, traces the devices under its directories, samples the system and reads the node's
//! events during each step. Every step is bracketed by clock comparisons over the same channel,
//! and the host's files are put on this machine's clock before they are written.
//!
//! `ssh` reaches hosts, `floor` is what iodig's binary and its tracer need of one, `protocol`
//! is what travels, `agent` is the far end, `clock` the offsets,
//! `faults` signals the observed nodes (`--fault …:kill:HOST`) over SSH commands of their own,
//! and `relaunch` starts one it took down again as it was; `restore` puts a node's dataset
//! back to its snapshot before each step (`--restore-each-step`); `stream` keeps what each
//! agent streams during a step and publishes it live.
//! A host that cannot be reached fails the run before it starts; one whose link dies mid-step
//! keeps what it streamed, marked partial from there, gets a fresh agent for the next step, and
//! the run goes on.

pub mod agent;
pub mod caps;
pub mod clients;
pub mod clock;
pub mod elf;
pub mod faults;
pub mod floor;
pub mod node;
pub mod protocol;
pub mod relaunch;
pub mod restore;
pub mod ssh;
mod stream;

use crate::errors::{PrivilegeError, UsageError};
use crate::live::{LiveSink, NoLive};
use anyhow::{anyhow, Context, Result};
use iodig_iotrace::{TraceMode, TraceOptions};
use iodig_model::cluster::{
    applied_offset_ms, ClockSample, NodeObservation, NodeStep, ObservedHost,
};
use protocol::{line, Hello, Reply, Request};
use ssh::{Ssh, SshHost};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;
use stream::{HostStream, SharedStream};

/// How long a host may take to answer: the introduction (ssh, finding the node, checking the
/// tracer), starting (attaching BPF programs), stopping (building the trace document).
const HELLO_WAIT: Duration = Duration::from_secs(60);
const START_WAIT: Duration = Duration::from_secs(30);
const STOP_WAIT: Duration = Duration::from_secs(60);
const PING_WAIT: Duration = Duration::from_secs(5);

/// Parses `--observe` / `--clients` values: exit 2 naming the bad one before anything starts.
pub fn parse_hosts(flag: &'static str, values: &[String]) -> Result<Vec<SshHost>> {
    let mut hosts: Vec<SshHost> = Vec::new();
    for v in values {
        let mut h = SshHost::parse(v).map_err(|e| UsageError(format!("{flag} {e}")))?;
        h.flag = flag;
        if hosts.iter().any(|o| o.dir_name() == h.dir_name()) {
            return Err(UsageError(format!("{flag}: {:?} is given twice", h.spec)).into());
        }
        hosts.push(h);
    }
    Ok(hosts)
}

/// What a run asks of its remote observers.
#[derive(Clone)]
pub struct RemoteOptions {
    /// The `--observe` hosts, parsed.
    pub hosts: Vec<SshHost>,
    /// How ssh is called (`ssh.config`).
    pub ssh: Ssh,
    /// The binding, so the agent knows which node to look for.
    pub db: String,
    /// Client addresses of the database's nodes, to tell the agent which node is the host's.
    pub node_addresses: Vec<String>,
    /// The trace mode and slot width the agents use; the devices are each host's own.
    pub trace: TraceOptions,
    /// `--events`: each agent streams every IO of its host too, sent back with the step.
    pub io_events: bool,
    /// This iodig's git revision, when known: an agent built from another one is said.
    pub revision: Option<String>,
}

/// One host's agent, live.
struct Agent {
    host: SshHost,
    child: Child,
    stdin: Option<ChildStdin>,
    replies: Receiver<Result<Reply, String>>,
    hello: Hello,
    /// Why the host no longer answers, once it does not.
    lost: Option<String>,
    clock_before: Option<ClockSample>,
    /// What the last `start` said.
    mode: Option<String>,
    /// Why its tracer fell back, once said (each step's trace says it again).
    fallback_said: bool,
    /// What it streamed during the current step, kept by its reader as it arrives.
    stream: SharedStream,
    /// Said of the host between steps (its restore), added to the next step's notes.
    notes_for_next_step: Vec<String>,
}

/// Every observed host's agent, for the whole run.
pub struct RemoteHosts {
    agents: Vec<Agent>,
    facts: Vec<ObservedHost>,
    /// How the agents were started: a host whose link died gets a fresh one the same way.
    opts: RemoteOptions,
    /// Where the agents' streamed figures are published as they arrive.
    sink: Arc<dyn LiveSink>,
    ssh: Ssh,
    /// The nodes as faults left them (pid, launch), kept across steps.
    fault_targets: faults::FaultTargets,
}

/// One host's share of a step, ready to be written.
pub struct NodeResult {
    /// Its directory's name under the step's `nodes/`.
    pub dir_name: String,
    /// Its entry in the step's `nodes` (clock offsets, trace mode, why it is partial); `dir`
    /// is set where the files are written.
    pub step: NodeStep,
    /// What its agent measured, on this machine's clock; None when it did not answer.
    pub observation: Option<NodeObservation>,
}

impl RemoteHosts {
    /// Reaches every host, sends the binary where needed and starts the agents; any host that
    /// cannot be reached fails the run here, with its name and the fix.
    pub fn connect(opts: &RemoteOptions) -> Result<RemoteHosts> {
        let mut agents = Vec::new();
        let mut facts = Vec::new();
        for host in &opts.hosts {
            let (agent, fact) = Agent::start(host, opts)?;
            for n in &fact.notes {
                iodig_model::eprintln_lossy!("note: {}: {n}", host.spec);
            }
            agents.push(agent);
            facts.push(fact);
        }
        let mut same_kernel: Vec<&str> = facts.iter().map(|f| f.boot_id.as_str()).collect();
        same_kernel.sort_unstable();
        same_kernel.dedup();
        if same_kernel.len() < facts.len() {
            iodig_model::eprintln_lossy!("note: some observed hosts share one kernel (same boot id): their device totals are the same IO, and each node's own share comes from its cgroup");
        }
        let fault_targets = agents
            .iter()
            .zip(&facts)
            .map(|(a, f)| faults::FaultTarget {
                host: a.host.clone(),
                pid: f.node.as_ref().map(|n| n.pid),
                launch: None,
                cgroup: f
                    .node
                    .as_ref()
                    .and_then(|n| n.cgroup.clone())
                    .filter(|c| c != "/"),
                disks: f.devices.clone(),
                capped: false,
            })
            .collect();
        Ok(RemoteHosts {
            agents,
            facts,
            opts: opts.clone(),
            sink: Arc::new(NoLive),
            ssh: opts.ssh.clone(),
            fault_targets: Arc::new(std::sync::Mutex::new(fault_targets)),
        })
    }

    /// Faults to the observed hosts' nodes (kill, pause, stop, restart, cap, uncap), each over
    /// an SSH command.
    pub fn fault_handler(&self) -> crate::fault::FaultHandler {
        faults::handler(self.ssh.clone(), Arc::clone(&self.fault_targets))
    }

    /// After a step: lifts the caps its faults left on the observed nodes.
    pub fn lift_caps(&self) {
        faults::lift_caps(&self.ssh, &self.fault_targets);
    }

    /// What the hosts said about themselves, for run.json.
    pub fn facts(&self) -> &[ObservedHost] {
        &self.facts
    }

    /// Publishes what the agents stream during each step to `sink` as it arrives (each host
    /// under its node's address, else its name), on this machine's clock.
    pub fn watch(&mut self, sink: Arc<dyn LiveSink>) {
        for a in &self.agents {
            HostStream::lock(&a.stream).watch(Arc::clone(&sink));
        }
        self.sink = sink;
    }

    /// Before a step: a host whose link died gets a fresh agent (the same checks as the
    /// first; also done before a restore or a cache drop, which come first), then each host's
    /// clock.
    pub fn before_step(&mut self) {
        self.reconnect_lost();
        for a in &mut self.agents {
            a.clock_before = a.clock();
        }
    }

    /// Starts a fresh agent, over a new SSH session, on each host whose link died, so the
    /// following steps are whole again; one that cannot be reached stays lost and its part of
    /// the step is missing (said, and marked partial), as before.
    fn reconnect_lost(&mut self) {
        for (i, a) in self.agents.iter_mut().enumerate() {
            let Some(why) = a.lost.clone() else { continue };
            let host = a.host.clone();
            iodig_model::eprintln_lossy!(
                "note: {}: its link was lost ({why}); starting a fresh agent over SSH for the next step",
                host.spec
            );
            match Agent::start(&host, &self.opts) {
                Ok((fresh, fact)) => {
                    HostStream::lock(&fresh.stream).watch(Arc::clone(&self.sink));
                    // The node may run under another pid now; faults aim at the one found.
                    if let Some(t) = self
                        .fault_targets
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .get_mut(i)
                    {
                        if let Some(n) = &fact.node {
                            t.pid = Some(n.pid);
                        }
                    }
                    *a = fresh;
                    iodig_model::eprintln_lossy!(
                        "note: {}: reconnected: a fresh agent observes it from this step on",
                        host.spec
                    );
                }
                Err(e) => iodig_model::eprintln_lossy!(
                    "warning: {}: cannot reconnect ({e:#}); its part of this step is missing",
                    host.spec
                ),
            }
        }
    }

    /// `--drop-caches`: every host's page cache emptied, all at once; per host (as given to
    /// `--observe`) its size before and after, or why not (a host whose agent is not root,
    /// one that no longer answers).
    pub fn drop_caches(&mut self) -> Vec<(String, crate::page_cache::Dropped)> {
        // Writing dirty pages back first can take a while on a host that just loaded data.
        const DROP_WAIT: Duration = Duration::from_secs(120);
        // A host whose link died in the step before is reached again first.
        self.reconnect_lost();
        for a in &mut self.agents {
            a.send(&Request::DropCaches);
        }
        self.agents
            .iter_mut()
            .map(|a| {
                let r = match a.wait(DROP_WAIT, "drop caches") {
                    Some(Reply::CachesDropped { before, after }) => Ok((before, after)),
                    Some(other) => Err(format!("unexpected reply {other:?}")),
                    None => Err(a
                        .lost
                        .clone()
                        .unwrap_or_else(|| "its agent could not (said above)".into())),
                };
                (a.host.spec.clone(), r)
            })
            .collect()
    }

    /// Before a step: every agent is told at once to load its tracer (a few hundred ms on an
    /// idle host, seconds on a busy one); [`RemoteHosts::await_prepared`] then waits for them,
    /// so the local tracer loads in the meantime.
    pub fn prepare(&mut self) {
        for a in &mut self.agents {
            a.send(&Request::Prepare);
        }
    }

    /// Waits until every agent loaded its tracer (or gave up on it).
    pub fn await_prepared(&mut self) {
        for a in &mut self.agents {
            let _ = a.wait(START_WAIT, "prepare");
        }
    }

    /// Measurement started: every agent is told at once to attach what it prepared;
    /// [`RemoteHosts::await_started`] then waits for them.
    pub fn start(&mut self) {
        for a in &mut self.agents {
            a.mode = None;
            // Published on this machine's clock as the offset before the step says; the files
            // get the step's mean of both samples.
            HostStream::lock(&a.stream).start_step(applied_offset_ms(a.clock_before, None));
            a.send(&Request::Start);
        }
    }

    /// Waits until every agent said it started (or gave up on it).
    pub fn await_started(&mut self) {
        for a in &mut self.agents {
            if let Some(Reply::Started { mode }) = a.wait(START_WAIT, "start") {
                a.mode = Some(mode);
            }
        }
    }

    /// Measurement ended: every agent stops, hands over its results and is asked its clock
    /// again.
    pub fn stop(&mut self, since_unix_ms: u64) -> Vec<NodeResult> {
        for a in &mut self.agents {
            a.send(&Request::Stop { since_unix_ms });
        }
        let mut results = Vec::new();
        for a in &mut self.agents {
            let observation = match a.wait(STOP_WAIT, "stop") {
                Some(Reply::Stopped(o)) => Some(*o),
                _ => None,
            };
            let clock_after = a.clock();
            let applied = applied_offset_ms(a.clock_before, clock_after);
            HostStream::lock(&a.stream).end_step();
            let fallback = observation
                .as_ref()
                .and_then(|o| o.trace.as_ref())
                .and_then(|t| t.note.as_deref());
            if let (Some(why), false) = (fallback, a.fallback_said) {
                // Said once for the run, where the user reads it, not only in the step's files.
                iodig_model::eprintln_lossy!("note: {}: {why}", a.host.spec);
                a.fallback_said = true;
            }
            // A host lost mid-step: its part is what it streamed before the link died.
            let (observation, partial, partial_from_unix_ms) = match observation {
                Some(o) => (Some(o), a.lost.clone(), None),
                None => match &a.lost {
                    Some(why) => a.streamed_part(why, self.opts.trace.slot_ms, applied),
                    None => (None, None, None),
                },
            };
            let mut observation = observation;
            if let Some(o) = &mut observation {
                o.shift_to_local(applied);
            }
            if let Some(c) = a.clock_before.or(clock_after) {
                let slot = f64::from(slot_ms_of(&observation));
                if c.offset_ms.abs() > slot {
                    iodig_model::eprintln_lossy!(
                        "warning: {}: its clock is {:+.1} ms off this machine's (more than a {slot} ms slot); its timestamps are shifted by {applied} ms",
                        a.host.spec,
                        c.offset_ms
                    );
                }
            }
            results.push(NodeResult {
                dir_name: a.host.dir_name(),
                step: NodeStep {
                    host: a.host.spec.clone(),
                    // Set where the files are written.
                    dir: String::new(),
                    clock_before: a.clock_before,
                    clock_after,
                    applied_offset_ms: applied,
                    trace_mode: observation
                        .as_ref()
                        .and_then(|o| o.trace.as_ref().map(|t| t.mode.clone()))
                        .or_else(|| a.mode.clone()),
                    partial,
                    partial_from_unix_ms,
                    notes: std::mem::take(&mut a.notes_for_next_step)
                        .into_iter()
                        .chain(observation.iter().flat_map(|o| o.notes.clone()))
                        .collect(),
                },
                observation,
            });
        }
        results
    }
}

/// The trace's slot width, the bound a clock offset is judged against (100 ms without a trace).
fn slot_ms_of(o: &Option<NodeObservation>) -> u32 {
    o.as_ref()
        .and_then(|o| o.trace.as_ref().map(|t| t.slot_ms))
        .unwrap_or(100)
}

impl Agent {
    /// The host's part of a step whose link died mid-step, from what it streamed: the
    /// observation (on the host's clock), why and from when it is partial (this machine's
    /// clock, `applied` being the host's offset).
    fn streamed_part(
        &self,
        why: &str,
        slot_ms: u32,
        applied: i64,
    ) -> (Option<NodeObservation>, Option<String>, Option<u64>) {
        let st = HostStream::lock(&self.stream);
        let when = match (st.closed_at(), st.last_arrival()) {
            (Some(t), _) => format!("at {}", utc(t)),
            (None, Some(t)) => format!("after its last word at {}", utc(t)),
            (None, None) => "during the step".to_string(),
        };
        let lost = format!("the link to {} was lost {when}: {why}", self.host.spec);
        let observation = st.partial_observation(self.mode.as_deref(), slot_ms, &lost);
        let from = st
            .partial_from()
            .filter(|_| observation.is_some())
            .map(|t| t.saturating_add_signed(-applied));
        let partial = match from {
            Some(t) => format!(
                "{lost}; its files hold the {} chunk{} it streamed before, partial from {} on",
                st.chunks(),
                if st.chunks() == 1 { "" } else { "s" },
                utc(t)
            ),
            None => format!("{lost}; nothing of the step arrived before"),
        };
        (observation, Some(partial), from)
    }

    fn start(host: &SshHost, opts: &RemoteOptions) -> Result<(Agent, ObservedHost)> {
        let ssh::Provisioned {
            remote: remote_bin,
            how,
            probe,
        } = ssh::provision(&opts.ssh, host, ssh::Role::Agent)?;
        let kernel_notes = floor::kernel_notes(
            &probe,
            matches!(opts.trace.mode, TraceMode::Auto | TraceMode::Ebpf),
        );
        let label = format!("{} {}", host.flag, host.spec);
        if let Some(why) = floor::ebpf_refusal(&label, &probe, opts.trace.mode == TraceMode::Ebpf) {
            // As `--trace ebpf` on this machine: asked for by name, missing, exit 3.
            return Err(PrivilegeError(why).into());
        }
        let node = node_address_of(&opts.ssh, host, &opts.node_addresses);
        let mut args = vec!["agent".to_string(), "--db".into(), opts.db.clone()];
        if let Some(n) = &node {
            args.extend(["--node".into(), n.clone()]);
        }
        let mode = match opts.trace.mode {
            TraceMode::Auto => "auto",
            TraceMode::Ebpf => "ebpf",
            TraceMode::Diskstats => "diskstats",
            TraceMode::Off => "off",
        };
        args.extend(["--trace".into(), mode.into()]);
        args.extend(["--slot-ms".into(), opts.trace.slot_ms.to_string()]);
        if opts.io_events {
            args.push("--events".into());
        }
        let args: Vec<String> = args.iter().map(|a| ssh::quote(a)).collect();
        let args = args.join(" ");
        // Root runs it as is; otherwise password-less sudo if there is one, else as the user
        // (the agent then falls back to diskstats and says so).
        let script = format!(
            "b=\"{remote_bin}\"; if [ \"$(id -u)\" -eq 0 ]; then exec \"$b\" {args}; elif sudo -n true 2>/dev/null; then exec sudo -n \"$b\" {args}; else exec \"$b\" {args}; fi"
        );
        let mut cmd = opts.ssh.command(host, &script);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group: the terminal's Ctrl-C goes to iodig, which ends the step and
        // then closes the agent's stdin, instead of killing ssh mid-step.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().context("cannot run `ssh`")?;
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let (tx, replies) = std::sync::mpsc::channel();
        let stream = HostStream::shared(host.spec.clone());
        let spec_lost = host.spec.clone();
        let chunks = Arc::clone(&stream);
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let msg = match l {
                    Ok(l) => serde_json::from_str::<Reply>(&l)
                        .map_err(|e| format!("unreadable reply ({e}): {l}")),
                    Err(e) => Err(e.to_string()),
                };
                // Chunks come on the agent's own: kept and published here as they arrive, never
                // taken for the answer to a request.
                let msg = match msg {
                    Ok(Reply::Chunk(c)) => {
                        HostStream::lock(&chunks).take(*c, now_unix_ms());
                        continue;
                    }
                    other => other,
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
            let now = now_unix_ms();
            if HostStream::lock(&chunks).closed(now) {
                // Said when it happens: the step may have long to run.
                iodig_model::eprintln_lossy!(
                    "warning: {spec_lost}: the link was lost mid-step at {}; what it streamed until then is kept",
                    utc(now)
                );
            }
            let _ = tx.send(Err("the connection closed".into()));
        });
        let spec = host.spec.clone();
        let (err_tx, err_rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                // Before the introduction, stderr is why ssh failed; after it, the agent's notes.
                let _ = err_tx.send(l.clone());
                if !l.trim().is_empty() {
                    iodig_model::eprintln_lossy!("{spec}: {l}");
                }
            }
        });
        let mut agent = Agent {
            host: host.clone(),
            child,
            stdin: None,
            replies,
            hello: Hello::default(),
            lost: None,
            clock_before: None,
            mode: None,
            fallback_said: false,
            stream,
            notes_for_next_step: Vec::new(),
        };
        agent.stdin = agent.child.stdin.take();
        match agent.replies.recv_timeout(HELLO_WAIT) {
            Ok(Ok(Reply::Hello(h))) => agent.hello = *h,
            other => {
                let said: Vec<String> = err_rx.try_iter().collect();
                let why = match other {
                    Ok(Ok(r)) => format!("unexpected first reply {r:?}"),
                    Ok(Err(e)) => e,
                    Err(_) => format!("no answer within {} s", HELLO_WAIT.as_secs()),
                };
                return Err(anyhow!("{} ({why})", ssh::failure(host, &said.join("\n"))));
            }
        }
        let h = &agent.hello;
        if let Some(n) = &h.node {
            HostStream::lock(&agent.stream).set_place(n.address.clone());
        }
        let mut notes = kernel_notes;
        notes.extend(floor::version_note(
            (&h.version, h.revision.as_deref()),
            (env!("CARGO_PKG_VERSION"), opts.revision.as_deref()),
        ));
        let fact = ObservedHost {
            host: host.spec.clone(),
            hostname: h.hostname.clone(),
            boot_id: h.boot_id.clone(),
            agent: format!(
                "{how}; runs as {}",
                if h.root { "root" } else { "the ssh user" }
            ),
            node: h.node.clone(),
            devices: h.devices.clone(),
            // What the kernel lacks first: the agent's own fallbacks follow from it.
            notes: notes.into_iter().chain(h.notes.clone()).collect(),
            environment: h.environment.clone(),
        };
        Ok((agent, fact))
    }

    fn send(&mut self, r: &Request) {
        if self.lost.is_some() {
            return;
        }
        let ok = self.stdin.as_mut().is_some_and(|s| {
            s.write_all(line(r).as_bytes())
                .and_then(|()| s.flush())
                .is_ok()
        });
        if !ok {
            self.lose("the connection closed".into());
        }
    }

    /// The next reply, or None (and the host marked lost) when it does not come in time.
    fn wait(&mut self, limit: Duration, what: &str) -> Option<Reply> {
        if self.lost.is_some() {
            return None;
        }
        match self.replies.recv_timeout(limit) {
            Ok(Ok(Reply::Error(e))) => {
                iodig_model::eprintln_lossy!("warning: {}: {what}: {e}", self.host.spec);
                None
            }
            Ok(Ok(r)) => Some(r),
            Ok(Err(e)) => {
                self.lose(format!("{what}: {e}"));
                None
            }
            Err(RecvTimeoutError::Timeout) => {
                self.lose(format!("{what}: no answer within {} s", limit.as_secs()));
                None
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.lose(format!("{what}: the connection closed"));
                None
            }
        }
    }

    fn lose(&mut self, why: String) {
        iodig_model::eprintln_lossy!(
            "warning: {}: lost ({why}); its part of the step is what it streamed before, the run goes on",
            self.host.spec
        );
        self.lost = Some(why);
        self.stdin = None;
    }

    /// The clock offset, from the best of a few pings.
    fn clock(&mut self) -> Option<ClockSample> {
        let mut pings = Vec::new();
        for _ in 0..clock::PINGS {
            let sent_ns = clock::unix_now_ns();
            self.send(&Request::Clock);
            match self.wait(PING_WAIT, "clock") {
                Some(Reply::Clock { unix_ns }) => pings.push(clock::Ping {
                    sent_ns,
                    remote_ns: unix_ns,
                    received_ns: clock::unix_now_ns(),
                }),
                _ => break,
            }
        }
        clock::best(&pings)
    }
}

impl Drop for RemoteHosts {
    /// A step that failed never reached its end: its caps are lifted here.
    fn drop(&mut self) {
        self.lift_caps();
    }
}

impl Drop for Agent {
    /// Closing stdin ends the agent, which detaches everything; ssh then exits. A host that
    /// does not let go within a few seconds has its ssh ended.
    fn drop(&mut self) {
        self.stdin = None;
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn now_unix_ms() -> u64 {
    clock::unix_now_ns() / 1_000_000
}

/// A time as messages show it (RFC 3339, UTC, ms).
fn utc(unix_ms: u64) -> String {
    crate::utc::format_utc(std::time::UNIX_EPOCH + Duration::from_millis(unix_ms))
}

/// Which node address is the host's: the one ssh connects to, when it is a node's; else none
/// (the agent then looks for the only node on the host).
fn node_address_of(ssh: &Ssh, host: &SshHost, nodes: &[String]) -> Option<String> {
    let target = ssh.resolved_hostname(host).unwrap_or_else(|| {
        host.destination
            .rsplit('@')
            .next()
            .unwrap_or_default()
            .to_string()
    });
    if nodes.contains(&target) {
        return Some(target);
    }
    use std::net::ToSocketAddrs;
    let ips: Vec<String> = (target.as_str(), 0)
        .to_socket_addrs()
        .map(|a| a.map(|s| s.ip().to_string()).collect())
        .unwrap_or_default();
    nodes.iter().find(|n| ips.contains(n)).cloned()
}
