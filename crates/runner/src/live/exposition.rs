//! The hub's figures in the Prometheus text exposition format (version 0.0.4, which
//! Prometheus and OpenMetrics scrapers both read): one `# HELP` and `# TYPE` per family, base
//! units in the names, `_total` counters, cumulative histogram buckets ending in `+Inf` with
//! `_sum` and `_count`, and no timestamps (the scraper's clock places each sample).

use super::hub::{Hist, HubState, LiveHub};
use super::LATENCY_BOUNDS_US;
use std::fmt::Write as _;

/// Renders a scrape of `hub` by `scraper` (its address and User-Agent): the busiest-slot
/// figures are those since that scraper's previous scrape.
pub fn render(hub: &LiveHub, scraper: &str) -> String {
    render_state(&hub.scrape(scraper))
}

/// One metric family being written: its header once, then its samples.
struct Out {
    text: String,
}

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{k}=\"{}\"", escape(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {}", number(value));
    }

    /// A histogram's `_bucket` lines (cumulative, `le` in seconds, `+Inf` last), `_sum` and
    /// `_count`.
    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &Hist) {
        let mut cumulative = 0;
        let bucket = format!("{name}_bucket");
        for (i, bound) in LATENCY_BOUNDS_US.iter().enumerate() {
            cumulative += h.counts.get(i).copied().unwrap_or(0);
            let le = number(*bound as f64 / 1e6);
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, cumulative as f64);
        }
        let mut with_le = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.sample(&bucket, &with_le, h.count() as f64);
        self.sample(&format!("{name}_sum"), labels, h.sum_seconds);
        self.sample(&format!("{name}_count"), labels, h.count() as f64);
    }
}

/// A label value with `\`, `"` and newlines escaped, as the format asks.
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

/// Integers without a fraction, others in Rust's shortest round-trip form.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The text of one scrape.
pub(super) fn render_state(s: &HubState) -> String {
    let mut out = Out {
        text: String::with_capacity(16 * 1024),
    };
    let run = s.run.as_str();
    client_families(&mut out, s, run);
    place_families(&mut out, s, run);
    out.family(
        "iodig_events_total",
        "counter",
        "Events told as they happened (fault, node_down, flush, compaction, finding, …) by place and kind.",
    );
    for ((node, kind), n) in &s.events {
        out.sample(
            "iodig_events_total",
            &[("run", run), ("node", node), ("kind", kind)],
            *n as f64,
        );
    }
    out.text
}

fn client_families(out: &mut Out, s: &HubState, run: &str) {
    out.family(
        "iodig_steps_started_total",
        "counter",
        "Steps started in the run (a change marks a step boundary).",
    );
    out.sample(
        "iodig_steps_started_total",
        &[("run", run)],
        s.steps_started as f64,
    );
    out.family(
        "iodig_step_info",
        "gauge",
        "The step running now (1), with its labels.",
    );
    if let Some(step) = &s.step {
        let threads = step.threads.to_string();
        out.sample(
            "iodig_step_info",
            &[
                ("run", run),
                ("step", &step.step),
                ("workload", &step.workload),
                ("threads", &threads),
            ],
            1.0,
        );
    }
    out.family(
        "iodig_client_threads",
        "gauge",
        "Client threads of the step running now.",
    );
    out.family(
        "iodig_client_target_ops_per_second",
        "gauge",
        "The --target rate of the step running now, when paced.",
    );
    if let Some(step) = &s.step {
        out.sample(
            "iodig_client_threads",
            &[("run", run)],
            f64::from(step.threads),
        );
        if let Some(t) = step.target {
            out.sample("iodig_client_target_ops_per_second", &[("run", run)], t);
        }
    }
    let families: [(&str, &str, &str); 5] = [
        (
            "iodig_client_operations_total",
            "counter",
            "Client operations completed, by op and status, as YCSB's series count them (a read-modify-write's read and update count under read and update too).",
        ),
        (
            "iodig_client_workload_operations_total",
            "counter",
            "Workload operations completed (run.json's operations).",
        ),
        (
            "iodig_client_ops_per_second",
            "gauge",
            "Workload operations per second in the last whole second.",
        ),
        (
            "iodig_client_latency_seconds",
            "histogram",
            "Client latency by op and status (service time; from the intended start with measurement.interval=intended).",
        ),
        (
            "iodig_client_intended_latency_seconds",
            "histogram",
            "Client latency from each operation's intended start under --target, by op and status.",
        ),
    ];
    for (name, kind, help) in families {
        out.family(name, kind, help);
        for c in s.client.values() {
            let threads = c.step.threads.to_string();
            let labels = [
                ("run", run),
                ("step", c.step.step.as_str()),
                ("workload", c.step.workload.as_str()),
                ("threads", threads.as_str()),
            ];
            fn with<'a>(
                labels: &[(&'a str, &'a str)],
                op: &'a (String, String),
            ) -> Vec<(&'a str, &'a str)> {
                let mut l = labels.to_vec();
                l.push(("op", op.0.as_str()));
                l.push(("status", op.1.as_str()));
                l
            }
            match name {
                "iodig_client_operations_total" => {
                    for (op, n) in &c.operations {
                        out.sample(name, &with(&labels, op), *n as f64);
                    }
                }
                "iodig_client_workload_operations_total" => {
                    out.sample(name, &labels, c.workload_operations as f64);
                }
                "iodig_client_ops_per_second" => out.sample(name, &labels, c.last_ops_per_sec),
                "iodig_client_latency_seconds" => {
                    for (op, h) in &c.latency {
                        out.histogram(name, &with(&labels, op), h);
                    }
                }
                _ => {
                    for (op, h) in &c.intended {
                        out.histogram(name, &with(&labels, op), h);
                    }
                }
            }
        }
    }
}

fn place_families(out: &mut Out, s: &HubState, run: &str) {
    type DeviceRow<'a> = (&'a str, &'a str, &'a super::hub::DeviceState);
    let devices: Vec<DeviceRow> = (s.places.iter())
        .flat_map(|(node, p)| {
            (p.devices.iter()).map(move |(dev, d)| (node.as_str(), dev.as_str(), d))
        })
        .collect();
    out.family(
        "iodig_device_ios_total",
        "counter",
        "Block IOs completed, by place (node), device and op.",
    );
    for (node, dev, d) in &devices {
        for (op, (ios, _)) in &d.ops {
            let l = [("run", run), ("node", *node), ("device", *dev), ("op", op)];
            out.sample("iodig_device_ios_total", &l, *ios as f64);
        }
    }
    out.family(
        "iodig_device_bytes_total",
        "counter",
        "Bytes of the block IOs completed, by place, device and op.",
    );
    for (node, dev, d) in &devices {
        for (op, (_, bytes)) in &d.ops {
            let l = [("run", run), ("node", *node), ("device", *dev), ("op", op)];
            out.sample("iodig_device_bytes_total", &l, *bytes as f64);
        }
    }
    out.family(
        "iodig_device_latency_seconds",
        "histogram",
        "Device latency (issue to completion) of block IOs, by place, device and op (eBPF tracing; sums from the tracer's bucket middles).",
    );
    for (node, dev, d) in &devices {
        for (op, h) in &d.latency {
            let l = [("run", run), ("node", *node), ("device", *dev), ("op", op)];
            out.histogram("iodig_device_latency_seconds", &l, h);
        }
    }
    out.family(
        "iodig_device_os_latency_p99_seconds",
        "gauge",
        "p99 of the OS time (request allocation to issue to the driver) of the last traced second, by op.",
    );
    for (node, dev, d) in &devices {
        for (op, ns) in &d.os_p99_ns {
            let l = [("run", run), ("node", *node), ("device", *dev), ("op", op)];
            out.sample("iodig_device_os_latency_p99_seconds", &l, *ns as f64 / 1e9);
        }
    }
    out.family(
        "iodig_device_queue_depth",
        "gauge",
        "Peak IOs in flight on the device in the last traced second.",
    );
    for (node, dev, d) in &devices {
        let l = [("run", run), ("node", *node), ("device", *dev)];
        out.sample("iodig_device_queue_depth", &l, d.qd_last as f64);
    }
    out.family(
        "iodig_device_queue_depth_peak",
        "gauge",
        "Peak IOs in flight on the device over the traced seconds since this scraper's previous scrape.",
    );
    for (node, dev, d) in &devices {
        let l = [("run", run), ("node", *node), ("device", *dev)];
        out.sample("iodig_device_queue_depth_peak", &l, d.qd_peak_scrape as f64);
    }
    out.family(
        "iodig_device_busiest_slot_bytes_per_second",
        "gauge",
        "The busiest slot's rate (bytes/s) since this scraper's previous scrape, by op: a 100 ms burst is not lost between scrapes.",
    );
    for (node, dev, d) in &devices {
        for (op, rate) in &d.slot_peak_scrape {
            let l = [("run", run), ("node", *node), ("device", *dev), ("op", op)];
            out.sample("iodig_device_busiest_slot_bytes_per_second", &l, *rate);
        }
    }
    for (name, help, pick) in [
        (
            "iodig_class_ios_total",
            "Block IOs by activity class (who issued them: flush, compaction, WAL, reads, …), device and op.",
            0,
        ),
        (
            "iodig_class_bytes_total",
            "Bytes of block IOs by activity class, device and op.",
            1,
        ),
    ] {
        out.family(name, "counter", help);
        for (node, dev, d) in &devices {
            for ((class, op), (ios, bytes)) in &d.classes {
                let l = [
                    ("run", run),
                    ("node", *node),
                    ("device", *dev),
                    ("class", class),
                    ("op", op),
                ];
                out.sample(name, &l, if pick == 0 { *ios } else { *bytes } as f64);
            }
        }
    }
    out.family(
        "iodig_background_io_active",
        "gauge",
        "1 when a flush or compaction class did IO in the place's last traced second.",
    );
    for (node, p) in &s.places {
        for (class, background) in &p.background_active {
            if *background {
                let l = [("run", run), ("node", node.as_str()), ("class", class)];
                out.sample("iodig_background_io_active", &l, 1.0);
            }
        }
    }
    out.family(
        "iodig_write_step_mean_bytes_per_second",
        "gauge",
        "The place's mean write rate over the step so far (all traced devices).",
    );
    for (node, p) in &s.places {
        if p.step_seconds > 0 {
            out.sample(
                "iodig_write_step_mean_bytes_per_second",
                &[("run", run), ("node", node)],
                p.step_write_bytes as f64 / p.step_seconds as f64,
            );
        }
    }
    type SysPick = fn(&iodig_model::sys::SysSample) -> f64;
    let sys: [(&str, &str, SysPick); 5] = [
        (
            "iodig_cpu_busy_ratio",
            "Share of all CPU time spent working (not idle, not iowait) in the last sample.",
            |x| x.cpu.busy() / 100.0,
        ),
        (
            "iodig_cpu_iowait_ratio",
            "Share of all CPU time idle with IO outstanding in the last sample.",
            |x| x.cpu.iowait / 100.0,
        ),
        (
            "iodig_memory_available_bytes",
            "MemAvailable at the last sample.",
            |x| x.mem.available_bytes as f64,
        ),
        (
            "iodig_memory_dirty_bytes",
            "Page cache waiting to be written back at the last sample.",
            |x| x.mem.dirty_bytes as f64,
        ),
        (
            "iodig_memory_cached_bytes",
            "Page cache at the last sample.",
            |x| x.mem.cached_bytes as f64,
        ),
    ];
    for (name, help, pick) in sys {
        out.family(name, "gauge", help);
        for (node, p) in &s.places {
            if let Some(x) = &p.sys {
                out.sample(name, &[("run", run), ("node", node)], pick(x));
            }
        }
    }
    // What a slow second is first asked about: was the database starved of CPU. Absent where
    // the kernel keeps no schedstats or PSI.
    type SysMaybe = fn(&iodig_model::sys::SysSample) -> Option<f64>;
    let starved: [(&str, &str, SysMaybe); 2] = [
        (
            "iodig_run_queue_wait_ratio",
            "Seconds the sampled processes' threads (the database, iodig) spent runnable but waiting for a CPU per second of the last sample, summed over threads.",
            |x| {
                let waits: Vec<f64> = x
                    .procs
                    .iter()
                    .filter_map(|p| Some(p.stats.as_ref()?.run_queue?.wait_ms))
                    .collect();
                (!waits.is_empty()).then(|| waits.iter().sum::<f64>() / 1000.0 / x.secs.max(1e-3))
            },
        ),
        (
            "iodig_cpu_pressure_ratio",
            "Share of the last sample during which some task waited for a CPU (the kernel's PSI).",
            |x| Some(x.pressure?.cpu_some_ms / 1000.0 / x.secs.max(1e-3)),
        ),
    ];
    for (name, help, pick) in starved {
        out.family(name, "gauge", help);
        for (node, p) in &s.places {
            if let Some(v) = p.sys.as_ref().and_then(pick) {
                out.sample(name, &[("run", run), ("node", node)], v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::{LatencyBuckets, LiveSink, LiveStep};
    use iodig_model::{Sample, SeriesSummary};

    fn hub_with_a_second() -> LiveHub {
        let hub = LiveHub::silent();
        hub.set_run("workloada-basic-1");
        hub.step_started(&LiveStep {
            step: "step-001".into(),
            workload: "workloada".into(),
            threads: 4,
            target: Some(1000.0),
        });
        let mut h = iodig_stats::new_histogram();
        h.record_n(30, 5).unwrap();
        h.record_n(2_000, 1).unwrap();
        h.record_n(20_000_000, 1).unwrap();
        hub.client_latency(&[LatencyBuckets::of("READ".into(), &h)]);
        let mut series = std::collections::BTreeMap::new();
        series.insert(
            "READ".to_string(),
            SeriesSummary {
                count: 7,
                ..SeriesSummary::default()
            },
        );
        series.insert(
            "Intended-READ".to_string(),
            SeriesSummary {
                count: 7,
                ..SeriesSummary::default()
            },
        );
        hub.client_second(&Sample {
            operations: 7,
            ops_per_sec: 7.0,
            secs: 1.0,
            series,
            ..Sample::default()
        });
        hub
    }

    #[test]
    fn every_family_has_help_and_type_and_counters_end_in_total() {
        let text = render(&hub_with_a_second(), "test");
        let mut kinds = std::collections::BTreeMap::new();
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let mut parts = line[7..].split(' ');
            let (name, kind) = (parts.next().unwrap(), parts.next().unwrap());
            assert!(
                kinds.insert(name.to_string(), kind.to_string()).is_none(),
                "{name} twice"
            );
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} has no HELP"
            );
            assert_eq!(
                kind == "counter",
                name.ends_with("_total"),
                "{name} is a {kind}"
            );
        }
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|f| kinds.get(*f).is_some_and(|k| k == "histogram"))
                })
                .unwrap_or(name);
            assert!(kinds.contains_key(family), "{line}: no # TYPE for {family}");
            // No timestamps: a name (with labels) and one value.
            let after_labels = line.rsplit_once('}').map_or(line, |(_, v)| v);
            assert_eq!(
                after_labels.split_whitespace().count(),
                if line.contains('}') { 1 } else { 2 },
                "{line}"
            );
        }
        assert!(text.contains(
            "iodig_client_operations_total{run=\"workloada-basic-1\",step=\"step-001\",workload=\"workloada\",threads=\"4\",op=\"read\",status=\"ok\"} 7"
        ));
        assert!(text.contains("iodig_client_target_ops_per_second{run=\"workloada-basic-1\"} 1000"));
    }

    #[test]
    fn histogram_buckets_are_cumulative_in_seconds_and_end_in_inf() {
        let text = render(&hub_with_a_second(), "test");
        let buckets: Vec<(String, f64)> = text
            .lines()
            .filter(|l| l.starts_with("iodig_client_latency_seconds_bucket{"))
            .map(|l| {
                let le = l.split("le=\"").nth(1).unwrap().split('"').next().unwrap();
                (
                    le.to_string(),
                    l.rsplit(' ').next().unwrap().parse().unwrap(),
                )
            })
            .collect();
        assert_eq!(buckets.first().unwrap().0, "0.00001");
        assert_eq!(buckets[buckets.len() - 2].0, "10");
        assert_eq!(buckets.last().unwrap(), &("+Inf".to_string(), 7.0));
        assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
        let at = |le: &str| buckets.iter().find(|b| b.0 == le).unwrap().1;
        // 30 µs ×5 fall under 50 µs, 2 ms under 2.5 ms, 20 s only under +Inf.
        assert_eq!(
            (at("0.000025"), at("0.00005"), at("0.0025"), at("10")),
            (0.0, 5.0, 6.0, 6.0)
        );
        assert!(text.contains("iodig_client_latency_seconds_count{run=\"workloada-basic-1\",step=\"step-001\",workload=\"workloada\",threads=\"4\",op=\"read\",status=\"ok\"} 7"));
        let sum: f64 = text
            .lines()
            .find(|l| l.starts_with("iodig_client_latency_seconds_sum{"))
            .and_then(|l| l.rsplit(' ').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!((sum - 20.00215).abs() < 0.03, "{sum}");
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(number(0.00001), "0.00001");
        assert_eq!(number(3.0), "3");
    }

    /// A hub that has seen one of everything: every family has samples.
    fn hub_with_everything() -> LiveHub {
        use iodig_model::trace::{Bucket, DeviceSecond, LiveDevice, LiveSecond, OpSecond};
        let hub = hub_with_a_second();
        let mut h = iodig_stats::new_histogram();
        h.record_n(500, 3).unwrap();
        hub.client_latency(&[LatencyBuckets::of("Intended-READ".into(), &h)]);
        let mut ops = std::collections::BTreeMap::new();
        ops.insert(
            "read".to_string(),
            OpSecond {
                ios: 4,
                bytes: 16384,
                mb_s_max: 0.5,
                queue_p99_ns: Some(40_000),
                lat_hist: vec![Bucket {
                    lower: 90_000,
                    upper: 100_001,
                    count: 4,
                }],
                ..OpSecond::default()
            },
        );
        let mut classes = std::collections::BTreeMap::new();
        classes.insert(
            "rocksdb.flush".to_string(),
            [("write".to_string(), (2u64, 8192u64))]
                .into_iter()
                .collect(),
        );
        hub.io_second(
            "10.0.0.2",
            &LiveSecond {
                unix_ms: 1000,
                so_far: None,
                devices: vec![LiveDevice {
                    name: "nvme0n1".into(),
                    second: DeviceSecond {
                        unix_ms: 1000,
                        covered_ms: 1000,
                        ops,
                        qd_max: Some(9),
                        ..DeviceSecond::default()
                    },
                    classes,
                }],
            },
        );
        hub.sys_sample(
            "10.0.0.2",
            &iodig_model::sys::SysSample {
                secs: 1.0,
                procs: vec![iodig_model::sys::ProcSample {
                    stats: Some(iodig_model::sys::ProcStats {
                        run_queue: Some(iodig_model::sys::RunQueueWait::default()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                pressure: Some(iodig_model::sys::Pressure::default()),
                ..Default::default()
            },
        );
        hub.event(&crate::live::LiveEvent {
            unix_ms: 2000,
            place: "10.0.0.2".into(),
            kind: "fault".into(),
            text: "fault 1s:kill:node2".into(),
        });
        hub
    }

    #[test]
    fn device_latency_lands_in_the_bucket_of_its_slowest_value() {
        let text = render(&hub_with_everything(), "test");
        let line = |le: &str| {
            text.lines()
                .find(|l| {
                    l.starts_with("iodig_device_latency_seconds_bucket{")
                        && l.contains(&format!("le=\"{le}\""))
                })
                .unwrap()
                .rsplit(' ')
                .next()
                .unwrap()
                .to_string()
        };
        // 90–100 µs IOs count under 100 µs, not under 50 µs.
        assert_eq!(
            (line("0.00005"), line("0.0001"), line("+Inf")),
            ("0".into(), "4".into(), "4".into())
        );
        assert!(text.contains("iodig_background_io_active{run=\"workloada-basic-1\",node=\"10.0.0.2\",class=\"rocksdb.flush\"} 1"));
        assert!(text.contains("iodig_device_queue_depth_peak{run=\"workloada-basic-1\",node=\"10.0.0.2\",device=\"nvme0n1\"} 9"));
    }

    #[test]
    fn run_queue_wait_and_cpu_pressure_are_per_second_of_the_last_sample() {
        use iodig_model::sys::{Pressure, ProcSample, ProcStats, RunQueueWait, SysSample};
        let hub = hub_with_everything();
        let starved = |wait_ms: f64| ProcSample {
            stats: Some(ProcStats {
                run_queue: Some(RunQueueWait {
                    wait_ms,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        hub.sys_sample(
            "10.0.0.3",
            &SysSample {
                secs: 2.0,
                procs: vec![starved(900.0), starved(300.0)],
                pressure: Some(Pressure {
                    cpu_some_ms: 500.0,
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        let text = render(&hub, "test");
        assert!(
            text.contains(
                "iodig_run_queue_wait_ratio{run=\"workloada-basic-1\",node=\"10.0.0.3\"} 0.6"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "iodig_cpu_pressure_ratio{run=\"workloada-basic-1\",node=\"10.0.0.3\"} 0.25"
            ),
            "{text}"
        );
        // A place whose samples carry neither has no line.
        hub.sys_sample("10.0.0.4", &SysSample::default());
        let text = render(&hub, "test");
        for family in ["iodig_run_queue_wait_ratio", "iodig_cpu_pressure_ratio"] {
            let line = format!("{family}{{run=\"workloada-basic-1\",node=\"10.0.0.4\"}}");
            assert!(!text.contains(&line), "{text}");
        }
        assert!(text.contains("iodig_cpu_busy_ratio{run=\"workloada-basic-1\",node=\"10.0.0.4\"}"));
    }

    /// The dashboard in docs/grafana imports as is: a Grafana dashboard with a Prometheus
    /// datasource input, panels that each draw a query, annotations, and queries that name only
    /// metrics the endpoint serves.
    #[test]
    fn the_grafana_dashboard_queries_only_served_metrics() {
        let dashboard: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../docs/grafana/iodig-dashboard.json"
        ))
        .expect("the dashboard is JSON");
        let text = render(&hub_with_everything(), "test");
        let served: std::collections::BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        let has_samples = |family: &str| {
            text.lines()
                .any(|l| !l.starts_with('#') && l.starts_with(family))
        };
        assert_eq!(dashboard["__inputs"][0]["pluginId"], "prometheus");
        assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 30);
        assert!(dashboard["title"].as_str().is_some_and(|t| !t.is_empty()));
        let mut queries = Vec::new();
        let panels = dashboard["panels"].as_array().unwrap();
        assert!(panels.len() >= 6, "the issue's six views at least");
        for p in panels {
            for key in ["id", "type", "title", "gridPos", "targets", "datasource"] {
                assert!(!p[key].is_null(), "panel {} has no {key}", p["title"]);
            }
            assert_eq!(p["datasource"]["uid"], "${DS_PROMETHEUS}");
            for t in p["targets"].as_array().unwrap() {
                queries.push(t["expr"].as_str().unwrap().to_string());
            }
        }
        let annotations = dashboard["annotations"]["list"].as_array().unwrap();
        for a in annotations.iter().filter(|a| a["expr"].is_string()) {
            queries.push(a["expr"].as_str().unwrap().to_string());
        }
        assert!(
            annotations.len() >= 3,
            "step boundaries, flush/compaction, events"
        );
        for v in dashboard["templating"]["list"].as_array().unwrap() {
            queries.push(v["definition"].as_str().unwrap().to_string());
        }
        let mut named = 0;
        for q in &queries {
            for (i, _) in q.match_indices("iodig_") {
                let name: String = q[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s).filter(|f| served.contains(f)))
                    .unwrap_or(&name);
                assert!(served.contains(family), "{q}: {name} is not served");
                assert!(
                    has_samples(&name),
                    "{q}: {name} has no samples in a full hub"
                );
                named += 1;
            }
        }
        assert!(named >= 15, "{named} metrics named in the queries");
    }
}
