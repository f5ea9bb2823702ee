//! The state file `up` writes into the node directory: the options it was given, where the
//! jars came from, and each node started (address, ports, pid, directory), so `status`, `down`
//! and `restore` can be separate processes.

use crate::error::{io_err, Error, Result};
use crate::{UpOptions, STATE_FILE};
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

/// One node started by `up`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// 1-based node number.
    pub index: u32,
    /// Listen and CQL address, `127.0.0.<index>`.
    pub address: String,
    /// CQL port the node serves on its address: always [`CQL_PORT`].
    pub cql_port: u16,
    /// Local JMX port on 127.0.0.1, which nodetool talks to: `JMX_BASE_PORT + index - 1`.
    pub jmx_port: u16,
    /// The JVM's pid.
    pub pid: u32,
    /// The process start time from /proc/PID/stat, so `down` never signals a reused pid.
    pub start_ticks: u64,
    /// The node's own directory under the cluster directory.
    pub dir: PathBuf,
    /// When the JVM was launched (Unix ms), not when it accepted CQL.
    pub started_unix_ms: u64,
    /// The cgroup the node runs in (its own, so its block IO can be told from the other
    /// nodes'); absent where cgroups cannot be made (no root, no blkio/io controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<PathBuf>,
}

impl NodeInfo {
    /// The node's log directory (system.log, debug.log, stdout.log).
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }
    /// The node's sstable directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }
}

/// The state file: what was started, with which options and which distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// The options `up` was given, with `dir` made absolute; `restart` starts the same again.
    pub options: UpOptions,
    /// Where the jars came from: `$CASSANDRA_HOME/lib` or the Maven cache.
    pub lib_dir: PathBuf,
    /// The nodes started so far, in start order (node 1 first); a failed `up` leaves the ones
    /// that did start.
    pub nodes: Vec<NodeInfo>,
}

impl Cluster {
    /// The `hosts` property value for the binding: `127.0.0.1,127.0.0.2,…`.
    pub fn hosts(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.address.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Reads the state file ([`STATE_FILE`]) of a directory `up` wrote.
    pub fn load(dir: &Path) -> Result<Cluster> {
        let path = dir.join(STATE_FILE);
        let text = fs::read_to_string(&path).map_err(|e| {
            Error::Other(format!(
                "{}: cannot read the node state ({e}); is {} a directory made by `iodig cassandra up --dir`?",
                path.display(),
                dir.display()
            ))
        })?;
        serde_json::from_str(&text).map_err(|e| {
            Error::Other(format!(
                "{}: not an iodig-cassandra state file: {e}",
                path.display()
            ))
        })
    }

    pub(crate) fn save(&self) -> Result<()> {
        let path = self.options.dir.join(STATE_FILE);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).expect("state serialises");
        fs::write(&tmp, text).map_err(io_err(&tmp))?;
        fs::rename(&tmp, &path).map_err(io_err(&path))
    }
}
