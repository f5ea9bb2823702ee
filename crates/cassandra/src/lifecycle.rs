//! Starting and stopping the nodes: `up` one after another until each accepts CQL, `restart`
//! of a directory's nodes, and `down`, which stops exactly the processes started, by pid.

use crate::dist::{self, Distribution};
use crate::error::{io_err, Error, Result};
use crate::state::{Cluster, NodeInfo};
use crate::{ports, proc, tls, UpOptions, CQL_PORT, DAEMON_CLASS, JMX_BASE_PORT};
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// Whether a cluster's nodes run: asked of their processes.
impl Cluster {
    /// True when any recorded node is still running.
    pub fn alive(&self) -> bool {
        self.nodes.iter().any(proc::node_alive)
    }
}

fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
