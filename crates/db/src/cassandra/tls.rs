//! TLS to the nodes (`cassandra.useSSL`): OpenSSL trusting only the CA certificates of
//! `cassandra.truststore`, each node's certificate checked against the IP address connected to
//! (the driver sets it per connection).
//!
//! Why OpenSSL and not rustls: the driver's rustls feature brings aws-lc-sys, a C build that was
//! one of the largest parts of a cold build, while the system's libssl links in seconds.

use std::path::Path;

use openssl::ssl::{SslConnector, SslMethod};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::X509;
use scylla::client::session::{OpenSsl010Config, TlsContext};

use super::config::{cfg_err, CassandraConfig};
use crate::DbError;

/// The TLS settings of a session, None without `cassandra.useSSL`.
pub(super) fn tls_context(config: &CassandraConfig) -> Result<Option<TlsContext>, DbError> {
    if !config.use_ssl {
        return Ok(None);
    }
    let path = config
        .truststore
        .clone()
        .unwrap_or_else(|| Path::new("/etc/ssl/certs/ca-certificates.crt").to_path_buf());
    let pem = std::fs::read(&path).map_err(|e| {
        cfg_err(format!(
            "property cassandra.truststore={}: cannot read the CA certificates ({e}); give a PEM file of the CA that signed the nodes' certificates",
            path.display()
        ))
    })?;
    let certs = X509::stack_from_pem(&pem).map_err(|e| {
        cfg_err(format!(
            "property cassandra.truststore={}: bad PEM: {e}",
            path.display()
        ))
    })?;
    if certs.is_empty() {
        return Err(cfg_err(format!(
            "property cassandra.truststore={}: no certificate in the file",
            path.display()
        )));
    }
    let setup =
        |e: openssl::error::ErrorStack| DbError::Unavailable(format!("TLS setup failed: {e}"));
    // Only the truststore's CAs: the connector's default would add the system's too.
    let mut store = X509StoreBuilder::new().map_err(setup)?;
    for cert in certs {
        store.add_cert(cert).map_err(|e| {
            cfg_err(format!(
                "property cassandra.truststore={}: unusable certificate: {e}",
                path.display()
            ))
        })?;
    }
    // SslConnector's builder verifies the peer; the driver adds the node's IP to check.
    let mut builder = SslConnector::builder(SslMethod::tls_client()).map_err(setup)?;
    builder.set_cert_store(store.build());
    Ok(Some(TlsContext::from(OpenSsl010Config::new(builder))))
}
