//! Faults to the database nodes on observed hosts (`--observe db2 --fault 10s:kill:db2`): the
//! node's process, as its agent found it, is signalled over a separate SSH command, so a fault
//! never waits behind the agent's channel and the agent keeps measuring through it. Only what
//! needs no knowledge of how the host runs the node: kill, pause, stop. A node iodig did not
//! start is restarted by the host's own means; the outage shows on the time line either way.

use super::ssh::{quote, Ssh, SshHost};
use crate::fault::{Fault, FaultAction, FaultHandler};
use std::sync::Arc;

/// One observed host and the pid of its node, when the agent found one.
#[derive(Debug, Clone)]
pub struct FaultTarget {
    /// The host as given to `--observe`; faults reach it over SSH commands of their own.
    pub host: SshHost,
    /// The node's pid there, from the agent's hello; None (no node found) fails its faults.
    pub pid: Option<u32>,
}

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
        FaultAction::Kill | FaultAction::Pause(_) | FaultAction::Stop => None,
        FaultAction::Restart => Some(
            "iodig did not start the node there, so it cannot start it again; restart it by the host's own means (systemctl, docker) and the outage still shows on the time line",
        ),
        _ => Some(
            "device faults on observed hosts are not supported yet; use kill, pause=DURATION or stop there",
        ),
    }
}

/// Signals the nodes of observed hosts over SSH; the handler runs on the fault thread.
pub fn handler(ssh: Ssh, targets: Vec<FaultTarget>) -> FaultHandler {
    let observed: Vec<String> = targets.iter().map(|t| t.host.spec.clone()).collect();
    Arc::new(move |f: &Fault| {
        let t = target_index(&f.target, &observed)
            .and_then(|i| targets.get(i))
            .ok_or_else(|| format!("{} is not an observed host", f.target))?;
        let pid = t.pid.ok_or_else(|| {
            format!(
                "the agent on {} found no database node to signal",
                t.host.spec
            )
        })?;
        let (script, done) = script(&f.action, pid)?;
        ssh.output(&t.host, &script, None)
            .map_err(|e| format!("{e:#}"))?;
        if let FaultAction::Pause(d) = f.action {
            // The host resumes the node by itself (so a lost link cannot leave it stopped); the
            // schedule waits here as it does for a local pause.
            std::thread::sleep(d);
        }
        Ok((t.host.spec.clone(), done))
    })
}

/// The remote shell script for an action and what it says it did. Root signals directly,
/// anyone else through password-less sudo; the pid is checked to still be a Cassandra JVM, so a
/// reused pid is never signalled.
fn script(action: &FaultAction, pid: u32) -> Result<(String, String), String> {
    let guard = format!(
        "tr '\\0' ' ' < /proc/{pid}/cmdline 2>/dev/null | grep -q CassandraDaemon || {{ echo 'process {pid} is no longer the Cassandra node' >&2; exit 1; }}; \
         if [ \"$(id -u)\" -eq 0 ]; then s=''; else s='sudo -n'; fi"
    );
    // Waits up to N tenths of a second for the process to be gone.
    let wait = |tenths: u32| {
        format!("i=0; while kill -0 {pid} 2>/dev/null && [ $i -lt {tenths} ]; do sleep 0.1; i=$((i+1)); done")
    };
    Ok(match action {
        FaultAction::Kill => (
            format!("{guard}; $s kill -KILL {pid} && {}", wait(300)),
            format!("killed (SIGKILL) pid {pid} over ssh"),
        ),
        FaultAction::Stop => (
            format!(
                "{guard}; $s kill -TERM {pid} && {}; if kill -0 {pid} 2>/dev/null; then $s kill -KILL {pid}; fi",
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
    fn only_process_faults_reach_observed_hosts() {
        assert!(unsupported(&FaultAction::Kill).is_none());
        assert!(unsupported(&FaultAction::Pause(Duration::from_secs(1))).is_none());
        assert!(unsupported(&FaultAction::Restart)
            .unwrap()
            .contains("host's own means"));
        assert!(unsupported(&FaultAction::Uncap)
            .unwrap()
            .contains("not supported"));
    }

    #[test]
    fn scripts_guard_the_pid_and_resume_a_pause_on_the_host() {
        let (s, done) = script(&FaultAction::Kill, 4242).unwrap();
        assert!(s.contains("/proc/4242/cmdline") && s.contains("CassandraDaemon"));
        assert!(s.contains("kill -KILL 4242"));
        assert_eq!(done, "killed (SIGKILL) pid 4242 over ssh");
        let (s, _) = script(&FaultAction::Pause(Duration::from_millis(1500)), 7).unwrap();
        assert!(
            s.contains("kill -STOP 7") && s.contains("sleep 1.500; kill -CONT 7"),
            "{s}"
        );
        assert!(script(&FaultAction::Restart, 7).is_err());
    }
}
