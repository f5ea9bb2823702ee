//! Database events on the time line: memtable flushes and compactions of a Cassandra node, read
//! from its `debug.log` (or `system.log` when there is no debug log), with unix-millisecond
//! start and end times and the bytes written.
//!
//! The lines come from Cassandra 5.0's `ColumnFamilyStore` ("Enqueuing flush of ks.table"),
//! `Flushing$FlushRunnable` ("Completed flushing PATH (SIZE) for commitlog position …") and
//! `CompactionTask` ("Compacting (ID) [...]", "Compacted (ID) N sstables to [...] … X to Y …"),
//! and the JVM's collections from `GCInspector` ("G1 Young Generation GC in 245ms.  …"): only
//! those over its log threshold (200 ms by default), the fallback where HotSpot's own pause
//! probes cannot be attached.
//! Timestamps are read as UTC, which is what the logback configuration iodig writes produces.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};

pub use iodig_model::events::DbEvent;

/// Events of one node from its log directory.
pub fn read_node_logs(log_dir: &Path, node: &str) -> Result<Vec<DbEvent>> {
    // debug.log holds every INFO line too; reading both would count each flush start twice.
    let debug = log_dir.join("debug.log");
    let path = if debug.is_file() {
        debug
    } else {
        log_dir.join("system.log")
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(parse_log(&text, node)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::Io { path, source: e }),
    }
}

/// A node's log followed as it grows: each [`LogFollower::poll`] reads only what was
/// appended since the last one (whole lines), so an hour-long step never reads its log from the
/// start again. A log that shrank was rotated: it is read again from its start, with the
/// flushes and compactions still open carried over.
#[derive(Debug)]
pub struct LogFollower {
    path: std::path::PathBuf,
    offset: u64,
    /// The end of a line still being written, kept until its newline comes.
    partial: Vec<u8>,
    parser: LogParser,
}

impl LogFollower {
    /// Follows the node's log in `log_dir` (its debug.log, else its system.log) from its
    /// current end: what is logged from now on.
    pub fn from_end(log_dir: &Path, node: &str) -> LogFollower {
        let debug = log_dir.join("debug.log");
        let path = if debug.is_file() {
            debug
        } else {
            log_dir.join("system.log")
        };
        let offset = std::fs::metadata(&path).map_or(0, |m| m.len());
        LogFollower {
            path,
            offset,
            partial: Vec::new(),
            parser: LogParser::new(node),
        }
    }

    /// The events that appeared or changed (completed) since the last poll, each with an
    /// index that stays the same for the same event.
    pub fn poll(&mut self) -> Result<Vec<(usize, DbEvent)>> {
        use std::io::{Read, Seek, SeekFrom};
        let io = |source| Error::Io {
            path: self.path.clone(),
            source,
        };
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(e)),
        };
        let len = file.metadata().map_err(io)?.len();
        if len < self.offset {
            self.offset = 0;
            self.partial.clear();
        }
        file.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        let mut added = Vec::new();
        file.take(len - self.offset)
            .read_to_end(&mut added)
            .map_err(io)?;
        self.offset += added.len() as u64;
        self.partial.extend_from_slice(&added);
        if let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') {
            let rest = self.partial.split_off(end + 1);
            let whole = std::mem::replace(&mut self.partial, rest);
            for line in String::from_utf8_lossy(&whole).lines() {
                self.parser.line(line);
            }
        }
        Ok(self.parser.take_changed())
    }
}

/// Parses the flush and compaction lines of a Cassandra log.
pub fn parse_log(text: &str, node: &str) -> Vec<DbEvent> {
    let mut p = LogParser::new(node);
    for line in text.lines() {
        p.line(line);
    }
    p.events
}

/// The parser of a node's log, a line at a time: a flush or compaction that starts in one
/// part of the log and ends in a later one is one event, wherever the log was cut.
#[derive(Debug, Default)]
pub struct LogParser {
    node: String,
    /// Every event seen, in the order their first line came.
    events: Vec<DbEvent>,
    /// Flushes started but not completed, per keyspace.table, oldest first.
    open_flush: HashMap<String, Vec<usize>>,
    /// Last completed flush per table, to add the bytes of further sstables of the same memtable.
    last_flush: HashMap<String, usize>,
    open_compaction: HashMap<String, usize>,
    /// Events added or completed since [`LogParser::take_changed`] last ran.
    changed: std::collections::BTreeSet<usize>,
}

impl LogParser {
    /// A parser of the log of `node` (the address its events name).
    pub fn new(node: &str) -> LogParser {
        LogParser {
            node: node.into(),
            ..Default::default()
        }
    }

    /// Events that appeared or changed since the last call, each with its index (stable for
    /// this parser: a later call may return the same index, completed).
    pub fn take_changed(&mut self) -> Vec<(usize, DbEvent)> {
        std::mem::take(&mut self.changed)
            .into_iter()
            .map(|i| (i, self.events[i].clone()))
            .collect()
    }

    fn push(&mut self, e: DbEvent) -> usize {
        self.events.push(e);
        self.changed.insert(self.events.len() - 1);
        self.events.len() - 1
    }

    /// Takes one line of the log.
    pub fn line(&mut self, line: &str) {
        let Some((ts, msg)) = split_line(line) else {
            return;
        };
        if let Some((collector, ms)) = line
            .contains("GCInspector")
            .then(|| gc_pause(msg))
            .flatten()
        {
            // Logged when the collection's notification is handled, just after it ended.
            self.push(DbEvent {
                kind: "gc".into(),
                start_unix_ms: ts.saturating_sub(ms),
                end_unix_ms: Some(ts),
                bytes: None,
                node: self.node.clone(),
                detail: format!("{collector} GC in {ms} ms (Cassandra's GCInspector)"),
            });
        } else if let Some(rest) = msg.strip_prefix("Enqueuing flush of ") {
            let table = rest.split(',').next().unwrap_or(rest).trim().to_string();
            let reason = field(rest, "Reason: ").unwrap_or("?");
            let usage = field(rest, "Usage: ").unwrap_or("?");
            let i = self.push(DbEvent {
                kind: "flush".into(),
                start_unix_ms: ts,
                end_unix_ms: None,
                bytes: None,
                node: self.node.clone(),
                detail: format!("{table} reason={reason} memtable={usage}"),
            });
            self.open_flush.entry(table).or_default().push(i);
        } else if let Some(rest) = msg.strip_prefix("Completed flushing ") {
            let (path, size) = match rest.find(" (") {
                Some(i) => (
                    &rest[..i],
                    rest[i + 2..].split(')').next().and_then(parse_size),
                ),
                None => (rest, None),
            };
            let table = table_of_path(path).unwrap_or_else(|| "?".into());
            let idx = self
                .open_flush
                .get_mut(&table)
                .filter(|v| !v.is_empty())
                .map(|v| v.remove(0));
            match idx.or_else(|| self.last_flush.get(&table).copied()) {
                Some(i) => {
                    self.changed.insert(i);
                    let e = &mut self.events[i];
                    e.end_unix_ms = Some(ts.max(e.end_unix_ms.unwrap_or(0)));
                    e.bytes = match (e.bytes, size) {
                        (Some(a), Some(b)) => Some(a + b),
                        (a, b) => a.or(b),
                    };
                    self.last_flush.insert(table, i);
                }
                None => {
                    // The start line is in a rotated log: the event is known only by its end.
                    let i = self.push(DbEvent {
                        kind: "flush".into(),
                        start_unix_ms: ts,
                        end_unix_ms: Some(ts),
                        bytes: size,
                        node: self.node.clone(),
                        detail: table.clone(),
                    });
                    self.last_flush.insert(table, i);
                }
            }
        } else if let Some(rest) = msg.strip_prefix("Compacting (") {
            let id = rest.split(')').next().unwrap_or("").to_string();
            let inputs = rest.matches("-Data.db").count();
            let table = rest
                .split(['[', ',', ' '])
                .find(|s| s.contains('/'))
                .and_then(table_of_path)
                .unwrap_or_else(|| "?".into());
            let i = self.push(DbEvent {
                kind: "compaction".into(),
                start_unix_ms: ts,
                end_unix_ms: None,
                bytes: None,
                node: self.node.clone(),
                detail: format!("{table} id={id} inputs={inputs}"),
            });
            self.open_compaction.insert(id, i);
        } else if let Some(rest) = msg.strip_prefix("Compacted (") {
            let id = rest.split(')').next().unwrap_or("").to_string();
            // "... to level=0.  1.234MiB to 1.100MiB (~89% of original) in 123ms. ..."
            let sizes = rest
                .split("to level=")
                .nth(1)
                .and_then(|s| s.split_once(".  "))
                .map(|(_, s)| s);
            let (read, written) = match sizes
                .and_then(|s| s.split(" (~").next())
                .and_then(|s| s.split_once(" to "))
            {
                Some((a, b)) => (parse_size(a), parse_size(b)),
                None => (None, None),
            };
            let summary = format!(
                "read={} written={}",
                read.map(|b| b.to_string()).unwrap_or("?".into()),
                written.map(|b| b.to_string()).unwrap_or("?".into())
            );
            match self.open_compaction.remove(&id) {
                Some(i) => {
                    self.changed.insert(i);
                    let e = &mut self.events[i];
                    e.end_unix_ms = Some(ts);
                    e.bytes = written;
                    e.detail = format!("{} {summary}", e.detail);
                }
                None => {
                    self.push(DbEvent {
                        kind: "compaction".into(),
                        start_unix_ms: ts,
                        end_unix_ms: Some(ts),
                        bytes: written,
                        node: self.node.clone(),
                        detail: format!("id={id} {summary}"),
                    });
                }
            }
        }
    }
}

/// A GCInspector message's collector and duration: `G1 Young Generation GC in 245ms.  …`.
fn gc_pause(msg: &str) -> Option<(&str, u64)> {
    let (collector, rest) = msg.split_once(" GC in ")?;
    let ms = rest.split_once("ms")?.0.trim().parse().ok()?;
    Some((collector.trim(), ms))
}

/// Splits `LEVEL [thread] 2025-01-02 03:04:05,678 File.java:12 - message` into unix ms and the
/// message.
fn split_line(line: &str) -> Option<(u64, &str)> {
    let close = line.find("] ")?;
    let after = &line[close + 2..];
    let ts = parse_timestamp(after.get(..23)?)?;
    let msg = &after[after.find(" - ")? + 3..];
    Some((ts, msg))
}

/// `2025-01-02 03:04:05,678` (UTC) → unix milliseconds.
fn parse_timestamp(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 23
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b' '
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    let days = days_from_civil(y, mo, d);
    let total = ((days * 24 + h) * 60 + mi) * 60 + sec;
    u64::try_from(total * 1000 + ms).ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The text after `key` up to the next comma.
fn field<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let i = s.find(key)?;
    Some(s[i + key.len()..].split(',').next()?.trim())
}

/// `…/data/<ks>/<table>-<32 hex>/nb-1-big-Data.db` → `ks.table`.
fn table_of_path(path: &str) -> Option<String> {
    let mut parts = path.rsplit('/');
    parts.next()?; // file name
    let table_dir = parts.next()?;
    let ks = parts.next()?;
    let table = match table_dir.rsplit_once('-') {
        Some((t, id)) if id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()) => t,
        _ => table_dir,
    };
    Some(format!("{ks}.{table}"))
}

/// `5.123MiB`, `1.5 KiB`, `812B`, `12 bytes` → bytes.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))?;
    let (num, unit) = s.split_at(split);
    let n: f64 = num.replace(',', "").parse().ok()?;
    let mult = match unit.trim() {
        "B" | "bytes" | "" => 1.0,
        "KiB" | "KB" => 1024.0,
        "MiB" | "MB" => 1024.0 * 1024.0,
        "GiB" | "GB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" | "TB" => 1024.0_f64.powi(4),
        _ => return None,
    };
    Some((n * mult).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
INFO  [NativeTransportRequests-1] 2025-03-04 05:06:07,100 ColumnFamilyStore.java:1045 - Enqueuing flush of ycsb.usertable, Reason: USER_FORCED, Usage: 12.345MiB (1%) on-heap, 0.000KiB (0%) off-heap
DEBUG [MemtableFlushWriter:1] 2025-03-04 05:06:07,900 Flushing.java:180 - Completed flushing /d/node1/data/ycsb/usertable-0123456789abcdef0123456789abcdef/nb-3-big-Data.db (5.000MiB) for commitlog position CommitLogPosition(segmentId=1, position=2)
DEBUG [CompactionExecutor:2] 2025-03-04 05:06:08,000 CompactionTask.java:167 - Compacting (aa-bb) [/d/node1/data/ycsb/usertable-0123456789abcdef0123456789abcdef/nb-1-big-Data.db:level=0, /d/node1/data/ycsb/usertable-0123456789abcdef0123456789abcdef/nb-2-big-Data.db:level=0, ]
DEBUG [CompactionExecutor:2] 2025-03-04 05:06:09,500 CompactionTask.java:258 - Compacted (aa-bb) 2 sstables to [/d/node1/data/ycsb/usertable-0123456789abcdef0123456789abcdef/nb-4-big,] to level=0.  10.000MiB to 8.000MiB (~80% of original) in 1,500ms.  Read Throughput = 6.667MiB/s
";

    #[test]
    fn a_collection_gcinspector_logged_is_a_gc_event_ending_at_its_line() {
        let line = "INFO  [GCInspector:1] 2025-03-04 05:06:07,100 GCInspector.java:301 - G1 Young Generation GC in 245ms.  G1 Eden Space: 1 -> 0; G1 Old Gen: 2 -> 3";
        let ev = parse_log(line, "127.0.0.2");
        assert_eq!(ev.len(), 1, "{ev:?}");
        let end = parse_timestamp("2025-03-04 05:06:07,100").unwrap();
        assert_eq!(ev[0].kind, "gc");
        assert_eq!(
            (ev[0].start_unix_ms, ev[0].end_unix_ms),
            (end - 245, Some(end))
        );
        assert_eq!(
            ev[0].detail,
            "G1 Young Generation GC in 245 ms (Cassandra's GCInspector)"
        );
        // The same words from another class are not a collection.
        assert!(parse_log(&line.replace("GCInspector", "Other"), "n").is_empty());
    }

    #[test]
    fn flush_and_compaction_are_paired_with_times_and_bytes() {
        let ev = parse_log(LOG, "127.0.0.1");
        assert_eq!(ev.len(), 2, "{ev:#?}");
        let base = parse_timestamp("2025-03-04 05:06:07,100").unwrap();
        assert_eq!(base, 1_741_064_767_100);
        assert_eq!(ev[0].kind, "flush");
        assert_eq!(ev[0].start_unix_ms, base);
        assert_eq!(ev[0].end_unix_ms, Some(base + 800));
        assert_eq!(ev[0].bytes, Some(5 * 1024 * 1024));
        assert!(
            ev[0]
                .detail
                .starts_with("ycsb.usertable reason=USER_FORCED"),
            "{}",
            ev[0].detail
        );
        assert_eq!(ev[1].kind, "compaction");
        assert_eq!(ev[1].end_unix_ms, Some(base + 2400));
        assert_eq!(ev[1].bytes, Some(8 * 1024 * 1024));
        assert!(
            ev[1].detail.contains("ycsb.usertable id=aa-bb inputs=2"),
            "{}",
            ev[1].detail
        );
        assert!(
            ev[1].detail.contains(&format!("read={}", 10 * 1024 * 1024)),
            "{}",
            ev[1].detail
        );
    }

    #[test]
    fn a_followed_log_gives_each_event_once_and_again_when_it_completes() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("debug.log");
        let lines: Vec<&str> = LOG.lines().collect();
        std::fs::write(
            &log,
            "INFO  [main] 2025-03-04 05:00:00,000 X.java:1 - before the step\n",
        )
        .unwrap();
        let mut f = LogFollower::from_end(dir.path(), "127.0.0.1");
        assert!(
            f.poll().unwrap().is_empty(),
            "what was there before is not read"
        );
        let append = |text: &str| {
            use std::io::Write;
            let mut w = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            w.write_all(text.as_bytes()).unwrap();
        };
        // The flush starts; the compaction's first line is still being written.
        append(&format!("{}\n{}", lines[0], &lines[2][..40]));
        let first = f.poll().unwrap();
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(first[0].1.kind, "flush");
        assert_eq!(first[0].1.end_unix_ms, None, "not complete yet");
        assert!(f.poll().unwrap().is_empty(), "nothing new");
        append(&format!(
            "{}\n{}\n{}\n",
            &lines[2][40..],
            lines[1],
            lines[3]
        ));
        let second = f.poll().unwrap();
        assert_eq!(second.len(), 2, "{second:?}");
        assert_eq!(second[0].0, first[0].0, "the same flush, now complete");
        assert_eq!(second[0].1.bytes, Some(5 * 1024 * 1024));
        assert_eq!(second[1].1.kind, "compaction");
        assert_eq!(
            second[1].1.bytes,
            Some(8 * 1024 * 1024),
            "paired across polls"
        );
        // Rotated: the log starts again, shorter; its new lines are read from its start.
        std::fs::write(&log, format!("{}\n", lines[0])).unwrap();
        let third = f.poll().unwrap();
        assert_eq!(third.len(), 1, "{third:?}");
        assert!(third[0].0 > second[1].0, "a new event");
    }

    #[test]
    fn sizes_and_paths() {
        assert_eq!(parse_size("812B"), Some(812));
        assert_eq!(parse_size("1.5 KiB"), Some(1536));
        assert_eq!(
            table_of_path("/x/data/system/local-7ad54392bcdd35a684174e047860b377/nb-1-big-Data.db")
                .as_deref(),
            Some("system.local")
        );
    }
}
