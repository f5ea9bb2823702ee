//! The `cassandra` binding: Apache Cassandra over CQL with the scylla driver, issuing the
//! statements of YCSB's `cassandra-cql` binding (prepared once per field set, token-aware
//! routing, per-statement consistency), with all workers sharing one session so 1024 YCSB
//! threads are 1024 in-flight requests, not 1024 connections.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use scylla::client::execution_profile::{ExecutionProfile, ExecutionProfileHandle};
use scylla::client::session::{Session, TlsContext};
use scylla::client::session_builder::SessionBuilder;
use scylla::client::PoolSize;
use scylla::deserialize::row::ColumnIterator;
use scylla::errors::ExecutionError;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::Consistency;

use crate::{Db, DbError, DbFactory, Execution, Fields, Properties, Record, Status};

mod deadline;
use deadline::{within, Deadlines, Slot, TimedOut};

/// Property names this binding reads, for the unknown-property check.
pub const PROPERTIES: &[&str] = &[
    "hosts",
    "port",
    "cassandra.keyspace",
    "cassandra.readconsistencylevel",
    "cassandra.writeconsistencylevel",
    "cassandra.username",
    "cassandra.password",
    "cassandra.connecttimeoutmillis",
    "cassandra.readtimeoutmillis",
    "cassandra.useSSL",
    "cassandra.truststore",
    "cassandra.replicationfactor",
    "cassandra.replication",
    "cassandra.datacenters",
    "cassandra.maxconnections",
    "cassandra.coreconnections",
    "cassandra.tracing",
];

/// YCSB's key column (`CassandraCQLClient.YCSB_KEY`).
pub const KEY_COLUMN: &str = "y_id";

/// Consistency level of reads and writes when not given. YCSB master uses QUORUM (0.17.0 used
/// ONE); QUORUM is what the briefs' RF=3 clusters ran.
pub const DEFAULT_CONSISTENCY: &str = "QUORUM";

/// The binding's settings, parsed from YCSB properties.
#[derive(Debug, Clone, PartialEq)]
pub struct CassandraConfig {
    /// `host:port` of every contact point.
    pub contact_points: Vec<String>,
    pub keyspace: String,
    pub table: String,
    pub field_names: Vec<String>,
    pub read_consistency: Consistency,
    pub write_consistency: Consistency,
    pub username: Option<String>,
    pub password: Option<String>,
    pub connect_timeout: Duration,
    /// How long a request may go unanswered before it is an ERROR; None
    /// (`cassandra.readtimeoutmillis=0`) waits forever, as the Java driver's 0 does. Operations
    /// time out through [`deadline`]'s watchdog, everything else through the driver.
    pub request_timeout: Option<Duration>,
    pub use_ssl: bool,
    /// PEM file of the CA certificates that sign the nodes' certificates.
    pub truststore: Option<std::path::PathBuf>,
    /// The `WITH replication = {…}` map used when the keyspace is created.
    pub replication: String,
    /// Connections per node (`cassandra.maxconnections`); the driver's default when absent.
    pub connections_per_host: Option<usize>,
    pub tracing: bool,
}

fn cfg_err(msg: String) -> DbError {
    DbError::Config(msg)
}

fn parse_consistency(props: &Properties, key: &str) -> Result<Consistency, DbError> {
    let v = props
        .get_str(key, DEFAULT_CONSISTENCY)
        .trim()
        .to_ascii_uppercase();
    Ok(match v.as_str() {
        "ANY" => Consistency::Any,
        "ONE" => Consistency::One,
        "TWO" => Consistency::Two,
        "THREE" => Consistency::Three,
        "QUORUM" => Consistency::Quorum,
        "ALL" => Consistency::All,
        "LOCAL_QUORUM" => Consistency::LocalQuorum,
        "EACH_QUORUM" => Consistency::EachQuorum,
        "LOCAL_ONE" => Consistency::LocalOne,
        "SERIAL" => Consistency::Serial,
        "LOCAL_SERIAL" => Consistency::LocalSerial,
        _ => {
            return Err(cfg_err(format!(
                "property {key}={v}: unknown consistency level; use ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM, LOCAL_ONE or ANY"
            )))
        }
    })
}

/// CQL identifiers iodig generates statements from must be plain (no quoting, no injection).
fn check_identifier(what: &str, name: &str) -> Result<(), DbError> {
    let ok = !name.is_empty()
        && name.len() <= 48
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    if ok {
        Ok(())
    } else {
        Err(cfg_err(format!(
            "{what}={name:?}: not a plain CQL name; use letters, digits and _ (starting with a letter, at most 48)"
        )))
    }
}

impl CassandraConfig {
    /// Reads the binding's properties; every error names the property and the fix.
    pub fn from_props(props: &Properties) -> Result<Self, DbError> {
        let port = props.get_u64("port", 9042).map_err(|e| cfg_err(e.0))?;
        if port == 0 || port > 65535 {
            return Err(cfg_err(format!(
                "property port={port}: expected a TCP port 1–65535"
            )));
        }
        let hosts = props.get("hosts").map(str::trim).filter(|h| !h.is_empty()).ok_or_else(|| {
            cfg_err(
                "property hosts is required for --db cassandra: give the contact points, e.g. -p hosts=127.0.0.1 \
                 (start local nodes with `iodig cassandra up`)"
                    .into(),
            )
        })?;
        let contact_points = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| {
                // host, host:port, or [v6]:port; a bare IPv6 address gets the port in brackets.
                if h.starts_with('[') || (h.contains(':') && h.matches(':').count() == 1) {
                    h.to_string()
                } else if h.contains(':') {
                    format!("[{h}]:{port}")
                } else {
                    format!("{h}:{port}")
                }
            })
            .collect::<Vec<_>>();
        if contact_points.is_empty() {
            return Err(cfg_err(format!(
                "property hosts={hosts:?}: no host given; e.g. -p hosts=127.0.0.1,127.0.0.2"
            )));
        }
        let keyspace = props.get_str("cassandra.keyspace", "ycsb").to_string();
        check_identifier("property cassandra.keyspace", &keyspace)?;
        let table = props.get_str("table", "usertable").to_string();
        check_identifier("property table", &table)?;
        let field_count = props.get_u64("fieldcount", 10).map_err(|e| cfg_err(e.0))?;
        if field_count == 0 || field_count > 1000 {
            return Err(cfg_err(format!(
                "property fieldcount={field_count}: expected 1–1000 columns"
            )));
        }
        let prefix = props.get_str("fieldnameprefix", "field");
        let field_names: Vec<String> = (0..field_count).map(|i| format!("{prefix}{i}")).collect();
        check_identifier("property fieldnameprefix", &field_names[0])?;

        let rf = props
            .get_u64("cassandra.replicationfactor", 1)
            .map_err(|e| cfg_err(e.0))?;
        if rf == 0 {
            return Err(cfg_err(
                "property cassandra.replicationfactor=0: expected 1 or more".into(),
            ));
        }
        let strategy = props
            .get_choice(
                "cassandra.replication",
                "SimpleStrategy",
                &["SimpleStrategy", "NetworkTopologyStrategy"],
            )
            .map_err(|e| cfg_err(e.0))?;
        let replication = if strategy == "SimpleStrategy" {
            if props.contains("cassandra.datacenters") {
                return Err(cfg_err(
                    "property cassandra.datacenters needs -p cassandra.replication=NetworkTopologyStrategy".into(),
                ));
            }
            format!("{{'class': 'SimpleStrategy', 'replication_factor': {rf}}}")
        } else {
            let dcs = props.get("cassandra.datacenters").ok_or_else(|| {
                cfg_err(
                    "property cassandra.replication=NetworkTopologyStrategy needs cassandra.datacenters, e.g. \
                     -p cassandra.datacenters=dc1:3,dc2:3 (a single local node's data center is datacenter1)"
                        .into(),
                )
            })?;
            let mut parts = vec!["'class': 'NetworkTopologyStrategy'".to_string()];
            for item in dcs.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let (dc, n) = item.split_once(':').ok_or_else(|| {
                    cfg_err(format!(
                        "property cassandra.datacenters: {item:?} is not NAME:RF, e.g. dc1:3"
                    ))
                })?;
                let n: u32 = n.trim().parse().map_err(|_| {
                    cfg_err(format!("property cassandra.datacenters: {item:?}: the replication factor after ':' must be a number"))
                })?;
                let dc = dc.trim();
                if dc.is_empty()
                    || !dc
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
                {
                    return Err(cfg_err(format!(
                        "property cassandra.datacenters: data center name {dc:?} is not plain"
                    )));
                }
                parts.push(format!("'{dc}': {n}"));
            }
            format!("{{{}}}", parts.join(", "))
        };
        let username = props.get("cassandra.username").map(str::to_string);
        let password = props.get("cassandra.password").map(str::to_string);
        if username.is_some() != password.is_some() {
            return Err(cfg_err(
                "properties cassandra.username and cassandra.password go together; give both or neither".into(),
            ));
        }
        let connections = props
            .get_u64("cassandra.maxconnections", 0)
            .map_err(|e| cfg_err(e.0))?;
        Ok(CassandraConfig {
            contact_points,
            keyspace,
            table,
            field_names,
            read_consistency: parse_consistency(props, "cassandra.readconsistencylevel")?,
            write_consistency: parse_consistency(props, "cassandra.writeconsistencylevel")?,
            username,
            password,
            connect_timeout: Duration::from_millis(
                props
                    .get_u64("cassandra.connecttimeoutmillis", 5000)
                    .map_err(|e| cfg_err(e.0))?
                    .max(1),
            ),
            request_timeout: match props
                .get_u64("cassandra.readtimeoutmillis", 12000)
                .map_err(|e| cfg_err(e.0))?
            {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
            use_ssl: props
                .get_bool("cassandra.useSSL", false)
                .map_err(|e| cfg_err(e.0))?,
            truststore: props.get("cassandra.truststore").map(Into::into),
            replication,
            connections_per_host: (connections > 0).then_some(connections as usize),
            tracing: props
                .get_bool("cassandra.tracing", false)
                .map_err(|e| cfg_err(e.0))?,
        })
    }
}

/// The runtime the driver's connection tasks live on: the caller's, or one the factory owns.
enum Runtime {
    Borrowed(tokio::runtime::Handle),
    Owned(Option<tokio::runtime::Runtime>),
}

impl Runtime {
    fn handle(&self) -> tokio::runtime::Handle {
        match self {
            Runtime::Borrowed(h) => h.clone(),
            Runtime::Owned(rt) => rt
                .as_ref()
                .expect("runtime lives until drop")
                .handle()
                .clone(),
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Runtime::Owned(rt) = self {
            // shutdown_background never blocks, so dropping the factory inside async code is safe.
            if let Some(rt) = rt.take() {
                rt.shutdown_background();
            }
        }
    }
}

/// State shared by all workers.
struct Shared {
    session: Session,
    config: CassandraConfig,
    /// Statements prepared so far. Workers read an immutable snapshot they hold (no lock, no
    /// atomic per operation, and one copy in cache for all 1024 of them); preparing takes the
    /// lock, so each statement is prepared once, and publishes a new snapshot.
    statements: tokio::sync::Mutex<Arc<Vec<Cached>>>,
    /// The first failed operation is printed once, so a run of ERRORs says why.
    reported: AtomicBool,
    /// The operations' timeout watchdog (None: no timeout).
    deadlines: Option<Arc<Deadlines>>,
    /// Execution profile of the operations' statements: the driver's own per-request timer is
    /// off for them, the watchdog times them out instead.
    operation_profile: ExecutionProfileHandle,
}

impl Shared {
    /// Reports a failed operation (the first only) and returns its status, ERROR.
    fn fail(&self, what: &str, err: &dyn std::fmt::Display) -> Status {
        self.report(what, err);
        Status::Error
    }

    fn report(&self, what: &str, err: &dyn std::fmt::Display) {
        if !self.reported.swap(true, Ordering::Relaxed) {
            iodig_model::eprintln_lossy!(
                "iodig: cassandra: first failed {what}: {err} (further failures are only counted)"
            );
        }
    }
}

/// The `cassandra` binding, opened once per process.
pub struct CassandraFactory {
    shared: Arc<Shared>,
    // Declared last so the session drops before its runtime.
    runtime: Runtime,
}

/// Connects, creates keyspace and table when missing, and checks an existing table's columns.
/// The driver runs on a small runtime the factory owns; use [`open_with_handle`] to share the
/// runner's runtime instead (fewer thread hops per operation).
pub fn open(props: &Properties) -> Result<CassandraFactory, DbError> {
    let config = CassandraConfig::from_props(props)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("iodig-cql")
        .enable_all()
        .build()
        .map_err(|e| DbError::Unavailable(format!("cannot start the CQL driver's runtime: {e}")))?;
    let shared = rt.block_on(connect(config))?;
    Ok(CassandraFactory {
        shared: Arc::new(shared),
        runtime: Runtime::Owned(Some(rt)),
    })
}

/// Like [`open`], with the driver's connection tasks on the given runtime. Call it from outside
/// any async task (it blocks on the handle).
pub fn open_with_handle(
    props: &Properties,
    handle: &tokio::runtime::Handle,
) -> Result<CassandraFactory, DbError> {
    let config = CassandraConfig::from_props(props)?;
    let shared = handle.block_on(connect(config))?;
    Ok(CassandraFactory {
        shared: Arc::new(shared),
        runtime: Runtime::Borrowed(handle.clone()),
    })
}

fn tls_context(config: &CassandraConfig) -> Result<Option<TlsContext>, DbError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    if !config.use_ssl {
        return Ok(None);
    }
    let path = config
        .truststore
        .clone()
        .unwrap_or_else(|| Path::new("/etc/ssl/certs/ca-certificates.crt").to_path_buf());
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(&path).map_err(|e| {
        cfg_err(format!(
            "property cassandra.truststore={}: cannot read the CA certificates ({e}); give a PEM file of the CA that signed the nodes' certificates",
            path.display()
        ))
    })?;
    for cert in certs {
        let cert = cert.map_err(|e| {
            cfg_err(format!(
                "property cassandra.truststore={}: bad PEM: {e}",
                path.display()
            ))
        })?;
        roots.add(cert).map_err(|e| {
            cfg_err(format!(
                "property cassandra.truststore={}: unusable certificate: {e}",
                path.display()
            ))
        })?;
    }
    if roots.is_empty() {
        return Err(cfg_err(format!(
            "property cassandra.truststore={}: no certificate in the file",
            path.display()
        )));
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| DbError::Unavailable(format!("TLS setup failed: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(TlsContext::from(Arc::new(tls))))
}

/// Explains a connection failure: authentication said plainly, otherwise host, port and timeout.
fn connect_error(config: &CassandraConfig, err: &str) -> DbError {
    let lower = err.to_ascii_lowercase();
    let hosts = config.contact_points.join(",");
    if lower.contains("authenticat") || lower.contains("credentials") || lower.contains("password")
    {
        let who = config.username.as_deref().unwrap_or("(none given)");
        return DbError::Unavailable(format!(
            "Cassandra at {hosts} rejected the login of user {who}: authentication failed; check \
             cassandra.username and cassandra.password (the server said: {err})"
        ));
    }
    if lower.contains("certificate") || lower.contains("handshake") || lower.contains("tls") {
        let store = config.truststore.as_ref().map_or_else(
            || "the system CA bundle".to_string(),
            |p| p.display().to_string(),
        );
        return DbError::Unavailable(format!(
            "TLS with Cassandra at {hosts} failed: {err}; cassandra.truststore ({store}) must hold the CA \
             that signed the nodes' certificates, as PEM (nodes from `iodig cassandra up --tls`: DIR/tls/ca.pem)"
        ));
    }
    // A TLS-only node resets a plaintext client during its first request.
    let hint = if !config.use_ssl && lower.contains("reset by peer") {
        "; if the nodes require TLS, add -p cassandra.useSSL=true -p cassandra.truststore=CA.pem"
    } else {
        ""
    };
    DbError::Unavailable(format!(
        "cannot connect to Cassandra at {hosts} within {} ms (cassandra.connecttimeoutmillis): {err}; \
         is a node listening there (check hosts and port), or start one with `iodig cassandra up`{hint}",
        config.connect_timeout.as_millis()
    ))
}

async fn connect(config: CassandraConfig) -> Result<Shared, DbError> {
    // Schema changes, metadata and PREPARE keep the driver's timeout: they are few.
    let profile = ExecutionProfile::builder()
        .request_timeout(config.request_timeout)
        .consistency(config.read_consistency)
        .build();
    let operation_profile = profile
        .to_builder()
        .request_timeout(None)
        .build()
        .into_handle();
    let mut builder = SessionBuilder::new()
        .known_nodes(&config.contact_points)
        .connection_timeout(config.connect_timeout)
        .default_execution_profile_handle(profile.into_handle())
        .tls_context(tls_context(&config)?);
    if let (Some(u), Some(p)) = (&config.username, &config.password) {
        builder = builder.user(u, p);
    }
    if let Some(n) = config.connections_per_host {
        if let Some(n) = std::num::NonZeroUsize::new(n) {
            builder = builder.pool_size(PoolSize::PerHost(n));
        }
    }
    // The driver retries unreachable nodes on its own; the overall deadline is the user's.
    let deadline = config.connect_timeout + Duration::from_millis(500);
    let session = match tokio::time::timeout(deadline, builder.build()).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(connect_error(&config, &error_chain(&e))),
        Err(_) => return Err(connect_error(&config, "timed out")),
    };
    ensure_schema(&session, &config).await?;
    let deadlines = config.request_timeout.map(Deadlines::start);
    Ok(Shared {
        session,
        config,
        statements: tokio::sync::Mutex::new(Arc::new(Vec::new())),
        reported: AtomicBool::new(false),
        deadlines,
        operation_profile,
    })
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}

/// Creates keyspace and table when missing; an existing table must have exactly YCSB's columns.
async fn ensure_schema(session: &Session, c: &CassandraConfig) -> Result<(), DbError> {
    let ddl_err = |what: &str, e: &dyn std::error::Error| {
        let text = error_chain(e);
        if text.to_ascii_lowercase().contains("unauthorized") || text.contains("permission") {
            DbError::Unavailable(format!(
                "{what} failed: user {} lacks the permission ({text}); create the schema as a superuser or grant CREATE",
                c.username.as_deref().unwrap_or("(anonymous)")
            ))
        } else {
            DbError::Unavailable(format!("{what} failed: {text}"))
        }
    };
    let ks = &c.keyspace;
    let create_ks = format!(
        "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {}",
        c.replication
    );
    session
        .query_unpaged(create_ks.as_str(), ())
        .await
        .map_err(|e| ddl_err(&format!("creating keyspace {ks} ({create_ks})"), &e))?;

    let existing = table_columns(session, ks, &c.table)
        .await
        .map_err(|e| ddl_err("reading system_schema.columns", &*e))?;
    if existing.is_empty() {
        let cols: Vec<String> = c
            .field_names
            .iter()
            .map(|f| format!("{f} varchar"))
            .collect();
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {ks}.{} ({KEY_COLUMN} varchar PRIMARY KEY, {})",
            c.table,
            cols.join(", ")
        );
        session
            .query_unpaged(create.as_str(), ())
            .await
            .map_err(|e| ddl_err(&format!("creating table {ks}.{}", c.table), &e))?;
    } else {
        check_columns(c, &existing)?;
    }
    session
        .await_schema_agreement()
        .await
        .map_err(|e| ddl_err("waiting for schema agreement", &e))?;
    Ok(())
}

/// (name, type, kind) of every column of a table; empty when the table does not exist.
async fn table_columns(
    session: &Session,
    ks: &str,
    table: &str,
) -> Result<Vec<(String, String, String)>, Box<dyn std::error::Error + Send + Sync>> {
    let r = session
        .query_unpaged(
            "SELECT column_name, type, kind FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
            (ks, table),
        )
        .await?
        .into_rows_result()?;
    let mut out = Vec::new();
    for row in r.rows::<(String, String, String)>()? {
        out.push(row?);
    }
    Ok(out)
}

/// The table must be `y_id text PRIMARY KEY` plus exactly the field columns, all text; anything
/// else is an error that tells the user what differs (iodig never drops a table).
fn check_columns(
    c: &CassandraConfig,
    existing: &[(String, String, String)],
) -> Result<(), DbError> {
    let mut problems = Vec::new();
    let mut names: Vec<&str> = existing.iter().map(|(n, _, _)| n.as_str()).collect();
    names.sort_unstable();
    match existing.iter().find(|(n, _, _)| n == KEY_COLUMN) {
        Some((_, t, k)) if k == "partition_key" && (t == "text" || t == "varchar") => {}
        Some((_, t, k)) => problems.push(format!(
            "{KEY_COLUMN} is {t} ({k}), expected the varchar partition key"
        )),
        None => problems.push(format!("no key column {KEY_COLUMN}")),
    }
    for f in &c.field_names {
        match existing.iter().find(|(n, _, _)| n == f) {
            Some((_, t, _)) if t == "text" || t == "varchar" => {}
            Some((_, t, _)) => problems.push(format!("{f} is {t}, expected varchar")),
            None => problems.push(format!("missing column {f}")),
        }
    }
    let extra: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| *n != KEY_COLUMN && !c.field_names.iter().any(|f| f == n))
        .collect();
    if !extra.is_empty() {
        problems.push(format!("extra columns {}", extra.join(", ")));
    }
    if problems.is_empty() {
        return Ok(());
    }
    let first = &c.field_names[0];
    let prefix = &first[..first.len() - 1];
    Err(DbError::Config(format!(
        "table {}.{} exists with other columns than YCSB's ({KEY_COLUMN} varchar PRIMARY KEY, {prefix}0..{prefix}{} varchar): {}. \
         iodig does not drop tables: use another table (-p table=NAME) or keyspace (-p cassandra.keyspace=NAME), \
         match fieldcount/fieldnameprefix to the table, or drop it yourself (DROP TABLE {}.{})",
        c.keyspace,
        c.table,
        c.field_names.len() - 1,
        problems.join("; "),
        c.keyspace,
        c.table
    )))
}

impl CassandraFactory {
    pub fn config(&self) -> &CassandraConfig {
        &self.shared.config
    }
}

impl DbFactory for CassandraFactory {
    type Db = CassandraDb;
    const NAME: &'static str = "cassandra";
    const EXECUTION: Execution = Execution::Tasks;

    fn worker(&self) -> Result<CassandraDb, DbError> {
        Ok(CassandraDb {
            shared: self.shared.clone(),
            statements: Arc::new(Vec::new()),
            deadline: self.shared.deadlines.as_ref().map(Deadlines::slot),
        })
    }

    /// The driver reconnects to restarted nodes on its own, with back-off; a step started
    /// before that would be a storm of instant ERRORs. So wait until every node has a
    /// connection again and one query goes through.
    fn await_ready(&self, timeout: Duration) -> Result<(), DbError> {
        let session = &self.shared.session;
        let deadline = std::time::Instant::now() + timeout;
        self.runtime.handle().block_on(async {
            loop {
                let _ = session.refresh_metadata().await;
                let state = session.get_cluster_state();
                let down: Vec<String> = state
                    .get_nodes_info()
                    .iter()
                    .filter(|n| !n.is_connected())
                    .map(|n| n.address.to_string())
                    .collect();
                let last = if down.is_empty() {
                    match session
                        .query_unpaged("SELECT release_version FROM system.local", ())
                        .await
                    {
                        Ok(_) => return Ok(()),
                        Err(e) => e.to_string(),
                    }
                } else {
                    format!("no connection yet to {}", down.join(", "))
                };
                if std::time::Instant::now() >= deadline {
                    return Err(DbError::Unavailable(format!(
                        "Cassandra did not serve requests again within {} s after the restart: {last}",
                        timeout.as_secs()
                    )));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    }
}

/// Statement kinds, part of the cache key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Scan,
    Insert,
    Update,
    Delete,
}

/// One prepared statement and what it was prepared for.
#[derive(Clone)]
struct Cached {
    op: Op,
    table: String,
    /// Field names in statement order; empty for "all fields" (`SELECT *`) and delete.
    fields: Vec<String>,
    all: bool,
    stmt: PreparedStatement,
}

impl Cached {
    /// `fields` makes a fresh iterator over the wanted names (None: all fields).
    fn matches<'a, I, F>(&self, op: Op, table: &str, fields: &Option<F>) -> bool
    where
        I: Iterator<Item = &'a str>,
        F: Fn() -> I,
    {
        self.op == op
            && self.table == table
            && match fields {
                None => self.all,
                Some(names) => !self.all && names().eq(self.fields.iter().map(String::as_str)),
            }
    }
}

/// One worker: a handle on the shared session plus the statement snapshot it last saw (the
/// few distinct field sets of a workload make a linear scan cheap).
pub struct CassandraDb {
    shared: Arc<Shared>,
    statements: Arc<Vec<Cached>>,
    /// This worker's request, as the timeout watchdog sees it (None: no timeout).
    deadline: Option<Arc<Slot>>,
}

impl CassandraDb {
    fn find<'a, I, F>(&self, op: Op, table: &str, fields: Option<F>) -> Option<usize>
    where
        I: Iterator<Item = &'a str>,
        F: Fn() -> I,
    {
        self.statements
            .iter()
            .position(|c| c.matches(op, table, &fields))
    }

    /// Prepares the statement for an op and field set unless another worker already has, and
    /// returns its index in the worker's (refreshed) snapshot.
    async fn prepare(
        &mut self,
        op: Op,
        table: &str,
        fields: Option<Vec<String>>,
    ) -> Result<usize, String> {
        let mut published = self.shared.statements.lock().await;
        let wanted = fields.as_ref().map(|f| || f.iter().map(String::as_str));
        if let Some(i) = published.iter().position(|c| c.matches(op, table, &wanted)) {
            self.statements = Arc::clone(&published);
            return Ok(i);
        }
        let ks = &self.shared.config.keyspace;
        let all = fields.is_none();
        let cols = fields.unwrap_or_default();
        let select = if all {
            "*".to_string()
        } else {
            cols.join(", ")
        };
        let cql = match op {
            Op::Read => format!("SELECT {select} FROM {ks}.{table} WHERE {KEY_COLUMN} = ? LIMIT 1"),
            Op::Scan => format!(
                "SELECT {select} FROM {ks}.{table} WHERE token({KEY_COLUMN}) >= token(?) LIMIT ?"
            ),
            Op::Insert => {
                let marks = vec!["?"; cols.len() + 1].join(", ");
                format!(
                    "INSERT INTO {ks}.{table} ({KEY_COLUMN}, {}) VALUES ({marks})",
                    cols.join(", ")
                )
            }
            Op::Update => {
                let sets: Vec<String> = cols.iter().map(|c| format!("{c} = ?")).collect();
                format!(
                    "UPDATE {ks}.{table} SET {} WHERE {KEY_COLUMN} = ?",
                    sets.join(", ")
                )
            }
            Op::Delete => format!("DELETE FROM {ks}.{table} WHERE {KEY_COLUMN} = ?"),
        };
        let mut stmt = self
            .shared
            .session
            .prepare(cql.as_str())
            .await
            .map_err(|e| error_chain(&e))?;
        let cfg = &self.shared.config;
        stmt.set_consistency(match op {
            Op::Read | Op::Scan => cfg.read_consistency,
            _ => cfg.write_consistency,
        });
        // Every YCSB statement is idempotent (plain writes with fixed values), so the driver
        // may retry them on another replica.
        stmt.set_is_idempotent(true);
        stmt.set_tracing(cfg.tracing);
        // The columns were checked against YCSB's at connect time, so the result metadata from
        // PREPARE stays valid: the server need not send it with every response, nor the driver
        // parse it.
        stmt.set_use_cached_result_metadata(true);
        stmt.set_execution_profile_handle(Some(self.shared.operation_profile.clone()));
        let mut next: Vec<Cached> = published.iter().cloned().collect();
        next.push(Cached {
            op,
            table: table.to_string(),
            fields: cols,
            all,
            stmt,
        });
        *published = Arc::new(next);
        self.statements = Arc::clone(&published);
        Ok(self.statements.len() - 1)
    }

    /// Index of the statement for a read, scan or delete of `fields`.
    async fn statement_for(
        &mut self,
        op: Op,
        table: &str,
        fields: Fields<'_>,
    ) -> Result<usize, String> {
        if let Some(i) = self.find(
            op,
            table,
            fields.map(|f| move || f.iter().map(String::as_str)),
        ) {
            return Ok(i);
        }
        self.prepare(op, table, fields.map(|f| f.to_vec())).await
    }

    /// Index of the statement that writes exactly the fields of `values`.
    async fn write_statement(
        &mut self,
        op: Op,
        table: &str,
        values: &Record,
    ) -> Result<usize, String> {
        if let Some(i) = self.find(op, table, Some(|| values.iter().map(|(n, _)| n))) {
            return Ok(i);
        }
        let names: Vec<String> = values.iter().map(|(n, _)| n.to_string()).collect();
        for n in &names {
            check_identifier("field name", n).map_err(|e| e.to_string())?;
        }
        self.prepare(op, table, Some(names)).await
    }
}

/// Copies one result row into `out`, field by field, skipping the key column (YCSB's
/// `dataintegrity` check compares fields only).
fn fill_record(row: ColumnIterator<'_, '_>, out: &mut Record) -> Result<(), OpError> {
    for col in row {
        let col = col?;
        let name = col.spec.name();
        if name == KEY_COLUMN {
            continue;
        }
        // A null cell (a field never written) is left out, as an absent field.
        if let Some(slice) = col.slice {
            out.push(name, slice.as_slice());
        }
    }
    Ok(())
}

/// Values are YCSB's printable ASCII; they bind as CQL text, so they must be UTF-8.
fn as_text(v: &[u8]) -> Option<&str> {
    std::str::from_utf8(v).ok()
}

/// Any failure of one operation; only its message is reported.
type OpError = Box<dyn std::error::Error + Send + Sync>;

/// One request's result, whether the driver answered or the timeout watchdog gave it up.
fn outcome<T>(r: Result<Result<T, ExecutionError>, TimedOut>) -> Result<T, OpError> {
    Ok(r??)
}

/// Runs a read: the row's fields into `out`, or NOT_FOUND.
async fn read_row(
    session: &Session,
    deadline: Option<&Slot>,
    stmt: &PreparedStatement,
    key: &str,
    out: &mut Record,
) -> Result<Status, OpError> {
    let rows = outcome(within(deadline, session.execute_unpaged(stmt, (key,))).await)?
        .into_rows_result()?;
    let Some(row) = rows.rows::<ColumnIterator>()?.next() else {
        return Ok(Status::NotFound);
    };
    fill_record(row?, out)?;
    Ok(Status::Ok)
}

/// Runs a scan into `out`, reusing its records: cleared in place, grown only when needed.
async fn scan_rows(
    session: &Session,
    deadline: Option<&Slot>,
    stmt: &PreparedStatement,
    start_key: &str,
    limit: i32,
    out: &mut Vec<Record>,
) -> Result<(), OpError> {
    let rows = outcome(within(deadline, session.execute_unpaged(stmt, (start_key, limit))).await)?
        .into_rows_result()?;
    let mut n = 0;
    for row in rows.rows::<ColumnIterator>()? {
        if n == out.len() {
            out.push(Record::new());
        }
        let rec = &mut out[n];
        rec.clear();
        fill_record(row?, rec)?;
        n += 1;
    }
    out.truncate(n);
    Ok(())
}

impl Db for CassandraDb {
    async fn read(
        &mut self,
        table: &str,
        key: &str,
        fields: Fields<'_>,
        out: &mut Record,
    ) -> Status {
        out.clear();
        let stmt = match self.statement_for(Op::Read, table, fields).await {
            Ok(i) => &self.statements[i].stmt,
            Err(e) => return self.shared.fail("prepare of a read", &e),
        };
        read_row(
            &self.shared.session,
            self.deadline.as_deref(),
            stmt,
            key,
            out,
        )
        .await
        .unwrap_or_else(|e| self.shared.fail("read", &e))
    }

    async fn scan(
        &mut self,
        table: &str,
        start_key: &str,
        count: usize,
        fields: Fields<'_>,
        out: &mut Vec<Record>,
    ) -> Status {
        let stmt = match self.statement_for(Op::Scan, table, fields).await {
            Ok(i) => &self.statements[i].stmt,
            Err(e) => return self.shared.fail("prepare of a scan", &e),
        };
        let limit = i32::try_from(count.max(1)).unwrap_or(i32::MAX);
        match scan_rows(
            &self.shared.session,
            self.deadline.as_deref(),
            stmt,
            start_key,
            limit,
            out,
        )
        .await
        {
            Ok(()) => Status::Ok,
            Err(e) => self.shared.fail("scan", &e),
        }
    }

    async fn update(&mut self, table: &str, key: &str, values: &Record) -> Status {
        self.write(Op::Update, table, key, values).await
    }

    async fn insert(&mut self, table: &str, key: &str, values: &Record) -> Status {
        self.write(Op::Insert, table, key, values).await
    }

    async fn delete(&mut self, table: &str, key: &str) -> Status {
        let stmt = match self.statement_for(Op::Delete, table, None).await {
            Ok(i) => &self.statements[i].stmt,
            Err(e) => return self.shared.fail("prepare of a delete", &e),
        };
        let request = self.shared.session.execute_unpaged(stmt, (key,));
        match outcome(within(self.deadline.as_deref(), request).await) {
            Ok(_) => Status::Ok,
            Err(e) => self.shared.fail("delete", &e),
        }
    }
}

impl CassandraDb {
    async fn write(&mut self, op: Op, table: &str, key: &str, values: &Record) -> Status {
        if values.is_empty() {
            return Status::BadRequest;
        }
        let (what, prepare_what) = if op == Op::Insert {
            ("insert", "prepare of an insert")
        } else {
            ("update", "prepare of an update")
        };
        let stmt = match self.write_statement(op, table, values).await {
            Ok(i) => &self.statements[i].stmt,
            Err(e) => return self.shared.fail(prepare_what, &e),
        };
        if values.iter().any(|(_, v)| as_text(v).is_none()) {
            self.shared.report(
                "write",
                &"a field value is not UTF-8; CQL varchar holds text only",
            );
            return Status::BadRequest;
        }
        // Insert binds (key, fields…), update binds (fields…, key), as the statements read.
        let mut bound: Vec<&str> = Vec::with_capacity(values.len() + 1);
        if op == Op::Insert {
            bound.push(key);
        }
        bound.extend(values.iter().map(|(_, v)| as_text(v).unwrap_or_default()));
        if op == Op::Update {
            bound.push(key);
        }
        let request = self.shared.session.execute_unpaged(stmt, &bound);
        match outcome(within(self.deadline.as_deref(), request).await) {
            Ok(_) => Status::Ok,
            Err(e) => self.shared.fail(what, &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Properties {
        let mut p = Properties::new();
        for (k, v) in pairs {
            p.set(k, *v);
        }
        p
    }

    #[test]
    fn hosts_get_the_port_and_defaults_follow_ycsb_master() {
        let c = CassandraConfig::from_props(&props(&[
            ("hosts", "127.0.0.1, 127.0.0.2:9043"),
            ("port", "9044"),
        ]))
        .unwrap();
        assert_eq!(c.contact_points, vec!["127.0.0.1:9044", "127.0.0.2:9043"]);
        assert_eq!(c.keyspace, "ycsb");
        assert_eq!(c.table, "usertable");
        assert_eq!(c.field_names.len(), 10);
        assert_eq!(c.read_consistency, Consistency::Quorum);
        assert_eq!(c.write_consistency, Consistency::Quorum);
        assert_eq!(
            c.replication,
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        );
    }

    #[test]
    fn network_topology_replication_and_errors_name_the_property() {
        let c = CassandraConfig::from_props(&props(&[
            ("hosts", "h"),
            ("cassandra.replication", "NetworkTopologyStrategy"),
            ("cassandra.datacenters", "dc1:3,dc2:2"),
        ]))
        .unwrap();
        assert_eq!(
            c.replication,
            "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 2}"
        );
        let e = CassandraConfig::from_props(&props(&[
            ("hosts", "h"),
            ("cassandra.readconsistencylevel", "MOST"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("cassandra.readconsistencylevel"), "{e}");
        let e = CassandraConfig::from_props(&props(&[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("property hosts"), "{e}");
        let e = CassandraConfig::from_props(&props(&[
            ("hosts", "h"),
            ("cassandra.keyspace", "a;drop"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("cassandra.keyspace"), "{e}");
    }

    #[test]
    fn other_columns_are_reported_not_dropped() {
        let c =
            CassandraConfig::from_props(&props(&[("hosts", "h"), ("fieldcount", "2")])).unwrap();
        let cols = |v: &[(&str, &str, &str)]| {
            v.iter()
                .map(|(a, b, k)| (a.to_string(), b.to_string(), k.to_string()))
                .collect::<Vec<_>>()
        };
        assert!(check_columns(
            &c,
            &cols(&[
                ("y_id", "text", "partition_key"),
                ("field0", "text", "regular"),
                ("field1", "text", "regular")
            ])
        )
        .is_ok());
        let e = check_columns(
            &c,
            &cols(&[
                ("y_id", "text", "partition_key"),
                ("field0", "text", "regular"),
                ("other", "int", "regular"),
            ]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("missing column field1") && e.contains("extra columns other"),
            "{e}"
        );
    }

    #[test]
    fn a_zero_read_timeout_means_none() {
        let timeout = |pairs: &[(&str, &str)]| {
            let mut all = vec![("hosts", "127.0.0.1")];
            all.extend_from_slice(pairs);
            CassandraConfig::from_props(&props(&all))
                .unwrap()
                .request_timeout
        };
        assert_eq!(timeout(&[]), Some(Duration::from_millis(12000)));
        assert_eq!(
            timeout(&[("cassandra.readtimeoutmillis", "250")]),
            Some(Duration::from_millis(250))
        );
        assert_eq!(timeout(&[("cassandra.readtimeoutmillis", "0")]), None);
    }
}
