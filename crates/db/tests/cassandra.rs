//! The `cassandra` binding against one real Apache Cassandra node (started by iodig-cassandra,
//! CQL over TLS only, password authentication on): TLS and login errors, schema creation, every operation with values read back
//! identical, NOT_FOUND, many concurrent tasks on one session, the bad-input errors, flush events,
//! and snapshot/restore. One test function, so the node starts once and a Drop guard stops it
//! whatever fails.
#![cfg(feature = "cassandra")]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use iodig_cassandra::{Guard, UpOptions};
use iodig_db::cassandra::{open, open_with_handle, CassandraFactory};
use iodig_db::{Db, DbFactory, Properties, Record, Status};

/// The CA file clients trust, set once the node's certificates exist.
static TRUSTSTORE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn props(hosts: &str, extra: &[(&str, &str)]) -> Properties {
    let mut p = Properties::new();
    p.set("hosts", hosts);
    p.set("fieldcount", "4");
    p.set("cassandra.username", "cassandra");
    p.set("cassandra.password", "cassandra");
    p.set("cassandra.useSSL", "true");
    p.set(
        "cassandra.truststore",
        TRUSTSTORE.get().expect("node started"),
    );
    for (k, v) in extra {
        p.set(k, *v);
    }
    p
}

/// The error of opening the binding with these properties, which must fail (`why` says why).
fn open_error(hosts: &str, extra: &[(&str, &str)], why: &str) -> String {
    open(&props(hosts, extra)).err().expect(why).to_string()
}

/// A deterministic printable value per key and field, like YCSB's data-integrity values.
fn value(key: &str, field: usize, round: u32) -> Vec<u8> {
    let mut x: u64 = 0xcbf29ce484222325 ^ u64::from(round);
    for b in key.bytes().chain([field as u8]) {
        x = (x ^ u64::from(b)).wrapping_mul(0x100000001b3);
    }
    (0..100)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b' ' + (x % 95) as u8
        })
        .collect()
}

fn record(key: &str, fields: &[usize], round: u32) -> Record {
    let mut r = Record::new();
    for &f in fields {
        r.push(&format!("field{f}"), &value(key, f, round));
    }
    r
}

fn as_map(r: &Record) -> BTreeMap<String, Vec<u8>> {
    r.iter().map(|(n, v)| (n.to_string(), v.to_vec())).collect()
}

#[test]
fn binding_against_one_real_node() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let result = iodig_cassandra::up(&UpOptions {
        nodes: 1,
        heap: "1G".into(),
        dir: dir.path().to_path_buf(),
        password_auth: true,
        tls: true,
        ..Default::default()
    });
    // Guard before checking the result: a node that started but never got ready still stops.
    let _guard = Guard {
        dir: dir.path().canonicalize().unwrap(),
    };
    let cluster = result.expect("start one Cassandra node");
    eprintln!("node up in {:?}", t0.elapsed());
    let hosts = cluster.hosts();
    let ca = iodig_cassandra::tls::files(&cluster.options.dir).ca_pem;
    assert!(
        std::fs::read_to_string(&ca)
            .unwrap()
            .contains("BEGIN CERTIFICATE"),
        "{}",
        ca.display()
    );
    TRUSTSTORE.set(ca.display().to_string()).unwrap();

    // The node speaks TLS only: a plaintext client is refused, with the contact point named.
    let err = open_error(
        &hosts,
        &[
            ("cassandra.useSSL", "false"),
            ("cassandra.connecttimeoutmillis", "3000"),
        ],
        "plaintext against a TLS-only node must fail",
    );
    assert!(
        err.contains("127.0.0.1:9042") && err.contains("cassandra.useSSL=true"),
        "{err}"
    );
    // A trust store without the node's CA: the certificate is rejected, not silently accepted.
    let err = open_error(
        &hosts,
        &[
            ("cassandra.truststore", "/etc/ssl/certs/ca-certificates.crt"),
            ("cassandra.connecttimeoutmillis", "3000"),
        ],
        "an untrusted node certificate must fail",
    );
    assert!(
        err.contains("TLS") && err.contains("certificate") && err.contains("cassandra.truststore"),
        "the error should say the certificate is not trusted: {err}"
    );

    // Wrong credentials: the authentication failure, said plainly.
    let err = open_error(
        &hosts,
        &[("cassandra.password", "wrong")],
        "wrong password must fail",
    );
    assert!(
        err.contains("authentication failed") && err.contains("cassandra.password"),
        "{err}"
    );

    // Unreachable host: an error within the connect timeout naming host and port.
    let t = Instant::now();
    let err = open_error(
        "127.0.0.9",
        &[("cassandra.connecttimeoutmillis", "2000")],
        "nothing listens on 127.0.0.9",
    );
    assert!(err.contains("127.0.0.9:9042"), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let factory = open_with_handle(&props(&hosts, &[]), rt.handle()).expect("open the binding");
    rt.block_on(crud(&factory));
    rt.block_on(concurrent(&factory));

    // An existing table with other columns is an error, and the table is left alone.
    let err = open_error(
        &hosts,
        &[("fieldcount", "5")],
        "5 fields vs a 4-field table",
    );
    assert!(
        err.contains("missing column field4") && err.contains("does not drop"),
        "{err}"
    );
    rt.block_on(async {
        let mut db = factory.worker().unwrap();
        let mut out = Record::new();
        assert_eq!(
            db.read("usertable", "user1", None, &mut out).await,
            Status::Ok,
            "table must survive"
        );
    });

    // Flushes appear as events with times and bytes once nodetool flushes (inside snapshot).
    let before = iodig_cassandra::events(&cluster.options.dir, None)
        .unwrap()
        .len();
    iodig_cassandra::snapshot(&cluster.options.dir, "loaded", "ycsb").expect("snapshot");
    let events = iodig_cassandra::events(&cluster.options.dir, None).unwrap();
    let flush = events
        .iter()
        .find(|e| e.kind == "flush" && e.detail.starts_with("ycsb.usertable"))
        .unwrap_or_else(|| panic!("no ycsb.usertable flush among {events:#?}"));
    assert!(events.len() > before);
    assert!(
        flush.end_unix_ms.is_some() && flush.bytes.unwrap_or(0) > 0,
        "{flush:?}"
    );
    assert!(flush.start_unix_ms > 1_600_000_000_000);

    // Change the data, restore, and see the snapshot's data again.
    rt.block_on(async {
        let mut db = factory.worker().unwrap();
        assert_eq!(
            db.update("usertable", "user1", &record("user1", &[0, 1, 2, 3], 9))
                .await,
            Status::Ok
        );
        assert_eq!(db.delete("usertable", "user2").await, Status::Ok);
        assert_eq!(
            db.insert("usertable", "after", &record("after", &[0, 1, 2, 3], 0))
                .await,
            Status::Ok
        );
    });
    drop(factory);
    let t = Instant::now();
    let restored =
        iodig_cassandra::restore(&cluster.options.dir, "loaded", "ycsb").expect("restore");
    eprintln!("restore in {:?}", t.elapsed());
    let factory = open_with_handle(&props(&restored.hosts(), &[]), rt.handle())
        .expect("reopen after restore");
    rt.block_on(async {
        let mut db = factory.worker().unwrap();
        let mut out = Record::new();
        assert_eq!(
            db.read("usertable", "user1", None, &mut out).await,
            Status::Ok
        );
        assert_eq!(
            as_map(&out),
            as_map(&record("user1", &[0, 1, 2, 3], 1)),
            "user1 back to its snapshot values"
        );
        assert_eq!(
            db.read("usertable", "user2", None, &mut out).await,
            Status::Ok,
            "user2 back"
        );
        assert_eq!(
            db.read("usertable", "after", None, &mut out).await,
            Status::NotFound,
            "later insert gone"
        );
    });
    drop(factory);

    let stopped = iodig_cassandra::down(&cluster.options.dir, Duration::from_secs(60)).unwrap();
    assert_eq!(stopped.len(), 1);
    assert_ne!(stopped[0].how, "not running");
    eprintln!("total {:?}", t0.elapsed());
}

async fn crud(factory: &CassandraFactory) {
    let mut db = factory.worker().unwrap();
    db.init().await.unwrap();
    let all = [0, 1, 2, 3];
    let mut out = Record::new();

    // Insert and read back every field identical.
    for i in 0..20 {
        let key = format!("user{i}");
        assert_eq!(
            db.insert("usertable", &key, &record(&key, &all, 1)).await,
            Status::Ok
        );
    }
    assert_eq!(
        db.read("usertable", "user1", None, &mut out).await,
        Status::Ok
    );
    assert_eq!(as_map(&out), as_map(&record("user1", &all, 1)));
    assert!(out.get("y_id").is_none(), "the key column is not a field");

    // A field subset reads just those fields.
    let some = vec!["field1".to_string(), "field3".to_string()];
    assert_eq!(
        db.read("usertable", "user1", Some(&some), &mut out).await,
        Status::Ok
    );
    assert_eq!(as_map(&out), as_map(&record("user1", &[1, 3], 1)));

    // Update one field; the others stay.
    assert_eq!(
        db.update("usertable", "user1", &record("user1", &[2], 2))
            .await,
        Status::Ok
    );
    assert_eq!(
        db.read("usertable", "user1", None, &mut out).await,
        Status::Ok
    );
    let mut want = as_map(&record("user1", &[0, 1, 3], 1));
    want.extend(as_map(&record("user1", &[2], 2)));
    assert_eq!(as_map(&out), want);
    // Put it back so the snapshot holds round-1 values everywhere.
    assert_eq!(
        db.update("usertable", "user1", &record("user1", &[2], 1))
            .await,
        Status::Ok
    );

    // Scan in token order (no wrap-around past the ring's end): LIMIT caps the rows, and a
    // short scan is the prefix of a long one from the same key.
    let mut long = Vec::new();
    assert_eq!(
        db.scan("usertable", "user5", 1000, None, &mut long).await,
        Status::Ok
    );
    assert!(!long.is_empty() && long.len() <= 20, "{}", long.len());
    let mut rows = Vec::new();
    assert_eq!(
        db.scan("usertable", "user5", 3, None, &mut rows).await,
        Status::Ok
    );
    assert_eq!(rows.len(), long.len().min(3));
    assert_eq!(rows[..], long[..rows.len()]);
    for r in &long {
        assert_eq!(r.len(), 4);
    }
    assert_eq!(
        db.scan("usertable", "user5", 1000, Some(&some), &mut rows)
            .await,
        Status::Ok
    );
    assert_eq!(rows.len(), long.len());
    assert!(rows.iter().all(|r| r.len() == 2));
    // Every key's values come back identical.
    let mut seen = 0;
    for i in 0..20 {
        let key = format!("user{i}");
        assert_eq!(db.read("usertable", &key, None, &mut out).await, Status::Ok);
        assert_eq!(as_map(&out), as_map(&record(&key, &all, 1)), "{key}");
        seen += 1;
    }
    assert_eq!(seen, 20);

    // Delete, then NOT_FOUND; a key never written is NOT_FOUND too.
    assert_eq!(
        db.insert("usertable", "gone", &record("gone", &all, 1))
            .await,
        Status::Ok
    );
    assert_eq!(db.delete("usertable", "gone").await, Status::Ok);
    assert_eq!(
        db.read("usertable", "gone", None, &mut out).await,
        Status::NotFound
    );
    assert_eq!(
        db.read("usertable", "never", None, &mut out).await,
        Status::NotFound
    );
    db.cleanup().await.unwrap();
}

/// 256 tasks on one session, each with its own worker, like the runner's `Execution::Tasks`.
async fn concurrent(factory: &CassandraFactory) {
    let mut handles = Vec::new();
    for t in 0..256u32 {
        let mut db = factory.worker().unwrap();
        handles.push(tokio::spawn(async move {
            let mut out = Record::new();
            for i in 0..4 {
                let key = format!("task{t}-{i}");
                let rec = record(&key, &[0, 1, 2, 3], 3);
                assert_eq!(db.insert("usertable", &key, &rec).await, Status::Ok);
                assert_eq!(db.read("usertable", &key, None, &mut out).await, Status::Ok);
                assert_eq!(as_map(&out), as_map(&rec));
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
}
