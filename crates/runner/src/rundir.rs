//! The run directory, the product: `run.json` rewritten atomically after every step, and one
//! directory of files per step beside it. run.json names the process writing it, so a run whose
//! iodig was killed is recognised later; the next run into the same `--out` settles such runs
//! and removes what they left half-written.

use crate::utc::{timestamp_utc, unix_ms};
use anyhow::{Context, Result};
use iodig_model::fsio::{is_temp_name, read_json, write_atomic, write_json_atomic};
use iodig_model::reading::{read_run_doc, settle, Settled};
use iodig_model::writer::{Writer, WriterState};
use iodig_model::{files, RunDoc, StepSummary};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A run directory being written.
pub struct RunDir {
    /// The run directory, `<out>/<YYYYMMDD-HHMMSS>-<label>` (UTC; `-2`, `-3`, … when taken).
    pub path: PathBuf,
    /// run.json as it is written next; changes reach the file with [`RunDir::save`].
    pub doc: RunDoc,
    /// The step directory being written and not yet in run.json.
    recording: Option<PathBuf>,
}

/// "steps 0–2 are intact" for `n` finished steps.
fn intact(n: usize) -> String {
    match n {
        0 => "no step had finished before it".into(),
        1 => "step 0 is intact".into(),
        n => format!("steps 0–{} are intact", n - 1),
    }
}

impl Drop for RunDir {
    /// An error or a panic ended the run before `finish`: run.json says `failed` rather than
    /// `running`, which a later reader would take for a killed run. A step directory left
    /// half-written goes first: on a full disk its space is what lets run.json be rewritten.
    fn drop(&mut self) {
        if self.doc.status != "running" {
            return;
        }
        if let Some(dir) = self.recording.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
        let n = self.doc.steps.len();
        self.doc.status = "failed".into();
        self.doc.notes.insert(
            0,
            format!(
                "The run failed during step {n}: iodig stopped on the error it printed; {}.",
                intact(n)
            ),
        );
        self.doc.updated_unix_ms = unix_ms(SystemTime::now());
        if let Err(e) = self.save() {
            iodig_model::eprintln_lossy!(
                "warning: {} still says running: {e:#}",
                self.path.join(files::RUN).display()
            );
        }
    }
}

/// Whether a note says how the run ended (killed, failed, still running): what a reader or the
/// run's own iodig put first in its notes, which a resumed run replaces.
fn is_ending_note(note: &str) -> bool {
    [
        "The run was killed during step",
        "The run failed during step",
        "The run is still running",
        "run.json says running",
    ]
    .iter()
    .any(|p| note.starts_with(p))
}

/// Settles every run in `out` that a killed iodig left `running`: a step whose files were all
/// written (its summary.json is the last) but that run.json did not list yet is taken in, a
/// half-written step directory and temporary files are removed, and run.json says `killed`.
/// Runs still being written, on another host or of another schema are left alone. Returns
/// what was done, one line per run; errors are said, never fatal: they are another run's.
pub fn clean_up_killed_runs(out: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(out) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        if !says_running(&dir.join(files::RUN)) {
            continue;
        }
        let Ok(doc) = read_run_doc(&dir) else {
            continue;
        };
        let gone = doc.status == "running"
            && matches!(
                doc.writer.as_ref().map(Writer::state),
                Some(WriterState::Gone(_))
            );
        if gone {
            lines.push(match settle_killed_run(&dir, doc) {
                Ok(line) => line,
                Err(e) => format!(
                    "{}: a killed run, could not be settled: {e:#}",
                    dir.display()
                ),
            });
        }
    }
    lines.sort();
    lines
}

/// Whether a run.json says `running`, from its head only: `status` is written before the
/// config and the steps, and an `--out` of hundreds of finished runs must not be parsed whole at
/// every start.
fn says_running(run_json: &Path) -> bool {
    use std::io::Read;
    let Ok(f) = std::fs::File::open(run_json) else {
        return false;
    };
    let mut head = Vec::new();
    if f.take(64 << 10).read_to_end(&mut head).is_err() {
        return false;
    }
    let head = String::from_utf8_lossy(&head);
    head.contains("\"status\": \"running\"")
}

/// Settles one killed run (see [`clean_up_killed_runs`]); returns what was done.
fn settle_killed_run(dir: &Path, mut doc: RunDoc) -> Result<String> {
    let mut done = Vec::new();
    let listed: Vec<PathBuf> = doc.steps.iter().map(|s| dir.join(&s.dir)).collect();
    let mut unlisted: Vec<PathBuf> = std::fs::read_dir(dir.join("steps"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir() && !listed.contains(p))
                .collect()
        })
        .unwrap_or_default();
    unlisted.sort();
    for step_dir in unlisted {
        let rel = step_dir
            .strip_prefix(dir)
            .unwrap_or(&step_dir)
            .display()
            .to_string();
        let finished = read_json::<StepSummary>(&step_dir.join(files::STEP_SUMMARY))
            .ok()
            .filter(|s| s.index == doc.steps.len() && s.dir == rel);
        match finished {
            Some(summary) => {
                done.push(format!(
                    "took in step {} ({rel}), whose files were all written before the kill",
                    summary.index
                ));
                doc.steps.push(summary);
            }
            None => {
                std::fs::remove_dir_all(&step_dir)
                    .with_context(|| format!("cannot remove {}", step_dir.display()))?;
                done.push(format!("removed the half-written step directory {rel}"));
            }
        }
    }
    let mut temps = 0;
    // The run directory itself, and each step's with its per-node directories below it.
    let mut todo: Vec<(PathBuf, usize)> = vec![(dir.to_path_buf(), 0)];
    todo.extend(doc.steps.iter().map(|s| (dir.join(&s.dir), 1)));
    while let Some((d, depth)) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                if depth > 0 && depth < 4 {
                    todo.push((p, depth + 1));
                }
            } else if is_temp_name(&e.file_name().to_string_lossy()) {
                std::fs::remove_file(&p)
                    .with_context(|| format!("cannot remove {}", p.display()))?;
                temps += 1;
            }
        }
    }
    if temps > 0 {
        done.push(format!(
            "removed {temps} temporary file(s) of unfinished writes"
        ));
    }
    if let Settled::Killed(note) = settle(&mut doc) {
        done.insert(0, format!("marked killed ({})", note.trim_end_matches('.')));
    }
    doc.updated_unix_ms = unix_ms(SystemTime::now());
    write_json_atomic(&dir.join(files::RUN), &doc)?;
    Ok(format!(
        "cleaned up after a killed run in {}: {}",
        dir.display(),
        done.join("; ")
    ))
}

impl RunDir {
    /// Creates `<out>/<timestamp>-<label>` (with a suffix if taken) and writes the first run.json,
    /// naming this process as its writer; first settles the runs a killed iodig left in `out`.
    pub fn create(out: &Path, label: &str, mut doc: RunDoc) -> Result<Self> {
        std::fs::create_dir_all(out).with_context(|| {
            format!("--out {}: cannot create the output directory; choose a writable directory with --out DIR", out.display())
        })?;
        for line in clean_up_killed_runs(out) {
            iodig_model::eprintln_lossy!("iodig: {line}");
        }
        doc.writer = Some(Writer::current());
        let base = format!("{}-{label}", timestamp_utc(SystemTime::now()));
        let mut path = out.join(&base);
        let mut n = 2;
        while path.exists() {
            path = out.join(format!("{base}-{n}"));
            n += 1;
        }
        std::fs::create_dir(&path).with_context(|| {
            format!("--out {}: cannot create a run directory there; choose a writable directory with --out DIR", out.display())
        })?;
        let dir = Self {
            path,
            doc,
            recording: None,
        };
        dir.save()?;
        Ok(dir)
    }

    /// Takes over a run to resume ([`crate::resume`]): every step directory but those of `keep`
    /// (a step half-written, or one that was interrupted) and the temporary files of unfinished
    /// writes are removed, the kept steps' files are left as they are, and run.json lists the
    /// kept steps, says `running` under this process and notes the resume. `trace_note`: what
    /// the tracer's preflight said this time, noted when the run did not say it already.
    pub fn reopen(
        from: &crate::resume::ResumeFrom,
        keep: Vec<StepSummary>,
        trace_note: Option<String>,
    ) -> Result<Self> {
        let dir = from.dir.clone();
        let kept: Vec<PathBuf> = keep.iter().map(|s| dir.join(&s.dir)).collect();
        let mut removed = Vec::new();
        for e in std::fs::read_dir(dir.join("steps"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = e.path();
            if kept.contains(&p) {
                continue;
            }
            if p.is_dir() {
                std::fs::remove_dir_all(&p)
                    .with_context(|| format!("cannot remove {}", p.display()))?;
                removed.push(format!("steps/{}", e.file_name().to_string_lossy()));
            } else if is_temp_name(&e.file_name().to_string_lossy()) {
                std::fs::remove_file(&p)
                    .with_context(|| format!("cannot remove {}", p.display()))?;
            }
        }
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.path().is_file() && is_temp_name(&e.file_name().to_string_lossy()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let mut doc = from.doc.clone();
        let n = keep.len();
        doc.steps = keep;
        // The notes a reader or a dying iodig added about how the run ended are replaced by the
        // one below, which says it and that the run went on.
        doc.notes.retain(|n| !is_ending_note(n));
        if let Some(t) = trace_note.filter(|t| !doc.notes.contains(t)) {
            doc.notes.push(t);
        }
        let now = SystemTime::now();
        doc.notes.push(format!(
            "Resumed at {} by iodig run --resume (pid {}): the run had been {}; {}, and {} ran again from its start{}.",
            crate::utc::format_utc(now),
            std::process::id(),
            from.how_it_ended,
            match n {
                0 => "no step had finished".to_string(),
                1 => "step 0 was kept as it was".to_string(),
                n => format!("steps 0–{} were kept as they were", n - 1),
            },
            if n == 0 { "the run".to_string() } else { format!("step {n}") },
            if removed.is_empty() {
                String::new()
            } else {
                format!(" (its partial files removed: {})", removed.join(", "))
            }
        ));
        doc.status = "running".into();
        doc.writer = Some(Writer::current());
        doc.updated_unix_ms = unix_ms(now);
        let run = Self {
            path: dir,
            doc,
            recording: None,
        };
        run.save()?;
        iodig_model::eprintln_lossy!(
            "resuming {} at step {n}{}",
            run.path.display(),
            if removed.is_empty() {
                String::new()
            } else {
                format!(" (removed {})", removed.join(", "))
            }
        );
        Ok(run)
    }

    /// Rewrites run.json atomically.
    pub fn save(&self) -> Result<()> {
        write_json_atomic(&self.path.join(files::RUN), &self.doc)
    }

    /// Directory of step `index` named `label`, created on first use.
    pub fn step_dir(&mut self, index: usize, label: &str) -> Result<(PathBuf, String)> {
        let rel = format!("steps/{index:02}-{label}");
        let path = self.path.join(&rel);
        self.recording = Some(path.clone());
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))
            .map_err(|e| self.recording_error(e))?;
        Ok((path, rel))
    }

    /// Writes `value` as JSON to `step_dir/name` atomically; a failure says which steps are
    /// intact.
    pub fn write_json<T: Serialize + ?Sized>(
        &self,
        step_dir: &Path,
        name: &str,
        value: &T,
    ) -> Result<()> {
        write_json_atomic(&step_dir.join(name), value).map_err(|e| self.recording_error(e))
    }

    /// A step file written elsewhere (the series files of `iodig_model::series`), its failure
    /// worded as [`Self::write_json`]'s: which steps are intact.
    pub fn recorded<T>(&self, written: Result<T>) -> Result<T> {
        written.map_err(|e| self.recording_error(e))
    }

    /// Writes `bytes` to `step_dir/name` atomically; a failure says which steps are intact.
    pub fn write_bytes(&self, step_dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
        write_atomic(&step_dir.join(name), bytes).map_err(|e| self.recording_error(e))
    }

    /// Appends a finished step's summary and saves run.json.
    pub fn push_step(&mut self, step: StepSummary) -> Result<()> {
        self.doc.steps.push(step);
        self.doc.updated_unix_ms = unix_ms(SystemTime::now());
        match self.save() {
            Ok(()) => {
                self.recording = None;
                Ok(())
            }
            Err(e) => {
                // run.json still lists the steps before this one: so does the error.
                self.doc.steps.pop();
                Err(self.recording_error(e))
            }
        }
    }

    /// A step that could not be written says which, and that the steps before it are safe.
    fn recording_error(&self, e: anyhow::Error) -> anyhow::Error {
        let n = self.doc.steps.len();
        e.context(format!(
            "step {n} could not be recorded; {} in {}",
            intact(n),
            self.path.display()
        ))
    }

    /// Marks the run's final status and saves run.json.
    pub fn finish(&mut self, status: &str) -> Result<()> {
        self.doc.status = status.to_string();
        self.doc.updated_unix_ms = unix_ms(SystemTime::now());
        self.save()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodig_model::{Environment, RunConfig, ToolInfo, SCHEMA_VERSION};

    fn doc() -> RunDoc {
        RunDoc {
            schema_version: SCHEMA_VERSION,
            tool: ToolInfo {
                name: "iodig".into(),
                version: "0".into(),
                command_line: vec![],
                revision: None,
            },
            started_unix_ms: 0,
            updated_unix_ms: 0,
            status: "running".into(),
            config: RunConfig {
                db: "basic".into(),
                property_files: vec![],
                properties: Default::default(),
                threads: vec![1],
                target_ops_per_sec: None,
                warmup_secs: 0.0,
                seed: 1,
                trace: "off".into(),
                stop_when: None,
                label: None,
            },
            environment: Environment::default(),
            steps: vec![],
            notes: vec![],
            cluster: None,
            writer: None,
            integrity: None,
        }
    }

    fn step(index: usize, dir: &str) -> StepSummary {
        StepSummary {
            index,
            phase: "run".into(),
            dir: dir.into(),
            workload: "w".into(),
            threads: 1,
            target_ops_per_sec: None,
            started_unix_ms: 0,
            runtime_ms: 1000,
            operations: 1,
            throughput_ops_per_sec: 1.0,
            interrupted: false,
            series: Default::default(),
            returns: Default::default(),
            trace_mode: None,
            trace_note: None,
            client_cpu_s: None,
            nodes: vec![],
            sweep_stop: None,
            node_reads: Default::default(),
            node_reads_notes: Vec::new(),
            ended_early: None,
        }
    }

    /// A run a killed iodig left: step 0 listed, step 1 written in full but not yet listed,
    /// step 2 half-written, temporary files beside run.json and in step 0.
    #[test]
    fn a_later_run_settles_what_a_killed_one_left_and_leaves_live_runs_alone() {
        let out = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let mut dead = Writer::current();
        dead.pid = child.id();
        child.wait().unwrap();

        let killed = out.path().join("20260101-000000-w-basic");
        let mut d = doc();
        d.writer = Some(dead);
        d.steps.push(step(0, "steps/00-w-t1"));
        for s in ["steps/00-w-t1", "steps/01-w-t2", "steps/02-w-t4"] {
            std::fs::create_dir_all(killed.join(s)).unwrap();
        }
        write_json_atomic(&killed.join(files::RUN), &d).unwrap();
        write_json_atomic(
            &killed.join("steps/01-w-t2").join(files::STEP_SUMMARY),
            &step(1, "steps/01-w-t2"),
        )
        .unwrap();
        std::fs::write(killed.join("steps/02-w-t4/timeseries.json"), "[").unwrap();
        std::fs::write(killed.join(".run.json.77.tmp"), "{").unwrap();
        std::fs::write(killed.join("steps/00-w-t1/.trace.json.77.tmp"), "{").unwrap();
        std::fs::create_dir_all(killed.join("steps/00-w-t1/nodes/n1")).unwrap();
        std::fs::write(killed.join("steps/00-w-t1/nodes/n1/.sys.json.77.tmp"), "{").unwrap();

        // A run still being written (this process) is not touched.
        let live = out.path().join("20260101-000001-w-basic");
        std::fs::create_dir_all(&live).unwrap();
        let mut l = doc();
        l.writer = Some(Writer::current());
        write_json_atomic(&live.join(files::RUN), &l).unwrap();
        std::fs::write(live.join(".run.json.78.tmp"), "{").unwrap();

        let lines = clean_up_killed_runs(out.path());
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        for said in [
            "killed during step 2",
            "took in step 1 (steps/01-w-t2)",
            "removed the half-written step directory steps/02-w-t4",
            "removed 3 temporary file(s)",
        ] {
            assert!(line.contains(said), "{said:?} not in {line}");
        }
        let after: RunDoc = read_json(&killed.join(files::RUN)).unwrap();
        assert_eq!(after.status, "killed");
        assert_eq!(after.steps.len(), 2);
        assert!(!killed.join("steps/02-w-t4").exists());
        assert!(!killed.join(".run.json.77.tmp").exists());
        assert!(live.join(".run.json.78.tmp").exists());
        let l: RunDoc = read_json(&live.join(files::RUN)).unwrap();
        assert_eq!(l.status, "running");
        // Settled once: the next run has nothing to say.
        assert!(clean_up_killed_runs(out.path()).is_empty());
    }

    /// A killed run resumed: the listed step and the one written whole but not listed are
    /// kept untouched, the half-written one and the temporary files go, and run.json says
    /// running under this process with a note replacing the reader's "killed" one.
    #[test]
    fn a_resumed_run_keeps_its_finished_steps_and_removes_the_partial_one() {
        let out = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let mut dead = Writer::current();
        dead.pid = child.id();
        child.wait().unwrap();
        let run = out.path().join("20260101-000000-w-basic");
        let mut d = doc();
        d.tool.command_line = vec!["iodig".into(), "run".into()];
        d.writer = Some(dead);
        d.steps.push(step(0, "steps/00-w-t1"));
        d.notes
            .push("The run was killed during step 1: gone.".into());
        for s in ["steps/00-w-t1", "steps/01-w-t2", "steps/02-w-t4"] {
            std::fs::create_dir_all(run.join(s)).unwrap();
        }
        write_json_atomic(&run.join(files::RUN), &d).unwrap();
        std::fs::write(run.join("steps/00-w-t1/ycsb.txt"), "kept").unwrap();
        write_json_atomic(
            &run.join("steps/01-w-t2").join(files::STEP_SUMMARY),
            &step(1, "steps/01-w-t2"),
        )
        .unwrap();
        std::fs::write(run.join("steps/02-w-t4/timeseries.json"), "[").unwrap();
        std::fs::write(run.join(".run.json.77.tmp"), "{").unwrap();
        std::fs::write(run.join("steps/.io-events.csv.77.tmp"), "").unwrap();

        let from = crate::resume::open(&run).unwrap();
        assert_eq!(from.kept.len(), 2, "the whole but unlisted step is kept");
        assert!(from.how_it_ended.starts_with("killed during step 1"));
        // Opening changes nothing.
        assert!(run.join("steps/02-w-t4").exists());
        let reopened = RunDir::reopen(&from, from.kept.clone(), None).unwrap();
        assert_eq!(reopened.doc.steps.len(), 2);
        assert_eq!(reopened.doc.status, "running");
        assert_eq!(reopened.doc.writer, Some(Writer::current()));
        assert!(!run.join("steps/02-w-t4").exists());
        assert!(!run.join(".run.json.77.tmp").exists());
        assert!(!run.join("steps/.io-events.csv.77.tmp").exists());
        assert_eq!(
            std::fs::read_to_string(run.join("steps/00-w-t1/ycsb.txt")).unwrap(),
            "kept"
        );
        let notes = &reopened.doc.notes;
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("Resumed at ") && notes[0].contains("steps 0–1 were kept"),
            "{notes:?}"
        );
        // Being written now: a second resume is refused.
        let e = format!("{:#}", crate::resume::open(&run).unwrap_err());
        assert!(e.contains("still being written"), "{e}");
        drop(reopened);
    }

    #[test]
    fn a_run_ended_by_an_error_says_failed_not_running() {
        let out = tempfile::tempdir().unwrap();
        let mut run = RunDir::create(out.path(), "w-basic", doc()).unwrap();
        let path = run.path.clone();
        run.step_dir(0, "w-t1").unwrap();
        drop(run);
        let after: RunDoc = read_json(&path.join(files::RUN)).unwrap();
        assert_eq!(after.status, "failed");
        assert!(
            after.notes[0].contains("failed during step 0"),
            "{:?}",
            after.notes
        );
        assert!(
            !path.join("steps/00-w-t1").exists(),
            "the half-written step is removed"
        );
    }
}
