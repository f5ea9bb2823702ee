//! A Cassandra node running on this host, found from the node itself: the process that listens
//! on the CQL port (at a given address when several nodes share the host), its directories from
//! the `cassandra.yaml` its command line names, its log directory, and its flush and compaction
//! events. This is what iodig's observer on another host runs there; iodig need not have
//! started the node.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::ports::{listeners, pid_of_socket};
use crate::{events, DbEvent, CQL_PORT, DAEMON_CLASS};

/// A node found on this host.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalNode {
    /// `ADDRESS:PORT` it serves CQL on.
    pub address: String,
    /// The JVM's pid (the holder of the CQL socket).
    pub pid: u32,
    /// Its `cassandra.yaml`, from `-Dcassandra.config`; None when the command line names none.
    pub config: Option<PathBuf>,
    /// Its sstable directories: the yaml's `data_file_directories`, else
    /// `<cassandra.storagedir>/data`; empty when neither is known.
    pub data_dirs: Vec<PathBuf>,
    /// The yaml's `commitlog_directory`, else `<cassandra.storagedir>/commitlog`.
    pub commitlog_dir: Option<PathBuf>,
    /// Its log directory, from `-Dcassandra.logdir`; None means no flush or compaction events.
    pub log_dir: Option<PathBuf>,
    /// What shapes its IO ([`io_settings`]): the yaml's memtable, commit log, compaction and
    /// concurrency settings, the JVM's heap and collector, the process's limits.
    pub settings: BTreeMap<String, String>,
}

impl LocalNode {
    /// Flushes and compactions from its log that started at or after the time, or why its
    /// log tells none: no log directory on its command line, no log there, an unreadable one.
    pub fn events_since(&self, since_unix_ms: u64) -> Result<Vec<DbEvent>, String> {
        let Some(dir) = &self.log_dir else {
            return Err("its command line names no log directory (-Dcassandra.logdir): its flushes and compactions are not on the time line".into());
        };
        if !dir.join("debug.log").is_file() && !dir.join("system.log").is_file() {
            return Err(format!(
                "neither debug.log nor system.log in {}: its flushes and compactions are not on the time line",
                dir.display()
            ));
        }
        let node = self
            .address
            .rsplit_once(':')
            .map_or(self.address.as_str(), |(a, _)| a);
        let mut all = events::read_node_logs(dir, node).map_err(|e| {
            format!("its log cannot be read ({e}): its flushes and compactions are not on the time line")
        })?;
        all.retain(|e| e.start_unix_ms >= since_unix_ms);
        Ok(all)
    }
}

/// Finds the node serving CQL at `address` (`IP` or `IP:PORT`; port 9042 when left out), or
/// the only one on this host when `address` is None. The error says what was found instead.
pub fn find(address: Option<&str>) -> Result<LocalNode, String> {
    let (ip, port) = match address {
        Some(a) => parse_address(a)?,
        None => (None, CQL_PORT),
    };
    let sockets = listeners(port);
    let matching: Vec<&(IpAddr, u64)> = sockets
        .iter()
        .filter(|(a, _)| ip.is_none_or(|ip| *a == ip || a.is_unspecified()))
        .collect();
    let mut nodes = Vec::new();
    for (addr, inode) in &matching {
        let Some(pid) = pid_of_socket(*inode) else {
            continue;
        };
        let args = cmdline(pid);
        if args.iter().any(|a| a == DAEMON_CLASS) {
            nodes.push(describe(pid, &format!("{addr}:{port}"), &args));
        }
    }
    match nodes.len() {
        1 => Ok(nodes.remove(0)),
        0 if sockets.is_empty() => Err(format!(
            "no process listens on port {port} here: is Cassandra running on this host (native_transport_port {port})?"
        )),
        0 => Err(format!(
            "no Cassandra node listens on {}:{port} here (listening: {}); give the node's own address",
            ip.map_or("any address".to_string(), |i| i.to_string()),
            sockets
                .iter()
                .map(|(a, _)| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => Err(format!(
            "{} Cassandra nodes listen on port {port} here ({}); name the one to observe by its address",
            nodes.len(),
            nodes
                .iter()
                .map(|n| n.address.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn parse_address(a: &str) -> Result<(Option<IpAddr>, u16), String> {
    let bad = || format!("{a:?} is not an IP address or IP:PORT");
    if let Ok(ip) = a.parse::<IpAddr>() {
        return Ok((Some(ip), CQL_PORT));
    }
    let sa: std::net::SocketAddr = a.parse().map_err(|_| bad())?;
    Ok((Some(sa.ip()), sa.port()))
}

pub(crate) fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The node's directories, from its `cassandra.yaml` and `-D` options, as Cassandra resolves
/// them: the yaml's settings, else under `cassandra.storagedir`.
fn describe(pid: u32, address: &str, args: &[String]) -> LocalNode {
    let prop = |name: &str| {
        let prefix = format!("-D{name}=");
        args.iter()
            .find_map(|a| a.strip_prefix(prefix.as_str()).map(str::to_string))
    };
    let config = prop("cassandra.config").map(|c| {
        PathBuf::from(
            c.strip_prefix("file://")
                .or_else(|| c.strip_prefix("file:"))
                .unwrap_or(&c),
        )
    });
    let yaml = config
        .as_deref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let storage = prop("cassandra.storagedir").map(PathBuf::from);
    let mut data_dirs: Vec<PathBuf> = yaml_list(&yaml, "data_file_directories")
        .into_iter()
        .map(PathBuf::from)
        .collect();
    if data_dirs.is_empty() {
        data_dirs.extend(storage.as_ref().map(|s| s.join("data")));
    }
    let commitlog_dir = yaml_scalar(&yaml, "commitlog_directory")
        .map(PathBuf::from)
        .or_else(|| storage.as_ref().map(|s| s.join("commitlog")));
    LocalNode {
        address: address.to_string(),
        pid,
        config,
        data_dirs,
        commitlog_dir,
        log_dir: prop("cassandra.logdir").map(PathBuf::from),
        settings: io_settings(
            &yaml,
            args,
            &std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default(),
        ),
    }
}

/// The cassandra.yaml settings that shape a node's IO, as the briefs list them; a setting the
/// file leaves out reads `unset` (Cassandra's default applies).
pub const IO_SETTINGS: [&str; 15] = [
    "num_tokens",
    "memtable_allocation_type",
    "memtable_heap_space",
    "memtable_offheap_space",
    "memtable_flush_writers",
    "commitlog_sync",
    "commitlog_sync_period",
    "commitlog_segment_size",
    "commitlog_compression",
    "compaction_throughput",
    "concurrent_compactors",
    "concurrent_reads",
    "concurrent_writes",
    "disk_access_mode",
    "disk_optimization_strategy",
];

/// What shapes a node's IO: [`IO_SETTINGS`] from its yaml (older spellings such as
/// `commitlog_sync_period_in_ms` are read too), its JVM's heap (`-Xms`/`-Xmx`) and collector
/// from its command line, and the limits of its process (`/proc/PID/limits`) that the briefs
/// raise (open files, processes, locked memory, address space).
pub fn io_settings(yaml: &str, args: &[String], limits: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for key in IO_SETTINGS {
        let old = |suffix: &str| yaml_scalar(yaml, &format!("{key}{suffix}"));
        let v = yaml_scalar(yaml, key)
            .or_else(|| old("_in_ms").map(|v| format!("{v}ms")))
            .or_else(|| old("_in_mb").map(|v| format!("{v}MiB")))
            .or_else(|| old("_in_mb_per_sec").map(|v| format!("{v}MiB/s")));
        m.insert(key.to_string(), v.unwrap_or_else(|| "unset".into()));
    }
    let flag = |prefix: &str| {
        args.iter()
            .rev()
            .find_map(|a| a.strip_prefix(prefix).map(str::to_string))
    };
    let heap = match (flag("-Xms"), flag("-Xmx")) {
        (Some(a), Some(b)) if a == b => Some(b),
        (Some(a), Some(b)) => Some(format!("{a} to {b}")),
        (None, Some(b)) => Some(format!("up to {b}")),
        (Some(a), None) => Some(format!("from {a}")),
        (None, None) => None,
    };
    m.extend(heap.map(|h| ("jvm.heap".to_string(), h)));
    let gc: Vec<&str> = args
        .iter()
        .filter_map(|a| a.strip_prefix("-XX:+Use")?.strip_suffix("GC"))
        .filter(|g| !g.is_empty() && !g.contains("Adaptive"))
        .collect();
    if let Some(g) = gc.last() {
        m.insert("jvm.gc".into(), format!("{g}GC"));
    }
    for (name, key) in [
        ("Max open files", "limits.open_files"),
        ("Max processes", "limits.processes"),
        ("Max locked memory", "limits.locked_memory"),
        ("Max address space", "limits.address_space"),
    ] {
        // "Max open files            1048576              1048576              files"
        if let Some(rest) = limits.lines().find_map(|l| l.strip_prefix(name)) {
            let soft = rest.split_whitespace().next().unwrap_or("?");
            m.insert(key.into(), soft.to_string());
        }
    }
    m
}

/// `key: value` at the top level of a yaml file (quotes removed).
pub(crate) fn yaml_scalar(yaml: &str, key: &str) -> Option<String> {
    yaml.lines().find_map(|l| {
        let v = l.strip_prefix(key)?.strip_prefix(':')?.trim();
        let v = v.trim_matches(|c| c == '"' || c == '\'');
        (!v.is_empty()).then(|| v.to_string())
    })
}

/// The items of a top-level yaml list (`key:` then `  - item` lines).
fn yaml_list(yaml: &str, key: &str) -> Vec<String> {
    let mut lines = yaml.lines().skip_while(|l| {
        l.strip_prefix(key)
            .and_then(|r| r.strip_prefix(':'))
            .is_none()
    });
    if lines.next().is_none() {
        return Vec::new();
    }
    lines
        .take_while(|l| l.starts_with(' ') || l.starts_with('-') || l.trim().is_empty())
        .filter_map(|l| l.trim().strip_prefix('-').map(str::trim))
        .map(|v| v.trim_matches(|c| c == '"' || c == '\'').to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

/// Bytes of the files under the directories (the node's load on disk).
pub fn bytes_under(dirs: &[PathBuf]) -> u64 {
    fn walk(p: &Path) -> u64 {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => std::fs::read_dir(p)
                .map(|rd| rd.flatten().map(|e| walk(&e.path())).sum())
                .unwrap_or(0),
            Ok(m) if m.is_file() => m.len(),
            _ => 0,
        }
    }
    dirs.iter().map(|d| walk(d)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "cluster_name: x\ndata_file_directories:\n  - /a/data\n  - \"/b/data\"\ncommitlog_directory: /a/commitlog\nsaved_caches_directory: /a/saved\n";

    #[test]
    fn a_log_that_tells_nothing_says_why() {
        let mut node = LocalNode {
            address: "127.0.0.9:9042".into(),
            pid: 1,
            config: None,
            data_dirs: Vec::new(),
            commitlog_dir: None,
            log_dir: None,
            settings: BTreeMap::new(),
        };
        assert!(node
            .events_since(0)
            .unwrap_err()
            .contains("no log directory"));
        let dir = tempfile::tempdir().unwrap();
        node.log_dir = Some(dir.path().to_path_buf());
        let e = node.events_since(0).unwrap_err();
        assert!(e.contains("neither debug.log nor system.log in"), "{e}");
        std::fs::write(dir.path().join("system.log"), "").unwrap();
        assert_eq!(node.events_since(0).unwrap(), Vec::new());
    }

    #[test]
    fn io_settings_read_the_yaml_the_jvm_and_the_limits() {
        let yaml = "num_tokens: 256\ncommitlog_sync: periodic\ncommitlog_sync_period_in_ms: 10000\nconcurrent_writes: 128\n";
        let args: Vec<String> = [
            "-Xms31G",
            "-Xmx31G",
            "-XX:+UseAdaptiveSizePolicy",
            "-XX:+UseG1GC",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\nMax locked memory         unlimited            unlimited            bytes\n";
        let m = io_settings(yaml, &args, limits);
        assert_eq!(m["num_tokens"], "256");
        assert_eq!(m["commitlog_sync_period"], "10000ms", "the old spelling");
        assert_eq!(m["concurrent_writes"], "128");
        assert_eq!(m["memtable_heap_space"], "unset");
        assert_eq!(m["jvm.heap"], "31G");
        assert_eq!(m["jvm.gc"], "G1GC");
        assert_eq!(m["limits.open_files"], "1048576");
        assert_eq!(m["limits.locked_memory"], "unlimited");
        assert!(!m.contains_key("limits.processes"));
    }

    #[test]
    fn directories_are_read_from_the_yaml() {
        assert_eq!(
            yaml_list(YAML, "data_file_directories"),
            ["/a/data", "/b/data"]
        );
        assert_eq!(
            yaml_scalar(YAML, "commitlog_directory").as_deref(),
            Some("/a/commitlog")
        );
        assert_eq!(yaml_scalar(YAML, "hints_directory"), None);
    }

    #[test]
    fn the_storage_dir_is_the_default() {
        let args: Vec<String> = [
            "java",
            "-Dcassandra.storagedir=/s",
            "-Dcassandra.logdir=/s/logs",
            DAEMON_CLASS,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let n = describe(1, "127.0.0.1:9042", &args);
        assert_eq!(n.data_dirs, [PathBuf::from("/s/data")]);
        assert_eq!(n.commitlog_dir, Some(PathBuf::from("/s/commitlog")));
        assert_eq!(n.log_dir, Some(PathBuf::from("/s/logs")));
    }

    #[test]
    fn a_host_without_a_node_says_so() {
        // An ephemeral port nobody listens on.
        let err = find(Some("127.0.0.1:1")).unwrap_err();
        assert!(err.contains("port 1"), "{err}");
        assert!(parse_address("nonsense").is_err());
    }
}
