//! iodig keeps its results safe through the real binary: secrets never reach anything a run,
//! merge, compare or report writes or prints; SIGKILL at any moment leaves a run directory that
//! reports as killed with its finished steps intact, and the next run settles it; a full disk
//! names the path and keeps earlier steps; another schema version is named.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const SECRET: &str = "S3cr3t-XYZ";

/// Every file under `dir` (recursively) that contains `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if std::fs::read(&p)
                .map(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
                .unwrap_or(false)
            {
                hits.push(p);
            }
        }
    }
    hits
}

/// The run directories (holding run.json) under `out`, oldest first.
fn run_dirs(out: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("run.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn a_password_reaches_no_file_and_no_output_of_run_merge_compare_or_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out_s = out.to_str().unwrap();
    // The password three ways: on the command line, in a -P file, and in a password file.
    let props = dir.path().join("creds.properties");
    std::fs::write(
        &props,
        format!("cassandra.username=bob\ncassandra.password={SECRET}\n"),
    )
    .unwrap();
    let pw_file = dir.path().join("pw");
    std::fs::write(&pw_file, format!("{SECRET}\n")).unwrap();
    let mut outputs = Vec::new();
    let mut runs = Vec::new();
    for extra in [
        vec!["-p".to_string(), format!("cassandra.password={SECRET}")],
        vec!["-P".to_string(), props.display().to_string()],
        vec![
            "-p".to_string(),
            format!("cassandra.password.file={}", pw_file.display()),
        ],
    ] {
        let r = IodigArgs::run_basic("workloads/workloada", out_s)
            .p("operationcount=200")
            .threads("1")
            .args(&[&extra[0], &extra[1]])
            .output();
        assert_eq!(r.code(), 0, "{}", r.stderr);
        let run = r.run_json();
        let line = run["tool"]["command_line"].to_string();
        assert!(!line.contains(SECRET), "{line}");
        if extra[0] == "-p" && extra[1].starts_with("cassandra.password=") {
            assert!(line.contains("cassandra.password=***"), "{line}");
            assert_eq!(run["config"]["properties"]["cassandra.password"], "***");
        }
        runs.push(r.run_dir());
        outputs.push(r.stdout + &r.stderr);
    }
    // The environment variable is not recorded either.
    let mut env_run = IodigArgs::run_basic("workloads/workloada", out_s)
        .p("operationcount=200")
        .threads("1")
        .command();
    env_run.env("IODIG_CASSANDRA_PASSWORD", SECRET);
    let o = env_run.output().unwrap();
    assert!(o.status.success());
    outputs.push(
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
    );

    // Runs 0 and 2 ran the same steps (run 1's -P file names its workload otherwise).
    let [a, b, c] = [0, 1, 2].map(|i| runs[i].to_str().unwrap());
    let merge = run_iodig(&["merge", a, c, "--out", out_s]);
    assert_eq!(merge.code(), 0, "{}", merge.stderr);
    let compare = run_iodig(&["compare", a, b, c, "--out", out_s]);
    assert_eq!(compare.code(), 0, "{}", compare.stderr);
    let report = run_iodig(&["report", a]);
    assert_eq!(report.code(), 0, "{}", report.stderr);
    // A bad property next to the password: the error is about the bad one and keeps the secret.
    let bad = IodigArgs::run_basic("workloads/workloada", out_s)
        .p(format!("cassandra.password={SECRET}"))
        .p("recordcount=many")
        .output();
    assert_eq!(bad.code(), 2, "{}", bad.stderr);
    for r in [merge, compare, report, bad] {
        outputs.push(r.stdout + &r.stderr);
    }
    assert!(out.join("compare.md").is_file());
    for (i, o) in outputs.iter().enumerate() {
        assert!(!o.contains(SECRET), "output {i} shows the password:\n{o}");
    }
    let hits: Vec<PathBuf> = files_containing(&out, SECRET);
    assert!(hits.is_empty(), "the password is in {hits:?}");
}

#[test]
fn a_password_on_the_command_line_leaves_the_process_list_once_parsed() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = IodigArgs::run_basic("workloads/workloada", dir.path())
        .p("operationcount=0")
        .p(format!("cassandra.password={SECRET}"))
        .threads("1")
        .duration("2s")
        .warmup("0s")
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let cmdline = format!("/proc/{}/cmdline", child.id());
    let t = Instant::now();
    let mut seen = String::new();
    // Until iodig has parsed its arguments the kernel shows them as exec'd: wait for that.
    while t.elapsed() < Duration::from_secs(5) {
        seen = String::from_utf8_lossy(&std::fs::read(&cmdline).unwrap_or_default())
            .replace('\0', " ");
        if seen.contains("cassandra.password=*") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        seen.contains("cassandra.password=***") && !seen.contains(SECRET),
        "{seen}"
    );
    assert!(child.wait().unwrap().success());
    let run = run_dirs(dir.path()).pop().unwrap();
    let line = read_json(&run.join("run.json"))["tool"]["command_line"].to_string();
    assert!(line.contains("cassandra.password=***"), "{line}");
}

/// `iodig run --db rocksdb` of 20,000 records with 1-second steps, untraced, into `out`.
fn rocksdb_run(out: &str, threads: &str) -> IodigArgs {
    IodigArgs::run()
        .db("rocksdb")
        .p("recordcount=20000")
        .threads(threads)
        .duration("1s")
        .warmup("0s")
        .trace("off")
        .out(out)
}

/// `iodig run --db rocksdb` into `out`, killed with SIGKILL after `delay` (none: in its first
/// load, as soon as its run.json appears); returns whether the
/// kill came before the run ended on its own, and what it printed on stderr.
fn run_and_kill(out: &str, delay: Option<Duration>) -> (bool, String) {
    let mut child = rocksdb_run(out, "1,2")
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    // No delay: as soon as the run directory has its run.json, which is when the load starts.
    let due = |t: Instant| match delay {
        Some(d) => t.elapsed() >= d,
        None => !run_dirs(Path::new(out)).is_empty() || t.elapsed() > Duration::from_secs(10),
    };
    while !due(t) && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(5));
    }
    let killed = child.try_wait().unwrap().is_none();
    if killed {
        child.kill().unwrap(); // SIGKILL
    }
    let o = child.wait_with_output().unwrap();
    (killed, String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Every finished step's files are whole JSON.
fn check_finished_steps(run_dir: &Path) {
    let run = read_json(&run_dir.join("run.json"));
    for s in run["steps"].as_array().unwrap() {
        let step = run_dir.join(s["dir"].as_str().unwrap());
        for f in [
            "summary.json",
            "timeseries.json",
            "histograms.json",
            "db-events.json",
        ] {
            read_json(&step.join(f));
        }
        assert!(step.join("latency.hlog.gz").is_file() && step.join("ycsb.txt").is_file());
    }
}

#[test]
fn sigkill_at_any_moment_leaves_a_run_that_reports_as_killed_and_the_next_run_settles_it() {
    let dir = tempfile::Builder::new()
        .prefix("iodig-kill-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let out = dir.path().to_str().unwrap();
    let seed = kill_seed();
    let mut x = seed;
    let mut killed = Vec::new();
    // What every run printed: each settles the runs killed before it.
    let mut said = String::new();
    let mut killed_in_load = false;
    // The first run loads (a few hundred ms), later ones reuse the data unless a load was
    // killed; a run lasts about 3 s.
    for i in 0..5 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // The first kill falls into the first load, the others anywhere.
        let delay = (i > 0).then(|| Duration::from_millis(150 + x % 2600));
        let before = run_dirs(dir.path()).len();
        let (was_killed, stderr) = run_and_kill(out, delay);
        let dirs = run_dirs(dir.path());
        eprintln!(
            "kill {i} after {delay:?}: killed {was_killed}, run directories {}",
            dirs.len()
        );
        if dirs.len() == before {
            said.push_str(&stderr);
            // Killed before its run directory had a run.json: nothing to read.
            continue;
        }
        let run_dir = dirs.last().unwrap().clone();
        said.push_str(&stderr);
        check_finished_steps(&run_dir);
        let report = run_iodig(&["report", run_dir.to_str().unwrap()]);
        assert_eq!(report.code(), 0, "{}", report.stderr);
        let md = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
        let run = read_json(&run_dir.join("run.json"));
        let status = run["status"].clone();
        eprintln!(
            "  {status} with {} step(s) recorded",
            run["steps"].as_array().unwrap().len()
        );
        let steps = run["steps"].as_array().unwrap().len();
        killed_in_load |= was_killed
            && status == "running"
            && steps == 0
            && !stderr.contains("already holds this dataset");
        if was_killed && status == "running" {
            assert!(
                report.stdout.contains("The run was killed during step"),
                "{}",
                report.stdout
            );
            assert!(
                md.contains("(killed)") && md.contains("was killed during step"),
                "{md}"
            );
            killed.push(run_dir);
        }
    }
    // The next run into the same --out settles every killed run and says so.
    let next = rocksdb_run(out, "1").output();
    assert_eq!(next.code(), 0, "{}", next.stderr);
    said.push_str(&next.stderr);
    for line in said.lines().filter(|l| l.starts_with("iodig: ")) {
        eprintln!("{line}");
    }
    if killed_in_load {
        // RocksDB's half-loaded data is iodig's own: wiped and loaded again, not refused.
        assert!(
            said.contains("holds a load an earlier iodig did not finish"),
            "{said}"
        );
    }
    for k in &killed {
        assert!(
            said.contains(&format!("cleaned up after a killed run in {}", k.display())),
            "{k:?} not settled:\n{said}"
        );
        assert_eq!(read_json(&k.join("run.json"))["status"], "killed");
        check_finished_steps(k);
        assert!(files_named_tmp(k).is_empty(), "{:?}", files_named_tmp(k));
    }
}

fn files_named_tmp(dir: &Path) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if e.file_name().to_string_lossy().ends_with(".tmp") {
                hits.push(p);
            }
        }
    }
    hits
}

#[test]
fn a_full_disk_under_the_results_names_the_path_and_keeps_the_earlier_steps() {
    let dir = tempfile::Builder::new()
        .prefix("iodig-full-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    // A small tmpfs of its own: needs root; without it there is no full disk to test.
    let mounted = std::process::Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=8m",
            "tmpfs",
            mnt.to_str().unwrap(),
        ])
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs (needs root)");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let out = mnt.join("out");
    let child = IodigArgs::run_basic("workloads/workloada", &out)
        .p("operationcount=0")
        .threads("1,2,3,4,5,6,7,8")
        .duration("1s")
        .warmup("0s")
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the first step is in run.json, fill the file system.
    let t = Instant::now();
    let run_dir = loop {
        assert!(t.elapsed() < Duration::from_secs(20), "no step recorded");
        if let Some(d) = std::fs::read_dir(&out).ok().and_then(|rd| {
            rd.flatten().map(|e| e.path()).find(|p| {
                std::fs::read(p.join("run.json"))
                    .ok()
                    .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                    .is_some_and(|v| v["steps"].as_array().is_some_and(|s| !s.is_empty()))
            })
        }) {
            break d;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let filler = mnt.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 << 10];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
    }
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the file system is full"), "{stderr}");
    assert!(stderr.contains(&run_dir.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("could not be recorded") && stderr.contains("intact"),
        "{stderr}"
    );
    // run.json is whole, and the steps it lists are.
    let run = read_json(&run_dir.join("run.json"));
    let steps = run["steps"].as_array().unwrap().len();
    assert!(steps >= 1, "{run}");
    check_finished_steps(&run_dir);
    std::fs::remove_file(&filler).unwrap();
    let report = run_iodig(&["report", run_dir.to_str().unwrap()]);
    assert_eq!(report.code(), 0, "{}", report.stderr);
    assert!(
        report.stdout.contains(&format!("during step {steps}")),
        "{}",
        report.stdout
    );
}

#[test]
fn a_run_directory_of_another_schema_version_names_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let r = IodigArgs::run_basic("workloads/workloada", out)
        .p("operationcount=100")
        .threads("1")
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run_dir = r.run_dir();
    let path = run_dir.join("run.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replacen(
            &format!("\"schema_version\": {}", iodig_model::SCHEMA_VERSION),
            "\"schema_version\": 9",
            1,
        ),
    )
    .unwrap();
    let d = run_dir.to_str().unwrap();
    for args in [
        vec!["report", d],
        vec!["merge", d, d, "--out", out],
        vec!["compare", d, d, "--out", out],
    ] {
        let r = run_iodig(&args);
        assert_eq!(r.code(), 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("schema version 9") && r.stderr.contains("reads schema versions 1–2"),
            "{args:?}: {}",
            r.stderr
        );
    }
}

/// `setpriv` as user nobody with exactly `caps` (a comma list such as `+bpf,+perfmon`; empty:
/// none): every other capability is dropped from the bounding set too.
fn as_nobody_with(caps: &str) -> std::process::Command {
    let mut c = std::process::Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    c.arg(format!(
        "--bounding-set=-all{}",
        if caps.is_empty() {
            String::new()
        } else {
            format!(",{caps}")
        }
    ));
    if !caps.is_empty() {
        c.arg(format!("--inh-caps={caps}"));
        c.arg(format!("--ambient-caps={caps}"));
    }
    c.current_dir("/").env("CI", "1");
    c
}

#[test]
fn the_tracer_runs_with_cap_bpf_and_cap_perfmon_alone() {
    // Needs root to drop from, setpriv, and a kernel where eBPF tracing works at all.
    let root_trace = iodig()
        .args(["trace", "--mode", "ebpf", "--duration", "1s", "--json"])
        .output();
    let usable = std::process::Command::new("setpriv")
        .arg("--help")
        .output()
        .is_ok()
        && root_trace.is_ok_and(|o| o.status.success());
    if !usable {
        eprintln!("skipped: needs root, setpriv and a kernel with eBPF tracing");
        return;
    }
    let exe = env!("CARGO_BIN_EXE_iodig");
    // The capabilities the process really has: CAP_BPF (39) and CAP_PERFMON (38), nothing else.
    let status = as_nobody_with("+bpf,+perfmon")
        .args(["cat", "/proc/self/status"])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(
        u64::from_str_radix(&eff, 16).unwrap(),
        (1 << 38) | (1 << 39),
        "{status}"
    );

    let o = as_nobody_with("+bpf,+perfmon")
        .args([exe, "trace", "--mode", "ebpf", "--duration", "1s", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["mode"], "ebpf", "{doc}");
    assert_eq!(doc["self_check"]["lost_events"], 0);

    // A whole run, traced, as nobody with the two capabilities.
    let dir = tempfile::Builder::new()
        .prefix("iodig-caps-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let mut perms = std::fs::metadata(dir.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o777);
    std::fs::set_permissions(dir.path(), perms).unwrap();
    let workload = std::fs::canonicalize("workloads/workloada").unwrap();
    let run = IodigArgs::run()
        .db("basic")
        .workload(&workload)
        .p("operationcount=0")
        .threads("1")
        .duration("1s")
        .warmup("0s")
        .trace("ebpf")
        .out(dir.path());
    let o = as_nobody_with("+bpf,+perfmon")
        .arg(exe)
        .args(run.list())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let run = run_dirs(dir.path()).pop().expect("a run directory");
    assert_eq!(
        read_json(&run.join("run.json"))["steps"][0]["trace_mode"],
        "ebpf"
    );

    // One of the two is not enough: --mode ebpf is refused with exit 3, naming both.
    for caps in ["+bpf", "+perfmon", ""] {
        let o = as_nobody_with(caps)
            .args([exe, "trace", "--mode", "ebpf", "--duration", "1s"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "caps {caps:?}: {stderr}");
        assert!(stderr.contains("CAP_BPF + CAP_PERFMON"), "{stderr}");
    }
}
