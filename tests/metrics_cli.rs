//! `iodig run --metrics`: a real Prometheus (Debian's package, started here on 127.0.0.1)
//! scrapes a traced RocksDB run every second, and its answers agree with run.json and the
//! steps' trace.json; a port in use is a usage error naming the flag; on a terminal the live
//! bar shows each place's IO. The run serves its last figures `metrics.linger` seconds after
//! it ends, so the final scrapes see every counter's last value.

mod common;

use common::*;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The tracer's tests share the kernel's BPF program list: one traced run at a time here.
static KERNEL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    KERNEL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A port free now and below the kernel's ephemeral range, so no connection of this machine
/// (Prometheus scraping, curl) is given it as its own port before iodig binds it: an
/// ephemeral port chosen by binding to 0 was taken that way once, between choice and use.
fn free_port() -> u16 {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    // A different start per process and per call, so two test runs at once, or two tests of
    // this one, do not walk the same ports.
    static CALLS: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let start = 10_000 + (std::process::id() % 5_000) as u16 + call.wrapping_mul(7) % 1_000;
    (start..low.max(start + 1))
        .chain(10_000..start)
        .find(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port below the ephemeral range")
}

/// Workload A on RocksDB with a 1 MiB memtable: flushes and compactions within seconds.
fn traced_rocksdb(out: &Path, metrics: &str) -> IodigArgs {
    IodigArgs::run()
        .db("rocksdb")
        .workload("workloada")
        .props(&[
            "recordcount=20000",
            "rocksdb.writebuffersize=1M",
            "metrics.linger=3",
        ])
        .threads("2")
        .duration("4s")
        .warmup("0s")
        .trace("ebpf")
        .out(out)
        .args(&["--metrics", metrics])
}

/// A Prometheus of its own: scrapes `target` every second, stores in `dir`; killed on drop.
struct Prometheus {
    child: Child,
    api: String,
}

impl Prometheus {
    fn start(dir: &Path, target: &str) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: iodig\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let listen = format!("127.0.0.1:{}", free_port());
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={listen}"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir.join("prometheus.log")).unwrap(),
            ))
            .spawn()
            .expect("prometheus is installed by scripts/test.sh (Debian's prometheus package)");
        let p = Prometheus {
            child,
            api: format!("http://{listen}"),
        };
        let until = Instant::now() + Duration::from_secs(30);
        while curl(&[&format!("{}/-/ready", p.api)]).is_none() {
            assert!(Instant::now() < until, "prometheus not ready in 30 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// One number: the instant query's single answer (`None` when it has none).
    fn value(&self, query: &str) -> Option<f64> {
        let body = curl(&[
            "-G",
            &format!("{}/api/v1/query", self.api),
            "--data-urlencode",
            &format!("query={query}"),
        ])
        .unwrap_or_else(|| panic!("prometheus did not answer {query}"));
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "success", "{query}: {body}");
        let result = v["data"]["result"].as_array().unwrap();
        assert!(result.len() <= 1, "{query}: more than one series: {body}");
        result
            .first()
            .map(|r| r["value"][1].as_str().unwrap().parse().unwrap())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `curl -sf ARGS`: the body, or `None` on any failure.
fn curl(args: &[&str]) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "5"])
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn prometheus_scraping_a_traced_run_agrees_with_run_json() {
    let _kernel = serial();
    let scratch = tempfile::tempdir().unwrap();
    let port = free_port();
    let target = format!("127.0.0.1:{port}");
    let prometheus = Prometheus::start(scratch.path(), &target);
    let out = scratch.path().join("runs");
    let mut child = traced_rocksdb(&out, &target)
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A scrape of our own while the run step is traced, for promtool's checker.
    let mut scrape = None;
    while child.try_wait().unwrap().is_none() {
        if let Some(body) = curl(&[&format!("http://{target}/metrics")]) {
            if body.contains("iodig_device_bytes_total{") && body.contains("iodig_step_info{") {
                scrape = Some(body);
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let run = Run::of(child.wait_with_output().unwrap());
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr);
    let scrape = scrape.expect("a scrape during the traced step");
    let lint = scratch.path().join("scrape.txt");
    std::fs::write(&lint, &scrape).unwrap();
    let checked = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&lint).unwrap())
        .output()
        .expect("promtool comes with the prometheus package");
    assert!(
        checked.status.success() && checked.stdout.is_empty() && checked.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(run
        .stderr
        .contains(&format!("metrics: http://{target}/metrics")));
    let doc = run.run_json();
    let run_name = run
        .run_dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // The last value each series had in the run (counters since the run began).
    let last = |metric: &str| format!("max_over_time({metric}[5m])");
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "a load and a run step");
    for step in steps {
        let workload = if step["phase"] == "load" {
            "load".to_string()
        } else {
            step["workload"].as_str().unwrap().to_string()
        };
        let labels = format!(
            "run=\"{run_name}\",workload=\"{workload}\",threads=\"{}\"",
            step["threads"]
        );
        let operations = prometheus
            .value(&last(&format!(
                "iodig_client_workload_operations_total{{{labels}}}"
            )))
            .unwrap_or_else(|| panic!("no operations of {workload}"));
        assert_eq!(
            operations,
            step["operations"].as_f64().unwrap(),
            "{workload}"
        );
        for (series, s) in step["series"].as_object().unwrap() {
            if series.contains('-') || series == "CLEANUP" {
                continue;
            }
            let op = format!("op=\"{}\",status=\"ok\"", series.to_ascii_lowercase());
            let count = s["count"].as_f64().unwrap();
            let counted = prometheus.value(&last(&format!(
                "iodig_client_operations_total{{{labels},{op}}}"
            )));
            assert_eq!(counted, Some(count), "{workload} {series}");
            let in_histogram = prometheus.value(&last(&format!(
                "iodig_client_latency_seconds_count{{{labels},{op}}}"
            )));
            assert_eq!(in_histogram, Some(count), "{workload} {series}");
        }
    }
    // The client host's IO, per op: the steps' trace.json against the counters since the run
    // began, and the busiest second's queue depth against the peaks reported scrape by scrape.
    let mut bytes = std::collections::BTreeMap::<String, f64>::new();
    let mut qd_peak = 0.0f64;
    for step in steps {
        let trace = read_json(
            &run.run_dir()
                .join(step["dir"].as_str().unwrap())
                .join("trace.json"),
        );
        for d in trace["devices"].as_array().unwrap() {
            for (op, o) in d["ops"].as_object().unwrap() {
                *bytes.entry(op.clone()).or_default() += o["bytes"].as_f64().unwrap();
            }
            for s in d["seconds"].as_array().unwrap() {
                qd_peak = qd_peak.max(s["qd_max"].as_f64().unwrap_or(0.0));
            }
        }
    }
    assert!(bytes["write"] > 0.0, "the flushes wrote: {bytes:?}");
    for (op, b) in &bytes {
        let served = prometheus.value(&format!(
            "sum({})",
            last(&format!(
                "iodig_device_bytes_total{{run=\"{run_name}\",node=\"client\",op=\"{op}\"}}"
            ))
        ));
        assert_eq!(served, Some(*b), "client {op} bytes");
    }
    let served_peak = prometheus.value(&format!(
        "max({})",
        last(&format!(
            "iodig_device_queue_depth_peak{{run=\"{run_name}\",node=\"client\"}}"
        ))
    ));
    assert!(qd_peak >= 1.0);
    assert_eq!(served_peak, Some(qd_peak), "peak in-flight IOs");
    // RocksDB's flushes and compactions, read from its log after each step, are counted as
    // events of the client host (the embedded database runs there).
    let mut db_events = std::collections::BTreeMap::<String, f64>::new();
    for step in steps {
        let events = read_json(
            &run.run_dir()
                .join(step["dir"].as_str().unwrap())
                .join("db-events.json"),
        );
        for e in events.as_array().unwrap() {
            *db_events
                .entry(e["kind"].as_str().unwrap().to_string())
                .or_default() += 1.0;
        }
    }
    assert!(
        db_events.get("flush").is_some_and(|n| *n > 0.0),
        "{db_events:?}"
    );
    for kind in ["flush", "compaction"] {
        let counted = prometheus.value(&last(&format!(
            "iodig_events_total{{run=\"{run_name}\",node=\"client\",kind=\"{kind}\"}}"
        )));
        assert_eq!(counted, db_events.get(kind).copied(), "{kind} events");
    }
    // The client host's system samples: CPU as a share, memory in bytes.
    let busy = prometheus
        .value(&last(&format!(
            "iodig_cpu_busy_ratio{{run=\"{run_name}\",node=\"client\"}}"
        )))
        .expect("the client's CPU is served");
    assert!((0.0..=1.0).contains(&busy) && busy > 0.0, "{busy}");
    let available = prometheus
        .value(&last(&format!(
            "iodig_memory_available_bytes{{run=\"{run_name}\",node=\"client\"}}"
        )))
        .expect("the client's memory is served");
    assert!(available > 1e6, "{available}");
    // The step boundaries are visible as the steps-started counter changing.
    assert_eq!(
        prometheus.value(&last(&format!(
            "iodig_steps_started_total{{run=\"{run_name}\"}}"
        ))),
        Some(2.0)
    );
    drop(prometheus);
}

#[test]
fn metrics_on_a_port_in_use_is_a_usage_error_naming_the_flag() {
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let (_d, out) = out_dir();
    let r = IodigArgs::run_basic("workloada", &out)
        .args(&["--metrics", &addr])
        .usage_error(&["--metrics", &addr, "in use"]);
    assert!(
        !r.stderr.contains("run directory:"),
        "refused before the run started: {}",
        r.stderr
    );
    IodigArgs::run_basic("workloada", &out)
        .args(&["--metrics", "not-an-address"])
        .usage_error(&["--metrics not-an-address", "ADDR:PORT"]);
}

#[test]
fn the_terminal_bar_shows_the_client_hosts_io() {
    let _kernel = serial();
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("runs");
    let args = traced_rocksdb(&out, &format!("127.0.0.1:{}", free_port()))
        .list()
        .iter()
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let typescript = scratch.path().join("typescript");
    // `script` gives iodig a pseudo-terminal as stderr: the bar is drawn, outside CI.
    let status = Command::new("script")
        .args(["-qfec"])
        .arg(format!("{} {args}", env!("CARGO_BIN_EXE_iodig")))
        .arg(&typescript)
        .env_remove("CI")
        .env("COLUMNS", "400")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("script (util-linux) runs");
    assert!(status.success());
    let screen = String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned();
    assert!(screen.contains("ops/s"), "{screen}");
    let io = regex_like(&screen, "| client write ", " MB/s (step mean ");
    assert!(io, "no IO part on the bar: {screen}");
    assert!(screen.contains("qd≤"), "{screen}");
}

/// Whether `a`, then `b`, appear in that order within one line of the screen.
fn regex_like(screen: &str, a: &str, b: &str) -> bool {
    screen
        .split(['\n', '\r'])
        .any(|l| l.find(a).is_some_and(|i| l[i..].contains(b)))
}
