//! Port checks before a node starts: is the port free, and if not, which process holds it
//! (from /proc/net/tcp and the socket links in /proc/*/fd).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::{CQL_PORT, JMX_BASE_PORT, STORAGE_PORT};

/// Every port nodes 1..=`nodes` will bind (CQL and inter-node on 127.0.0.i, JMX on
/// 127.0.0.1), checked before anything starts, so a conflict costs nothing.
pub fn ensure_nodes_free(nodes: u32) -> Result<()> {
    for i in 1..=nodes {
        let addr = format!("127.0.0.{i}");
        ensure_free(&addr, CQL_PORT, "CQL (native_transport_port)")?;
        ensure_free(&addr, STORAGE_PORT, "inter-node (storage_port)")?;
        ensure_free("127.0.0.1", JMX_BASE_PORT + i as u16 - 1, "JMX")?;
    }
    Ok(())
}

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
    let (_, inode) = listeners(port).into_iter().next()?;
    pid_of_socket(inode).map(Holder::of)
}

/// The process holding the socket with this inode, from the links in /proc/*/fd.
pub(crate) fn pid_of_socket(inode: u64) -> Option<u32> {
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
                return Some(pid);
            }
        }
    }
    None
}

/// LISTEN sockets on `port` in /proc/net/tcp and tcp6: their local address and inode.
pub(crate) fn listeners(port: u16) -> Vec<(std::net::IpAddr, u64)> {
    let mut found = Vec::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 {
                continue;
            }
            let Some((addr_hex, port_hex)) = f[1].rsplit_once(':') else {
                continue;
            };
            // State 0A is TCP_LISTEN.
            if u16::from_str_radix(port_hex, 16).ok() != Some(port) || f[3] != "0A" {
                continue;
            }
            match (proc_net_addr(addr_hex), f[9].parse::<u64>()) {
                (Some(addr), Ok(inode)) if inode != 0 => found.push((addr, inode)),
                _ => {}
            }
        }
    }
    found
}

/// An address as /proc/net/tcp{,6} prints it: 32-bit words in host (little-endian) order.
fn proc_net_addr(hex: &str) -> Option<std::net::IpAddr> {
    let words: Vec<u32> = (0..hex.len() / 8)
        .map(|i| u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16).map(u32::swap_bytes))
        .collect::<std::result::Result<_, _>>()
        .ok()?;
    match words.as_slice() {
        [w] => Some(std::net::Ipv4Addr::from(*w).into()),
        [a, b, c, d] => {
            let v6 = std::net::Ipv6Addr::from(
                (u128::from(*a) << 96)
                    | (u128::from(*b) << 64)
                    | (u128::from(*c) << 32)
                    | u128::from(*d),
            );
            Some(v6.to_ipv4_mapped().map_or(v6.into(), Into::into))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_addresses_read_as_the_kernel_prints_them() {
        assert_eq!(proc_net_addr("0200007F").unwrap().to_string(), "127.0.0.2");
        assert_eq!(
            proc_net_addr("0000000000000000FFFF00000300007F")
                .unwrap()
                .to_string(),
            "127.0.0.3"
        );
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let found = listeners(port);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0.to_string(), "127.0.0.1");
        assert_eq!(pid_of_socket(found[0].1), Some(std::process::id()));
    }

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
