//! The report's step findings recomputed from a run's own files, for tests that check them
//! on real runs (the VM's disk and a loop device).

use serde_json::Value;
use std::collections::BTreeMap;

/// The run step's section of report.md (the load step's comes first).
pub fn run_step_section(md: &str) -> &str {
    let at = md.rfind("\n## Step").expect("a step section");
    &md[at..]
}

/// The run step's write-burst finding (who wrote the bursts, per the kernel), the share of
/// write bytes per activity and the queue-depth rule, each recomputed from trace.json and
/// looked for in the report's `section`. Returns whether the queue-depth finding fired.
pub fn burst_and_queue_depth_findings_match(section: &str, trace: &Value) -> bool {
    // MB/s as the report words it; the figures themselves are recomputed here.
    use iodig_report::analysis::findings::rate;
    let devices = trace["devices"].as_array().unwrap();

    // Write bursts: the busiest slot of the busiest second (summed over devices, as the report
    // sums them) against the step's mean, recomputed from trace.json.
    let secs = (trace["end_unix_ms"].as_u64().unwrap() - trace["start_unix_ms"].as_u64().unwrap())
        as f64
        / 1000.0;
    let bytes: u64 = devices
        .iter()
        .filter_map(|d| d["ops"]["write"]["bytes"].as_u64())
        .sum();
    let mut per_second = BTreeMap::<u64, f64>::new();
    for d in devices {
        for s in d["seconds"].as_array().unwrap() {
            *per_second
                .entry(s["unix_ms"].as_u64().unwrap())
                .or_default() += s["ops"]["write"]["mb_s_max"].as_f64().unwrap_or(0.0);
        }
    }
    let peak = per_second.values().copied().fold(0.0, f64::max);
    let mean = bytes as f64 / 1e6 / secs;
    let ratio = peak / mean;
    // Both runs are made to burst: a few flushes (two memtables merged each) inside the step,
    // each a burst against the quiet seconds between them.
    assert!(
        ratio >= 5.0 && peak >= 10.0,
        "the run is made to burst: peak {peak} MB/s, mean {mean} MB/s"
    );
    let burst = format!(
        "Write bursts reach {ratio:.0}× the mean write throughput ({} vs {})",
        rate(peak),
        rate(mean)
    );
    assert!(section.contains(&burst), "{burst} not in:\n{section}");
    // … and who wrote them, per the kernel: the class with most bytes in the burst seconds.
    let burst_secs: Vec<u64> = per_second
        .iter()
        .filter(|(_, v)| **v >= 0.5 * peak)
        .map(|(k, _)| *k)
        .collect();
    let mut by_class = BTreeMap::<String, u64>::new();
    for row in trace["self_check"]["attribution"]["rows"]
        .as_array()
        .unwrap()
    {
        if row["op"] != "write" {
            continue;
        }
        for s in row["seconds"].as_array().unwrap() {
            if burst_secs.contains(&s["unix_ms"].as_u64().unwrap()) {
                *by_class
                    .entry(row["class"].as_str().unwrap().to_string())
                    .or_default() += s["bytes"].as_u64().unwrap();
            }
        }
    }
    let total: u64 = by_class.values().sum();
    let (class, top) = by_class.iter().max_by_key(|c| *c.1).unwrap();
    assert!(
        class.starts_with("rocksdb."),
        "RocksDB's own threads wrote the bursts: {by_class:?}"
    );
    let who = format!(
        "the kernel attributes {:.0} % of the burst seconds' write bytes to {class}",
        100.0 * *top as f64 / total as f64
    );
    assert!(section.contains(&who), "{who} not in:\n{section}");

    // Who wrote the step's bytes, per the kernel: each class's share of all write bytes.
    let mut writes = BTreeMap::<String, u64>::new();
    for row in trace["self_check"]["attribution"]["rows"]
        .as_array()
        .unwrap()
    {
        if row["op"] == "write" {
            *writes
                .entry(row["class"].as_str().unwrap().to_string())
                .or_default() += row["bytes"].as_u64().unwrap();
        }
    }
    let all: u64 = writes.values().sum();
    let mut shares: Vec<(f64, &String)> = writes
        .iter()
        .map(|(c, b)| (100.0 * *b as f64 / all as f64, c))
        .filter(|(p, _)| *p >= 1.0)
        .collect();
    shares.sort_by(|a, b| b.0.total_cmp(&a.0));
    if shares.len() > 1 {
        let (pct, top) = shares[0];
        let want = format!("Writes by activity, share of bytes: {top} {pct:.0} %");
        assert!(section.contains(&want), "{want} not in:\n{section}");
    }

    // Queue depth: the rule fires exactly when the trace says it should.
    let (mut qd_max, mut means) = (0u64, Vec::new());
    let mut busiest = ("", 0u64, 0.0);
    for d in devices {
        let m: Vec<f64> = d["seconds"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["qd_mean"].as_f64())
            .collect();
        let max = d["seconds"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["qd_max"].as_u64())
            .max()
            .unwrap_or(0);
        if !m.is_empty() && max > busiest.1 {
            busiest = (
                d["name"].as_str().unwrap(),
                max,
                m.iter().sum::<f64>() / m.len() as f64,
            );
        }
        qd_max = qd_max.max(max);
        means.extend(m);
    }
    let (name, max, mean) = busiest;
    let qd = format!("Queue depth on {name}");
    assert!(qd_max > 0 && !means.is_empty());
    if max >= 8 && max as f64 >= 4.0 * mean {
        // "… peaks at M at hh:mm:ss[, when reads queued …] against a mean of Q": the second
        // it peaked in and the reads' OS time then sit between the peak and the mean.
        let want = format!("Queue depth on {name} peaks at {max} at ");
        let line = section
            .lines()
            .find(|l| l.contains(&want))
            .unwrap_or_else(|| panic!("{want} not in:\n{section}"));
        let mean = format!("against a mean of {mean:.1}.");
        assert!(line.contains(&mean), "{mean} not in {line}");
        true
    } else {
        assert!(!section.contains(&qd), "no spike, no finding:\n{section}");
        false
    }
}

/// Every "1.5X better (95% CI 1.3–1.8)" a compare document prints: asserts the ratio lies
/// inside its interval, and returns how many there are.
pub fn ratios_inside_their_intervals(md: &str) -> usize {
    let token_before = |end: usize| -> String {
        let t: String = md[..end]
            .chars()
            .rev()
            .take_while(|c| *c != ' ' && *c != '|')
            .collect();
        t.chars().rev().collect()
    };
    let mut printed = 0;
    for (i, _) in md.match_indices(" (95% CI ") {
        // "1.5X better": the words, then the figure before them.
        let words = token_before(i);
        let figure = token_before(i - words.len() - 1);
        let x: f64 = figure
            .trim_end_matches('X')
            .parse()
            .unwrap_or_else(|e| panic!("{figure:?}: {e}"));
        let rest = &md[i + " (95% CI ".len()..];
        let (lo, hi) = rest[..rest.find(')').unwrap()].split_once('–').unwrap();
        let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
        assert!(lo <= x && x <= hi, "{x} outside {lo}–{hi}");
        printed += 1;
    }
    printed
}
