//! Every bad input of the foundation gets a one-line error naming the flag, property or path and
//! the fix, exit code 2, and leaves what was already written intact.

mod common;

use common::*;

#[test]
fn unknown_property_names_the_nearest_known_one() {
    let (_d, out) = out_dir();
    IodigArgs::run()
        .db("basic")
        .p("recordcont=10")
        .trace("off")
        .out(&out)
        .usage_error(&["recordcont", "did you mean recordcount?"]);
}

#[test]
fn proportions_not_summing_to_one_are_normalised_and_said() {
    let (_d, out) = out_dir();
    let r = IodigArgs::run()
        .db("basic")
        .props(&[
            "readproportion=0.7",
            "updateproportion=0.7",
            "operationcount=100",
        ])
        .threads("1")
        .warmup("0s")
        .trace("off")
        .out(&out)
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(r.stderr.contains("normalised as YCSB does"), "{}", r.stderr);
    assert!(r.stderr.contains("readproportion=0.5000"), "{}", r.stderr);
    let run = r.run_json();
    assert!(run["notes"][0].as_str().unwrap().contains("normalised"));
}

#[test]
fn zero_or_negative_threads_are_refused() {
    let (_d, out) = out_dir();
    for threads in ["0", "-3"] {
        IodigArgs::run()
            .db("basic")
            .threads(threads)
            .trace("off")
            .out(&out)
            .usage_error(&["--threads"]);
    }
}

#[test]
fn a_load_with_several_thread_counts_is_refused() {
    // A load is one step: a second thread count used to be dropped without a word.
    let (_d, out) = out_dir();
    IodigArgs::load()
        .db("basic")
        .threads("1")
        .threads("4")
        .trace("off")
        .out(&out)
        .usage_error(&["--threads 1,4", "one thread count", "iodig run"]);
}

#[test]
fn missing_workload_file_is_named() {
    let (_d, out) = out_dir();
    IodigArgs::run()
        .db("basic")
        .workload("/nonexistent/workloadz")
        .out(&out)
        .usage_error(&["/nonexistent/workloadz", "-P"]);
}

#[test]
fn malformed_property_override_is_named() {
    let (_d, out) = out_dir();
    expect_usage_error(
        &["run", "--db", "basic", "-p", "recordcount", "--out", &out],
        &["-p recordcount", "name=value"],
    );
}

#[test]
fn unwritable_output_directory_is_named() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let out = file.join("runs");
    IodigArgs::run()
        .db("basic")
        .p("operationcount=10")
        .trace("off")
        .out(&out)
        .usage_error(&["--out", "writable"]);
}

#[test]
fn unknown_db_lists_the_bindings() {
    let (_d, out) = out_dir();
    IodigArgs::run()
        .db("mongodb")
        .out(&out)
        .usage_error(&["--db mongodb", "rocksdb", "basic"]);
}

#[test]
fn rocksdb_directory_held_by_another_process_is_named_and_left_intact() {
    let (_d, out) = out_dir();
    let db_dir = format!("{out}/held");
    // First load a small dataset, then hold the database open from another iodig process.
    let dir_property = format!("rocksdb.dir={db_dir}");
    let dataset = ["recordcount=200", dir_property.as_str()];
    let load = IodigArgs::load()
        .props(&dataset)
        .threads("1")
        .trace("off")
        .out(&out)
        .output();
    assert_eq!(load.code(), 0, "{}", load.stderr);
    let holder = IodigArgs::run()
        .no_load()
        .props(&dataset)
        .threads("1")
        .duration("30s")
        .warmup("0s")
        .trace("off")
        .out(&out)
        .command()
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let r = IodigArgs::run()
        .no_load()
        .props(&dataset)
        .trace("off")
        .out(&out)
        .usage_error(&["rocksdb.dir", "held by another process"]);
    drop(r);
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(holder.id() as i32, libc::SIGTERM) };
    let status = holder.wait_with_output().unwrap().status;
    assert_eq!(status.code(), Some(130));
    assert!(
        std::path::Path::new(&db_dir).join("CURRENT").is_file(),
        "the database must be left intact"
    );
}

#[test]
fn zero_durations_rates_and_thread_properties_are_refused_up_front() {
    let (_d, out) = out_dir();
    let cases: [(&[&str], &[&str]); 6] = [
        (&["--duration", "0s"], &["--duration 0s", "--duration 30s"]),
        (
            &["-p", "maxexecutiontime=abc"],
            &["maxexecutiontime=abc", "whole number"],
        ),
        (&["--slot-ms", "0"], &["--slot-ms", "divide 1000"]),
        (&["-p", "threadcount=0"], &["threadcount=0", "at least 1"]),
        (&["-p", "threadcount=4,x"], &["threadcount=4,x"]),
        (&["-p", "target=-5"], &["target=-5", "above 0"]),
    ];
    for (extra, needles) in cases {
        let r = IodigArgs::run()
            .db("basic")
            .trace("off")
            .out(&out)
            .args(extra)
            .usage_error(needles);
        assert!(
            !r.stderr.contains("run directory:"),
            "refused before anything ran: {}",
            r.stderr
        );
    }
}

#[test]
fn experiment_file_mistakes_name_the_file_and_the_entry() {
    let (d, out) = out_dir();
    let spec = d.path().join("exp.toml");
    let entry = |file: &str, threads: &str| {
        format!("db = \"basic\"\n[[workload]]\nfile = \"{file}\"\nthreads = {threads}\n")
    };
    std::fs::write(&spec, entry("nowhere/workloadb", "[1]")).unwrap();
    let spec_s = spec.to_str().unwrap();
    let run = || IodigArgs::run().experiment(&spec).out(&out);
    run().usage_error(&[
        spec_s,
        "file = \"nowhere/workloadb\"",
        "file = \"workloadb\" (built in)",
    ]);
    std::fs::write(&spec, entry("workloadb", "[]")).unwrap();
    run().usage_error(&["threads = []"]);
    std::fs::write(
        &spec,
        "repetitions = 0\n".to_string() + &entry("workloadb", "[1]"),
    )
    .unwrap();
    run().usage_error(&["repetitions = 0"]);
    let two = entry("workloadb", "[1]")
        + "[[workload]]\nfile = \"workloadc\"\nthreads = [1]\n[workload.properties]\nfieldlength = 50\n";
    std::fs::write(&spec, two).unwrap();
    run().usage_error(&[
        "workloadc describes another dataset than workloadb (fieldlength 50 vs unset)",
    ]);
}

#[test]
fn cassandra_commands_on_a_directory_up_never_made_are_usage_errors() {
    let (_d, out) = out_dir();
    let missing = format!("{out}/no-nodes");
    for cmd in ["status", "down", "events"] {
        expect_usage_error(
            &["cassandra", cmd, "--dir", &missing],
            &[&missing, "iodig cassandra up --dir"],
        );
    }
}

#[test]
fn nodes_that_cannot_be_started_are_refused_before_anything_runs() {
    let (_d, out) = out_dir();
    for nodes in ["0", "255"] {
        IodigArgs::run()
            .nodes(nodes)
            .out(&out)
            .usage_error(&["--nodes"]);
    }
    IodigArgs::run()
        .db("basic")
        .nodes("3")
        .out(&out)
        .usage_error(&["--nodes 3", "--db basic runs embedded", "--db cassandra"]);
    IodigArgs::run()
        .db("cassandra")
        .nodes("3")
        .p("hosts=127.0.0.9")
        .out(&out)
        .usage_error(&["--nodes 3", "hosts=127.0.0.9", "one or the other"]);
    assert!(
        !std::path::Path::new(&out).join("data").exists(),
        "nothing started"
    );
}

#[test]
fn report_and_compare_refuse_a_latency_op_they_cannot_show() {
    let (d, out) = out_dir();
    let quick = |workload: &str| {
        IodigArgs::run_basic(workload, &out)
            .p("operationcount=50")
            .threads("1")
            .warmup("0s")
    };
    let reads = quick("workloads/workloadc").output();
    assert_eq!(reads.code(), 0, "{}", reads.stderr);
    let updates = quick("workloads/workloada")
        .props(&["readproportion=0", "updateproportion=1"])
        .output();
    assert_eq!(updates.code(), 0, "{}", updates.stderr);
    let (r, u) = (reads.run_dir(), updates.run_dir());
    let (r, u) = (r.to_str().unwrap(), u.to_str().unwrap());
    let cmp = d.path().join("cmp");
    let cmp = cmp.to_str().unwrap();
    expect_usage_error(
        &["compare", r, u, "--out", cmp],
        &["no operation in common", "has READ", "has UPDATE"],
    );
    expect_usage_error(
        &["compare", r, r, "--out", cmp, "--op", "reads"],
        &["--op", "\"reads\"", "unknown operation", "read, update"],
    );
    expect_usage_error(
        &["compare", r, r, "--out", cmp, "--op", "scan"],
        &["--op scan", "not measured by every run", "(read)"],
    );
    expect_usage_error(&["compare", r, r], &["--out"]);
    assert!(!std::path::Path::new(cmp).exists(), "nothing written");
    expect_usage_error(
        &["report", u, "--op", "read"],
        &[
            "--op read",
            "measured no such operation",
            "UPDATE",
            "--op all",
        ],
    );
    expect_usage_error(&["report", u, "--op", "nope"], &["\"nope\""]);
    // Without --op, a run with no reads is drawn with all ops, and says so.
    let ok = run_iodig(&["report", u]);
    assert_eq!(ok.code(), 0, "{}", ok.stderr);
    let md = std::fs::read_to_string(updates.run_dir().join("report.md")).unwrap();
    assert!(
        md.contains("measured no read operation: its curves, tables, peak and bend use all ops"),
        "{md}"
    );
}

#[test]
fn a_stop_rule_that_does_not_parse_is_refused_before_anything_runs() {
    let (d, out) = out_dir();
    let r = IodigArgs::run()
        .db("basic")
        .args(&["--stop-when", "read.p99 > 50"])
        .trace("off")
        .out(&out)
        .usage_error(&[
            "--stop-when",
            "\"read.p99 > 50\"",
            "has no unit",
            "e.g. 'read.p99 > 50ms'",
        ]);
    assert!(!r.stderr.contains("run directory:"), "{}", r.stderr);
    let spec = d.path().join("exp.toml");
    std::fs::write(
        &spec,
        "db = \"basic\"\nstop_when = \"read.p98 > 5ms\"\n[[workload]]\nfile = \"workloada\"\nthreads = [1]\n",
    )
    .unwrap();
    let spec = spec.to_str().unwrap();
    let r = IodigArgs::run().experiment(spec).out(&out).usage_error(&[
        spec,
        "stop_when = \"read.p98 > 5ms\"",
        "unknown statistic \"p98\"",
    ]);
    assert!(!r.stderr.contains("run directory:"), "{}", r.stderr);
}

#[test]
fn versioned_writes_that_cannot_be_kept_or_verified_are_refused_up_front() {
    let (_d, out) = out_dir();
    let versioned = || IodigArgs::run().db("basic").p("versionedwrites=true");
    versioned().p("dataintegrity=true").out(&out).usage_error(&[
        "dataintegrity=true",
        "versionedwrites=true",
        "choose one",
    ]);
    versioned().p("fieldlength=10").out(&out).usage_error(&[
        "versionedwrites=true",
        "at least 17 bytes",
        "fieldlength",
    ]);
    IodigArgs::run()
        .p("recordcount=10")
        .verify()
        .out(&out)
        .usage_error(&["--verify", "versionedwrites=true"]);
    versioned()
        .verify()
        .out(&out)
        .usage_error(&["--verify with --db basic"]);
    // A run that wrote no versions has nothing to verify; a path that is no run is named.
    let plain = IodigArgs::run_basic("workloada", &out)
        .p("recordcount=5")
        .duration("1s")
        .warmup("0s")
        .output();
    assert_eq!(plain.code(), 0, "{}", plain.stderr);
    expect_usage_error(
        &["verify", plain.run_dir().to_str().unwrap()],
        &["wrote no versioned values", "versionedwrites=true"],
    );
    expect_usage_error(&["verify", &out], &["not a run directory", "run.json"]);
    // Each node alone: only when verifying, only Cassandra, only nodes iodig manages (it freezes
    // the others), only a yes or no.
    let rocks = || {
        IodigArgs::run()
            .p("versionedwrites=true")
            .p("verify.eachnode=true")
            .out(&out)
    };
    rocks()
        .verify()
        .usage_error(&["verify.eachnode=true", "--db rocksdb has no nodes"]);
    let cassandra = || {
        IodigArgs::run()
            .db("cassandra")
            .p("versionedwrites=true")
            .p("verify.eachnode=true")
            .out(&out)
    };
    cassandra().usage_error(&["verify.eachnode=true", "add --verify"]);
    cassandra().p("hosts=127.0.0.9").verify().usage_error(&[
        "verify.eachnode=true",
        "nodes it manages",
        "hosts",
    ]);
    rocks()
        .p("verify.eachnode=maybe")
        .verify()
        .usage_error(&["verify.eachnode", "maybe"]);
}

#[test]
fn a_restore_iodig_cannot_do_is_refused_before_anything_starts() {
    let (_d, out) = out_dir();
    // The basic binding stores nothing to put back.
    IodigArgs::run()
        .db("basic")
        .arg("--restore-each-step")
        .trace("off")
        .out(&out)
        .usage_error(&["--restore-each-step with --db basic", "stores nothing"]);
    // Observed hosts are restored only for Cassandra; refused before any host is reached.
    IodigArgs::run()
        .db("rocksdb")
        .observe("db1")
        .arg("--restore-each-step")
        .trace("off")
        .out(&out)
        .usage_error(&[
            "--restore-each-step with --observe",
            "only for --db cassandra",
        ]);
    // Nodes iodig did not start are restored through the agents on their hosts; refused
    // before any node is contacted.
    IodigArgs::run()
        .db("cassandra")
        .p("hosts=127.0.0.1")
        .arg("--restore-each-step")
        .trace("off")
        .out(&out)
        .usage_error(&["--restore-each-step", "the hosts property", "add --observe"]);
}
