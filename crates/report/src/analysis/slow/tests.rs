//! The slow seconds' rule on steps made to order: each cause in its own second.

use super::*;
use crate::data::Place;
use iodig_model::sys::{ProcInfo, ProcSample, ProcStats, RunQueueWait, SysDoc, SysSample};
use iodig_model::trace::{
    AttrRow, AttrSecond, Attribution, DeviceSecond, DeviceTrace, OpSecond, TraceDoc,
};
use iodig_model::{Sample, SeriesSummary, StepSummary};

const T0: u64 = 1_700_000_000_000;
const SECONDS: u64 = 60;

fn summary() -> StepSummary {
    StepSummary {
        index: 1,
        phase: "run".into(),
        dir: String::new(),
        workload: "workloada".into(),
        threads: 8,
        target_ops_per_sec: None,
        started_unix_ms: T0,
        runtime_ms: SECONDS * 1000,
        operations: 0,
        throughput_ops_per_sec: 0.0,
        interrupted: false,
        series: BTreeMap::new(),
        returns: BTreeMap::new(),
        trace_mode: None,
        trace_note: None,
        client_cpu_s: None,
        nodes: Vec::new(),
        sweep_stop: None,
        node_reads: Default::default(),
        node_reads_notes: Vec::new(),
        ended_early: None,
    }
}

/// A step whose READ p99 is 1 ms every second but in `slow` (40 ms), with a database
/// process waiting 20 ms a second for a CPU, a device at 0.5 ms and depth 2, and 4 MB a
/// second of flush IO, each but where `edit` says otherwise.
fn step(
    slow: &[u64],
    edit: impl Fn(u64, &mut SysSample, &mut DeviceSecond, &mut Vec<(String, u64)>),
) -> StepData {
    let mut timeseries = Vec::new();
    let mut samples = Vec::new();
    let mut dev_seconds = Vec::new();
    let mut flush = Vec::new();
    let mut other = Vec::new();
    for i in 0..SECONDS {
        let start = T0 + i * 1000;
        let p99 = if slow.contains(&i) { 40_000 } else { 1_000 };
        timeseries.push(Sample {
            t: (i + 1) as f64,
            unix_ms: start + 1000,
            secs: 1.0,
            operations: 100,
            ops_per_sec: 100.0,
            series: [(
                "READ".to_string(),
                SeriesSummary {
                    count: 100,
                    p99_us: p99,
                    max_us: p99 * 2,
                    ..Default::default()
                },
            )]
            .into(),
        });
        let mut s = SysSample {
            unix_ms: start + 1000,
            secs: 1.0,
            procs: vec![ProcSample {
                label: "iodig".into(),
                pid: 1,
                stats: Some(ProcStats {
                    run_queue: Some(RunQueueWait {
                        wait_ms: 20.0,
                        max_thread_ms: 5.0,
                        threads_waiting: 4,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut d = DeviceSecond {
            unix_ms: start,
            covered_ms: 1000,
            ops: [(
                "write".to_string(),
                OpSecond {
                    ios: 100,
                    bytes: 4_000_000,
                    lat_p99_ns: Some(500_000),
                    queue_p99_ns: Some(50_000),
                    ..Default::default()
                },
            )]
            .into(),
            qd_mean: Some(1.0),
            qd_max: Some(2),
            util_pct: None,
        };
        let mut others = Vec::new();
        edit(i, &mut s, &mut d, &mut others);
        samples.push(s);
        flush.push(AttrSecond {
            unix_ms: start,
            bytes: 4_000_000,
            ios: 100,
            ..Default::default()
        });
        for (who, bytes) in others {
            other.push((
                who,
                AttrSecond {
                    unix_ms: start,
                    bytes,
                    ios: 10,
                    ..Default::default()
                },
            ));
            d.ops.get_mut("write").unwrap().bytes += bytes;
        }
        dev_seconds.push(d);
    }
    let mut rows = vec![AttrRow {
        device: "vdb".into(),
        op: "write".into(),
        class: "rocksdb.flush".into(),
        seconds: flush,
        ..Default::default()
    }];
    for (who, s) in other {
        rows.push(AttrRow {
            device: "vdb".into(),
            op: "write".into(),
            class: "other".into(),
            process: who,
            pid: 4242,
            seconds: vec![s],
            ..Default::default()
        });
    }
    let mut trace = TraceDoc {
        devices: vec![DeviceTrace {
            name: "vdb".into(),
            seconds: dev_seconds,
            ..Default::default()
        }],
        ..Default::default()
    };
    trace.self_check.attribution = Some(Attribution {
        rows,
        ..Default::default()
    });
    StepData {
        summary: summary(),
        dir: Default::default(),
        place: Place::ClientHost,
        io_dir: Default::default(),
        timeseries,
        histograms: None,
        trace: Some(trace),
        device_stats: None,
        sys: Some(SysDoc {
            processes: vec![ProcInfo {
                label: "iodig".into(),
                pid: 1,
                ..Default::default()
            }],
            samples,
            ..Default::default()
        }),
        events: Vec::new(),
        nodes: Vec::new(),
        jvm_pauses: None,
        by_node: None,
    }
}

/// The first sampled process's run-queue wait in a sample, to edit.
fn run_queue(sys: &mut SysSample) -> &mut RunQueueWait {
    sys.procs[0]
        .stats
        .as_mut()
        .unwrap()
        .run_queue
        .as_mut()
        .unwrap()
}

fn only(step: &StepData) -> Vec<SlowSecond> {
    slow_seconds(step, &[(step, Role::Database)])
        .into_iter()
        .filter(|s| s.p99_ms > 10.0)
        .collect()
}

#[test]
fn a_starved_second_is_cpu_runqueue_with_its_numbers() {
    let s = step(&[20], |i, sys, _, _| {
        if i == 20 {
            let rq = run_queue(sys);
            rq.wait_ms = 900.0;
            rq.max_thread_ms = 300.0;
        }
    });
    let slow = only(&s);
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!(slow[0].cause, Cause::CpuRunqueue, "{slow:?}");
    assert_eq!(slow[0].start_unix_ms, T0 + 20_000);
    assert!((slow[0].typical_p99_ms - 1.0).abs() < 1e-9);
    assert!(
        slow[0].evidence.contains("iodig waited 900 ms for a CPU"),
        "{}",
        slow[0].evidence
    );
}

#[test]
fn a_deep_slow_device_names_the_activity_that_filled_it() {
    let s = step(&[30], |i, _, d, _| {
        if i == 30 {
            d.qd_max = Some(64);
            d.ops.get_mut("write").unwrap().lat_p99_ns = Some(30_000_000);
        }
    });
    let slow = only(&s);
    assert_eq!(slow[0].cause, Cause::DeviceQueue, "{slow:?}");
    assert!(
        slow[0].evidence.contains("vdb device p99 30.0 ms"),
        "{}",
        slow[0].evidence
    );
    assert!(
        slow[0].evidence.contains("rocksdb.flush"),
        "{}",
        slow[0].evidence
    );
    assert!(
        slow[0].evidence.contains("queue depth up to 64"),
        "{}",
        slow[0].evidence
    );
}

#[test]
fn another_process_flooding_the_drive_is_other_io_by_name() {
    let s = step(&[40], |i, _, d, others| {
        if i == 40 {
            others.push(("dd".into(), 200_000_000));
            d.ops.get_mut("write").unwrap().lat_p99_ns = Some(30_000_000);
            d.qd_max = Some(128);
        }
    });
    let slow = only(&s);
    assert_eq!(slow[0].cause, Cause::OtherIo, "{slow:?}");
    assert!(
        slow[0].evidence.contains("dd (pid 4242) moved 200.0 MB"),
        "{}",
        slow[0].evidence
    );
    // The device's own evidence is kept beside it.
    assert!(slow[0].evidence.contains("also: "), "{}", slow[0].evidence);
}

#[test]
fn an_injected_fault_wins_and_lasts_until_its_heal() {
    let mut s = step(&[10, 12, 30], |_, _, _, _| {});
    let fault = |at: u64, detail: &str| crate::data::DbEvent {
        kind: "fault".into(),
        start_unix_ms: T0 + at,
        end_unix_ms: Some(T0 + at + 5),
        bytes: None,
        node: "device".into(),
        detail: detail.into(),
    };
    s.events = vec![
        fault(9_500, "5s:slow-reads=20ms:device"),
        fault(13_200, "10s:heal:device"),
    ];
    let slow = only(&s);
    let cause = |k: u64| {
        slow.iter()
            .find(|x| x.start_unix_ms == T0 + k * 1000)
            .unwrap()
            .cause
    };
    assert_eq!(cause(10), Cause::Fault);
    assert_eq!(cause(12), Cause::Fault);
    // Long after the heal nothing stands out: said so, not guessed.
    assert_eq!(cause(30), Cause::Unexplained);
    let u = slow.iter().find(|x| x.cause == Cause::Unexplained).unwrap();
    assert!(
        u.evidence.contains("nothing stood out in run-queue wait"),
        "{}",
        u.evidence
    );
}

#[test]
fn the_slowest_seconds_are_listed_even_when_none_is_far_above() {
    // Seven seconds at 2 ms (2× the typical second, under the 3× of "far above"): the
    // five highest are listed; a step whose seconds are all alike lists none.
    let mut s = step(&[], |_, _, _, _| {});
    for i in 5..12 {
        s.timeseries[i].series.get_mut("READ").unwrap().p99_us = 2_000;
    }
    let all = slow_seconds(&s, &[(&s, Role::Database)]);
    assert_eq!(all.len(), TOP_PER_OP, "{all:?}");
    assert!(all.iter().all(|x| x.cause == Cause::Unexplained));
    let flat = step(&[], |_, _, _, _| {});
    assert!(slow_seconds(&flat, &[(&flat, Role::Database)]).is_empty());
}

#[test]
fn the_client_hosts_own_starvation_is_client_host_when_the_database_is_elsewhere() {
    let node = step(&[], |_, _, _, _| {});
    let mut client = step(&[50], |i, sys, _, _| {
        if i == 50 {
            sys.cpu.idle = 1.0;
            let rq = run_queue(sys);
            rq.wait_ms = 800.0;
        }
    });
    client.trace = None;
    let slow: Vec<_> = slow_seconds(
        &client,
        &[(&node, Role::Database), (&client, Role::ClientApart)],
    )
    .into_iter()
    .filter(|s| s.p99_ms > 10.0)
    .collect();
    assert_eq!(slow[0].cause, Cause::ClientHost, "{slow:?}");
    assert_eq!(slow[0].place, "the client host");
}

#[test]
fn a_long_safepoint_is_jvm_pause_ahead_of_the_device_it_slowed() {
    use iodig_model::jvm::{JvmPause, JvmPausesDoc, JvmProcess};
    let mut s = step(&[25], |i, _, d, _| {
        if i == 25 {
            // The device looks slow in the same second: the pause explains the excess.
            d.ops.get_mut("write").unwrap().lat_p99_ns = Some(60_000_000);
        }
    });
    let pause = |at_ms: u64, ms: u64, kind: &str, full: Option<bool>| JvmPause {
        kind: kind.into(),
        start_unix_us: (T0 + at_ms) * 1000,
        duration_us: ms * 1000,
        full,
    };
    s.jvm_pauses = Some(JvmPausesDoc {
        processes: vec![JvmProcess {
            label: "node 127.0.0.2:9042".into(),
            pid: 9,
            probed: true,
            started_unix_ms: T0,
            ended_unix_ms: T0 + SECONDS * 1000,
            pauses: vec![
                pause(3_100, 2, "safepoint", None),
                pause(25_300, 212, "safepoint", None),
                pause(25_301, 210, "gc", Some(true)),
            ],
            ..Default::default()
        }],
    });
    let slow = only(&s);
    assert_eq!(slow[0].cause, Cause::JvmPause, "{slow:?}");
    assert!(
        slow[0]
            .evidence
            .starts_with("the client host: 212 ms of safepoints in this second (longest pause 212 ms, a full collection among them"),
        "{}",
        slow[0].evidence
    );
    assert!(
        slow[0].evidence.contains("device p99 60.0 ms"),
        "{}",
        slow[0].evidence
    );
}

#[test]
fn a_contended_cpu_is_upstream_of_the_slow_device_it_shows() {
    let s = step(&[15], |i, sys, d, _| {
        if i == 15 {
            d.ops.get_mut("write").unwrap().lat_p99_ns = Some(400_000_000);
            let rq = run_queue(sys);
            rq.wait_ms = 400.0;
            sys.pressure = Some(iodig_model::sys::Pressure {
                cpu_some_ms: 900.0,
                ..Default::default()
            });
        }
    });
    let slow = only(&s);
    assert_eq!(slow[0].cause, Cause::CpuRunqueue, "{slow:?}");
    assert!(
        slow[0].evidence.contains("CPU pressure 900 ms"),
        "{}",
        slow[0].evidence
    );
}

#[test]
fn a_logged_write_stall_explains_a_slow_update_second_not_a_read() {
    let mut s = step(&[35], |_, _, _, _| {});
    for t in &mut s.timeseries {
        let read = t.series["READ"].clone();
        t.series.insert("UPDATE".into(), read);
    }
    s.events.push(crate::data::DbEvent {
        kind: "stall".into(),
        start_unix_ms: T0 + 35_400,
        end_unix_ms: Some(T0 + 35_400),
        bytes: None,
        node: "local".into(),
        detail: "usertable: Stalling writes because we have 4 immutable memtables".into(),
    });
    let slow = only(&s);
    let cause = |op: &str| slow.iter().find(|x| x.op == op).unwrap().cause;
    assert_eq!(cause("UPDATE"), Cause::DbStall, "{slow:?}");
    assert_eq!(cause("READ"), Cause::Unexplained, "{slow:?}");
}

#[path = "tests_nodes.rs"]
mod nodes;
