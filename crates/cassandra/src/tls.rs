//! Client-to-node TLS for managed nodes: a local CA and one node certificate (valid for every
//! node's loopback address) made with the JDK's `keytool`, which ships with the `java` that runs
//! Cassandra, so `--tls` needs nothing else installed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{io_err, Error, Result};

/// Password of the generated key stores. These are throw-away stores for local test nodes on
/// loopback; the CA's private key never leaves the node directory.
pub const STORE_PASSWORD: &str = "iodig-local";

/// The files a TLS cluster uses, under `DIR/tls`.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsFiles {
    /// PKCS#12 store with the node key and its chain (`client_encryption_options.keystore`).
    pub keystore: PathBuf,
    /// PEM certificate of the local CA: the client's trust store (`cassandra.truststore`).
    pub ca_pem: PathBuf,
}

/// Where the TLS files of the nodes in `dir` live.
pub fn files(dir: &Path) -> TlsFiles {
    let tls = dir.join("tls");
    TlsFiles {
        keystore: tls.join("keystore.p12"),
        ca_pem: tls.join("ca.pem"),
    }
}

/// Makes the CA and the node certificate unless `dir/tls` already has them for at least
/// `nodes` addresses (a restart keeps the certificates clients already trust).
pub fn ensure(java: &Path, dir: &Path, nodes: u32) -> Result<TlsFiles> {
    let out = files(dir);
    let tls = dir.join("tls");
    let marker = tls.join("addresses");
    let covered = fs::read_to_string(&marker)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    if covered >= nodes && out.keystore.is_file() && out.ca_pem.is_file() {
        return Ok(out);
    }
    if tls.exists() {
        fs::remove_dir_all(&tls).map_err(io_err(&tls))?;
    }
    fs::create_dir_all(&tls).map_err(io_err(&tls))?;
    let keytool = find_keytool(java)?;
    let path = |p: &Path| p.display().to_string();
    let (ca_store, csr, node_pem) = (
        path(&tls.join("ca.p12")),
        path(&tls.join("node.csr")),
        path(&tls.join("node.pem")),
    );
    let (keystore, ca_pem) = (path(&out.keystore), path(&out.ca_pem));
    let sans = (1..=nodes)
        .map(|i| format!("IP:127.0.0.{i}"))
        .collect::<Vec<_>>()
        .join(",");
    let san = format!("SAN={sans}");
    let in_store = |store| {
        [
            "-keystore",
            store,
            "-storetype",
            "PKCS12",
            "-storepass",
            STORE_PASSWORD,
        ]
    };
    let in_ca: &[&str] = &in_store(&ca_store);
    let in_node: &[&str] = &in_store(&keystore);
    let new_key: &[&str] = &[
        "-keyalg",
        "EC",
        "-groupname",
        "secp256r1",
        "-validity",
        "3650",
    ];
    // The CA, then a node key whose certificate the CA signs for every node address, then the
    // chain imported into the node's store: the usual "CA signs the nodes" set-up, which rustls
    // verifies like any other (a bare self-signed leaf it would refuse).
    let steps: [Vec<&str>; 7] = [
        [
            &[
                "-genkeypair",
                "-alias",
                "ca",
                "-dname",
                "CN=iodig local CA",
                "-ext",
                "bc:c",
            ],
            in_ca,
            new_key,
        ]
        .concat(),
        [
            &["-exportcert", "-rfc", "-alias", "ca", "-file", &ca_pem],
            in_ca,
        ]
        .concat(),
        [
            &[
                "-genkeypair",
                "-alias",
                "node",
                "-dname",
                "CN=iodig local node",
            ],
            in_node,
            new_key,
        ]
        .concat(),
        [&["-certreq", "-alias", "node", "-file", &csr], in_node].concat(),
        [
            &[
                "-gencert",
                "-rfc",
                "-alias",
                "ca",
                "-validity",
                "3650",
                "-infile",
                &csr,
                "-outfile",
                &node_pem,
                "-ext",
                &san,
                "-ext",
                "KU=digitalSignature,keyAgreement",
                "-ext",
                "EKU=serverAuth",
            ],
            in_ca,
        ]
        .concat(),
        [
            &["-importcert", "-noprompt", "-alias", "ca", "-file", &ca_pem],
            in_node,
        ]
        .concat(),
        [
            &[
                "-importcert",
                "-noprompt",
                "-alias",
                "node",
                "-file",
                &node_pem,
            ],
            in_node,
        ]
        .concat(),
    ];
    for args in steps {
        let o = Command::new(&keytool)
            .args(&args)
            .output()
            .map_err(|e| Error::Other(format!("cannot run {}: {e}", keytool.display())))?;
        if !o.status.success() {
            return Err(Error::Other(format!(
                "making the TLS certificates failed: {} {} said: {}{}",
                keytool.display(),
                args.join(" "),
                String::from_utf8_lossy(&o.stdout).trim(),
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
    }
    fs::write(&marker, nodes.to_string()).map_err(io_err(&marker))?;
    Ok(out)
}

/// `keytool` beside `java` (same JDK), else on PATH.
fn find_keytool(java: &Path) -> Result<PathBuf> {
    let beside = java
        .canonicalize()
        .unwrap_or_else(|_| java.to_path_buf())
        .with_file_name("keytool");
    if beside.is_file() {
        return Ok(beside);
    }
    crate::dist::which("keytool").ok_or_else(|| Error::MissingTool {
        tool: "keytool".into(),
        package: "openjdk-17-jre-headless".into(),
        extra: " (keytool makes the certificates for --tls)".into(),
    })
}

/// The `client_encryption_options` block of `cassandra.yaml`: TLS only, no client certificates.
pub fn yaml_block(dir: &Path) -> String {
    let f = files(dir);
    format!(
        r#"client_encryption_options:
  enabled: true
  optional: false
  keystore: {}
  keystore_password: {STORE_PASSWORD}
  store_type: PKCS12
  require_client_auth: false
"#,
        f.keystore.display()
    )
}
