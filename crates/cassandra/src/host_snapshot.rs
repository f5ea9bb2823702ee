//! The loaded dataset of a node found on this host ([`LocalNode`]), snapshotted and put back:
//! what iodig's agent on an observed host does for `--restore-each-step`. The snapshot is the
//! node's own (`nodetool snapshot`, run with the node's JVM and classpath over its local JMX
//! port, so nothing needs installing on the host); putting it back happens while the node is
//! down, as for managed nodes: hard links from the snapshot, commit log, hints and saved caches
//! emptied. Stopping and starting the node again is the agent's, which knows how it was started.

use std::path::{Path, PathBuf};

use crate::dist;
use crate::local::{yaml_scalar, LocalNode};
use crate::snapshot::{clear_dir, replace_with_snapshot, snapshot_tables};

/// How to run nodetool against the node as it runs now (`pid`): its JVM, its classpath, its
/// module flags and its JMX port, all read from its command line.
#[derive(Debug, Clone, PartialEq)]
pub struct NodetoolCall {
    java: PathBuf,
    classpath: String,
    module_flags: Vec<String>,
    jmx_port: u16,
}

impl NodetoolCall {
    /// Read from `/proc/PID`; the error says what could not be found.
    pub fn of(pid: u32) -> Result<NodetoolCall, String> {
        let java = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map_err(|e| format!("the node's JVM (/proc/{pid}/exe) cannot be read: {e}"))?;
        let args = crate::local::cmdline(pid);
        if args.is_empty() {
            return Err(format!(
                "the node's command line (pid {pid}) cannot be read"
            ));
        }
        Self::from_args(java, &args)
    }

    fn from_args(java: PathBuf, args: &[String]) -> Result<NodetoolCall, String> {
        let classpath = args
            .iter()
            .position(|a| matches!(a.as_str(), "-cp" | "-classpath" | "--class-path"))
            .and_then(|i| args.get(i + 1))
            .cloned()
            .ok_or("the node's command line has no -cp, so nodetool cannot be run with its jars")?;
        // Java 11+ needs the same module openings the node was given to load its classes.
        let mut module_flags = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a.starts_with("--add-") {
                module_flags.push(a.clone());
                if !a.contains('=') {
                    module_flags.extend(it.next().cloned());
                }
            }
        }
        let port = [
            "-Dcassandra.jmx.local.port=",
            "-Dcassandra.jmx.remote.port=",
            "-Dcom.sun.management.jmxremote.port=",
        ]
        .iter()
        .find_map(|p| args.iter().rev().find_map(|a| a.strip_prefix(p)));
        let jmx_port = match port {
            Some(p) => p
                .parse()
                .map_err(|_| format!("the node's JMX port {p:?} is not a port number"))?,
            None => crate::JMX_BASE_PORT,
        };
        Ok(NodetoolCall {
            java,
            classpath,
            module_flags,
            jmx_port,
        })
    }

    /// Runs one nodetool command; its output, or why it failed.
    pub fn run(&self, args: &[&str]) -> Result<String, String> {
        // nodetool logs at DEBUG to stdout without a configuration of its own.
        let conf =
            std::env::temp_dir().join(format!("iodig-nodetool-logback-{}.xml", std::process::id()));
        std::fs::write(&conf, dist::NODETOOL_LOGBACK_XML)
            .map_err(|e| format!("cannot write {}: {e}", conf.display()))?;
        let out = crate::nodetool::command(
            &self.java,
            &self.module_flags,
            &self.classpath,
            &conf,
            self.jmx_port,
        )
        .args(args)
        .output();
        let _ = std::fs::remove_file(&conf);
        let out = out.map_err(|e| format!("cannot run {}: {e}", self.java.display()))?;
        if !out.status.success() {
            return Err(format!(
                "nodetool {} (JMX port {}) failed: {} {}",
                args.join(" "),
                self.jmx_port,
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Why the node's dataset cannot be snapshotted and put back here, checked before the run
/// starts; what will be done when it can.
pub fn check(node: &LocalNode, pid: u32) -> Result<String, String> {
    if node.data_dirs.is_empty() {
        return Err("its data directories could not be read from its configuration (cassandra.yaml's data_file_directories, or -Dcassandra.storagedir)".into());
    }
    if node.commitlog_dir.is_none() {
        return Err("its commit log directory could not be read from its configuration, and a restore must empty it (the log would replay the writes made after the snapshot)".into());
    }
    let call = NodetoolCall::of(pid)?;
    Ok(format!(
        "snapshot by nodetool over JMX port {}, restore by hard links under {}",
        call.jmx_port,
        join(&node.data_dirs)
    ))
}

/// Takes snapshot `tag` of `keyspace` on the running node (an older one of that tag is
/// cleared first; `nodetool snapshot` flushes the memtables before it links the sstables).
pub fn snapshot(node: &LocalNode, pid: u32, keyspace: &str, tag: &str) -> Result<String, String> {
    let call = NodetoolCall::of(pid)?;
    call.run(&["clearsnapshot", "-t", tag, keyspace])?;
    call.run(&["snapshot", "-t", tag, keyspace])?;
    let (tables, files, bytes) = snapshot_size(node, keyspace, tag)?;
    if tables == 0 {
        return Err(format!(
            "nodetool snapshot left no snapshot {tag:?} of keyspace {keyspace} under {}",
            join(&node.data_dirs)
        ));
    }
    Ok(format!(
        "snapshot {tag} of keyspace {keyspace}: {tables} table(s), {files} files, {:.1} MB (hard links: no space until the live files change)",
        bytes as f64 / 1e6
    ))
}

/// The snapshot's tables, files and bytes; the snapshot must exist under some data directory.
fn snapshot_size(node: &LocalNode, keyspace: &str, tag: &str) -> Result<(u64, u64, u64), String> {
    let (mut tables, mut files, mut bytes) = (0, 0, 0);
    for dir in &node.data_dirs {
        let ks = dir.join(keyspace);
        for table in snapshot_tables(&ks, tag).map_err(|e| e.to_string())? {
            tables += 1;
            let snap = table.join("snapshots").join(tag);
            for e in std::fs::read_dir(&snap)
                .map_err(|e| format!("{}: {e}", snap.display()))?
                .flatten()
            {
                match e.metadata() {
                    Ok(m) if m.is_file() => {
                        files += 1;
                        bytes += m.len();
                    }
                    _ => {}
                }
            }
        }
    }
    Ok((tables, files, bytes))
}

/// Whether snapshot `tag` of `keyspace` is there to put back (checked while the node still
/// runs, so a missing snapshot never costs a restart).
pub fn check_snapshot(node: &LocalNode, keyspace: &str, tag: &str) -> Result<(), String> {
    match snapshot_size(node, keyspace, tag)? {
        (0, _, _) => Err(format!(
            "no snapshot {tag:?} of keyspace {keyspace} under {}",
            join(&node.data_dirs)
        )),
        _ => Ok(()),
    }
}

/// With the node down: every table of `keyspace` that has snapshot `tag` gets the snapshot's
/// sstables back (hard links), and the commit log, hints and saved caches are emptied, so the
/// node starts on exactly the snapshot. What was done, in words.
pub fn put_back(node: &LocalNode, keyspace: &str, tag: &str) -> Result<String, String> {
    let mut tables = 0;
    for dir in &node.data_dirs {
        for table in snapshot_tables(&dir.join(keyspace), tag).map_err(|e| e.to_string())? {
            replace_with_snapshot(&table, tag).map_err(|e| e.to_string())?;
            tables += 1;
        }
    }
    let mut emptied = Vec::new();
    for dir in node.commitlog_dir.iter().cloned().chain(other_dirs(node)) {
        clear_dir(&dir).map_err(|e| e.to_string())?;
        emptied.push(dir.display().to_string());
    }
    Ok(format!(
        "{tables} table(s) of {keyspace} hard-linked back from snapshot {tag}; emptied {}",
        emptied.join(", ")
    ))
}

/// The node's hints and saved caches directories: the yaml's, else under its storage
/// directory. Writes after the snapshot live in both (hints replay them to other nodes).
fn other_dirs(node: &LocalNode) -> Vec<PathBuf> {
    let yaml = node
        .config
        .as_deref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let storage = node
        .commitlog_dir
        .as_deref()
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    ["hints", "saved_caches"]
        .iter()
        .filter_map(|name| {
            yaml_scalar(&yaml, &format!("{name}_directory"))
                .map(PathBuf::from)
                .or_else(|| storage.as_ref().map(|s| s.join(name)))
        })
        .filter(|d| d.is_dir())
        .collect()
}

fn join(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn nodetool_runs_with_the_nodes_jvm_jars_module_flags_and_jmx_port() {
        let a = args(&[
            "java",
            "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
            "--add-opens",
            "java.base/java.io=ALL-UNNAMED",
            "-Dcassandra.jmx.local.port=7299",
            "-cp",
            "/opt/c/lib/*",
            "org.apache.cassandra.service.CassandraDaemon",
        ]);
        let call = NodetoolCall::from_args("/usr/bin/java".into(), &a).unwrap();
        assert_eq!(call.classpath, "/opt/c/lib/*");
        assert_eq!(call.jmx_port, 7299);
        assert_eq!(
            call.module_flags,
            [
                "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
                "--add-opens",
                "java.base/java.io=ALL-UNNAMED"
            ]
        );
        let default_port = NodetoolCall::from_args("j".into(), &args(&["java", "-cp", "x"]));
        assert_eq!(default_port.unwrap().jmx_port, crate::JMX_BASE_PORT);
        let e = NodetoolCall::from_args("j".into(), &args(&["java", "Main"])).unwrap_err();
        assert!(e.contains("no -cp"), "{e}");
    }

    #[test]
    fn putting_back_links_the_snapshot_and_empties_the_logs() {
        let tmp = tempfile::tempdir().unwrap();
        let storage = tmp.path();
        let table = storage.join("data/ks/t-1");
        let snap = table.join("snapshots/iodig-loaded");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::write(snap.join("nb-1-big-Data.db"), "loaded").unwrap();
        std::fs::write(snap.join("manifest.json"), "{}").unwrap();
        std::fs::write(table.join("nb-2-big-Data.db"), "written after").unwrap();
        for d in ["commitlog", "hints", "saved_caches"] {
            std::fs::create_dir_all(storage.join(d)).unwrap();
            std::fs::write(storage.join(d).join("f"), "x").unwrap();
        }
        let node = LocalNode {
            address: "127.0.0.1:9042".into(),
            pid: 1,
            config: None,
            data_dirs: vec![storage.join("data")],
            commitlog_dir: Some(storage.join("commitlog")),
            log_dir: None,
            settings: Default::default(),
        };
        check_snapshot(&node, "ks", "iodig-loaded").unwrap();
        assert!(check_snapshot(&node, "ks", "other")
            .unwrap_err()
            .contains("no snapshot \"other\""));
        let done = put_back(&node, "ks", "iodig-loaded").unwrap();
        assert!(done.starts_with("1 table(s) of ks"), "{done}");
        let live: Vec<String> = std::fs::read_dir(&table)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "snapshots")
            .collect();
        assert_eq!(live, ["nb-1-big-Data.db"]);
        use std::os::unix::fs::MetadataExt as _;
        assert_eq!(
            std::fs::metadata(table.join("nb-1-big-Data.db"))
                .unwrap()
                .ino(),
            std::fs::metadata(snap.join("nb-1-big-Data.db"))
                .unwrap()
                .ino(),
            "a hard link, not a copy"
        );
        for d in ["commitlog", "hints", "saved_caches"] {
            assert_eq!(
                std::fs::read_dir(storage.join(d)).unwrap().count(),
                0,
                "{d}"
            );
        }
    }
}
