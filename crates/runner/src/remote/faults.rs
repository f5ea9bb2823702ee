//! Faults to the database nodes on observed hosts (`--observe db2 --fault 10s:kill:db2`): the
//! node's process, as its agent found it, is signalled over a separate SSH command, so a fault
//! never waits behind the agent's channel and the agent keeps measuring through it: kill,
//! pause, stop, and restart of a node this run killed or stopped, started again as it was
//! (`relaunch`); and caps on its drives, in its own cgroup there (`caps`). The faulty disk
//! iodig makes under embedded RocksDB or a managed node (slow, failing, full) is not made on
//! observed hosts.

use super::relaunch::{self, Launch};
use super::ssh::{quote, Ssh, SshHost};
use crate::fault::{cap_done, Fault, FaultAction, FaultHandler};
use iodig_sysstat::cgroup::IoLimit;
use std::sync::{Arc, Mutex};

/// One observed host and its node as faults know it, for the whole run: a kill in one step and
/// a restart in the next reach the same node.
#[derive(Debug, Clone)]
pub struct FaultTarget {
    /// The host as given to `--observe`; faults reach it over SSH commands of their own.
    pub host: SshHost,
    /// The node's pid there, from the agent's hello and then from each restart; None (no node
    /// found) fails its faults.
    pub pid: Option<u32>,
    /// How the node was started, read just before this run killed or stopped it, or why it
    /// could not be read.
    pub launch: Option<Result<Launch, String>>,
    /// The node's cgroup there (relative to the IO hierarchy's root), when it has one of its
    /// own: where a cap goes.
    pub cgroup: Option<String>,
    /// The whole disks under the node's directories there (`vda`): what a cap throttles.
    pub disks: Vec<String>,
    /// A cap of this run is on the node now: lifted by `uncap`, at the step's end, or when
    /// iodig lets go of the hosts (a step that failed).
    pub capped: bool,
}

/// The observed nodes as faults left them, shared by every step's handler.
pub type FaultTargets = Arc<Mutex<Vec<FaultTarget>>>;

/// The observed host a fault's target names: the host as given to `--observe`, or `nodeN`
/// for the N-th of them.
pub fn target_index(target: &str, observed: &[String]) -> Option<usize> {
    if let Some(i) = observed.iter().position(|h| h == target) {
        return Some(i);
    }
    let n: usize = target.strip_prefix("node")?.parse().ok()?;
    (1..=observed.len()).contains(&n).then(|| n - 1)
}

/// Why an action cannot be done to a node on an observed host, if it cannot.
pub fn unsupported(action: &FaultAction) -> Option<&'static str> {
    match action {
        FaultAction::Kill
        | FaultAction::Pause(_)
        | FaultAction::Stop
        | FaultAction::Restart
        | FaultAction::Cap(_)
        | FaultAction::Uncap => None,
        _ => Some(
            "slow, failing and full disks need the faulty disk iodig makes under embedded RocksDB or under a node it starts, which observed hosts do not have; use kill, pause=DURATION, stop, restart, cap=RATE or uncap there",
        ),
    }
}

/// Signals the nodes of observed hosts over SSH; the handler runs on the fault thread.
pub fn handler(ssh: Ssh, targets: FaultTargets) -> FaultHandler {
    let observed: Vec<String> = lock(&targets).iter().map(|t| t.host.spec.clone()).collect();
    Arc::new(move |f: &Fault| {
        let i = target_index(&f.target, &observed)
            .ok_or_else(|| format!("{} is not an observed host", f.target))?;
        let t = lock(&targets)[i].clone();
        if f.action == FaultAction::Restart {
            let done = restart(&ssh, &t)?;
            let mut all = lock(&targets);
            all[i].pid = Some(done.0);
            return Ok((t.host.spec.clone(), done.1));
        }
        if let Some(limit) = cap_limit(&f.action) {
            let done = cap(&ssh, &t, limit)?;
            lock(&targets)[i].capped = limit != IoLimit::None;
            return Ok((t.host.spec.clone(), done));
        }
        let pid = t.pid.ok_or_else(|| {
            format!(
                "the agent on {} found no database node to signal",
                t.host.spec
            )
        })?;
        let (script, done) = script(&f.action, pid)?;
        let printed = ssh
            .output(&t.host, &script, None)
            .map_err(|e| format!("{e:#}"))?;
        if matches!(f.action, FaultAction::Kill | FaultAction::Stop) {
            // Read before the signal, so a later restart can repeat it; a node whose launch
            // could not be read still goes down, and its restart says why it cannot.
            let mut all = lock(&targets);
            all[i].launch = Some(Launch::parse(&printed));
            all[i].pid = None;
        }
        if let FaultAction::Pause(d) = f.action {
            // The host resumes the node by itself (so a lost link cannot leave it stopped); the
            // schedule waits here as it does for a local pause.
            std::thread::sleep(d);
        }
        Ok((t.host.spec.clone(), done))
    })
}

fn lock(targets: &FaultTargets) -> std::sync::MutexGuard<'_, Vec<FaultTarget>> {
    targets
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The limit a cap or uncap sets; None for other actions.
fn cap_limit(action: &FaultAction) -> Option<IoLimit> {
    match action {
        FaultAction::Cap(limit) => Some(*limit),
        FaultAction::Uncap => Some(IoLimit::None),
        _ => None,
    }
}

/// Lifts the caps faults left on observed nodes: a cap never outlives its step. What could not
/// be lifted is said.
pub fn lift_caps(ssh: &Ssh, targets: &FaultTargets) {
    // One lock for the whole list: the mutex is not reentrant.
    let capped: Vec<usize> = lock(targets)
        .iter()
        .enumerate()
        .filter(|(_, t)| t.capped)
        .map(|(i, _)| i)
        .collect();
    for i in capped {
        let t = lock(targets)[i].clone();
        match cap(ssh, &t, IoLimit::None) {
            Ok(_) => lock(targets)[i].capped = false,
            Err(e) => iodig_model::eprintln_lossy!(
                "warning: the cap on {} could not be lifted: {e}",
                t.host.spec
            ),
        }
    }
}

/// Throttles (or frees) the node's block IO on its disks, in its own cgroup on the host, over
/// SSH: what was done, naming the disks and the mechanism.
fn cap(ssh: &Ssh, t: &FaultTarget, limit: IoLimit) -> Result<String, String> {
    // No pid and no launch read: the agent found no node there at all (a kill clears the pid
    // but keeps the launch).
    if t.pid.is_none() && t.launch.is_none() {
        return Err(format!(
            "the agent on {} found no database node to cap",
            t.host.spec
        ));
    }
    let cgroup = t.cgroup.as_deref().ok_or_else(|| {
        format!(
            "the node on {} runs without a cgroup of its own (a service, a container or a managed node has one), so its IO cannot be capped without capping its neighbours",
            t.host.spec
        )
    })?;
    if t.disks.is_empty() {
        return Err(format!(
            "the agent on {} found no disk under the node's directories to cap",
            t.host.spec
        ));
    }
    let how = ssh
        .output(&t.host, &super::caps::script(cgroup, &t.disks, limit), None)
        .map_err(|e| format!("{e:#}"))?;
    Ok(format!(
        "{} on {} ({}) over ssh",
        cap_done(limit),
        t.disks.join(", "),
        how.trim()
    ))
}

/// Starts the node of `t` again from the launch read when this run took it down: the new pid
/// and what was done.
fn restart(ssh: &Ssh, t: &FaultTarget) -> Result<(u32, String), String> {
    let launch = match &t.launch {
        Some(Ok(launch)) => launch,
        Some(Err(why)) => {
            return Err(format!(
                "how the node on {} was started could not be read when it was taken down ({why}); restart it by the host's own means",
                t.host.spec
            ))
        }
        None => {
            return Err(format!(
                "iodig restarts a node on {} only after this run killed or stopped it (it repeats the command line it read then){}; restart it by the host's own means",
                t.host.spec,
                if t.pid.is_some() { ", and the node is still up" } else { "" }
            ))
        }
    };
    let printed = ssh
        .output_with_stdin(&t.host, "sh -s", launch.restart_script().as_bytes())
        .map_err(|e| format!("{e:#}"))?;
    let pid = relaunch::started_pid(&printed)
        .ok_or_else(|| format!("{}: the restart printed no pid", t.host.spec))?;
    Ok((
        pid,
        format!(
            "started again as pid {pid} over ssh, with the command line, environment, directory, user and cgroups it had"
        ),
    ))
}

/// The remote shell script for an action and what it says it did. Root signals directly,
/// anyone else through password-less sudo; the pid is checked to still be a Cassandra JVM, so a
/// reused pid is never signalled.
fn script(action: &FaultAction, pid: u32) -> Result<(String, String), String> {
    let guard = format!(
        "tr '\\0' ' ' < /proc/{pid}/cmdline 2>/dev/null | grep -q CassandraDaemon || {{ echo 'process {pid} is no longer the Cassandra node' >&2; exit 1; }}; \
         if [ \"$(id -u)\" -eq 0 ]; then s=''; else s='sudo -n'; fi"
    );
    // Waits up to N tenths of a second for the process to be gone. A zombie counts as gone:
    // it holds no port or file, and a parent that never reaps it must not cost 30 s.
    let wait = |tenths: u32| {
        format!("i=0; while kill -0 {pid} 2>/dev/null && ! grep -q '^State:.Z' /proc/{pid}/status 2>/dev/null && [ $i -lt {tenths} ]; do sleep 0.1; i=$((i+1)); done")
    };
    let launch = relaunch::capture_script(pid);
    Ok(match action {
        FaultAction::Kill => (
            format!("{guard}; {launch}; $s kill -KILL {pid} && {}", wait(300)),
            format!("killed (SIGKILL) pid {pid} over ssh"),
        ),
        FaultAction::Stop => (
            format!(
                "{guard}; {launch}; $s kill -TERM {pid} && {}; if kill -0 {pid} 2>/dev/null; then $s kill -KILL {pid}; fi",
                wait(300)
            ),
            format!("stopped (SIGTERM, SIGKILL after 30 s) pid {pid} over ssh"),
        ),
        FaultAction::Pause(d) => {
            // Only the resume goes to the background, detached from the session (no stdin,
            // stdout or stderr of it), so ssh returns at once and the resume runs on the host
            // even if the link dies.
            let secs = format!("{:.3}", d.as_secs_f64());
            let resume = quote(&format!("sleep {secs}; kill -CONT {pid}"));
            (
                format!(
                    "{guard}; $s kill -STOP {pid} || exit 1; $s nohup sh -c {resume} </dev/null >/dev/null 2>&1 &"
                ),
                format!(
                    "paused (SIGSTOP, SIGCONT after {} ms by the host) pid {pid} over ssh",
                    d.as_millis()
                ),
            )
        }
        other => return Err(unsupported(other).unwrap_or("not a fault").to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn targets_are_observed_hosts_by_name_or_position() {
        let observed = vec!["db1".to_string(), "root@db2:2222".to_string()];
        assert_eq!(target_index("db1", &observed), Some(0));
        assert_eq!(target_index("root@db2:2222", &observed), Some(1));
        assert_eq!(target_index("node2", &observed), Some(1));
        assert_eq!(target_index("node3", &observed), None);
        assert_eq!(target_index("db3", &observed), None);
    }

    #[test]
    fn process_faults_and_caps_reach_observed_hosts_and_the_faulty_disk_does_not() {
        assert!(unsupported(&FaultAction::Kill).is_none());
        assert!(unsupported(&FaultAction::Pause(Duration::from_secs(1))).is_none());
        assert!(unsupported(&FaultAction::Restart).is_none());
        assert!(unsupported(&FaultAction::Cap(IoLimit::IosPerSec(5))).is_none());
        assert!(unsupported(&FaultAction::Uncap).is_none());
        assert!(unsupported(&FaultAction::Fill)
            .unwrap()
            .contains("faulty disk"));
    }

    #[test]
    fn lifting_caps_tries_each_capped_node_and_keeps_those_it_could_not_free() {
        let target = |capped| FaultTarget {
            host: SshHost::parse("db1").unwrap(),
            pid: Some(1),
            launch: None,
            // No cgroup: the lift fails before any ssh, so the node stays marked capped.
            cgroup: None,
            disks: vec!["vda".into()],
            capped,
        };
        let targets: FaultTargets = Arc::new(Mutex::new(vec![target(true), target(false)]));
        let shared = Arc::clone(&targets);
        // On a thread with a deadline: a lock taken twice would hang here, not fail.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            lift_caps(&Ssh::default(), &shared);
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("lift_caps finished");
        let after: Vec<bool> = lock(&targets).iter().map(|t| t.capped).collect();
        assert_eq!(after, vec![true, false]);
    }

    #[test]
    fn a_node_without_a_cgroup_of_its_own_is_not_capped() {
        let t = FaultTarget {
            host: SshHost::parse("db1").unwrap(),
            pid: Some(1),
            launch: None,
            cgroup: None,
            disks: vec!["vda".into()],
            capped: false,
        };
        let e = cap(&Ssh::default(), &t, IoLimit::IosPerSec(5)).unwrap_err();
        assert!(e.contains("db1") && e.contains("cgroup of its own"), "{e}");
        let nothing_found = FaultTarget { pid: None, ..t };
        let e = cap(&Ssh::default(), &nothing_found, IoLimit::None).unwrap_err();
        assert!(e.contains("found no database node"), "{e}");
    }

    #[test]
    fn scripts_guard_the_pid_and_resume_a_pause_on_the_host() {
        let (s, done) = script(&FaultAction::Kill, 4242).unwrap();
        assert!(s.contains("/proc/4242/cmdline") && s.contains("CassandraDaemon"));
        assert!(s.contains("kill -KILL 4242"));
        assert!(
            s.find("/proc/4242/cmdline)").unwrap() < s.find("kill -KILL").unwrap(),
            "the launch is read before the kill: {s}"
        );
        assert_eq!(done, "killed (SIGKILL) pid 4242 over ssh");
        let (s, _) = script(&FaultAction::Pause(Duration::from_millis(1500)), 7).unwrap();
        assert!(
            s.contains("kill -STOP 7") && s.contains("sleep 1.500; kill -CONT 7"),
            "{s}"
        );
        assert!(script(&FaultAction::Restart, 7).is_err());
    }
}
