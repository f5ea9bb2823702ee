//! The operations: YCSB's read, scan, update, insert and delete on the prepared statements, each
//! failure mapped to a status (the first one printed, so a run of ERRORs says why).

use std::net::IpAddr;
use std::sync::atomic::Ordering;

use scylla::client::session::Session;
use scylla::deserialize::row::ColumnIterator;
use scylla::errors::ExecutionError;
use scylla::response::query_result::QueryResult;
use scylla::statement::prepared::PreparedStatement;

use super::deadline::{within, Slot, TimedOut};
use super::statements::Op;
use super::{CassandraDb, Shared, KEY_COLUMN};
use crate::{Db, Fields, Record, Status};

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

/// The address of the node that coordinated a request.
fn coordinator_of(result: &QueryResult) -> IpAddr {
    result.request_coordinator().connection_address().ip()
}

/// Runs a read: the row's fields into `out`, or NOT_FOUND; `coordinator` is set once a node
/// answered.
async fn read_row(
    session: &Session,
    deadline: Option<&Slot>,
    stmt: &PreparedStatement,
    key: &str,
    out: &mut Record,
    coordinator: &mut Option<IpAddr>,
) -> Result<Status, OpError> {
    let result = outcome(within(deadline, session.execute_unpaged(stmt, (key,))).await)?;
    *coordinator = Some(coordinator_of(&result));
    let rows = result.into_rows_result()?;
    let Some(row) = rows.rows::<ColumnIterator>()?.next() else {
        return Ok(Status::NotFound);
    };
    fill_record(row?, out)?;
    Ok(Status::Ok)
}

/// Runs a scan into `out`, reusing its records: cleared in place, grown only when needed;
/// `coordinator` is set once a node answered.
async fn scan_rows(
    session: &Session,
    deadline: Option<&Slot>,
    stmt: &PreparedStatement,
    start_key: &str,
    limit: i32,
    out: &mut Vec<Record>,
    coordinator: &mut Option<IpAddr>,
) -> Result<(), OpError> {
    let result =
        outcome(within(deadline, session.execute_unpaged(stmt, (start_key, limit))).await)?;
    *coordinator = Some(coordinator_of(&result));
    let rows = result.into_rows_result()?;
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
        self.coordinator = None;
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
            &mut self.coordinator,
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
        self.coordinator = None;
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
            &mut self.coordinator,
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
        self.coordinator = None;
        let stmt = match self.statement_for(Op::Delete, table, None).await {
            Ok(i) => &self.statements[i].stmt,
            Err(e) => return self.shared.fail("prepare of a delete", &e),
        };
        let request = self.shared.session.execute_unpaged(stmt, (key,));
        match outcome(within(self.deadline.as_deref(), request).await) {
            Ok(r) => {
                self.coordinator = Some(coordinator_of(&r));
                Status::Ok
            }
            Err(e) => self.shared.fail("delete", &e),
        }
    }

    fn last_coordinator(&self) -> Option<IpAddr> {
        self.coordinator
    }
}

impl CassandraDb {
    async fn write(&mut self, op: Op, table: &str, key: &str, values: &Record) -> Status {
        self.coordinator = None;
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
            Ok(r) => {
                self.coordinator = Some(coordinator_of(&r));
                Status::Ok
            }
            Err(e) => self.shared.fail(what, &e),
        }
    }
}
