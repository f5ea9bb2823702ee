//! The briefs' figures from a real traced RocksDB run: size bands at the trace's 4 KiB
//! resolution, system level vs device level per second, and the configuration the briefs
//! tabulate, each checked in report.md against the run's own trace.json and run.json.

mod common;

use common::findings::{burst_and_queue_depth_findings_match, run_step_section};
use common::*;
use iodig_model::trace::band_label;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Two traced RocksDB runs at once on 2 cores would time each other: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs a short traced RocksDB workload (updates through a small memtable: flushes and
/// compactions inside the step) on the VM's disk; returns the run and its run step's trace.
fn traced_rocksdb_run(dir: &Path, write_buffer: &str) -> (Run, Value) {
    let r = IodigArgs::run()
        .db("rocksdb")
        .workload("workloads/workloada")
        .props(&["recordcount=20000", "requestdistribution=uniform"])
        .p(format!("rocksdb.writebuffersize={write_buffer}"))
        .threads("4")
        .duration("4s")
        .warmup("0s")
        .trace("ebpf")
        .out(dir)
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let step = &run["steps"][1];
    assert_eq!(step["phase"], "run");
    let trace = read_json(
        &r.run_dir()
            .join(step["dir"].as_str().unwrap())
            .join("trace.json"),
    );
    assert_eq!(trace["mode"], "ebpf");
    (r, trace)
}

/// One op's size histogram merged over devices: (lower, upper) → count.
fn hist(trace: &Value, op: &str, key: &str) -> BTreeMap<(u64, u64), u64> {
    let mut m = BTreeMap::new();
    for d in trace["devices"].as_array().unwrap() {
        for b in d["ops"][op][key].as_array().into_iter().flatten() {
            let k = (b["lower"].as_u64().unwrap(), b["upper"].as_u64().unwrap());
            *m.entry(k).or_insert(0) += b["count"].as_u64().unwrap();
        }
    }
    m
}

#[test]
fn rocksdb_run_reports_size_bands_system_vs_device_and_configuration() {
    let _serial = serial();
    // On the VM's disk: a tmpfs /tmp has no block device underneath.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let (r, trace) = traced_rocksdb_run(dir.path(), "1M");
    let md = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    let section = run_step_section(&md);

    // Size bands: the write bucket holding most bytes, at the trace's own 4 KiB resolution.
    let count = hist(&trace, "write", "size_hist");
    let bytes = hist(&trace, "write", "size_bytes_hist");
    let (ios_all, bytes_all): (u64, u64) = (count.values().sum(), bytes.values().sum());
    assert!(ios_all > 0, "the step wrote");
    let (&(lo, hi), &b) = bytes.iter().max_by_key(|(_, b)| **b).unwrap();
    assert!(hi - lo <= 4096 || hi > 2 << 20, "4 KiB buckets up to 2 MiB");
    let row = format!(
        "| write | {} | {:.1}% | {:.1}% |",
        band_label(lo, hi),
        100.0 * count[&(lo, hi)] as f64 / ios_all as f64,
        100.0 * b as f64 / bytes_all as f64
    );
    assert!(
        section.contains("### Size bands at the trace's 4 KiB resolution"),
        "{section}"
    );
    assert!(section.contains(&row), "{row} not in:\n{section}");
    let pct_bytes = 100.0 * b as f64 / bytes_all as f64;
    if ios_all >= 100 && pct_bytes >= 25.0 {
        let finding = format!(
            "Write sizes at 4 KiB resolution: {pct_bytes:.0}% of write bytes in {}",
            band_label(lo, hi)
        );
        assert!(section.contains(&finding), "{finding} not in:\n{section}");
    }

    // System level vs device level: per second, the OS queue and device p99 of the writes.
    // Each figure is the worst device's of its second, as the report takes it.
    let (mut os, mut device): (BTreeMap<u64, u64>, BTreeMap<u64, u64>) = Default::default();
    for d in trace["devices"].as_array().unwrap() {
        for s in d["seconds"].as_array().unwrap() {
            let (t, o) = (s["unix_ms"].as_u64().unwrap(), &s["ops"]["write"]);
            if let Some(q) = o["queue_p99_ns"].as_u64() {
                let e = os.entry(t).or_default();
                *e = (*e).max(q);
            }
            if let Some(l) = o["lat_p99_ns"].as_u64() {
                let e = device.entry(t).or_default();
                *e = (*e).max(l);
            }
        }
    }
    let per_sec: BTreeMap<u64, (u64, u64)> = os
        .iter()
        .filter_map(|(t, q)| Some((*t, (*q, *device.get(t)?))))
        .collect();
    assert!(!per_sec.is_empty(), "per-second OS time of the writes");
    let (&worst, &(q, l)) = per_sec
        .iter()
        .max_by_key(|(t, (q, l))| (*q.max(l), **t))
        .unwrap();
    let (os_ms, dev_ms) = (q as f64 / 1e6, l as f64 / 1e6);
    let table_row = section
        .lines()
        .skip_while(|l| !l.starts_with("### System level vs device level"))
        .find(|l| l.starts_with("| write | "))
        .unwrap_or_else(|| panic!("no write row in the system/device table:\n{section}"));
    assert!(
        table_row.contains(&format!("| {os_ms:.3} | {dev_ms:.3} |")),
        "{table_row}: want OS {os_ms:.3} ms, device {dev_ms:.3} ms"
    );
    let level = if os_ms >= 2.0 * dev_ms {
        "system level"
    } else if dev_ms >= 2.0 * os_ms {
        "device level"
    } else {
        "both system and device level"
    };
    assert!(table_row.contains(level), "{table_row}: want {level}");
    // The worst second named as the trace keys it (by its start), not the next one.
    let sec = worst / 1000 % 86400;
    let clock = format!("{:02}:{:02}:{:02}", sec / 3600, sec % 3600 / 60, sec % 60);
    assert!(
        table_row.contains(&format!("| {clock} |")),
        "{table_row}: want the second {clock}"
    );
    assert_eq!(
        section.contains("Write p99 spikes are"),
        os_ms.max(dev_ms) >= 1.0,
        "the finding fires exactly when the worst second reaches 1 ms:\n{section}"
    );

    // Configuration: run.json's environment against the machine, and the report's header.
    let run = r.run_json();
    let env = &run["environment"];
    let storage = &env["storage"];
    let dev = storage["device"].as_str().unwrap();
    let sectors: u64 = std::fs::read_to_string(format!("/sys/block/{dev}/size"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(storage["capacity_bytes"].as_u64(), Some(sectors * 512));
    let ra: u64 = std::fs::read_to_string(format!("/sys/block/{dev}/queue/read_ahead_kb"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(storage["read_ahead_kb"].as_u64(), Some(ra));
    assert!(storage["mount_options"].as_str().unwrap().contains("rw"));
    let dirty = std::fs::read_to_string("/proc/sys/vm/dirty_ratio").unwrap();
    assert_eq!(env["kernel_settings"]["vm.dirty_ratio"], dirty.trim());
    assert!(
        md.contains(&format!("vm.dirty_ratio {}", dirty.trim())),
        "{md}"
    );
    assert!(md.contains(&format!("read-ahead {ra} KiB")), "{md}");
    let stats = storage["device_latency_stats"].as_str().unwrap();
    if !dev.starts_with("nvme") && storage["members"].as_array().is_none() {
        assert_eq!(
            stats,
            format!(
                "not available: {dev}: not an NVMe device — the device reports no latency \
                 statistics of its own"
            )
        );
    }
    assert!(md.contains(stats), "{md}");

    // The database's own version, from its LOG, and which machine ran what.
    let log =
        std::fs::read_to_string(Path::new(env["data_dir"].as_str().unwrap()).join("LOG")).unwrap();
    let version = log
        .lines()
        .find_map(|l| l.split_once("RocksDB version: ").map(|(_, v)| v.trim()))
        .expect("RocksDB writes its version first");
    assert_eq!(env["database_version"], format!("RocksDB {version}"));
    assert!(
        md.contains(&format!("| database | rocksdb (RocksDB {version}) |")),
        "{md}"
    );
    assert!(
        md.contains(&format!(
            "| machines | client on {}, the database embedded in the client process |",
            env["hostname"].as_str().unwrap()
        )),
        "{md}"
    );

    // Every write on the latency heat map, each in the octave of its device latency.
    let html = std::fs::read_to_string(r.run_dir().join("report.html")).unwrap();
    // iodig's own CPU (client and embedded database) per second, on its chart.
    let cpu = html
        .split("<svg")
        .find(|c| c.contains("CPU of iodig and the database processes"))
        .unwrap_or_else(|| panic!("no chart of the processes' CPU"));
    assert!(cpu.contains(">iodig<"), "iodig's line is named");
    // The load step's charts come first; the run step's write heat map is the last one.
    let heat = html
        .rsplit("<svg")
        .find(|c| c.contains(r#"aria-label="Device latency of every write"#))
        .unwrap_or_else(|| panic!("no write heat map in the report"));
    let cells: Vec<(f64, f64, u64)> = heat
        .split("<rect data-count=\"")
        .skip(1)
        .map(|c| {
            let attr = |name: &str| {
                c.split(&format!("{name}=\""))
                    .nth(1)
                    .and_then(|v| v.split('"').next())
                    .unwrap()
                    .to_string()
            };
            (
                attr("data-lower-ms").parse().unwrap(),
                attr("data-upper-ms").parse().unwrap(),
                c.split('"').next().unwrap().parse().unwrap(),
            )
        })
        .collect();
    let on_chart: u64 = cells.iter().map(|c| c.2).sum();
    let (mut with_latency, mut slowest_ns, mut timed) = (0u64, 0u64, 0u64);
    for d in trace["devices"].as_array().unwrap() {
        timed += d["ops"]["write"]["latency"]["device"]["count"]
            .as_u64()
            .unwrap_or(0);
        for sec in d["seconds"].as_array().unwrap() {
            let w = &sec["ops"]["write"];
            for b in w["lat_hist"].as_array().into_iter().flatten() {
                with_latency += b["count"].as_u64().unwrap();
            }
            slowest_ns = slowest_ns.max(w["lat_max_ns"].as_u64().unwrap_or(0));
        }
    }
    // Every write with a device time is one count on the chart, as in the step's histogram
    // (writes the tracer saw complete without their issue have none, and the title says so).
    assert_eq!(on_chart, with_latency, "per-second histograms on the chart");
    assert_eq!(
        with_latency, timed,
        "per-second counts add up to the step's"
    );
    assert!(
        timed > 0 && timed <= ios_all,
        "{timed} timed of {ios_all} writes"
    );
    if timed < ios_all {
        assert!(
            heat.contains(&format!(
                "{} IOs timed of {}",
                thousands(timed),
                thousands(ios_all)
            )),
            "{}",
            heat.chars().take(300).collect::<String>()
        );
    }
    let top = cells.iter().map(|c| c.1).fold(0.0, f64::max);
    let slowest_ms = slowest_ns as f64 / 1e6;
    assert!(
        cells
            .iter()
            .any(|c| c.0 <= slowest_ms && slowest_ms < c.1 && c.1 == top),
        "the slowest write ({slowest_ms} ms) sits in the top cell: {cells:?}"
    );

    // The page as a browser shows it: headless Chromium lays out report.html and draws its
    // first charts (the summary's curves in the palette's first blue, #0072B2) and its text.
    let shot = screenshot::screenshot(&r.run_dir().join("report.html"), 1000, 2400);
    assert_eq!((shot.width, shot.height), (1000, 2400));
    let (blue, ink, white) = (
        shot.count([0x00, 0x72, 0xB2], 12),
        shot.count([0x22, 0x22, 0x22], 40),
        shot.count([0xff, 0xff, 0xff], 0),
    );
    assert!(blue > 300, "a chart's line drawn: {blue} blue pixels");
    assert!(ink > 2_000, "the text drawn: {ink} dark pixels");
    assert!(
        white > shot.rgb.len() / 2,
        "a white page: {white} white pixels"
    );
}

#[test]
fn rocksdb_run_from_memory_is_said_not_storage_bound() {
    let _serial = serial();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    // A small dataset read through the page cache (no direct reads) and a large block cache:
    // after the load, the reads barely reach the device.
    let r = IodigArgs::run()
        .db("rocksdb")
        .workload("workloads/workloadc")
        .props(&[
            "recordcount=5000",
            "rocksdb.directreads=false",
            "rocksdb.blockcachesize=64M",
        ])
        .threads("2")
        .duration("3s")
        .warmup("0s")
        .trace("ebpf")
        .out(dir.path())
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let step = &run["steps"][1];
    assert_eq!(step["phase"], "run");
    let db_reads = step["series"]["READ"]["count"].as_u64().unwrap();
    let trace = read_json(
        &r.run_dir()
            .join(step["dir"].as_str().unwrap())
            .join("trace.json"),
    );
    let device_reads: u64 = trace["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["ops"]["read"]["ios"].as_u64())
        .sum();
    let md = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    let section = run_step_section(&md);
    let ratio = device_reads as f64 / db_reads as f64;
    let row = format!(
        "| {} | {} | {ratio:.3} |",
        thousands(db_reads),
        thousands(device_reads)
    );
    assert!(section.contains("### Storage-bound or not"), "{section}");
    assert!(section.contains(&row), "{row} not in:\n{section}");
    assert!(db_reads >= 1000, "enough reads to tell: {db_reads}");
    assert!(
        ratio < 0.1,
        "a 5,000-record dataset in the page cache: {device_reads} device reads for {db_reads}"
    );
    let finding = format!("Not storage-bound: {ratio:.3} device reads per database read");
    assert!(section.contains(&finding), "{finding} not in:\n{section}");
}

/// 1234567 → "1,234,567", as the report prints counts.
fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn burst_and_queue_depth_findings_match_the_trace_and_the_self_check_is_stated() {
    let _serial = serial();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let (r, trace) = traced_rocksdb_run(dir.path(), "32M");
    let md = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    let section = run_step_section(&md);
    burst_and_queue_depth_findings_match(section, &trace);

    // The tracer's own check against /proc/diskstats is stated: "equal" only when every
    // count is, else each difference and whether the window's edges explain it.
    let verdict = trace["self_check"]["diskstats_match"].as_bool().unwrap();
    let all_equal = trace["devices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["diskstats_check"].as_array().unwrap())
        .all(|c| c["tracer_ios"] == c["diskstats_ios"]);
    assert!(section.contains("Tracer self-check:"), "{section}");
    let equal =
        section.contains("the traced IO counts equal /proc/diskstats on every device and op");
    assert_eq!(equal, all_equal, "{section}");
    if !all_equal {
        assert!(section.contains("IOs traced against"), "{section}");
        let within = section.contains("within what IO completing at the window's edges explains");
        assert_eq!(within, verdict, "{section}");
    }
}
