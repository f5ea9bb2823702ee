//! Experiment files (TOML): workloads × thread counts × repetitions on one dataset, the briefs'
//! methods written down once. Documented in `docs/experiments.md`; examples in `examples/`.

use crate::errors::UsageError;
use crate::request::WorkloadRun;
use crate::stop_rule::StopRule;
use anyhow::Result;
use iodig_workload::BUILTIN_WORKLOADS;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The top level of an experiment file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentFile {
    /// Binding (`rocksdb`, `cassandra`, `basic`).
    pub db: Option<String>,
    /// Times each workload × thread count runs; the report merges repetitions.
    #[serde(default = "one")]
    pub repetitions: u32,
    /// Measured time per step (`20s`, `2m`).
    pub duration: Option<String>,
    /// Unmeasured time at the start of each run step (`5s`), as `--warmup`.
    pub warmup: Option<String>,
    /// `auto`, `ebpf`, `diskstats`, `off`.
    pub trace: Option<String>,
    /// Operations per second for the whole client (`--target`); latency from the intended
    /// start is recorded too. Absent: unthrottled, unless the command or the `target` property
    /// gives a rate.
    pub target: Option<f64>,
    /// Put the loaded dataset back from its snapshot before every run step
    /// (`--restore-each-step`; managed Cassandra nodes, or Cassandra nodes on observed hosts).
    #[serde(default)]
    pub restore_each_step: bool,
    /// Empty the page cache here and on the observed hosts before every run step
    /// (`--drop-caches`).
    #[serde(default)]
    pub drop_caches: bool,
    /// Managed Cassandra nodes to start (`--nodes`).
    pub nodes: Option<u32>,
    /// Hosts whose database node is observed over SSH (`--observe`).
    #[serde(default)]
    pub observe: Vec<String>,
    /// Faults injected into every run step (`--fault`), e.g. `["10s:kill:node3"]`.
    #[serde(default)]
    pub faults: Vec<String>,
    /// Hosts to start one client each on over SSH (`--clients`); ignored by a run given
    /// `--client I/N`, which is one of those clients.
    #[serde(default)]
    pub clients: Vec<String>,
    /// The sweep's stop rule (`--stop-when`), e.g. `stop_when = "read.p99 > 50ms"`.
    pub stop_when: Option<String>,
    /// Read back every acknowledged versioned write after the last step (`--verify`).
    #[serde(default)]
    pub verify: bool,
    /// The configuration's name (`--label`), e.g. `label = "Micron 9300"`: how `iodig compare`
    /// and `iodig report` name the run.
    pub label: Option<String>,
    /// Properties of every workload (the dataset belongs here).
    #[serde(default)]
    pub properties: BTreeMap<String, toml::Value>,
    /// The `[[workload]]` entries, run in this order on the one dataset; at least one.
    #[serde(rename = "workload", default)]
    pub workloads: Vec<WorkloadEntry>,
}

fn one() -> u32 {
    1
}

/// One `[[workload]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadEntry {
    /// YCSB workload file (or a built-in name such as `workloada`).
    pub file: String,
    /// Thread counts of its sweep, run in this order; each at least 1.
    pub threads: Vec<u64>,
    /// `[workload.properties]`: this workload's own, over `[properties]` and under `-p`.
    #[serde(default)]
    pub properties: BTreeMap<String, toml::Value>,
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A workload file named in an experiment file: a built-in name as it is, a relative path
/// next to the experiment file first, then from the current directory (so an example runs from
/// anywhere, and old files written against the working directory still work).
fn resolve_workload_file(base: &Path, file: &str) -> std::result::Result<String, String> {
    let path = Path::new(file);
    let builtin = BUILTIN_WORKLOADS.iter().any(|(name, _)| *name == file);
    if path.is_absolute() || builtin {
        return Ok(file.to_string());
    }
    let beside = base.join(path);
    if beside.is_file() {
        return Ok(beside.to_string_lossy().into_owned());
    }
    if path.is_file() {
        return Ok(file.to_string());
    }
    let stock = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| BUILTIN_WORKLOADS.iter().any(|(name, _)| name == n))
        .map(|n| format!("; for YCSB's stock file write file = \"{n}\" (built in)"))
        .unwrap_or_default();
    Err(format!(
        "no such file next to the experiment file ({}) or in the current directory{stock}",
        beside.display()
    ))
}

impl ExperimentFile {
    /// Reads and checks a file: unknown keys, no workload, `repetitions = 0`, a thread count of
    /// 0, a stop rule that does not parse or a workload file not found are usage errors (exit
    /// 2) naming the file. Workload files come back resolved to paths that open from here.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            UsageError(format!(
                "{}: cannot read the experiment file ({e})",
                path.display()
            ))
        })?;
        let file: ExperimentFile = toml::from_str(&text).map_err(|e| {
            UsageError(format!(
                "{}: not a valid experiment file: {}",
                path.display(),
                e.message()
            ))
        })?;
        let mut file = file;
        let bad = |msg: String| -> anyhow::Error {
            UsageError(format!("{}: {msg}", path.display())).into()
        };
        if file.workloads.is_empty() {
            return Err(bad(
                "no [[workload]] entry; add one with file = … and threads = […]".into(),
            ));
        }
        if file.repetitions == 0 {
            return Err(bad(
                "repetitions = 0: give at least 1 (or leave it out for 1)".into(),
            ));
        }
        if let Some(label) = &file.label {
            iodig_model::check_label(label).map_err(|e| bad(format!("label = {label:?}: {e}")))?;
        }
        if let Some(rule) = &file.stop_when {
            StopRule::parse(rule).map_err(|e| bad(format!("stop_when = {rule:?}: {e}")))?;
        }
        let base = path.parent().unwrap_or(Path::new("."));
        for (i, w) in file.workloads.iter_mut().enumerate() {
            if w.threads.is_empty() || w.threads.contains(&0) {
                return Err(bad(format!(
                    "[[workload]] {} ({}): threads = {:?}: give thread counts of at least 1, e.g. threads = [8, 16]",
                    i + 1,
                    w.file,
                    w.threads
                )));
            }
            w.file = resolve_workload_file(base, &w.file)
                .map_err(|m| bad(format!("[[workload]] {} file = {:?}: {m}", i + 1, w.file)))?;
        }
        Ok(file)
    }

    /// The stop rule, already checked by [`Self::read`].
    pub fn stop_rule(&self) -> Option<StopRule> {
        self.stop_when
            .as_deref()
            .and_then(|r| StopRule::parse(r).ok())
    }

    /// The workloads as the runner takes them: file, shared properties, own properties, then the
    /// command line's `-p` overrides (which win).
    pub fn workload_runs(&self, cli_overrides: &[String]) -> Vec<WorkloadRun> {
        self.workloads
            .iter()
            .map(|w| {
                let mut overrides: Vec<String> = self
                    .properties
                    .iter()
                    .map(|(k, v)| format!("{k}={}", value_text(v)))
                    .collect();
                overrides.extend(
                    w.properties
                        .iter()
                        .map(|(k, v)| format!("{k}={}", value_text(v))),
                );
                overrides.extend(cli_overrides.iter().cloned());
                WorkloadRun {
                    property_files: vec![w.file.clone()],
                    overrides,
                    threads: w.threads.clone(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_files_parse_into_workload_runs() {
        for entry in
            std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples")).unwrap()
        {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let f = ExperimentFile::read(&path)
                    .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                let runs = f.workload_runs(&["recordcount=5".into()]);
                assert!(!runs.is_empty());
                assert_eq!(
                    runs[0].overrides.last().unwrap(),
                    "recordcount=5",
                    "-p wins"
                );
            }
        }
    }

    #[test]
    fn workload_files_resolve_next_to_the_experiment_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("w")).unwrap();
        std::fs::write(dir.path().join("w/mine"), "recordcount=10\n").unwrap();
        let p = dir.path().join("x.toml");
        let entry = |file: &str, threads: &str| {
            format!("[[workload]]\nfile = \"{file}\"\nthreads = {threads}\n")
        };
        std::fs::write(&p, entry("w/mine", "[1]") + &entry("workloadb", "[2]")).unwrap();
        let f = ExperimentFile::read(&p).unwrap();
        assert_eq!(
            f.workloads[0].file,
            dir.path().join("w/mine").to_string_lossy()
        );
        assert_eq!(f.workloads[1].file, "workloadb", "built-in names stay");

        std::fs::write(&p, entry("nowhere/workloadc", "[1]")).unwrap();
        let e = ExperimentFile::read(&p).unwrap_err().to_string();
        assert!(
            e.contains("[[workload]] 1 file = \"nowhere/workloadc\"")
                && e.contains("no such file next to the experiment file")
                && e.contains("file = \"workloadc\" (built in)"),
            "{e}"
        );
        for threads in ["[]", "[0, 4]"] {
            std::fs::write(&p, entry("workloada", threads)).unwrap();
            let e = ExperimentFile::read(&p).unwrap_err().to_string();
            assert!(
                e.contains("give thread counts of at least 1"),
                "{threads}: {e}"
            );
        }
        std::fs::write(
            &p,
            "repetitions = 0\n".to_string() + &entry("workloada", "[1]"),
        )
        .unwrap();
        let e = ExperimentFile::read(&p).unwrap_err().to_string();
        assert!(e.contains("repetitions = 0"), "{e}");
        let stop = |rule: &str| format!("stop_when = \"{rule}\"\n") + &entry("workloada", "[1]");
        std::fs::write(&p, stop("read.p99 > 50ms")).unwrap();
        let f = ExperimentFile::read(&p).unwrap();
        assert_eq!(f.stop_rule().unwrap().to_string(), "read.p99 > 50ms");
        std::fs::write(&p, stop("read.p99 > 50")).unwrap();
        let e = ExperimentFile::read(&p).unwrap_err().to_string();
        assert!(
            e.contains("stop_when = \"read.p99 > 50\"") && e.contains("has no unit"),
            "{e}"
        );
        let label = |l: &str| format!("label = \"{l}\"\n") + &entry("workloada", "[1]");
        std::fs::write(&p, label("Micron 9300")).unwrap();
        assert_eq!(
            ExperimentFile::read(&p).unwrap().label.as_deref(),
            Some("Micron 9300")
        );
        for bad in ["", "two\\nlines"] {
            std::fs::write(&p, label(bad)).unwrap();
            let e = ExperimentFile::read(&p).unwrap_err().to_string();
            assert!(
                e.contains("label = ") && e.contains("a label must"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn unknown_keys_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.toml");
        std::fs::write(
            &p,
            "repetitons = 2\n[[workload]]\nfile = \"workloada\"\nthreads = [1]\n",
        )
        .unwrap();
        let e = ExperimentFile::read(&p).unwrap_err().to_string();
        assert!(e.contains("repetitons"), "{e}");
    }
}
