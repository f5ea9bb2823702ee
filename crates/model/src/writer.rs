//! Who is writing a run directory: the process recorded in run.json when the run starts, so a
//! later reader can tell a run that is still going from one whose iodig was killed (SIGKILL,
//! OOM killer, power loss), which would otherwise say `running` forever.
//!
//! A pid alone is not enough: pids are reused. The writer is the pid together with the
//! process's start time (clock ticks since boot, `/proc/PID/stat` field 22) and the kernel's
//! boot id, which changes at every boot; the three together name one process on one host.

use serde::{Deserialize, Serialize};

/// The process that writes a run directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Writer {
    /// Process id of the writing iodig on `host`.
    pub pid: u32,
    /// Start time of the process in clock ticks since boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ticks: Option<u64>,
    /// `/proc/sys/kernel/random/boot_id` when the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// Name of the host it runs on (`/proc/sys/kernel/hostname`); empty when unreadable.
    pub host: String,
}

/// Whether a recorded writer is still at work, as far as this reader can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriterState {
    /// A process with that pid runs on this host (with the same start time, when one was recorded).
    Alive,
    /// The process is gone; the reason says how the reader knows.
    Gone(String),
    /// This reader cannot check (another host, no /proc).
    Unknown(String),
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Field 22 of `/proc/PID/stat` (`starttime`), parsed after the command name's closing
/// parenthesis, since the name itself may hold spaces and parentheses.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ')' come field 3 (state) onwards: starttime is the 20th of them.
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn hostname() -> String {
    read_trim("/proc/sys/kernel/hostname").unwrap_or_default()
}

impl Writer {
    /// This process.
    pub fn current() -> Writer {
        let pid = std::process::id();
        Writer {
            pid,
            start_ticks: start_ticks(pid),
            boot_id: read_trim("/proc/sys/kernel/random/boot_id"),
            host: hostname(),
        }
    }

    /// Whether this writer still runs. Another host's process cannot be checked from here; a
    /// different boot id on the same host means the machine rebooted since.
    pub fn state(&self) -> WriterState {
        let host = hostname();
        if !self.host.is_empty() && !host.is_empty() && self.host != host {
            return WriterState::Unknown(format!(
                "it is written by iodig (pid {}) on host {}, which cannot be checked from {host}",
                self.pid, self.host
            ));
        }
        if let (Some(then), Some(now)) =
            (&self.boot_id, read_trim("/proc/sys/kernel/random/boot_id"))
        {
            if *then != now {
                return WriterState::Gone(format!(
                    "the machine has rebooted since iodig (pid {}) started it",
                    self.pid
                ));
            }
        }
        if !std::path::Path::new("/proc/self/stat").exists() {
            return WriterState::Unknown("no /proc to check the writing process in".into());
        }
        match (start_ticks(self.pid), self.start_ticks) {
            (None, _) => WriterState::Gone(format!(
                "the iodig process that wrote it (pid {}) no longer exists",
                self.pid
            )),
            (Some(now), Some(then)) if now != then => WriterState::Gone(format!(
                "the iodig process that wrote it (pid {}) no longer exists (the pid is another process's now)",
                self.pid
            )),
            _ => WriterState::Alive,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_dead_child_is_gone() {
        let me = Writer::current();
        assert!(me.start_ticks.is_some() && me.boot_id.is_some());
        assert_eq!(me.state(), WriterState::Alive);

        let mut child = std::process::Command::new("true").spawn().unwrap();
        let mut dead = Writer::current();
        dead.pid = child.id();
        dead.start_ticks = start_ticks(child.id());
        child.wait().unwrap();
        assert!(matches!(dead.state(), WriterState::Gone(_)), "{dead:?}");

        // The same pid with another start time is a reused pid: not the writer.
        let reused = Writer {
            start_ticks: me.start_ticks.map(|t| t + 1),
            ..me.clone()
        };
        assert!(matches!(reused.state(), WriterState::Gone(_)));
        let rebooted = Writer {
            boot_id: Some("another-boot".into()),
            ..me.clone()
        };
        assert!(matches!(rebooted.state(), WriterState::Gone(r) if r.contains("rebooted")));
        let elsewhere = Writer {
            host: format!("{}-elsewhere", me.host),
            ..me
        };
        assert!(matches!(elsewhere.state(), WriterState::Unknown(_)));
    }
}
