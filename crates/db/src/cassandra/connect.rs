//! Opening the session: the driver's settings from the config, the schema made ready, and a
//! failed connection explained (login, TLS, or nobody listening).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session_builder::SessionBuilder;
use scylla::client::PoolSize;

use super::deadline::Deadlines;
use super::schema::ensure_schema;
use super::tls::tls_context;
use super::{CassandraConfig, Shared};
use crate::DbError;

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

pub(super) async fn connect(config: CassandraConfig) -> Result<Shared, DbError> {
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
    if config.hosts_only {
        let allowed = scylla::policies::host_filter::AllowListHostFilter::new(
            config.contact_points.iter().map(String::as_str),
        )
        .map_err(|e| connect_error(&config, &format!("cassandra.hostsonly: {e}")))?;
        builder = builder.host_filter(Arc::new(allowed));
    }
    if let (Some(u), Some(p)) = (&config.username, &config.password) {
        builder = builder.user(u, p.expose());
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

pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
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
