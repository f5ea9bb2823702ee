//! Processes by pid: is a recorded node still the process we started, and stopping it
//! (SIGTERM, wait, SIGKILL) without ever signalling a pid the kernel gave to someone else.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::state::NodeInfo;

/// Field 22 of /proc/PID/stat (start time in clock ticks since boot) and the state letter.
fn stat(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

pub fn start_ticks(pid: u32) -> Option<u64> {
    stat(pid).map(|(_, t)| t)
}

/// True while the recorded pid is alive, not a zombie, and still the process we started: the
/// same start time, or when that could not be read at start, still a Cassandra daemon (so a
/// pid the kernel has given to another process is never signalled).
pub fn node_alive(node: &NodeInfo) -> bool {
    match stat(node.pid) {
        Some((state, ticks)) => {
            state != 'Z'
                && state != 'X'
                && if node.start_ticks == 0 {
                    runs_cassandra(node.pid)
                } else {
                    ticks == node.start_ticks
                }
        }
        None => false,
    }
}

/// Whether `pid`'s command line is a Cassandra daemon's.
fn runs_cassandra(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
        c.split(|b| *b == 0)
            .any(|arg| arg == crate::DAEMON_CLASS.as_bytes())
    })
}

/// Collects the exit status when the node is our own child, so it does not linger as a zombie.
fn reap(pid: u32) {
    // SAFETY: waitpid with WNOHANG on a plain pid only reads the exit status (ECHILD when the
    // process is not our child); no memory is shared.
    unsafe {
        libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG);
    }
}

pub(crate) fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) with a positive pid we verified to be our node just before.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// True once every thread of `pid` has exited. The JVM's main thread can exit (the process then
/// reads as a zombie) while other threads still hold its sockets; a node counts as stopped only
/// when its ports are released, so the next `up` can bind them.
fn all_threads_exited(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.flatten().all(|t| {
        let tid = t.file_name().to_string_lossy().parse::<u32>().unwrap_or(0);
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"))
            .ok()
            .and_then(|text| text.rfind(')').and_then(|i| text[i + 2..].chars().next()))
            .is_none_or(|state| state == 'Z' || state == 'X')
    })
}

/// Moves a node that just started into a cgroup of its own, before the JVM has read more than
/// its first jars, so its data, commit log and flush IO is charged to it; every thread it
/// starts inherits it. None, said once, where cgroups cannot be made.
pub fn own_cgroup(address: &str, pid: u32) -> Option<PathBuf> {
    iodig_sysstat::cgroup::place(&format!("cassandra-{address}"), pid)
        .map_err(|e| {
            iodig_model::eprintln_lossy!(
                "note: node {address} runs without a cgroup of its own ({e}); its block IO is traced with the other nodes'"
            );
        })
        .ok()
}

/// Stops one node, waits until its threads are gone (its sockets released), and removes its
/// cgroup, empty by then (a node that could not be stopped keeps it).
pub fn stop(node: &NodeInfo, grace: Duration) -> &'static str {
    let how = stop_process(node, grace);
    if how != "not running" {
        let deadline = Instant::now() + Duration::from_secs(15);
        while !all_threads_exited(node.pid) && Instant::now() < deadline {
            reap(node.pid);
            std::thread::sleep(Duration::from_millis(50));
        }
        reap(node.pid);
    }
    if let Some(cg) = &node.cgroup {
        let _ = iodig_sysstat::cgroup::remove(cg);
    }
    how
}

/// SIGTERM, up to `grace` for Cassandra's drain, then SIGKILL.
fn stop_process(node: &NodeInfo, grace: Duration) -> &'static str {
    reap(node.pid);
    if !node_alive(node) {
        return "not running";
    }
    signal(node.pid, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        reap(node.pid);
        if !node_alive(node) {
            return "terminated";
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if node_alive(node) {
        signal(node.pid, libc::SIGKILL);
        for _ in 0..100 {
            reap(node.pid);
            if !node_alive(node) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    "killed"
}

/// Kills a node with SIGKILL, as a crash would, and waits until its threads are gone (its
/// sockets released). Its cgroup stays for a restart to reuse.
pub fn kill(node: &NodeInfo) -> &'static str {
    reap(node.pid);
    if !node_alive(node) {
        return "not running";
    }
    signal(node.pid, libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !all_threads_exited(node.pid) && Instant::now() < deadline {
        reap(node.pid);
        std::thread::sleep(Duration::from_millis(20));
    }
    reap(node.pid);
    "killed (SIGKILL)"
}

/// Whether the node is frozen (SIGSTOP: state `T`), as a killed iodig may leave it when it
/// died in a pause or while reading another node alone.
pub fn frozen(node: &NodeInfo) -> bool {
    node_alive(node) && stat(node.pid).is_some_and(|(state, _)| state == 'T')
}

/// Freezes a node with SIGSTOP for `pause`, then lets it go on with SIGCONT: a stalled process
/// (a long GC pause, a hung device) that keeps its sockets open.
pub fn pause(node: &NodeInfo, pause: Duration) -> &'static str {
    if !node_alive(node) {
        return "not running";
    }
    signal(node.pid, libc::SIGSTOP);
    std::thread::sleep(pause);
    signal(node.pid, libc::SIGCONT);
    "paused (SIGSTOP, then SIGCONT)"
}
