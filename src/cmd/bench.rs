//! `iodig run` and `iodig load`: flags to a [`RunRequest`], then the runner does the work.

use crate::cli::{parse_duration, BenchArgs};
use anyhow::Result;
use iodig_iotrace::{TraceMode, TraceOptions};
use iodig_runner::experiment_file::ExperimentFile;
use iodig_runner::{LoadPolicy, Phase, RunRequest, UsageError, WorkloadRun};
use std::process::ExitCode;

pub fn run(args: &BenchArgs, phase: Phase) -> Result<ExitCode> {
    let mode: TraceMode = args
        .trace
        .parse()
        .map_err(|e| UsageError(format!("--trace {}: {e}", args.trace)))?;
    if let Some(n) = args.io_threads {
        iodig_runner::step::set_io_threads(n.into());
    }
    let mut req = RunRequest {
        phase,
        db: args.db.clone(),
        workloads: vec![WorkloadRun {
            property_files: args.workload.clone(),
            overrides: args.property.clone(),
            threads: args.threads.clone(),
        }],
        repetitions: 1,
        load_threads: args.load_threads,
        target: args.target,
        duration: args.duration,
        warmup: if phase == Phase::Load {
            std::time::Duration::ZERO
        } else {
            args.warmup
        },
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
        restore_each_step: args.restore_each_step,
        client: args.client,
        command_line: std::env::args().collect(),
    };
    if let Some(path) = &args.experiment {
        apply_experiment_file(&mut req, path, &args.property)?;
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
    Ok(())
}
