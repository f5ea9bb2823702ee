//! `iodig run --resume RUN_DIR`: a run that was killed, interrupted or stopped by an error goes
//! on where it stopped. Its finished steps stay as they are, byte for byte; the step it was in
//! runs again from its start, and the rest follow with the configuration run.json recorded.
//!
//! Nothing is changed before everything is checked: [`open`] only reads the run directory and
//! says which steps are kept; [`crate::plan::Plan::check_resume`] compares the plan resolved
//! again from the recorded command line with what run.json recorded; the deployment checks
//! that the dataset is the one the kept steps ran on
//! ([`crate::dataset::resume_keeps_dataset`]); only then does [`crate::rundir::RunDir::reopen`]
//! remove the partial step and take the run over.

use crate::errors::UsageError;
use anyhow::Result;
use iodig_model::reading::read_run_doc;
use iodig_model::writer::{Writer, WriterState};
use iodig_model::{files, RunDoc, StepSummary};
use std::path::{Path, PathBuf};

/// A run found resumable: where it is, what run.json says, and the steps kept.
#[derive(Debug, Clone)]
pub struct ResumeFrom {
    /// The run directory, canonical.
    pub dir: PathBuf,
    /// run.json as read (status and notes as the killed or interrupted run left them).
    pub doc: RunDoc,
    /// The finished steps, in order: those run.json lists, without a last one that was
    /// interrupted, and with one whose files were all written before run.json named it.
    pub kept: Vec<StepSummary>,
    /// How the run ended, for the note the resumed run.json carries ("killed during step 2").
    pub how_it_ended: String,
}

impl ResumeFrom {
    /// Whether the kept steps decided the dataset: a finished load step, or a finished run
    /// step that ran on a dataset found loaded. Then the resumed run must not load, and the
    /// dataset must still be that one.
    pub fn dataset_settled(&self) -> bool {
        !self.kept.is_empty()
    }

    /// Whether the only kept step is the load.
    pub fn kept_only_the_load(&self) -> bool {
        self.kept.len() == 1 && self.kept[0].phase == "load"
    }

    /// The step names (`load`, `workloada-t2`) of the run, kept or not, as a dataset marker
    /// names the step that grew it.
    pub fn step_names(&self) -> Vec<String> {
        self.doc
            .steps
            .iter()
            .chain(&self.kept)
            .map(|s| step_name(&s.dir).to_string())
            .collect()
    }
}

/// `load` of `steps/00-load`.
pub fn step_name(dir: &str) -> &str {
    let base = dir.rsplit('/').next().unwrap_or(dir);
    match base.split_once('-') {
        Some((n, name)) if n.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => base,
    }
}

pub(crate) fn refuse(dir: &Path, why: impl std::fmt::Display) -> anyhow::Error {
    UsageError(format!("--resume {}: {why}", dir.display())).into()
}

/// Reads a run directory to resume, refusing (exit 2) one that is not a run, is finished, is
/// still being written, or is not a single `iodig run`'s. Changes nothing.
pub fn open(dir: &Path) -> Result<ResumeFrom> {
    if !dir.join(files::RUN).is_file() {
        return Err(refuse(
            dir,
            if dir.is_dir() {
                "not a run directory (it has no run.json); give a directory iodig run created, e.g. runs/20260101-120000-workloada-rocksdb"
            } else {
                "no such directory; give a run directory iodig run created, e.g. runs/20260101-120000-workloada-rocksdb"
            },
        ));
    }
    let canonical = dir
        .canonicalize()
        .map_err(|e| refuse(dir, format!("cannot resolve the path ({e})")))?;
    let doc = read_run_doc(&canonical).map_err(|e| refuse(dir, format!("{e:#}")))?;
    if doc.schema_version != iodig_model::SCHEMA_VERSION {
        // Its kept steps would be in one schema and the new ones in another under one
        // schema_version; an older iodig reading it back would misread the newer steps.
        return Err(refuse(
            dir,
            format!(
                "run.json is schema version {}, and this iodig writes schema version {}; resume it with the iodig that wrote it ({}), or start a new run",
                doc.schema_version,
                iodig_model::SCHEMA_VERSION,
                doc.tool.version
            ),
        ));
    }
    let how_it_ended = match doc.status.as_str() {
        "completed" => {
            return Err(refuse(
                dir,
                format!(
                    "the run already completed (all its {} steps); there is nothing to resume: start a new run to measure again",
                    doc.steps.len()
                ),
            ))
        }
        "running" => match doc.writer.as_ref().map(Writer::state) {
            Some(WriterState::Gone(why)) => {
                format!("killed during step {} ({why})", doc.steps.len())
            }
            Some(WriterState::Alive) => {
                let pid = doc.writer.as_ref().map_or(0, |w| w.pid);
                return Err(refuse(
                    dir,
                    format!("the run is still being written by iodig (pid {pid}); wait for it to end, or stop it (Ctrl-C or kill {pid}) and resume then"),
                ));
            }
            Some(WriterState::Unknown(why)) => {
                return Err(refuse(
                    dir,
                    format!("run.json says running, and {why}: it may still be running; resume it on the host that wrote it"),
                ))
            }
            None => {
                return Err(refuse(
                    dir,
                    "run.json says running but names no writing process (an older iodig wrote it), so it may still be running; it cannot be resumed",
                ))
            }
        },
        "killed" => format!("killed during step {}", doc.steps.len()),
        "interrupted" => match doc.steps.last() {
            Some(s) if s.interrupted => format!("interrupted during step {}", s.index),
            // Ctrl-C between two steps: the last one finished whole.
            Some(s) => format!("interrupted after step {}", s.index),
            None => "interrupted before its first step".to_string(),
        },
        "failed" => format!(
            "stopped by an error during step {}",
            doc.steps.len()
        ),
        other => return Err(refuse(dir, format!("run.json has status {other:?}, which this iodig does not know how to resume"))),
    };
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let there = &doc.environment.hostname;
    if !here.is_empty() && !there.is_empty() && here != *there {
        // Its steps measured that machine's storage; more steps from this one would not be the
        // same experiment.
        return Err(refuse(
            dir,
            format!("the run was made on host {there}, and this is {here}; resume it there"),
        ));
    }
    match doc.tool.command_line.get(1).map(String::as_str) {
        Some("run") => {}
        Some(verb) => {
            return Err(refuse(
                dir,
                format!("this run was made by iodig {verb}, and only the steps of iodig run can be resumed{}", if verb == "load" { "; load again with iodig load" } else { "" }),
            ))
        }
        None => return Err(refuse(dir, "run.json records no command line to resume with")),
    }
    let mut kept = doc.steps.clone();
    if kept.last().is_some_and(|s| s.interrupted) {
        // Ctrl-C recorded the step it ended; it is the one to run again.
        kept.pop();
    }
    if doc.status != "interrupted" {
        kept.extend(written_but_unlisted(&canonical, &doc));
    }
    Ok(ResumeFrom {
        dir: canonical,
        doc,
        kept,
        how_it_ended,
    })
}

/// The step a killed iodig wrote whole (its summary.json, the last of its files, is there) but
/// did not name in run.json yet: a finished step, kept like the others.
fn written_but_unlisted(dir: &Path, doc: &RunDoc) -> Option<StepSummary> {
    let index = doc.steps.len();
    let entries = std::fs::read_dir(dir.join("steps")).ok()?;
    entries.flatten().find_map(|e| {
        let rel = format!("steps/{}", e.file_name().to_string_lossy());
        let summary: StepSummary =
            iodig_model::fsio::read_json(&e.path().join(files::STEP_SUMMARY)).ok()?;
        (summary.index == index && summary.dir == rel && !summary.interrupted).then_some(summary)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names_come_from_their_directories() {
        assert_eq!(step_name("steps/00-load"), "load");
        assert_eq!(step_name("steps/03-workloada-t16-r2"), "workloada-t16-r2");
    }

    #[test]
    fn a_directory_that_is_not_a_run_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let e = format!("{:#}", open(dir.path()).unwrap_err());
        assert!(e.contains("not a run directory"), "{e}");
        let e = format!("{:#}", open(&dir.path().join("nope")).unwrap_err());
        assert!(e.contains("no such directory"), "{e}");
    }
}
