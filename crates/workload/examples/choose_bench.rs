//! Microbenchmark: the cost of choosing an operation and a key (key name built) per request
//! distribution, in ns per op. Run with `cargo run --release -p iodig-workload --example choose_bench`.

use iodig_model::props::Properties;
use iodig_workload::{CoreWorkload, WorkloadSpec, REQUEST_DISTRIBUTIONS};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let iterations: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000_000);
    println!("distribution,ns_per_op (median of 5 rounds of {iterations} op+key choices)");
    for dist in REQUEST_DISTRIBUTIONS {
        let mut p = Properties::new();
        for kv in [
            "recordcount=1000000".to_string(),
            "operationcount=10000000".to_string(),
            "readproportion=0.5".to_string(),
            "updateproportion=0.5".to_string(),
            format!("requestdistribution={dist}"),
        ] {
            p.apply_override(&kv).unwrap();
        }
        let spec = WorkloadSpec::from_properties(&p).unwrap();
        let workload = CoreWorkload::new(spec, 1);
        let mut worker = workload.worker(0);
        let mut rounds: Vec<f64> = (0..5)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..iterations {
                    black_box(worker.next_op());
                    black_box(worker.next_key().len());
                }
                start.elapsed().as_nanos() as f64 / iterations as f64
            })
            .collect();
        rounds.sort_by(f64::total_cmp);
        println!("{dist},{:.1}", rounds[2]);
    }
}
