//! Fault schedules that cannot work are refused before anything starts: a one-line error naming
//! the `--fault` value (or the property) and the fix, exit code 2, nothing started or written.

mod common;

use common::*;

#[test]
fn faults_that_do_not_fit_are_refused_before_anything_starts() {
    let (_d, out) = out_dir();
    // An embedded database has no node to kill.
    expect_usage_error(
        &[
            "run",
            "--db",
            "rocksdb",
            "--fault",
            "2s:kill:node1",
            "--out",
            &out,
        ],
        &[
            "--fault 2s:kill:node1",
            "embedded RocksDB runs inside iodig itself",
            "process faults need managed nodes",
        ],
    );
    expect_usage_error(
        &[
            "run",
            "--db",
            "cassandra",
            "--fault",
            "2s:explode:node1",
            "--out",
            &out,
        ],
        &["--fault \"2s:explode:node1\"", "unknown action \"explode\""],
    );
    expect_usage_error(
        &[
            "run",
            "--db",
            "cassandra",
            "--nodes",
            "3",
            "--fault",
            "2s:kill:node4",
            "--out",
            &out,
        ],
        &["target \"node4\"", "node1…node3"],
    );
    expect_usage_error(
        &[
            "run",
            "--db",
            "cassandra",
            "--duration",
            "5s",
            "--fault",
            "9s:kill:node1",
            "--out",
            &out,
        ],
        &["--fault 9s:kill:node1", "past the end", "5.0 s steps"],
    );
    // Nodes on observed hosts: only what a signal over SSH can do, to a host that is observed.
    let observed = |fault: &str| {
        vec![
            "run".to_string(),
            "--db".into(),
            "cassandra".into(),
            "-p".into(),
            "hosts=127.0.0.1".into(),
            "--observe".into(),
            "127.0.0.1".into(),
            "--fault".into(),
            fault.into(),
            "--out".into(),
            out.clone(),
        ]
    };
    let args = observed("2s:restart:127.0.0.1");
    expect_usage_error(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &["iodig did not start the node there", "host's own means"],
    );
    let args = observed("2s:kill:127.0.0.9");
    expect_usage_error(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &[
            "target \"127.0.0.9\" is not an observed host",
            "--observe (127.0.0.1)",
        ],
    );
    // Nothing was started for them: no managed node directory.
    assert!(!std::path::Path::new(&out)
        .join("data")
        .join("cassandra")
        .exists());
}

#[test]
fn device_faults_that_do_not_fit_are_refused_up_front() {
    let (_d, out) = out_dir();
    expect_usage_error(
        &[
            "run",
            "--fault",
            "2s:pause=1s:device",
            "--duration",
            "5s",
            "--out",
            &out,
        ],
        &[
            "--fault 2s:pause=1s:device",
            "embedded RocksDB runs inside iodig itself",
        ],
    );
    expect_usage_error(
        &[
            "run",
            "--fault",
            "2s:cap=5MB/s:node1",
            "--duration",
            "5s",
            "--out",
            &out,
        ],
        &["target of a cap on embedded RocksDB is its data device"],
    );
    expect_usage_error(
        &[
            "run",
            "--db",
            "basic",
            "--fault",
            "2s:cap=5MB/s:device",
            "--out",
            &out,
        ],
        &["device caps apply to embedded RocksDB", "--db basic"],
    );
    expect_usage_error(
        &["run", "--fault", "2s:cap=fast:device", "--out", &out],
        &["--fault", "cap=5MB/s"],
    );
    expect_usage_error(
        &[
            "run",
            "--fault",
            "9s:cap=5MB/s:device",
            "--duration",
            "5s",
            "--out",
            &out,
        ],
        &["past the end"],
    );
    // The faulty disk's actions: embedded RocksDB only, on its device, of a sensible size.
    expect_usage_error(
        &[
            "run",
            "--db",
            "basic",
            "--fault",
            "2s:slow=5ms:device",
            "--out",
            &out,
        ],
        &[
            "slow=5ms works on the disk iodig mounts under embedded RocksDB",
            "--db basic",
        ],
    );
    expect_usage_error(
        &["run", "--fault", "2s:fail-writes:node1", "--out", &out],
        &[
            "the target of fail-writes is the data device",
            "2s:fail-writes:device",
        ],
    );
    expect_usage_error(
        &[
            "run",
            "--fault",
            "2s:full:device",
            "-p",
            "faultdisk.size=1MiB",
            "--out",
            &out,
        ],
        &["faultdisk.size", "at least 64MiB"],
    );
    expect_usage_error(
        &["run", "--fault", "2s:slow=0s:device", "--out", &out],
        &["slows nothing"],
    );
    // A data directory that holds something: the faulty disk would hide it.
    let busy = tempfile::tempdir().unwrap();
    std::fs::write(busy.path().join("keep"), "mine").unwrap();
    let dir_prop = format!("rocksdb.dir={}", busy.path().display());
    expect_usage_error(
        &[
            "run",
            "--fault",
            "2s:full:device",
            "-p",
            &dir_prop,
            "--out",
            &out,
        ],
        &[
            "-p rocksdb.dir=",
            "not empty",
            "give an empty or new directory",
        ],
    );
    assert!(busy.path().join("keep").exists());
}
