//! What the report must say before its numbers can be trusted: steps whose operations all failed
//! (never a peak), reads that found no record, load steps named as loads, interrupted steps,
//! run.json notes, the built-in workload, the traced device of a remote database, and the
//! drive's own statistics or why it has none — the same in report.md, report.html and the CSV
//! files.

mod support;

use iodig_report::write_report;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use support::fixture::{edit_run, fail_step, generate, FixtureSpec};

fn spec() -> FixtureSpec {
    FixtureSpec {
        workloads: vec!["workloada".into()],
        threads: vec![8, 32, 128],
        secs: 4,
        io_events_per_step: 500,
        latency_samples_per_step: 400,
        flush_every_secs: 0,
        ..Default::default()
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Generates a run, applies `edit` and writes its report; returns (dir, md, html).
fn report_of(
    tmp: &Path,
    spec: &FixtureSpec,
    edit: impl FnOnce(&Path),
) -> (PathBuf, String, String) {
    let dir = tmp.join("run");
    generate(spec, &dir).unwrap();
    edit(&dir);
    write_report(&dir).unwrap();
    let (md, html) = (read(&dir.join("report.md")), read(&dir.join("report.html")));
    (dir, md, html)
}

/// The Markdown table row starting with `first` (its cells, trimmed).
fn row<'a>(md: &'a str, first: &str) -> Vec<&'a str> {
    md.lines()
        .find(|l| l.starts_with(&format!("| {first} |")))
        .unwrap_or_else(|| panic!("no row {first:?} in\n{md}"))
        .trim_matches('|')
        .split(" | ")
        .map(str::trim)
        .collect()
}

fn csv_rows<'a>(csv: &'a str, col: &str, value: &str) -> Vec<BTreeMap<&'a str, &'a str>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            header
                .iter()
                .copied()
                .zip(l.split(','))
                .collect::<BTreeMap<_, _>>()
        })
        .filter(|r| r.get(col) == Some(&value))
        .collect()
}

fn returns(rows: &[(&str, &str, u64)]) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut m: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for (op, code, n) in rows {
        m.entry(op.to_string())
            .or_default()
            .insert(code.to_string(), *n);
    }
    m
}

#[test]
fn a_step_whose_operations_all_failed_is_flagged_and_never_the_peak() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, md, html) = report_of(tmp.path(), &spec(), |dir| {
        // The 128-thread step failed fast: the highest throughput of the sweep, nothing done.
        fail_step(dir, 2, "ERROR").unwrap();
        edit_run(dir, |d| {
            d.steps[2].operations = 2_549_214;
            d.steps[2].throughput_ops_per_sec = 849_172.0;
            d.steps[2].returns =
                returns(&[("READ", "ERROR", 1_274_600), ("UPDATE", "ERROR", 1_274_614)]);
        })
        .unwrap();
    });
    assert!(
        !md.contains("849,172 ops/s at 128"),
        "a failed step is the peak:\n{md}"
    );
    assert!(md.contains("workloada: peak throughput is "), "{md}");
    assert!(
        md.contains(" ops/s at 32 threads"),
        "the peak is the best step that worked:\n{md}"
    );
    let finding = "Step 2 (workloada × 128 threads): none of its 2,549,214 operations succeeded (READ ERROR 1,274,600, UPDATE ERROR 1,274,614)";
    assert!(md.contains(finding), "{md}");
    assert!(html.contains(finding), "the HTML says it too");
    assert!(md.contains("- Peak: ") && md.contains("left out of the chart, the peak and the bend"));
    // Marked in the OPS table and in the steps table.
    let ops = row(&md, "128");
    assert_eq!(ops[2], "849,172");
    assert_eq!(ops[9..], ["2,549,214 (100%)", "all failed"], "{ops:?}");
    assert_eq!(row(&md, "32")[10], "ok");
    let step = row(&md, "2");
    assert_eq!(step[1], "run");
    assert_eq!(step[7..], ["2,549,214 (100%)", "all failed"], "{step:?}");
    // The CSV files carry the same counts and words.
    let steps_csv = read(&dir.join("report-steps.csv"));
    let s = &csv_rows(&steps_csv, "step", "2")[0];
    assert_eq!(
        (s["failed_ops"], s["failed_pct"], s["status"]),
        ("2549214", "100.000", "all failed")
    );
    assert_eq!(csv_rows(&steps_csv, "step", "0")[0]["status"], "ok");
    let ops_csv = read(&dir.join("report-ops.csv"));
    for r in csv_rows(&ops_csv, "threads", "128") {
        assert_eq!((r["failed_ops"], r["status"]), ("2549214", "all failed"));
    }
    assert_eq!(csv_rows(&ops_csv, "threads", "8")[0]["failed_pct"], "0.000");
}

#[test]
fn a_failed_repetition_is_left_out_of_its_point() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = FixtureSpec {
        threads: vec![8, 32],
        repetitions: 2,
        ..spec()
    };
    let (_, md, _) = report_of(tmp.path(), &spec, |dir| {
        fail_step(dir, 2, "ERROR").unwrap();
        edit_run(dir, |d| d.steps[2].throughput_ops_per_sec = 900_000.0).unwrap();
    });
    let ops = row(&md, "32");
    assert_eq!(ops[1], "1", "one repetition left: {ops:?}");
    assert_ne!(
        ops[2], "900,000",
        "the failed repetition is not in the mean"
    );
    assert_eq!(ops[10], "step 2 left out: all failed");
}

#[test]
fn reads_that_found_no_record_get_a_finding_with_their_share() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, md, html) = report_of(tmp.path(), &spec(), |dir| {
        edit_run(dir, |d| {
            d.steps[1].returns = returns(&[
                ("READ", "OK", 200),
                ("READ", "NOT_FOUND", 800),
                ("UPDATE", "OK", 1000),
            ]);
        })
        .unwrap();
    });
    let finding = "Step 1 (workloada × 32 threads): 800 of its 1,000 reads (80.0%) returned NOT_FOUND: NOT_FOUND usually means the dataset is not loaded";
    assert!(md.contains(finding), "{md}");
    assert!(html.contains(finding));
    assert_eq!(
        row(&md, "32")[9..],
        ["800 (40.0%)", "80.0% of reads NOT_FOUND"]
    );
    let steps_csv = read(&dir.join("report-steps.csv"));
    let s = &csv_rows(&steps_csv, "step", "1")[0];
    assert_eq!(
        (s["failed_ops"], s["not_found"], s["status"]),
        ("800", "800", "80.0% of reads NOT_FOUND")
    );
}

#[test]
fn load_steps_are_named_as_loads_and_interrupted_steps_are_marked() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = FixtureSpec {
        workloads: vec!["workloadb".into()],
        threads: vec![4, 4, 8],
        ..spec()
    };
    let (dir, md, html) = report_of(tmp.path(), &spec, |dir| {
        edit_run(dir, |d| {
            d.steps[0].phase = "load".into();
            d.steps[0].returns = returns(&[("INSERT", "OK", 90), ("INSERT", "ERROR", 10)]);
            d.steps[2].interrupted = true;
            d.status = "interrupted".into();
        })
        .unwrap();
    });
    assert!(
        md.contains("- Load (workloadb × 4 threads): 10 of its 100 operations failed (10.0%): INSERT ERROR 10."),
        "{md}"
    );
    assert!(
        !md.contains("Step 0 ("),
        "the load is not a numbered run step:\n{md}"
    );
    assert!(
        md.contains("\n## Load (step 0): workloadb × 4 threads\n"),
        "{md}"
    );
    assert!(md.contains("\n## Step 1: workloadb × 4 threads\n"));
    assert!(md.contains("\n## Step 2: workloadb × 8 threads (interrupted)\n"));
    assert!(html.contains("<h2>Load (step 0): workloadb × 4 threads</h2>"));
    assert_eq!(row(&md, "0")[1..3], ["load", "workloadb"]);
    assert_eq!(row(&md, "2")[8], "interrupted");
    // The sweep holds the run steps only; the interrupted point says so.
    assert_eq!(row(&md, "4")[1], "1", "the load is not a repetition");
    assert_eq!(row(&md, "8")[10], "step 2 interrupted");
    // Every per-step CSV says the phase.
    for (file, rows) in [
        ("report-client.csv", 8),
        ("report-io.csv", 1),
        ("report-steps.csv", 1),
    ] {
        let csv = read(&dir.join(file));
        assert!(csv.starts_with("step,phase,"), "{file}");
        assert!(csv_rows(&csv, "phase", "load").len() >= rows, "{file}");
        assert!(csv_rows(&csv, "phase", "load")
            .iter()
            .all(|r| r["step"] == "0"));
    }
    let steps_csv = read(&dir.join("report-steps.csv"));
    let s = &csv_rows(&steps_csv, "step", "2")[0];
    assert_eq!((s["interrupted"], s["status"]), ("true", "interrupted"));
}

#[test]
fn run_notes_appear_in_markdown_and_html() {
    let tmp = tempfile::tempdir().unwrap();
    let note = "step workloadc-t8: none of its 32407 operations succeeded (READ NOT_FOUND 32407)";
    let (_, md, html) = report_of(tmp.path(), &spec(), |dir| {
        edit_run(dir, |d| d.notes.push(note.into())).unwrap();
    });
    assert!(md.contains(&format!("### Notes\n\n- {note}\n")), "{md}");
    assert!(html.contains(&format!("<li>{note}</li>")));
}

#[test]
fn header_names_the_built_in_workload_and_the_traced_device_of_a_remote_database() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, md, html) = report_of(tmp.path(), &spec(), |dir| {
        edit_run(dir, |d| {
            d.config.property_files.clear();
            d.config
                .properties
                .insert("hosts".into(), "10.0.0.7,10.0.0.8".into());
            d.environment.storage = None;
            d.environment.data_dir = None;
        })
        .unwrap();
    });
    assert_eq!(
        row(&md, "workload files")[1],
        "built-in workloada (no -P file)"
    );
    assert_eq!(row(&md, "hosts")[1], "10.0.0.7,10.0.0.8");
    assert_eq!(row(&md, "device")[1], "nvme0n1 (from the block-IO trace)");
    assert!(html.contains("<td>device</td><td>nvme0n1 (from the block-IO trace)</td>"));
    // With a data directory the storage facts stay, and no second device line appears.
    let tmp = tempfile::tempdir().unwrap();
    let (_, md, _) = report_of(tmp.path(), &spec(), |_| {});
    assert!(row(&md, "device")[1].starts_with("nvme0n1 (Generated NVMe SSD)"));
    assert!(!md.contains("| traced devices |"));
    assert_eq!(row(&md, "workload files")[1], "workloada");
}

#[test]
fn the_drives_own_statistics_stand_beside_the_trace_or_are_said_missing() {
    use iodig_model::device_stats::{
        DeviceSnapshot, DeviceStats, DeviceStatsDoc, SmartLog, SMART_DATA_UNIT_BYTES,
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut traced_reads = 0;
    let (_, md, html) = report_of(tmp.path(), &spec(), |dir| {
        let doc: serde_json::Value = serde_json::from_str(&read(&dir.join("run.json"))).unwrap();
        let step_dir = |i: usize| dir.join(doc["steps"][i]["dir"].as_str().unwrap());
        let missing = DeviceStats {
            device: "vda".into(),
            unavailable: Some(
                "not an NVMe device — the device reports no latency statistics of its own".into(),
            ),
            ..Default::default()
        };
        let write = |i: usize, devices: Vec<DeviceStats>| {
            std::fs::write(
                step_dir(i).join("device-stats.json"),
                serde_json::to_string(&DeviceStatsDoc { devices }).unwrap(),
            )
            .unwrap();
        };
        write(0, vec![missing]);
        // Step 1's nvme0n1 as the drive counted it: 1,234 reads, 3 data units, 36 → 38 °C.
        let snap = |unix_ms, reads, units, kelvin| DeviceSnapshot {
            unix_ms,
            smart: Some(SmartLog {
                host_read_commands: reads,
                data_units_read: units,
                composite_temperature_k: kelvin,
                ..Default::default()
            }),
            latency_monitor: None,
        };
        let mut nvme = DeviceStats {
            device: "nvme0n1".into(),
            controller: Some("nvme0".into()),
            latency_monitor_unavailable: Some("not implemented by this device".into()),
            before: Some(snap(1_000, 10_000, 40, 309)),
            after: Some(snap(4_900, 11_234, 43, 311)),
            ..Default::default()
        };
        nvme.settle();
        write(1, vec![nvme]);
        let trace = serde_json::to_value(
            iodig_model::series::read_trace(&step_dir(1))
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        traced_reads = trace["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == "nvme0n1")
            .unwrap()["ops"]["read"]["ios"]
            .as_u64()
            .unwrap();
    });
    let line = "vda: not an NVMe device — the device reports no latency statistics of its own";
    assert!(md.contains(&format!("- {line}")), "{md}");
    assert!(html.contains(line), "the HTML says it too");
    assert!(md.contains("#### nvme0n1 (NVMe controller nvme0)"), "{md}");
    assert!(
        md.contains("(3.9 s apart, inside the trace's window)"),
        "{md}"
    );
    assert_eq!(
        row(&md, "read commands"),
        ["read commands", "1,234", &traced_reads.to_string()]
    );
    let mb = (3 * SMART_DATA_UNIT_BYTES) as f64 / 1e6;
    assert_eq!(row(&md, "data read")[1], format!("{mb:.1} MB (±0.5)"));
    assert_eq!(row(&md, "temperature")[1], "36 → 38 °C");
    assert!(md.contains("- OCP latency monitor: not implemented by this device."));
    // Steps without the file (the third) have no such section, and no figure is made up.
    assert_eq!(md.matches("### The drive's own statistics").count(), 2);
}
