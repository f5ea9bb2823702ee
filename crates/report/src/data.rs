//! Reading a run directory back: run.json and each step's files, checked, with errors that name
//! the path and say how to fix it. Missing optional files (no trace, no sys samples, no database
//! events) are not errors: the report says what it could not show.

use anyhow::{bail, Context, Result};
use iodig_model::files;
use iodig_model::sys::SysDoc;
use iodig_model::trace::TraceDoc;
use iodig_model::{RunDoc, Sample, StepHistograms, StepSummary, SCHEMA_VERSION};

use std::path::{Path, PathBuf};

pub use iodig_model::events::DbEvent;

/// One step with everything its directory holds.
#[derive(Debug, Clone)]
pub struct StepData {
    pub summary: StepSummary,
    pub dir: PathBuf,
    pub timeseries: Vec<Sample>,
    pub histograms: Option<StepHistograms>,
    pub trace: Option<TraceDoc>,
    pub sys: Option<SysDoc>,
    pub events: Vec<DbEvent>,
    /// What each host observed over SSH recorded (`nodes/HOST/`), in `summary.nodes` order.
    pub nodes: Vec<NodeData>,
}

/// One observed host's files of a step, already on the run's clock.
#[derive(Debug, Clone)]
pub struct NodeData {
    pub step: iodig_model::cluster::NodeStep,
    pub trace: Option<TraceDoc>,
    pub sys: Option<SysDoc>,
    pub events: Vec<DbEvent>,
}

impl StepData {
    /// Streams the client's per-second histograms of the series `want` accepts from
    /// `latency.hlog`: `f(start_unix_ms, end_unix_ms, series, histogram)`, one at a time (a long step holds
    /// thousands; the caller merges what it needs). `Ok(false)` when the step has no log.
    pub fn for_each_client_second(
        &self,
        want: impl Fn(&str) -> bool,
        f: impl FnMut(u64, u64, &str, &iodig_stats::Histogram),
    ) -> Result<bool> {
        let path = self.dir.join(files::HDR_LOG);
        if !path.is_file() {
            return Ok(false);
        }
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
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
    pub path: PathBuf,
    pub doc: RunDoc,
    pub steps: Vec<StepData>,
}

impl RunData {
    /// A short name for tables: the directory's file name.
    pub fn name(&self) -> String {
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

/// Reads and checks a run directory.
pub fn load_run(path: &Path) -> Result<RunData> {
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
    if !run_json.is_file() {
        bail!(
            "{}: not a run directory (no {} inside); give the directory that `iodig run` printed",
            path.display(),
            files::RUN
        );
    }
    let raw: serde_json::Value = iodig_model::fsio::read_json(&run_json)?;
    let version = raw
        .get("schema_version")
        .and_then(serde_json::Value::as_u64);
    match version {
        Some(v) if v <= u64::from(SCHEMA_VERSION) => {}
        Some(v) => bail!(
            "{}: schema version {v} is newer than this iodig reads ({SCHEMA_VERSION}); report it with the iodig version that wrote it ({})",
            run_json.display(),
            raw.pointer("/tool/version").and_then(|v| v.as_str()).unwrap_or("unknown")
        ),
        None => bail!("{}: no schema_version; this is not a run.json written by iodig", run_json.display()),
    }
    let doc: RunDoc = serde_json::from_value(raw)
        .with_context(|| format!("{} is not a valid iodig run.json", run_json.display()))?;
    let mut steps = Vec::with_capacity(doc.steps.len());
    for s in &doc.steps {
        let dir = path.join(&s.dir);
        let timeseries: Vec<Sample> =
            read_optional(&dir.join(files::TIMESERIES))?.unwrap_or_default();
        let mut nodes = Vec::with_capacity(s.nodes.len());
        for n in &s.nodes {
            let nd = path.join(&n.dir);
            nodes.push(NodeData {
                step: n.clone(),
                trace: read_optional(&nd.join(files::TRACE))?,
                sys: read_optional(&nd.join(files::SYSSTAT))?,
                events: read_optional(&nd.join(files::EVENTS))?.unwrap_or_default(),
            });
        }
        steps.push(StepData {
            summary: s.clone(),
            histograms: read_optional(&dir.join(files::HISTOGRAMS))?,
            trace: read_optional(&dir.join(files::TRACE))?,
            sys: read_optional(&dir.join(files::SYSSTAT))?,
            events: read_optional(&dir.join(files::EVENTS))?.unwrap_or_default(),
            timeseries,
            dir,
            nodes,
        });
    }
    Ok(RunData {
        path: path.to_path_buf(),
        doc,
        steps,
    })
}
