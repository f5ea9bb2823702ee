//! The binding's settings: YCSB's `cassandra-cql` properties parsed and checked into a
//! [`CassandraConfig`], every error naming the property and the fix.

use std::time::Duration;

use scylla::statement::Consistency;

use crate::{DbError, Properties};
use iodig_model::secret::Secret;

/// Property names this binding reads, for the unknown-property check.
pub const PROPERTIES: &[&str] = &[
    "hosts",
    "port",
    "cassandra.keyspace",
    "cassandra.readconsistencylevel",
    "cassandra.writeconsistencylevel",
    "cassandra.username",
    "cassandra.password",
    "cassandra.password.file",
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
    "cassandra.hostsonly",
];

/// Environment variable holding the password, so it need not be on the command line (where
/// `ps` shows it to every user) nor in a file.
pub const PASSWORD_ENV: &str = "IODIG_CASSANDRA_PASSWORD";

/// Consistency level of reads and writes when not given. YCSB master uses QUORUM (0.17.0 used
/// ONE); QUORUM is what the briefs' RF=3 clusters ran.
pub const DEFAULT_CONSISTENCY: &str = "QUORUM";

/// The binding's settings, parsed from YCSB properties.
#[derive(Debug, Clone, PartialEq)]
pub struct CassandraConfig {
    /// `host:port` of every contact point.
    pub contact_points: Vec<String>,
    /// `cassandra.keyspace` (default `ycsb`), a plain CQL name.
    pub keyspace: String,
    /// YCSB's `table` (default `usertable`), a plain CQL name.
    pub table: String,
    /// The value columns, `<fieldnameprefix>0` … `<fieldnameprefix><fieldcount − 1>` (1–1000).
    pub field_names: Vec<String>,
    /// `cassandra.readconsistencylevel`, default [`DEFAULT_CONSISTENCY`].
    pub read_consistency: Consistency,
    /// `cassandra.writeconsistencylevel`, default [`DEFAULT_CONSISTENCY`].
    pub write_consistency: Consistency,
    /// `cassandra.username`; None logs in anonymously. Given together with a password or not
    /// at all.
    pub username: Option<String>,
    /// From `cassandra.password`, `cassandra.password.file` or [`PASSWORD_ENV`]; prints as
    /// `***`, so the config can be logged.
    pub password: Option<Secret>,
    /// How long connecting to the contact points may take (`cassandra.connecttimeoutmillis`,
    /// default 5000 ms, at least 1 ms).
    pub connect_timeout: Duration,
    /// How long a request may go unanswered before it is an ERROR; None
    /// (`cassandra.readtimeoutmillis=0`) waits forever, as the Java driver's 0 does. Operations
    /// time out through [`deadline`]'s watchdog, everything else through the driver.
    pub request_timeout: Option<Duration>,
    /// `cassandra.useSSL`: CQL over TLS, the nodes' certificates checked against
    /// [`truststore`](Self::truststore).
    pub use_ssl: bool,
    /// PEM file of the CA certificates that sign the nodes' certificates; None with TLS on
    /// uses the system's bundle (`/etc/ssl/certs/ca-certificates.crt`).
    pub truststore: Option<std::path::PathBuf>,
    /// The `WITH replication = {…}` map used when the keyspace is created.
    pub replication: String,
    /// Connections per node (`cassandra.maxconnections`); the driver's default when absent.
    pub connections_per_host: Option<usize>,
    /// `cassandra.tracing`: ask Cassandra to trace every statement (CQL tracing, kept in its
    /// `system_traces` keyspace).
    pub tracing: bool,
    /// `cassandra.hostsonly`: talk to the `hosts` given and to none of the peers the driver
    /// discovers, so every request is coordinated by one of them (`iodig verify` reads each
    /// managed node alone this way).
    pub hosts_only: bool,
}

pub(super) fn cfg_err(msg: String) -> DbError {
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
                "property {key}={v}: unknown consistency level; use ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM, LOCAL_ONE, ANY, SERIAL or LOCAL_SERIAL"
            )))
        }
    })
}

/// CQL identifiers iodig generates statements from must be plain (no quoting, no injection).
pub(super) fn check_identifier(what: &str, name: &str) -> Result<(), DbError> {
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

/// The password from `cassandra.password`, else the first line of `cassandra.password.file`,
/// else `env` ([`PASSWORD_ENV`]) when a user name is given (a variable left in a shell must not
/// turn a run without login into a failed one). Errors name the property, never the secret.
fn password(
    props: &Properties,
    has_user: bool,
    env: Option<String>,
) -> Result<Option<Secret>, DbError> {
    let inline = props.get("cassandra.password");
    let file = props.get("cassandra.password.file");
    if let (Some(_), Some(f)) = (inline, file) {
        return Err(cfg_err(format!(
            "properties cassandra.password and cassandra.password.file={f} both give the password; keep one (the file keeps it off the command line)"
        )));
    }
    if let Some(p) = inline {
        return Ok(Some(Secret::new(p)));
    }
    if let Some(f) = file {
        let text = std::fs::read_to_string(f).map_err(|e| {
            cfg_err(format!(
                "property cassandra.password.file={f}: cannot read the password file ({e}); give a readable file holding the password on its first line"
            ))
        })?;
        // The first line, without its line ending: `echo pw > file` must work.
        let line = text.lines().next().unwrap_or("");
        if line.is_empty() {
            return Err(cfg_err(format!(
                "property cassandra.password.file={f}: the file is empty; put the password on its first line"
            )));
        }
        return Ok(Some(Secret::new(line)));
    }
    Ok(env.filter(|p| has_user && !p.is_empty()).map(Secret::new))
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
        let password = password(props, username.is_some(), std::env::var(PASSWORD_ENV).ok())?;
        if username.is_some() != password.is_some() {
            return Err(cfg_err(format!(
                "properties cassandra.username and cassandra.password go together; give both or neither \
                 (the password as -p cassandra.password.file=PATH, in the environment as {PASSWORD_ENV}, \
                 or as -p cassandra.password=…, which ps shows to other users)"
            )));
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
            hosts_only: props
                .get_bool("cassandra.hostsonly", false)
                .map_err(|e| cfg_err(e.0))?,
        })
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

    /// The message of parsing these properties, which must fail.
    fn error(pairs: &[(&str, &str)]) -> String {
        CassandraConfig::from_props(&props(pairs))
            .unwrap_err()
            .to_string()
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
        let e = error(&[("hosts", "h"), ("cassandra.readconsistencylevel", "MOST")]);
        assert!(e.contains("cassandra.readconsistencylevel"), "{e}");
        let e = error(&[]);
        assert!(e.contains("property hosts"), "{e}");
        let e = error(&[("hosts", "h"), ("cassandra.keyspace", "a;drop")]);
        assert!(e.contains("cassandra.keyspace"), "{e}");
    }

    #[test]
    fn the_password_comes_from_the_property_a_file_or_the_environment() {
        let user = [("hosts", "h"), ("cassandra.username", "u")];
        let with = |extra: &[(&str, &str)], env: Option<&str>| {
            let mut all = user.to_vec();
            all.extend_from_slice(extra);
            password(&props(&all), true, env.map(String::from))
        };
        let got = |r: Result<Option<Secret>, DbError>| r.unwrap().map(|s| s.expose().to_string());
        assert_eq!(
            got(with(&[("cassandra.password", "p1")], Some("env"))),
            Some("p1".into())
        );
        let dir = std::env::temp_dir().join(format!("iodig-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, "S3cr3t-file\nignored\n").unwrap();
        let f = file.display().to_string();
        assert_eq!(
            got(with(&[("cassandra.password.file", &f)], Some("env"))),
            Some("S3cr3t-file".into())
        );
        assert_eq!(
            got(with(&[], Some("S3cr3t-env"))),
            Some("S3cr3t-env".into())
        );
        // Without a user the variable is not a login.
        assert!(password(&props(&[("hosts", "h")]), false, Some("x".into()))
            .unwrap()
            .is_none());

        let e = with(
            &[
                ("cassandra.password", "S3cr3t"),
                ("cassandra.password.file", &f),
            ],
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("keep one") && !e.contains("S3cr3t"), "{e}");
        std::fs::write(&file, "").unwrap();
        let e = with(&[("cassandra.password.file", &f)], None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cassandra.password.file") && e.contains("empty"),
            "{e}"
        );
        let missing = dir.join("none").display().to_string();
        let e = with(&[("cassandra.password.file", &missing)], None)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&missing) && e.contains("cannot read"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();

        // A user without any password names every way to give one.
        let e = error(&[("hosts", "h"), ("cassandra.username", "u")]);
        assert!(
            e.contains("cassandra.password.file") && e.contains(PASSWORD_ENV),
            "{e}"
        );
        // The config prints the password as the marker.
        let c = CassandraConfig::from_props(&props(&[
            ("hosts", "h"),
            ("cassandra.username", "u"),
            ("cassandra.password", "S3cr3t"),
        ]))
        .unwrap();
        assert!(!format!("{c:?}").contains("S3cr3t"));
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
