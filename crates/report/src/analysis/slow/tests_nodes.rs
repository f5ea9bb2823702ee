//! The slow seconds' rule where the database runs on nodes: the coordinator that answered,
//! the JVM's own log, a node's process restarting or standing still, a load generator on a
//! node's machine, and the seconds in which nothing completed.

use super::*;

/// `s` with a sampled node process beside iodig that uses 80 % of a CPU every second but
/// `still`, where it uses none.
fn with_node_still_in(mut s: StepData, still: usize) -> StepData {
    let sys = s.sys.as_mut().unwrap();
    for (i, sample) in sys.samples.iter_mut().enumerate() {
        let mut node = sample.procs[0].clone();
        node.label = "node 127.0.0.1:9042".into();
        if let Some(st) = node.stats.as_mut() {
            st.cpu_user_pct = if i == still { 0.0 } else { 80.0 };
        }
        sample.procs.push(node);
    }
    sys.processes.push(ProcInfo {
        label: "node 127.0.0.1:9042".into(),
        pid: 2,
        ..Default::default()
    });
    s
}

/// Two nodes answered every second at 1 ms p99; in second `slow`, `node`'s p99 is `p99_us`.
fn by_node(slow: u64, node: &str, p99_us: u64) -> iodig_model::by_node::ClientByNodeDoc {
    let mut seconds = Vec::new();
    for i in 0..SECONDS {
        for n in ["127.0.0.1", "127.0.0.2"] {
            seconds.push(iodig_model::by_node::NodeSecondRow {
                unix_ms: T0 + i * 1000 + 1000,
                secs: 1.0,
                node: n.into(),
                op: "READ".into(),
                count: 50,
                p50_us: 500,
                p99_us: if i == slow && n == node {
                    p99_us
                } else {
                    1_000
                },
                max_us: 2_000,
            });
        }
    }
    iodig_model::by_node::ClientByNodeDoc {
        latency: "service time".into(),
        seconds,
    }
}

#[test]
fn the_coordinator_whose_answers_were_slow_is_named_and_taken_as_the_place() {
    let mut s = step(&[25], |_, _, _, _| {});
    s.by_node = Some(by_node(25, "127.0.0.2", 45_000));
    let slow = only(&s);
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!(slow[0].cause, Cause::Unexplained, "{slow:?}");
    assert_eq!(slow[0].place, "127.0.0.2", "{slow:?}");
    assert!(
        slow[0]
            .evidence
            .contains("coordinated by 127.0.0.2: 50 requests at p99 45.0 ms"),
        "{}",
        slow[0].evidence
    );
}

#[test]
fn coordinators_slow_alike_pin_no_node() {
    let mut s = step(&[25], |_, _, _, _| {});
    let mut doc = by_node(25, "127.0.0.2", 45_000);
    for r in &mut doc.seconds {
        if r.unix_ms == T0 + 26_000 {
            r.p99_us = 40_000;
        }
    }
    s.by_node = Some(doc);
    let slow = only(&s);
    assert_eq!(slow[0].place, "", "{slow:?}");
    assert!(
        slow[0]
            .evidence
            .contains("every coordinator alike (p99 127.0.0.1 40.0 ms, 127.0.0.2 40.0 ms)"),
        "{}",
        slow[0].evidence
    );
}

#[test]
fn without_probes_a_collection_the_log_reported_is_a_jvm_pause_saying_where_it_came_from() {
    let mut s = step(&[33], |_, _, _, _| {});
    let end = T0 + 33_000 + 700;
    s.events.push(crate::data::DbEvent {
        kind: "gc".into(),
        start_unix_ms: end - 450,
        end_unix_ms: Some(end),
        bytes: None,
        node: "127.0.0.1".into(),
        detail: "G1 Young Generation GC in 450 ms (Cassandra's GCInspector)".into(),
    });
    let slow = only(&s);
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!(slow[0].cause, Cause::JvmPause, "{slow:?}");
    assert!(
        slow[0].evidence.contains(
            "450 ms of collections its log reported in this second (Cassandra's GCInspector"
        ),
        "{}",
        slow[0].evidence
    );
}

#[test]
fn a_database_process_that_started_again_is_node_restart() {
    let mut s = step(&[44], |_, _, _, _| {});
    let sys = s.sys.as_mut().unwrap();
    sys.processes[0]
        .restarts
        .push(iodig_model::sys::ProcRestart {
            unix_ms: T0 + 45_000,
            pid: 777,
        });
    let slow = only(&s);
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!(slow[0].cause, Cause::NodeRestart, "{slow:?}");
    assert!(
        slow[0].evidence.contains("iodig runs again as pid 777"),
        "{}",
        slow[0].evidence
    );
}

#[test]
fn a_starved_load_generator_is_client_host_apart_and_cpu_runqueue_beside_a_node() {
    let s = step(&[20], |i, sys, _, _| {
        if i == 20 {
            let rq = run_queue(sys);
            rq.wait_ms = 900.0;
        }
    });
    let of = |role: Role| {
        slow_seconds(&s, &[(&s, role)])
            .into_iter()
            .find(|x| x.p99_ms > 10.0)
            .unwrap()
    };
    let apart = of(Role::ClientApart);
    assert_eq!(apart.cause, Cause::ClientHost, "{apart:?}");
    let beside = of(Role::ClientBeside("127.0.0.1".into()));
    assert_eq!(beside.cause, Cause::CpuRunqueue, "{beside:?}");
    assert_eq!(beside.place, "127.0.0.1");
    assert!(
        beside
            .evidence
            .contains("(the same machine as 127.0.0.1, whose CPUs they share)"),
        "{}",
        beside.evidence
    );
}

#[test]
fn a_busy_database_process_that_used_no_cpu_stood_still() {
    // A node that typically uses 80 % of a CPU, stopped (SIGSTOP) in second 15.
    let s = with_node_still_in(step(&[15], |_, _, _, _| {}), 15);
    let slow = only(&s);
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!(slow[0].cause, Cause::JvmPause, "{slow:?}");
    assert!(
        slow[0]
            .evidence
            .contains("node 127.0.0.1:9042 used 0.0% of a CPU in this second (typically 80%): the process stood still"),
        "{}",
        slow[0].evidence
    );
}

#[test]
fn a_second_in_which_no_operation_completed_is_a_stall_with_its_cause() {
    // The node stood still in second 33: nothing completed; its requests came back in 34.
    let mut s = with_node_still_in(step(&[], |_, _, _, _| {}), 33);
    s.timeseries[33].series.clear();
    s.timeseries[34].series.get_mut("READ").unwrap().max_us = 1_800_000;
    let slow = slow_seconds(&s, &[(&s, Role::Database)]);
    let stall = slow
        .iter()
        .find(|x| x.start_unix_ms == T0 + 33_000)
        .unwrap_or_else(|| panic!("{slow:?}"));
    assert_eq!(stall.cause, Cause::JvmPause, "{stall:?}");
    assert_eq!((stall.p99_ms, stall.max_ms), (1800.0, 1800.0));
    assert!(
        stall
            .evidence
            .starts_with("no READ completed in this second (typically 100 a second): the requests in flight waited through it, up to 1800 ms; "),
        "{}",
        stall.evidence
    );
    assert!(
        stall.evidence.contains("the process stood still"),
        "{}",
        stall.evidence
    );
}
