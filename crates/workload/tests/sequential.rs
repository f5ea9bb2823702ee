//! `requestdistribution=sequential` against YCSB's `SequentialGenerator(insertstart,
//! insertstart + insertcount - 1)`: one counter shared by every worker, key numbers from
//! `insertstart` in order, back to `insertstart` after `insertcount` of them (YCSB's
//! `countstart + counter.getAndIncrement() % interval`), never past the last key loaded.

use iodig_model::props::Properties;
use iodig_workload::core::CoreWorkload;
use iodig_workload::spec::WorkloadSpec;

fn workload(pairs: &[(&str, &str)]) -> std::sync::Arc<CoreWorkload> {
    let mut p = Properties::new();
    for (k, v) in pairs {
        p.set(k, *v);
    }
    CoreWorkload::new(WorkloadSpec::from_properties(&p).unwrap(), 42)
}

/// YCSB's SequentialGenerator, as its Java reads.
fn ycsb_sequential(countstart: u64, countend: u64, draws: usize) -> Vec<u64> {
    let interval = countend - countstart + 1;
    (0..draws as u64)
        .map(|counter| countstart + counter % interval)
        .collect()
}

#[test]
fn one_worker_draws_ycsbs_sequence_wrapping_after_insertcount() {
    let w = workload(&[
        ("recordcount", "1000"),
        ("insertstart", "100"),
        ("insertcount", "7"),
        ("requestdistribution", "sequential"),
    ]);
    let mut worker = w.worker(0);
    let got: Vec<u64> = (0..20).map(|_| worker.next_keynum()).collect();
    assert_eq!(got, ycsb_sequential(100, 106, 20));
}

#[test]
fn workers_share_one_counter_so_together_they_draw_each_key_in_turn() {
    let w = workload(&[("recordcount", "50"), ("requestdistribution", "sequential")]);
    let mut a = w.worker(0);
    let mut b = w.worker(1);
    let mut got = Vec::new();
    for _ in 0..60 {
        got.push(a.next_keynum());
        got.push(b.next_keynum());
    }
    // Interleaved, the two workers' draws are YCSB's one sequence: 0..=49, then again.
    assert_eq!(got, ycsb_sequential(0, 49, 120));
}
