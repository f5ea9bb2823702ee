//! nodetool from the same jars (`org.apache.cassandra.tools.NodeTool` over the node's local JMX
//! port), and the parser of its `status` table.

use std::path::Path;
use std::process::Command;

use crate::dist;
use crate::error::{io_err, Error, Result};
use crate::state::NodeInfo;
use serde::{Deserialize, Serialize};

/// One line of the ownership table (`nodetool status`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// The node's address, `127.0.0.<index>`.
    pub address: String,
    /// Two letters as nodetool prints them: `UN` up/normal, `DN` down, `UJ` joining, …
    pub state: String,
    /// Data on disk as nodetool prints it (`104.21 KiB`).
    pub load: String,
    /// Virtual nodes it owns (`num_tokens`; the configured value for a node nodetool did not
    /// list).
    pub tokens: u32,
    /// Percent of the ring this node holds replicas of ("Owns (effective)" for a keyspace); the
    /// column sums to 100 × RF for a keyspace.
    pub owns_percent: Option<f64>,
    /// Cassandra's UUID for the node; `?` for a node nodetool did not list.
    pub host_id: String,
    /// The node's rack (`rack1` here); `?` for a node nodetool did not list.
    pub rack: String,
    /// The pid `up` recorded, when the node is one of ours.
    pub pid: Option<u32>,
    /// Whether that recorded process is still alive (false for a node not in the state file).
    pub running: bool,
}

/// nodetool from a JVM and the Cassandra jars, against the JMX port of the node on this host,
/// logging through `logback_conf` (without one it logs at DEBUG to stdout); the command's own
/// arguments come after. Managed nodes and nodes found on an observed host share it.
pub(crate) fn command<S: AsRef<std::ffi::OsStr>>(
    java: &Path,
    module_flags: impl IntoIterator<Item = S>,
    classpath: &str,
    logback_conf: &Path,
    jmx_port: u16,
) -> Command {
    let mut c = Command::new(java);
    c.args(module_flags)
        .args([
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-Djava.net.preferIPv4Stack=true",
        ])
        .arg(format!(
            "-Dlogback.configurationFile={}",
            logback_conf.display()
        ))
        .arg("-cp")
        .arg(classpath)
        .arg("org.apache.cassandra.tools.NodeTool")
        .args(["-h", "127.0.0.1", "-p", &jmx_port.to_string()]);
    c
}

/// Runs one nodetool command against `node` and returns its stdout.
pub fn run(java: &Path, lib_dir: &Path, node: &NodeInfo, args: &[String]) -> Result<String> {
    let conf = node.dir.join("conf/logback-nodetool.xml");
    std::fs::write(&conf, dist::NODETOOL_LOGBACK_XML).map_err(io_err(&conf))?;
    let classpath = format!("{}/*", lib_dir.display());
    let out = command(java, dist::module_flags(), &classpath, &conf, node.jmx_port)
        .args(args)
        .output()
        .map_err(|e| Error::Other(format!("cannot run nodetool with {}: {e}", java.display())))?;
    if !out.status.success() {
        return Err(Error::Other(format!(
            "nodetool {} on node {} (JMX port {}) failed: {}{}",
            args.join(" "),
            node.address,
            node.jmx_port,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Parses the node lines of `nodetool status`:
/// `UN  127.0.0.1  104.21 KiB  16  100.0%  6c2b…  rack1`.
pub fn parse_status(text: &str) -> Vec<NodeStatus> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 7 || f[0].len() != 2 || !matches!(&f[0][..1], "U" | "D") {
            continue;
        }
        // Load is a number and a unit ("104.21 KiB"), or "?" when unknown.
        let (load, rest) = if f[2] == "?" {
            (f[2].to_string(), &f[3..])
        } else {
            (format!("{} {}", f[2], f[3]), &f[4..])
        };
        if rest.len() < 4 {
            continue;
        }
        out.push(NodeStatus {
            address: f[1].to_string(),
            state: f[0].to_string(),
            load,
            tokens: rest[0].parse().unwrap_or(0),
            owns_percent: rest[1].trim_end_matches('%').parse().ok(),
            host_id: rest[2].to_string(),
            rack: rest[3].to_string(),
            pid: None,
            running: false,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_ownership_table() {
        let text = "Datacenter: datacenter1\n=======================\nStatus=Up/Down\n|/ State=Normal/Leaving/Joining/Moving\n--  Address    Load        Tokens  Owns (effective)  Host ID                               Rack\nUN  127.0.0.1  104.21 KiB  16      100.0%            6c2b1a4e-0000-0000-0000-000000000000  rack1\nDN  127.0.0.2  ?           16      66.7%             7d2b1a4e-0000-0000-0000-000000000000  rack1\n";
        let rows = parse_status(text);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].load, "104.21 KiB");
        assert_eq!(rows[0].owns_percent, Some(100.0));
        assert_eq!(rows[1].state, "DN");
        assert_eq!(rows[1].load, "?");
        assert_eq!(rows[1].owns_percent, Some(66.7));
        assert_eq!(rows[1].rack, "rack1");
    }
}
