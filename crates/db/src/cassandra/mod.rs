//! The `cassandra` binding: Apache Cassandra over CQL with the scylla driver, issuing the
//! statements of YCSB's `cassandra-cql` binding (prepared once per field set, token-aware
//! routing, per-statement consistency), with all workers sharing one session so 1024 YCSB
//! threads are 1024 in-flight requests, not 1024 connections.
//!
//! This file holds the factory and the state its workers share; the rest is split by concern:
//! `config` (properties → settings), `connect` (the session), `tls`, `schema` (keyspace and
//! table), `statements` (the prepared-statement cache), `ops` (the operations and their
//! statuses) and `deadline` (request timeouts).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use scylla::client::execution_profile::ExecutionProfileHandle;
use scylla::client::session::Session;

use crate::{DbError, DbFactory, Execution, Properties};

mod config;
mod connect;
mod deadline;
mod ops;
mod schema;
mod statements;
mod tls;
pub mod topology;

pub use config::{CassandraConfig, DEFAULT_CONSISTENCY, PROPERTIES};
pub use schema::KEY_COLUMN;

use connect::connect;
use deadline::{Deadlines, Slot};
use statements::Cached;

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

impl CassandraFactory {
    /// The settings the binding was opened with.
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
            coordinator: None,
        })
    }

    fn cluster_facts(&self) -> Option<iodig_model::cluster::ClusterDoc> {
        let keyspace = self.shared.config.keyspace.clone();
        Some(
            self.runtime
                .handle()
                .block_on(topology::read(&self.shared.session, &keyspace)),
        )
    }

    fn node_reads(&self, table: &str) -> Option<crate::NodeReads> {
        let keyspace = self.shared.config.keyspace.clone();
        Some(self.runtime.handle().block_on(topology::local_reads(
            &self.shared.session,
            &keyspace,
            table,
        )))
    }

    /// "Apache Cassandra 5.0.2" from the versions the ring's nodes report (all of them when
    /// they differ, as in a rolling upgrade).
    fn version(&self) -> Option<String> {
        let versions: std::collections::BTreeSet<String> = self
            .cluster_facts()?
            .nodes
            .into_iter()
            .filter_map(|n| n.version)
            .collect();
        (!versions.is_empty()).then(|| {
            format!(
                "Apache Cassandra {}",
                versions.into_iter().collect::<Vec<_>>().join(" / ")
            )
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

/// One worker: a handle on the shared session plus the statement snapshot it last saw (the
/// few distinct field sets of a workload make a linear scan cheap).
pub struct CassandraDb {
    shared: Arc<Shared>,
    statements: Arc<Vec<Cached>>,
    /// This worker's request, as the timeout watchdog sees it (None: no timeout).
    deadline: Option<Arc<Slot>>,
    /// The node that coordinated the last request that got an answer.
    coordinator: Option<std::net::IpAddr>,
}
