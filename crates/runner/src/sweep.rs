//! The sweep, the same for every binding and deployment: load if needed, then each workload ×
//! thread count × repetition, observed and recorded step by step, then the integrity check,
//! the run directory finished and the report. A deployment runs it over the database it opened
//! ([`deployment::Sweeper`]).

use crate::deployment::{Deployment, Restore, Sweeper};
use crate::environment;
use crate::errors::db_error;
use crate::errors::UsageError;
use crate::live::{LiveEvent, LiveHub, LiveSink, LiveStep};
use crate::observe::{preflight_trace, trace_options, Observer};
use crate::plan::{Plan, ResolvedWorkload};
use crate::progress::{Progress, ProgressMode};
use crate::recording::{record_step, StepRecord};
use crate::request::RunOutcome;
use crate::rundir::RunDir;
use crate::start_at::StartSchedule;
use crate::step::run_step;
use crate::step_plan::{Phase, StepPlan};
use crate::utc::unix_ms;
use anyhow::{Context, Result};
use iodig_db::DbFactory;
use iodig_iotrace::{TraceMode, TraceOptions};
use iodig_model::{RunDoc, StepSummary, ToolInfo, SCHEMA_VERSION};
use iodig_workload::integrity::Ledger;
use iodig_workload::CoreWorkload;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The generic sweep, as [`crate::execute`] hands it to the deployment.
pub struct GenericSweep;

/// The sweep of one run over an open binding in its deployment.
struct Sweep<'a, F: DbFactory, D: Deployment<F>> {
    plan: &'a Plan,
    factory: &'a F,
    deployment: &'a D,
    /// Tracer options with the data's device added; `None` when tracing is off.
    trace: Option<TraceOptions>,
    run: RunDir,
    progress: Progress,
    stop: &'a AtomicBool,
    /// `--start-at`: when each step begins, common to all clients.
    schedule: Option<StartSchedule>,
    /// The acknowledged versioned writes of every step (`versionedwrites`), saved after each.
    ledger: Option<Arc<Ledger>>,
    /// The ledger's file in the run directory, appended to by every step's saves.
    ledger_journal: Arc<std::sync::Mutex<crate::verify::LedgerJournal>>,
    /// Each recorded step's directory and the window its database events were read for.
    event_windows: Vec<(std::path::PathBuf, u64, u64)>,
}

impl Sweeper for GenericSweep {
    /// Loads when `load` says so, runs every step, finishes the run directory and writes the
    /// report.
    fn sweep<F: DbFactory, D: Deployment<F>>(
        &self,
        plan: &Plan,
        factory: &F,
        deployment: &D,
        load: bool,
        stop: &AtomicBool,
    ) -> Result<RunOutcome> {
        if let Some(run_dir) = &plan.req.verify_only {
            return verify_existing(plan, factory, deployment, run_dir);
        }
        let data_dir = factory.data_dir();
        let trace_opts = trace_options(&plan.req.trace, data_dir.as_deref());
        let trace_note = preflight_trace(&trace_opts, &plan.req.watch)?;
        let first_sweep = plan.sweep(&plan.workloads[0]);
        let mut cluster = factory.cluster_facts();
        // The observed hosts join the live view: what their agents stream during each step goes
        // to the run's hub (`plan.live`).
        if let Some(hosts) = deployment.observed_hosts() {
            let mut hosts = hosts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            hosts.watch(Arc::clone(&plan.live) as Arc<dyn LiveSink>);
            cluster.get_or_insert_with(Default::default).observed = hosts.facts().to_vec();
        }
        let run = match &plan.req.resume {
            Some(from) => {
                // The deployment decided to load again only when the load was all that had
                // finished and its dataset was never marked loaded (killed in between): then the
                // load step runs again too.
                let keep = if load && from.kept_only_the_load() {
                    Vec::new()
                } else if load && !from.kept.is_empty() {
                    anyhow::bail!(
                        "--resume: the deployment wanted to load again under finished steps; refusing to"
                    );
                } else {
                    from.kept.clone()
                };
                RunDir::reopen(from, keep, trace_note)?
            }
            None => {
                let mut run =
                    create_run_dir::<F>(plan, &first_sweep, data_dir.as_deref(), trace_note)?;
                run.doc.environment.database_version = factory.version();
                if cluster.is_some() {
                    run.doc.cluster = cluster;
                    run.save()?;
                }
                run
            }
        };
        plan.live.set_run(
            &run.path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
        let mode = ProgressMode::detect(
            plan.req.status,
            plan.props
                .get_u64("status.interval", 10)
                .map_err(|e| UsageError(e.0))?,
        );
        let ledger_journal = Arc::new(std::sync::Mutex::new(crate::verify::LedgerJournal::new(
            &run.path,
        )));
        let mut sweep = Sweep {
            plan,
            factory,
            deployment,
            trace: (plan.req.trace.mode != TraceMode::Off).then_some(trace_opts),
            run,
            progress: Progress::watched(mode, Arc::clone(&plan.live)),
            stop,
            schedule: plan.req.start_at.map(StartSchedule::new),
            ledger: match (plan.spec().versioned_writes, &plan.req.resume) {
                (false, _) => None,
                // The writes of the finished steps (and of the step killed, up to its last save)
                // are in the database: the ledger goes on from them.
                (true, Some(from)) if from.dir.join(crate::verify::LEDGER_FILE).is_file() => {
                    Some(Arc::new(crate::verify::load_ledger(&from.dir)?))
                }
                (true, _) => Some(Arc::new(Ledger::new())),
            },
            ledger_journal,
            event_windows: Vec::new(),
        };
        let mut interrupted = false;
        if load {
            interrupted = sweep.load(first_sweep[0])?;
        }
        if plan.req.phase == Phase::Run && !interrupted {
            interrupted = sweep.run_steps()?;
        }
        sweep.finish(interrupted)
    }
}

/// run.json as it stands before the first step.
fn create_run_dir<F: DbFactory>(
    plan: &Plan,
    threads: &[u64],
    data_dir: Option<&std::path::Path>,
    trace_note: Option<String>,
) -> Result<RunDir> {
    let now = unix_ms(SystemTime::now());
    let mut notes = plan.spec().notes.clone();
    notes.extend(trace_note);
    let doc = RunDoc {
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo {
            name: "iodig".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            command_line: plan.req.command_line.clone(),
            revision: plan.req.revision.clone(),
        },
        started_unix_ms: now,
        updated_unix_ms: now,
        status: "running".into(),
        config: plan.run_config(threads),
        environment: environment::describe(data_dir),
        steps: Vec::new(),
        notes,
        cluster: None,
        writer: None, // RunDir::create names this process
        integrity: None,
    };
    let run = RunDir::create(
        &plan.req.out_dir,
        &format!("{}-{}", plan.label, F::NAME),
        doc,
    )?;
    iodig_model::eprintln_lossy!("run directory: {}", run.path.display());
    Ok(run)
}

impl<F: DbFactory, D: Deployment<F>> Sweep<'_, F, D> {
    /// The load step; returns whether it was interrupted. `load_threads` is the load's own
    /// sweep for `iodig load`.
    fn load(&mut self, load_threads: u64) -> Result<bool> {
        let plan = self.plan;
        let (threads, target) = match plan.req.phase {
            Phase::Load => (load_threads, plan.req.target),
            // The target rate is the run's; a load inside `run` goes as fast as it can.
            Phase::Run => (plan.load_threads(), None),
        };
        let step = StepPlan {
            phase: Phase::Load,
            threads,
            target_ops_per_sec: target,
            operation_count: plan.spec().insert_count,
            max_execution: None,
            warmup: Duration::ZERO,
            interval_mode: plan.interval_mode(target)?,
            unusable_after: plan.unusable_after()?,
        };
        self.progress
            .set_label(format!("{} t={threads}", plan.label));
        let interrupted = self.step(&plan.workloads[0], &step, "load")?;
        crate::memory::release();
        if !interrupted {
            self.deployment.after_load(plan)?;
        }
        Ok(interrupted)
    }

    /// Every workload × thread count × repetition; returns whether the sweep was interrupted.
    fn run_steps(&mut self) -> Result<bool> {
        let plan = self.plan;
        let mut stops = crate::stop_rule::SweepStops::new(plan.req.stop_when.clone());
        // A resumed run's finished run steps are not run again; the thread counts their stop
        // rule took out of a sweep stay out.
        let finished: Vec<StepSummary> = (self.run.doc.steps.iter())
            .filter(|s| s.phase == Phase::Run.name())
            .cloned()
            .collect();
        let mut planned = 0;
        for rep in 0..plan.req.repetitions.max(1) {
            for w in &plan.workloads {
                let sweep = plan.sweep(w);
                for &t in &sweep {
                    if stops.skips(&w.label, t) {
                        continue;
                    }
                    planned += 1;
                    if let Some(done) = finished.get(planned - 1) {
                        if let Some(stop) = &done.sweep_stop {
                            stops.replay(&w.label, &stop.skipped);
                        }
                        continue;
                    }
                    let step = StepPlan {
                        phase: Phase::Run,
                        threads: t,
                        target_ops_per_sec: plan.req.target,
                        operation_count: w.spec.operation_count,
                        max_execution: plan.step_duration(w),
                        warmup: plan.req.warmup,
                        interval_mode: plan.interval_mode(plan.req.target)?,
                        unusable_after: plan.unusable_after()?,
                    };
                    if plan.req.restore_each_step {
                        self.keep_restore_point()?;
                    }
                    let restore = self.deployment.before_run_step(plan, self.factory)?;
                    self.rewind_ledger(&restore, &plan.run_step_name(w, t, rep))?;
                    if plan.req.drop_caches {
                        self.drop_caches();
                    }
                    self.progress.set_label(format!("{} t={t}", w.label));
                    let name = plan.run_step_name(w, t, rep);
                    let stopped = self.step(w, &step, &name)?;
                    crate::memory::release();
                    self.deployment.after_run_step(plan, &name, w)?;
                    if stopped {
                        return Ok(true);
                    }
                    stops.after_step(&mut self.run, &w.label, &sweep, t)?;
                }
            }
        }
        Ok(false)
    }

    /// `--drop-caches`: the page cache emptied here and on every observed host; said on the
    /// terminal and once in run.json's notes, and a host that could not is warned about (the
    /// step still runs: a warm cache is a caveat, not a reason to stop a long sweep).
    fn drop_caches(&mut self) {
        let mut done = Vec::new();
        match crate::page_cache::drop_page_cache() {
            Ok((before, after)) => done.push(format!(
                "here ({})",
                crate::page_cache::words(before, after)
            )),
            Err(e) => iodig_model::eprintln_lossy!("warning: --drop-caches here: {e}"),
        }
        if let Some(hosts) = self.deployment.observed_hosts() {
            let mut hosts = hosts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (host, result) in hosts.drop_caches() {
                match result {
                    Ok((before, after)) => done.push(format!(
                        "on {host} ({})",
                        crate::page_cache::words(before, after)
                    )),
                    Err(e) => iodig_model::eprintln_lossy!("warning: --drop-caches on {host}: {e}"),
                }
            }
        }
        if done.is_empty() {
            return;
        }
        let line = format!("page cache dropped before the step: {}", done.join("; "));
        iodig_model::eprintln_lossy!("note: {line}");
        let note = "--drop-caches: the page cache was dropped before every run step (the terminal said each time, with the sizes before and after).".to_string();
        if !self.run.doc.notes.contains(&note) {
            self.run.doc.notes.push(note);
        }
    }

    /// Runs one step under observation and records it; returns whether the run must stop.
    fn step(&mut self, w: &ResolvedWorkload, step: &StepPlan, name: &str) -> Result<bool> {
        let workload =
            CoreWorkload::with_ledger(w.spec.clone(), self.plan.seed, self.ledger.clone());
        let mut processes = vec![("iodig".to_string(), std::process::id())];
        processes.extend(self.deployment.processes());
        // A managed deployment does its own faults; nodes on observed hosts are signalled over
        // SSH (the handler is made before the step holds the hosts).
        let faults = self.deployment.fault_handler();
        // The observed hosts' agents, held for the step (the deployment owns them).
        let mut hosts = self
            .deployment
            .observed_hosts()
            .map(|h| h.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        if let Some(h) = hosts.as_deref_mut() {
            h.before_step();
        }
        // `--events`: the tracer writes every IO to a file beside the steps, moved into the
        // step's directory when the step is recorded (its name is known only then).
        let mut trace = self.trace.clone();
        if let Some(t) = trace.as_mut().filter(|_| self.plan.req.io_events) {
            let steps = self.run.path.join("steps");
            std::fs::create_dir_all(&steps)
                .with_context(|| format!("cannot create {}", steps.display()))?;
            t.events_file = Some(steps.join(format!(
                ".{}.{}.tmp",
                iodig_model::files::IO_EVENTS,
                std::process::id()
            )));
        }
        // The tracers load now, before any common start, so every client starts on time.
        let mut observer = Observer::new(
            trace,
            self.plan.req.watch.clone(),
            processes,
            hosts.as_deref_mut(),
        )
        .watched_by(Arc::clone(&self.plan.live) as Arc<dyn LiveSink>);
        // Clients started together wait for the step's common start (--start-at).
        if let Some(late) = self.schedule.as_ref().and_then(|s| s.wait(name, self.stop)) {
            self.run.doc.notes.push(late);
        }
        if step.phase == Phase::Run {
            if let Some(handler) = faults {
                observer = observer.with_faults(self.plan.faults.clone(), handler);
            }
        }
        // Each node's own reads, against which its device reads are set.
        let factory = self.factory;
        let table = w.spec.table.clone();
        observer = observer.with_node_reads(Box::new(move || factory.node_reads(&table)));
        let live_step = LiveStep {
            step: name.to_string(),
            workload: if step.phase == Phase::Load {
                "load".into()
            } else {
                w.label.clone()
            },
            threads: u32::try_from(step.threads).unwrap_or(u32::MAX),
            target: step.target_ops_per_sec,
        };
        self.plan.live.step_started(&live_step);
        let saver = self.ledger.as_ref().map(|l| {
            crate::verify::LedgerSaver::start(Arc::clone(l), Arc::clone(&self.ledger_journal))
        });
        let result = run_step(
            self.factory,
            &workload,
            step,
            self.stop,
            &mut self.progress,
            &mut observer,
        )?;
        self.plan.live.step_ended(&live_step);
        if let Some(s) = &mut self.schedule {
            s.step_ended(step);
        }
        let since = result
            .started_unix_ms
            .saturating_sub(step.warmup.as_millis() as u64);
        let observed = observer.finish(since);
        let mut events = self.factory.events_since(since);
        events.extend(self.deployment.events_since(since));
        // The database's own flushes and compactions are read from its log after the step, so
        // they reach the live counters now (their IO showed live, by activity class).
        publish_db_events(&self.plan.live, &events);
        events.extend(observed.fault_events.iter().cloned());
        events.sort_by_key(|e| e.start_unix_ms);
        record_step(
            &mut self.run,
            &self.plan.percentiles,
            StepRecord {
                name,
                workload: &w.label,
                plan: step,
                result: &result,
                observed,
                events,
            },
        )?;
        if let Some(saver) = saver {
            saver.finish()?;
        }
        if let Some(s) = self.run.doc.steps.last() {
            self.event_windows.push((
                self.run.path.join(&s.dir),
                since,
                s.started_unix_ms + s.runtime_ms,
            ));
        }
        if let Some(e) = &result.error {
            return Err(anyhow::anyhow!("step {name} failed: {e}"));
        }
        Ok(result.interrupted || self.stop.load(Ordering::Relaxed))
    }

    /// Keeps the ledger's restore point before the run's first restore, while the ledger still
    /// describes what the snapshot holds (after the load, before any run step). A run resumed
    /// after run steps has its restore point already, unless an iodig that kept none started
    /// it: then none is made from a ledger that holds those steps' writes.
    fn keep_restore_point(&mut self) -> Result<()> {
        let Some(ledger) = &self.ledger else {
            return Ok(());
        };
        let ran = self
            .run
            .doc
            .steps
            .iter()
            .any(|s| s.phase == Phase::Run.name());
        if !ran {
            crate::verify::keep_restore_point(&self.run.path, ledger)?;
        }
        Ok(())
    }

    /// `--restore-each-step` put the dataset back as it was at the restore point: the ledger
    /// goes back with it (its read counts stay the run's), or this step's reads and `--verify`
    /// would judge the values put back against writes the restore undid. What could not be
    /// rewound, or was put back on some nodes only, is said in run.json's notes.
    fn rewind_ledger(&mut self, restore: &Restore, step: &str) -> Result<()> {
        let Some(now) = &self.ledger else {
            return Ok(());
        };
        let note = match restore {
            Restore::NotAsked => return Ok(()),
            Restore::Done => None,
            Restore::Incomplete(why) => Some(format!(
                "--restore-each-step: before step {step} some nodes were not put back ({why}); the ledger went back to the restore point all the same, so --verify may find those nodes' keys holding earlier steps' writes (unacknowledged), which says the restore failed, not that the database lost or invented a write"
            )),
        };
        let point = self.run.path.join(crate::verify::LEDGER_AT_RESTORE_POINT);
        if !point.is_file() {
            let note = format!(
                "--restore-each-step: the run has no ledger restore point ({}; an iodig that kept none started it), so from step {step} on the ledger is not rewound with the dataset: --verify may report keys the earlier steps wrote as stale",
                crate::verify::LEDGER_AT_RESTORE_POINT
            );
            if !self.run.doc.notes.contains(&note) {
                iodig_model::eprintln_lossy!("warning: {note}");
                self.run.doc.notes.push(note);
            }
            return Ok(());
        }
        let rewound = crate::verify::rewound_ledger(&self.run.path, now)?;
        self.ledger_journal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .replace(&rewound)?;
        self.ledger = Some(Arc::new(rewound));
        if let Some(note) = note {
            iodig_model::eprintln_lossy!("warning: {note}");
            self.run.doc.notes.push(note);
        }
        Ok(())
    }

    /// Closes the binding, marks the run finished and writes the report.
    fn finish(mut self, interrupted: bool) -> Result<RunOutcome> {
        let integrity = match (&self.ledger, self.plan.req.verify) {
            (Some(ledger), true) if !interrupted => {
                let doc = check_integrity(self.plan, self.factory, self.deployment, ledger, "run")?;
                self.run.doc.integrity = Some(doc.clone());
                Some(doc)
            }
            (Some(_), true) => {
                iodig_model::eprintln_lossy!(
                    "note: the run was interrupted, so its writes were not read back; check them with iodig verify {}",
                    self.run.path.display()
                );
                None
            }
            _ => None,
        };
        let mut closed = self.factory.close();
        if let (Err(e), false) = (&closed, self.plan.faults.is_empty()) {
            // The schedule broke the database on purpose: its last flush failing is one more
            // consequence to record, not a failure of the run.
            let note = format!("closing the database after the faults failed: {e}");
            iodig_model::eprintln_lossy!("warning: {note}");
            self.run.doc.notes.push(note);
            closed = Ok(());
        }
        self.add_late_db_events();
        self.run.finish(if interrupted {
            "interrupted"
        } else {
            "completed"
        })?;
        closed.map_err(db_error)?;
        let path = self.run.path.clone();
        match iodig_report::write_report(&path) {
            Ok(report) => {
                for finding in &report.findings {
                    iodig_model::eprintln_lossy!("finding: {finding}");
                }
                iodig_model::eprintln_lossy!("report: {}", path.join("report.html").display());
            }
            Err(e) => {
                iodig_model::eprintln_lossy!("warning: the report could not be written: {e:#}");
            }
        }
        iodig_model::eprintln_lossy!("results: {}", path.display());
        Ok(RunOutcome {
            run_dir: path,
            interrupted,
            integrity,
        })
    }
}

/// The database's flushes, compactions and file deletions among `events`, counted live as
/// events of their place (an embedded database's are the client host's).
fn publish_db_events(live: &LiveHub, events: &[iodig_model::events::DbEvent]) {
    for e in (events.iter()).filter(|e| LiveHub::COUNTED_ONLY.contains(&e.kind.as_str())) {
        live.event(&LiveEvent {
            unix_ms: e.start_unix_ms,
            place: if e.node == "local" {
                "client".into()
            } else {
                e.node.clone()
            },
            kind: e.kind.clone(),
            text: format!("{} {}", e.kind, e.detail),
        });
    }
}

impl<F: DbFactory, D: Deployment<F>> Sweep<'_, F, D> {
    /// A database may write its own log late: RocksDB buffers its LOG for up to a few
    /// seconds, so a flush near a step's end is missing when the step is recorded. Once the
    /// database is closed (its log flushed), each step's window is read again and the events
    /// it lacked are added to its events.
    fn add_late_db_events(&self) {
        for (dir, since, end) in &self.event_windows {
            let Ok(Some(mut events)) = iodig_model::series::read_events(dir) else {
                continue;
            };
            let before = events.len();
            for e in self.factory.events_since(*since) {
                let known = events.iter().any(|k| {
                    (k.kind.as_str(), k.start_unix_ms, k.node.as_str())
                        == (e.kind.as_str(), e.start_unix_ms, e.node.as_str())
                });
                if e.start_unix_ms <= *end && !known {
                    publish_db_events(&self.plan.live, std::slice::from_ref(&e));
                    events.push(e);
                }
            }
            if events.len() > before {
                events.sort_by_key(|e| e.start_unix_ms);
                if let Err(e) = iodig_model::series::write_events(dir, &events) {
                    iodig_model::eprintln_lossy!("warning: {}: {e:#}", dir.display());
                }
            }
        }
    }
}

/// Reads back every key of `ledger` through the cluster, then from each node alone where the
/// deployment can and was asked to, and says what was found.
fn check_integrity<F: DbFactory, D: Deployment<F>>(
    plan: &Plan,
    factory: &F,
    deployment: &D,
    ledger: &Arc<Ledger>,
    checked_by: &str,
) -> Result<iodig_model::integrity::IntegrityDoc> {
    let read_with = match plan.props.get("cassandra.readconsistencylevel") {
        Some(level) if F::NAME == "cassandra" => format!("cassandra at {level}"),
        _ => F::NAME.to_string(),
    };
    iodig_model::eprintln_lossy!(
        "verify: reading back {} keys written by the run ({read_with})",
        ledger.key_count()
    );
    let mut doc = crate::verify::check(factory, plan.spec(), ledger, checked_by, read_with)?;
    doc.per_node = deployment.check_each_node(plan, ledger)?;
    iodig_model::eprintln_lossy!("integrity {}: {}", doc.verdict(), doc.summary());
    for e in &doc.examples {
        iodig_model::eprintln_lossy!(
            "  {} {}{}{}: acknowledged version {}{}",
            e.verdict,
            e.key,
            if e.field.is_empty() { "" } else { " " },
            e.field,
            e.acknowledged_version,
            e.found_version
                .map(|v| format!(", found {v}"))
                .unwrap_or_default()
        );
    }
    Ok(doc)
}

/// `iodig verify RUN_DIR`: checks the ledger of a finished run against the database as it is
/// now, and records the result in that run directory.
fn verify_existing<F: DbFactory, D: Deployment<F>>(
    plan: &Plan,
    factory: &F,
    deployment: &D,
    run_dir: &std::path::Path,
) -> Result<RunOutcome> {
    let ledger = Arc::new(crate::verify::load_ledger(run_dir)?);
    let doc = check_integrity(plan, factory, deployment, &ledger, "verify")?;
    let closed = factory.close();
    let run_json = run_dir.join(iodig_model::files::RUN);
    let mut run: RunDoc = iodig_model::fsio::read_json(&run_json)?;
    run.integrity = Some(doc.clone());
    iodig_model::fsio::write_json_atomic(&run_json, &run)?;
    closed.map_err(db_error)?;
    if let Err(e) = iodig_report::write_report(run_dir) {
        iodig_model::eprintln_lossy!("warning: the report could not be written: {e:#}");
    }
    Ok(RunOutcome {
        run_dir: run_dir.to_path_buf(),
        interrupted: false,
        integrity: Some(doc),
    })
}
