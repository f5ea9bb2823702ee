//! The dataset marker: a small JSON file next to a database's data that says which dataset a
//! load put there, so `run` can skip loading what is already loaded, and reload what changed.
//!
//! Two loads are the same dataset when the YCSB properties that shape the records agree and so
//! do the binding properties that shape the files on disk (a RocksDB dataset loaded without
//! compression is not the one a run with `rocksdb.compression=none` means to measure). A run
//! whose workload inserts (D, E, or any `insertproportion`) grows the dataset past the load; the
//! marker then records that, and the next run does not mistake it for a fresh load.
//!
//! While a load runs, the marker names the loading process instead: a load killed halfway
//! leaves iodig's own half-loaded data, which the next run may wipe and load again (saying so),
//! rather than refuse as data iodig did not load.

use std::path::Path;

use anyhow::{Context, Result};
use iodig_model::props::{Properties, DATASET_PROPERTIES};
use iodig_model::writer::{Writer, WriterState};
use serde_json::{Map, Value};

/// File name of the marker inside the data directory.
pub const MARKER: &str = ".iodig-dataset.json";

/// Binding properties that shape the data on disk; a file given by path is compared by content.
const LAYOUT_PROPERTIES: [&str; 7] = [
    "rocksdb.compression",
    "rocksdb.writebuffersize",
    "rocksdb.optionsfile",
    "cassandra.keyspace",
    "cassandra.replicationfactor",
    "cassandra.replication",
    "cassandra.datacenters",
];

/// Marker key naming the step whose inserts grew the dataset past its load.
const GROWN_BY: &str = "grown_by";
/// Marker key of a load in progress: the loading process.
const LOADING_BY: &str = "loading_by";

/// What a data directory's marker says about the dataset a run asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum MarkerState {
    /// No marker (nothing loaded by iodig, or a load that did not finish).
    Missing,
    /// This dataset, as loaded.
    Same,
    /// This dataset plus the records a step of an earlier run inserted (named).
    Grown(String),
    /// Another dataset.
    Other,
}

/// The properties that make two loads the same dataset.
pub fn signature(props: &Properties) -> Value {
    let mut map: Map<String, Value> = DATASET_PROPERTIES
        .iter()
        .chain(LAYOUT_PROPERTIES.iter())
        .filter_map(|k| props.get(k).map(|v| (k.to_string(), Value::from(v))))
        .collect();
    if let Some(path) = props.get("rocksdb.optionsfile") {
        // The same path with edited options is another layout; an unreadable file is caught
        // when the binding opens it, so here it simply never matches.
        let digest = std::fs::read(path).map(|b| format!("{:016x}", fnv1a(&b)));
        map.insert(
            "rocksdb.optionsfile.content".into(),
            Value::from(digest.unwrap_or_else(|e| format!("unreadable: {e}"))),
        );
    }
    Value::Object(map)
}

/// Reads the marker in `dir` and compares it with the dataset `props` describe. A load that
/// never finished is another dataset (to be wiped and loaded again), said when its iodig died.
pub fn state(dir: &Path, props: &Properties) -> MarkerState {
    if let Some(loader) = loading_by(dir) {
        if let WriterState::Gone(why) = loader.state() {
            iodig_model::eprintln_lossy!(
                "iodig: {} holds a load an earlier iodig did not finish ({why}); it is iodig's own data, so it is wiped and loaded again",
                dir.display()
            );
        }
        return MarkerState::Other;
    }
    compare(dir, &signature(props))
}

/// Whether a resumed run keeps the dataset in `dir` (true: no load) or decides as a new run
/// would (false: nothing had finished, or only a load whose marker a kill left saying
/// "loading", to be loaded again). Refused (exit 2) when the kept steps ran on a dataset that
/// is no longer there: another was loaded since, or the data went.
pub fn resume_keeps_dataset(
    dir: &Path,
    props: &Properties,
    from: &crate::resume::ResumeFrom,
) -> Result<bool> {
    if !from.dataset_settled() {
        return Ok(false);
    }
    if let Some(loader) = loading_by(dir) {
        if from.kept_only_the_load() && matches!(loader.state(), WriterState::Gone(_)) {
            // Killed after its load step was written and before the load was marked done:
            // nothing ran on it yet, so the load runs again, as in a new run.
            return Ok(false);
        }
    }
    let why = match compare(dir, &signature(props)) {
        MarkerState::Same => return Ok(true),
        MarkerState::Grown(step) if from.step_names().contains(&step) => return Ok(true),
        MarkerState::Grown(step) => format!(
            "it holds the run's dataset grown by the inserts of step {step}, which is not a step of this run"
        ),
        MarkerState::Missing => "it holds no dataset marker (the data was removed or replaced)".into(),
        MarkerState::Other => loading_by(dir).map_or_else(
            || "it holds another dataset (loaded since, with other properties)".to_string(),
            |w| format!("a load by iodig (pid {}) is in it", w.pid),
        ),
    };
    Err(crate::errors::UsageError(format!(
        "--resume {}: the dataset no longer matches the run's: {} {why}; its finished steps ran on the dataset the run loaded, so the rest cannot continue on this one; start a new run",
        from.dir.display(),
        dir.display()
    ))
    .into())
}

/// The process a load-in-progress marker names, if the marker is one.
fn loading_by(dir: &Path) -> Option<Writer> {
    let marker: Value = serde_json::from_slice(&std::fs::read(dir.join(MARKER)).ok()?).ok()?;
    serde_json::from_value(marker.get(LOADING_BY)?.clone()).ok()
}

/// Records, before a load starts, that this process is loading into `dir`.
pub fn mark_loading(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut m = Map::new();
    m.insert(
        LOADING_BY.into(),
        serde_json::to_value(Writer::current()).unwrap_or(Value::Null),
    );
    iodig_model::fsio::write_json_atomic(&dir.join(MARKER), &Value::Object(m))
}

/// The marker in `dir` against a dataset's signature.
fn compare(dir: &Path, signature: &Value) -> MarkerState {
    let marker: Option<Value> = std::fs::read(dir.join(MARKER))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let Some(Value::Object(mut marker)) = marker else {
        return MarkerState::Missing;
    };
    let grown = marker.remove(GROWN_BY);
    if Value::Object(marker) != *signature {
        return MarkerState::Other;
    }
    match grown {
        Some(step) => MarkerState::Grown(step.as_str().unwrap_or("an earlier step").to_string()),
        None => MarkerState::Same,
    }
}

/// Records, atomically, that `dir` holds the dataset `props` describe, as loaded.
pub fn mark_loaded(dir: &Path, props: &Properties) -> Result<()> {
    iodig_model::fsio::write_json_atomic(&dir.join(MARKER), &signature(props))
}

/// Records that step `step` inserted records into the dataset in `dir`; a directory without a
/// marker is left without one, and one already grown keeps the step that grew it first.
pub fn mark_grown(dir: &Path, props: &Properties, step: &str) -> Result<()> {
    let mut marker = signature(props);
    if compare(dir, &marker) != MarkerState::Same {
        return Ok(());
    }
    if let Value::Object(m) = &mut marker {
        m.insert(GROWN_BY.into(), Value::from(step));
    }
    iodig_model::fsio::write_json_atomic(&dir.join(MARKER), &marker)
}

/// FNV-1a, 64 bits: stable across Rust releases, unlike the standard library's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Properties {
        let mut p = Properties::default();
        for (k, v) in pairs {
            p.set(k, v.to_string());
        }
        p
    }

    #[test]
    fn a_load_is_found_again_and_another_layout_is_another_dataset() {
        let dir = tempfile::tempdir().unwrap();
        let loaded = props(&[("recordcount", "1000"), ("rocksdb.compression", "lz4")]);
        assert_eq!(state(dir.path(), &loaded), MarkerState::Missing);
        mark_loaded(dir.path(), &loaded).unwrap();
        assert_eq!(state(dir.path(), &loaded), MarkerState::Same);
        // Properties that do not shape the data do not matter.
        let mut same = loaded.clone();
        same.set("operationcount", "5".to_string());
        same.set("rocksdb.blockcachesize", "1048576".to_string());
        assert_eq!(state(dir.path(), &same), MarkerState::Same);
        let mut plain = loaded.clone();
        plain.set("rocksdb.compression", "none".to_string());
        assert_eq!(state(dir.path(), &plain), MarkerState::Other);
        let mut bigger = loaded.clone();
        bigger.set("recordcount", "2000".to_string());
        assert_eq!(state(dir.path(), &bigger), MarkerState::Other);
    }

    #[test]
    fn inserts_after_the_load_are_remembered_until_the_next_load() {
        let dir = tempfile::tempdir().unwrap();
        let p = props(&[("recordcount", "1000")]);
        mark_grown(dir.path(), &p, "workloadd-t8").unwrap();
        assert_eq!(
            state(dir.path(), &p),
            MarkerState::Missing,
            "no load, no marker"
        );
        mark_loaded(dir.path(), &p).unwrap();
        mark_grown(dir.path(), &p, "workloadd-t8").unwrap();
        assert_eq!(
            state(dir.path(), &p),
            MarkerState::Grown("workloadd-t8".into())
        );
        // A later insert step keeps the first name: the dataset grew from then on.
        mark_grown(dir.path(), &p, "workloade-t8").unwrap();
        assert_eq!(
            state(dir.path(), &p),
            MarkerState::Grown("workloadd-t8".into())
        );
        mark_loaded(dir.path(), &p).unwrap();
        assert_eq!(state(dir.path(), &p), MarkerState::Same);
    }

    #[test]
    fn a_load_in_progress_is_another_dataset_until_it_is_marked_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let p = props(&[("recordcount", "10")]);
        mark_loading(dir.path()).unwrap();
        assert_eq!(state(dir.path(), &p), MarkerState::Other);
        assert_eq!(loading_by(dir.path()), Some(Writer::current()));
        mark_loaded(dir.path(), &p).unwrap();
        assert_eq!(state(dir.path(), &p), MarkerState::Same);
        assert_eq!(loading_by(dir.path()), None);
    }

    #[test]
    fn an_options_file_is_compared_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("OPTIONS.ini");
        std::fs::write(
            &file,
            "[CFOptions \"default\"]\n  compression=kNoCompression\n",
        )
        .unwrap();
        let p = props(&[("rocksdb.optionsfile", file.to_str().unwrap())]);
        mark_loaded(dir.path(), &p).unwrap();
        assert_eq!(state(dir.path(), &p), MarkerState::Same);
        std::fs::write(&file, "[CFOptions \"default\"]\n  compression=kZSTD\n").unwrap();
        assert_eq!(state(dir.path(), &p), MarkerState::Other);
    }
}
