//! The series files' tests: each written and read back, in both schema versions, and damaged.

use super::*;
use crate::sys::CpuPct;
use crate::trace::{AttrRow, Attribution, DeviceTrace};

#[test]
fn events_are_lines_and_the_earlier_array_is_read_alike() {
    let dir = tempfile::tempdir().unwrap();
    assert!(read_events(dir.path()).unwrap().is_none());
    let events = vec![
        DbEvent {
            kind: "flush".into(),
            start_unix_ms: 1_700_000_000_000,
            end_unix_ms: Some(1_700_000_000_060),
            bytes: Some(1_178_886),
            node: "local".into(),
            detail: "usertable flush, reason: Write Buffer Full".into(),
        },
        DbEvent {
            kind: "file_deletion".into(),
            start_unix_ms: 1_700_000_000_100,
            end_unix_ms: None,
            bytes: None,
            node: "127.0.0.2".into(),
            detail: "#12, a, b".into(),
        },
    ];
    // Earlier writers: one JSON array.
    crate::fsio::write_json_atomic(&dir.path().join(crate::files::EVENTS), &events).unwrap();
    assert_eq!(read_events(dir.path()).unwrap().unwrap(), events);
    write_events(dir.path(), &events[..1]).unwrap();
    assert_eq!(
        read_events(dir.path()).unwrap().unwrap(),
        events[..1],
        "the lines win"
    );
    let mut lines = 0;
    for_each_line::<DbEvent>(&dir.path().join(EVENTS), |_| lines += 1).unwrap();
    assert_eq!(lines, 1);
    write_events(dir.path(), &[]).unwrap();
    assert!(read_events(dir.path()).unwrap().unwrap().is_empty());
}

fn trace() -> TraceDoc {
    let second = |unix_ms| DeviceSecond {
        unix_ms,
        covered_ms: 1000,
        qd_mean: Some(1.5),
        ..Default::default()
    };
    TraceDoc {
        mode: "ebpf".into(),
        devices: vec![
            DeviceTrace {
                name: "vda".into(),
                seconds: vec![second(1000), second(2000)],
                ..Default::default()
            },
            DeviceTrace {
                name: "vdb".into(),
                seconds: vec![second(1000)],
                ..Default::default()
            },
        ],
        self_check: crate::trace::SelfCheck {
            attribution: Some(Attribution {
                rows: vec![AttrRow {
                    device: "vda".into(),
                    class: "flush".into(),
                    seconds: vec![AttrSecond {
                        unix_ms: 2000,
                        ios: 3,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn a_trace_reads_back_as_written_and_its_document_holds_no_series() {
    let d = tempfile::tempdir().unwrap();
    let t = trace();
    write_trace(d.path(), &t).unwrap();
    let back = read_trace(d.path()).unwrap().unwrap();
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(&t).unwrap()
    );
    let doc: serde_json::Value = read_gzip_json(&d.path().join(TRACE)).unwrap();
    assert_eq!(doc["devices"][0]["seconds"], serde_json::json!([]));
    // A schema-1 trace (series inline, no series file) reads as it is.
    let v1 = tempfile::tempdir().unwrap();
    crate::fsio::write_json_atomic(&v1.path().join("trace.json"), &t).unwrap();
    let back = read_trace(v1.path()).unwrap().unwrap();
    assert_eq!(back.devices[0].seconds.len(), 2);
}

#[test]
fn series_of_another_step_are_refused_with_both_files_named() {
    let d = tempfile::tempdir().unwrap();
    write_trace(d.path(), &trace()).unwrap();
    let mut other = trace();
    other.devices.remove(1);
    other.devices[0].name = "sdz".into();
    write_gzip_json(&d.path().join(TRACE), &other).unwrap();
    let e = format!("{:#}", read_trace(d.path()).unwrap_err());
    assert!(
        e.contains("trace-seconds.jsonl.gz") && e.contains("device vda"),
        "{e}"
    );
}

#[test]
fn an_interval_log_reads_back_from_either_version() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(read_hlog(d.path(), "latency.hlog").unwrap(), None);
    std::fs::write(d.path().join("latency.hlog"), b"#v1\n").unwrap();
    assert_eq!(
        read_hlog(d.path(), "latency.hlog").unwrap().unwrap(),
        b"#v1\n"
    );
    write_hlog(d.path(), "latency.hlog", b"#v2\n").unwrap();
    assert_eq!(
        read_hlog(d.path(), "latency.hlog").unwrap().unwrap(),
        b"#v2\n"
    );
}

#[test]
fn a_damaged_line_is_named_by_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    write_lines(&d.path().join(TIMESERIES), ["{}", "nope"].iter()).unwrap();
    let e = format!("{:#}", read_timeseries(d.path()).unwrap_err());
    assert!(e.contains("timeseries.jsonl.gz line 1"), "{e}");
}

#[test]
fn many_cpus_are_summarised_and_the_file_says_so() {
    let cpu = |busy: f64| CpuPct {
        user: busy,
        idle: 100.0 - busy,
        ..Default::default()
    };
    let mut sys = SysDoc::default();
    let mut per_cpu: Vec<CpuPct> = (0..96).map(|i| cpu(f64::from(i % 10))).collect();
    per_cpu[42] = cpu(77.0);
    sys.samples.push(SysSample {
        per_cpu: per_cpu.clone(),
        ..Default::default()
    });
    let d = tempfile::tempdir().unwrap();
    write_sys(d.path(), &sys).unwrap();
    let back = read_sys(d.path()).unwrap().unwrap();
    assert!(back.samples[0].per_cpu.is_empty());
    let spread = back.samples[0].cpu_spread.unwrap();
    assert_eq!((spread.cpus, spread.busiest_cpu), (96, 42));
    assert!((spread.busiest_pct - 77.0).abs() < 1e-9, "{spread:?}");
    assert!(spread.least_busy_pct.abs() < 1e-9, "{spread:?}");
    assert!(back.per_cpu_summarised.unwrap().contains("96 CPUs"));
    // A few CPUs are kept one by one.
    sys.samples[0].per_cpu.truncate(4);
    write_sys(d.path(), &sys).unwrap();
    let back = read_sys(d.path()).unwrap().unwrap();
    assert_eq!(back.samples[0].per_cpu.len(), 4);
    assert!(back.per_cpu_summarised.is_none() && back.samples[0].cpu_spread.is_none());
}
