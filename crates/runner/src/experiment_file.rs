//! Experiment files (TOML): workloads × thread counts × repetitions on one dataset, the briefs'
//! methods written down once. Documented in `docs/experiments.md`; examples in `examples/`.

use crate::errors::UsageError;
use crate::experiment::WorkloadRun;
use anyhow::Result;
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
    pub warmup: Option<String>,
    /// `auto`, `ebpf`, `diskstats`, `off`.
    pub trace: Option<String>,
    pub target: Option<f64>,
    #[serde(default)]
    pub restore_each_step: bool,
    /// Properties of every workload (the dataset belongs here).
    #[serde(default)]
    pub properties: BTreeMap<String, toml::Value>,
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
    pub threads: Vec<u64>,
    #[serde(default)]
    pub properties: BTreeMap<String, toml::Value>,
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl ExperimentFile {
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
        if file.workloads.is_empty() {
            return Err(UsageError(format!(
                "{}: no [[workload]] entry; add one with file = … and threads = […]",
                path.display()
            ))
            .into());
        }
        Ok(file)
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
