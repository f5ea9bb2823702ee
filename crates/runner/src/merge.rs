//! `iodig merge`: combines the run directories of N clients that drove one database at the same
//! time into one run directory, exactly: histograms are added (never percentiles averaged),
//! operations and return codes summed, and per-second histograms from each client's HDR
//! interval log added by wall-clock second (and the logs by start second alike). Each client's block-IO trace, system samples,
//! database events and observed nodes are kept whole under the merged step's `clients/<i>/`
//! (hard links where the file system allows), listed in its `clients.json`.

use crate::errors::{RunError, UsageError};
use crate::rundir::RunDir;
use crate::utc::unix_ms;
use anyhow::{anyhow, Context, Result};
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use iodig_model::fsio::read_json;
use iodig_model::reading::{read_run_doc, settle};
use iodig_model::{files, ClientStep, RunDoc, Sample, StepHistograms, StepSummary};
use iodig_report::ycsb;
use iodig_stats::{new_histogram, summarize, Histogram, SeriesSet};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One client's run directory to merge.
#[derive(Debug, Clone)]
pub struct ClientRun {
    /// The client's run directory (the one holding its run.json).
    pub dir: PathBuf,
    /// Its number (I of `--client I/N`), which names its directories in the merged steps.
    pub client: u64,
    /// The host it ran on, when iodig started it there.
    pub host: Option<String>,
    /// How notes and `clients.json` name its run (its path, or where the merged run keeps it).
    pub name: String,
}

/// Merges `runs` (one per client, numbered in the order given) into a new run directory under
/// `out`; returns its path.
pub fn merge_runs(runs: &[PathBuf], out: &Path) -> Result<PathBuf, RunError> {
    if runs.len() < 2 {
        return Err(UsageError(
            "iodig merge needs at least two run directories, one per client".into(),
        )
        .into());
    }
    let clients: Vec<ClientRun> = runs
        .iter()
        .zip(1..)
        .map(|(dir, client)| ClientRun {
            dir: dir.clone(),
            client,
            host: None,
            name: dir.display().to_string(),
        })
        .collect();
    Ok(merge_clients(&clients, out, Vec::new())?)
}

/// Merges the clients' runs (at least one) into a new run directory under `out`, with `notes`
/// added to its run.json; returns its path.
pub fn merge_clients(clients: &[ClientRun], out: &Path, notes: Vec<String>) -> Result<PathBuf> {
    if clients.is_empty() {
        return Err(anyhow!("no client run to merge"));
    }
    let runs: Vec<PathBuf> = clients.iter().map(|c| c.dir.clone()).collect();
    let runs = runs.as_slice();
    let docs: Vec<RunDoc> = runs.iter().map(|r| read_run(r)).collect::<Result<_>>()?;
    check_same_steps(runs, &docs)?;
    let first = &docs[0];
    let mut doc = first.clone();
    doc.steps.clear();
    let status = if docs.iter().all(|d| d.status == "completed") {
        "completed"
    } else {
        "interrupted"
    };
    // `running` until every step is merged: a merge stopped halfway says so.
    doc.status = "running".into();
    doc.notes.extend(
        runs.iter()
            .zip(&docs)
            .filter(|(_, d)| d.status != "completed")
            .map(|(r, d)| format!("client run {} ended {}", r.display(), d.status)),
    );
    doc.updated_unix_ms = unix_ms(SystemTime::now());
    doc.notes.push(format!(
        "merged from {} clients: {}; each client's block-IO trace, system samples, events and observed nodes are in the step's clients/<i>/",
        runs.len(),
        clients
            .iter()
            .map(|c| match &c.host {
                Some(h) => format!("{} ({h}, {})", c.client, c.name),
                None => format!("{} ({})", c.client, c.name),
            })
            .collect::<Vec<_>>()
            .join(", ")
    ));
    doc.notes.extend(notes);
    let label = runs[0]
        .file_name()
        .map_or("run".into(), |n| n.to_string_lossy().to_string());
    let mut merged = RunDir::create(out, &format!("merged-{label}"), doc)?;
    for index in 0..first.steps.len() {
        let steps: Vec<&StepSummary> = docs.iter().map(|d| &d.steps[index]).collect();
        let dirs: Vec<PathBuf> = runs
            .iter()
            .zip(&steps)
            .map(|(r, s)| r.join(&s.dir))
            .collect();
        let windows: Vec<(u64, u64)> = steps
            .iter()
            .map(|s| (s.started_unix_ms, s.runtime_ms))
            .collect();
        let shared = shared_window(&windows);
        if shared < 0.9 {
            // Summing operations over the longest window assumes the clients ran together.
            let note = format!(
                "step {index}: the clients ran together for only {:.0} % of the longest client's \
                 window (by their start times and run times); the merged throughput counts them \
                 as simultaneous, so it overstates what the database served",
                shared * 100.0
            );
            iodig_model::eprintln_lossy!("iodig merge: warning: {note}");
            merged.doc.notes.push(note);
        }
        merge_step(&mut merged, index, &steps, &dirs, clients)?;
    }
    merged.finish(status)?;
    Ok(merged.path.clone())
}

/// The share of the longest client's window during which all clients were running, from each
/// client's (start, duration) in ms: 1.0 when all ran at the same time, 0.0 when some never
/// overlapped.
fn shared_window(windows: &[(u64, u64)]) -> f64 {
    let start = windows.iter().map(|w| w.0).max().unwrap_or(0);
    let end = windows.iter().map(|w| w.0 + w.1).min().unwrap_or(0);
    let longest = windows.iter().map(|w| w.1).max().unwrap_or(0);
    if longest == 0 {
        return 1.0;
    }
    end.saturating_sub(start) as f64 / longest as f64
}

fn read_run(dir: &Path) -> Result<RunDoc> {
    let path = dir.join(files::RUN);
    if !path.is_file() {
        return Err(UsageError(format!(
            "{}: not a run directory (no run.json); give directories written by iodig run",
            dir.display()
        ))
        .into());
    }
    // Another schema, or an unreadable run.json, is bad input: the message names it.
    let mut doc = read_run_doc(dir).map_err(|e| UsageError(format!("{e:#}")))?;
    if let Some(note) = settle(&mut doc).note() {
        iodig_model::eprintln_lossy!("iodig merge: {}: {note}", dir.display());
        // The merged run names its clients' states itself ("client run … ended killed").
        doc.notes.remove(0);
    }
    Ok(doc)
}

/// Clients must have run the same steps: same phase, workload and thread count, in order.
fn check_same_steps(runs: &[PathBuf], docs: &[RunDoc]) -> Result<()> {
    let key = |s: &StepSummary| (s.phase.clone(), s.workload.clone(), s.threads);
    let first: Vec<_> = docs[0].steps.iter().map(key).collect();
    for (run, doc) in runs.iter().zip(docs).skip(1) {
        let these: Vec<_> = doc.steps.iter().map(key).collect();
        if these != first {
            return Err(UsageError(format!(
                "{} ran other steps than {} ({these:?} vs {first:?}); merge runs of the same command on several clients",
                run.display(),
                runs[0].display()
            ))
            .into());
        }
    }
    Ok(())
}

fn merge_step(
    merged: &mut RunDir,
    index: usize,
    steps: &[&StepSummary],
    dirs: &[PathBuf],
    clients: &[ClientRun],
) -> Result<()> {
    let mut totals = SeriesSet::new();
    for dir in dirs {
        let h: StepHistograms = read_json(&dir.join(files::HISTOGRAMS))?;
        totals.merge(&SeriesSet::from_encoded(&h.series)?);
    }
    let mut returns: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for s in steps {
        for (op, by_status) in &s.returns {
            for (status, n) in by_status {
                *returns
                    .entry(op.clone())
                    .or_default()
                    .entry(status.clone())
                    .or_default() += n;
            }
        }
    }
    let operations: u64 = steps.iter().map(|s| s.operations).sum();
    // Clients ran at the same time: the merged step lasts as long as the longest client.
    let runtime_ms = steps.iter().map(|s| s.runtime_ms).max().unwrap_or(0);
    let first = steps[0];
    let (dir, rel) = merged.step_dir(
        index,
        first
            .dir
            .rsplit('/')
            .next()
            .unwrap_or("step")
            .split_once('-')
            .map_or("step", |(_, l)| l),
    )?;
    let (samples, hlog) = merge_seconds(dirs)?;
    let mut parts = Vec::new();
    let mut nodes = Vec::new();
    for ((client, step), src) in clients.iter().zip(steps).zip(dirs) {
        let (part, client_nodes) = keep_client_files(&dir, &rel, client, step, src)?;
        parts.push(part);
        nodes.extend(client_nodes);
    }
    let mut summary = StepSummary {
        index,
        dir: rel.clone(),
        started_unix_ms: steps.iter().map(|s| s.started_unix_ms).min().unwrap_or(0),
        runtime_ms,
        operations,
        throughput_ops_per_sec: if runtime_ms > 0 {
            operations as f64 * 1000.0 / runtime_ms as f64
        } else {
            0.0
        },
        interrupted: steps.iter().any(|s| s.interrupted),
        series: totals.summaries(),
        returns,
        trace_mode: None,
        trace_note: Some(format!(
            "per client: {rel}/clients/<i>/trace.json.gz (see {})",
            files::CLIENTS
        )),
        // The clients' processes may share no machine; their CPU is in their own runs.
        client_cpu_s: None,
        nodes: Vec::new(),
        ..first.clone()
    };
    summary.nodes = nodes;
    let text = ycsb::step_text(&summary, ycsb::DEFAULT_PERCENTILES);
    merged.write_bytes(&dir, files::YCSB_TEXT, text.as_bytes())?;
    merged.write_json(
        &dir,
        files::HISTOGRAMS,
        &StepHistograms {
            unit: "us".into(),
            series: totals.to_encoded()?,
        },
    )?;
    merged.recorded(iodig_model::series::write_timeseries(&dir, &samples))?;
    merged.recorded(iodig_model::series::write_hlog(&dir, files::HDR_LOG, &hlog))?;
    if let Some(log) = merge_start_logs(dirs)? {
        merged.recorded(iodig_model::series::write_hlog(
            &dir,
            files::HDR_START_LOG,
            &log,
        ))?;
    }
    merged.write_json(&dir, files::CLIENTS, &parts)?;
    merged.write_json(&dir, files::STEP_SUMMARY, &summary)?;
    merged.push_step(summary)
}

/// Keeps one client's trace, its drives' own statistics, system samples, events and observed
/// nodes of a step under the merged step's `clients/<i>/`; returns its entry of `clients.json`
/// and its nodes with their directories in the merged run.
fn keep_client_files(
    step_dir: &Path,
    rel: &str,
    client: &ClientRun,
    step: &StepSummary,
    src: &Path,
) -> Result<(ClientStep, Vec<iodig_model::cluster::NodeStep>)> {
    let part_rel = format!("{rel}/clients/{}", client.client);
    let part_dir = step_dir.join("clients").join(client.client.to_string());
    std::fs::create_dir_all(&part_dir)
        .with_context(|| format!("cannot create {}", part_dir.display()))?;
    let mut kept = Vec::new();
    // A client's series files go with its documents, whichever schema wrote them.
    for name in [
        files::TRACE,
        files::DEVICE_STATS,
        files::SYSSTAT,
        files::EVENTS,
        files::JVM_PAUSES,
        files::CLIENT_BY_NODE,
    ]
    .into_iter()
    .chain(iodig_model::series::present(src).into_iter().filter(|f| {
        // The client's samples and latency logs are merged, not kept per client.
        ![
            iodig_model::series::TIMESERIES,
            iodig_model::series::TIMESERIES_V1,
            iodig_model::series::HDR_LOG,
            iodig_model::series::HDR_START_LOG,
            iodig_model::series::HDR_SHIFT_LOG,
        ]
        .contains(f)
    })) {
        if src.join(name).is_file() {
            link_or_copy(&src.join(name), &part_dir.join(name))?;
            kept.push(name.to_string());
        }
    }
    if src.join("nodes").is_dir() {
        copy_tree(
            &src.join("nodes"),
            &part_dir.join("nodes"),
            "nodes",
            &mut kept,
        )?;
    }
    let nodes = step
        .nodes
        .iter()
        .map(|n| {
            let name = n.dir.rsplit('/').next().unwrap_or_default();
            iodig_model::cluster::NodeStep {
                dir: format!("{part_rel}/nodes/{name}"),
                ..n.clone()
            }
        })
        .collect();
    let part = ClientStep {
        client: client.client,
        host: client.host.clone(),
        run: client.name.clone(),
        dir: part_rel,
        started_unix_ms: step.started_unix_ms,
        runtime_ms: step.runtime_ms,
        operations: step.operations,
        trace_mode: step.trace_mode.clone(),
        files: kept,
    };
    Ok((part, nodes))
}

/// A hard link (the files are written once and replaced whole, never edited in place), else a
/// copy when the two directories are on different file systems.
fn link_or_copy(from: &Path, to: &Path) -> Result<()> {
    if std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, to)
        .map(|_| ())
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))
}

/// Copies a directory tree file by file, noting each file's path under `prefix`.
fn copy_tree(from: &Path, to: &Path, prefix: &str, kept: &mut Vec<String>) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    let mut entries: Vec<_> = std::fs::read_dir(from)
        .with_context(|| format!("cannot read {}", from.display()))?
        .collect::<std::io::Result<_>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = format!("{prefix}/{name}");
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &to.join(&name), &path, kept)?;
        } else {
            link_or_copy(&e.path(), &to.join(&name))?;
            kept.push(path);
        }
    }
    Ok(())
}

/// One wall-clock second of all clients: operations and per-series histograms.
#[derive(Default)]
struct Second {
    operations: u64,
    secs: f64,
    series: BTreeMap<String, Histogram>,
}

/// Which second an interval of a log belongs to, from its start and end (unix ms).
type KeyOf = fn(u64, u64) -> u64;

/// The log by completion: the second an interval ends in (as the client cut them).
fn by_end(_start_ms: u64, end_ms: u64) -> u64 {
    end_ms.div_ceil(1000)
}

/// The log by start: the second an interval mostly covers (its straggler intervals, written
/// later for the same second, land there too).
fn by_middle(start_ms: u64, end_ms: u64) -> u64 {
    (start_ms + end_ms.saturating_sub(start_ms) / 2) / 1000
}

/// Sums per-second operations by wall-clock second and adds the per-second histograms of the
/// clients' interval logs; writes a merged interval log.
fn merge_seconds(dirs: &[PathBuf]) -> Result<(Vec<Sample>, Vec<u8>)> {
    let mut seconds: BTreeMap<u64, Second> = BTreeMap::new();
    for dir in dirs {
        let samples: Vec<Sample> = iodig_model::series::read_timeseries(dir)?.unwrap_or_default();
        for s in samples {
            let sec = seconds.entry(s.unix_ms.div_ceil(1000)).or_default();
            sec.operations += s.operations;
            sec.secs = sec.secs.max(s.secs);
        }
        if !read_hlog(dir, files::HDR_LOG, &mut seconds, by_end)? {
            anyhow::bail!(
                "{}: no latency log ({} or {}); the client's step is incomplete: merge runs whose steps finished",
                dir.display(),
                iodig_model::series::HDR_LOG,
                files::HDR_LOG
            );
        }
    }
    // Each second's interval ends on it and lasts as long as the longest client's.
    let hlog = write_log(
        &seconds,
        "iodig merged latency log: histograms of all clients added per second, microseconds",
        |sec, s| {
            let len = (s.secs.max(0.001) * 1000.0) as u64;
            (sec * 1000 - len, len)
        },
    )?;
    let start_ms = seconds.keys().next().map_or(0, |s| s * 1000);
    let samples = seconds
        .into_iter()
        .map(|(sec, s)| Sample {
            t: (sec * 1000 - start_ms) as f64 / 1000.0,
            unix_ms: sec * 1000,
            secs: s.secs,
            operations: s.operations,
            ops_per_sec: if s.secs > 0.0 {
                s.operations as f64 / s.secs
            } else {
                0.0
            },
            series: s
                .series
                .iter()
                .map(|(n, h)| (n.clone(), summarize(h)))
                .collect(),
        })
        .collect();
    Ok((samples, hlog))
}

/// The clients' logs by start second added second by second, when any client wrote one.
fn merge_start_logs(dirs: &[PathBuf]) -> Result<Option<Vec<u8>>> {
    let mut seconds: BTreeMap<u64, Second> = BTreeMap::new();
    let mut any = false;
    for dir in dirs {
        any |= read_start_log(dir, &mut seconds, by_middle)?;
    }
    if !any {
        return Ok(None);
    }
    write_log(
        &seconds,
        "iodig merged latency log by start: each operation in the second it started (intended start under a target), all clients added, microseconds",
        |sec, _| (sec * 1000, 1000),
    )
    .map(Some)
}

/// An interval log of `seconds`: each second's histograms over the interval `span` gives
/// (start unix ms, length ms).
fn write_log(
    seconds: &BTreeMap<u64, Second>,
    comment: &str,
    span: impl Fn(u64, &Second) -> (u64, u64),
) -> Result<Vec<u8>> {
    let start_ms = seconds.iter().next().map_or(0, |(sec, s)| span(*sec, s).0);
    let mut hlog = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    let base = UNIX_EPOCH + Duration::from_millis(start_ms);
    let mut writer = IntervalLogWriterBuilder::new()
        .add_comment(comment)
        .with_start_time(base)
        .with_base_time(base)
        .begin_log_with(&mut hlog, &mut ser)?;
    for (sec, s) in seconds {
        let (from, len) = span(*sec, s);
        for (name, h) in &s.series {
            writer
                .write_histogram(
                    h,
                    Duration::from_millis(from.saturating_sub(start_ms)),
                    Duration::from_millis(len),
                    Tag::new(name),
                )
                .map_err(|e| anyhow!("cannot write the merged interval log: {e:?}"))?;
        }
    }
    drop(writer);
    Ok(hlog)
}

/// Adds a client's interval log `name` into `seconds`, each interval under the second `key`
/// gives it; `false` when the step has no such log.
fn read_hlog(
    dir: &Path,
    name: &str,
    seconds: &mut BTreeMap<u64, Second>,
    key: KeyOf,
) -> Result<bool> {
    let path = dir.join(name);
    let Some(bytes) = iodig_model::series::read_hlog(dir, name)? else {
        return Ok(false);
    };
    let mut failed = None;
    iodig_stats::for_each_interval(
        &bytes,
        |_| true,
        |start, end, tag, h| add_to_second(seconds, key(start, end), tag, h, &mut failed),
    )
    .with_context(|| path.display().to_string())?;
    failed
        .map_or(Ok(true), Err)
        .with_context(|| path.display().to_string())
}

/// [`read_hlog`] of a client's log by start, whole or rebuilt from its log by end and shift.
fn read_start_log(dir: &Path, seconds: &mut BTreeMap<u64, Second>, key: KeyOf) -> Result<bool> {
    let mut failed = None;
    let any = iodig_stats::for_each_start_interval_in(
        dir,
        |_| true,
        |start, end, tag, h| add_to_second(seconds, key(start, end), tag, h, &mut failed),
    )?;
    failed
        .map_or(Ok(any), Err)
        .with_context(|| format!("{}: the log by start", dir.display()))
}

/// Adds one interval's histogram of `tag` into second `sec`, keeping the first failure.
fn add_to_second(
    seconds: &mut BTreeMap<u64, Second>,
    sec: u64,
    tag: &str,
    h: &Histogram,
    failed: &mut Option<anyhow::Error>,
) {
    let slot = seconds
        .entry(sec)
        .or_default()
        .series
        .entry(tag.to_string())
        .or_insert_with(new_histogram);
    if let Err(e) = slot.add(h) {
        failed.get_or_insert_with(|| anyhow!("{tag}: {e:?}"));
    }
}

#[cfg(test)]
mod tests {
    use super::shared_window;

    #[test]
    fn shared_window_is_the_common_part_of_the_longest_window() {
        assert_eq!(shared_window(&[(1000, 10_000), (1000, 10_000)]), 1.0);
        assert_eq!(shared_window(&[(1000, 10_000), (6000, 10_000)]), 0.5);
        assert_eq!(shared_window(&[(1000, 10_000), (20_000, 10_000)]), 0.0);
        // A short client inside a long one shares only its own length.
        assert_eq!(shared_window(&[(0, 10_000), (2000, 2000)]), 0.2);
        assert_eq!(shared_window(&[(0, 0), (0, 0)]), 1.0);
    }
}
