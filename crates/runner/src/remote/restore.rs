//! `--restore-each-step` on observed hosts: the agent snapshots its node's dataset after the
//! load and, before each run step, stops the node, has the database put the snapshot back
//! (`NodeOnHost::put_back`), starts the node again exactly as it was started (`relaunch`) and
//! waits until it serves. The agent's side is the free functions here; iodig's side drives
//! every host at once (`RemoteHosts::snapshot`, `RemoteHosts::restore`).

use super::node::NodeOnHost;
use super::protocol::{Reply, Request};
use super::relaunch::{self, Launch};
use super::{Agent, RemoteHosts};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// How long a node may take to stop gracefully (Cassandra drains: flushes every memtable)
/// before it is killed; the data it would write is replaced anyway.
const STOP_GRACE_TENTHS: u32 = 600;
/// How long a node started again may take to serve: a JVM's start and the commit log's (empty)
/// replay, on a host that may be busy.
const SERVE_WAIT: Duration = Duration::from_secs(300);
/// How long iodig waits for an agent's snapshot (a flush of what the load left in memory).
const SNAPSHOT_WAIT: Duration = Duration::from_secs(600);
/// How long iodig waits for an agent's whole restore: the stop, the links and the start.
const RESTORE_WAIT: Duration = Duration::from_secs(60 * 8 + 30);
/// How long the check before the run may take (it reads the node's launch and configuration).
const CHECK_WAIT: Duration = Duration::from_secs(60);

/// One host's node put back to the snapshot, as its agent said.
#[derive(Debug, Clone)]
pub struct RestoredNode {
    /// The node's new pid.
    pub pid: u32,
    /// On the host, from the stop to serving again.
    pub took: Duration,
    /// What was done, in words.
    pub detail: String,
}

impl RemoteHosts {
    /// Before the run: every host's node can be snapshotted and started again as it was.
    /// How, per host; or the first host that cannot, with why.
    pub fn check_restorable(&mut self, dataset: &str) -> Result<Vec<(String, String)>, String> {
        let request = Request::RestoreCheck {
            dataset: dataset.to_string(),
        };
        let mut ready = Vec::new();
        for (host, answer) in self.ask_all(&request, CHECK_WAIT, "restore check") {
            match answer {
                Ok(Reply::RestoreReady { how }) => ready.push((host, how)),
                Ok(other) => return Err(format!("{host}: unexpected reply {other:?}")),
                Err(why) => return Err(format!("{host}: {why}")),
            }
        }
        Ok(ready)
    }

    /// After the load: every host's node snapshots the dataset, all at once; what each
    /// snapshot holds, or why it could not be taken.
    pub fn snapshot(&mut self, dataset: &str, tag: &str) -> Vec<(String, Result<String, String>)> {
        let request = Request::Snapshot {
            dataset: dataset.to_string(),
            tag: tag.to_string(),
        };
        self.ask_all(&request, SNAPSHOT_WAIT, "snapshot")
            .into_iter()
            .map(|(host, answer)| {
                let r = match answer {
                    Ok(Reply::SnapshotTaken { detail }) => Ok(detail),
                    Ok(other) => Err(format!("unexpected reply {other:?}")),
                    Err(why) => Err(why),
                };
                (host, r)
            })
            .collect()
    }

    /// Before a run step: every host's node put back to snapshot `tag`, all at once. Each
    /// outcome is also kept for the step's notes of that host; the nodes' new pids are where
    /// the faults look for them.
    pub fn restore(
        &mut self,
        dataset: &str,
        tag: &str,
    ) -> Vec<(String, Result<RestoredNode, String>)> {
        let request = Request::Restore {
            dataset: dataset.to_string(),
            tag: tag.to_string(),
        };
        let answers = self.ask_all(&request, RESTORE_WAIT, "restore");
        let mut out = Vec::new();
        for (i, (host, answer)) in answers.into_iter().enumerate() {
            let r = match answer {
                Ok(Reply::Restored {
                    pid,
                    took_ms,
                    detail,
                }) => Ok(RestoredNode {
                    pid,
                    took: Duration::from_millis(took_ms),
                    detail,
                }),
                Ok(other) => Err(format!("unexpected reply {other:?}")),
                Err(why) => Err(why),
            };
            let note = match &r {
                Ok(n) => format!(
                    "--restore-each-step: restored before the step in {:.1} s on the host: {}",
                    n.took.as_secs_f64(),
                    n.detail
                ),
                Err(e) => format!(
                    "--restore-each-step: the restore before the step failed, so this node did not start the step from the loaded dataset: {e}"
                ),
            };
            self.agents[i].notes_for_next_step.push(note);
            if let Ok(n) = &r {
                let mut targets = self
                    .fault_targets
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(t) = targets.get_mut(i) {
                    t.pid = Some(n.pid);
                }
            }
            out.push((host, r));
        }
        out
    }

    /// Sends `request` to every agent, then collects each answer (the hosts work in parallel);
    /// per host as given to `--observe`, its reply or why there is none.
    fn ask_all(
        &mut self,
        request: &Request,
        limit: Duration,
        what: &str,
    ) -> Vec<(String, Result<Reply, String>)> {
        // A host whose link died in the step before is reached again first.
        self.reconnect_lost();
        for a in &mut self.agents {
            a.send(request);
        }
        let deadline = Instant::now() + limit;
        self.agents
            .iter_mut()
            .map(|a| {
                let left = deadline.saturating_duration_since(Instant::now());
                (a.host.spec.clone(), answer(a, left, what))
            })
            .collect()
    }
}

/// An agent's next reply; its `Error` is the answer's error (the agent still serves), while
/// silence or a closed channel loses the host, as for any request.
fn answer(a: &mut Agent, limit: Duration, what: &str) -> Result<Reply, String> {
    if let Some(why) = &a.lost {
        return Err(format!("its agent no longer answers ({why})"));
    }
    let lost = match a.replies.recv_timeout(limit) {
        Ok(Ok(Reply::Error(e))) => return Err(e),
        Ok(Ok(r)) => return Ok(r),
        Ok(Err(e)) => format!("{what}: {e}"),
        Err(RecvTimeoutError::Timeout) => format!("{what}: no answer within {} s", limit.as_secs()),
        Err(RecvTimeoutError::Disconnected) => format!("{what}: the connection closed"),
    };
    a.lose(lost.clone());
    Err(lost)
}

/// The agent's answer to [`Request::RestoreCheck`].
pub(super) fn check(node: Option<&dyn NodeOnHost>, pid: u32, dataset: &str) -> Reply {
    let Some(node) = node else {
        return Reply::Error(
            "no database node was found on this host (said when iodig connected), so there is nothing to snapshot".into(),
        );
    };
    let how = match node.restore_check(pid) {
        Ok(how) => how,
        Err(e) => return Reply::Error(format!("its dataset {dataset} cannot be restored: {e}")),
    };
    if let Err(e) = capture_launch(pid).and_then(|_| supervised_by(pid)) {
        return Reply::Error(format!(
            "iodig cannot start the node again after a restore: {e}"
        ));
    }
    Reply::RestoreReady {
        how: format!("{how}; the node stopped and started again as it was started (command line, environment, directory, user, cgroups)"),
    }
}

/// The agent's answer to [`Request::Snapshot`].
pub(super) fn snapshot(node: Option<&dyn NodeOnHost>, pid: u32, dataset: &str, tag: &str) -> Reply {
    let Some(node) = node else {
        return Reply::Error("no database node was found on this host".into());
    };
    match node.snapshot(pid, dataset, tag) {
        Ok(detail) => Reply::SnapshotTaken { detail },
        Err(e) => Reply::Error(e),
    }
}

/// The agent's answer to [`Request::Restore`]: the node stopped, put back, started again as it
/// was, and serving. A node whose data could not be put back is still started again, so a
/// failed restore does not leave it down.
pub(super) fn restore(node: Option<&dyn NodeOnHost>, pid: u32, dataset: &str, tag: &str) -> Reply {
    let Some(node) = node else {
        return Reply::Error("no database node was found on this host".into());
    };
    match restore_node(node, pid, dataset, tag) {
        Ok(r) => Reply::Restored {
            pid: r.pid,
            took_ms: r.took.as_millis() as u64,
            detail: r.detail,
        },
        Err(e) => Reply::Error(e),
    }
}

fn restore_node(
    node: &dyn NodeOnHost,
    pid: u32,
    dataset: &str,
    tag: &str,
) -> Result<RestoredNode, String> {
    // Everything that can be checked is, while the node still runs: a refusal costs no restart.
    node.has_snapshot(dataset, tag)?;
    let launch = capture_launch(pid)?;
    let address = node.facts().address;
    let started = Instant::now();
    let stopped = stop(pid)?;
    let put_back = node.put_back(dataset, tag);
    let new_pid = relaunch(&launch).map_err(|e| match &put_back {
        Ok(_) => e,
        Err(p) => format!("{p}; and then {e}"),
    })?;
    let put_back = put_back.map_err(|e| {
        format!("{e}; the node was started again (pid {new_pid}) on whatever its directories held")
    })?;
    let serving = await_serving(&address, new_pid, &launch)?;
    Ok(RestoredNode {
        pid: new_pid,
        took: started.elapsed(),
        detail: format!(
            "{put_back}; {stopped} pid {pid}, started again as pid {new_pid}, serving on {address} {:.1} s after the start",
            serving.as_secs_f64()
        ),
    })
}

/// The `s` prefix of a script run here: nothing for root, `sudo -n` for anyone else (another
/// user's environment, working directory and signals need it).
const AS_ROOT: &str = "if [ \"$(id -u)\" -eq 0 ]; then s=''; else s='sudo -n'; fi";

/// How the node was started, read from /proc as a fault's kill reads it.
fn capture_launch(pid: u32) -> Result<Launch, String> {
    let script = format!("{AS_ROOT}; {}", relaunch::capture_script(pid));
    let out = Command::new("sh")
        .args(["-c", &script])
        .output()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    Launch::parse(&String::from_utf8_lossy(&out.stdout))
        .map_err(|e| format!("how the node (pid {pid}) was started cannot be read: {e}"))
}

/// Why the node must not be stopped and started by iodig: it is the main process of a systemd
/// unit (whose manager restarts it by its own rules, racing the restore), or the first process
/// of a container (stopping it ends the container).
fn supervised_by(pid: u32) -> Result<(), String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let ns_pids: Vec<&str> = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    if ns_pids.len() > 1 && ns_pids.last() == Some(&"1") {
        return Err(format!(
            "the node (pid {pid}) is the first process of a container, which ends when it stops; run the restore by the container's own means, or leave out --restore-each-step"
        ));
    }
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let unit = cgroups
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .find(|last| last.ends_with(".service"));
    if let Some(unit) = unit {
        let main = Command::new("systemctl")
            .args(["show", "--property=MainPID", "--value", unit])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        if main.as_deref() == Some(pid.to_string().as_str()) {
            return Err(format!(
                "the node (pid {pid}) is the main process of the systemd unit {unit}, which starts it again (or not) by its own rules when it stops; iodig restarts only a node that nothing else restarts"
            ));
        }
    }
    Ok(())
}

/// Stops the node: SIGTERM, then SIGKILL after the grace. What was done.
fn stop(pid: u32) -> Result<&'static str, String> {
    // A zombie counts as gone: it holds no port or file.
    let alive = format!(
        "kill -0 {pid} 2>/dev/null && ! grep -q '^State:.Z' /proc/{pid}/status 2>/dev/null"
    );
    let script = format!(
        "{AS_ROOT}; $s kill -TERM {pid} || exit 1; i=0; while {alive} && [ $i -lt {STOP_GRACE_TENTHS} ]; do sleep 0.1; i=$((i+1)); done; \
         if {alive}; then $s kill -KILL {pid}; i=0; while {alive} && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo killed; else echo stopped; fi; \
         if {alive}; then echo 'still running' >&2; exit 1; fi"
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .output()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    let said = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "the node (pid {pid}) could not be stopped: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(if said.contains("killed") {
        "killed (SIGKILL after the SIGTERM's grace)"
    } else {
        "stopped (SIGTERM)"
    })
}

/// Starts the node again as `launch` says, detached from the agent: its new pid.
fn relaunch(launch: &Launch) -> Result<u32, String> {
    let mut child = Command::new("sh")
        .arg("-s")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(launch.restart_script().as_bytes())
            .map_err(|e| format!("cannot hand the restart to sh: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("the restart did not finish: {e}"))?;
    relaunch::started_pid(&String::from_utf8_lossy(&out.stdout)).ok_or_else(|| {
        format!(
            "the node did not start again: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}

/// Waits until the node at `address` (`IP:PORT`) accepts connections: how long it took. A
/// node that exits first fails the wait, with the end of its output.
fn await_serving(address: &str, pid: u32, launch: &Launch) -> Result<Duration, String> {
    let started = Instant::now();
    let target: std::net::SocketAddr = address
        .parse()
        .map_err(|_| format!("the node's address {address:?} is not IP:PORT"))?;
    loop {
        if std::net::TcpStream::connect_timeout(&target, Duration::from_secs(1)).is_ok() {
            return Ok(started.elapsed());
        }
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let tail = launch
                .output
                .as_deref()
                .and_then(|o| std::fs::read(o).ok())
                .map(|b| String::from_utf8_lossy(&b[b.len().saturating_sub(1500)..]).into_owned())
                .unwrap_or_default();
            return Err(format!(
                "the node started again as pid {pid} exited before serving on {address}: {tail}"
            ));
        }
        if started.elapsed() > SERVE_WAIT {
            return Err(format!(
                "the node started again as pid {pid} did not serve on {address} within {} s",
                SERVE_WAIT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_without_a_node_has_nothing_to_restore() {
        for reply in [
            check(None, 1, "ycsb"),
            snapshot(None, 1, "ycsb", "t"),
            restore(None, 1, "ycsb", "t"),
        ] {
            match reply {
                Reply::Error(e) => assert!(e.contains("no database node"), "{e}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_plain_process_is_supervised_by_nothing_and_its_launch_is_read() {
        let mut child = Command::new("sleep").arg("1000.4343").spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !iodig_sysstat::command_line(child.id()).is_some_and(|c| c.starts_with(b"sleep\0")) {
            assert!(Instant::now() < deadline, "sleep did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(supervised_by(child.id()), Ok(()));
        let launch = capture_launch(child.id()).unwrap();
        assert_eq!(launch.argv, ["sleep", "1000.4343"]);
        assert_eq!(stop(child.id()), Ok("stopped (SIGTERM)"));
        let _ = child.wait();
    }
}
