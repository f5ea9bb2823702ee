//! The run's one live sink: keeps what the `/metrics` endpoint and the terminal line show
//! (counters since the run began, histograms, last values, the busiest slot since the previous
//! scrape), tells events as timestamped lines, and states the findings that can already be
//! stated. Every method holds its lock for a copy or a few additions; readers take a snapshot.

use super::{LatencyBuckets, LiveEvent, LiveSink, LiveStep, PlaceName, LATENCY_BOUNDS_US};
use indicatif::ProgressBar;
use iodig_model::sys::SysSample;
use iodig_model::trace::LiveSecond;
use iodig_model::Sample;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A write burst is told when a busiest slot reaches this many times the step's mean so far.
pub const BURST_FACTOR: f64 = 20.0;
/// The step's mean is trusted for the burst rule after this many seconds of it.
const MEAN_AFTER_SECONDS: u64 = 3;
/// A queue depth leap: a second's peak in-flight IOs at least this many times the step's mean
/// peak so far, and at least [`QD_LEAP_MIN`].
const QD_LEAP_FACTOR: f64 = 8.0;
const QD_LEAP_MIN: u64 = 32;
/// Traced seconds kept per device for the busiest-since-a-scrape figures: a scraper that comes
/// back less often sees the peak of this many seconds.
const RECENT_SECONDS: usize = 900;
/// Scrapers remembered apart (address and User-Agent); more start the memory afresh.
const MAX_SCRAPERS: usize = 256;
/// A finding of one kind at one place is told at most once in this many ms: a long burst is one
/// line, not one a second.
const FINDING_QUIET_MS: u64 = 30_000;

/// A histogram in fixed buckets: counts per bucket (not cumulative, one more than the bounds
/// for `+Inf`), their sum in seconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Hist {
    pub counts: Vec<u64>,
    pub sum_seconds: f64,
}

impl Hist {
    fn add_counts(&mut self, counts: &[u64], sum_seconds: f64) {
        if self.counts.len() < counts.len() {
            self.counts.resize(counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(counts) {
            *a += b;
        }
        self.sum_seconds += sum_seconds;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// The client's figures of one step, by its labels.
#[derive(Debug, Clone, Default)]
pub(super) struct ClientState {
    pub step: LiveStep,
    /// Operations by (op, status) as YCSB's series count them.
    pub operations: BTreeMap<(String, String), u64>,
    /// Workload operations (what run.json's `operations` counts).
    pub workload_operations: u64,
    /// Service-time (or, with `measurement.interval=intended`, intended) latency by (op, status).
    pub latency: BTreeMap<(String, String), Hist>,
    /// Intended-start latency by (op, status) under `--target` (`Intended-<OP>` series).
    pub intended: BTreeMap<(String, String), Hist>,
    pub last_ops_per_sec: f64,
}

/// One device of a place, since the run began unless said.
#[derive(Debug, Clone, Default)]
pub(super) struct DeviceState {
    /// (IOs, bytes) by op.
    pub ops: BTreeMap<String, (u64, u64)>,
    /// Device latency (issue → completion) by op.
    pub latency: BTreeMap<String, Hist>,
    /// OS time (allocation → issue) p99 of the last second, ns, by op.
    pub os_p99_ns: BTreeMap<String, u64>,
    /// Peak in-flight IOs of the last second.
    pub qd_last: u64,
    /// Peak in-flight IOs since the scraper's previous scrape (set for each scrape).
    pub qd_peak_scrape: u64,
    /// Busiest slot's bytes/s since the scraper's previous scrape, by op (set for each scrape).
    pub slot_peak_scrape: BTreeMap<String, f64>,
    /// The last traced seconds' peaks, each with its arrival number, newest last; taken out of
    /// the copy a scrape renders.
    recent: VecDeque<RecentSecond>,
    /// (IOs, bytes) by (activity class, op).
    pub classes: BTreeMap<(String, String), (u64, u64)>,
}

/// One traced second's peaks of one device.
#[derive(Debug, Clone, Default)]
struct RecentSecond {
    /// The hub's count of traced seconds when this one arrived.
    seq: u64,
    qd_max: u64,
    /// Busiest slot's bytes/s by op.
    slot: BTreeMap<String, f64>,
}

impl DeviceState {
    /// The peaks of the seconds that arrived after `seen` (a scraper's previous scrape), or of
    /// the last second when none did.
    fn peaks_since(&mut self, seen: Option<u64>) {
        let newer: Vec<&RecentSecond> = (self.recent.iter())
            .filter(|r| seen.is_none_or(|s| r.seq > s))
            .collect();
        let take = if newer.is_empty() {
            self.recent.back().into_iter().collect()
        } else {
            newer
        };
        self.qd_peak_scrape = take.iter().map(|r| r.qd_max).max().unwrap_or(0);
        self.slot_peak_scrape.clear();
        for r in take {
            for (op, rate) in &r.slot {
                let peak = self.slot_peak_scrape.entry(op.clone()).or_default();
                *peak = peak.max(*rate);
            }
        }
    }
}

/// A place (the client host or a database node).
#[derive(Debug, Clone, Default)]
pub(super) struct PlaceState {
    pub devices: BTreeMap<String, DeviceState>,
    /// Activity classes with IO in the last second, by whether they are flushes or compactions.
    pub background_active: BTreeMap<String, bool>,
    pub sys: Option<SysSample>,
    /// This step: written bytes, seconds traced, the last second's write rates.
    pub step_write_bytes: u64,
    pub step_seconds: u64,
    pub last_write_bytes_per_s: f64,
    pub last_write_slot_bytes_per_s: f64,
    pub step_qd_peak: u64,
    step_qd_sum: u64,
    last_finding_ms: BTreeMap<&'static str, u64>,
}

impl PlaceState {
    fn step_write_mean(&self) -> Option<f64> {
        (self.step_seconds > 0).then(|| self.step_write_bytes as f64 / self.step_seconds as f64)
    }

    /// Says `kind` unless it was said within [`FINDING_QUIET_MS`].
    fn may_tell(&mut self, kind: &'static str, unix_ms: u64) -> bool {
        let last = self.last_finding_ms.get(kind).copied();
        if last.is_some_and(|l| unix_ms < l + FINDING_QUIET_MS) {
            return false;
        }
        self.last_finding_ms.insert(kind, unix_ms);
        true
    }
}

/// Everything the hub keeps, cloned whole for a scrape.
#[derive(Debug, Clone, Default)]
pub(super) struct HubState {
    /// The run directory's name.
    pub run: String,
    /// The step running now, if any.
    pub step: Option<LiveStep>,
    pub steps_started: u64,
    /// The client's figures per step, in the order steps ran.
    pub client: BTreeMap<String, ClientState>,
    pub places: BTreeMap<String, PlaceState>,
    /// Events by (place, kind).
    pub events: BTreeMap<(String, String), u64>,
    /// Traced seconds received, of every place: each is numbered by it.
    seconds_seen: u64,
    /// Each scraper's `seconds_seen` at its previous scrape, by address and User-Agent.
    scrapers: HashMap<String, u64>,
}

/// What the terminal line shows of one place.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaceLine {
    /// `client` or the node's address.
    pub place: String,
    /// Write MB/s of the last traced second.
    pub write_mb_s: f64,
    /// The step's mean write MB/s so far.
    pub write_mean_mb_s: f64,
    /// Peak in-flight IOs of the step so far.
    pub qd_peak: u64,
    /// Flush or compaction classes with IO in the last second.
    pub background: Vec<String>,
}

/// The run's live sink.
#[derive(Default)]
pub struct LiveHub {
    state: Mutex<HubState>,
    /// The progress bar on screen, if any: event lines print above it, not through it.
    bar: Mutex<Option<ProgressBar>>,
    /// Whether events are printed (off in unit tests of the hub).
    quiet_events: bool,
}

impl LiveHub {
    /// A hub for a run that has no name yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A hub that keeps events but prints none.
    pub fn silent() -> Self {
        Self {
            quiet_events: true,
            ..Self::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Names the run (its directory's name) for the `run` label.
    pub fn set_run(&self, run: &str) {
        self.lock().run = run.to_string();
    }

    /// The bar event lines must print above (`None` once it is gone).
    pub(crate) fn set_bar(&self, bar: Option<ProgressBar>) {
        *self.bar.lock().unwrap_or_else(PoisonError::into_inner) = bar;
    }

    /// A copy of everything for a scrape by `scraper` (its address and User-Agent): the
    /// busiest-slot figures are the peaks of the seconds that arrived since that scraper's
    /// previous scrape, so two scrapers (a Prometheus pair, a curl beside one) each see every
    /// peak.
    pub(super) fn scrape(&self, scraper: &str) -> HubState {
        let mut state = self.lock();
        let seen = state.scrapers.get(scraper).copied();
        let mut recents = Vec::new();
        for place in state.places.values_mut() {
            for d in place.devices.values_mut() {
                d.peaks_since(seen);
                recents.push(std::mem::take(&mut d.recent));
            }
        }
        let copy = state.clone();
        let mut recents = recents.into_iter();
        for place in state.places.values_mut() {
            for d in place.devices.values_mut() {
                d.recent = recents.next().unwrap_or_default();
            }
        }
        if state.scrapers.len() >= MAX_SCRAPERS && !state.scrapers.contains_key(scraper) {
            state.scrapers.clear();
        }
        let now = state.seconds_seen;
        state.scrapers.insert(scraper.to_string(), now);
        copy
    }

    /// A copy without touching the since-scrape figures (tests, the terminal).
    #[cfg(test)]
    pub(super) fn peek(&self) -> HubState {
        self.lock().clone()
    }

    /// Each place's part of the terminal line: the client host first, then the nodes.
    pub fn place_lines(&self) -> Vec<PlaceLine> {
        let state = self.lock();
        let mut lines: Vec<PlaceLine> = (state.places.iter())
            .filter(|(_, p)| p.step_seconds > 0)
            .map(|(name, p)| PlaceLine {
                place: name.clone(),
                write_mb_s: p.last_write_bytes_per_s / 1e6,
                write_mean_mb_s: p.step_write_mean().unwrap_or(0.0) / 1e6,
                qd_peak: p.step_qd_peak,
                background: (p.background_active.iter())
                    .filter(|(_, on)| **on)
                    .map(|(c, _)| c.clone())
                    .collect(),
            })
            .collect();
        lines.sort_by_key(|l| l.place != "client");
        lines
    }

    /// Event kinds counted but not printed: a busy database flushes and compacts every few
    /// seconds, which the bar shows as it happens; a line each would bury the rest.
    pub const COUNTED_ONLY: [&'static str; 3] = ["flush", "compaction", "file_deletion"];

    fn tell(&self, event: &LiveEvent) {
        if self.quiet_events || Self::COUNTED_ONLY.contains(&event.kind.as_str()) {
            return;
        }
        let line = format!("{} {}", clock(event.unix_ms), event.text);
        let bar = self.bar.lock().unwrap_or_else(PoisonError::into_inner);
        match bar.as_ref().filter(|b| !b.is_finished()) {
            Some(b) => b.println(line),
            None => iodig_model::eprintln_lossy!("{line}"),
        }
    }
}

/// `HH:MM:SS` UTC of a unix time in ms: what an event line starts with.
pub fn clock(unix_ms: u64) -> String {
    let s = unix_ms / 1000 % 86_400;
    format!("{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}

/// `READ-FAILED` → (`read`, `failed`); `Intended-READ` → (`read`, `ok`) with `true`.
pub(super) fn op_and_status(series: &str) -> (String, String, bool) {
    let (intended, rest) = match series.strip_prefix("Intended-") {
        Some(r) => (true, r),
        None => (false, series),
    };
    let (op, status) = match rest.strip_suffix("-FAILED") {
        Some(op) => (op, "failed"),
        None => (rest, "ok"),
    };
    (op.to_ascii_lowercase(), status.to_string(), intended)
}

/// Adds a device latency histogram (the tracer's ±12 % buckets, ns) into the live buckets: a
/// bucket counts under the first bound at or above its upper edge, so it is never reported
/// faster than it was; its sum uses the bucket's middle.
fn add_device_latency(hist: &mut Hist, buckets: &[iodig_model::trace::Bucket]) {
    let mut counts = vec![0u64; LATENCY_BOUNDS_US.len() + 1];
    let mut sum_ns = 0.0;
    for b in buckets {
        let slowest_ns = b.upper.saturating_sub(1);
        counts[LATENCY_BOUNDS_US.partition_point(|x| x * 1000 < slowest_ns)] += b.count;
        sum_ns += (b.lower as f64 + b.upper as f64) / 2.0 * b.count as f64;
    }
    hist.add_counts(&counts, sum_ns / 1e9);
}

impl LiveSink for LiveHub {
    fn step_started(&self, step: &LiveStep) {
        let mut state = self.lock();
        state.steps_started += 1;
        state.step = Some(step.clone());
        state
            .client
            .entry(step.step.clone())
            .or_default()
            .step
            .clone_from(step);
        for place in state.places.values_mut() {
            place.step_write_bytes = 0;
            place.step_seconds = 0;
            place.step_qd_peak = 0;
            place.step_qd_sum = 0;
            place.last_write_bytes_per_s = 0.0;
            place.last_write_slot_bytes_per_s = 0.0;
            place.background_active.clear();
        }
    }

    fn step_ended(&self, _step: &LiveStep) {
        self.lock().step = None;
    }

    fn wants_client_latency(&self) -> bool {
        true
    }

    fn client_latency(&self, latency: &[LatencyBuckets]) {
        let mut state = self.lock();
        let Some(name) = state.step.as_ref().map(|s| s.step.clone()) else {
            return;
        };
        let client = state.client.entry(name).or_default();
        for l in latency {
            if l.series == "CLEANUP" {
                continue;
            }
            let (op, status, intended) = op_and_status(&l.series);
            let map = if intended {
                &mut client.intended
            } else {
                &mut client.latency
            };
            map.entry((op, status))
                .or_default()
                .add_counts(&l.counts, l.sum_us / 1e6);
        }
    }

    fn client_second(&self, sample: &Sample) {
        let mut state = self.lock();
        let Some(name) = state.step.as_ref().map(|s| s.step.clone()) else {
            return;
        };
        let client = state.client.entry(name).or_default();
        client.workload_operations += sample.operations;
        client.last_ops_per_sec = sample.ops_per_sec;
        for (series, s) in &sample.series {
            let (op, status, intended) = op_and_status(series);
            if intended || series == "CLEANUP" {
                continue;
            }
            *client.operations.entry((op, status)).or_default() += s.count;
        }
    }

    fn io_second(&self, place: &PlaceName, second: &LiveSecond) {
        let mut findings = Vec::new();
        {
            let mut state = self.lock();
            state.seconds_seen += 1;
            let seq = state.seconds_seen;
            let p = state.places.entry(place.to_string()).or_default();
            let mean_before = (p.step_seconds >= MEAN_AFTER_SECONDS)
                .then(|| p.step_write_mean())
                .flatten();
            let qd_mean_before = (p.step_seconds >= MEAN_AFTER_SECONDS)
                .then(|| p.step_qd_sum as f64 / p.step_seconds as f64);
            let mut write_bytes = 0u64;
            let mut write_rate = 0.0;
            let mut slot_rate: f64 = 0.0;
            let mut qd_second = 0u64;
            p.background_active.clear();
            for dev in &second.devices {
                let d = p.devices.entry(dev.name.clone()).or_default();
                let covered = dev.second.covered_ms.max(1) as f64 / 1000.0;
                for (op, s) in &dev.second.ops {
                    let t = d.ops.entry(op.clone()).or_default();
                    t.0 += s.ios;
                    t.1 += s.bytes;
                    if !s.lat_hist.is_empty() {
                        add_device_latency(d.latency.entry(op.clone()).or_default(), &s.lat_hist);
                    }
                    if let Some(q) = s.queue_p99_ns {
                        d.os_p99_ns.insert(op.clone(), q);
                    }
                    if op == "write" {
                        write_bytes += s.bytes;
                        write_rate += s.bytes as f64 / covered;
                        slot_rate = slot_rate.max(s.mb_s_max * 1e6);
                    }
                }
                let qd = dev.second.qd_max.unwrap_or(0);
                d.qd_last = qd;
                if d.recent.len() >= RECENT_SECONDS {
                    d.recent.pop_front();
                }
                d.recent.push_back(RecentSecond {
                    seq,
                    qd_max: qd,
                    slot: (dev.second.ops.iter())
                        .map(|(op, s)| (op.clone(), s.mb_s_max * 1e6))
                        .collect(),
                });
                qd_second = qd_second.max(qd);
                for (class, by_op) in &dev.classes {
                    for (op, (ios, bytes)) in by_op {
                        let t = d.classes.entry((class.clone(), op.clone())).or_default();
                        t.0 += ios;
                        t.1 += bytes;
                        if *ios > 0 {
                            let background =
                                class.ends_with(".flush") || class.ends_with(".compaction");
                            p.background_active.insert(class.clone(), background);
                        }
                    }
                }
            }
            p.step_write_bytes += write_bytes;
            p.step_seconds += 1;
            p.last_write_bytes_per_s = write_rate;
            p.last_write_slot_bytes_per_s = slot_rate;
            p.step_qd_peak = p.step_qd_peak.max(qd_second);
            p.step_qd_sum += qd_second;
            if let Some(mean) = mean_before.filter(|m| *m > 0.0) {
                if slot_rate >= BURST_FACTOR * mean && p.may_tell("burst", second.unix_ms) {
                    findings.push(format!(
                        "{place}: write burst of {:.1} MB/s, {:.0}× the step's mean so far ({:.2} MB/s)",
                        slot_rate / 1e6,
                        slot_rate / mean,
                        mean / 1e6
                    ));
                }
            }
            if let Some(mean) = qd_mean_before {
                if qd_second >= QD_LEAP_MIN
                    && qd_second as f64 >= QD_LEAP_FACTOR * mean.max(1.0)
                    && p.may_tell("queue", second.unix_ms)
                {
                    findings.push(format!(
                        "{place}: queue depth leapt to {qd_second} in flight ({mean:.1} on average in the step so far)"
                    ));
                }
            }
        }
        for text in findings {
            self.event(&LiveEvent {
                unix_ms: second.unix_ms + 1000,
                place: place.to_string(),
                kind: "finding".into(),
                text: format!("finding: {text}"),
            });
        }
    }

    fn sys_sample(&self, place: &PlaceName, sample: &SysSample) {
        let mut state = self.lock();
        state.places.entry(place.to_string()).or_default().sys = Some(sample.clone());
    }

    fn event(&self, event: &LiveEvent) {
        *self
            .lock()
            .events
            .entry((event.place.clone(), event.kind.clone()))
            .or_default() += 1;
        self.tell(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodig_model::trace::{DeviceSecond, LiveDevice, OpSecond};

    fn second(unix_ms: u64, write_bytes: u64, slot_mb_s: f64, qd: u64) -> LiveSecond {
        let mut ops = BTreeMap::new();
        ops.insert(
            "write".to_string(),
            OpSecond {
                ios: write_bytes / 4096,
                bytes: write_bytes,
                mb_s: write_bytes as f64 / 1e6,
                mb_s_max: slot_mb_s,
                ..OpSecond::default()
            },
        );
        LiveSecond {
            unix_ms,
            so_far: None,
            devices: vec![LiveDevice {
                name: "sda".into(),
                second: DeviceSecond {
                    unix_ms,
                    covered_ms: 1000,
                    ops,
                    qd_max: Some(qd),
                    ..DeviceSecond::default()
                },
                classes: BTreeMap::new(),
            }],
        }
    }

    #[test]
    fn a_burst_twenty_times_the_mean_is_a_finding_once() {
        let hub = LiveHub::silent();
        hub.step_started(&LiveStep::default());
        for s in 0..5 {
            hub.io_second("client", &second(s * 1000, 1_000_000, 1.2, 2));
        }
        assert!(hub.peek().events.is_empty());
        hub.io_second("client", &second(5000, 3_000_000, 25.0, 2));
        hub.io_second("client", &second(6000, 3_000_000, 25.0, 2));
        let events = hub.peek().events;
        assert_eq!(events.get(&("client".into(), "finding".into())), Some(&1));
    }

    #[test]
    fn the_peak_queue_depth_is_kept_until_the_next_scrape() {
        let hub = LiveHub::silent();
        hub.step_started(&LiveStep::default());
        hub.io_second("client", &second(0, 4096, 1.0, 40));
        hub.io_second("client", &second(1000, 4096, 1.0, 3));
        let first = hub.scrape("prometheus");
        assert_eq!(first.places["client"].devices["sda"].qd_peak_scrape, 40);
        assert_eq!(first.places["client"].devices["sda"].qd_last, 3);
        // Another scraper's first scrape sees the peak too, and takes nothing from the first.
        let other = hub.scrape("curl");
        assert_eq!(other.places["client"].devices["sda"].qd_peak_scrape, 40);
        hub.io_second("client", &second(2000, 4096, 1.0, 17));
        hub.io_second("client", &second(3000, 4096, 1.0, 5));
        let since_first = hub.scrape("prometheus");
        assert_eq!(
            since_first.places["client"].devices["sda"].qd_peak_scrape,
            17
        );
        // Nothing new since: the last second's.
        let second_scrape = hub.scrape("prometheus");
        assert_eq!(
            second_scrape.places["client"].devices["sda"].qd_peak_scrape,
            5
        );
    }

    #[test]
    fn series_names_become_op_and_status() {
        assert_eq!(
            op_and_status("Intended-UPDATE-FAILED"),
            ("update".into(), "failed".into(), true)
        );
        assert_eq!(
            op_and_status("READ-MODIFY-WRITE"),
            ("read-modify-write".into(), "ok".into(), false)
        );
    }
}
