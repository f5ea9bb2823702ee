//! The configurations side by side, as the briefs' test-configuration tables: one column per
//! run, the rows that differ first (the database's devices leading, since a drive comparison
//! is what the briefs make), the rows equal in every run folded below. Everything comes from
//! run.json: the environment recorded at the start, the configuration, the cluster.

use super::Runs;
use crate::data::RunData;
use crate::doc::{target_rate, thousands, Doc, Table};

/// Properties that only say where the data, the nodes or the files are (`rocksdb.dir`,
/// `hosts`, `cassandra.storagedir`): what a drive or cluster comparison changes on purpose, so
/// they belong to the configuration, never to "different work".
pub(super) fn is_location(key: &str) -> bool {
    matches!(key, "hosts" | "port" | "ssh.config" | "exportfile")
        || key.ends_with("dir")
        || key.ends_with(".hosts")
        || key.ends_with(".port")
}

/// Settings of the database binding, of a faulty disk or of how iodig measures: what a
/// configuration comparison may change, shown in the configuration table rather than as a
/// caveat (they change how the same work is served, not the work asked for).
pub(super) fn is_setting(key: &str) -> bool {
    const PREFIXES: [&str; 7] = [
        "rocksdb.",
        "cassandra.",
        "basicdb.",
        "faultdisk.",
        "hdrhistogram.",
        "measurement.",
        "ssh.",
    ];
    PREFIXES.iter().any(|p| key.starts_with(p))
        || matches!(key, "unusableafter" | "verify.eachnode")
}

/// One row: what it is, and each run's value ("–" when the run did not record it).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Row {
    /// The row's heading: `device model`, `vm.dirty_ratio`, `rocksdb.blockcachesize`.
    pub name: String,
    /// One value per run, in the runs' order.
    pub values: Vec<String>,
}

impl Row {
    /// True when every run has the same value.
    pub fn equal(&self) -> bool {
        self.values.iter().all(|v| *v == self.values[0])
    }
}

/// "–": a fact the run did not record (an older iodig, a device that does not tell).
const UNKNOWN: &str = "–";

/// Values longer than this are cut in the table (an options file's content); rows are still
/// compared on the whole value.
const MAX_CELL: usize = 80;

fn or_unknown(v: Option<String>) -> String {
    v.filter(|v| !v.is_empty())
        .unwrap_or_else(|| UNKNOWN.into())
}

/// The active choice of a sysfs list (`none [mq-deadline] kyber` → `mq-deadline`).
fn active(v: &str) -> String {
    v.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .unwrap_or(v)
        .to_string()
}

/// Bytes in binary units, as drive capacities and memory are read: `894.3 GiB`, `3.5 TiB`.
pub(super) fn binary_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Builds every row over `runs`, grouped in the briefs' order: devices, file system, kernel,
/// database, client, dataset, nodes, host. Rows no run recorded are left out.
pub(super) fn rows(runs: &[RunData]) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut add = |name: &str, f: &dyn Fn(&RunData) -> Option<String>| {
        let values: Vec<String> = runs.iter().map(|r| or_unknown(f(r))).collect();
        if values.iter().any(|v| v != UNKNOWN) {
            rows.push(Row {
                name: name.to_string(),
                values,
            });
        }
    };
    let st = |r: &RunData| r.doc.environment.storage.clone();
    // The database's devices.
    add("device", &|r| st(r).and_then(|s| s.device));
    add("device model", &|r| st(r).and_then(|s| s.model));
    add("device firmware", &|r| st(r).and_then(|s| s.firmware));
    add("device capacity", &|r| {
        st(r).and_then(|s| s.capacity_bytes).map(binary_size)
    });
    add("device members", &|r| st(r).map(|s| s.members.join(", ")));
    add("IO scheduler", &|r| {
        st(r).and_then(|s| s.scheduler).map(|s| active(&s))
    });
    add("rotational", &|r| {
        st(r)
            .and_then(|s| s.rotational)
            .map(|b| if b { "yes" } else { "no" }.to_string())
    });
    add("read-ahead", &|r| {
        st(r)
            .and_then(|s| s.read_ahead_kb)
            .map(|k| format!("{k} KiB"))
    });
    add("queue requests (nr_requests)", &|r| {
        st(r).and_then(|s| s.nr_requests).map(|n| n.to_string())
    });
    add("write cache", &|r| st(r).and_then(|s| s.write_cache));
    // The file system.
    add("data directory", &|r| r.doc.environment.data_dir.clone());
    add("file system", &|r| st(r).map(|s| s.fs_type));
    add("mount", &|r| {
        st(r).map(|s| format!("{} on {}", s.source, s.mount_point))
    });
    add("mount options", &|r| st(r).and_then(|s| s.mount_options));
    // The kernel.
    add("kernel", &|r| Some(r.doc.environment.kernel.clone()));
    for key in union(
        runs.iter()
            .map(|r| r.doc.environment.kernel_settings.keys()),
    ) {
        add(&key, &|r| {
            r.doc.environment.kernel_settings.get(&key).cloned()
        });
    }
    // The database.
    add("database", &|r| Some(r.doc.config.db.clone()));
    add("database version", &|r| {
        r.doc.environment.database_version.clone().or_else(|| {
            r.doc.cluster.as_ref().map(|c| {
                crate::doc::distinct(c.nodes.iter().filter_map(|n| n.version.clone())).join(", ")
            })
        })
    });
    for key in union(runs.iter().map(|r| r.doc.config.properties.keys()))
        .into_iter()
        .filter(|k| is_setting(k) || is_location(k))
    {
        add(&key, &|r| r.doc.config.properties.get(&key).cloned());
    }
    // The client.
    add("client threads", &|r| {
        Some(
            r.doc
                .config
                .threads
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        )
    });
    add("target", &|r| {
        Some(target_rate(r.doc.config.target_ops_per_sec))
    });
    add("warm-up", &|r| {
        Some(format!("{} s", r.doc.config.warmup_secs))
    });
    add("step length", &|r| {
        step_secs(r).map(|s| format!("{s:.1} s"))
    });
    for key in ["maxexecutiontime", "operationcount"] {
        add(key, &|r| r.doc.config.properties.get(key).cloned());
    }
    add("trace", &|r| Some(r.doc.config.trace.clone()));
    // The dataset.
    let prop = |r: &RunData, k: &str| r.doc.config.properties.get(k).cloned();
    add("records", &|r| {
        prop(r, "recordcount").map(|v| v.parse::<f64>().map_or(v, thousands))
    });
    add("record size", &|r| record_size(r));
    for key in ["fieldlengthdistribution", "requestdistribution"] {
        add(key, &|r| prop(r, key));
    }
    // The nodes.
    add("nodes", &|r| match &r.doc.cluster {
        Some(c) if !c.nodes.is_empty() => Some(c.nodes.len().to_string()),
        _ if r.doc.config.db != "cassandra" => Some("1 (embedded)".into()),
        _ => None,
    });
    add("replication", &|r| {
        r.doc.cluster.as_ref().and_then(|c| c.replication.clone())
    });
    add("observed hosts", &|r| {
        r.doc.cluster.as_ref().map(|c| {
            c.observed
                .iter()
                .map(|h| h.host.clone())
                .collect::<Vec<_>>()
                .join(", ")
        })
    });
    // The machine.
    add("host", &|r| Some(r.doc.environment.hostname.clone()));
    add("CPU", &|r| {
        let e = &r.doc.environment;
        Some(format!("{} × {}", e.cpus, e.cpu_model))
    });
    add("memory", &|r| {
        Some(r.doc.environment.memory_bytes)
            .filter(|b| *b > 0)
            .map(binary_size)
    });
    rows
}

/// The run's typical measured step length in seconds: the median over its measured steps that
/// ran their course (`--duration` is not a property, so this is how a run says it).
pub(super) fn step_secs(r: &RunData) -> Option<f64> {
    let mut secs: Vec<f64> = r
        .run_steps()
        .filter(|s| !s.summary.interrupted && s.summary.ended_early.is_none())
        .map(|s| s.summary.runtime_ms as f64 / 1000.0)
        .collect();
    secs.sort_by(f64::total_cmp);
    secs.get(secs.len() / 2).copied()
}

/// Keys of every run, sorted, each once.
fn union<'a>(keys: impl Iterator<Item = impl Iterator<Item = &'a String>>) -> Vec<String> {
    let mut k: Vec<String> = keys.flatten().cloned().collect();
    k.sort();
    k.dedup();
    k
}

/// `10 fields × 100 B = 1,000 B`, from YCSB's `fieldcount` and `fieldlength` (its defaults, 10
/// and 100, when unset, as the workload itself reads them).
fn record_size(r: &RunData) -> Option<String> {
    let p = &r.doc.config.properties;
    if r.doc.config.db == "basic" && !p.contains_key("fieldcount") && !p.contains_key("fieldlength")
    {
        return None;
    }
    let count: u64 = p.get("fieldcount").map_or(Ok(10), |v| v.parse()).ok()?;
    let length: u64 = p.get("fieldlength").map_or(Ok(100), |v| v.parse()).ok()?;
    Some(format!(
        "{count} fields × {length} B = {} B",
        thousands((count * length) as f64)
    ))
}

/// A cell's text: the value, cut when very long.
fn cell(v: &str) -> String {
    if v.chars().count() > MAX_CELL {
        let cut: String = v.chars().take(MAX_CELL - 1).collect();
        format!("{cut}…")
    } else {
        v.to_string()
    }
}

/// The table of `rows` with one column per run.
fn table(runs: &Runs, rows: &[&Row]) -> Table {
    let mut headers = vec!["configuration".to_string()];
    headers.extend(runs.runs.iter().map(RunData::name));
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let all: Vec<usize> = (0..headers.len()).collect();
    let mut t = Table::new(&headers).text_columns(&all);
    for r in rows {
        let mut cells = vec![r.name.clone()];
        cells.extend(r.values.iter().map(|v| cell(v)));
        t.row(cells);
    }
    t
}

/// The section: what differs between the runs, then (folded) what they share; returns the
/// table of what differs (for the terminal), none when nothing does.
pub(super) fn section(doc: &mut Doc, runs: &Runs) -> Option<Table> {
    let rows = rows(runs.runs);
    let (differ, equal): (Vec<&Row>, Vec<&Row>) = rows.iter().partition(|r| !r.equal());
    doc.h(2, "Configuration");
    if differ.is_empty() {
        doc.p("The runs' recorded configurations are the same: devices, file system, kernel, database, client, dataset and nodes.");
    } else {
        doc.p(format!(
            "What differs between the runs ({} of {} recorded rows), devices first; \"{UNKNOWN}\" where a run did not record it.",
            differ.len(),
            rows.len()
        ));
        doc.table(table(runs, &differ));
    }
    if !equal.is_empty() {
        doc.folded(
            format!("Equal in every run ({} rows)", equal.len()),
            table(runs, &equal),
        );
    }
    (!differ.is_empty()).then(|| table(runs, &differ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_and_settings_are_told_from_work() {
        for k in [
            "rocksdb.dir",
            "hosts",
            "cassandra.storagedir",
            "cassandra.logdir",
            "port",
        ] {
            assert!(is_location(k), "{k}");
        }
        for k in ["rocksdb.directreads", "readproportion", "recordcount"] {
            assert!(!is_location(k), "{k}");
        }
        for k in [
            "rocksdb.blockcachesize",
            "cassandra.readconsistencylevel",
            "faultdisk.size",
        ] {
            assert!(is_setting(k), "{k}");
        }
        for k in [
            "readproportion",
            "requestdistribution",
            "operationcount",
            "fieldlength",
        ] {
            assert!(!is_setting(k) && !is_location(k), "{k}");
        }
    }

    #[test]
    fn sizes_and_choices_read_as_the_briefs_write_them() {
        assert_eq!(binary_size(512), "512 B");
        assert_eq!(binary_size(960_197_124_096), "894.3 GiB");
        assert_eq!(binary_size(15_362_991_415_296), "14.0 TiB");
        assert_eq!(active("none [mq-deadline] kyber"), "mq-deadline");
        assert_eq!(active("none"), "none");
        assert_eq!(cell(&"x".repeat(100)).chars().count(), MAX_CELL);
    }
}
