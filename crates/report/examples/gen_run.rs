//! Generates a synthetic run directory for the report benchmark and for looking at a report
//! without a lab: `cargo run --release -p iodig-report --example gen_run -- OUT_DIR [--big]`.
//! `--big` is the benchmark's size: one hour of per-second samples from 4 nodes and 10 million
//! simulated raw IO events aggregated into trace.json.

// The fixture is test support, not library code: the example compiles the same file.
#[path = "../tests/support/fixture.rs"]
#[allow(dead_code)] // edit_run and fail_step serve the tests only
mod fixture;

use fixture::{generate, FixtureSpec};
use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().unwrap_or_else(|| "generated-run".into()));
    let big = args.any(|a| a == "--big");
    let spec = if big {
        FixtureSpec {
            workloads: vec!["workloada".into()],
            threads: vec![32],
            secs: 3600,
            nodes: 4,
            io_events_per_step: 10_000_000,
            latency_samples_per_step: 3_600_000,
            flush_every_secs: 60,
            ..Default::default()
        }
    } else {
        FixtureSpec {
            workloads: vec!["workloada".into(), "workloadc".into()],
            secs: 60,
            nodes: 2,
            io_events_per_step: 200_000,
            ..Default::default()
        }
    };
    let t = std::time::Instant::now();
    let doc = generate(&spec, &out)?;
    eprintln!(
        "generated {} ({} steps) in {:.1}s",
        out.display(),
        doc.steps.len(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
