//! TLS to the nodes (`cassandra.useSSL`): rustls with the CA certificates of
//! `cassandra.truststore`, its crypto from `ring`.
//!
//! Why ring and not rustls' default aws-lc-rs: aws-lc-sys is a large C build, one of the
//! biggest costs of a cold build, while ring builds in seconds; TLS costs crypto only on the
//! handshake and on encrypted traffic, and a session without `cassandra.useSSL` never touches rustls.

use std::path::Path;
use std::sync::Arc;

use scylla::client::session::TlsContext;

use super::config::{cfg_err, CassandraConfig};
use crate::DbError;

/// The rustls settings of a session, None without `cassandra.useSSL`.
pub(super) fn tls_context(config: &CassandraConfig) -> Result<Option<TlsContext>, DbError> {
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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| DbError::Unavailable(format!("TLS setup failed: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(TlsContext::from(Arc::new(tls))))
}
