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
    sys_families(&mut out, s, run);
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
}

/// Each place's last system sample: CPU, memory, and what a slow second is first asked about,
/// whether the database was starved of CPU.
fn sys_families(out: &mut Out, s: &HubState, run: &str) {
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
    // What a slow second is first asked about: was the database starved of CPU, or stopped by
    // its JVM. Absent where the kernel keeps no schedstats or PSI, or no JVM was probed.
    type SysMaybe = fn(&iodig_model::sys::SysSample) -> Option<f64>;
    let starved: [(&str, &str, SysMaybe); 3] = [
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
        (
            "iodig_jvm_pause_ratio",
            "Share of the last sample the database's JVMs stood stopped (safepoints, from HotSpot's probes), summed over JVMs; only in traced steps.",
            |x| {
                let pauses: Vec<f64> = x
                    .procs
                    .iter()
                    .filter_map(|p| p.stats.as_ref()?.jvm_pause_ms)
                    .collect();
                (!pauses.is_empty()).then(|| pauses.iter().sum::<f64>() / 1000.0 / x.secs.max(1e-3))
            },
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
#[path = "exposition_tests.rs"]
mod tests;
