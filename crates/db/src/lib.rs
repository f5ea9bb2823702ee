//! The database seam: the [`Db`] trait shaped like YCSB's `DB`, [`Status`], [`Record`], and the
//! bindings (`basic`, `rocksdb`, and `cassandra` behind its feature). Bindings never measure:
//! timing lives in one wrapper in crates/runner.

mod basic;
#[cfg(feature = "cassandra")]
pub mod cassandra;
mod record;
#[cfg(feature = "rocksdb")]
pub mod rocks;
pub mod rocks_log;
#[cfg(feature = "rocksdb")]
mod rocks_restore;
mod status;

pub use basic::BasicFactory;
pub use iodig_model::props::{Properties, PropertyError};
pub use record::{Deferred, Record};
pub use status::Status;

use std::future::Future;

/// Field selection of a read or scan: `None` reads every field (YCSB's `fields == null`).
pub type Fields<'a> = Option<&'a [String]>;

/// An error that prevents a binding from starting or a worker from initialising. Per-operation
/// failures are never errors: they are a [`Status`], counted by the runner.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// Bad or missing property: names the property and says how to fix it (exit code 2).
    #[error("{0}")]
    Config(String),
    /// The database could not be opened or reached.
    #[error("{0}")]
    Unavailable(String),
}

/// How a binding's workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Execution {
    /// One OS thread per YCSB thread, blocking calls (embedded engines).
    Threads,
    /// One async task per YCSB thread on a small runtime, so 1024 in-flight requests cost memory,
    /// not OS threads (network clients).
    Tasks,
}

/// One worker's connection to the database, like one YCSB `DB` instance per client thread.
///
/// The operation methods are `async` so that network bindings can keep many requests in flight;
/// embedded bindings simply never await.
pub trait Db: Send + 'static {
    /// Called once in the worker before its first operation (YCSB's `init`).
    fn init(&mut self) -> impl Future<Output = Result<(), DbError>> + Send {
        async { Ok(()) }
    }

    /// Called once in the worker after its last operation (YCSB's `cleanup`).
    fn cleanup(&mut self) -> impl Future<Output = Result<(), DbError>> + Send {
        async { Ok(()) }
    }

    /// Reads one record; fills `out` with the fields asked for.
    fn read(
        &mut self,
        table: &str,
        key: &str,
        fields: Fields<'_>,
        out: &mut Record,
    ) -> impl Future<Output = Status> + Send;

    /// Reads up to `count` records starting at `start_key` in the database's own order.
    fn scan(
        &mut self,
        table: &str,
        start_key: &str,
        count: usize,
        fields: Fields<'_>,
        out: &mut Vec<Record>,
    ) -> impl Future<Output = Status> + Send;

    /// Replaces the given fields of an existing record.
    fn update(
        &mut self,
        table: &str,
        key: &str,
        values: &Record,
    ) -> impl Future<Output = Status> + Send;

    /// Inserts a new record with all its fields.
    fn insert(
        &mut self,
        table: &str,
        key: &str,
        values: &Record,
    ) -> impl Future<Output = Status> + Send;

    /// Deletes a record.
    fn delete(&mut self, table: &str, key: &str) -> impl Future<Output = Status> + Send;

    /// Whether `update` and `insert` read the values they are given. A binding that never does
    /// (the no-op `basic`, unless it prints them) is handed them unwritten
    /// ([`Record::push_deferred`]), as YCSB's `RandomByteIterator` writes its bytes only when
    /// read; every other binding gets them written, the same bytes either way.
    fn reads_values(&self) -> bool {
        true
    }

    /// The node that answered the last request, for a binding that talks to a cluster and
    /// knows it (CQL's coordinator): the client's latency per node is recorded under it. None
    /// for an embedded database, and after a request no node answered.
    fn last_coordinator(&self) -> Option<std::net::IpAddr> {
        None
    }
}

/// Each node's running count of reads it served, by node IP, or why it could not be read.
pub type NodeReads = std::collections::BTreeMap<String, Result<u64, String>>;

/// A binding: opened once per process, it hands out one [`Db`] per worker.
pub trait DbFactory: Send + Sync + 'static {
    /// The per-worker connection it hands out.
    type Db: Db;

    /// Binding name as given to `--db`.
    const NAME: &'static str;

    /// How workers of this binding run.
    const EXECUTION: Execution;

    /// A new connection for one worker.
    fn worker(&self) -> Result<Self::Db, DbError>;

    /// Local data directory, so the tracer and the report know which device holds the data.
    fn data_dir(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// The database's own events (flushes, compactions) that started at or after the time,
    /// for bindings that can read them (RocksDB's LOG).
    fn events_since(&self, _since_unix_ms: u64) -> Vec<iodig_model::events::DbEvent> {
        Vec::new()
    }

    /// The database's name and version as the database itself reports it (`RocksDB 10.4.2`),
    /// for the report's configuration; bindings that cannot tell leave it out.
    fn version(&self) -> Option<String> {
        None
    }

    /// The cluster's nodes as the database describes them (ownership, versions), for bindings
    /// of distributed databases; read once per run.
    fn cluster_facts(&self) -> Option<iodig_model::cluster::ClusterDoc> {
        None
    }

    /// Reads each node of the cluster has served from its own storage engine so far for
    /// `table` (Cassandra's per-node `system_views.local_read_latency` and `local_scan_latency`
    /// counts), by node IP, or why a node's could not be read; none for a database without
    /// nodes. Two readings around a step give the reads each node served in it, against which
    /// its device reads are set.
    fn node_reads(&self, _table: &str) -> Option<NodeReads> {
        None
    }

    /// `--restore-each-step` for a database in this process: keeps the database as it stands
    /// now in `to` (a new directory on the same file system), for [`DbFactory::restore`].
    fn checkpoint(&self, _to: &std::path::Path) -> Result<(), DbError> {
        Err(DbError::Config(format!(
            "--restore-each-step: --db {} keeps no checkpoint; leave out --restore-each-step",
            Self::NAME
        )))
    }

    /// Puts the database back as [`DbFactory::checkpoint`] kept it in `from`, between steps
    /// (no worker holds it).
    fn restore(&self, _from: &std::path::Path) -> Result<(), DbError> {
        Err(DbError::Config(format!(
            "--restore-each-step: --db {} cannot restore; leave out --restore-each-step",
            Self::NAME
        )))
    }

    /// Waits until the binding serves operations again after its database restarted (a
    /// restore stops and starts managed nodes), at most `timeout`. Bindings without a server
    /// are always ready.
    fn await_ready(&self, _timeout: std::time::Duration) -> Result<(), DbError> {
        Ok(())
    }

    /// Closes the binding after the last step (flushes, stops managed servers, …).
    fn close(&self) -> Result<(), DbError> {
        Ok(())
    }
}

/// Names of the bindings compiled into this build, for `--db` errors and help.
pub fn binding_names() -> &'static [&'static str] {
    &[
        "basic",
        #[cfg(feature = "rocksdb")]
        "rocksdb",
        #[cfg(feature = "cassandra")]
        "cassandra",
    ]
}

/// Property names every binding understands, for the unknown-property check.
pub fn known_properties() -> Vec<&'static str> {
    #[allow(unused_mut)] // only extended when a binding feature is on
    let mut names = basic::PROPERTIES.to_vec();
    #[cfg(feature = "rocksdb")]
    names.extend_from_slice(rocks::PROPERTIES);
    #[cfg(feature = "cassandra")]
    names.extend_from_slice(cassandra::PROPERTIES);
    names
}
