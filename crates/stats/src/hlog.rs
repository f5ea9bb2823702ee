//! Reading an HDR interval log (`latency.hlog`) back one histogram at a time, on the wall
//! clock, so a reader can regroup a step's per-second histograms (exact merges) without
//! holding thousands of them in memory.

use crate::series::Histogram;
use anyhow::{anyhow, Result};
use base64::Engine;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use std::time::Duration;

/// Calls `f(start_unix_ms, end_unix_ms, series, histogram)` for every interval of the log
/// whose series `want` accepts (the others are not decoded), in file order. Times are the
/// log's base time (or start time) plus the interval's start and length (ms, as the log keeps
/// them).
pub fn for_each_interval(
    bytes: &[u8],
    want: impl Fn(&str) -> bool,
    mut f: impl FnMut(u64, u64, &str, &Histogram),
) -> Result<()> {
    let mut base = Duration::ZERO;
    let mut de = Deserializer::new();
    for entry in IntervalLogIterator::new(bytes) {
        match entry.map_err(|e| anyhow!("bad interval log: {e:?}"))? {
            LogEntry::BaseTime(t) => base = t,
            LogEntry::StartTime(t) if base.is_zero() => base = t,
            LogEntry::StartTime(_) => {}
            LogEntry::Interval(i) => {
                let tag = i.tag().map_or("UNTAGGED", |t| t.as_str());
                if !want(tag) {
                    continue;
                }
                let start = base + i.start_timestamp();
                let end = start + i.duration();
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(i.encoded_histogram())
                    .map_err(|e| anyhow!("bad base64 in interval log: {e}"))?;
                let h: Histogram = de
                    .deserialize(&mut raw.as_slice())
                    .map_err(|e| anyhow!("bad histogram in interval log: {e:?}"))?;
                f(start.as_millis() as u64, end.as_millis() as u64, tag, &h);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::new_histogram;
    use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
    use hdrhistogram::serialization::V2DeflateSerializer;
    use std::time::UNIX_EPOCH;

    #[test]
    fn intervals_come_back_on_the_wall_clock() {
        let base = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        let mut log = Vec::new();
        let mut ser = V2DeflateSerializer::new();
        let mut h = new_histogram();
        h.record(1500).unwrap();
        h.record(20).unwrap();
        {
            let mut w = IntervalLogWriterBuilder::new()
                .with_start_time(base)
                .with_base_time(base)
                .begin_log_with(&mut log, &mut ser)
                .unwrap();
            let len = Duration::from_millis(750);
            w.write_histogram(&h, Duration::ZERO, len, Tag::new("READ"))
                .unwrap();
            w.write_histogram(&h, len, Duration::from_secs(1), Tag::new("UPDATE"))
                .unwrap();
        }
        let mut got = Vec::new();
        for_each_interval(
            &log,
            |_| true,
            |start, end, tag, h| {
                got.push((start, end, tag.to_string(), h.len(), h.max()));
            },
        )
        .unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].0, got[0].1), (1_700_000_000_250, 1_700_000_001_000));
        assert_eq!((got[1].0, got[1].1), (1_700_000_001_000, 1_700_000_002_000));
        assert_eq!((got[0].2.as_str(), got[0].3), ("READ", 2));
        assert!(got[1].4 >= 1500 && got[1].4 < 1510, "{:?}", got[1]);
        let mut reads = 0;
        for_each_interval(&log, |t| t == "READ", |_, _, _, _| reads += 1).unwrap();
        assert_eq!(reads, 1);
        assert!(for_each_interval(
            b"Tag=READ,0.0,1.0,1.0,!!notbase64\n",
            |_| true,
            |_, _, _, _| {}
        )
        .is_err());
    }
}
