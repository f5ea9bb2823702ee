//! The client's interval logs through the real binary: the log by start (`latency.hlog` with
//! `latency-start-shift.hlog`) puts each operation in the second it was meant to start, once.

mod common;

use common::*;

#[test]
fn the_log_by_start_puts_each_op_in_the_second_it_was_meant_to_start() {
    // One thread at 1,000 ops/s: an intended start every millisecond, so every whole second
    // of the window holds 1,000 starts, whatever each operation's latency.
    let dir = tempfile::tempdir().unwrap();
    let r = IodigArgs::run_basic("workloads/workloadc", dir.path())
        .props(&[
            "recordcount=1000",
            "operationcount=100000000",
            "measurement.interval=intended",
        ])
        .target("1000")
        .threads("1")
        .duration("5s")
        .warmup("0s")
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = iodig_report::load_run(&r.run_dir()).unwrap();
    let step = run.steps.iter().find(|s| !s.is_load()).unwrap();
    // A run step writes the shift, not a whole log by start, and the shift is the smaller.
    assert!(!step.dir.join("latency-by-start.hlog.gz").exists());
    let size = |name: &str| std::fs::metadata(step.dir.join(name)).unwrap().len();
    let (shift, by_end) = (size("latency-start-shift.hlog.gz"), size("latency.hlog.gz"));
    assert!(shift * 2 < by_end, "shift {shift} B, by end {by_end} B");
    let per_second = starts_per_second(step, "READ").expect("the log by start written");
    let total: u64 = per_second.values().sum();
    assert_eq!(total, step.summary.operations, "every operation once");
    let whole: Vec<u64> = per_second
        .values()
        .copied()
        .skip(1)
        .take(per_second.len().saturating_sub(2))
        .collect();
    assert!(whole.len() >= 3, "{per_second:?}");
    for n in &whole {
        // Start = end (ms) − latency (ms, floored): one op at each edge may move over.
        assert!(n.abs_diff(1000) <= 2, "starts per second: {per_second:?}");
    }
}
