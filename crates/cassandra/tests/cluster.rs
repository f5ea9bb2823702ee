//! A real 3-node Apache Cassandra cluster on 127.0.0.1–3 with a keyspace at replication factor
//! 3: values written at QUORUM through the `cassandra` binding read back identical (at QUORUM
//! and at ALL), `status` shows three up nodes whose effective ownership sums to 300 %, the
//! managed logs yield flush events of every node, one node can be read alone (the others frozen
//! until it sees them down, and thawed after), and `down` stops exactly the three pids.
//! One test function so the cluster starts once; a Drop guard stops it whatever fails.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use iodig_cassandra::{Guard, UpOptions};
use iodig_db::cassandra::open_with_handle;
use iodig_db::{Db, DbFactory, Properties, Record, Status};

fn value(key: &str, field: usize) -> Vec<u8> {
    // Printable, different per key and field, 200 bytes.
    let seed = format!("{key}/{field}/");
    seed.bytes()
        .cycle()
        .take(200)
        .map(|b| b' ' + (b % 95))
        .collect()
}

#[test]
fn three_node_cluster_rf3_quorum() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let result = iodig_cassandra::up(&UpOptions {
        nodes: 3,
        heap: "1G".into(),
        dir: dir.path().to_path_buf(),
        ..Default::default()
    });
    // Guard first: a failed third node must not leave the first two running.
    let _guard = Guard {
        dir: dir.path().canonicalize().unwrap(),
    };
    let cluster = result.expect("start three nodes");
    eprintln!("3 nodes up in {:?}", t0.elapsed());
    assert_eq!(cluster.hosts(), "127.0.0.1,127.0.0.2,127.0.0.3");

    let mut props = Properties::new();
    props.set("hosts", cluster.hosts());
    props.set("fieldcount", "4");
    props.set("cassandra.replicationfactor", "3");
    props.set("cassandra.readconsistencylevel", "QUORUM");
    props.set("cassandra.writeconsistencylevel", "QUORUM");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let factory = open_with_handle(&props, rt.handle()).expect("open the binding on the cluster");

    let keys: Vec<String> = (0..300).map(|i| format!("user{i}")).collect();
    rt.block_on(async {
        // 32 concurrent writers at QUORUM.
        let mut tasks = Vec::new();
        for chunk in keys.chunks(10) {
            let mut db = factory.worker().unwrap();
            let chunk = chunk.to_vec();
            tasks.push(tokio::spawn(async move {
                for key in chunk {
                    let mut r = Record::new();
                    for f in 0..4 {
                        r.push(&format!("field{f}"), &value(&key, f));
                    }
                    assert_eq!(db.insert("usertable", &key, &r).await, Status::Ok, "{key}");
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let mut db = factory.worker().unwrap();
        let mut out = Record::new();
        for key in &keys {
            assert_eq!(
                db.read("usertable", key, None, &mut out).await,
                Status::Ok,
                "{key}"
            );
            let got: BTreeMap<String, Vec<u8>> = out
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_vec()))
                .collect();
            let want: BTreeMap<String, Vec<u8>> = (0..4)
                .map(|f| (format!("field{f}"), value(key, f)))
                .collect();
            assert_eq!(got, want, "{key}");
        }
    });
    drop(factory);

    // At ALL every replica must answer with the same values: RF=3 really holds 3 copies.
    props.set("cassandra.readconsistencylevel", "ALL");
    let factory = open_with_handle(&props, rt.handle()).expect("reopen at ALL");
    rt.block_on(async {
        let mut db = factory.worker().unwrap();
        let mut out = Record::new();
        for key in keys.iter().step_by(7) {
            assert_eq!(
                db.read("usertable", key, None, &mut out).await,
                Status::Ok,
                "{key} at ALL"
            );
            assert_eq!(out.get("field3"), Some(&value(key, 3)[..]));
        }
    });
    drop(factory);

    let t = Instant::now();
    let status = iodig_cassandra::status(&cluster.options.dir, Some("ycsb")).expect("status");
    eprintln!("status in {:?}: {status:#?}", t.elapsed());
    assert_eq!(status.len(), 3);
    assert!(
        status
            .iter()
            .all(|s| s.state == "UN" && s.running && s.tokens == 16),
        "{status:#?}"
    );
    let owned: f64 = status
        .iter()
        .map(|s| s.owns_percent.expect("effective ownership"))
        .sum();
    assert!(
        (owned - 300.0).abs() < 0.5,
        "ownership sums to {owned}, expected 300 for RF=3"
    );

    // Flushing writes sstables on all three replicas; each node's log shows it.
    iodig_cassandra::snapshot(&cluster.options.dir, "loaded", "ycsb").expect("flush + snapshot");
    let events =
        iodig_cassandra::events(&cluster.options.dir, Some(cluster.nodes[0].started_unix_ms))
            .unwrap();
    for node in &cluster.nodes {
        assert!(
            events.iter().any(|e| e.node == node.address
                && e.kind == "flush"
                && e.detail.starts_with("ycsb.usertable")
                && e.bytes.unwrap_or(0) > 0),
            "no ycsb.usertable flush on {}: {events:#?}",
            node.address
        );
    }

    // One node alone: the others frozen until it sees them down. Forgotten, as if the iodig
    // holding it were killed: the next thaw resumes them, and the cluster is whole again.
    let state = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap()
    };
    let alone =
        iodig_cassandra::isolate(&cluster.options.dir, "127.0.0.3", Duration::from_secs(120))
            .expect("node 3 sees the others down");
    assert_eq!(
        cluster
            .nodes
            .iter()
            .map(|n| state(n.pid))
            .collect::<Vec<_>>()[..2],
        ['T', 'T'],
        "nodes 1 and 2 frozen"
    );
    std::mem::forget(alone);
    let thawed = iodig_cassandra::thaw(&cluster.options.dir).unwrap();
    assert_eq!(thawed, ["127.0.0.1", "127.0.0.2"]);
    assert!(cluster.nodes.iter().all(|n| state(n.pid) != 'T'));
    iodig_cassandra::await_all_up(&cluster.options.dir, Duration::from_secs(120))
        .expect("the cluster whole again");

    let stopped = iodig_cassandra::down(&cluster.options.dir, Duration::from_secs(60)).unwrap();
    let pids: Vec<u32> = stopped.iter().map(|s| s.pid).collect();
    assert_eq!(
        pids,
        cluster.nodes.iter().map(|n| n.pid).collect::<Vec<_>>()
    );
    assert!(
        stopped.iter().all(|s| s.how != "not running"),
        "{stopped:?}"
    );
    assert!(iodig_cassandra::status(&cluster.options.dir, None)
        .unwrap()
        .iter()
        .all(|s| !s.running));
    eprintln!("total {:?}", t0.elapsed());
}
