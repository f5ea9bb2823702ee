//! Reading run.json back, the same way for every reader (report, compare, merge, the clean-up of
//! a later run): the schema version checked with a message that names both versions, secrets
//! redacted even in files an older iodig wrote, and a run whose writer is gone settled as
//! `killed` instead of `running` forever.

use crate::writer::WriterState;
use crate::{files, secret, RunDoc, SCHEMA_VERSION};
use anyhow::{bail, Context, Result};
use std::path::Path;

/// The oldest schema version this iodig reads.
pub const MIN_SCHEMA_VERSION: u32 = 1;

/// Status of a run whose iodig was gone while run.json said `running`.
pub const KILLED: &str = "killed";

/// Checks run.json's `schema_version` before its fields are trusted: the message names the
/// version found, the versions this iodig reads and the iodig that wrote the file.
pub fn check_schema(raw: &serde_json::Value, path: &Path) -> Result<()> {
    let writer = raw
        .pointer("/tool/version")
        .and_then(|v| v.as_str())
        .unwrap_or("unknown");
    let this = env!("CARGO_PKG_VERSION");
    match raw.get("schema_version").and_then(serde_json::Value::as_u64) {
        Some(v) if (u64::from(MIN_SCHEMA_VERSION)..=u64::from(SCHEMA_VERSION)).contains(&v) => {
            Ok(())
        }
        Some(v) if v > u64::from(SCHEMA_VERSION) => bail!(
            "{}: schema version {v}, but this iodig ({this}) reads schema versions {MIN_SCHEMA_VERSION}–{SCHEMA_VERSION}; \
             read it with the iodig that wrote it ({writer}) or a newer one",
            path.display()
        ),
        Some(v) => bail!(
            "{}: schema version {v}, older than any this iodig ({this}) reads \
             ({MIN_SCHEMA_VERSION}–{SCHEMA_VERSION}); read it with the iodig that wrote it ({writer})",
            path.display()
        ),
        None => bail!(
            "{}: no schema_version (expected {SCHEMA_VERSION}); this is not a run.json written by iodig",
            path.display()
        ),
    }
}

/// Reads `dir/run.json`: schema checked, secret values redacted. The status is as written; see
/// [`settle`] for a run that says `running`.
pub fn read_run_doc(dir: &Path) -> Result<RunDoc> {
    let path = dir.join(files::RUN);
    let raw: serde_json::Value = crate::fsio::read_json(&path)?;
    check_schema(&raw, &path)?;
    let mut doc: RunDoc = serde_json::from_value(raw)
        .with_context(|| format!("{} is not a valid iodig run.json", path.display()))?;
    // Runs written before secrets were redacted still must not show them in a report.
    secret::redact_properties(&mut doc.config.properties);
    doc.tool.command_line = secret::redact_args(&doc.tool.command_line);
    Ok(doc)
}

/// What a reader makes of a run that says `running`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Not `running`: nothing to settle.
    Finished,
    /// Its writer is at work: the steps so far.
    Running(String),
    /// Its writer is gone: now `killed`.
    Killed(String),
    /// Nobody can tell (another host, an older iodig that recorded no writer).
    Unknown(String),
}

impl Settled {
    /// The sentence a reader shows, if any.
    pub fn note(&self) -> Option<&str> {
        match self {
            Settled::Finished => None,
            Settled::Running(s) | Settled::Killed(s) | Settled::Unknown(s) => Some(s),
        }
    }
}

/// "its 3 finished steps (0–2) are intact" for `n` finished steps.
fn finished_steps(n: usize) -> String {
    match n {
        0 => "no step had finished".into(),
        1 => "its finished step (0) is intact".into(),
        n => format!("its {n} finished steps (0–{}) are intact", n - 1),
    }
}

/// A run that says `running` whose writer is gone becomes `killed`, with a note saying during
/// which step; one still being written, or one nobody can check, gets a note and keeps its
/// status. Changes only `doc`, never the file.
pub fn settle(doc: &mut RunDoc) -> Settled {
    if doc.status != "running" {
        return Settled::Finished;
    }
    let step = doc.steps.len();
    let settled = match doc.writer.as_ref().map(crate::writer::Writer::state) {
        Some(WriterState::Gone(why)) => {
            doc.status = KILLED.into();
            Settled::Killed(format!(
                "The run was killed during step {step}: {why}; {}.",
                finished_steps(step)
            ))
        }
        Some(WriterState::Alive) => Settled::Running(format!(
            "The run is still running (step {step} in progress); {} so far.",
            match step {
                0 => "no step has finished".to_string(),
                n => format!("{n} steps finished"),
            }
        )),
        Some(WriterState::Unknown(why)) => Settled::Unknown(format!(
            "run.json says running, but {why}: it is still running or was killed during step {step}; {}.",
            finished_steps(step)
        )),
        None => Settled::Unknown(format!(
            "run.json says running but names no writing process (an older iodig wrote it): it is still running or was killed during step {step}; {}.",
            finished_steps(step)
        )),
    };
    if let Some(n) = settled.note() {
        doc.notes.insert(0, n.to_string());
    }
    settled
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::Writer;
    use crate::{Environment, RunConfig, ToolInfo};

    fn doc(status: &str, writer: Option<Writer>) -> RunDoc {
        RunDoc {
            schema_version: SCHEMA_VERSION,
            tool: ToolInfo {
                name: "iodig".into(),
                version: "0".into(),
                command_line: vec![
                    "iodig".into(),
                    "-p".into(),
                    "cassandra.password=S3cr3t".into(),
                ],
                revision: None,
            },
            started_unix_ms: 0,
            updated_unix_ms: 0,
            status: status.into(),
            config: RunConfig {
                db: "basic".into(),
                property_files: vec![],
                properties: [("cassandra.password".to_string(), "S3cr3t".to_string())].into(),
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
            writer,
            integrity: None,
        }
    }

    fn dead_writer() -> Writer {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let mut w = Writer::current();
        w.pid = child.id();
        child.wait().unwrap();
        w
    }

    #[test]
    fn a_running_run_whose_writer_is_gone_is_killed() {
        let mut d = doc("running", Some(dead_writer()));
        let s = settle(&mut d);
        assert!(
            matches!(&s, Settled::Killed(n) if n.contains("killed during step 0")),
            "{s:?}"
        );
        assert_eq!(d.status, KILLED);
        assert!(d.notes[0].contains("no step had finished"));

        let mut live = doc("running", Some(Writer::current()));
        assert!(matches!(settle(&mut live), Settled::Running(_)));
        assert_eq!(live.status, "running");

        let mut old = doc("running", None);
        assert!(matches!(settle(&mut old), Settled::Unknown(_)));
        assert_eq!(old.status, "running");

        let mut done = doc("completed", Some(dead_writer()));
        assert_eq!(settle(&mut done), Settled::Finished);
        assert!(done.notes.is_empty());
    }

    #[test]
    fn other_schema_versions_name_both_versions_and_secrets_are_redacted_on_read() {
        let dir = std::env::temp_dir().join(format!("iodig-reading-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut raw = serde_json::to_value(doc("completed", None)).unwrap();
        std::fs::write(dir.join(files::RUN), raw.to_string()).unwrap();
        let d = read_run_doc(&dir).unwrap();
        assert_eq!(d.config.properties["cassandra.password"], "***");
        assert!(!d.tool.command_line.join(" ").contains("S3cr3t"));

        raw["schema_version"] = 7.into();
        std::fs::write(dir.join(files::RUN), raw.to_string()).unwrap();
        let e = format!("{:#}", read_run_doc(&dir).unwrap_err());
        assert!(
            e.contains("schema version 7")
                && e.contains(&format!(
                    "reads schema versions {MIN_SCHEMA_VERSION}–{SCHEMA_VERSION}"
                )),
            "{e}"
        );
        raw["schema_version"] = 0.into();
        std::fs::write(dir.join(files::RUN), raw.to_string()).unwrap();
        let e = format!("{:#}", read_run_doc(&dir).unwrap_err());
        assert!(e.contains("schema version 0") && e.contains("older"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
