//! HDR histograms per series (`READ`, `READ-FAILED`, `Intended-READ`, …) and return-code counts,
//! mergeable exactly and serialisable as HDR V2 deflate (base64) and interval logs.

use crate::log::{Entry, Variant};
use anyhow::{Context, Result};
use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use iodig_model::{OpKind, SeriesSummary};
use std::collections::BTreeMap;

/// The HDR histogram every series uses: counts of latencies in µs.
pub type Histogram = hdrhistogram::Histogram<u64>;

/// Highest latency tracked exactly: one hour in µs; longer ones are clamped to it.
pub const HIGHEST_US: u64 = 3_600_000_000;

/// Number of `Status` values counted per op.
pub(crate) const STATUSES: usize = 9;

/// An op and variant: one named series.
pub type SeriesId = (OpKind, Variant);

/// YCSB's name of a series.
pub fn series_name((op, variant): SeriesId) -> String {
    match variant {
        Variant::Ok => op.name().to_string(),
        Variant::Failed => format!("{}-FAILED", op.name()),
        Variant::Intended => format!("Intended-{}", op.name()),
        Variant::IntendedFailed => format!("Intended-{}-FAILED", op.name()),
    }
}

fn parse_series_name(name: &str) -> Option<SeriesId> {
    let (base, variant) = if let Some(b) = name.strip_prefix("Intended-") {
        match b.strip_suffix("-FAILED") {
            Some(b) => (b, Variant::IntendedFailed),
            None => (b, Variant::Intended),
        }
    } else if let Some(b) = name.strip_suffix("-FAILED") {
        (b, Variant::Failed)
    } else {
        (name, Variant::Ok)
    };
    OpKind::ALL
        .iter()
        .find(|op| op.name() == base)
        .map(|op| (*op, variant))
}

/// An empty histogram tracking 1 µs to [`HIGHEST_US`] at 3 significant digits.
pub fn new_histogram() -> Histogram {
    Histogram::new_with_bounds(1, HIGHEST_US, 3).expect("static histogram bounds are valid")
}

/// The figures of one histogram, in µs.
pub fn summarize(h: &Histogram) -> SeriesSummary {
    if h.is_empty() {
        return SeriesSummary::default();
    }
    SeriesSummary {
        count: h.len(),
        mean_us: h.mean(),
        min_us: h.min(),
        max_us: h.max(),
        p50_us: h.value_at_quantile(0.50),
        p90_us: h.value_at_quantile(0.90),
        p95_us: h.value_at_quantile(0.95),
        p99_us: h.value_at_quantile(0.99),
        p999_us: h.value_at_quantile(0.999),
        p9999_us: h.value_at_quantile(0.9999),
    }
}

/// How intended-start latency is reported (YCSB's `measurement.interval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalMode {
    /// Service time under the op's name.
    Op,
    /// Intended-start latency under the op's name.
    Intended,
    /// Service time under `<OP>` (`<OP>-FAILED`), intended under `Intended-<OP>`
    /// (`Intended-<OP>-FAILED`).
    Both,
}

impl IntervalMode {
    /// The latency an entry is recorded under in its op's main series: from the intended
    /// start under `Intended`, else the service time.
    pub fn latency_us(self, e: &Entry) -> u32 {
        if self == IntervalMode::Intended {
            e.intended_us
        } else {
            e.service_us
        }
    }
}

/// Histograms and return counts of a set of entries (one second, or a whole step).
#[derive(Debug, Clone, Default)]
pub struct SeriesSet {
    histograms: BTreeMap<SeriesId, Histogram>,
    returns: BTreeMap<OpKind, [u64; STATUSES]>,
}

impl SeriesSet {
    /// An empty set: no series, no return counts.
    pub fn new() -> Self {
        Self::default()
    }

    fn histogram(&mut self, id: SeriesId) -> &mut Histogram {
        self.histograms.entry(id).or_insert_with(new_histogram)
    }

    /// Adds `count` values of `value_us` to one series (a worker recording's bucket).
    pub(crate) fn record_n(&mut self, id: SeriesId, value_us: u64, count: u64) {
        self.histogram(id)
            .saturating_record_n(value_us.min(HIGHEST_US), count);
    }

    /// Adds one entry under YCSB's rules: failures go to `<OP>-FAILED`; the return code is
    /// counted under the op either way.
    pub fn record(&mut self, e: &Entry, mode: IntervalMode) {
        let main = if e.ok { Variant::Ok } else { Variant::Failed };
        let main_us = mode.latency_us(e);
        self.histogram((e.op, main))
            .saturating_record(u64::from(main_us).min(HIGHEST_US));
        if mode == IntervalMode::Both {
            let intended = if e.ok {
                Variant::Intended
            } else {
                Variant::IntendedFailed
            };
            self.histogram((e.op, intended))
                .saturating_record(u64::from(e.intended_us).min(HIGHEST_US));
        }
        if e.op != OpKind::Cleanup {
            self.returns.entry(e.op).or_default()[usize::from(e.status).min(STATUSES - 1)] += 1;
        }
    }

    /// Adds everything of `other` (exact: HDR counts add).
    pub fn merge(&mut self, other: &SeriesSet) {
        for (id, h) in &other.histograms {
            self.histogram(*id).add(h).expect("histograms share bounds");
        }
        for (op, counts) in &other.returns {
            let mine = self.returns.entry(*op).or_default();
            for (m, c) in mine.iter_mut().zip(counts) {
                *m += c;
            }
        }
    }

    /// Empties every histogram and drops the return counts, keeping the histograms' memory for
    /// the next second.
    pub fn clear(&mut self) {
        for h in self.histograms.values_mut() {
            h.reset();
        }
        self.returns.clear();
    }

    /// The series with at least one value, in series order.
    pub fn histograms(&self) -> impl Iterator<Item = (SeriesId, &Histogram)> {
        self.histograms
            .iter()
            .filter(|(_, h)| !h.is_empty())
            .map(|(id, h)| (*id, h))
    }

    /// One series' histogram; `None` when it has no values.
    pub fn get(&self, id: SeriesId) -> Option<&Histogram> {
        self.histograms.get(&id).filter(|h| !h.is_empty())
    }

    /// Summaries by series name.
    pub fn summaries(&self) -> BTreeMap<String, SeriesSummary> {
        self.histograms()
            .map(|(id, h)| (series_name(id), summarize(h)))
            .collect()
    }

    /// Return-code counts by op name, then status name (given the status names in order).
    pub fn returns(&self, status_names: &[&str]) -> BTreeMap<String, BTreeMap<String, u64>> {
        self.returns
            .iter()
            .map(|(op, counts)| {
                let by_status = counts
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(|(i, c)| {
                        (
                            status_names
                                .get(i)
                                .copied()
                                .unwrap_or("UNKNOWN")
                                .to_string(),
                            *c,
                        )
                    })
                    .collect();
                (op.name().to_string(), by_status)
            })
            .collect()
    }

    /// Sets return counts read back from a file (for merges of stored runs).
    pub fn add_returns(&mut self, op: OpKind, status_index: usize, count: u64) {
        self.returns.entry(op).or_default()[status_index.min(STATUSES - 1)] += count;
    }

    /// Histograms as base64 HDR V2-deflate strings by series name.
    pub fn to_encoded(&self) -> Result<BTreeMap<String, String>> {
        let mut ser = V2DeflateSerializer::new();
        self.histograms()
            .map(|(id, h)| {
                let mut buf = Vec::new();
                ser.serialize(h, &mut buf)
                    .map_err(|e| anyhow::anyhow!("cannot encode histogram: {e:?}"))?;
                Ok((
                    series_name(id),
                    base64::engine::general_purpose::STANDARD.encode(buf),
                ))
            })
            .collect()
    }

    /// Reads histograms written by [`SeriesSet::to_encoded`].
    pub fn from_encoded(encoded: &BTreeMap<String, String>) -> Result<Self> {
        let mut set = SeriesSet::new();
        let mut de = Deserializer::new();
        for (name, b64) in encoded {
            let id = parse_series_name(name).with_context(|| format!("unknown series {name:?}"))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .with_context(|| format!("series {name}: bad base64"))?;
            let h: Histogram = de
                .deserialize(&mut bytes.as_slice())
                .map_err(|e| anyhow::anyhow!("series {name}: bad HDR data: {e:?}"))?;
            set.histogram(id)
                .add(&h)
                .map_err(|e| anyhow::anyhow!("series {name}: {e:?}"))?;
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(op: OpKind, ok: bool, us: u32) -> Entry {
        Entry {
            op,
            status: if ok { 0 } else { 1 },
            ok,
            service_us: us,
            intended_us: us * 2,
            end_ms: 0,
        }
    }

    #[test]
    fn failures_and_intended_go_to_their_series() {
        let mut s = SeriesSet::new();
        s.record(&entry(OpKind::Read, true, 100), IntervalMode::Both);
        s.record(&entry(OpKind::Read, false, 50), IntervalMode::Both);
        let sums = s.summaries();
        assert_eq!(sums["READ"].count, 1);
        assert_eq!(sums["READ-FAILED"].count, 1);
        assert_eq!(sums["Intended-READ"].max_us, 200);
        assert_eq!(sums["Intended-READ"].count, 1);
        assert_eq!(sums["Intended-READ-FAILED"].max_us, 100);
        let r = s.returns(&["OK", "ERROR"]);
        assert_eq!(r["READ"]["OK"], 1);
        assert_eq!(r["READ"]["ERROR"], 1);
    }

    #[test]
    fn merge_is_exact_and_encoding_round_trips() {
        let mut a = SeriesSet::new();
        let mut b = SeriesSet::new();
        for i in 1..=1000 {
            a.record(&entry(OpKind::Update, true, i), IntervalMode::Op);
            b.record(&entry(OpKind::Update, true, i + 1000), IntervalMode::Op);
        }
        a.merge(&b);
        let h = a.get((OpKind::Update, Variant::Ok)).unwrap();
        assert_eq!(h.len(), 2000);
        assert!((h.value_at_quantile(0.5) as i64 - 1000).abs() <= 1);
        let back = SeriesSet::from_encoded(&a.to_encoded().unwrap()).unwrap();
        assert_eq!(back.summaries(), a.summaries());
    }

    #[test]
    fn series_names_parse_back() {
        for op in OpKind::ALL {
            for v in [
                Variant::Ok,
                Variant::Failed,
                Variant::Intended,
                Variant::IntendedFailed,
            ] {
                assert_eq!(parse_series_name(&series_name((op, v))), Some((op, v)));
            }
        }
    }
}
