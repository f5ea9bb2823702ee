//! The client's latency per coordinator node per second: which node answered the requests of
//! a slow second. Only bindings that know their coordinator (Cassandra's CQL driver) record
//! here; the per-op series of [`crate::WorkerRecorder`] stay the measurement of record.
//!
//! One lock per request: a CQL request costs the driver two orders of magnitude more than an
//! uncontended lock, so the per-worker sparse recording the main series need buys nothing here.

use crate::series::HIGHEST_US;
use iodig_model::OpKind;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};

/// Intervals kept open behind the newest one recorded: a worker descheduled between its
/// request's end and this record still lands in its own second.
const KEEP_OPEN: u32 = 3;

/// One node's answers to one op in one collector interval.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSecond {
    /// The collector's interval (as [`crate::WorkerRecorder::record`] numbers them).
    pub interval: u32,
    /// The coordinator's address, as the driver connected to it.
    pub node: IpAddr,
    /// The op's series (`READ`, …).
    pub op: OpKind,
    /// Requests it answered.
    pub count: u64,
    /// Their latency's median, µs.
    pub p50_us: u64,
    /// Their latency's 99th percentile, µs.
    pub p99_us: u64,
    /// The slowest of them, µs.
    pub max_us: u64,
}

#[derive(Default)]
struct Inner {
    /// Histograms of the open intervals, per node and op.
    open: BTreeMap<u32, BTreeMap<(IpAddr, OpKind), hdrhistogram::Histogram<u64>>>,
    closed: Vec<NodeSecond>,
    newest: u32,
}

/// Latency per (interval, coordinator node, op), closed to its figures once a few newer
/// intervals exist, so an hour-long step holds rows, not histograms.
#[derive(Default)]
pub struct NodeLatencies {
    inner: Mutex<Inner>,
}

impl NodeLatencies {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one request of `op` that `node` coordinated, ended in `interval`, taking
    /// `us` µs. A request of an interval already closed counts in the oldest open one: the
    /// one case where a node's request is counted a few seconds late.
    pub fn record(&self, interval: u32, node: IpAddr, op: OpKind, us: u32) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let floor = inner.newest.saturating_sub(KEEP_OPEN);
        let interval = interval.max(floor);
        if interval > inner.newest {
            inner.newest = interval;
            inner.close_before(interval.saturating_sub(KEEP_OPEN));
        }
        inner
            .open
            .entry(interval)
            .or_default()
            .entry((node, op))
            .or_insert_with(|| {
                // Two significant digits: a p99 within 1 %, a fifth of the main series' size.
                hdrhistogram::Histogram::new_with_bounds(1, HIGHEST_US, 2)
                    .expect("static histogram bounds are valid")
            })
            .saturating_record(u64::from(us).clamp(1, HIGHEST_US));
    }

    /// Every row recorded, in (interval, node, op) order; the recorder is empty afterwards.
    pub fn take(&self) -> Vec<NodeSecond> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.close_before(u32::MAX);
        inner.newest = 0;
        let mut rows = std::mem::take(&mut inner.closed);
        rows.sort_by_key(|r| (r.interval, r.node, r.op));
        rows
    }
}

impl Inner {
    fn close_before(&mut self, interval: u32) {
        let keep = self.open.split_off(&interval);
        let done = std::mem::replace(&mut self.open, keep);
        for (interval, nodes) in done {
            self.closed
                .extend(nodes.into_iter().map(|((node, op), h)| NodeSecond {
                    interval,
                    node,
                    op,
                    count: h.len(),
                    p50_us: h.value_at_quantile(0.5),
                    p99_us: h.value_at_quantile(0.99),
                    max_us: h.max(),
                }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn each_node_and_second_keeps_its_own_figures() {
        let n = NodeLatencies::new();
        for us in 1..=100 {
            n.record(1, ip(1), OpKind::Read, us * 10);
        }
        n.record(1, ip(2), OpKind::Read, 50_000);
        n.record(2, ip(1), OpKind::Update, 700);
        let rows = n.take();
        assert_eq!(rows.len(), 3, "{rows:?}");
        let a = &rows[0];
        assert_eq!(
            (a.interval, a.node, a.op, a.count),
            (1, ip(1), OpKind::Read, 100)
        );
        assert!((985..=1000).contains(&a.p99_us), "{a:?}");
        assert!((495..=505).contains(&a.p50_us), "{a:?}");
        assert_eq!(rows[1].node, ip(2));
        assert!(rows[1].max_us >= 49_500, "{:?}", rows[1]);
        assert_eq!((rows[2].interval, rows[2].op), (2, OpKind::Update));
        assert!(n.take().is_empty(), "taken once");
    }

    #[test]
    fn old_seconds_close_and_late_requests_count_in_the_oldest_open_one() {
        let n = NodeLatencies::new();
        n.record(1, ip(1), OpKind::Read, 100);
        n.record(10, ip(1), OpKind::Read, 100);
        {
            let inner = n.inner.lock().unwrap();
            assert_eq!(inner.closed.len(), 1, "interval 1 closed once 10 came");
            assert!(inner.open.keys().all(|k| *k >= 7));
        }
        // Late: interval 2 is before the open window (7..=10), so it counts in 7.
        n.record(2, ip(1), OpKind::Read, 100);
        let rows = n.take();
        let intervals: Vec<u32> = rows.iter().map(|r| r.interval).collect();
        assert_eq!(intervals, vec![1, 7, 10]);
        assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 3, "nothing lost");
    }
}
