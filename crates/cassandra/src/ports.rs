//! Port checks before a node starts: is the port free, and if not, which process holds it
//! (from /proc/net/tcp and the socket links in /proc/*/fd).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use crate::{Error, Result};

/// Errors naming the port and, when /proc tells, the process that listens on it.
pub fn ensure_free(addr: &str, port: u16, what: &str) -> Result<()> {
    let sa: SocketAddr = format!("{addr}:{port}")
        .parse()
        .expect("loopback address parses");
    match TcpListener::bind(sa) {
        Ok(_) => Ok(()),
        Err(e) => {
            let holder = holder_of(port);
            let held_by = holder
                .as_ref()
                .map(|h| format!(", held by pid {} ({})", h.pid, h.short_command()))
                .unwrap_or_default();
            // A node already there is most often one to benchmark, not one in the way.
            let node_hint = match &holder {
                Some(h) if h.is_cassandra() => {
                    format!("; it is a Cassandra node: to run against it, pass `-p hosts={addr}`")
                }
                _ => String::new(),
            };
            Err(Error::PortInUse(format!(
                "port {port} on {addr} ({what}) is already in use{held_by}: {e}; stop that process \
                 (`iodig cassandra down --dir DIR` if it is a node iodig started) or pick another --dir after freeing it{node_hint}"
            )))
        }
    }
}

/// A process that listens on a port.
pub struct Holder {
    pub pid: u32,
    /// Its whole command line, arguments joined by spaces.
    pub command: String,
}

impl Holder {
    fn of(pid: u32) -> Self {
        // Shown in an error message: another process's secrets (`-p …password=…`) stay out.
        let command = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                let args: Vec<String> = b
                    .split(|c| *c == 0)
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .collect();
                iodig_model::secret::redact_args(&args)
                    .join(" ")
                    .trim()
                    .to_string()
            })
            .unwrap_or_default();
        Self { pid, command }
    }

    /// The command line cut to 120 characters, for messages (a JVM's runs to kilobytes).
    pub fn short_command(&self) -> String {
        match self.command.char_indices().nth(120) {
            Some((cut, _)) => format!("{}…", &self.command[..cut]),
            None => self.command.clone(),
        }
    }

    /// Whether it runs Cassandra's daemon, by the whole command line.
    pub fn is_cassandra(&self) -> bool {
        self.command.contains(crate::DAEMON_CLASS)
    }
}

pub fn can_connect(addr: &str, port: u16) -> bool {
    let sa: SocketAddr = match format!("{addr}:{port}").parse() {
        Ok(s) => s,
        Err(_) => return false,
    };
    TcpStream::connect_timeout(&sa, Duration::from_millis(500)).is_ok()
}

/// The process listening on `port` (any address), if visible.
pub fn holder_of(port: u16) -> Option<Holder> {
    let inode = listening_inode(port)?;
    let target = format!("socket:[{inode}]");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path())
                .map(|l| l.to_string_lossy() == target)
                .unwrap_or(false)
            {
                return Some(Holder::of(pid));
            }
        }
    }
    None
}

/// Inode of a LISTEN socket on `port` in /proc/net/tcp or tcp6.
fn listening_inode(port: u16) -> Option<u64> {
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 {
                continue;
            }
            let local_port = f[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            // State 0A is TCP_LISTEN.
            if local_port == Some(port) && f[3] == "0A" {
                if let Ok(inode) = f[9].parse::<u64>() {
                    if inode != 0 {
                        return Some(inode);
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_in_use_names_the_port_and_this_process() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let err = ensure_free("127.0.0.1", port, "CQL")
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("port {port}")), "{err}");
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        // This test process is no Cassandra node: no hint to run against it.
        assert!(!err.contains("-p hosts="), "{err}");
    }

    #[test]
    fn a_node_is_recognized_by_its_daemon_class_on_the_command_line() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30", crate::DAEMON_CLASS])
            .spawn()
            .unwrap();
        // Until the child has exec'd, its command line is this test binary's: wait for it.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut recognized = false;
        while !recognized && std::time::Instant::now() < deadline {
            recognized = Holder::of(child.id()).is_cassandra();
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(recognized);
        assert!(!Holder::of(std::process::id()).is_cassandra());
    }

    #[test]
    fn another_processs_password_is_not_shown() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30", "sh", "-p", "cassandra.password=S3cr3t"])
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut command = String::new();
        while !command.contains("sleep") && std::time::Instant::now() < deadline {
            command = Holder::of(child.id()).command;
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(command.contains("cassandra.password=***"), "{command}");
        assert!(!command.contains("S3cr3t"), "{command}");
    }
}
