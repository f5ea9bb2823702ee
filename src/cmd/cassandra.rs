//! `iodig cassandra up|down|status|snapshot|restore|events`: real local Apache Cassandra nodes
//! for tests and demos, managed by pid from a state file in `--dir`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use iodig_cassandra::{NodeStatus, UpOptions};

/// Start, inspect and stop local Cassandra nodes on 127.0.0.1 … 127.0.0.N.
#[derive(Debug, clap::Args)]
pub struct CassandraArgs {
    #[command(subcommand)]
    pub command: CassandraCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum CassandraCommand {
    /// Start N nodes (from $CASSANDRA_HOME, or cassandra-all jars from Maven Central) and wait
    /// until each accepts CQL.
    Up {
        /// Number of nodes, on 127.0.0.1 … 127.0.0.N.
        #[arg(long, default_value_t = 1)]
        nodes: u32,
        /// JVM heap per node, as java spells it (1G, 2048M).
        #[arg(long, default_value = "1G")]
        heap: String,
        #[command(flatten)]
        dir: DirArg,
        /// Cassandra version fetched from Maven Central when CASSANDRA_HOME is unset.
        #[arg(long, default_value = iodig_cassandra::DEFAULT_VERSION)]
        cassandra_version: String,
        /// Virtual nodes per node (num_tokens); the briefs used 256.
        #[arg(long, default_value_t = 16)]
        tokens: u32,
        /// Turn on PasswordAuthenticator (superuser cassandra/cassandra).
        #[arg(long)]
        password_auth: bool,
        /// Serve CQL over TLS only, with certificates from a local CA made in DIR/tls (clients
        /// trust DIR/tls/ca.pem).
        #[arg(long)]
        tls: bool,
        /// Seconds to wait for each node to accept CQL.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        /// Memtable space per node (cassandra.yaml's memtable_heap_space, e.g. 16MiB): small
        /// memtables flush and compact within a short step. Default: Cassandra's (1/4 heap).
        #[arg(long, value_parser = parse_memtable_space)]
        memtable_space: Option<String>,
    },
    /// Stop the nodes `up` started in DIR, by pid (SIGTERM, then SIGKILL after the grace time).
    Down {
        #[command(flatten)]
        dir: DirArg,
        /// Seconds to wait after SIGTERM before SIGKILL.
        #[arg(long, default_value_t = 60)]
        grace: u64,
    },
    /// Each node's state, load, tokens and percent owned (nodetool status).
    Status {
        #[command(flatten)]
        dir: DirArg,
        /// Keyspace whose effective ownership to show (sums to 100 % × RF); falls back to raw
        /// token ownership when it does not exist.
        #[arg(long, default_value = "ycsb")]
        keyspace: String,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Flush and snapshot a keyspace on every node (nodetool flush + snapshot -t TAG).
    Snapshot(SnapshotArgs),
    /// Put a keyspace back to a snapshot: stop the nodes, swap in the snapshot's sstables,
    /// drop the commit log, start the nodes again.
    Restore(SnapshotArgs),
    /// Memtable flushes and compactions from the nodes' logs, as JSON lines.
    Events {
        #[command(flatten)]
        dir: DirArg,
        /// Only events that started at or after this unix time in milliseconds.
        #[arg(long)]
        since_unix_ms: Option<u64>,
    },
}

/// Which snapshot of which keyspace, on the nodes of which directory.
#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub dir: DirArg,
    #[arg(long)]
    pub tag: String,
    #[arg(long, default_value = "ycsb")]
    pub keyspace: String,
}

#[derive(Debug, clap::Args)]
pub struct DirArg {
    /// Directory with every node's data, commit log and logs, and the state file.
    #[arg(long, default_value = "cassandra-nodes")]
    pub dir: PathBuf,
}

pub fn run(args: &CassandraArgs) -> Result<ExitCode, iodig_runner::RunError> {
    if let Some(dir) = nodes_dir_of(&args.command) {
        // A directory `up` never made is the user's mistake (exit 2), not a failure of the nodes.
        iodig_cassandra::Cluster::load(dir).map_err(|e| iodig_runner::UsageError(e.to_string()))?;
    }
    Ok(run_command(args)?)
}

/// The subcommand itself, once its nodes directory is known to exist.
fn run_command(args: &CassandraArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        CassandraCommand::Up {
            nodes,
            heap,
            dir,
            cassandra_version,
            tokens,
            password_auth,
            tls,
            timeout,
            memtable_space,
        } => {
            let opts = UpOptions {
                nodes: *nodes,
                heap: heap.clone(),
                dir: dir.dir.clone(),
                cassandra_version: cassandra_version.clone(),
                num_tokens: *tokens,
                password_auth: *password_auth,
                tls: *tls,
                ready_timeout: Duration::from_secs(*timeout),
                memtable_space: memtable_space.clone(),
            };
            let started = std::time::Instant::now();
            let cluster = iodig_cassandra::up(&opts).context("iodig cassandra up")?;
            for n in &cluster.nodes {
                println!(
                    "node {} up: {}:{} pid {} (JMX {}), logs in {}",
                    n.index,
                    n.address,
                    n.cql_port,
                    n.pid,
                    n.jmx_port,
                    n.log_dir().display()
                );
            }
            let mut client_props = format!("-p hosts={}", cluster.hosts());
            if cluster.options.tls {
                client_props.push_str(&format!(
                    " -p cassandra.useSSL=true -p cassandra.truststore={}",
                    iodig_cassandra::tls::files(&cluster.options.dir)
                        .ca_pem
                        .display()
                ));
            }
            if cluster.options.password_auth {
                client_props
                    .push_str(" -p cassandra.username=cassandra -p cassandra.password=cassandra");
            }
            println!(
                "{} node(s) accept CQL after {:.0} s; use {client_props}; stop with `iodig cassandra down --dir {}`",
                cluster.nodes.len(),
                started.elapsed().as_secs_f64(),
                cluster.options.dir.display()
            );
        }
        CassandraCommand::Down { dir, grace } => {
            for s in iodig_cassandra::down(&dir.dir, Duration::from_secs(*grace))
                .context("iodig cassandra down")?
            {
                println!("{} pid {}: {}", s.address, s.pid, s.how);
            }
        }
        CassandraCommand::Status {
            dir,
            keyspace,
            json,
        } => {
            let rows = match iodig_cassandra::status(&dir.dir, Some(keyspace)) {
                Ok(r) => r,
                // No such keyspace yet: nodetool refuses; raw token ownership still helps.
                Err(e)
                    if e.to_string().contains("does not exist")
                        || e.to_string().contains("Unknown keyspace") =>
                {
                    eprintln!(
                        "iodig: keyspace {keyspace} does not exist yet; showing token ownership"
                    );
                    iodig_cassandra::status(&dir.dir, None).context("iodig cassandra status")?
                }
                Err(e) => return Err(e).context("iodig cassandra status"),
            };
            if *json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                print!("{}", status_table(&rows));
            }
        }
        CassandraCommand::Snapshot(SnapshotArgs { dir, tag, keyspace }) => {
            iodig_cassandra::snapshot(&dir.dir, tag, keyspace)
                .context("iodig cassandra snapshot")?;
            println!("snapshot {tag} of keyspace {keyspace} taken on every node");
        }
        CassandraCommand::Restore(SnapshotArgs { dir, tag, keyspace }) => {
            let c = iodig_cassandra::restore(&dir.dir, tag, keyspace)
                .context("iodig cassandra restore")?;
            println!(
                "keyspace {keyspace} restored to snapshot {tag}; {} node(s) accept CQL at {}",
                c.nodes.len(),
                c.hosts()
            );
        }
        CassandraCommand::Events { dir, since_unix_ms } => {
            for e in iodig_cassandra::events(&dir.dir, *since_unix_ms)
                .context("iodig cassandra events")?
            {
                println!("{}", serde_json::to_string(&e)?);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The briefs' ownership table.
fn status_table(rows: &[NodeStatus]) -> String {
    let mut s = format!(
        "{:<5} {:<12} {:>12} {:>6} {:>8} {:<8} {:<36} {}\n",
        "State", "Address", "Load", "Tokens", "Owns", "Pid", "Host ID", "Rack"
    );
    for r in rows {
        let owns = r
            .owns_percent
            .map(|p| format!("{p:.1}%"))
            .unwrap_or_else(|| "?".into());
        let pid = match (r.pid, r.running) {
            (Some(p), true) => p.to_string(),
            (Some(_), false) => "stopped".into(),
            (None, _) => "-".into(),
        };
        s.push_str(&format!(
            "{:<5} {:<12} {:>12} {:>6} {:>8} {:<8} {:<36} {}\n",
            r.state, r.address, r.load, r.tokens, owns, pid, r.host_id, r.rack
        ));
    }
    match rows
        .iter()
        .filter_map(|r| r.owns_percent)
        .reduce(|a, b| a + b)
    {
        Some(total) => s.push_str(&format!(
            "total owned: {total:.1}% (100% × replication factor)\n"
        )),
        None => s.push_str(
            "total owned: ? (no running node to ask; start them with `iodig cassandra up`)\n",
        ),
    }
    s
}

/// The node directory a command works on, for every command but `up` (which makes it).
fn nodes_dir_of(command: &CassandraCommand) -> Option<&std::path::Path> {
    match command {
        CassandraCommand::Up { .. } => None,
        CassandraCommand::Down { dir, .. }
        | CassandraCommand::Status { dir, .. }
        | CassandraCommand::Events { dir, .. }
        | CassandraCommand::Snapshot(SnapshotArgs { dir, .. })
        | CassandraCommand::Restore(SnapshotArgs { dir, .. }) => Some(&dir.dir),
    }
}

/// `--memtable-space`: a whole number of MiB or GiB as cassandra.yaml takes it (`16MiB`,
/// `1GiB`); anything else would only fail at the node's start, a minute later.
fn parse_memtable_space(v: &str) -> Result<String, String> {
    let (num, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
    match (num.parse::<u64>(), unit) {
        (Ok(n), "MiB" | "GiB") if n > 0 => Ok(v.to_string()),
        _ => Err(format!(
            "{v:?} is not a memtable size; give whole MiB or GiB as cassandra.yaml spells them, e.g. 16MiB"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(address: &str, owns_percent: Option<f64>, running: bool) -> NodeStatus {
        NodeStatus {
            address: address.into(),
            state: if running { "UN" } else { "DN" }.into(),
            load: "?".into(),
            tokens: 16,
            owns_percent,
            host_id: "?".into(),
            rack: "?".into(),
            pid: Some(42),
            running,
        }
    }

    #[test]
    fn memtable_space_takes_whole_mib_or_gib_only() {
        assert_eq!(parse_memtable_space("16MiB").unwrap(), "16MiB");
        assert_eq!(parse_memtable_space("1GiB").unwrap(), "1GiB");
        for bad in ["16", "16MB", "0MiB", "MiB", "1.5GiB", ""] {
            let e = parse_memtable_space(bad).unwrap_err();
            assert!(e.contains("e.g. 16MiB"), "{bad}: {e}");
        }
    }

    #[test]
    fn ownership_total_sums_known_nodes_and_says_when_none_answered() {
        let up = status_table(&[
            row("127.0.0.1", Some(66.7), true),
            row("127.0.0.2", Some(133.3), true),
        ]);
        assert!(up.contains("total owned: 200.0%"), "{up}");
        let down = status_table(&[row("127.0.0.1", None, false)]);
        assert!(down.contains("total owned: ? (no running node"), "{down}");
        assert!(down.contains("stopped"), "{down}");
        assert!(!down.contains("-0.0"), "{down}");
    }
}
