//! The drive's own statistics through the real binary, as root on the real kernel: a traced
//! RocksDB run records, for each step, what the disk under the data counted itself (NVMe SMART
//! and OCP latency monitor, read through the admin passthrough) or why it has no such figures,
//! in `device-stats.json`, run.json's environment and the report — never an invented number.

mod common;

use common::*;
use serde_json::Value;

/// What a disk that is not NVMe gives instead of figures.
const NOT_NVME: &str = "not an NVMe device — the device reports no latency statistics of its own";

/// Whether sysfs says `disk` is an NVMe namespace (its `device` link is a controller or an NVMe
/// subsystem), or stacked over other disks.
fn is_nvme_or_stacked(disk: &str) -> bool {
    let nvme = std::fs::canonicalize(format!("/sys/block/{disk}/device"))
        .is_ok_and(|d| d.to_string_lossy().contains("nvme"));
    let stacked = std::fs::read_dir(format!("/sys/block/{disk}/slaves"))
        .is_ok_and(|mut d| d.next().is_some());
    nvme || stacked
}

#[test]
fn each_traced_step_records_the_drives_own_statistics_or_why_there_are_none() {
    let dir = tempfile::tempdir().unwrap();
    let r = IodigArgs::run()
        .db("rocksdb")
        .workload("workloads/workloada")
        .props(&["recordcount=5000"])
        .threads("2")
        .duration("2s")
        .warmup("0s")
        .trace("ebpf")
        .out(dir.path())
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let device = run["environment"]["storage"]["device"]
        .as_str()
        .expect("the data directory's disk is resolved")
        .to_string();
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "load + one run step");
    let md = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    for step in steps {
        let stats = read_json(
            &r.run_dir()
                .join(step["dir"].as_str().unwrap())
                .join("device-stats.json"),
        );
        // The data directory's disk is traced, so its statistics are recorded, once.
        let entries: Vec<&Value> = stats["devices"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["device"] == device.as_str())
            .collect();
        assert!(!entries.is_empty(), "no entry for {device}: {stats}");
        if is_nvme_or_stacked(&device) {
            // An NVMe disk: figures from the drive, or the reason it gave none.
            for e in entries {
                assert!(
                    e["unavailable"].is_string() || e["change"]["smart"].is_object(),
                    "{e}"
                );
            }
            continue;
        }
        // This machine's disk (virtio here) is no NVMe namespace: the reason, and no figure.
        assert_eq!(entries.len(), 1, "{stats}");
        let e = entries[0].as_object().unwrap();
        assert_eq!(e["unavailable"], NOT_NVME, "{stats}");
        let keys: Vec<&str> = e.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["device", "unavailable"],
            "no figure, no controller: {stats}"
        );
    }
    if !is_nvme_or_stacked(&device) {
        assert_eq!(
            run["environment"]["storage"]["device_latency_stats"],
            format!("not available: {device}: {NOT_NVME}")
        );
        // The report says it in one line in each step's section, beside the trace.
        let line = format!("- {device}: {NOT_NVME}\n");
        assert_eq!(md.matches(&line).count(), steps.len(), "{md}");
        assert_eq!(
            md.matches("### The drive's own statistics").count(),
            steps.len()
        );
        assert!(
            !md.contains("the drive counted"),
            "no figure is shown: {md}"
        );
    }
}
