//! A step's series files in both schema versions: the one place that writes the per-second and
//! per-slot series (client samples, each device's seconds, each attribution row's seconds,
//! system samples) and reads them back, whichever version wrote them.
//!
//! Schema 1 kept each series inside a pretty-printed document (`timeseries.json`, the seconds
//! inside `trace.json`, the samples inside `sys.json`): about 1 MB a host-minute on two CPUs,
//! growing with the CPUs. Schema 2 writes each series kind as gzip-compressed JSON lines, one
//! record a line (`*.jsonl.gz`, which pandas, polars and DuckDB read in one line each), and the
//! documents around them without their series: `sys.json` compact, the trace's whole-step
//! tables (histograms per op, class and process: 170 KB of compact JSON for a minute of
//! RocksDB) gzip-compressed as `trace.json.gz`. A reader tells the versions apart by the files:
//! `trace.json.gz` or `trace.json`, and a document whose series file is present gets its series
//! from there, one without keeps those it holds inline (schema 1).

use crate::events::DbEvent;
use crate::fsio::{read_json, write_atomic_with};
use crate::sys::{CpuSpread, SysDoc, SysSample, PER_CPU_KEPT};
use crate::trace::{AttrSecond, DeviceSecond, TraceDoc};
use crate::Sample;
use anyhow::{Context, Result};
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

/// Schema 1's client samples: one JSON array.
pub const TIMESERIES_V1: &str = "timeseries.json";
/// The block-IO trace without its series ([`TraceDoc`]), gzip-compressed JSON; schema 1 wrote
/// it, series inline, as `trace.json` ([`crate::files::TRACE`]).
pub const TRACE: &str = "trace.json.gz";
/// The client's per-second samples, one [`Sample`] a line.
pub const TIMESERIES: &str = "timeseries.jsonl.gz";
/// Each traced device's seconds, one [`DeviceSecondLine`] a line, devices in `trace.json` order.
pub const TRACE_SECONDS: &str = "trace-seconds.jsonl.gz";
/// Each attribution row's seconds, one [`ClassSecondLine`] a line, rows in `trace.json` order.
pub const TRACE_CLASS_SECONDS: &str = "trace-class-seconds.jsonl.gz";
/// The system samples, one [`SysSample`] a line.
pub const SYS_SAMPLES: &str = "sys-samples.jsonl.gz";
/// The HDR interval log by end second, gzip (schema 1: [`crate::files::HDR_LOG`], plain).
pub const HDR_LOG: &str = "latency.hlog.gz";
/// The whole HDR interval log by start second, gzip (schema 1: [`crate::files::HDR_START_LOG`]);
/// steps now write [`HDR_SHIFT_LOG`] instead, merged runs still this.
pub const HDR_START_LOG: &str = "latency-by-start.hlog.gz";
/// The HDR interval log of operations that started in one interval and ended in another,
/// gzip ([`crate::files::HDR_SHIFT_LOG`]; new in schema 2's later writers).
pub const HDR_SHIFT_LOG: &str = "latency-start-shift.hlog.gz";

/// The database's events, one [`DbEvent`] a line (earlier writers:
/// [`crate::files::EVENTS`], a JSON array): a flush or compaction every few seconds makes it a
/// series of an hour-long step, not a summary.
pub const EVENTS: &str = "db-events.jsonl.gz";

/// Every series file name of either version: what a merge links per client and what a step
/// directory may hold.
pub const ALL: &[&str] = &[
    TRACE,
    TIMESERIES_V1,
    TIMESERIES,
    TRACE_SECONDS,
    TRACE_CLASS_SECONDS,
    SYS_SAMPLES,
    HDR_LOG,
    HDR_START_LOG,
    HDR_SHIFT_LOG,
    EVENTS,
];

/// One second of one device (`trace-seconds.jsonl.gz`): the device's name beside the
/// second's fields, so a data frame of the file needs no join.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceSecondLine<S> {
    /// The device's name (`nvme0n1`), as in `trace.json`'s `devices`.
    pub device: String,
    /// The second, as schema 1 held it under `devices[].seconds`.
    #[serde(flatten)]
    pub second: S,
}

/// One second of one attribution row (`trace-class-seconds.jsonl.gz`): the row's place in
/// `trace.json`'s `self_check.attribution.rows` and what names it, beside the second's fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClassSecondLine<S> {
    /// Index of the row in `self_check.attribution.rows`.
    pub row: usize,
    /// The row's device.
    pub device: String,
    /// The row's op (`read`, `write`, …).
    pub op: String,
    /// The row's activity class (`flush`, `compaction`, …).
    pub class: String,
    /// The row's process id.
    pub pid: u32,
    /// The second, as schema 1 held it under `rows[].seconds`.
    #[serde(flatten)]
    pub second: S,
}

/// Writes one document as gzip-compressed compact JSON, atomically.
fn write_gzip_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    write_atomic_with(path, |out| {
        let mut gz = GzEncoder::new(out, flate2::Compression::default());
        serde_json::to_writer(&mut gz, value).map_err(std::io::Error::other)?;
        gz.write_all(b"\n")?;
        gz.finish()?.flush()
    })
}

/// Reads one gzip-compressed JSON document, naming the path in the error.
fn read_gzip_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_reader(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(file)))
        .with_context(|| format!("{} is not a valid iodig file", path.display()))
}

/// Writes `records` as gzip-compressed JSON lines, atomically, one record serialised at a time.
fn write_lines<T: Serialize>(path: &Path, records: impl Iterator<Item = T>) -> Result<()> {
    write_atomic_with(path, |out| {
        // Level 6 (the default) is within a few % of 9's size here at a third of its CPU.
        let mut gz = GzEncoder::new(out, flate2::Compression::default());
        for r in records {
            serde_json::to_writer(&mut gz, &r).map_err(std::io::Error::other)?;
            gz.write_all(b"\n")?;
        }
        gz.finish()?.flush()
    })
}

/// Reads a file of gzip-compressed JSON lines record by record; `f` sees each in order.
pub fn for_each_line<T: DeserializeOwned>(path: &Path, mut f: impl FnMut(T)) -> Result<()> {
    each_line(path, |line| {
        f(serde_json::from_str(line)?);
        Ok(())
    })
}

/// [`for_each_line`] for lines whose record is a head (what names it: a device, a row) beside a
/// second's fields: each line is read once as the head and once as the second, each ignoring
/// the other's fields. Serde's `flatten` would buffer every value of every line first, which
/// made reading a step's seconds a fifth of the report's time at brief scale.
fn for_each_headed_line<H: DeserializeOwned, S: DeserializeOwned>(
    path: &Path,
    mut f: impl FnMut(H, S),
) -> Result<()> {
    each_line(path, |line| {
        f(serde_json::from_str(line)?, serde_json::from_str(line)?);
        Ok(())
    })
}

/// Each non-empty line of a gzip-compressed file, to `parse`; a line it cannot parse is an
/// error naming the file and the line.
fn each_line(path: &Path, mut parse: impl FnMut(&str) -> serde_json::Result<()>) -> Result<()> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let reader = BufReader::with_capacity(1 << 16, MultiGzDecoder::new(file));
    for (i, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("cannot read {}", path.display()))?;
        if line.is_empty() {
            continue;
        }
        parse(&line).with_context(|| {
            format!(
                "{} line {}: not a record iodig wrote; the file is damaged (restore it, or remove it to report the step without it)",
                path.display(),
                i + 1
            )
        })?;
    }
    Ok(())
}

/// What names a line of `trace-seconds.jsonl.gz`.
#[derive(Deserialize)]
struct DeviceHead {
    device: String,
}

/// What places a line of `trace-class-seconds.jsonl.gz`: its row, and what names the row
/// (read, so a line without them is refused as damaged, as [`ClassSecondLine`] would be).
#[derive(Deserialize)]
#[allow(dead_code)] // only `row` is used: the rest names a row `trace.json` already holds
struct RowHead {
    row: usize,
    device: String,
    op: String,
    class: String,
    pid: u32,
}

fn read_lines<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let mut all = Vec::new();
    for_each_line(path, |r| all.push(r))?;
    Ok(all)
}

/// Writes compact JSON atomically: a document that is not a series is small, but pretty
/// printing still doubled it.
fn write_compact<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    write_atomic_with(path, |out| {
        serde_json::to_writer(&mut *out, value).map_err(std::io::Error::other)?;
        out.write_all(b"\n")
    })
}

/// Writes the client's per-second samples (`timeseries.jsonl.gz`).
pub fn write_timeseries(dir: &Path, samples: &[Sample]) -> Result<()> {
    write_lines(&dir.join(TIMESERIES), samples.iter())
}

/// The name schema 2 gives an HDR interval log schema 1 named `v1_name`
/// ([`crate::files::HDR_LOG`], [`crate::files::HDR_START_LOG`]): the same text, gzip. Its
/// histograms are deflated already, but each is base64 text, which gzip takes back to bytes: a
/// third off a log that was over half of a traced step's bytes.
fn hlog_name(v1_name: &str) -> String {
    format!("{v1_name}.gz")
}

/// Writes an HDR interval log (`v1_name` is its schema-1 name, e.g. `latency.hlog`) gzip-
/// compressed as `<v1_name>.gz`; `zcat` gives the text HdrHistogram's tools read.
pub fn write_hlog(dir: &Path, v1_name: &str, log: &[u8]) -> Result<()> {
    write_atomic_with(&dir.join(hlog_name(v1_name)), |out| {
        let mut gz = GzEncoder::new(out, flate2::Compression::default());
        gz.write_all(log)?;
        gz.finish()?.flush()
    })
}

/// A step directory's HDR interval log `v1_name` (`latency.hlog`, `latency-start-shift.hlog`,
/// `latency-by-start.hlog`) of
/// either version, as text; none when it has neither file.
pub fn read_hlog(dir: &Path, v1_name: &str) -> Result<Option<Vec<u8>>> {
    let gz = dir.join(hlog_name(v1_name));
    if gz.is_file() {
        let file =
            std::fs::File::open(&gz).with_context(|| format!("cannot read {}", gz.display()))?;
        let mut log = Vec::new();
        std::io::Read::read_to_end(&mut MultiGzDecoder::new(file), &mut log)
            .with_context(|| format!("cannot read {}: not gzip, or cut short", gz.display()))?;
        return Ok(Some(log));
    }
    let plain = dir.join(v1_name);
    if plain.is_file() {
        return std::fs::read(&plain)
            .map(Some)
            .with_context(|| format!("cannot read {}", plain.display()));
    }
    Ok(None)
}

/// Writes a step's (or node's) database events (`db-events.jsonl.gz`).
pub fn write_events(dir: &Path, events: &[DbEvent]) -> Result<()> {
    write_lines(&dir.join(EVENTS), events.iter())
}

/// The database events of a step (or node) directory of either version; none when it has
/// neither file.
pub fn read_events(dir: &Path) -> Result<Option<Vec<DbEvent>>> {
    let v2 = dir.join(EVENTS);
    if v2.is_file() {
        return read_lines(&v2).map(Some);
    }
    let v1 = dir.join(crate::files::EVENTS);
    if v1.is_file() {
        return read_json(&v1).map(Some);
    }
    Ok(None)
}

/// The client's per-second samples of a step directory of either version; none when it has
/// neither file.
pub fn read_timeseries(dir: &Path) -> Result<Option<Vec<Sample>>> {
    let v2 = dir.join(TIMESERIES);
    if v2.is_file() {
        return read_lines(&v2).map(Some);
    }
    let v1 = dir.join(TIMESERIES_V1);
    if v1.is_file() {
        return read_json(&v1).map(Some);
    }
    Ok(None)
}

/// Writes a block-IO trace: its seconds and its attribution rows' seconds as series files,
/// then `trace.json.gz` without them, last, so a trace document present has its series whole.
pub fn write_trace(dir: &Path, trace: &TraceDoc) -> Result<()> {
    write_lines(
        &dir.join(TRACE_SECONDS),
        trace.devices.iter().flat_map(|d| {
            d.seconds.iter().map(|s| DeviceSecondLine {
                device: d.name.clone(),
                second: s,
            })
        }),
    )?;
    let rows = trace
        .self_check
        .attribution
        .as_ref()
        .map_or(&[][..], |a| &a.rows[..]);
    write_lines(
        &dir.join(TRACE_CLASS_SECONDS),
        rows.iter().enumerate().flat_map(|(i, r)| {
            r.seconds.iter().map(move |s| ClassSecondLine {
                row: i,
                device: r.device.clone(),
                op: r.op.clone(),
                class: r.class.clone(),
                pid: r.pid,
                second: s,
            })
        }),
    )?;
    // The document without its series; cloning the rest is small beside them.
    let mut doc = trace.clone();
    for d in &mut doc.devices {
        d.seconds = Vec::new();
    }
    if let Some(a) = doc.self_check.attribution.as_mut() {
        for r in &mut a.rows {
            r.seconds = Vec::new();
        }
    }
    write_gzip_json(&dir.join(TRACE), &doc)
}

/// A step directory's block-IO trace of either version, its series in place; none when it has
/// neither `trace.json.gz` nor `trace.json`.
pub fn read_trace(dir: &Path) -> Result<Option<TraceDoc>> {
    let (path, v1) = (dir.join(TRACE), dir.join(crate::files::TRACE));
    let mut doc: TraceDoc = if path.is_file() {
        read_gzip_json(&path)?
    } else if v1.is_file() {
        return read_json(&v1).map(Some);
    } else {
        return Ok(None);
    };
    let seconds = dir.join(TRACE_SECONDS);
    if seconds.is_file() {
        let mut by_device: std::collections::HashMap<String, usize> = doc
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| (d.name.clone(), i))
            .collect();
        let mut unknown = None;
        for_each_headed_line(
            &seconds,
            |l: DeviceHead, second: DeviceSecond| match by_device.get_mut(&l.device) {
                Some(&mut i) => doc.devices[i].seconds.push(second),
                None => {
                    unknown.get_or_insert(l.device);
                }
            },
        )?;
        if let Some(device) = unknown {
            anyhow::bail!(
                "{}: a second of device {device}, which {} does not list; the two files are from different steps (restore both from the same step)",
                seconds.display(),
                path.display()
            );
        }
    }
    let class_seconds = dir.join(TRACE_CLASS_SECONDS);
    if class_seconds.is_file() {
        let rows = doc
            .self_check
            .attribution
            .as_mut()
            .map_or(&mut [][..], |a| &mut a.rows[..]);
        let n = rows.len();
        let mut beyond = None;
        for_each_headed_line(&class_seconds, |l: RowHead, second: AttrSecond| match rows
            .get_mut(l.row)
        {
            Some(r) => r.seconds.push(second),
            None => {
                beyond.get_or_insert(l.row);
            }
        })?;
        if let Some(row) = beyond {
            anyhow::bail!(
                "{}: a second of attribution row {row}, but {} has {n} rows; the two files are from different steps (restore both from the same step)",
                class_seconds.display(),
                path.display()
            );
        }
    }
    Ok(Some(doc))
}

/// The note a system-samples document carries when its per-CPU samples are summarised.
fn per_cpu_note(cpus: usize) -> String {
    format!(
        "per-CPU samples summarised for {cpus} CPUs (more than {PER_CPU_KEPT}): each sample keeps cpu_spread (the busiest CPU, its iowait and softirq, the least busy, the median and the standard deviation of the CPUs' busy %) instead of per_cpu"
    )
}

/// Writes system samples: the samples as a series file (per-CPU samples summarised beyond
/// [`PER_CPU_KEPT`] CPUs), then `sys.json` without them, saying so when they were.
pub fn write_sys(dir: &Path, sys: &SysDoc) -> Result<()> {
    let widest = sys
        .samples
        .iter()
        .map(|s| s.per_cpu.len())
        .max()
        .unwrap_or(0);
    let summarise = widest > PER_CPU_KEPT;
    write_lines(
        &dir.join(SYS_SAMPLES),
        sys.samples.iter().map(|s| {
            if summarise && !s.per_cpu.is_empty() {
                std::borrow::Cow::Owned(SysSample {
                    cpu_spread: CpuSpread::of(&s.per_cpu),
                    per_cpu: Vec::new(),
                    ..s.clone()
                })
            } else {
                std::borrow::Cow::Borrowed(s)
            }
        }),
    )?;
    let doc = SysDoc {
        samples: Vec::new(),
        per_cpu_summarised: if summarise {
            Some(per_cpu_note(widest))
        } else {
            sys.per_cpu_summarised.clone()
        },
        ..sys.clone()
    };
    write_compact(&dir.join(crate::files::SYSSTAT), &doc)
}

/// A step directory's system samples of either version, samples in place; none when it has
/// no `sys.json`.
pub fn read_sys(dir: &Path) -> Result<Option<SysDoc>> {
    let path = dir.join(crate::files::SYSSTAT);
    if !path.is_file() {
        return Ok(None);
    }
    let mut doc: SysDoc = read_json(&path)?;
    let samples = dir.join(SYS_SAMPLES);
    if samples.is_file() {
        doc.samples = read_lines(&samples)?;
    }
    Ok(Some(doc))
}

/// The series files present in a step (or node) directory, to keep beside its documents.
pub fn present(dir: &Path) -> Vec<&'static str> {
    ALL.iter()
        .copied()
        .filter(|f| dir.join(f).is_file())
        .collect()
}

#[cfg(test)]
mod tests;
