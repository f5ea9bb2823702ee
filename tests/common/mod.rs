//! Helpers shared by the integration tests: run the real `iodig` binary and read what it wrote.

#![allow(dead_code)]

pub mod agents;
pub mod args;
pub mod faultydisk;
pub mod findings;
pub mod loopfs;
pub mod screenshot;
pub mod sshd;

/// Takes every CPU for `secs` seconds: a real-time spinner pinned to each of CPUs 0 and 1
/// (`chrt -f 10`). A fair-share spinner, even at nice -20, does not do it: the scheduler runs a
/// thread that slept (a worker between operations) first when it wakes. The kernel's real-time
/// throttling still leaves the others 5 % of each second, so the machine stays usable. The
/// spinners are ended before it returns.
pub fn starve_cpus(secs: u64) {
    let mut spinners: Vec<std::process::Child> = (0..2)
        .map(|cpu| {
            Command::new("taskset")
                .args(["-c", &cpu.to_string(), "chrt", "-f", "10", "sh", "-c"])
                .arg("while :; do :; done")
                .spawn()
                .expect("taskset and chrt run")
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_secs(secs));
    for s in &mut spinners {
        let _ = s.kill();
        let _ = s.wait();
    }
}

/// Floods the drive under `dir` for at most `secs` seconds: `writers` processes of `blocks`
/// direct 16 MiB writes each (`dd oflag=direct`, under `timeout`), each into a file
/// `flood<i>` of its own, which the caller removes. Returns the running processes.
pub fn flood_drive(dir: &Path, writers: usize, secs: u64, blocks: u32) -> Vec<std::process::Child> {
    (0..writers)
        .map(|i| {
            Command::new("timeout")
                .arg(secs.to_string())
                .args(["dd", "if=/dev/zero", "bs=16M", "oflag=direct"])
                .arg(format!("count={blocks}"))
                .arg(format!("of={}", dir.join(format!("flood{i}")).display()))
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("dd runs")
        })
        .collect()
}

pub use args::IodigArgs;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Run {
    pub out: Output,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// What a finished iodig process left: its status and its output as text.
    pub fn of(out: Output) -> Run {
        Run {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            out,
        }
    }

    pub fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }

    /// The run directory announced on stderr.
    pub fn run_dir(&self) -> PathBuf {
        let line = self
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix("results: "))
            .unwrap_or_else(|| {
                panic!("no results line in stderr:\n{}", self.stderr);
            });
        PathBuf::from(line.trim())
    }

    pub fn run_json(&self) -> serde_json::Value {
        read_json(&self.run_dir().join("run.json"))
    }
}

/// Stops the managed Cassandra nodes of a directory even when an assertion fails.
pub struct Nodes<'a>(pub &'a Path);

impl Drop for Nodes<'_> {
    fn drop(&mut self) {
        let _ = iodig()
            .args([
                "cassandra",
                "down",
                "--grace",
                "20",
                "--dir",
                self.0.to_str().unwrap(),
            ])
            .output();
    }
}

pub fn iodig() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_iodig"));
    c.env("CI", "1");
    c
}

/// Runs iodig with an argument list as written (for `run` and `load`, build it with
/// [`IodigArgs`]).
pub fn run_iodig(args: &[&str]) -> Run {
    IodigArgs::verbatim(args).output()
}

/// Reads a file of a run directory as JSON. A step's `trace.json`, `sys.json` and
/// `timeseries.json` are read with their series in place, whichever schema wrote them (schema 2
/// keeps the series in `*.jsonl.gz` beside them), so a test sees one shape.
pub fn read_json(path: &Path) -> serde_json::Value {
    fn with_series<T: serde::Serialize>(
        read: anyhow::Result<Option<T>>,
        path: &Path,
    ) -> serde_json::Value {
        let doc = read
            .unwrap_or_else(|e| panic!("cannot read {}: {e:#}", path.display()))
            .unwrap_or_else(|| panic!("cannot read {}: no such file", path.display()));
        serde_json::to_value(doc).unwrap()
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    match path.file_name().and_then(|n| n.to_str()) {
        Some("trace.json") => return with_series(iodig_model::series::read_trace(dir), path),
        Some("sys.json") => return with_series(iodig_model::series::read_sys(dir), path),
        Some("timeseries.json") => {
            return with_series(iodig_model::series::read_timeseries(dir), path)
        }
        Some("db-events.json") => return with_series(iodig_model::series::read_events(dir), path),
        _ => {}
    }
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

/// Parses YCSB's summary lines the way scripts written for YCSB do:
/// `[METRIC], Measurement, value`.
pub fn parse_ycsb(stdout: &str) -> Vec<(String, String, String)> {
    stdout
        .lines()
        .filter(|l| l.starts_with('['))
        .map(|l| {
            let close = l.find("], ").expect("metric closes with ], ");
            let metric = l[1..close].to_string();
            let rest = &l[close + 3..];
            let (name, value) = rest.rsplit_once(", ").expect("name, value");
            (metric, name.to_string(), value.to_string())
        })
        .collect()
}

pub fn ycsb_value(parsed: &[(String, String, String)], metric: &str, name: &str) -> Option<f64> {
    parsed
        .iter()
        .find(|(m, n, _)| m == metric && n == name)
        .map(|(_, _, v)| v.parse().unwrap())
}

/// Runs iodig and checks it exited 2 with a one-line error holding every needle.
pub fn expect_usage_error(args: &[&str], needles: &[&str]) -> Run {
    IodigArgs::verbatim(args).usage_error(needles)
}

/// A scratch `--out` directory and its path as a string.
pub fn out_dir() -> (tempfile::TempDir, String) {
    let d = tempfile::tempdir().unwrap();
    let s = d.path().to_str().unwrap().to_string();
    (d, s)
}

/// Operations of `series` per second they started in, from a step's log by start
/// (read by the report's own reader); `None` when the step has no such log.
pub fn starts_per_second(
    step: &iodig_report::data::StepData,
    series: &str,
) -> Option<std::collections::BTreeMap<u64, u64>> {
    let mut per_second = std::collections::BTreeMap::<u64, u64>::new();
    let found = step
        .for_each_client_start_second(
            |s| s == series,
            |start, end, _, h| {
                *per_second
                    .entry(iodig_report::analysis::background::second_of(start, end))
                    .or_default() += h.len();
            },
        )
        .unwrap();
    found.then_some(per_second)
}

/// Each fault event of a step (`db-events.json`): its start (unix ms) and detail, in order.
pub fn fault_events(step_dir: &Path) -> Vec<(u64, String)> {
    let events = read_json(&step_dir.join("db-events.json"));
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "fault")
        .map(|e| {
            (
                e["start_unix_ms"].as_u64().unwrap(),
                e["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The first measured (run-phase) step of a run.json.
pub fn run_step(run: &serde_json::Value) -> &serde_json::Value {
    run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["phase"] == "run")
        .unwrap()
}

/// Whether the tests run as root (the tracer, loop devices and sshd tests need it).
/// The seed of a test's random kill moments: `IODIG_KILL_SEED`, else one from the clock,
/// printed either way so a failing moment can be found again.
pub fn kill_seed() -> u64 {
    let seed = std::env::var("IODIG_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("kill moments from seed {seed} (IODIG_KILL_SEED to repeat)");
    seed
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Unix time in ms, as run.json and the step files stamp time.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Sleeps until `secs` seconds after `started` (at once when that is past): an injection at a
/// moment into a run started then.
pub fn sleep_until(started: std::time::Instant, secs: u64) {
    if let Some(left) = std::time::Duration::from_secs(secs).checked_sub(started.elapsed()) {
        std::thread::sleep(left);
    }
}
