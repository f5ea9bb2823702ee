//! Snapshots of a loaded dataset: taken on running nodes (hard links, no copy), and restored
//! offline, each table's sstables replaced by links to the snapshot's, before the nodes start
//! again.

use crate::error::{io_err, Error, Result};
use crate::lifecycle::{down, restart};
use crate::state::Cluster;
use crate::{dist, nodetool, proc};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Flushes every node and takes a Cassandra snapshot named `tag` of `keyspace` on each (hard
/// links under `data/<ks>/<table>/snapshots/<tag>/`, so it costs no copy and no downtime).
pub fn snapshot(dir: &Path, tag: &str, keyspace: &str) -> Result<()> {
    check_tag(tag)?;
    let cluster = Cluster::load(dir)?;
    let java = dist::find_java()?;
    for node in &cluster.nodes {
        if !proc::node_alive(node) {
            return Err(Error::Other(format!(
                "node {} is not running; snapshots are taken on running nodes (start them with `iodig cassandra up --dir {}`)",
                node.address,
                dir.display()
            )));
        }
        nodetool::run(
            &java,
            &cluster.lib_dir,
            node,
            &["flush".into(), keyspace.into()],
        )?;
        nodetool::run(
            &java,
            &cluster.lib_dir,
            node,
            &["snapshot".into(), "-t".into(), tag.into(), keyspace.into()],
        )?;
    }
    Ok(())
}

fn check_tag(tag: &str) -> Result<()> {
    if tag.is_empty()
        || !tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(Error::Other(format!(
            "snapshot tag {tag:?}: use letters, digits, - and _ only"
        )));
    }
    Ok(())
}

/// Puts every node's `keyspace` back to snapshot `tag`: stops the nodes, replaces each table's
/// sstables with hard links to the snapshot's files, empties the commit log (it would replay the
/// writes made after the snapshot), hints and saved caches, and starts the nodes again.
///
/// Offline on purpose: it needs no TRUNCATE and no JMX, cannot half-apply on a live node, and
/// every step starts from a cold memtable and page cache like the briefs' restore from backup.
pub fn restore(dir: &Path, tag: &str, keyspace: &str) -> Result<Cluster> {
    check_tag(tag)?;
    let cluster = Cluster::load(dir)?;
    // Check the snapshot exists on every node before stopping anything.
    let mut plans = Vec::new();
    for node in &cluster.nodes {
        let ks_dir = node.data_dir().join(keyspace);
        let tables = snapshot_tables(&ks_dir, tag)?;
        if tables.is_empty() {
            return Err(Error::Other(format!(
                "node {}: no snapshot {tag:?} of keyspace {keyspace} under {}; take it with `iodig cassandra snapshot --tag {tag}`",
                node.address,
                ks_dir.display()
            )));
        }
        plans.push((node.clone(), tables));
    }
    down(dir, Duration::from_secs(60))?;
    for (node, tables) in &plans {
        for table_dir in tables {
            replace_with_snapshot(table_dir, tag)?;
        }
        for sub in ["commitlog", "hints", "saved_caches"] {
            clear_dir(&node.dir.join(sub))?;
        }
    }
    restart(dir)
}

/// Table directories of a keyspace that hold a snapshot named `tag`.
pub(crate) fn snapshot_tables(ks_dir: &Path, tag: &str) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(ks_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => {
            return Err(Error::Io {
                path: ks_dir.to_path_buf(),
                source: e,
            })
        }
    };
    for entry in entries.flatten() {
        let p = entry.path();
        if p.join("snapshots").join(tag).is_dir() {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// Removes a table's live files and hard-links the snapshot's sstables in their place
/// (sstables are immutable, so sharing inodes with the snapshot is safe).
pub(crate) fn replace_with_snapshot(table_dir: &Path, tag: &str) -> Result<()> {
    for entry in fs::read_dir(table_dir)
        .map_err(io_err(table_dir))?
        .flatten()
    {
        let p = entry.path();
        if p.is_file() {
            fs::remove_file(&p).map_err(io_err(&p))?;
        } else if p.is_dir()
            && p.file_name()
                .is_some_and(|n| n != "snapshots" && n != "backups")
        {
            // Secondary-index directories (".idx") hold sstables too; they rebuild from data.
            fs::remove_dir_all(&p).map_err(io_err(&p))?;
        }
    }
    let snap = table_dir.join("snapshots").join(tag);
    for entry in fs::read_dir(&snap).map_err(io_err(&snap))?.flatten() {
        let src = entry.path();
        let name = entry.file_name();
        // manifest.json and schema.cql describe the snapshot; they are not table files.
        if !src.is_file() || name == "manifest.json" || name == "schema.cql" {
            continue;
        }
        let dst = table_dir.join(&name);
        if fs::hard_link(&src, &dst).is_err() {
            fs::copy(&src, &dst).map_err(io_err(&dst))?;
        }
    }
    Ok(())
}

pub(crate) fn clear_dir(dir: &Path) -> Result<()> {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let p = entry.path();
            let r = if p.is_dir() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
            r.map_err(io_err(&p))?;
        }
    }
    Ok(())
}
