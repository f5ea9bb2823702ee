//! The log by start as a shift of the log by end. A step writes `latency.hlog` (each operation
//! in the collector interval it ended in) and, beside it, only the operations that started in
//! one interval and ended in another (`latency-start-shift.hlog`); the log by start is the
//! first with those moved, interval by interval, and readers rebuild it here, exactly. Under
//! steady load about one operation per worker crosses each interval's end, so the second log
//! is a few KB a minute where a whole log by start was as large as the log by end.
//!
//! The shift log is an HdrHistogram interval log like the others (its tags say which way the
//! operations moved), so HdrHistogram's tools read it; its histograms are small, and each is
//! written with its deflate stream stored rather than compressed, so the file's own gzip sees
//! their repeated headers.

use crate::hlog::for_each_interval;
use crate::series::{new_histogram, Histogram, SeriesSet};
use anyhow::{anyhow, bail, Context, Result};
use flate2::write::ZlibEncoder;
use flate2::Compression;
use hdrhistogram::serialization::{Serializer, V2Serializer};
use hdrhistogram::Counter;
use iodig_model::files;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// Tag suffix of operations that ended in the line's interval but started in an earlier one.
pub const STARTED_EARLIER: &str = ".started-earlier";
/// Tag suffix of operations that started in the line's interval and ended in a later one.
pub const ENDED_LATER: &str = ".ended-later";

/// Operations that started in one collector interval and ended in another, as the collector
/// gathers them from the workers' recordings.
#[derive(Debug, Default)]
pub struct Carried {
    /// Of the interval being built: operations that ended in it and started in an earlier one.
    pub started_earlier: SeriesSet,
    /// By the interval they started in: operations that ended in a later one, kept until that
    /// interval is written out.
    pub ended_later: BTreeMap<u32, SeriesSet>,
}

/// HdrHistogram's V2 compressed encoding with the deflate stream stored, not compressed: any
/// HdrHistogram reader inflates it alike, and the log's own gzip compresses across lines.
#[derive(Default)]
pub struct StoredV2Serializer {
    v2: V2Serializer,
    raw: Vec<u8>,
    out: Vec<u8>,
}

/// HdrHistogram's cookie of a compressed V2 histogram (`V2CompressedEncodingCookieBase` with the
/// word size 8 in its low bits), private in the hdrhistogram crate.
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;

impl Serializer for StoredV2Serializer {
    type SerializeError = std::io::Error;

    fn serialize<T: Counter, W: Write>(
        &mut self,
        h: &hdrhistogram::Histogram<T>,
        writer: &mut W,
    ) -> std::io::Result<usize> {
        self.raw.clear();
        self.v2
            .serialize(h, &mut self.raw)
            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        self.out.clear();
        self.out
            .extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
        self.out.extend_from_slice(&[0; 4]);
        let mut z = ZlibEncoder::new(&mut self.out, Compression::none());
        z.write_all(&self.raw)?;
        z.finish()?;
        let len = u32::try_from(self.out.len() - 8).map_err(std::io::Error::other)?;
        self.out[4..8].copy_from_slice(&len.to_be_bytes());
        writer.write_all(&self.out)?;
        Ok(self.out.len())
    }
}

/// The series and direction of a shift log tag (`READ.ended-later`: `("READ", true)`).
fn split_tag(tag: &str) -> Option<(&str, bool)> {
    if let Some(series) = tag.strip_suffix(ENDED_LATER) {
        Some((series, true))
    } else {
        tag.strip_suffix(STARTED_EARLIER).map(|s| (s, false))
    }
}

/// One interval's moved operations of one series, as (value, count) pairs: a full HDR
/// histogram is 184 KB, these hold a handful of values each.
#[derive(Default)]
struct Moved {
    started_earlier: Vec<(u64, u64)>,
    ended_later: Vec<(u64, u64)>,
}

fn pairs(h: &Histogram) -> impl Iterator<Item = (u64, u64)> + '_ {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
}

/// Calls `f(start_unix_ms, end_unix_ms, series, histogram)` for every interval of the log by
/// start that `by_end` (`latency.hlog`) and `shift` (`latency-start-shift.hlog`) make, for the
/// series `want` accepts: each interval of the log by end, less the operations that started
/// earlier, plus those that started in it and ended later; then the intervals in which
/// operations started but none of the series ended.
pub fn for_each_start_interval(
    by_end: &[u8],
    shift: &[u8],
    want: impl Fn(&str) -> bool,
    mut f: impl FnMut(u64, u64, &str, &Histogram),
) -> Result<()> {
    let mut moved: BTreeMap<(u64, u64, String), Moved> = BTreeMap::new();
    for_each_interval(
        shift,
        |tag| split_tag(tag).is_some_and(|(series, _)| want(series)),
        |start, end, tag, h| {
            let Some((series, later)) = split_tag(tag) else {
                return;
            };
            let m = moved.entry((start, end, series.to_string())).or_default();
            // A late operation (one that ran past the collector's wait) adds a second line.
            let list = if later {
                &mut m.ended_later
            } else {
                &mut m.started_earlier
            };
            list.extend(pairs(h));
        },
    )
    .context("the shift log")?;
    let mut earlier = new_histogram();
    let mut failed = None;
    for_each_interval(by_end, &want, |start, end, tag, h| {
        let Some(m) = moved.remove(&(start, end, tag.to_string())) else {
            f(start, end, tag, h);
            return;
        };
        let mut h = h.clone();
        earlier.reset();
        for (v, n) in m.started_earlier {
            earlier.record_n(v, n).expect("the same layout");
        }
        if let Err(e) = h.subtract(&earlier) {
            failed.get_or_insert_with(|| {
                anyhow!("{tag} at {start} ms: more operations started earlier than ended ({e:?})")
            });
            return;
        }
        for (v, n) in m.ended_later {
            h.record_n(v, n).expect("the same layout");
        }
        f(start, end, tag, &h);
    })
    .context("the log by end")?;
    if let Some(e) = failed {
        return Err(e);
    }
    for ((start, end, series), m) in moved {
        if !m.started_earlier.is_empty() {
            bail!("{series} at {start} ms: operations that ended in an interval the log by end does not have");
        }
        let mut h = new_histogram();
        for (v, n) in m.ended_later {
            h.record_n(v, n).expect("the same layout");
        }
        f(start, end, &series, &h);
    }
    Ok(())
}

/// [`for_each_start_interval`] over a step directory: its whole log by start when it has one
/// (schema 1, earlier schema 2 writers, merged runs), else rebuilt from its log by end and its
/// shift log; `Ok(false)` when it has neither (runs of older versions).
pub fn for_each_start_interval_in(
    dir: &Path,
    want: impl Fn(&str) -> bool,
    f: impl FnMut(u64, u64, &str, &Histogram),
) -> Result<bool> {
    use iodig_model::series::read_hlog;
    if let Some(whole) = read_hlog(dir, files::HDR_START_LOG)? {
        for_each_interval(&whole, want, f).with_context(|| {
            format!(
                "{}: not an HDR interval log written by iodig",
                dir.join(files::HDR_START_LOG).display()
            )
        })?;
        return Ok(true);
    }
    let Some(shift) = read_hlog(dir, files::HDR_SHIFT_LOG)? else {
        return Ok(false);
    };
    let Some(by_end) = read_hlog(dir, files::HDR_LOG)? else {
        bail!(
            "{}: {} without {}, from which the log by start is rebuilt",
            dir.display(),
            iodig_model::series::HDR_SHIFT_LOG,
            iodig_model::series::HDR_LOG
        );
    };
    for_each_start_interval(&by_end, &shift, want, f).with_context(|| {
        format!(
            "{}: the log by start from {} and {}",
            dir.display(),
            iodig_model::series::HDR_LOG,
            iodig_model::series::HDR_SHIFT_LOG
        )
    })?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
    use hdrhistogram::serialization::V2DeflateSerializer;
    use std::time::{Duration, UNIX_EPOCH};

    const BASE_MS: u64 = 1_700_000_000_740;
    /// A step's intervals: a long first one, whole seconds, a short last one.
    const SPANS: [(u64, u64); 4] = [(0, 1260), (1260, 1000), (2260, 1000), (3260, 400)];

    /// An interval log of `lines` (interval, tag, values), written with `ser`.
    fn log<S: Serializer>(ser: &mut S, lines: &[(usize, String, Vec<u64>)]) -> Vec<u8> {
        let mut out = Vec::new();
        let base = UNIX_EPOCH + Duration::from_millis(BASE_MS);
        let mut w = IntervalLogWriterBuilder::new()
            .with_base_time(base)
            .with_start_time(base)
            .begin_log_with(&mut out, ser)
            .unwrap();
        for (i, tag, values) in lines {
            let mut h = new_histogram();
            for v in values {
                h.record(*v).unwrap();
            }
            let (start, len) = SPANS[*i];
            w.write_histogram(
                &h,
                Duration::from_millis(start),
                Duration::from_millis(len),
                Tag::new(tag),
            )
            .unwrap();
        }
        drop(w);
        out
    }

    /// Values by (interval start in unix ms, series).
    type ByInterval = BTreeMap<(u64, String), Vec<u64>>;

    /// Operations as (interval started, interval ended, series, latency µs): the logs by end
    /// and shift they make, and the log by start they must rebuild to.
    fn logs(ops: &[(usize, usize, &str, u64)]) -> (Vec<u8>, Vec<u8>, ByInterval) {
        let mut by_end = BTreeMap::<(usize, String), Vec<u64>>::new();
        let mut shift = Vec::new();
        let mut by_start = BTreeMap::<(u64, String), Vec<u64>>::new();
        for &(start, end, series, v) in ops {
            by_end.entry((end, series.to_string())).or_default().push(v);
            by_start
                .entry((BASE_MS + SPANS[start].0, series.to_string()))
                .or_default()
                .push(v);
            if start != end {
                shift.push((end, format!("{series}{STARTED_EARLIER}"), vec![v]));
                shift.push((start, format!("{series}{ENDED_LATER}"), vec![v]));
            }
        }
        let by_end: Vec<_> = by_end.into_iter().map(|((i, t), v)| (i, t, v)).collect();
        (
            log(&mut V2DeflateSerializer::new(), &by_end),
            log(&mut StoredV2Serializer::default(), &shift),
            by_start,
        )
    }

    fn rebuilt(by_end: &[u8], shift: &[u8]) -> Result<ByInterval> {
        let mut out = BTreeMap::<(u64, String), Vec<u64>>::new();
        for_each_start_interval(
            by_end,
            shift,
            |_| true,
            |start, _, tag, h| {
                for (v, n) in pairs(h) {
                    let values = out.entry((start, tag.to_string())).or_default();
                    values.extend(std::iter::repeat_n(v, n as usize));
                }
            },
        )?;
        Ok(out)
    }

    /// The same values, bucket by bucket (HDR keeps a bucket's highest equivalent value).
    fn bucketed(m: ByInterval) -> ByInterval {
        let h = new_histogram();
        m.into_iter()
            .map(|(k, mut v)| {
                v.iter_mut().for_each(|x| *x = h.highest_equivalent(*x));
                v.sort_unstable();
                (k, v)
            })
            .filter(|(_, v)| !v.is_empty())
            .collect()
    }

    #[test]
    fn the_log_by_start_is_rebuilt_exactly() {
        let ops = [
            (0, 0, "READ", 120),
            (0, 0, "READ", 95),
            (0, 1, "READ", 700_000),
            (1, 1, "READ", 88),
            (1, 2, "UPDATE", 1_300),
            (2, 2, "READ", 90),
            // UPDATE ended in no interval it started in: its log by end has no line there.
            (2, 3, "UPDATE", 2_000),
            (0, 3, "READ", 3_000_000),
            (3, 3, "CLEANUP", 5),
        ];
        let (by_end, shift, want) = logs(&ops);
        let got = rebuilt(&by_end, &shift).unwrap();
        assert_eq!(bucketed(got), bucketed(want));
        // The shift log is only the moved operations, and readable by any HDR reader.
        let mut moved = 0;
        for_each_interval(&shift, |_| true, |_, _, _, h| moved += h.len()).unwrap();
        assert_eq!(moved, 2 * 4);
    }

    #[test]
    fn a_late_line_of_an_interval_adds_to_it() {
        // The operation that ran past the collector's wait comes in a second line of its
        // start interval, written after the others.
        let (by_end, _, _) = logs(&[(0, 0, "READ", 10), (0, 3, "READ", 3_000_000)]);
        let shift = log(
            &mut StoredV2Serializer::default(),
            &[
                (3, format!("READ{STARTED_EARLIER}"), vec![3_000_000]),
                (0, format!("READ{ENDED_LATER}"), vec![]),
                (0, format!("READ{ENDED_LATER}"), vec![3_000_000]),
            ],
        );
        let got = bucketed(rebuilt(&by_end, &shift).unwrap());
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[&(BASE_MS, "READ".to_string())].len(), 2);
    }

    #[test]
    fn a_shift_that_does_not_fit_its_log_by_end_is_an_error() {
        let (by_end, _, _) = logs(&[(1, 1, "READ", 10)]);
        let shift = log(
            &mut StoredV2Serializer::default(),
            &[(1, format!("READ{STARTED_EARLIER}"), vec![10, 10])],
        );
        let e = rebuilt(&by_end, &shift).unwrap_err();
        assert!(
            format!("{e:#}").contains("more operations started earlier"),
            "{e:#}"
        );
        let shift = log(
            &mut StoredV2Serializer::default(),
            &[(2, format!("READ{STARTED_EARLIER}"), vec![10])],
        );
        let e = rebuilt(&by_end, &shift).unwrap_err();
        assert!(format!("{e:#}").contains("does not have"), "{e:#}");
    }
}
