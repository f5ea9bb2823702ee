//! Generates a synthetic run directory for the report benchmark and for looking at a report
//! without a lab: `cargo run --release -p iodig-report --example gen_run -- OUT_DIR [--big]`.
//! `--big` is the benchmark's size: one hour of per-second samples from 4 nodes and 10 million
//! simulated raw IO events aggregated into trace.json, each node also observed "over SSH" (its
//! own `nodes/HOST/` trace and samples, ownership in run.json) and the step kept per client for
//! 2 clients, as `run --observe` and `merge` leave them. `--sweep` is the node story's
//! benchmark: 4 observed nodes × 8 thread counts × 10-minute steps. `--brief` is a brief-scale
//! experiment (issue 36): 8 thread counts × 5 workloads × 60-minute steps (40 step-hours), one
//! client and 4 observed nodes of 96 CPUs with per-CPU samples; `--brief-steps N` keeps its
//! size per step with N steps (a smaller run of the same shape, to see how memory grows).

// The fixture is test support, not library code: the example compiles the same file.
#[path = "../tests/support/fixture.rs"]
#[allow(dead_code)] // edit_run and fail_step serve the tests only
mod fixture;

use fixture::{edit_run, generate, FixtureSpec};
use iodig_model::cluster::{ClockSample, ClusterDoc, HostNode, NodeFacts, NodeStep, ObservedHost};
use iodig_model::files;
use iodig_model::fsio::read_json;
use iodig_model::series;
use std::path::{Path, PathBuf};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().unwrap_or_else(|| "generated-run".into()));
    let flags: Vec<String> = args.collect();
    let big = flags.iter().any(|a| a == "--big");
    let sweep = flags.iter().any(|a| a == "--sweep");
    let brief_steps = flags
        .iter()
        .position(|a| a == "--brief-steps")
        .and_then(|i| flags.get(i + 1))
        .map(|n| n.parse::<usize>())
        .transpose()?
        .or_else(|| flags.iter().any(|a| a == "--brief").then_some(40));
    let spec = if let Some(steps) = brief_steps {
        let workloads = [
            "workloada",
            "workloadb",
            "workloadc",
            "workloadd",
            "workloadf",
        ];
        let threads = [64, 96, 128, 192, 256, 384, 512, 1024];
        // The first `steps` of the 5 × 8 grid, workloads first, as a sweep runs them.
        let n_workloads = steps.div_ceil(threads.len()).clamp(1, workloads.len());
        FixtureSpec {
            workloads: workloads[..n_workloads]
                .iter()
                .map(|w| (*w).to_string())
                .collect(),
            threads: threads[..steps.min(threads.len())].to_vec(),
            secs: 3600,
            nodes: 4,
            io_events_per_step: 2_000_000,
            latency_samples_per_step: 360_000,
            flush_every_secs: 60,
            cpus: 96,
            per_cpu_samples: 96,
            ..Default::default()
        }
    } else if sweep {
        FixtureSpec {
            workloads: vec!["workloada".into()],
            threads: vec![64, 96, 128, 192, 256, 384, 512, 1024],
            secs: 600,
            nodes: 4,
            io_events_per_step: 2_000_000,
            latency_samples_per_step: 600_000,
            flush_every_secs: 60,
            ..Default::default()
        }
    } else if big {
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
    let mut doc = generate(&spec, &out)?;
    if big {
        doc = observed_nodes(&out, spec.nodes, 2)?;
    } else if sweep || brief_steps.is_some() {
        doc = observed_nodes(&out, spec.nodes, 0)?;
    }
    eprintln!(
        "generated {} ({} steps) in {:.1}s",
        out.display(),
        doc.steps.len(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Splits each step's trace into one per node (its own device) under `nodes/HOST/`, with the
/// system samples, records the hosts, their clocks and the ring's ownership in run.json, and
/// keeps the step's files once per client under `clients/<i>/`.
fn observed_nodes(
    run_dir: &Path,
    nodes: usize,
    clients: usize,
) -> anyhow::Result<iodig_model::RunDoc> {
    let hosts: Vec<String> = (1..=nodes).map(|i| format!("10.0.0.{i}")).collect();
    let doc: iodig_model::RunDoc = read_json(&run_dir.join(files::RUN))?;
    let mut steps_nodes = Vec::new();
    for step in &doc.steps {
        let dir = run_dir.join(&step.dir);
        let trace = series::read_trace(&dir)?.unwrap_or_default();
        let sys = series::read_sys(&dir)?;
        let mut per_step = Vec::new();
        for (i, host) in hosts.iter().enumerate() {
            let node_dir = dir.join("nodes").join(host);
            std::fs::create_dir_all(&node_dir)?;
            let mut t = trace.clone();
            t.devices = t.devices.iter().skip(i).take(1).cloned().collect();
            series::write_trace(&node_dir, &t)?;
            if let Some(s) = &sys {
                series::write_sys(&node_dir, s)?;
            }
            series::write_events(&node_dir, &[])?;
            per_step.push(NodeStep {
                host: host.clone(),
                dir: format!("{}/nodes/{host}", step.dir),
                clock_before: Some(ClockSample {
                    offset_ms: 0.4 * i as f64,
                    rtt_ms: 0.3,
                }),
                clock_after: Some(ClockSample {
                    offset_ms: 0.5 * i as f64,
                    rtt_ms: 0.3,
                }),
                applied_offset_ms: 0,
                trace_mode: Some("ebpf".into()),
                partial: None,
                partial_from_unix_ms: None,
                notes: Vec::new(),
            });
        }
        for c in 1..=clients {
            let client_dir = dir.join("clients").join(c.to_string());
            std::fs::create_dir_all(&client_dir)?;
            let series_files = series::present(&dir);
            for f in [files::TRACE, files::SYSSTAT, files::EVENTS]
                .into_iter()
                .chain(series_files)
            {
                if dir.join(f).is_file() {
                    std::fs::copy(dir.join(f), client_dir.join(f))?;
                }
            }
        }
        steps_nodes.push(per_step);
    }
    let n = nodes as f64;
    edit_run(run_dir, |doc| {
        for (s, per_step) in doc.steps.iter_mut().zip(steps_nodes) {
            s.nodes = per_step;
        }
        doc.cluster = Some(ClusterDoc {
            keyspace: Some("ycsb".into()),
            replication: Some("SimpleStrategy rf=3".into()),
            nodes: hosts
                .iter()
                .map(|h| NodeFacts {
                    address: h.clone(),
                    datacenter: Some("dc1".into()),
                    rack: Some("rack1".into()),
                    version: Some("5.0.6".into()),
                    tokens: 16,
                    owns_pct: Some(300.0 / n),
                })
                .collect(),
            observed: hosts
                .iter()
                .enumerate()
                .map(|(i, h)| ObservedHost {
                    host: h.clone(),
                    hostname: format!("db{}", i + 1),
                    boot_id: format!("boot-{i}"),
                    agent: "generated".into(),
                    node: Some(HostNode {
                        address: format!("{h}:9042"),
                        pid: 1000 + i as u32,
                        data_dirs: vec!["/data".into()],
                        ..Default::default()
                    }),
                    devices: vec![format!("nvme{i}n1")],
                    notes: Vec::new(),
                    environment: Some(iodig_model::Environment {
                        hostname: format!("db{}", i + 1),
                        kernel: "4.18.0-425.3.1.el8.x86_64".into(),
                        os: Some("AlmaLinux 8.7 (Stone Smilodon)".into()),
                        cpu_model: "Generated CPU @ 2.4GHz".into(),
                        cpus: 96,
                        memory_bytes: 512 << 30,
                        ..Default::default()
                    }),
                })
                .collect(),
            notes: Vec::new(),
        });
    })
}
