//! What an observed host's agent streams during a step, over a real OpenSSH server on loopback
//! (this machine, reached through sshd): when the agent or its link dies mid-step, the host's
//! part is what streamed before, marked partial from the first second that did not come, the
//! run goes on, and the next step starts a fresh agent.

mod common;

use common::agents::{
    agents_under, no_agent_left, observed_rocksdb, one_at_a_time, wait_for_an_agent,
};
use common::sshd::Sshd;
use common::{is_root, read_json, IodigArgs};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

#[test]
fn a_host_lost_mid_step_is_marked_partial_and_the_run_goes_on() {
    let _one = one_at_a_time();
    let sshd = Sshd::start(&["127.0.0.1"]);
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tmp.path().join("runs");
    let child = IodigArgs::run_basic("workloadc", &out)
        .p(sshd.property())
        .threads("1")
        .duration("6s")
        .observe("127.0.0.1")
        .command()
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_an_agent(&sshd);
    std::thread::sleep(Duration::from_secs(3));
    for pid in agents_under(&sshd) {
        // SAFETY: signalling the agent this test's run started, by its pid.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "the run goes on: {stderr}");
    assert!(stderr.contains("warning: 127.0.0.1: lost ("), "{stderr}");
    let dir = stderr
        .lines()
        .find_map(|l| l.strip_prefix("results: "))
        .unwrap();
    let run = read_json(&Path::new(dir.trim()).join("run.json"));
    assert_eq!(run["status"], "completed");
    let last = run["steps"].as_array().unwrap().last().unwrap().clone();
    let partial = last["nodes"][0]["partial"].as_str().unwrap_or_default();
    assert!(partial.contains("closed"), "{last}");
    let report = std::fs::read_to_string(Path::new(dir.trim()).join("report.md")).unwrap();
    assert!(
        report.contains("127.0.0.1 (partial)"),
        "the node table says so"
    );
    assert!(
        report.contains("its data for this step is partial"),
        "a finding says why"
    );
    drop(sshd);
}

/// The steps recorded so far in the one run directory under `out`.
fn steps_recorded(out: &Path) -> usize {
    std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|d| std::fs::read(d.path().join("run.json")).ok())
        .filter_map(|b| serde_json::from_slice::<Value>(&b).ok())
        .map(|run| run["steps"].as_array().map_or(0, Vec::len))
        .max()
        .unwrap_or(0)
}

fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_link_lost_mid_step_keeps_what_streamed_and_the_next_step_reconnects() {
    assert!(is_root(), "this test traces block IO: run it as root");
    let _one = one_at_a_time();
    let sshd = Sshd::start(&["127.0.0.1"]);
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tmp.path().join("runs");
    // A load step, then two run steps of 15 s; the link dies 10 s after the load ended, some
    // 6 s into the first (loading the tracers and starting take a few seconds here).
    let child = observed_rocksdb(&sshd, "1,2", "15s", &out)
        .command()
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while steps_recorded(&out) < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the load step never ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Past the step's start and a few 2 s chunks.
    std::thread::sleep(Duration::from_secs(10));
    let agents = agents_under(&sshd);
    assert_eq!(agents.len(), 1, "{agents:?}");
    // SAFETY: signalling the agent this test's run started, by its pid.
    unsafe { libc::kill(agents[0] as i32, libc::SIGKILL) };
    let killed_ms = unix_ms_now();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "the run goes on: {stderr}");
    assert!(
        stderr.contains("warning: 127.0.0.1: the link was lost mid-step at "),
        "said when it happened: {stderr}"
    );
    assert!(
        stderr.contains("note: 127.0.0.1: reconnected"),
        "the next step says it reconnected: {stderr}"
    );
    let dir = Path::new(
        stderr
            .lines()
            .find_map(|l| l.strip_prefix("results: "))
            .unwrap()
            .trim(),
    )
    .to_path_buf();
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["status"], "completed");
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "load and two run steps");

    // The first run step: the host's part is what streamed before the kill, and says so.
    let cut = &steps[1]["nodes"][0];
    let partial = cut["partial"].as_str().unwrap_or_default();
    assert!(
        partial.contains("the link to 127.0.0.1 was lost at ") && partial.contains("partial from "),
        "{cut}"
    );
    let from = cut["partial_from_unix_ms"]
        .as_u64()
        .expect("partial from a second");
    assert!(
        from <= killed_ms + 1000,
        "partial from {from}, killed at {killed_ms}"
    );
    let cut_dir = dir.join(cut["dir"].as_str().unwrap());
    let node_dir = cut_dir.clone();
    let trace = read_json(&node_dir.join("trace.json"));
    let seconds: Vec<u64> = trace["devices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["seconds"].as_array().unwrap().iter())
        .map(|s| s["unix_ms"].as_u64().unwrap())
        .collect();
    assert!(
        seconds
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            >= 3,
        "a few streamed seconds: {seconds:?}"
    );
    let last = *seconds.iter().max().unwrap();
    assert_eq!(
        from,
        last + 1000,
        "partial from the first second that did not come"
    );
    assert!(
        last + 1000 <= killed_ms,
        "no second after the kill: {last} vs {killed_ms}"
    );
    // The op totals are the sums of the seconds that arrived.
    for d in trace["devices"].as_array().unwrap() {
        for (op, total) in d["ops"].as_object().unwrap() {
            let summed: u64 = d["seconds"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|s| s["ops"][op]["ios"].as_u64())
                .sum();
            assert_eq!(total["ios"].as_u64(), Some(summed), "{op}: {d}");
        }
    }
    // The size and latency histograms came too, as the tracer had counted them at its last
    // reading before the kill (up to 2 s apart from the seconds, so their counts differ a
    // little from the totals, and the note says by how much).
    assert_eq!(trace["histograms"], true, "{trace}");
    let busiest = trace["devices"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|d| d["ops"]["write"]["ios"].as_u64().unwrap_or(0))
        .unwrap();
    let write = &busiest["ops"]["write"];
    let in_sizes: u64 = write["size_hist"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    let ios = write["ios"].as_u64().unwrap();
    assert!(
        in_sizes > 0 && in_sizes.abs_diff(ios) <= ios / 2 + 100,
        "{in_sizes} IOs in the size histogram, {ios} in the seconds: {write}"
    );
    let by_volume: u64 = write["size_bytes_hist"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert!(by_volume >= in_sizes * 512, "{write}");
    // Device time only for the IOs whose issue the tracer saw (as in a whole trace).
    let timed = write["latency"]["device"]["count"].as_u64().unwrap_or(0);
    assert!(timed > 0 && timed <= in_sizes, "{write}");
    let note = trace["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("size and latency histograms as the tracer had counted them")
            && note.contains("IOs, where the streamed seconds hold"),
        "{note}"
    );
    let sys = read_json(&node_dir.join("sys.json"));
    let samples = sys["samples"].as_array().unwrap();
    assert!(samples.len() >= 3, "{sys}");
    assert!(
        samples
            .iter()
            .all(|s| s["unix_ms"].as_u64().unwrap() <= killed_ms),
        "no sample after the kill: {sys}"
    );

    // The second run step: a fresh agent, the host's part whole.
    let whole = &steps[2]["nodes"][0];
    assert!(whole["partial"].is_null(), "{whole}");
    assert_eq!(whole["trace_mode"], "ebpf", "{whole}");
    let node_dir = dir.join(whole["dir"].as_str().unwrap());
    let trace = read_json(&node_dir.join("trace.json"));
    assert_eq!(
        trace["histograms"], true,
        "the agent's whole trace: {trace}"
    );
    // Where the kernel attributes IO (the whole step says so), the streamed part has its IO
    // by activity class too, the rows summing to the device totals of the seconds that came.
    let partial_trace = read_json(&cut_dir.join("trace.json"));
    let streamed = &partial_trace["self_check"]["attribution"];
    if trace["self_check"]["attribution"]["enabled"] == true {
        assert_eq!(streamed["enabled"], true, "{partial_trace}");
        assert_eq!(
            partial_trace["self_check"]["attribution_match"], true,
            "{streamed}"
        );
        let rows = streamed["rows"].as_array().unwrap();
        assert!(
            rows.iter().any(|r| r["ios"].as_u64().unwrap_or(0) > 0
                && r["class"].as_str().is_some_and(|c| c != "unknown")),
            "IO by class: {streamed}"
        );
    } else {
        assert!(streamed.is_null(), "no attribution made up: {streamed}");
    }
    let step_ms = steps[2]["runtime_ms"].as_u64().unwrap_or(15_000);
    let covered = trace["end_unix_ms"].as_u64().unwrap() - trace["start_unix_ms"].as_u64().unwrap();
    assert!(
        covered + 1500 >= step_ms,
        "covers its step: {covered} of {step_ms} ms"
    );

    // The report says it in the node's section.
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("its data for this step is partial (the link to 127.0.0.1 was lost at"),
        "the report says it"
    );
    no_agent_left(&sshd);
    drop(sshd);
}
