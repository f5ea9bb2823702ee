//! Writing one finished step into the run directory: the YCSB text (also on stdout), the time
//! series, histograms, HDR log, trace, the drives' own statistics, system samples, database
//! events and the step summary, each file atomically, run.json last, so a crash keeps every
//! step that finished.

use crate::observe::Observed;
use crate::rundir::RunDir;
use crate::step::StepResult;
use crate::step_plan::StepPlan;
use anyhow::{Context, Result};
use iodig_db::Status;
use iodig_model::events::DbEvent;
use iodig_model::series;
use iodig_model::trace::TraceDoc;
use iodig_model::{files, StepHistograms, StepSummary};
use iodig_report::outcome::Outcome;
use iodig_report::ycsb;
use std::io::Write;

/// One finished step and everything measured around it.
pub struct StepRecord<'a> {
    /// The step's name (`load`, `workloada-t8`), which names its directory `steps/NN-<name>`.
    pub name: &'a str,
    /// Label of the workload the step ran.
    pub workload: &'a str,
    /// What the step was asked to do.
    pub plan: &'a StepPlan,
    /// What the workers and the collector measured.
    pub result: &'a StepResult,
    /// What the tracer, the sampler and the observed hosts measured around it.
    pub observed: Observed,
    /// The database's flushes and compactions and the step's faults, by start time
    /// (`db-events.jsonl.gz`).
    pub events: Vec<DbEvent>,
}

/// `--events`: moves the stream the tracer wrote beside the steps into the step's directory
/// and names it there; with no stream (diskstats fallback) the trace names none.
fn move_io_events(trace: &mut TraceDoc, dir: &std::path::Path) -> Result<()> {
    let Some(tmp) = trace.events_file.take().map(std::path::PathBuf::from) else {
        return Ok(());
    };
    if !tmp.is_file() {
        return Ok(());
    }
    let to = dir.join(files::IO_EVENTS);
    std::fs::rename(&tmp, &to)
        .with_context(|| format!("cannot move {} to {}", tmp.display(), to.display()))?;
    trace.events_file = Some(files::IO_EVENTS.into());
    Ok(())
}

/// Writes the step's files and appends its summary to run.json.
pub fn record_step(run: &mut RunDir, percentiles: &[f64], rec: StepRecord<'_>) -> Result<()> {
    let StepRecord {
        name,
        workload,
        plan,
        result,
        mut observed,
        events,
    } = rec;
    let index = run.doc.steps.len();
    let (dir, rel) = run.step_dir(index, name)?;
    if let Some(t) = observed.trace.as_mut() {
        move_io_events(t, &dir)?;
    }
    let mut summary = summarize(index, &rel, workload, plan, result, observed.trace.as_ref());
    summary.node_reads = std::mem::take(&mut observed.node_reads);
    summary.node_reads_notes = std::mem::take(&mut observed.node_reads_notes);
    let text = ycsb::step_text(&summary, percentiles);
    {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
    run.write_bytes(&dir, files::YCSB_TEXT, text.as_bytes())?;
    run.recorded(series::write_timeseries(&dir, &result.samples))?;
    run.write_json(
        &dir,
        files::HISTOGRAMS,
        &StepHistograms {
            unit: "us".into(),
            series: result.totals.to_encoded()?,
        },
    )?;
    run.recorded(series::write_hlog(&dir, files::HDR_LOG, &result.hlog))?;
    run.recorded(series::write_hlog(
        &dir,
        files::HDR_SHIFT_LOG,
        &result.shift_hlog,
    ))?;
    if let Some(t) = &observed.trace {
        run.recorded(series::write_trace(&dir, t))?;
    }
    if let Some(d) = &observed.device_stats {
        run.write_json(&dir, files::DEVICE_STATS, d)?;
    }
    if let Some(s) = &observed.sys {
        run.recorded(series::write_sys(&dir, s))?;
    }
    if let Some(j) = &observed.jvm_pauses {
        run.write_json(&dir, files::JVM_PAUSES, j)?;
    }
    if !result.by_node.is_empty() {
        let doc = iodig_model::by_node::ClientByNodeDoc {
            latency: "service time of each request, from the call to the driver's answer".into(),
            seconds: result.by_node.clone(),
        };
        run.write_json(&dir, files::CLIENT_BY_NODE, &doc)?;
    }
    run.recorded(series::write_events(&dir, &events))?;
    let mut nodes = Vec::new();
    for node in observed.nodes {
        let mut step = node.step;
        let node_dir = dir.join("nodes").join(&node.dir_name);
        step.dir = format!("{rel}/nodes/{}", node.dir_name);
        std::fs::create_dir_all(&node_dir)
            .with_context(|| format!("cannot create {}", node_dir.display()))?;
        if let Some(o) = &node.observation {
            // The host's per-IO stream, beside its trace, named by it as the local one is.
            let mut trace = o.trace.clone();
            if let Some(t) = trace.as_mut() {
                t.events_file = None;
                if let Some(csv) = &o.io_events {
                    iodig_model::fsio::write_atomic(
                        &node_dir.join(files::IO_EVENTS),
                        csv.as_bytes(),
                    )?;
                    t.events_file = Some(files::IO_EVENTS.into());
                }
            }
            if let Some(t) = &trace {
                run.recorded(series::write_trace(&node_dir, t))?;
            }
            if let Some(s) = &o.sys {
                run.recorded(series::write_sys(&node_dir, s))?;
            }
            if let Some(j) = &o.jvm_pauses {
                run.write_json(&node_dir, files::JVM_PAUSES, j)?;
            }
            run.recorded(series::write_events(&node_dir, &o.events))?;
            if let Some(d) = &o.device_stats {
                run.write_json(&node_dir, files::DEVICE_STATS, d)?;
            }
            if let Some(e) = &o.trace_error {
                iodig_model::eprintln_lossy!(
                    "warning: block-IO trace of step {name} on {} failed: {e}",
                    step.host
                );
            }
        }
        nodes.push(step);
    }
    if let Some(e) = &observed.trace_error {
        iodig_model::eprintln_lossy!("warning: block-IO trace of step {name} failed: {e}");
    }
    // The report words failed steps from their return codes; say it here too, where the
    // run is being watched.
    for w in Outcome::of(&summary).findings(summary.operations) {
        iodig_model::eprintln_lossy!("warning: step {name}: {w}");
    }
    if summary.operations == 0 && !result.interrupted {
        let w = format!("step {name} measured no operation; give a longer --duration or a larger operationcount");
        iodig_model::eprintln_lossy!("warning: {w}");
        run.doc.notes.push(w);
    }
    summary.nodes = nodes;
    run.write_json(&dir, files::STEP_SUMMARY, &summary)?;
    run.push_step(summary)
}

/// The step's summary as run.json and step.json hold it.
fn summarize(
    index: usize,
    rel: &str,
    label: &str,
    plan: &StepPlan,
    r: &StepResult,
    trace: Option<&TraceDoc>,
) -> StepSummary {
    let status_names: Vec<&str> = Status::ALL.iter().map(|s| s.name()).collect();
    let runtime_ms = r.runtime.as_millis() as u64;
    StepSummary {
        index,
        phase: plan.phase.name().into(),
        dir: rel.into(),
        workload: label.to_string(),
        threads: plan.threads,
        target_ops_per_sec: plan.target_ops_per_sec,
        started_unix_ms: r.started_unix_ms,
        runtime_ms,
        operations: r.operations,
        throughput_ops_per_sec: if runtime_ms > 0 {
            1000.0 * r.operations as f64 / runtime_ms as f64
        } else {
            0.0
        },
        interrupted: r.interrupted,
        ended_early: r.ended_early.clone(),
        series: r.totals.summaries(),
        returns: r.totals.returns(&status_names),
        trace_mode: trace.map(|t| t.mode.clone()),
        trace_note: trace.and_then(|t| t.note.clone()),
        client_cpu_s: Some(r.client_cpu.as_secs_f64()),
        nodes: Vec::new(),
        // The sweep sets it when this step meets its stop rule.
        sweep_stop: None,
        // Set from the observation, beside the nodes' parts.
        node_reads: Default::default(),
        node_reads_notes: Vec::new(),
    }
}
