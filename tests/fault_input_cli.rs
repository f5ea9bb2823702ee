//! Fault schedules that cannot work are refused before anything starts: a one-line error naming
//! the `--fault` value (or the property) and the fix, exit code 2, nothing started or written.

mod common;

use common::*;

#[test]
fn faults_that_do_not_fit_are_refused_before_anything_starts() {
    let (_d, out) = out_dir();
    let on = |db: &str| IodigArgs::run().db(db).out(&out);
    // An embedded database has no node to kill.
    on("rocksdb").fault("2s:kill:node1").usage_error(&[
        "--fault 2s:kill:node1",
        "embedded RocksDB runs inside iodig itself",
        "process faults need managed nodes",
    ]);
    on("cassandra")
        .fault("2s:explode:node1")
        .usage_error(&["--fault \"2s:explode:node1\"", "unknown action \"explode\""]);
    on("cassandra")
        .nodes("3")
        .fault("2s:kill:node4")
        .usage_error(&["target \"node4\"", "node1…node3"]);
    on("cassandra")
        .duration("5s")
        .fault("9s:kill:node1")
        .usage_error(&["--fault 9s:kill:node1", "past the end", "5.0 s steps"]);
    // Nodes on observed hosts: what a signal over SSH can do, to a host that is observed, and a
    // restart only of a node the step took down first.
    let observed = |fault: &str| {
        on("cassandra")
            .p("hosts=127.0.0.1")
            .observe("127.0.0.1")
            .fault(fault)
    };
    observed("2s:restart:127.0.0.1").usage_error(&[
        "--fault 2s:restart:127.0.0.1",
        "only after a kill or stop of it earlier in the step",
        "--fault 5s:kill:127.0.0.1",
    ]);
    observed("2s:restart:127.0.0.1")
        .fault("3s:kill:127.0.0.1")
        .usage_error(&["only after a kill or stop of it earlier"]);
    observed("2s:slow-reads=20ms:127.0.0.1").usage_error(&[
        "--fault 2s:slow-reads=20ms:127.0.0.1",
        "faulty disk iodig makes under embedded RocksDB",
        "cap=RATE or uncap there",
    ]);
    observed("2s:kill:127.0.0.9").usage_error(&[
        "target \"127.0.0.9\" is not an observed host",
        "--observe (127.0.0.1)",
    ]);
    // Nothing was started for them: no managed node directory.
    assert!(!std::path::Path::new(&out)
        .join("data")
        .join("cassandra")
        .exists());
}

#[test]
fn device_faults_that_do_not_fit_are_refused_up_front() {
    let (_d, out) = out_dir();
    // Embedded RocksDB (the default binding) into `out`, with one fault.
    let fault = |fault: &str| IodigArgs::run().fault(fault).out(&out);
    fault("2s:pause=1s:device").duration("5s").usage_error(&[
        "--fault 2s:pause=1s:device",
        "embedded RocksDB runs inside iodig itself",
    ]);
    fault("2s:cap=5MB/s:node1")
        .duration("5s")
        .usage_error(&["target of a cap on embedded RocksDB is its data device"]);
    fault("2s:cap=5MB/s:device")
        .db("basic")
        .usage_error(&["device caps apply to embedded RocksDB", "--db basic"]);
    fault("2s:cap=fast:device").usage_error(&["--fault", "cap=5MB/s"]);
    fault("9s:cap=5MB/s:device")
        .duration("5s")
        .usage_error(&["past the end"]);
    // The faulty disk's actions: embedded RocksDB on its device, or a node iodig starts, on a
    // disk of a sensible size.
    fault("2s:slow=5ms:device").db("basic").usage_error(&[
        "slow=5ms works on a disk iodig mounts under embedded RocksDB",
        "or under a node iodig starts (--db cassandra without hosts, target nodeN)",
        "--db basic",
    ]);
    fault("2s:slow=5ms:node1")
        .db("cassandra")
        .p("hosts=127.0.0.1")
        .usage_error(&[
            "slow=5ms works on a disk iodig mounts",
            "--db cassandra with hosts",
        ]);
    fault("2s:fail:node4")
        .db("cassandra")
        .nodes("3")
        .usage_error(&["target \"node4\" is not one of the 3 managed node(s)"]);
    fault("2s:fail-writes:node1").usage_error(&[
        "the target of fail-writes is the data device",
        "2s:fail-writes:device",
    ]);
    fault("2s:full:device")
        .p("faultdisk.size=1MiB")
        .usage_error(&["faultdisk.size", "at least 64MiB"]);
    fault("2s:slow=0s:device").usage_error(&["slows nothing"]);
    fault("2s:slow=5ms:device")
        .p("faultdisk.mechanism=nbd")
        .usage_error(&["faultdisk.mechanism=\"nbd\"", "auto", "dm", "fuse"]);
    // Device-mapper asked for where the kernel has none: the reason and the way out.
    if !std::path::Path::new("/dev/mapper/control").exists() {
        fault("2s:slow=5ms:device")
            .p("faultdisk.mechanism=dm")
            .usage_error(&[
                "faultdisk.mechanism=dm",
                "/dev/mapper/control is missing",
                "-p faultdisk.mechanism=fuse",
            ]);
    }
    // A data directory that holds something: the faulty disk would hide it.
    let busy = tempfile::tempdir().unwrap();
    std::fs::write(busy.path().join("keep"), "mine").unwrap();
    let dir_prop = format!("rocksdb.dir={}", busy.path().display());
    fault("2s:full:device").p(&dir_prop).usage_error(&[
        "-p rocksdb.dir=",
        "not empty",
        "give an empty or new directory",
    ]);
    assert!(busy.path().join("keep").exists());
}
