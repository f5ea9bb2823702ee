//! The keyspace and table: created when missing, and an existing table checked to have exactly
//! YCSB's columns (iodig never drops a table).

use scylla::client::session::Session;

use super::connect::error_chain;
use super::CassandraConfig;
use crate::DbError;

/// YCSB's key column (`CassandraCQLClient.YCSB_KEY`).
pub const KEY_COLUMN: &str = "y_id";

/// Creates keyspace and table when missing; an existing table must have exactly YCSB's columns.
pub(super) async fn ensure_schema(session: &Session, c: &CassandraConfig) -> Result<(), DbError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Properties;

    #[test]
    fn other_columns_are_reported_not_dropped() {
        let mut props = Properties::new();
        props.set("hosts", "h");
        props.set("fieldcount", "2");
        let c = CassandraConfig::from_props(&props).unwrap();
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
}
