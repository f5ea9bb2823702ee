//! RocksDB's own account of its background work: the `EVENT_LOG_v1` JSON lines of its `LOG`
//! (flush_started/finished, compaction_started/finished, table_file_creation/deletion) turned
//! into [`DbEvent`]s on the wall clock, so flushes can be drawn under the IO they cause.

use iodig_model::events::DbEvent;
use std::collections::HashMap;
use std::path::Path;

/// Events of the RocksDB database in `dir` that started at or after `since_unix_ms`.
pub fn events(dir: &Path, since_unix_ms: u64) -> std::io::Result<Vec<DbEvent>> {
    let text = match std::fs::read_to_string(dir.join("LOG")) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut all = parse_event_log(&text);
    all.retain(|e| e.start_unix_ms >= since_unix_ms);
    Ok(all)
}

/// The RocksDB version the database in `dir` runs, from the first lines of its `LOG`
/// (`… RocksDB version: 10.4.2`): what the linked library says of itself.
pub fn version(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("LOG")).ok()?;
    version_in(&text)
}

fn version_in(text: &str) -> Option<String> {
    text.lines()
        .take(50)
        .find_map(|l| l.split_once("RocksDB version: ").map(|(_, v)| v.trim()))
        .filter(|v| !v.is_empty())
        .map(|v| format!("RocksDB {v}"))
}

/// A LOG line's own timestamp (`2026/11/28-06:20:46.123456`, the host's local time) as µs
/// since the epoch as if it were UTC; the LOG's offset to true unix time is added later.
fn local_stamp_us(line: &str) -> Option<i64> {
    let stamp = line.get(..26)?;
    let num = |a: usize, b: usize| stamp.get(a..b)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (h, mi, s, us) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 26)?);
    let days =
        iodig_model::utc::days_from_civil(y, u32::try_from(mo).ok()?, u32::try_from(d).ok()?);
    Some(((days * 86_400 + h * 3600 + mi * 60 + s) * 1_000_000) + us)
}

/// RocksDB's write stalls (`Stalling writes because …`, `Stopping writes because …`: the
/// database slowing or stopping its own writers while flush or compaction catches up), as
/// instant events at the moment its write controller changed state. Their lines carry only
/// local time: the LOG's own `EVENT_LOG_v1` lines, which carry both, give the offset; a LOG
/// without one gives no stall.
fn stalls(text: &str) -> Vec<DbEvent> {
    let offset_us = text.lines().find_map(|l| {
        let json = l.split_once("EVENT_LOG_v1 ")?.1;
        let v: serde_json::Value = serde_json::from_str(json).ok()?;
        let unix = i64::try_from(v["time_micros"].as_u64()?).ok()?;
        Some(unix - local_stamp_us(l)?)
    });
    let Some(offset_us) = offset_us else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let at = l
                .find("Stalling writes because")
                .or_else(|| l.find("Stopping writes because"))?;
            let unix_us = local_stamp_us(l)? + offset_us;
            let ms = u64::try_from(unix_us / 1000).ok()?;
            // `[default] Stalling writes because …`: the column family in brackets before it.
            let cf = l[..at]
                .rsplit_once('[')
                .map(|(_, c)| c.trim_end().trim_end_matches(']'))
                .unwrap_or("");
            Some(DbEvent {
                kind: "stall".into(),
                start_unix_ms: ms,
                end_unix_ms: Some(ms),
                bytes: None,
                node: "local".into(),
                detail: format!("{cf}: {}", l[at..].trim()),
            })
        })
        .collect()
}

/// Parses every `EVENT_LOG_v1 {…}` line, pairing starts and finishes by job id, and the write
/// stalls RocksDB logged.
pub fn parse_event_log(text: &str) -> Vec<DbEvent> {
    let mut events: Vec<DbEvent> = Vec::new();
    // Open flush/compaction per job id, as an index into `events`.
    let mut open: HashMap<u64, usize> = HashMap::new();
    for line in text.lines() {
        let Some(json) = line.split_once("EVENT_LOG_v1 ").map(|(_, j)| j) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
            continue;
        };
        let ms = v["time_micros"].as_u64().unwrap_or(0) / 1000;
        let job = v["job"].as_u64().unwrap_or(u64::MAX);
        let cf = v["cf_name"].as_str().unwrap_or("");
        match v["event"].as_str().unwrap_or("") {
            kind @ ("flush_started" | "compaction_started") => {
                let (name, detail) = if kind == "flush_started" {
                    (
                        "flush",
                        format!(
                            "{cf} flush, reason: {}",
                            v["flush_reason"].as_str().unwrap_or("?")
                        ),
                    )
                } else {
                    (
                        "compaction",
                        format!(
                            "{cf} compaction, reason: {}, input {} bytes",
                            v["compaction_reason"].as_str().unwrap_or("?"),
                            v["input_data_size"].as_u64().unwrap_or(0)
                        ),
                    )
                };
                open.insert(job, events.len());
                events.push(DbEvent {
                    kind: name.into(),
                    start_unix_ms: ms,
                    end_unix_ms: None,
                    bytes: None,
                    node: "local".into(),
                    detail,
                });
            }
            "table_file_creation" => {
                if let Some(&i) = open.get(&job) {
                    let size = v["file_size"].as_u64().unwrap_or(0);
                    *events[i].bytes.get_or_insert(0) += size;
                }
            }
            "flush_finished" | "compaction_finished" => {
                if let Some(i) = open.remove(&job) {
                    events[i].end_unix_ms = Some(ms);
                    if let Some(total) = v["total_output_size"].as_u64() {
                        events[i].bytes = Some(total);
                    }
                }
            }
            "table_file_deletion" => events.push(DbEvent {
                kind: "file_deletion".into(),
                start_unix_ms: ms,
                end_unix_ms: Some(ms),
                bytes: None,
                node: "local".into(),
                detail: format!("file {}", v["file_number"].as_u64().unwrap_or(0)),
            }),
            _ => {}
        }
    }
    events.extend(stalls(text));
    events.sort_by_key(|e| e.start_unix_ms);
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_the_logs_own_line() {
        let log = "2026/11/23-18:41:08.887112 17137 RocksDB version: 10.4.2\n2026/11/23-18:41:08.887 17137 Compile date 2025\n";
        assert_eq!(version_in(log).as_deref(), Some("RocksDB 10.4.2"));
        assert_eq!(version_in("no version here\n"), None);
    }

    #[test]
    fn flush_and_compaction_are_paired_by_job() {
        let log = r#"2026/11/21-18:00:00.000000 1 EVENT_LOG_v1 {"time_micros": 1795000000000000, "job": 2, "event": "flush_started", "cf_name": "usertable", "flush_reason": "Write Buffer Full"}
2026/11/21-18:00:00.100000 1 EVENT_LOG_v1 {"time_micros": 1795000000100000, "cf_name": "usertable", "job": 2, "event": "table_file_creation", "file_number": 9, "file_size": 4096}
2026/11/21-18:00:00.200000 1 EVENT_LOG_v1 {"time_micros": 1795000000200000, "job": 2, "event": "flush_finished"}
2026/11/21-18:00:01.000000 1 EVENT_LOG_v1 {"time_micros": 1795000001000000, "job": 3, "event": "compaction_started", "compaction_reason": "LevelL0FilesNum", "input_data_size": 10}
2026/11/21-18:00:02.000000 1 EVENT_LOG_v1 {"time_micros": 1795000002000000, "job": 3, "event": "compaction_finished", "total_output_size": 8}
2026/11/21-18:00:02.500000 1 EVENT_LOG_v1 {"time_micros": 1795000002500000, "job": 3, "event": "table_file_deletion", "file_number": 9}
"#;
        let e = parse_event_log(log);
        assert_eq!(e.len(), 3);
        assert_eq!(
            (
                e[0].kind.as_str(),
                e[0].start_unix_ms,
                e[0].end_unix_ms,
                e[0].bytes
            ),
            (
                "flush",
                1_795_000_000_000,
                Some(1_795_000_000_200),
                Some(4096)
            )
        );
        assert_eq!(
            (e[1].kind.as_str(), e[1].bytes, e[1].end_unix_ms),
            ("compaction", Some(8), Some(1_795_000_002_000))
        );
        assert_eq!(e[2].kind, "file_deletion");
    }

    #[test]
    fn write_stalls_are_placed_by_the_logs_own_offset_to_unix_time() {
        // The LOG's clock is two hours ahead of UTC: its EVENT_LOG line says so.
        let log = r#"2026/11/21-20:00:00.000000 1 EVENT_LOG_v1 {"time_micros": 1795000000000000, "job": 2, "event": "flush_started", "cf_name": "usertable", "flush_reason": "Write Buffer Full"}
2026/11/21-20:00:01.250000 7f3 [WARN] [db/column_family.cc:1082] [usertable] Stalling writes because we have 4 immutable memtables (waiting for flush), max_write_buffer_number is set to 4 rate 16777216
2026/11/21-20:00:03.000000 7f3 [WARN] [db/column_family.cc:1061] [usertable] Stopping writes because we have 20 level-0 files
"#;
        let e = parse_event_log(log);
        let stalls: Vec<_> = e.iter().filter(|e| e.kind == "stall").collect();
        assert_eq!(stalls.len(), 2, "{e:?}");
        assert_eq!(stalls[0].start_unix_ms, 1_795_000_001_250);
        assert_eq!(stalls[1].start_unix_ms, 1_795_000_003_000);
        assert!(
            stalls[0]
                .detail
                .starts_with("usertable: Stalling writes because we have 4 immutable memtables"),
            "{}",
            stalls[0].detail
        );
        assert!(stalls[1].detail.contains("20 level-0 files"));
        // Without an EVENT_LOG line the offset is unknown: no stall is placed.
        assert!(stalls_in_log_without_offset(log));
    }

    fn stalls_in_log_without_offset(log: &str) -> bool {
        let rest: String = log.lines().skip(1).map(|l| format!("{l}\n")).collect();
        stalls(&rest).is_empty()
    }
}
