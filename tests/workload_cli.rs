//! End-to-end tests of `iodig load` / `iodig run` through the real binary: YCSB key order and
//! BasicDB output, YCSB summary text, the run directory, seeds, 64-bit counts, target rate.

mod common;

use common::*;

/// `iodig load --db basic` with one thread, untraced, into `out`, printing every insert.
fn basic_load(out: impl AsRef<std::path::Path>) -> IodigArgs {
    IodigArgs::load()
        .db("basic")
        .threads("1")
        .trace("off")
        .out(out)
        .p("basicdb.verbose=true")
}

/// `iodig run --db basic`, untraced, into `out`.
fn basic_run(out: impl AsRef<std::path::Path>) -> IodigArgs {
    IodigArgs::run().db("basic").trace("off").out(out)
}

fn insert_keys(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("INSERT usertable "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

#[test]
fn load_keys_and_order_match_ycsb_basicdb() {
    let dir = tempfile::tempdir().unwrap();
    let r = basic_load(dir.path())
        .workload("workloads/workloada")
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let keys = insert_keys(&r.stdout);
    assert_eq!(keys.len(), 1000);
    assert_eq!(keys[0], "user6284781860667377211");
    assert_eq!(keys[1], "user8517097267634966620");
    assert_eq!(keys[2], "user1820151046732198393");
    assert_eq!(keys[3], "user4052466453699787802");
    assert_eq!(keys[999], "user2071219101098386137");
    // BasicDB's line: `INSERT usertable <key> [ field1=<100 chars> field0=… ]`, fields in Java
    // HashMap order.
    let line = r.stdout.lines().find(|l| l.starts_with("INSERT ")).unwrap();
    let body = line
        .split_once(" [ ")
        .unwrap()
        .1
        .strip_suffix(" ]")
        .unwrap();
    let fields: Vec<&str> = body.split(" field").collect();
    assert_eq!(fields.len(), 10, "{line}");
    assert!(body.starts_with("field1="), "{line}");
    let order: Vec<char> = fields
        .iter()
        .map(|f| f.trim_start_matches("field").chars().next().unwrap())
        .collect();
    assert_eq!(
        order,
        vec!['1', '0', '7', '6', '9', '8', '3', '2', '5', '4']
    );
}

#[test]
fn insertstart_and_insertcount_split_a_load_across_clients() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let whole = insert_keys(&basic_load(out).p("recordcount=400").output().stdout);
    let a = basic_load(out)
        .props(&["recordcount=400", "insertstart=0", "insertcount=150"])
        .output();
    let b = basic_load(out)
        .props(&["recordcount=400", "insertstart=150", "insertcount=250"])
        .output();
    let mut both = insert_keys(&a.stdout);
    both.extend(insert_keys(&b.stdout));
    assert_eq!(whole.len(), 400);
    assert_eq!(both, whole);
}

#[test]
fn summary_text_parses_like_ycsb_and_run_dir_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let r = IodigArgs::run_basic("workloads/workloada", dir.path())
        .p("operationcount=3000")
        .threads("2")
        .warmup("0s")
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let parsed = parse_ycsb(&r.stdout);
    let reads = ycsb_value(&parsed, "READ", "Operations").unwrap();
    let updates = ycsb_value(&parsed, "UPDATE", "Operations").unwrap();
    assert_eq!(reads + updates, 3000.0);
    assert!(ycsb_value(&parsed, "OVERALL", "Throughput(ops/sec)").is_some());
    assert!(ycsb_value(&parsed, "OVERALL", "RunTime(ms)").unwrap() >= 0.0);
    assert_eq!(ycsb_value(&parsed, "READ", "Return=OK"), Some(reads));
    for p in ["50th", "95th", "99th", "99.9", "99.99"] {
        assert!(
            ycsb_value(&parsed, "READ", &format!("{p}PercentileLatency(us)")).is_some(),
            "{p}"
        );
    }
    assert_eq!(ycsb_value(&parsed, "CLEANUP", "Operations"), Some(2.0));

    let run = r.run_json();
    assert_eq!(run["schema_version"], iodig_model::SCHEMA_VERSION);
    assert_eq!(run["status"], "completed");
    let step = &run["steps"][0];
    assert_eq!(step["operations"], 3000);
    assert_eq!(step["series"]["READ"]["count"].as_f64().unwrap(), reads);
    // The client's own CPU in the measured window: some, and no more than its cores could give.
    let cpu = step["client_cpu_s"]
        .as_f64()
        .expect("client_cpu_s measured");
    let cores = std::thread::available_parallelism().unwrap().get() as f64;
    let wall = step["runtime_ms"].as_f64().unwrap() / 1000.0;
    assert!(
        cpu > 0.0 && cpu <= wall * cores + 0.05,
        "client CPU {cpu} s in {wall} s on {cores} cores"
    );
    let step_dir = r.run_dir().join(step["dir"].as_str().unwrap());
    for f in [
        "summary.json",
        "timeseries.jsonl.gz",
        "histograms.json",
        "latency.hlog.gz",
        "ycsb.txt",
    ] {
        assert!(step_dir.join(f).is_file(), "missing {f}");
    }
    let hlog = String::from_utf8(
        iodig_model::series::read_hlog(&step_dir, "latency.hlog")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert!(hlog.contains("#[StartTime: "), "{hlog}");
    assert!(hlog.lines().any(|l| l.starts_with("Tag=READ,")), "{hlog}");
    let series: Vec<serde_json::Value> =
        serde_json::from_value(read_json(&step_dir.join("timeseries.json"))).unwrap();
    let total: u64 = series
        .iter()
        .map(|s| s["operations"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 3000);
}

fn run_keys(seed: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let r = IodigArgs::run_basic("workloads/workloadb", dir.path())
        .props(&["operationcount=300", "basicdb.verbose=true"])
        .args(&["--seed", seed])
        .threads("1")
        .warmup("0s")
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    r.stdout
        .lines()
        .filter(|l| l.starts_with("READ ") || l.starts_with("UPDATE "))
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn same_seed_repeats_the_op_and_key_sequence() {
    let a = run_keys("7");
    assert_eq!(a.len(), 300);
    assert_eq!(a, run_keys("7"));
    assert_ne!(a, run_keys("8"));
}

#[test]
fn ten_billion_records_are_accepted_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let r = IodigArgs::run_basic("workloads/workloadc", dir.path())
        .props(&[
            "recordcount=10000000000",
            "operationcount=2000",
            "requestdistribution=uniform",
            "insertorder=ordered",
            "basicdb.verbose=true",
        ])
        .threads("1")
        .warmup("0s")
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let max = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("READ usertable user"))
        .map(|l| l.split(' ').next().unwrap().parse::<u64>().unwrap())
        .max()
        .unwrap();
    assert!(max > 1 << 32, "keys stay below 2^32: max {max}");
}

#[test]
fn target_rate_is_held_and_intended_latency_reported() {
    let dir = tempfile::tempdir().unwrap();
    let r = IodigArgs::run_basic("workloads/workloadc", dir.path())
        .p("recordcount=1000")
        .target("2000")
        .threads("4")
        .duration("3s")
        .warmup("0s")
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let parsed = parse_ycsb(&r.stdout);
    let tput = ycsb_value(&parsed, "OVERALL", "Throughput(ops/sec)").unwrap();
    assert!((tput - 2000.0).abs() < 200.0, "throughput {tput}");
    assert!(ycsb_value(&parsed, "Intended-READ", "Operations").is_some());
}

#[test]
fn workload_f_records_read_modify_write_like_ycsb() {
    let dir = tempfile::tempdir().unwrap();
    let r = IodigArgs::run_basic("workloads/workloadf", dir.path())
        .p("operationcount=4000")
        .threads("2")
        .warmup("0s")
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let p = parse_ycsb(&r.stdout);
    let read = ycsb_value(&p, "READ", "Operations").unwrap();
    let rmw = ycsb_value(&p, "READ-MODIFY-WRITE", "Operations").unwrap();
    let update = ycsb_value(&p, "UPDATE", "Operations").unwrap();
    // Every op reads; half are read-modify-writes whose update is also counted under UPDATE.
    assert_eq!(read, 4000.0);
    assert_eq!(update, rmw);
    assert!((rmw / 4000.0 - 0.5).abs() < 0.05, "{rmw}");
    assert!(ycsb_value(&p, "OVERALL", "Throughput(ops/sec)").is_some());
}

#[test]
fn ctrl_c_ends_the_step_and_keeps_what_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let child = IodigArgs::run_basic("workloads/workloada", dir.path())
        .threads("2,4")
        .duration("60s")
        .warmup("0s")
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let started = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed().as_secs() < 10, "did not stop promptly");
    assert_eq!(out.status.code(), Some(130));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let run_dir = stderr
        .lines()
        .find_map(|l| l.strip_prefix("results: "))
        .expect("results line");
    let run = read_json(&std::path::Path::new(run_dir.trim()).join("run.json"));
    assert_eq!(run["status"], "interrupted");
    assert_eq!(
        run["steps"].as_array().unwrap().len(),
        1,
        "the second step must not start"
    );
    assert_eq!(run["steps"][0]["interrupted"], true);
    assert!(run["steps"][0]["operations"].as_u64().unwrap() > 0);
}

#[test]
fn clients_split_the_key_space_and_merge_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let load = |client: &[&str]| {
        let r = basic_load(out).p("recordcount=100").args(client).output();
        insert_keys(&r.stdout)
    };
    let whole = load(&[]);
    let one = load(&["--client", "1/2"]);
    let two = load(&["--client", "2/2"]);
    assert_eq!([one.clone(), two].concat(), whole);
    assert_eq!(one.len(), 50);

    let client = |c: &str| {
        // Held to a rate so each client's window lasts a measurable 0.25 s: unpaced, 5000
        // no-op operations can end within the millisecond they started in, and two windows of
        // 0 ms cannot be told apart from two that ran together.
        let r = IodigArgs::run_basic("workloads/workloadc", out)
            .props(&["recordcount=1000", "operationcount=5000"])
            .args(&["--client", c, "--target", "20000"])
            .threads("2")
            .warmup("0s")
            .output();
        assert_eq!(r.code(), 0, "{}", r.stderr);
        r.run_dir()
    };
    let (a, b) = (client("1/2"), client("2/2"));
    let merged_out = dir.path().join("merged");
    let m = run_iodig(&[
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--out",
        merged_out.to_str().unwrap(),
    ]);
    assert_eq!(m.code(), 0, "{}", m.stderr);
    let run = m.run_json();
    // The two clients ran one after the other here: the merge must say so.
    assert!(
        m.stderr.contains("ran together for only 0 %"),
        "{}",
        m.stderr
    );
    assert!(
        run["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("overstates")),
        "{}",
        run["notes"]
    );
    let step = &run["steps"][0];
    assert_eq!(step["operations"], 10_000);
    assert_eq!(step["series"]["READ"]["count"], 10_000);
    assert_eq!(step["returns"]["READ"]["OK"], 10_000);
    let series: Vec<serde_json::Value> = serde_json::from_value(read_json(
        &m.run_dir()
            .join(step["dir"].as_str().unwrap())
            .join("timeseries.json"),
    ))
    .unwrap();
    assert_eq!(
        series
            .iter()
            .map(|s| s["operations"].as_u64().unwrap())
            .sum::<u64>(),
        10_000
    );
    let per_second_reads: u64 = series
        .iter()
        .map(|s| s["series"]["READ"]["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        per_second_reads, 10_000,
        "per-second histograms from both interval logs"
    );
    // The logs by start second are merged too: every read of both clients, once, in the same
    // seconds as in the clients' own logs.
    let starts = |dir: &std::path::Path| {
        let run = iodig_report::load_run(dir).unwrap();
        let step = run.steps.iter().find(|s| !s.is_load()).unwrap();
        starts_per_second(step, "READ")
            .unwrap_or_else(|| panic!("{}: the log by start", dir.display()))
    };
    let mut expected = starts(&a);
    for (sec, n) in starts(&b) {
        *expected.entry(sec).or_default() += n;
    }
    let merged_starts = starts(&m.run_dir());
    assert_eq!(merged_starts.values().sum::<u64>(), 10_000);
    assert_eq!(merged_starts, expected, "second by second");
}

#[test]
fn experiment_file_runs_workloads_threads_and_repetitions_into_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("exp.toml");
    std::fs::write(
        &spec,
        r#"db = "basic"
repetitions = 2
warmup = "0s"
trace = "off"

[properties]
recordcount = 1000
operationcount = 500

[[workload]]
file = "workloads/workloada"
threads = [1, 2]

[[workload]]
file = "workloadc"
threads = [2]
"#,
    )
    .unwrap();
    let r = IodigArgs::run().experiment(&spec).out(dir.path()).output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let steps = run["steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["dir"].as_str().unwrap()).collect();
    assert_eq!(steps.len(), 6, "2 repetitions × (2 + 1) steps: {names:?}");
    assert!(
        names[0].ends_with("workloada-t1-r1") && names[5].ends_with("workloadc-t2-r2"),
        "{names:?}"
    );
    assert!(steps.iter().all(|s| s["operations"] == 500));
    assert_eq!(steps[2]["workload"], "workloadc");
    assert!(r.run_dir().join("report.html").is_file());
    // Compare the run with itself: no regression, exit 0.
    let c = run_iodig(&[
        "compare",
        r.run_dir().to_str().unwrap(),
        r.run_dir().to_str().unwrap(),
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(c.code(), 0, "{}", c.stderr);
    assert!(dir.path().join("compare.html").is_file());
}

#[test]
fn operation_counts_hold_with_more_threads_than_operations_and_a_warmup() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    // Threads whose share of the count is zero do nothing (they used to run without limit).
    let load = IodigArgs::load()
        .db("basic")
        .threads("4")
        .trace("off")
        .out(out)
        .props(&["basicdb.verbose=true", "recordcount=3"])
        .output();
    assert_eq!(load.code(), 0, "{}", load.stderr);
    assert_eq!(insert_keys(&load.stdout).len(), 3);
    // A warm-up does not eat the operation count: two operations are measured after it.
    let r = basic_run(out)
        .props(&["recordcount=3", "operationcount=2"])
        .threads("4")
        .warmup("1s")
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let step = &run["steps"][0];
    assert_eq!(step["operations"], 2, "{step}");
    let ops: u64 = ["READ", "UPDATE"]
        .iter()
        .filter_map(|op| step["series"][op]["count"].as_u64())
        .sum();
    assert_eq!(ops, 2, "{step}");
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
}

#[test]
fn threadcount_and_target_properties_act_like_their_flags() {
    let dir = tempfile::tempdir().unwrap();
    let r = basic_run(dir.path())
        .props(&["recordcount=100", "threadcount=3", "target=300"])
        .duration("2s")
        .warmup("0s")
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "threadcount=3 replaces the default sweep");
    assert_eq!(steps[0]["threads"], 3);
    assert_eq!(steps[0]["target_ops_per_sec"], 300.0);
    let rate = steps[0]["throughput_ops_per_sec"].as_f64().unwrap();
    assert!((rate - 300.0).abs() < 15.0, "held near the target: {rate}");
}

#[test]
fn flags_win_over_an_experiment_files_settings() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("exp.toml");
    std::fs::write(
        &spec,
        "db = \"basic\"\nduration = \"60s\"\nwarmup = \"5s\"\ntrace = \"off\"\n\
         [properties]\nrecordcount = 100\n[[workload]]\nfile = \"workloadc\"\nthreads = [2, 4]\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let r = IodigArgs::run()
        .experiment(&spec)
        .duration("1s")
        .warmup("0s")
        .threads("1")
        .out(dir.path())
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "--threads 1 replaces [2, 4]");
    assert_eq!(steps[0]["threads"], 1);
    let ms = steps[0]["runtime_ms"].as_u64().unwrap();
    assert!((900..2000).contains(&ms), "--duration 1s, not 60s: {ms} ms");
    assert!(
        started.elapsed().as_secs() < 30,
        "no 5 s warm-up, no 60 s step"
    );
}

#[test]
fn a_load_inside_run_keeps_no_intended_latency_of_the_runs_target() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let r = IodigArgs::run()
        .p("recordcount=300")
        .target("400")
        .threads("2")
        .duration("1s")
        .warmup("0s")
        .trace("off")
        .out(out)
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let p = parse_ycsb(&r.stdout);
    assert_eq!(ycsb_value(&p, "INSERT", "Operations"), Some(300.0));
    assert_eq!(
        ycsb_value(&p, "Intended-INSERT", "Operations"),
        None,
        "{}",
        r.stdout
    );
    assert!(ycsb_value(&p, "Intended-READ", "Operations").unwrap() > 0.0);
}

/// The phases of a run's steps, in order (`load`, `run`, …).
fn phases(r: &Run) -> Vec<String> {
    r.run_json()["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["phase"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn rocksdb_run_reuses_its_load_but_not_one_grown_by_inserts_or_with_another_layout() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let run = |workload: &str, extra: &[&str]| {
        let r = IodigArgs::run()
            .workload(workload)
            .props(&["recordcount=400", "operationcount=300"])
            .threads("1")
            .warmup("0s")
            .trace("off")
            .out(out)
            .args(extra)
            .output();
        assert_eq!(r.code(), 0, "{}", r.stderr);
        r
    };
    let first = run("workloads/workloadc", &[]);
    assert_eq!(phases(&first), ["load", "run"]);
    let again = run("workloads/workloadc", &[]);
    assert_eq!(phases(&again), ["run"], "{}", again.stderr);
    assert!(
        again.stderr.contains("already holds this dataset"),
        "{}",
        again.stderr
    );
    // Workload D inserts 5% of its operations: the dataset is no longer what the load made.
    let grow = run("workloads/workloadd", &[]);
    assert_eq!(phases(&grow), ["run"], "{}", grow.stderr);
    let after = run("workloads/workloadc", &[]);
    assert_eq!(phases(&after), ["load", "run"], "{}", after.stderr);
    assert!(
        after
            .stderr
            .contains("holds this dataset grown by the inserts of step workloadd-t1 of an earlier run; wiping it and loading"),
        "{}",
        after.stderr
    );
    // Another compression is another layout on disk.
    let plain = run("workloads/workloadc", &["-p", "rocksdb.compression=none"]);
    assert_eq!(phases(&plain), ["load", "run"], "{}", plain.stderr);
    assert!(
        plain.stderr.contains("holds another dataset"),
        "{}",
        plain.stderr
    );
}
