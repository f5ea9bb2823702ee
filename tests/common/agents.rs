//! The agents that a test's `run --observe` starts on this machine through its own sshd: the
//! observed RocksDB run the remote tests share, the agents found by pid under that sshd, and
//! none left after the run. The tests that start agents run one at a time ([`one_at_a_time`]),
//! so each can check that none is left.

use super::sshd::Sshd;
use super::IodigArgs;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

static AGENTS: Mutex<()> = Mutex::new(());

/// Held for the whole of a test that starts agents: the others of its file wait meanwhile.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    AGENTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Workload A on a small RocksDB that flushes often, this machine observed as 127.0.0.1 through
/// `sshd`, into `out`.
pub fn observed_rocksdb(sshd: &Sshd, threads: &str, duration: &str, out: &Path) -> IodigArgs {
    IodigArgs::run()
        .db("rocksdb")
        .workload("workloada")
        .props(&[
            "recordcount=20000",
            "rocksdb.writebuffersize=1048576",
            &sshd.property(),
        ])
        .threads(threads)
        .duration(duration)
        .warmup("0s")
        .observe("127.0.0.1")
        .out(out)
}

/// Agents (`iodig-<hash> agent …` under sshd) still running.
pub fn agent_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                    args.len() > 1
                        && String::from_utf8_lossy(args[0]).contains(".cache/iodig/bin/iodig-")
                        && args[1] == b"agent"
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Waits (up to 60 s) until an agent runs under the test's sshd: the run's step is under way.
pub fn wait_for_an_agent(sshd: &Sshd) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while agents_under(sshd).is_empty() {
        assert!(std::time::Instant::now() < deadline, "no agent started");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The agents this sshd's sessions run (other tests' agents on this machine are not theirs).
pub fn agents_under(sshd: &Sshd) -> Vec<u32> {
    let parent = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                let after = s.rsplit_once(") ")?.1.to_string();
                after.split_whitespace().nth(1)?.parse::<u32>().ok()
            })
    };
    agent_pids()
        .into_iter()
        .filter(|pid| {
            let mut p = *pid;
            (0..4).any(|_| {
                p = parent(p).unwrap_or(1);
                p == sshd.pid()
            })
        })
        .collect()
}

/// Waits up to 10 s for this sshd's agents to end; fails the test with those still running.
pub fn no_agent_left(sshd: &Sshd) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !agents_under(sshd).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "agents still running: {:?}",
            agents_under(sshd)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A short RocksDB run here (workload C, one thread) that observes 127.0.0.1 through `config`
/// (an ssh_config), into `out`.
pub fn observe_local_host_args(config: &Path, out: &Path, duration: &str) -> IodigArgs {
    IodigArgs::run()
        .db("rocksdb")
        .workload("workloadc")
        .p("recordcount=2000")
        .p(format!("ssh.config={}", config.display()))
        .threads("1")
        .duration(duration)
        .warmup("0s")
        .observe("127.0.0.1")
        .out(out)
}
