//! Database events on the time line: memtable flushes and compactions of a Cassandra node, read
//! from its `debug.log` (or `system.log` when there is no debug log), with unix-millisecond
//! start and end times and the bytes written.
//!
//! The lines come from Cassandra 5.0's `ColumnFamilyStore` ("Enqueuing flush of ks.table"),
//! `Flushing$FlushRunnable` ("Completed flushing PATH (SIZE) for commitlog position …") and
//! `CompactionTask` ("Compacting (ID) [...]", "Compacted (ID) N sstables to [...] … X to Y …").
//! Timestamps are read as UTC, which is what the logback configuration iodig writes produces.

use std::collections::HashMap;
use std::path::Path;

use crate::Result;

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
        Err(e) => Err(crate::Error::Io { path, source: e }),
    }
}

/// Parses the flush and compaction lines of a Cassandra log.
pub fn parse_log(text: &str, node: &str) -> Vec<DbEvent> {
    let mut events: Vec<DbEvent> = Vec::new();
    // Flushes started but not completed, per keyspace.table, oldest first.
    let mut open_flush: HashMap<String, Vec<usize>> = HashMap::new();
    // Last completed flush per table, to add the bytes of further sstables of the same memtable.
    let mut last_flush: HashMap<String, usize> = HashMap::new();
    let mut open_compaction: HashMap<String, usize> = HashMap::new();

    for line in text.lines() {
        let Some((ts, msg)) = split_line(line) else {
            continue;
        };
        if let Some(rest) = msg.strip_prefix("Enqueuing flush of ") {
            let table = rest.split(',').next().unwrap_or(rest).trim().to_string();
            let reason = field(rest, "Reason: ").unwrap_or("?");
            let usage = field(rest, "Usage: ").unwrap_or("?");
            events.push(DbEvent {
                kind: "flush".into(),
                start_unix_ms: ts,
                end_unix_ms: None,
                bytes: None,
                node: node.into(),
                detail: format!("{table} reason={reason} memtable={usage}"),
            });
            open_flush.entry(table).or_default().push(events.len() - 1);
        } else if let Some(rest) = msg.strip_prefix("Completed flushing ") {
            let (path, size) = match rest.find(" (") {
                Some(i) => (
                    &rest[..i],
                    rest[i + 2..].split(')').next().and_then(parse_size),
                ),
                None => (rest, None),
            };
            let table = table_of_path(path).unwrap_or_else(|| "?".into());
            let idx = open_flush
                .get_mut(&table)
                .filter(|v| !v.is_empty())
                .map(|v| v.remove(0));
            match idx.or_else(|| last_flush.get(&table).copied()) {
                Some(i) => {
                    let e = &mut events[i];
                    e.end_unix_ms = Some(ts.max(e.end_unix_ms.unwrap_or(0)));
                    e.bytes = match (e.bytes, size) {
                        (Some(a), Some(b)) => Some(a + b),
                        (a, b) => a.or(b),
                    };
                    last_flush.insert(table, i);
                }
                None => {
                    // The start line is in a rotated log: the event is known only by its end.
                    events.push(DbEvent {
                        kind: "flush".into(),
                        start_unix_ms: ts,
                        end_unix_ms: Some(ts),
                        bytes: size,
                        node: node.into(),
                        detail: table.clone(),
                    });
                    last_flush.insert(table, events.len() - 1);
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
            events.push(DbEvent {
                kind: "compaction".into(),
                start_unix_ms: ts,
                end_unix_ms: None,
                bytes: None,
                node: node.into(),
                detail: format!("{table} id={id} inputs={inputs}"),
            });
            open_compaction.insert(id, events.len() - 1);
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
            match open_compaction.remove(&id) {
                Some(i) => {
                    let e = &mut events[i];
                    e.end_unix_ms = Some(ts);
                    e.bytes = written;
                    e.detail = format!("{} {summary}", e.detail);
                }
                None => events.push(DbEvent {
                    kind: "compaction".into(),
                    start_unix_ms: ts,
                    end_unix_ms: Some(ts),
                    bytes: written,
                    node: node.into(),
                    detail: format!("id={id} {summary}"),
                }),
            }
        }
    }
    events
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
