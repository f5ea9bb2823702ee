//! The prepared-statement cache: one statement per operation, table and field set, prepared
//! once for all workers and looked up without a lock.

use std::sync::Arc;

use scylla::statement::prepared::PreparedStatement;

use super::config::check_identifier;
use super::connect::error_chain;
use super::{CassandraDb, KEY_COLUMN};
use crate::{Fields, Record};

/// Statement kinds, part of the cache key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Read,
    Scan,
    Insert,
    Update,
    Delete,
}

/// One prepared statement and what it was prepared for.
#[derive(Clone)]
pub(super) struct Cached {
    op: Op,
    table: String,
    /// Field names in statement order; empty for "all fields" (`SELECT *`) and delete.
    fields: Vec<String>,
    all: bool,
    pub(super) stmt: PreparedStatement,
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
    pub(super) async fn statement_for(
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
        self.prepare(op, table, fields.map(<[String]>::to_vec))
            .await
    }

    /// Index of the statement that writes exactly the fields of `values`.
    pub(super) async fn write_statement(
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
