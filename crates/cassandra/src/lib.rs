//! Real local Apache Cassandra nodes for iodig: find or fetch the distribution, start N nodes on
//! 127.0.0.1 … 127.0.0.N, wait until they accept CQL, report their status, stop exactly the
//! processes started (by pid), snapshot and restore a loaded dataset, and read memtable-flush and
//! compaction events from their logs.
//!
//! Everything a later command needs is kept in a state file in the node directory
//! ([`STATE_FILE`]), so `up`, `status`, `down` and `restore` can be separate processes.

pub mod dist;
pub mod events;
mod fault;
pub mod host_snapshot;
mod isolate;
pub mod local;
mod nodetool;
mod ports;
mod proc;
pub mod tls;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use dist::{Distribution, DEFAULT_VERSION};
pub use events::DbEvent;
pub use fault::{inject, NodeFault};
pub use isolate::{await_all_up, isolate, thaw, Isolated};

/// Name of the state file `up` writes into the node directory.
pub const STATE_FILE: &str = "iodig-cassandra.json";
/// CQL port of every node (each node has its own loopback address, so the port is shared).
pub const CQL_PORT: u16 = 9042;
/// Inter-node (gossip, streaming) port of every node.
pub const STORAGE_PORT: u16 = 7000;
/// The main class a node runs; also how a port's holder is recognized as a node.
pub(crate) const DAEMON_CLASS: &str = "org.apache.cassandra.service.CassandraDaemon";
/// JMX port of node 1; node i uses `JMX_BASE_PORT + i - 1` because local JMX binds to 127.0.0.1
/// for every node.
pub const JMX_BASE_PORT: u16 = 7199;

/// A failure of the node manager; every message names the path, port or tool and the fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A required program is missing: names the Debian package that provides it.
    #[error("`{tool}` not found on PATH; install it with `apt-get install {package}`{extra}")]
    MissingTool {
        /// The program looked for on PATH (`java`, `mvn`, …).
        tool: String,
        /// The Debian package to install for it.
        package: String,
        /// Appended to the message as is: another way out, with its leading space (may be
        /// empty).
        extra: String,
    },
    /// A port a node needs is taken.
    #[error("{0}")]
    PortInUse(String),
    /// A node did not come up.
    #[error("{0}")]
    NotReady(String),
    /// File-system trouble, with the path.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// Anything else, said plainly.
    #[error("{0}")]
    Other(String),
}

/// The node manager's result: every failure is an [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What `up` starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpOptions {
    /// Number of nodes, on 127.0.0.1 … 127.0.0.N.
    pub nodes: u32,
    /// JVM heap per node (`-Xms`/`-Xmx`), as java spells it: `1G`, `2048M`.
    pub heap: String,
    /// Directory holding every node's data, commit log, caches, hints, cdc and logs.
    pub dir: PathBuf,
    /// Cassandra version resolved from Maven Central when `$CASSANDRA_HOME` is not set.
    pub cassandra_version: String,
    /// Virtual nodes per node (`num_tokens`); the briefs use 256, Cassandra 5's default is 16.
    pub num_tokens: u32,
    /// Enable `PasswordAuthenticator` (default superuser `cassandra`/`cassandra`).
    pub password_auth: bool,
    /// Serve CQL over TLS only, with a certificate from a local CA (see [`tls`]).
    #[serde(default)]
    pub tls: bool,
    /// How long to wait for each node to accept CQL.
    pub ready_timeout: Duration,
    /// `memtable_heap_space` as cassandra.yaml spells it (`16MiB`); none keeps Cassandra's
    /// default (a quarter of the heap). Small memtables flush, and so compact, within a short
    /// step: the briefs' flush bursts in seconds instead of minutes.
    #[serde(default)]
    pub memtable_space: Option<String>,
}

impl Default for UpOptions {
    fn default() -> Self {
        Self {
            nodes: 1,
            heap: "1G".into(),
            dir: PathBuf::from("cassandra-nodes"),
            cassandra_version: DEFAULT_VERSION.into(),
            num_tokens: 16,
            password_auth: false,
            tls: false,
            ready_timeout: Duration::from_secs(300),
            memtable_space: None,
        }
    }
}

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

    /// True when any recorded node is still running.
    pub fn alive(&self) -> bool {
        self.nodes.iter().any(proc::node_alive)
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

    fn save(&self) -> Result<()> {
        let path = self.options.dir.join(STATE_FILE);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).expect("state serialises");
        fs::write(&tmp, text).map_err(io_err(&tmp))?;
        fs::rename(&tmp, &path).map_err(io_err(&path))
    }
}

pub(crate) fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Starts `opts.nodes` nodes one after another (Cassandra refuses concurrent bootstraps) and
/// returns when every node accepts CQL. Nodes already started stay running if a later one fails,
/// and are recorded in the state file so `down` can stop them.
pub fn up(opts: &UpOptions) -> Result<Cluster> {
    if opts.nodes == 0 || opts.nodes > 254 {
        return Err(Error::Other(format!(
            "--nodes {}: give between 1 and 254 nodes (one loopback address each)",
            opts.nodes
        )));
    }
    if let Ok(existing) = Cluster::load(&opts.dir) {
        if existing.nodes.iter().any(proc::node_alive) {
            return Err(Error::Other(format!(
                "{}: nodes started by an earlier `up` are still running; stop them with `iodig cassandra down --dir {}`",
                opts.dir.display(),
                opts.dir.display()
            )));
        }
    }
    let java = dist::find_java()?;
    let dist = dist::resolve(&opts.cassandra_version)?;
    fs::create_dir_all(&opts.dir).map_err(io_err(&opts.dir))?;
    let dir = fs::canonicalize(&opts.dir).map_err(io_err(&opts.dir))?;
    let options = UpOptions {
        dir: dir.clone(),
        ..opts.clone()
    };
    if opts.tls {
        tls::ensure(&java, &dir, opts.nodes)?;
    }

    ports::ensure_nodes_free(opts.nodes)?;

    let mut cluster = Cluster {
        options,
        lib_dir: dist.lib_dir.clone(),
        nodes: Vec::new(),
    };
    for i in 1..=opts.nodes {
        let node = start_node(&java, &dist, &cluster.options, i)?;
        cluster.nodes.push(node);
        cluster.save()?;
        wait_ready(cluster.nodes.last().unwrap(), opts.ready_timeout)?;
    }
    if opts.password_auth {
        wait_superuser(&cluster)?;
    }
    Ok(cluster)
}

/// With PasswordAuthenticator, Cassandra creates the `cassandra` superuser in the background
/// after CQL is up; logins fail until then, so `up` waits for it (once per directory).
fn wait_superuser(cluster: &Cluster) -> Result<()> {
    let marker = cluster.options.dir.join(".superuser-ready");
    if marker.exists() {
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let created = cluster.nodes.iter().any(|n| {
            fs::read_to_string(n.log_dir().join("system.log"))
                .map(|t| t.contains("Created default superuser role"))
                .unwrap_or(false)
        });
        if created {
            fs::write(&marker, "").map_err(io_err(&marker))?;
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::NotReady(format!(
                "password authentication is on but no node logged \"Created default superuser role\" within 120 s; see {}",
                cluster.nodes[0].log_dir().join("system.log").display()
            )));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Starts the nodes recorded in an existing directory again, with the same options and data
/// (used by `restore`, and for a cluster stopped with `down`).
pub fn restart(dir: &Path) -> Result<Cluster> {
    let old = Cluster::load(dir)?;
    let java = dist::find_java()?;
    let dist = Distribution {
        lib_dir: old.lib_dir.clone(),
        version: old.options.cassandra_version.clone(),
    };
    let mut cluster = Cluster {
        nodes: Vec::new(),
        ..old.clone()
    };
    for n in &old.nodes {
        if proc::node_alive(n) {
            return Err(Error::Other(format!(
                "node {} (pid {}) is still running; stop it with `iodig cassandra down --dir {}` first",
                n.address,
                n.pid,
                dir.display()
            )));
        }
    }
    ports::ensure_nodes_free(old.options.nodes)?;
    for i in 1..=old.options.nodes {
        let node = start_node(&java, &dist, &cluster.options, i)?;
        cluster.nodes.push(node);
        cluster.save()?;
        wait_ready(cluster.nodes.last().unwrap(), old.options.ready_timeout)?;
    }
    Ok(cluster)
}

/// Writes a node's configuration and launches its JVM in its own process group (so a Ctrl-C
/// meant for iodig does not kill the database mid-write).
pub(crate) fn start_node(
    java: &Path,
    dist: &Distribution,
    opts: &UpOptions,
    index: u32,
) -> Result<NodeInfo> {
    let node_dir = opts.dir.join(format!("node{index}"));
    for sub in [
        "data",
        "commitlog",
        "saved_caches",
        "hints",
        "cdc_raw",
        "logs",
        "conf",
    ] {
        let p = node_dir.join(sub);
        fs::create_dir_all(&p).map_err(io_err(&p))?;
    }
    let address = format!("127.0.0.{index}");
    let jmx_port = JMX_BASE_PORT + index as u16 - 1;
    let yaml = node_dir.join("conf/cassandra.yaml");
    fs::write(&yaml, dist::cassandra_yaml(&node_dir, &address, opts)).map_err(io_err(&yaml))?;
    let logback = node_dir.join("conf/logback.xml");
    fs::write(&logback, dist::LOGBACK_XML).map_err(io_err(&logback))?;

    let stdout_path = node_dir.join("logs/stdout.log");
    let stdout = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&stdout_path)
        .map_err(io_err(&stdout_path))?;
    let stderr = stdout.try_clone().map_err(io_err(&stdout_path))?;

    let mut cmd = Command::new(java);
    cmd.args(dist::jvm_flags(&opts.heap))
        .arg(format!("-Dcassandra.config=file://{}", yaml.display()))
        .arg(format!("-Dlogback.configurationFile={}", logback.display()))
        .arg(format!(
            "-Dcassandra.logdir={}",
            node_dir.join("logs").display()
        ))
        .arg(format!("-Dcassandra.storagedir={}", node_dir.display()))
        .arg(format!("-Dcassandra.jmx.local.port={jmx_port}"))
        .arg("-Dcassandra-foreground=yes")
        // The default superuser appears 10 s after start otherwise; tests log in at once.
        .arg("-Dcassandra.superuser_setup_delay_ms=0")
        // A joining node otherwise sleeps 30 s (ring delay) plus three 8 s gossip-settle waits;
        // on loopback, with nodes started strictly one after another, gossip converges in
        // milliseconds, so these waits only slow down `up` (ccm does the same for tests).
        .arg("-Dcassandra.ring_delay_ms=5000")
        .arg("-Dcassandra.skip_wait_for_gossip_to_settle=0")
        .arg("-cp")
        .arg(dist.classpath())
        .arg(DAEMON_CLASS)
        .current_dir(&node_dir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().map_err(|e| {
        Error::Other(format!(
            "cannot start {} for node {address}: {e}",
            java.display()
        ))
    })?;
    let pid = child.id();
    // The Child handle is dropped without waiting: the node outlives `iodig cassandra up`.
    // `down` reaps it when it is still our child.
    drop(child);
    let start_ticks = proc::start_ticks(pid).unwrap_or(0);
    let cgroup = proc::own_cgroup(&address, pid);
    Ok(NodeInfo {
        index,
        address,
        cql_port: CQL_PORT,
        jmx_port,
        pid,
        start_ticks,
        dir: node_dir,
        started_unix_ms: now_unix_ms(),
        cgroup,
    })
}

/// Waits for the log line that says CQL is being served, then for a TCP connect to the port.
pub(crate) fn wait_ready(node: &NodeInfo, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let needle = format!(
        "Starting listening for CQL clients on /{}:{}",
        node.address, node.cql_port
    );
    let system_log = node.log_dir().join("system.log");
    let stdout_log = node.log_dir().join("stdout.log");
    loop {
        let logged = [&system_log, &stdout_log].iter().any(|p| {
            fs::read_to_string(p)
                .map(|t| t.contains(&needle))
                .unwrap_or(false)
        });
        if logged && ports::can_connect(&node.address, node.cql_port) {
            return Ok(());
        }
        if !proc::node_alive(node) {
            return Err(Error::NotReady(format!(
                "node {} (pid {}) exited during start-up; last lines of {}:\n{}",
                node.address,
                node.pid,
                stdout_log.display(),
                tail(&stdout_log, 25)
            )));
        }
        if Instant::now() > deadline {
            return Err(Error::NotReady(format!(
                "node {} (pid {}) did not accept CQL within {} s; it is still running (stop it with \
                 `iodig cassandra down --dir {}`); last lines of {}:\n{}",
                node.address,
                node.pid,
                timeout.as_secs(),
                node.dir.parent().unwrap_or(&node.dir).display(),
                system_log.display(),
                tail(&system_log, 15)
            )));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// One node `down` handled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopped {
    /// The node's address, `127.0.0.<index>`.
    pub address: String,
    /// The pid `up` recorded for it (signalled only if it is still that process).
    pub pid: u32,
    /// `terminated` (SIGTERM was enough), `killed` (SIGKILL after the grace time) or
    /// `not running` (nothing to do).
    pub how: String,
}

/// Stops exactly the nodes recorded in `dir` by pid: SIGTERM (Cassandra drains, flushing its
/// memtables), up to `grace` of waiting, then SIGKILL. The state file stays, so `restart` and
/// `status` still know the layout.
pub fn down(dir: &Path, grace: Duration) -> Result<Vec<Stopped>> {
    let cluster = Cluster::load(dir)?;
    // Stop in reverse start order so the seed (node 1) goes last and the others leave cleanly.
    let mut out = Vec::new();
    for node in cluster.nodes.iter().rev() {
        let how = proc::stop(node, grace);
        out.push(Stopped {
            address: node.address.clone(),
            pid: node.pid,
            how: how.into(),
        });
    }
    out.reverse();
    Ok(out)
}

/// Stops the nodes of a cluster when dropped, even when a test panics.
#[derive(Debug)]
pub struct Guard {
    /// The cluster directory (`up`'s `dir`); on drop its nodes get `down` with 20 s of grace.
    pub dir: PathBuf,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = down(&self.dir, Duration::from_secs(20));
    }
}

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

/// The ownership table of a managed cluster, asked of the first running node through nodetool
/// (from the same jars). With `keyspace`, ownership is effective ownership for its replication.
pub fn status(dir: &Path, keyspace: Option<&str>) -> Result<Vec<NodeStatus>> {
    let cluster = Cluster::load(dir)?;
    let java = dist::find_java()?;
    let mut rows = match cluster.nodes.iter().find(|n| proc::node_alive(n)) {
        Some(node) => {
            let mut args = vec!["status".to_string()];
            if let Some(ks) = keyspace {
                args.push(ks.to_string());
            }
            let out = nodetool::run(&java, &cluster.lib_dir, node, &args)?;
            nodetool::parse_status(&out)
        }
        None => Vec::new(),
    };
    // Nodes nodetool does not list (all down) still appear, marked down.
    for node in &cluster.nodes {
        let alive = proc::node_alive(node);
        match rows.iter_mut().find(|r| r.address == node.address) {
            Some(r) => {
                r.pid = Some(node.pid);
                r.running = alive;
            }
            None => rows.push(NodeStatus {
                address: node.address.clone(),
                state: "DN".into(),
                load: "?".into(),
                tokens: cluster.options.num_tokens,
                owns_percent: None,
                host_id: "?".into(),
                rack: "?".into(),
                pid: Some(node.pid),
                running: alive,
            }),
        }
    }
    // Node order (127.0.0.1, .2, …), not nodetool's token order.
    rows.sort_by_key(|r| {
        r.address
            .rsplit('.')
            .next()
            .and_then(|o| o.parse::<u32>().ok())
            .unwrap_or(u32::MAX)
    });
    Ok(rows)
}

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

/// Memtable flushes and compactions of every managed node, read from its logs, in start order.
/// `since_unix_ms` keeps only events that started at or after that time (one step's window).
pub fn events(dir: &Path, since_unix_ms: Option<u64>) -> Result<Vec<DbEvent>> {
    let cluster = Cluster::load(dir)?;
    let mut all = Vec::new();
    for node in &cluster.nodes {
        all.extend(events::read_node_logs(&node.log_dir(), &node.address)?);
    }
    if let Some(since) = since_unix_ms {
        all.retain(|e| e.start_unix_ms >= since);
    }
    all.sort_by(|a, b| {
        a.start_unix_ms
            .cmp(&b.start_unix_ms)
            .then_with(|| a.node.cmp(&b.node))
    });
    Ok(all)
}
