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

/// Parses every `EVENT_LOG_v1 {…}` line, pairing starts and finishes by job id.
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
}
