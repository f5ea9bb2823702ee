//! The Prometheus exposition on hubs made to order: families, buckets, escaping, the
//! starvation gauges, and the Grafana dashboard's queries against what is served.

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
                    jvm_pause_ms: Some(0.0),
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
fn run_queue_wait_cpu_pressure_and_jvm_pauses_are_per_second_of_the_last_sample() {
    use iodig_model::sys::{Pressure, ProcSample, ProcStats, RunQueueWait, SysSample};
    let hub = hub_with_everything();
    let starved = |wait_ms: f64| ProcSample {
        stats: Some(ProcStats {
            run_queue: Some(RunQueueWait {
                wait_ms,
                ..Default::default()
            }),
            jvm_pause_ms: Some(wait_ms / 3.0),
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
        text.contains("iodig_cpu_pressure_ratio{run=\"workloada-basic-1\",node=\"10.0.0.3\"} 0.25"),
        "{text}"
    );
    // The JVMs' stopped time: (300 + 100 ms) in 2 s.
    assert!(
        text.contains("iodig_jvm_pause_ratio{run=\"workloada-basic-1\",node=\"10.0.0.3\"} 0.2"),
        "{text}"
    );
    // A place whose samples carry none of them has no line.
    hub.sys_sample("10.0.0.4", &SysSample::default());
    let text = render(&hub, "test");
    for family in [
        "iodig_run_queue_wait_ratio",
        "iodig_cpu_pressure_ratio",
        "iodig_jvm_pause_ratio",
    ] {
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
