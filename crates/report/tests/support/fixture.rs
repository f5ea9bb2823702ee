//! A synthetic run directory built from the model types, for tests, the generator example and
//! the report benchmark: a thread sweep whose throughput saturates and whose tail latency bends,
//! periodic memtable flushes (write bursts, queue-depth spikes, slow reads) and compactions, and
//! a block-IO trace aggregated from simulated raw IO events exactly as the tracer aggregates
//! them (per device × op totals, size and latency histograms, per-second series with 100 ms
//! slot maxima). Deterministic for a given spec.

use anyhow::Result;
use iodig_model::fsio::write_json_atomic;
use iodig_model::sys::{CpuPct, HostFacts, MemSample, SysDoc, SysSample};
use iodig_model::trace::{Bucket, DeviceSecond, DeviceTrace, Latency, OpSecond, OpTrace, TraceDoc};
use iodig_model::{
    files, Environment, OpKind, RunConfig, RunDoc, Sample, StepHistograms, StepSummary,
    StorageInfo, ToolInfo,
};
use iodig_stats::{Entry, IntervalMode, SeriesSet};
use std::collections::BTreeMap;
use std::path::Path;

use iodig_report::data::DbEvent;

/// What to generate.
#[derive(Debug, Clone)]
pub struct FixtureSpec {
    pub workloads: Vec<String>,
    pub threads: Vec<u64>,
    pub repetitions: usize,
    /// Measured seconds per step.
    pub secs: u64,
    /// Database nodes, each with its own traced device.
    pub nodes: usize,
    /// Raw IO events simulated per step (spread over nodes and seconds).
    pub io_events_per_step: u64,
    /// Client latency entries recorded into the HDR histograms per step.
    pub latency_samples_per_step: u64,
    /// Multiplies throughput and divides latency (a faster device).
    pub speed: f64,
    pub seed: u64,
    /// Seconds between flushes on a node; 0 = no database events.
    pub flush_every_secs: u64,
    pub with_histograms: bool,
    /// CPUs of the hosts (the system samples' `host.cpus`).
    pub cpus: u32,
    /// Per-CPU samples per system sample (0: none, as the sampler without per-CPU).
    pub per_cpu_samples: u32,
}

impl Default for FixtureSpec {
    fn default() -> Self {
        FixtureSpec {
            workloads: vec!["workloada".into()],
            threads: vec![8, 16, 32, 64, 128],
            repetitions: 1,
            secs: 30,
            nodes: 1,
            io_events_per_step: 20_000,
            latency_samples_per_step: 5_000,
            speed: 1.0,
            seed: 42,
            flush_every_secs: 10,
            with_histograms: true,
            cpus: 16,
            per_cpu_samples: 0,
        }
    }
}

/// splitmix64: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn f(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Exponential with the given mean.
    fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f()).ln()
    }
}

/// The base start time of generated runs: 2024-01-01 00:00:00 UTC.
pub const T0_MS: u64 = 1_704_067_200_000;

/// Throughput model: saturates near 64 threads.
fn model_ops(threads: u64, speed: f64) -> f64 {
    50_000.0 * speed * (1.0 - (-(threads as f64) / 24.0).exp())
}

/// Latency multiplier: queueing grows sharply past saturation.
fn model_lat(threads: u64, speed: f64) -> f64 {
    let t = threads as f64;
    (1.0 + (t / 48.0).powi(3)) / speed
}

fn ops_of(workload: &str) -> Vec<OpKind> {
    match workload {
        "workloadc" => vec![OpKind::Read],
        "workloadd" | "workloade" => vec![OpKind::Read, OpKind::Insert],
        _ => vec![OpKind::Read, OpKind::Update],
    }
}

fn in_flush(events: &[DbEvent], kind: &str, a: u64, b: u64) -> bool {
    events
        .iter()
        .any(|e| e.kind == kind && e.start_unix_ms < b && e.end_unix_ms.unwrap_or(u64::MAX) > a)
}

fn size_bucket(size: u64) -> (u64, u64) {
    if size <= 1 << 20 {
        let upper = size.div_ceil(4096).max(1) * 4096;
        (upper - 4096, upper)
    } else {
        let upper = size.next_power_of_two();
        (upper / 2, upper)
    }
}

fn lat_bucket(ns: u64) -> (u64, u64) {
    let k = 63 - ns.max(1).leading_zeros();
    (1u64 << k, 1u64 << (k + 1))
}

/// Per-op accumulators of one device.
#[derive(Default)]
struct OpAcc {
    ios: u64,
    bytes: u64,
    size: BTreeMap<(u64, u64), (u64, u64)>,
    lat: BTreeMap<(u64, u64), u64>,
    lat_max: u64,
}

fn quantile(buckets: &BTreeMap<(u64, u64), u64>, q: f64) -> u64 {
    let total: u64 = buckets.values().sum();
    let want = (q * total as f64).ceil() as u64;
    let mut seen = 0;
    for ((_, upper), c) in buckets {
        seen += c;
        if seen >= want.max(1) {
            return *upper;
        }
    }
    0
}

fn latency(b: &BTreeMap<(u64, u64), u64>, max: u64) -> Latency {
    Latency {
        count: b.values().sum(),
        max_ns: max,
        p50_ns: quantile(b, 0.5),
        p90_ns: quantile(b, 0.9),
        p99_ns: quantile(b, 0.99),
        p999_ns: quantile(b, 0.999),
        p9999_ns: quantile(b, 0.9999),
        buckets: b
            .iter()
            .map(|((l, u), c)| Bucket {
                lower: *l,
                upper: *u,
                count: *c,
            })
            .collect(),
    }
}

const SIM_OPS: [&str; 3] = ["read", "write", "discard"];

/// Simulates `n` raw IOs over the step window on `nodes` devices and aggregates them.
fn trace(spec: &FixtureSpec, start: u64, secs: u64, events: &[DbEvent], rng: &mut Rng) -> TraceDoc {
    let slot_ms = 100u64;
    let slots = (secs * 1000 / slot_ms) as usize;
    let mut devices = Vec::new();
    let per_dev = spec.io_events_per_step / spec.nodes.max(1) as u64;
    for d in 0..spec.nodes {
        let node = format!("127.0.0.{}", d + 1);
        let mine: Vec<DbEvent> = events.iter().filter(|e| e.node == node).cloned().collect();
        // Slot weights: flush slots get many large writes; reads are steady.
        let mut acc: [OpAcc; 3] = Default::default();
        // Per slot and op: ios, bytes; per second and op: latency log2 histogram + max.
        let mut slot_ios = vec![[0u64; 3]; slots];
        let mut slot_bytes = vec![[0u64; 3]; slots];
        let mut sec_lat: Vec<[BTreeMap<(u64, u64), u64>; 3]> =
            (0..secs).map(|_| Default::default()).collect();
        let mut sec_lat_max = vec![[0u64; 3]; secs as usize];
        let mut sec_qd_max = vec![0u64; secs as usize];
        let flushing: Vec<bool> = (0..slots)
            .map(|s| {
                let a = start + s as u64 * slot_ms;
                in_flush(&mine, "flush", a, a + slot_ms)
            })
            .collect();
        let n_flush_slots = flushing.iter().filter(|f| **f).count() as u64;
        for _ in 0..per_dev {
            // 1 in 250 events is a write outside flushes; flushes add bursts of 512 KiB writes.
            let r = rng.f();
            let (op, slot) = if n_flush_slots > 0 && r < 0.02 {
                // A flush write: pick a flush slot.
                let k = (rng.next() % n_flush_slots) as usize;
                let slot = flushing
                    .iter()
                    .enumerate()
                    .filter(|f| *f.1)
                    .nth(k)
                    .map(|f| f.0)
                    .unwrap_or(0);
                (1usize, slot)
            } else if r < 0.024 {
                (1, (rng.next() % slots as u64) as usize)
            } else if r < 0.02405 {
                (2, (rng.next() % slots as u64) as usize)
            } else {
                (0, (rng.next() % slots as u64) as usize)
            };
            let busy = flushing[slot];
            let size = match op {
                0 => 4096,
                1 if busy => {
                    if rng.f() < 0.74 {
                        508 * 1024 + (rng.next() % 2) * 4096
                    } else {
                        4096 * (1 + rng.next() % 64)
                    }
                }
                1 => 4096 * (1 + rng.next() % 8),
                _ => (64u64 << 20) * (1 + rng.next() % 4),
            };
            let lat_ns = match op {
                0 => rng.exp(if busy { 900_000.0 } else { 90_000.0 }) as u64 + 20_000,
                1 => rng.exp(if busy { 8_000_000.0 } else { 300_000.0 }) as u64 + 30_000,
                _ => rng.exp(2_000_000.0) as u64,
            };
            let a = &mut acc[op];
            a.ios += 1;
            a.bytes += size;
            let e = a.size.entry(size_bucket(size)).or_default();
            e.0 += 1;
            e.1 += size;
            *a.lat.entry(lat_bucket(lat_ns)).or_default() += 1;
            a.lat_max = a.lat_max.max(lat_ns);
            slot_ios[slot][op] += 1;
            slot_bytes[slot][op] += size;
            let sec = slot / 10;
            *sec_lat[sec][op].entry(lat_bucket(lat_ns)).or_default() += 1;
            sec_lat_max[sec][op] = sec_lat_max[sec][op].max(lat_ns);
            if busy {
                let qd = 20 + rng.next() % 780;
                sec_qd_max[sec] = sec_qd_max[sec].max(qd);
            }
        }
        let mut seconds = Vec::with_capacity(secs as usize);
        for s in 0..secs as usize {
            let mut ops = BTreeMap::new();
            let sl = s * 10..(s * 10 + 10);
            for (i, op) in SIM_OPS.iter().enumerate() {
                let ios: u64 = sl.clone().map(|k| slot_ios[k][i]).sum();
                let bytes: u64 = sl.clone().map(|k| slot_bytes[k][i]).sum();
                let max_b = sl.clone().map(|k| slot_bytes[k][i]).max().unwrap_or(0);
                let max_i = sl.clone().map(|k| slot_ios[k][i]).max().unwrap_or(0);
                ops.insert(
                    op.to_string(),
                    OpSecond {
                        ios,
                        bytes,
                        mb_s: bytes as f64 / 1e6,
                        mb_s_max: max_b as f64 * 10.0 / 1e6,
                        iops: ios as f64,
                        iops_max: max_i as f64 * 10.0,
                        lat_max_ns: (ios > 0).then_some(sec_lat_max[s][i]),
                        lat_p99_ns: (ios > 0).then(|| quantile(&sec_lat[s][i], 0.99)),
                        queue_p99_ns: None,
                        queue_max_ns: None,
                        lat_hist: sec_lat[s][i]
                            .iter()
                            .map(|(&(lower, upper), &count)| Bucket {
                                lower,
                                upper,
                                count,
                            })
                            .collect(),
                        await_ms: None,
                        avg_size_bytes: (ios > 0).then(|| bytes as f64 / ios as f64),
                    },
                );
            }
            ops.insert("flush".into(), OpSecond::default());
            let busy = flushing[s * 10..s * 10 + 10].iter().any(|f| *f);
            seconds.push(DeviceSecond {
                unix_ms: start + s as u64 * 1000,
                covered_ms: 1000,
                ops,
                qd_mean: Some(if busy { 200.0 } else { 20.0 } + rng.f() * 5.0),
                qd_max: Some(sec_qd_max[s].max(25 + rng.next() % 10)),
                util_pct: None,
            });
        }
        let mut op_traces = BTreeMap::new();
        for (i, op) in SIM_OPS.iter().enumerate() {
            let a = &acc[i];
            let mut lat = BTreeMap::new();
            lat.insert("device".to_string(), latency(&a.lat, a.lat_max));
            op_traces.insert(
                op.to_string(),
                OpTrace {
                    ios: a.ios,
                    bytes: a.bytes,
                    size_hist: a
                        .size
                        .iter()
                        .map(|((l, u), c)| Bucket {
                            lower: *l,
                            upper: *u,
                            count: c.0,
                        })
                        .collect(),
                    size_bytes_hist: a
                        .size
                        .iter()
                        .map(|((l, u), c)| Bucket {
                            lower: *l,
                            upper: *u,
                            count: c.1,
                        })
                        .collect(),
                    latency: lat,
                },
            );
        }
        op_traces.insert("flush".into(), OpTrace::default());
        devices.push(DeviceTrace {
            name: format!("nvme{d}n1"),
            dev: format!("259:{d}"),
            info: None,
            ops: op_traces,
            seconds,
            diskstats_check: Vec::new(),
        });
    }
    TraceDoc {
        mode: "ebpf".into(),
        note: None,
        attach: Some("tp_btf".into()),
        start_unix_ms: start,
        end_unix_ms: start + secs * 1000,
        slot_ms: slot_ms as u32,
        histograms: true,
        devices,
        ..Default::default()
    }
}

fn db_events(spec: &FixtureSpec, start: u64, secs: u64) -> Vec<DbEvent> {
    let mut ev = Vec::new();
    if spec.flush_every_secs == 0 {
        return ev;
    }
    for n in 0..spec.nodes {
        let node = format!("127.0.0.{}", n + 1);
        let offset = 3 + n as u64 * 2;
        let mut t = offset;
        while t + 3 < secs {
            ev.push(DbEvent {
                kind: "flush".into(),
                start_unix_ms: start + t * 1000 + 200,
                end_unix_ms: Some(start + t * 1000 + 2_700),
                bytes: Some(64 << 20),
                node: node.clone(),
                detail: "ycsb.usertable".into(),
            });
            if (t / spec.flush_every_secs) % 4 == 3 && t + 8 < secs {
                ev.push(DbEvent {
                    kind: "compaction".into(),
                    start_unix_ms: start + t * 1000 + 3_000,
                    end_unix_ms: Some(start + t * 1000 + 8_000),
                    bytes: Some(256 << 20),
                    node: node.clone(),
                    detail: "ycsb.usertable 4 sstables".into(),
                });
            }
            t += spec.flush_every_secs;
        }
    }
    ev.sort_by_key(|e| e.start_unix_ms);
    ev
}

/// One generated step: its summary and files.
#[allow(clippy::too_many_arguments)]
fn step(
    spec: &FixtureSpec,
    run_dir: &Path,
    index: usize,
    workload: &str,
    threads: u64,
    start: u64,
    rng: &mut Rng,
) -> Result<StepSummary> {
    let label = format!("{workload}-t{threads}");
    let rel = format!("steps/{index:02}-{label}");
    let dir = run_dir.join(&rel);
    std::fs::create_dir_all(&dir)?;
    let secs = spec.secs;
    let events = db_events(spec, start, secs);
    let ops = ops_of(workload);
    let base_ops = model_ops(threads, spec.speed) * (0.97 + 0.06 * rng.f());
    let lat_scale = model_lat(threads, spec.speed);
    // Whole-step histograms from latency samples spread over the window.
    let mut whole = SeriesSet::new();
    let mut per_sec: Vec<SeriesSet> = (0..secs).map(|_| SeriesSet::new()).collect();
    let per_sec_n = (spec.latency_samples_per_step / secs.max(1)).max(20);
    for s in 0..secs {
        let a = start + s * 1000;
        let busy = in_flush(&events, "flush", a, a + 1000);
        for i in 0..per_sec_n {
            let op = ops[(i as usize) % ops.len()];
            let mean = if op == OpKind::Read { 200.0 } else { 120.0 }
                * lat_scale
                * if busy { 4.0 } else { 1.0 };
            let mut us = rng.exp(mean) + 50.0;
            if rng.f() < 0.002 {
                us *= 5.0;
            }
            let e = Entry {
                op,
                status: 0,
                ok: true,
                service_us: us as u32,
                intended_us: us as u32,
                end_ms: 0,
            };
            per_sec[s as usize].record(&e, IntervalMode::Op);
        }
        whole.merge(&per_sec[s as usize]);
    }
    let mut samples = Vec::with_capacity(secs as usize);
    let mut total_ops = 0u64;
    for (s, set) in per_sec.iter().enumerate() {
        let a = start + s as u64 * 1000;
        let busy = in_flush(&events, "flush", a, a + 1000);
        let n = (base_ops * if busy { 0.8 } else { 1.0 } * (0.95 + 0.1 * rng.f())).round() as u64;
        total_ops += n;
        samples.push(Sample {
            t: (s + 1) as f64,
            unix_ms: a + 1000,
            secs: 1.0,
            operations: n,
            ops_per_sec: n as f64,
            series: set.summaries(),
        });
    }
    let runtime_ms = secs * 1000;
    let summary = StepSummary {
        index,
        phase: "run".into(),
        dir: rel,
        workload: workload.into(),
        threads,
        target_ops_per_sec: None,
        started_unix_ms: start,
        runtime_ms,
        operations: total_ops,
        throughput_ops_per_sec: total_ops as f64 * 1000.0 / runtime_ms as f64,
        interrupted: false,
        series: whole.summaries(),
        returns: whole.returns(&["OK"]),
        trace_mode: Some("ebpf".into()),
        trace_note: None,
        client_cpu_s: Some(total_ops as f64 * 12e-6),
        nodes: Vec::new(),
        sweep_stop: None,
        node_reads: Default::default(),
        node_reads_notes: Vec::new(),
        ended_early: None,
    };
    write_json_atomic(&dir.join(files::STEP_SUMMARY), &summary)?;
    iodig_model::series::write_timeseries(&dir, &samples)?;
    if spec.with_histograms {
        write_json_atomic(
            &dir.join(files::HISTOGRAMS),
            &StepHistograms {
                unit: "us".into(),
                series: whole.to_encoded()?,
            },
        )?;
    }
    if spec.io_events_per_step > 0 {
        iodig_model::series::write_trace(&dir, &trace(spec, start, secs, &events, rng))?;
    }
    let sys = SysDoc {
        host: HostFacts {
            cpus: spec.cpus,
            mem_total_bytes: 64 << 30,
            clock_ticks_per_s: 100,
            page_size_bytes: 4096,
            net_interfaces: vec!["eth0".into()],
        },
        interval_ms: 1000,
        aligned: true,
        started_unix_ms: start,
        ended_unix_ms: start + runtime_ms,
        processes: Vec::new(),
        samples: (0..secs)
            .map(|s| {
                let a = start + s * 1000;
                let busy = in_flush(&events, "flush", a, a + 1000);
                let iowait = if busy { 12.0 } else { 2.0 } + rng.f();
                let user = 35.0 + 10.0 * rng.f();
                // One CPU runs hotter (a compaction thread), the others near the mean.
                let per_cpu = (0..spec.per_cpu_samples)
                    .map(|c| {
                        let u = if c == 3 {
                            95.0
                        } else {
                            user * (0.8 + 0.4 * rng.f())
                        };
                        CpuPct {
                            user: u.min(100.0 - iowait),
                            iowait,
                            idle: (100.0 - u - iowait).max(0.0),
                            ..Default::default()
                        }
                    })
                    .collect();
                SysSample {
                    per_cpu,
                    unix_ms: a + 1000,
                    secs: 1.0,
                    cpu: CpuPct {
                        user,
                        system: 8.0,
                        iowait,
                        idle: 100.0 - user - 8.0 - iowait,
                        ..Default::default()
                    },
                    mem: MemSample {
                        total_bytes: 64 << 30,
                        dirty_bytes: if busy {
                            40 << 20
                        } else {
                            (s % spec.flush_every_secs.max(1)) * (30 << 20)
                                / spec.flush_every_secs.max(1)
                        },
                        writeback_bytes: if busy { 30 << 20 } else { 0 },
                        ..Default::default()
                    },
                    ..Default::default()
                }
            })
            .collect(),
        notes: Vec::new(),
        per_cpu_summarised: None,
    };
    iodig_model::series::write_sys(&dir, &sys)?;
    if !events.is_empty() {
        write_json_atomic(&dir.join(files::EVENTS), &events)?;
    }
    Ok(summary)
}

/// Writes a complete run directory at `run_dir` and returns its run.json document.
pub fn generate(spec: &FixtureSpec, run_dir: &Path) -> Result<RunDoc> {
    std::fs::create_dir_all(run_dir)?;
    let mut rng = Rng(spec.seed);
    let mut steps = Vec::new();
    let mut start = T0_MS;
    for w in &spec.workloads {
        for &t in &spec.threads {
            for _ in 0..spec.repetitions {
                steps.push(step(spec, run_dir, steps.len(), w, t, start, &mut rng)?);
                start += (spec.secs + 5) * 1000;
            }
        }
    }
    let doc = RunDoc {
        schema_version: iodig_model::SCHEMA_VERSION,
        tool: ToolInfo {
            name: "iodig".into(),
            version: "0.1.0".into(),
            revision: None,
            command_line: vec!["iodig".into(), "run".into(), "(generated)".into()],
        },
        started_unix_ms: T0_MS,
        updated_unix_ms: start,
        status: "completed".into(),
        config: RunConfig {
            db: "cassandra".into(),
            property_files: spec.workloads.clone(),
            properties: [
                ("recordcount", "1000000"),
                ("fieldcount", "4"),
                ("fieldlength", "1024"),
                ("requestdistribution", "uniform"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            threads: spec.threads.clone(),
            target_ops_per_sec: None,
            warmup_secs: 2.0,
            seed: spec.seed,
            trace: "auto".into(),
            stop_when: None,
            label: None,
        },
        environment: Environment {
            hostname: "lab1".into(),
            kernel: "6.1.0-generated".into(),
            os: None,
            cpu_model: "Generated CPU @ 3.0GHz".into(),
            cpus: 16,
            memory_bytes: 64 << 30,
            data_dir: Some("/data/cassandra".into()),
            storage: Some(StorageInfo {
                mount_point: "/data".into(),
                fs_type: "xfs".into(),
                source: "/dev/nvme0n1".into(),
                device: Some("nvme0n1".into()),
                dev_t: Some("259:0".into()),
                model: Some("Generated NVMe SSD".into()),
                rotational: Some(false),
                scheduler: Some("none".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        steps,
        notes: Vec::new(),
        cluster: None,
        writer: None,
        integrity: None,
    };
    write_json_atomic(&run_dir.join(files::RUN), &doc)?;
    Ok(doc)
}

/// Rewrites a generated run's run.json and each step's summary.json after `edit`: how tests
/// turn a generated sweep into a load, an interrupted run, a remote database or another config.
pub fn edit_run(run_dir: &Path, edit: impl FnOnce(&mut RunDoc)) -> Result<RunDoc> {
    let path = run_dir.join(files::RUN);
    let mut doc: RunDoc = iodig_model::fsio::read_json(&path)?;
    edit(&mut doc);
    for s in &doc.steps {
        write_json_atomic(&run_dir.join(&s.dir).join(files::STEP_SUMMARY), s)?;
    }
    write_json_atomic(&path, &doc)?;
    Ok(doc)
}

/// Makes step `index` one whose operations all failed with `code`, as the runner records it:
/// every return code `code`, latencies only in `<OP>-FAILED` series, and no histograms.json
/// (the runner's holds no successful series then; the report falls back to the summaries).
pub fn fail_step(run_dir: &Path, index: usize, code: &str) -> Result<RunDoc> {
    let doc = edit_run(run_dir, |d| {
        let s = &mut d.steps[index];
        for codes in s.returns.values_mut() {
            let n: u64 = codes.values().sum();
            *codes = BTreeMap::from([(code.to_string(), n)]);
        }
        s.series = std::mem::take(&mut s.series)
            .into_iter()
            .map(|(k, v)| (format!("{k}-FAILED"), v))
            .collect();
    })?;
    let hist = run_dir.join(&doc.steps[index].dir).join(files::HISTOGRAMS);
    if hist.exists() {
        std::fs::remove_file(hist)?;
    }
    Ok(doc)
}
