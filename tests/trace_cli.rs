//! The tracer through the real binary, as root on the real kernel: `iodig run --trace ebpf`
//! stores the trace, system samples and RocksDB events with each step; `iodig trace` alone; no
//! BPF program stays attached after iodig exits, even by kill -9.

mod common;

use common::*;
use std::time::Duration;

/// Tests here look at the kernel's global list of BPF programs: one at a time.
static KERNEL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    KERNEL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn bpf_programs() -> String {
    let out = std::process::Command::new("bpftool")
        .args(["prog", "show"])
        .output()
        .expect("bpftool is installed by scripts/setup.sh");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Workload A's updates on RocksDB through a 1 MiB memtable, uniform keys over 20,000
/// records, 4 threads: a flush every few hundred milliseconds and compactions of their L0 files
/// inside every step.
fn flushing_rocksdb() -> IodigArgs {
    IodigArgs::run()
        .workload("workloads/workloada")
        .props(&[
            "recordcount=20000",
            "requestdistribution=uniform",
            "rocksdb.writebuffersize=1M",
        ])
        .threads("4")
}

#[test]
fn run_stores_trace_sys_and_db_events_with_each_step() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    // Writes with a tiny memtable so RocksDB flushes during the step.
    let r = flushing_rocksdb()
        .args(&["--load-threads", "4"])
        .duration("3s")
        .warmup("0s")
        .trace("ebpf")
        .out(out)
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "load + one run step");
    let device = run["environment"]["storage"]["device"]
        .as_str()
        .expect("data dir device resolved")
        .to_string();
    for step in steps {
        assert_eq!(step["trace_mode"], "ebpf");
        let step_dir = r.run_dir().join(step["dir"].as_str().unwrap());
        let trace = read_json(&step_dir.join("trace.json"));
        assert_eq!(trace["mode"], "ebpf");
        let text = trace.to_string();
        assert!(
            text.contains(&device),
            "trace does not cover the data device {device}"
        );
        let sys = read_json(&step_dir.join("sys.json"));
        assert!(!sys["samples"].as_array().unwrap().is_empty());
        assert!(step_dir.join("db-events.jsonl.gz").is_file());
    }
    // The run step reads from the device (direct reads, small block cache): the tracer saw reads.
    let run_step = r.run_dir().join(steps[1]["dir"].as_str().unwrap());
    let trace = read_json(&run_step.join("trace.json"));
    let devices = trace["devices"].as_array().unwrap();
    let dev = devices
        .iter()
        .find(|d| d.to_string().contains(&device))
        .unwrap();
    let reads = dev["ops"]["read"]["ios"].as_u64().unwrap_or(0);
    assert!(reads > 0, "no reads traced on {device}: {dev}");
    // The load wrote 20k records through a 1 MiB memtable: RocksDB logged flushes.
    let load_events: Vec<serde_json::Value> = serde_json::from_value(read_json(
        &r.run_dir()
            .join(steps[0]["dir"].as_str().unwrap())
            .join("db-events.json"),
    ))
    .unwrap();
    assert!(
        load_events.iter().any(|e| e["kind"] == "flush"),
        "no flush events: {load_events:?}"
    );
}

#[test]
fn run_events_writes_every_traced_io_of_each_step_beside_its_trace() {
    let _serial = serial();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = dir.path().to_str().unwrap();
    let r = IodigArgs::run()
        .workload("workloads/workloada")
        .props(&["recordcount=20000", "rocksdb.writebuffersize=1M"])
        .threads("2")
        .duration("2s")
        .warmup("0s")
        .trace("ebpf")
        .arg("--events")
        .out(out)
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "load + one run step");
    for step in steps {
        let step_dir = r.run_dir().join(step["dir"].as_str().unwrap());
        let trace = read_json(&step_dir.join("trace.json"));
        assert_eq!(trace["events_file"], "io-events.csv", "{step}");
        assert_eq!(trace["self_check"]["lost_events"], 0);
        let csv = std::fs::read_to_string(step_dir.join("io-events.csv")).unwrap();
        let mut lines = csv.lines();
        assert_eq!(
            lines.next(),
            Some("unix_ns,device,op,cmd_flags,sector,bytes,device_ns,qd")
        );
        // One line per IO the tracer counted at its completion (those the kernel skipped the
        // completion program for are counted when their request comes back, without an
        // event), and the window's IOs only.
        let ios: u64 = trace["devices"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|d| d["ops"].as_object().unwrap().values())
            .map(|o| o["ios"].as_u64().unwrap())
            .sum();
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        assert!(ios > 0, "{step}");
        let unseen = trace["self_check"]["completions_unseen"].as_u64().unwrap();
        assert_eq!(rows.len() as u64, ios - unseen, "{step}");
        // The window's edges are stamped just after attach and before detach: within a ms.
        let (from, to) = (
            (trace["start_unix_ms"].as_u64().unwrap() - 1) * 1_000_000,
            (trace["end_unix_ms"].as_u64().unwrap() + 1) * 1_000_000,
        );
        for row in &rows {
            let t: u64 = row[0].parse().unwrap();
            assert!(from <= t && t <= to, "{row:?} outside {from}..{to}");
        }
    }
    let leftovers: Vec<_> = std::fs::read_dir(r.run_dir().join("steps"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    report_counts_every_io_by_size(&r);

    // Without a tracer there is nothing to write: said before anything starts.
    let off = IodigArgs::run()
        .db("basic")
        .trace("off")
        .arg("--events")
        .out(out)
        .output();
    assert_eq!(off.code(), 2, "{}", off.stderr);
    assert!(
        off.stderr.contains("--events") && off.stderr.contains("--trace"),
        "{}",
        off.stderr
    );
}

/// The report's "Every IO by size" tables, read back, hold each stream's data IOs exactly (per
/// op, over all steps), and the per-IO scatter and finding are there.
fn report_counts_every_io_by_size(r: &Run) {
    let mut in_csv = std::collections::BTreeMap::<String, u64>::new();
    for step in r.run_json()["steps"].as_array().unwrap() {
        let csv = std::fs::read_to_string(
            r.run_dir()
                .join(step["dir"].as_str().unwrap())
                .join("io-events.csv"),
        )
        .unwrap();
        for row in csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
        {
            if row[2] != "flush" && row[5] != "0" {
                *in_csv.entry(row[2].to_string()).or_default() += 1;
            }
        }
    }
    let md = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    let mut in_report = std::collections::BTreeMap::<String, u64>::new();
    for section in md.split("### Every IO by size (io-events.csv)").skip(1) {
        let table = section
            .split("\n\n")
            .find(|b| b.contains("| op |"))
            .unwrap();
        for row in table.lines().skip(2) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let ios: u64 = cells[3].replace(',', "").parse().unwrap();
            *in_report.entry(cells[1].to_string()).or_default() += ios;
        }
    }
    assert!(!in_csv.is_empty());
    assert_eq!(
        in_report, in_csv,
        "the report's size tables against the streams"
    );
    let html = std::fs::read_to_string(r.run_dir().join("report.html")).unwrap();
    assert!(
        html.contains("Device latency of single writes by size"),
        "the per-IO scatter"
    );
    assert!(
        md.contains("Every write by size (io-events.csv): the slowest took"),
        "the per-IO finding"
    );
}

#[test]
fn trace_alone_prints_the_summary_and_json() {
    let _serial = serial();
    let r = run_iodig(&["trace", "--duration", "1s", "--json"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).expect("one JSON document");
    assert_eq!(doc["mode"], "ebpf");
    let r = run_iodig(&["trace", "--", "sh", "-c", "exit 7"]);
    assert_eq!(
        r.code(),
        7,
        "exit code of COMMAND passes through: {}",
        r.stderr
    );
}

/// `--pid` names what the process issued in the plain output: a shell that becomes dd (same
/// pid) overwrites 20 × 512 KiB of a file with O_DIRECT while the tracer is attached (it waits
/// for a file that the traced command makes, which iodig starts only after attaching, and the
/// command lasts until dd has exited).
#[test]
fn trace_names_what_a_watched_pid_issued() {
    let _serial = serial();
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let file = tmp.path().join("watched.dat");
    let go = tmp.path().join("go");
    // Nothing but dd's writes is the process's to issue: the file is written and synced
    // beforehand, so that dd overwrites blocks it already has (writing a new file, dd reads the
    // file system's allocation metadata itself), and dd has run once, so that its program and
    // libraries are in the page cache (after exec, their reads are the process's too; CI saw
    // 2–3 such reads).
    std::fs::write(&file, vec![1u8; 10 << 20]).unwrap();
    std::fs::File::open(&file).unwrap().sync_all().unwrap();
    let warm = std::process::Command::new("dd")
        .args(["if=/dev/zero", "of=/dev/null", "count=1", "status=none"])
        .status();
    assert!(warm.unwrap().success());
    let mut writer = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while [ ! -e {} ]; do sleep 0.05; done; exec dd if=/dev/zero of={} bs=512k count=20 oflag=direct conv=notrunc status=none",
            go.display(),
            file.display()
        ))
        .spawn()
        .unwrap();
    let pid = writer.id().to_string();
    // The traced command lets dd start, then lasts until the test has seen dd exit.
    let done = tmp.path().join("done");
    let signal = format!(
        "touch {}; while [ ! -e {} ]; do sleep 0.05; done",
        go.display(),
        done.display()
    );
    let tracer = {
        let pid = pid.clone();
        std::thread::spawn(move || run_iodig(&["trace", "--pid", &pid, "--", "sh", "-c", &signal]))
    };
    assert!(writer.wait().unwrap().success());
    std::fs::write(&done, "").unwrap();
    let r = tracer.join().unwrap();
    let gone = run_iodig(&["trace", "--duration", "1s", "--pid", &pid]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains(&format!("watched:\n  --pid {pid}: pid {pid} (sh) — ")),
        "the plain output names the watched process:\n{}",
        r.stdout
    );
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("  --pid {pid}:")))
        .unwrap();
    assert!(
        line.ends_with(" IOs, 10.00 MiB"),
        "all of dd's writes: {line}"
    );
    // Once it has exited, its pid is refused before tracing, naming the flag.
    assert_eq!(
        gone.code(),
        2,
        "a pid gone before the trace: {}",
        gone.stderr
    );
    assert!(
        gone.stderr
            .contains(&format!("--pid {pid}: no such process")),
        "{}",
        gone.stderr
    );
}

#[test]
fn unknown_device_lists_the_devices_present() {
    let _serial = serial();
    let r = run_iodig(&["trace", "--device", "nosuchdisk", "--duration", "1s"]);
    assert_eq!(r.code(), 2, "{}", r.stderr);
    assert!(r.stderr.contains("nosuchdisk"), "{}", r.stderr);
    let any_disk = std::fs::read_dir("/sys/block")
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();
    assert!(
        r.stderr.contains(any_disk.to_str().unwrap()),
        "{}",
        r.stderr
    );
}

#[test]
fn kill_9_leaves_no_program_attached() {
    let _serial = serial();
    let mut child = iodig()
        .args(["trace", "--duration", "60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !bpf_programs().contains("rq_issue") {
        assert!(
            std::time::Instant::now() < deadline,
            "tracer never attached"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The kernel frees links and programs when the last fd closes; give it a moment.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while bpf_programs().contains("rq_issue") {
        assert!(
            std::time::Instant::now() < deadline,
            "programs still attached after kill -9:\n{}",
            bpf_programs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn rocksdb_run_attributes_flush_and_compaction_io_to_rocksdbs_own_threads() {
    let _serial = serial();
    // On the VM's disk: a tmpfs /tmp has no block device underneath.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = dir.path().to_str().unwrap();
    // Updates through a 1 MiB memtable: a flush every few hundred milliseconds and
    // compactions of their L0 files inside the measured (and traced) step.
    let r = flushing_rocksdb()
        .duration("4s")
        .warmup("0s")
        .trace("ebpf")
        .out(out)
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let step = &run["steps"][1];
    assert_eq!(step["phase"], "run");
    let trace = read_json(
        &r.run_dir()
            .join(step["dir"].as_str().unwrap())
            .join("trace.json"),
    );
    let attr = &trace["self_check"]["attribution"];
    assert_eq!(
        trace["self_check"]["attribution_match"], true,
        "{}",
        attr["check"]
    );
    let written = |class: &str| -> u64 {
        attr["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["class"] == class && r["op"] == "write")
            .map(|r| r["bytes"].as_u64().unwrap())
            .sum()
    };
    assert!(written("rocksdb.flush") > 1 << 20, "flushes: {attr}");
    assert!(written("rocksdb.compaction") > 0, "compactions: {attr}");
    // The flushes are RocksDB's high-priority pool: every flush row names its thread.
    for row in attr["rows"].as_array().unwrap() {
        if row["class"] == "rocksdb.flush" {
            assert!(
                row["thread"].as_str().unwrap().starts_with("rocksdb:high"),
                "{row}"
            );
        }
    }
    let report = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    assert!(report.contains("Who issued the IO"), "{report}");
    assert!(report.contains("rocksdb.flush"), "{report}");
    assert!(
        report.contains("The classes add up exactly to the device totals"),
        "{report}"
    );
}

#[test]
fn rocksdb_run_splits_client_and_query_reads_by_flush_and_compaction_io() {
    use iodig_report::analysis::background::second_of;
    let _serial = serial();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = dir.path().to_str().unwrap();
    // 1,500 ops/s of which half are updates fill a 1 MiB memtable every two seconds or so
    // (1.75 s measured at 2,000 ops/s): seconds with a flush (and every fourth one a
    // compaction) alternate with seconds without. Direct
    // reads through a 1 MiB block cache put the queries' reads on the disk.
    let r = flushing_rocksdb()
        .p("rocksdb.blockcachesize=1M")
        .target("1500")
        .duration("8s")
        .warmup("0s")
        .trace("ebpf")
        .out(out)
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let step_dir = r
        .run_dir()
        .join(r.run_json()["steps"][1]["dir"].as_str().unwrap());
    let trace = read_json(&step_dir.join("trace.json"));
    let attr = &trace["self_check"]["attribution"];
    let rows = attr["rows"].as_array().unwrap();
    let splits = attr["splits"].as_array().unwrap();

    // The kernel splits every query read it timed, and only those: both sides add up to the
    // class's reads (less any issue that met a busy state entry and went untimed, and any
    // read counted when its request came back after the kernel skipped its completion).
    let query_reads: u64 = rows
        .iter()
        .filter(|r| r["class"] == "rocksdb.read" && r["op"] == "read")
        .map(|r| r["ios"].as_u64().unwrap())
        .sum();
    let split = splits
        .iter()
        .find(|s| s["class"] == "rocksdb.read" && s["op"] == "read")
        .unwrap_or_else(|| panic!("no split for the query reads: {splits:?}"));
    let side = |k: &str, f: &str| split[k][f].as_u64().unwrap();
    let (with, without) = (
        side("with_background", "ios"),
        side("without_background", "ios"),
    );
    let untimed = trace["self_check"]["state_collisions"].as_u64().unwrap()
        + trace["self_check"]["completions_unseen"].as_u64().unwrap();
    assert!(query_reads > 1000, "{query_reads} query reads");
    assert!(
        with + without <= query_reads && with + without + untimed >= query_reads,
        "split {with} + {without} against {query_reads} reads ({untimed} untimed)"
    );
    // Flushes and compactions ran beside 750 reads a second: some reads met them.
    assert!(
        with > 0,
        "no query read overlapped flush/compaction IO: {split}"
    );
    assert!(side("without_background", "device_ns_sum") > 0, "{split}");

    // The client's side: the report merges the per-second histograms of the log by start into
    // seconds with and without background IO. Recount both from other files: every READ of
    // timeseries.json starts in one second, and the busy seconds are those in which
    // trace.json's flush/compaction rows did IO.
    let covered: std::collections::BTreeSet<u64> = trace["devices"][0]["seconds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["unix_ms"].as_u64().unwrap())
        .collect();
    let background = ["rocksdb.flush", "rocksdb.compaction"];
    let busy: std::collections::BTreeSet<u64> = rows
        .iter()
        .filter(|r| background.contains(&r["class"].as_str().unwrap()))
        .flat_map(|r| r["seconds"].as_array().unwrap().iter())
        .filter(|s| s["ios"].as_u64().unwrap() > 0)
        .map(|s| s["unix_ms"].as_u64().unwrap())
        .collect();
    let samples = read_json(&step_dir.join("timeseries.json"));
    let reads_total: u64 = samples
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["series"]["READ"]["count"].as_u64().unwrap_or(0))
        .sum();
    let run = iodig_report::load_run(&r.run_dir()).unwrap();
    let report = iodig_report::analysis::analyse(&run);
    let b = report.steps[1]
        .background
        .as_ref()
        .expect("a background view of the run step");
    assert!(b.classes.iter().any(|c| c == "rocksdb.flush"), "{b:?}");
    let read = b.client.iter().find(|c| c.series == "READ").unwrap();
    assert!(read.by_start, "split by the second each read started in");
    // The step's first second is covered when the trace opened in it (it attaches at the
    // step's start, ms later); then every read is on one side.
    let step_start = run.steps[1].summary.started_unix_ms;
    if covered.contains(&(step_start / 1000 * 1000)) {
        assert_eq!(read.with.ops + read.without.ops, reads_total, "{read:?}");
    }
    let mut start_secs: [std::collections::BTreeSet<u64>; 2] = Default::default();
    let mut start_reads = [0u64; 2];
    run.steps[1]
        .for_each_client_start_second(
            |s| s == "READ",
            |start, end, _, h| {
                let second = second_of(start, end);
                if covered.contains(&second) {
                    let i = usize::from(busy.contains(&second));
                    start_secs[i].insert(second);
                    start_reads[i] += h.len();
                }
            },
        )
        .unwrap();
    assert_eq!(
        (read.with.ops, read.without.ops),
        (start_reads[1], start_reads[0])
    );
    assert_eq!(
        (read.with.seconds, read.without.seconds),
        (start_secs[1].len(), start_secs[0].len())
    );
    assert!(
        read.with.seconds > 0 && read.without.seconds > 0,
        "{read:?}"
    );
    assert!(read.with.p99_us >= read.with.p50_us && read.with.max_us >= read.with.p99_us);
    // The kernel's figures as the report shows them, and the depth the query reads held.
    let io = b.io.iter().find(|s| s.class == "rocksdb.read").unwrap();
    assert_eq!((io.with.ios, io.without.ios), (with, without));
    assert!(io.without.device_p99_ms > 0.0, "{io:?}");
    let depth = b.depth.iter().find(|d| d.class == "rocksdb.read").unwrap();
    assert!(depth.device > 0.0 && depth.peak > 0.0, "{depth:?}");

    let md = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    assert!(md.contains("Beside flush and compaction IO"), "{md}");
    let finding = md.contains("rocksdb.read reads queued");
    assert_eq!(
        finding,
        with >= 10 && without >= 10,
        "query-read finding present: {finding}, with {with} without {without}"
    );
    let client_finding = md.contains("Client READ ops that started in the");
    assert_eq!(
        client_finding,
        start_reads[0] >= 100 && start_reads[1] >= 100,
        "client finding present: {client_finding}, reads {start_reads:?}"
    );
}
