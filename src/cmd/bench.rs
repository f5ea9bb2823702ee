//! `iodig run` and `iodig load`: flags to a [`RunRequest`], then the runner does the work.

use crate::cli::{parse_duration, BenchArgs};
use anyhow::Result;
use iodig_iotrace::{TraceMode, TraceOptions, WatchOptions};
use iodig_runner::experiment_file::ExperimentFile;
use iodig_runner::{LoadPolicy, Phase, RunRequest, UsageError, WorkloadRun};
use std::process::ExitCode;

/// Warm-up of a run step unless `--warmup` or an experiment file says otherwise.
const DEFAULT_WARMUP: std::time::Duration = std::time::Duration::from_secs(2);

pub fn run(args: &BenchArgs, phase: Phase) -> Result<ExitCode> {
    let trace = args.trace.as_deref().unwrap_or("auto");
    let mode: TraceMode = trace
        .parse()
        .map_err(|e| UsageError(format!("--trace {trace}: {e}")))?;
    if let Some(n) = args.io_threads {
        iodig_runner::step::set_io_threads(n.into());
    }
    let mut req = RunRequest {
        phase,
        db: args.db.clone().unwrap_or_else(|| "rocksdb".into()),
        workloads: vec![WorkloadRun {
            property_files: args.workload.clone(),
            overrides: args.property.clone(),
            threads: args.threads.clone(),
        }],
        repetitions: 1,
        load_threads: args.load_threads,
        target: args.target,
        duration: args.duration,
        warmup: args.warmup.unwrap_or(DEFAULT_WARMUP),
        out_dir: args.out.clone(),
        trace: TraceOptions {
            mode,
            devices: args.device.clone(),
            slot_ms: args.slot_ms,
            events_file: None,
        },
        load: match (args.reload, args.no_load) {
            (true, _) => LoadPolicy::Always,
            (_, true) => LoadPolicy::Never,
            _ => LoadPolicy::Auto,
        },
        status: args.status,
        seed: args.seed,
        watch: WatchOptions {
            cgroups: args.cgroups.clone(),
            pids: args.pids.clone(),
            no_attribution: false,
        },
        restore_each_step: args.restore_each_step,
        nodes: args.nodes,
        observe: args.observe.clone(),
        faults: args.faults.clone(),
        client: args.client,
        stop_when: args.stop_when.clone(),
        command_line: std::env::args().collect(),
        revision: option_env!("IODIG_GIT_REVISION").map(String::from),
    };
    if let Some(path) = &args.experiment {
        apply_experiment_file(&mut req, path, &args.property)?;
        apply_flags_over_file(&mut req, args, mode);
    }
    if phase == Phase::Load {
        req.warmup = std::time::Duration::ZERO;
    }
    if req.duration == Some(std::time::Duration::ZERO) {
        return Err(UsageError(
            "--duration 0s: a step must last some time; give e.g. --duration 30s, or leave it out to run operationcount operations".into(),
        )
        .into());
    }
    if let Some(t) = req.target.filter(|t| t.is_nan() || *t <= 0.0) {
        return Err(UsageError(format!(
            "--target {t}: the target rate must be above 0 ops/s"
        ))
        .into());
    }
    let stop = iodig_runner::install_stop_handler()?;
    let outcome = iodig_runner::execute(&req, &stop)?;
    Ok(if outcome.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// Replaces the request's workloads and settings with those of an experiment file.
fn apply_experiment_file(
    req: &mut RunRequest,
    path: &std::path::Path,
    overrides: &[String],
) -> Result<()> {
    let file = ExperimentFile::read(path)?;
    let duration = |flag: &str, v: &Option<String>| -> Result<Option<std::time::Duration>> {
        v.as_deref()
            .map(|d| {
                parse_duration(d).map_err(|e| {
                    UsageError(format!("{}: {flag} = {d:?}: {e}", path.display())).into()
                })
            })
            .transpose()
    };
    req.workloads = file.workload_runs(overrides);
    req.repetitions = file.repetitions.max(1);
    if let Some(db) = &file.db {
        req.db = db.clone();
    }
    if let Some(d) = duration("duration", &file.duration)? {
        req.duration = Some(d);
    }
    if let Some(w) = duration("warmup", &file.warmup)? {
        req.warmup = w;
    }
    if let Some(t) = &file.trace {
        req.trace.mode = t
            .parse()
            .map_err(|e| UsageError(format!("{}: trace = {t:?}: {e}", path.display())))?;
    }
    req.target = file.target.or(req.target);
    req.restore_each_step |= file.restore_each_step;
    req.nodes = file.nodes.or(req.nodes);
    if req.observe.is_empty() {
        req.observe = file.observe.clone();
    }
    if req.faults.is_empty() {
        req.faults = file.faults.clone();
    }
    req.stop_when = file.stop_rule().or(req.stop_when.take());
    Ok(())
}

/// Flags given on the command line win over an experiment file's settings, so an example can
/// be shortened or pointed elsewhere without editing it (`-p` already wins over its properties).
fn apply_flags_over_file(req: &mut RunRequest, args: &BenchArgs, trace: TraceMode) {
    if let Some(db) = &args.db {
        req.db = db.clone();
    }
    if !args.threads.is_empty() {
        for w in &mut req.workloads {
            w.threads = args.threads.clone();
        }
    }
    let max_execution_given = args
        .property
        .iter()
        .any(|p| p.split('=').next().map(str::trim) == Some("maxexecutiontime"));
    if args.duration.is_some() || max_execution_given {
        // `-p maxexecutiontime=N` on the command line is YCSB's --duration: it wins too.
        req.duration = args.duration;
    }
    if let Some(w) = args.warmup {
        req.warmup = w;
    }
    if args.trace.is_some() {
        req.trace.mode = trace;
    }
    if args.target.is_some() {
        req.target = args.target;
    }
    if args.nodes.is_some() {
        req.nodes = args.nodes;
    }
    if args.stop_when.is_some() {
        req.stop_when = args.stop_when.clone();
    }
}
