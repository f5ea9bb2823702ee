//! Reading a run directory back: run.json and each step's files, checked, with errors that name
//! the path and say how to fix it. Missing optional files (no trace, no sys samples, no database
//! events) are not errors: the report says what it could not show.

use anyhow::{bail, Context, Result};
use iodig_model::by_node::ClientByNodeDoc;
use iodig_model::device_stats::DeviceStatsDoc;
use iodig_model::files;
use iodig_model::jvm::JvmPausesDoc;
use iodig_model::reading::{read_run_doc, settle};
use iodig_model::series;
use iodig_model::sys::SysDoc;
use iodig_model::trace::TraceDoc;
use iodig_model::{RunDoc, Sample, StepHistograms, StepSummary};

use std::path::{Path, PathBuf};

pub use iodig_model::events::DbEvent;

/// One step with everything its directory holds.
#[derive(Debug, Clone)]
pub struct StepData {
    /// The step's entry in run.json `steps`.
    pub summary: StepSummary,
    /// The step's directory (run directory joined with the summary's `dir`).
    pub dir: PathBuf,
    /// Where the IO files below (`trace`, `sys`, `events`, `device_stats`) were measured: the
    /// client host as read, a database node in [`StepData::at_node`]'s view.
    pub place: Place,
    /// The directory of those IO files (the per-IO event stream is read from it): `dir` for
    /// the client host, `nodes/HOST/` under it for a node.
    pub io_dir: PathBuf,
    /// Per-second client samples (`timeseries.jsonl.gz`, `timeseries.json` in schema 1); empty
    /// when the file is missing.
    pub timeseries: Vec<Sample>,
    /// The step's exact HDR latency histograms per series (`histograms.json`), when written.
    pub histograms: Option<StepHistograms>,
    /// The block-IO trace (`trace.json`); none when tracing was off or the file is missing.
    pub trace: Option<TraceDoc>,
    /// The traced disks' own statistics (`device-stats.json`); none when tracing was off and in
    /// runs from before they were read.
    pub device_stats: Option<DeviceStatsDoc>,
    /// CPU and memory samples (`sys.json`), when written.
    pub sys: Option<SysDoc>,
    /// Database flushes, compactions and file deletions (`db-events.jsonl.gz`); empty when none
    /// were logged.
    pub events: Vec<DbEvent>,
    /// What each host observed over SSH recorded (`nodes/HOST/`), in `summary.nodes` order.
    pub nodes: Vec<NodeData>,
    /// The database's JVMs' stop-the-world pauses (`jvm-pauses.json`), when its processes were
    /// JVMs watched in a traced step.
    pub jvm_pauses: Option<JvmPausesDoc>,
    /// The client's latency per coordinator node and second (`client-by-node.json`), for a
    /// binding that names the node answering each request.
    pub by_node: Option<ClientByNodeDoc>,
}

/// One observed host's files of a step, already on the run's clock.
#[derive(Debug, Clone)]
pub struct NodeData {
    /// The host's entry in the step's `nodes` of run.json (its directory, clock samples, offset).
    pub step: iodig_model::cluster::NodeStep,
    /// Its files' directory: the run directory joined with `step.dir`.
    pub dir: PathBuf,
    /// The host's block-IO trace (`trace.json`), when it wrote one.
    pub trace: Option<TraceDoc>,
    /// The host's CPU and memory samples (`sys.json`), when written.
    pub sys: Option<SysDoc>,
    /// The host's database flushes, compactions and file deletions (`db-events.jsonl.gz`); empty
    /// when none.
    pub events: Vec<DbEvent>,
    /// The host's traced disks' own statistics (`device-stats.json`), when its agent read them.
    pub device_stats: Option<DeviceStatsDoc>,
    /// The node's JVM's pauses (`jvm-pauses.json`), when its agent watched them.
    pub jvm_pauses: Option<JvmPausesDoc>,
}

/// Where a step's IO was measured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Place {
    /// The machine iodig ran on: the database's too when it is embedded or its nodes run here
    /// unobserved.
    #[default]
    ClientHost,
    /// A host observed over SSH (`--observe`) and the database node found there.
    Node {
        /// The host as given to `--observe`.
        host: String,
        /// The node's client address (`127.0.0.3:9042`), when one was found.
        node: Option<String>,
    },
}

impl Place {
    /// How findings and headings name it: the node's IP (`127.0.0.3`, as the briefs name
    /// nodes), else the host, or "the client host".
    pub fn name(&self) -> String {
        match self {
            Place::ClientHost => "the client host".into(),
            Place::Node {
                node: Some(addr), ..
            } => addr
                .parse::<std::net::SocketAddr>()
                .map_or_else(|_| addr.clone(), |a| a.ip().to_string()),
            Place::Node { host, .. } => host.clone(),
        }
    }

    /// True for a database node on an observed host.
    pub fn is_node(&self) -> bool {
        matches!(self, Place::Node { .. })
    }
}

impl StepData {
    /// Drops the per-second and per-slot series (the trace's and its attribution rows'
    /// seconds, the system samples, each client second's per-series figures), here and on
    /// every node, keeping everything else: what a run-level view needs of a step whose own
    /// views were computed while they were there.
    pub fn drop_series(&mut self) {
        fn trace(t: &mut Option<TraceDoc>) {
            if let Some(t) = t {
                for d in &mut t.devices {
                    d.seconds = Vec::new();
                }
                if let Some(a) = t.self_check.attribution.as_mut() {
                    for r in &mut a.rows {
                        r.seconds = Vec::new();
                    }
                }
            }
        }
        fn sys(s: &mut Option<SysDoc>) {
            if let Some(s) = s {
                s.samples = Vec::new();
            }
        }
        trace(&mut self.trace);
        sys(&mut self.sys);
        for s in &mut self.timeseries {
            s.series = std::collections::BTreeMap::new();
        }
        for n in &mut self.nodes {
            trace(&mut n.trace);
            sys(&mut n.sys);
        }
    }

    /// The step without its observed hosts' files: what the client host measured. Cloned
    /// field by field, because the nodes' files are most of a step's bytes.
    pub fn without_nodes(&self) -> StepData {
        StepData {
            summary: self.summary.clone(),
            dir: self.dir.clone(),
            place: self.place.clone(),
            io_dir: self.io_dir.clone(),
            timeseries: self.timeseries.clone(),
            histograms: self.histograms.clone(),
            trace: self.trace.clone(),
            device_stats: self.device_stats.clone(),
            sys: self.sys.clone(),
            events: self.events.clone(),
            nodes: Vec::new(),
            jvm_pauses: self.jvm_pauses.clone(),
            by_node: self.by_node.clone(),
        }
    }

    /// The step as seen on observed host `i` (in `nodes` order): the client's series and
    /// summary as they are, the host's trace, samples, events and drive statistics in place of
    /// the client host's. Every analysis of a step then runs unchanged on a node: one code
    /// path for the database here and the database elsewhere.
    pub fn at_node(&self, i: usize, node: Option<String>) -> StepData {
        let n = &self.nodes[i];
        StepData {
            summary: self.summary.clone(),
            dir: self.dir.clone(),
            place: Place::Node {
                host: n.step.host.clone(),
                node,
            },
            io_dir: n.dir.clone(),
            timeseries: self.timeseries.clone(),
            histograms: self.histograms.clone(),
            trace: n.trace.clone(),
            device_stats: n.device_stats.clone(),
            sys: n.sys.clone(),
            events: n.events.clone(),
            nodes: Vec::new(),
            jvm_pauses: n.jvm_pauses.clone(),
            by_node: self.by_node.clone(),
        }
    }

    /// Streams the client's per-second histograms of the series `want` accepts from
    /// `latency.hlog`: `f(start_unix_ms, end_unix_ms, series, histogram)`, one at a time (a long step holds
    /// thousands; the caller merges what it needs). `Ok(false)` when the step has no log.
    pub fn for_each_client_second(
        &self,
        want: impl Fn(&str) -> bool,
        f: impl FnMut(u64, u64, &str, &iodig_stats::Histogram),
    ) -> Result<bool> {
        self.for_each_client_second_in(files::HDR_LOG, want, f)
    }

    /// The same by start: each operation in the interval it started in, from
    /// `latency-by-start.hlog` or rebuilt from `latency.hlog` and its shift log. An interval
    /// can come twice (operations that ran over 5 s came later); `false` when the step has
    /// neither (runs of older iodig versions).
    pub fn for_each_client_start_second(
        &self,
        want: impl Fn(&str) -> bool,
        f: impl FnMut(u64, u64, &str, &iodig_stats::Histogram),
    ) -> Result<bool> {
        iodig_stats::for_each_start_interval_in(&self.dir, want, f)
    }

    fn for_each_client_second_in(
        &self,
        file: &str,
        want: impl Fn(&str) -> bool,
        f: impl FnMut(u64, u64, &str, &iodig_stats::Histogram),
    ) -> Result<bool> {
        let path = self.dir.join(file);
        let Some(bytes) = series::read_hlog(&self.dir, file)? else {
            return Ok(false);
        };
        iodig_stats::for_each_interval(&bytes, want, f).with_context(|| {
            format!(
                "{}: not an HDR interval log written by iodig",
                path.display()
            )
        })?;
        Ok(true)
    }

    /// Unix ms of the end of the measured window.
    pub fn end_unix_ms(&self) -> u64 {
        self.summary.started_unix_ms + self.summary.runtime_ms
    }

    /// The load phase inserts the dataset: it is not a point of any sweep.
    pub fn is_load(&self) -> bool {
        self.summary.phase == "load"
    }

    /// How sentences name the step: `step 3 (workloada × 8 threads)`, or `load (workloadb × 4
    /// threads)` so a load is never read as the first measured step.
    pub fn label(&self) -> String {
        let s = &self.summary;
        let what = format!("({} × {} threads)", s.workload, s.threads);
        if self.is_load() {
            format!("load {what}")
        } else {
            format!("step {} {what}", s.index)
        }
    }

    /// Section heading: `Step 3: workloada × 8 threads`, `Load (step 0): workloadb × 4 threads`,
    /// with `(interrupted)` when the step ended early.
    pub fn title(&self) -> String {
        let s = &self.summary;
        let name = if self.is_load() {
            format!("Load (step {})", s.index)
        } else {
            format!("Step {}", s.index)
        };
        let interrupted = if s.interrupted { " (interrupted)" } else { "" };
        format!(
            "{name}: {} × {} threads{interrupted}",
            s.workload, s.threads
        )
    }
}

/// A whole run directory.
#[derive(Debug, Clone)]
pub struct RunData {
    /// The run directory as given.
    pub path: PathBuf,
    /// run.json, schema-checked, with secrets redacted and a dead `running` run settled as killed.
    pub doc: RunDoc,
    /// Every step of run.json, the load included, in run order.
    pub steps: Vec<StepData>,
    /// How the run ended when it did not complete (killed, failed, interrupted, still running),
    /// with the step: the report's first finding.
    pub state: Option<String>,
    /// Each step's view, computed while the step's series were in memory, when the run was
    /// read step by step ([`load_run_streaming`]); empty when read whole ([`load_run`]).
    pub step_views: Vec<crate::analysis::StepView>,
}

impl RunData {
    /// How titles, tables, legends and CSV files name the run: its label (run.json's
    /// `config.label`, or `LABEL=RUN_DIR` given to compare), else [`Self::dir_name`].
    pub fn name(&self) -> String {
        self.doc
            .config
            .label
            .clone()
            .unwrap_or_else(|| self.dir_name())
    }

    /// The run directory's file name (the path as given when it has none).
    pub fn dir_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.display().to_string())
    }

    /// The measured `run` steps (load steps are not part of the sweep).
    pub fn run_steps(&self) -> impl Iterator<Item = &StepData> {
        self.steps.iter().filter(|s| s.summary.phase == "run")
    }
}

fn read_optional<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    if !path.is_file() {
        return Ok(None);
    }
    iodig_model::fsio::read_json(path).map(Some)
}

/// Reads and checks a run directory, every step's series in memory.
pub fn load_run(path: &Path) -> Result<RunData> {
    load_run_streaming(path, |_, _| {}, false)
}

/// Reads and checks a run directory one step at a time: `each` sees the run so far and the
/// step with its series; with `drop_series` the step is then kept without them
/// ([`StepData::drop_series`]), so memory holds one step's series, not the run's.
pub fn load_run_streaming(
    path: &Path,
    mut each: impl FnMut(&RunData, &StepData),
    drop_series: bool,
) -> Result<RunData> {
    if !path.exists() {
        bail!(
            "{}: no such run directory; give the directory that `iodig run` printed (it holds run.json)",
            path.display()
        );
    }
    if !path.is_dir() {
        bail!(
            "{}: not a directory; give a run directory (the one holding run.json)",
            path.display()
        );
    }
    let run_json = path.join(files::RUN);
    let unfinished_first_write = std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(".run.json.") && iodig_model::fsio::is_temp_name(&name)
        });
    if !run_json.is_file() && unfinished_first_write {
        bail!(
            "{}: its iodig was killed before it wrote run.json the first time: nothing was measured here; remove the directory",
            path.display()
        );
    }
    if !run_json.is_file() {
        bail!(
            "{}: not a run directory (no {} inside); give the directory that `iodig run` printed",
            path.display(),
            files::RUN
        );
    }
    // Schema checked, secrets redacted even in an older iodig's file; a run that says
    // `running` but whose iodig is gone is shown as killed, with the step it died in.
    let mut doc = read_run_doc(path)?;
    let state = match settle(&mut doc).note() {
        Some(note) => {
            // Said once, as the first finding, rather than again among the notes.
            doc.notes.remove(0);
            Some(note.to_string())
        }
        None => status_sentence(&doc),
    };
    let mut run = RunData {
        path: path.to_path_buf(),
        steps: Vec::with_capacity(doc.steps.len()),
        doc,
        state,
        step_views: Vec::new(),
    };
    // The next step is read (decompressed and parsed, about half of the time) on a thread of
    // its own while `each` works on this one: one step ahead, so memory holds two at most.
    let summaries = run.doc.steps.clone();
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<StepData>>(0);
        scope.spawn(move || {
            for s in &summaries {
                let step = load_step(path, s);
                let failed = step.is_err();
                if tx.send(step).is_err() || failed {
                    break;
                }
            }
        });
        for step in rx {
            let mut step = step?;
            each(&run, &step);
            if drop_series {
                step.drop_series();
            }
            run.steps.push(step);
        }
        Ok(())
    })?;
    Ok(run)
}

/// One step of run.json with its directory's files.
fn load_step(path: &Path, s: &StepSummary) -> Result<StepData> {
    {
        let dir = path.join(&s.dir);
        let timeseries: Vec<Sample> = series::read_timeseries(&dir)?.unwrap_or_default();
        let mut nodes = Vec::with_capacity(s.nodes.len());
        for n in &s.nodes {
            let nd = path.join(&n.dir);
            nodes.push(NodeData {
                step: n.clone(),
                dir: nd.clone(),
                trace: series::read_trace(&nd)?,
                sys: series::read_sys(&nd)?,
                events: series::read_events(&nd)?.unwrap_or_default(),
                device_stats: read_optional(&nd.join(files::DEVICE_STATS))?,
                jvm_pauses: read_optional(&nd.join(files::JVM_PAUSES))?,
            });
        }
        Ok(StepData {
            summary: s.clone(),
            histograms: read_optional(&dir.join(files::HISTOGRAMS))?,
            trace: series::read_trace(&dir)?,
            device_stats: read_optional(&dir.join(files::DEVICE_STATS))?,
            sys: series::read_sys(&dir)?,
            events: series::read_events(&dir)?.unwrap_or_default(),
            timeseries,
            place: Place::ClientHost,
            io_dir: dir.clone(),
            jvm_pauses: read_optional(&dir.join(files::JVM_PAUSES))?,
            by_node: read_optional(&dir.join(files::CLIENT_BY_NODE))?,
            dir,
            nodes,
        })
    }
}

/// The sentence for a run that ended without completing, as run.json records it.
fn status_sentence(doc: &RunDoc) -> Option<String> {
    let n = doc.steps.len();
    let intact = match n {
        0 => "no step had finished".to_string(),
        1 => "its finished step (0) is intact".to_string(),
        n => format!("its finished steps (0–{}) are intact", n - 1),
    };
    match doc.status.as_str() {
        "killed" => Some(format!("The run was killed during step {n}; {intact}.")),
        "failed" => Some(format!(
            "The run failed during step {n} (iodig stopped on an error); {intact}."
        )),
        "interrupted" => Some(format!(
            "The run was interrupted (Ctrl-C or SIGTERM) after {n} step(s); the steps it did not reach are missing."
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_killed_before_its_first_run_json_says_so() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(".run.json.4242.tmp"), "{").unwrap();
        let e = format!("{:#}", load_run(d.path()).unwrap_err());
        assert!(e.contains("killed before it wrote run.json"), "{e}");
        std::fs::remove_file(d.path().join(".run.json.4242.tmp")).unwrap();
        let e = format!("{:#}", load_run(d.path()).unwrap_err());
        assert!(e.contains("not a run directory"), "{e}");
    }

    #[test]
    fn a_run_that_did_not_complete_says_how_it_ended_and_where() {
        let mut doc: RunDoc = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "tool": {"name": "iodig", "version": "0", "command_line": []},
            "started_unix_ms": 0, "updated_unix_ms": 0, "status": "killed",
            "config": {"db": "basic", "property_files": [], "properties": {}, "threads": [1],
                       "target_ops_per_sec": null, "warmup_secs": 0.0, "seed": 1, "trace": "off"},
            "environment": {"hostname": "", "kernel": "", "cpu_model": "", "cpus": 1,
                            "memory_bytes": 0, "data_dir": null, "storage": null},
            "steps": []
        }))
        .unwrap();
        assert_eq!(
            status_sentence(&doc).unwrap(),
            "The run was killed during step 0; no step had finished."
        );
        doc.status = "failed".into();
        assert!(status_sentence(&doc)
            .unwrap()
            .contains("failed during step 0"));
        doc.status = "completed".into();
        assert_eq!(status_sentence(&doc), None);
    }
}
