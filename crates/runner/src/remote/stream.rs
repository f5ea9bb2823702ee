//! iodig's side of the agents' stream: the chunks a host's agent sends during a step
//! ([`Reply::Chunk`](super::protocol::Reply::Chunk)) are kept per host for the step as they
//! arrive and handed to the run's live sink; when the host's link dies mid-step, its part of
//! the step is built from what arrived, marked partial from the first second that did not.

use super::protocol::StreamChunk;
use crate::live::{LiveEvent, LiveSink, NoLive};
use iodig_model::cluster::NodeObservation;
use iodig_model::events::DbEvent;
use iodig_model::sys::{SysDoc, SysSample};
use iodig_model::trace::{
    AttrCheck, AttrRow, AttrSecond, Attribution, DeviceTrace, LiveSecond, OpTrace, SoFar, TraceDoc,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// What one host streamed during the current step, on the host's clock, and where it is
/// published. Shared between the thread reading the host's replies and the step's driver.
pub(crate) struct HostStream {
    /// The place the host's figures are published under: its node's address as run.json
    /// names it, else the host as given to `--observe`.
    place: String,
    sink: Arc<dyn LiveSink>,
    /// Milliseconds subtracted from the host's timestamps before they are published (the
    /// offset measured before the step; the files get the step's mean of both).
    live_offset_ms: i64,
    /// Between `start` and `stop`: chunks outside a step are not the step's.
    streaming: bool,
    step: StepChunks,
    /// When this machine saw the link close (unix ms), once it did.
    closed_unix_ms: Option<u64>,
}

/// A step's chunks so far.
#[derive(Default)]
struct StepChunks {
    chunks: u64,
    /// The last chunk's arrival on this machine's clock (unix ms).
    last_arrival_unix_ms: Option<u64>,
    seconds: BTreeMap<u64, LiveSecond>,
    /// The newest of the whole step's histograms so far that came with a second.
    so_far: Option<SoFar>,
    sys_header: Option<SysDoc>,
    samples: Vec<SysSample>,
    /// By the agent's id: a completed event replaces its start.
    events: BTreeMap<u64, DbEvent>,
    /// Chunk numbers that never came (a gap in `seq`).
    missing_chunks: u64,
    next_seq: u64,
}

/// Shared handle on a host's stream.
pub(crate) type SharedStream = Arc<Mutex<HostStream>>;

impl HostStream {
    pub(crate) fn shared(place: String) -> SharedStream {
        Arc::new(Mutex::new(HostStream {
            place,
            sink: Arc::new(NoLive),
            live_offset_ms: 0,
            streaming: false,
            step: StepChunks::default(),
            closed_unix_ms: None,
        }))
    }

    /// Locks a shared stream; a panic elsewhere while it was held leaves it usable.
    pub(crate) fn lock(s: &SharedStream) -> std::sync::MutexGuard<'_, HostStream> {
        s.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes under `place` from now on (the node's address, once the agent found it).
    pub(crate) fn set_place(&mut self, place: String) {
        self.place = place;
    }

    pub(crate) fn watch(&mut self, sink: Arc<dyn LiveSink>) {
        self.sink = sink;
    }

    /// A step's measurement starts: what the host streams from now on is this step's.
    pub(crate) fn start_step(&mut self, live_offset_ms: i64) {
        self.step = StepChunks::default();
        self.live_offset_ms = live_offset_ms;
        self.streaming = true;
    }

    /// The step stopped: later chunks (none are sent) would not be its.
    pub(crate) fn end_step(&mut self) {
        self.streaming = false;
    }

    /// The reader saw the host's output end; true when that was mid-step.
    pub(crate) fn closed(&mut self, unix_ms: u64) -> bool {
        self.closed_unix_ms.get_or_insert(unix_ms);
        self.streaming
    }

    /// When this machine saw the link close, if it did.
    pub(crate) fn closed_at(&self) -> Option<u64> {
        self.closed_unix_ms
    }

    /// Chunks that arrived this step.
    pub(crate) fn chunks(&self) -> u64 {
        self.step.chunks
    }

    /// The last chunk's arrival on this machine's clock.
    pub(crate) fn last_arrival(&self) -> Option<u64> {
        self.step.last_arrival_unix_ms
    }

    /// Keeps a chunk that arrived at `now_unix_ms` and publishes it.
    pub(crate) fn take(&mut self, chunk: StreamChunk, now_unix_ms: u64) {
        if !self.streaming {
            return;
        }
        let s = &mut self.step;
        s.chunks += 1;
        s.last_arrival_unix_ms = Some(now_unix_ms);
        s.missing_chunks += chunk.seq.saturating_sub(s.next_seq);
        s.next_seq = chunk.seq + 1;
        let shift = |t: u64| t.saturating_add_signed(-self.live_offset_ms);
        for mut second in chunk.seconds {
            if let Some(f) = second.so_far.take() {
                if s.so_far
                    .as_ref()
                    .is_none_or(|had| had.through_unix_ms <= f.through_unix_ms)
                {
                    s.so_far = Some(f);
                }
            }
            let mut live = second.clone();
            live.unix_ms = shift(live.unix_ms);
            for d in &mut live.devices {
                d.second.unix_ms = shift(d.second.unix_ms);
            }
            self.sink.io_second(&self.place, &live);
            s.seconds.insert(second.unix_ms, second);
        }
        if let Some(h) = chunk.sys_header {
            s.sys_header = Some(*h);
        }
        for sample in chunk.samples {
            let mut live = sample.clone();
            live.unix_ms = shift(live.unix_ms);
            self.sink.sys_sample(&self.place, &live);
            s.samples.push(sample);
        }
        for e in chunk.events {
            // Told once, as it is first seen: a live count of flushes must not count the
            // completion of one already told as another.
            let first_seen = s.events.insert(e.id, e.event.clone()).is_none();
            if first_seen {
                self.sink.event(&LiveEvent {
                    unix_ms: shift(e.event.end_unix_ms.unwrap_or(e.event.start_unix_ms)),
                    place: self.place.clone(),
                    text: event_text(&e.event),
                    kind: e.event.kind,
                });
            }
        }
    }

    /// The host's part of the step from what it streamed, on the host's clock; None when
    /// nothing arrived. `mode` and `slot_ms` are the trace's as the host started it; `lost` says
    /// when and why the link went, for the files' notes.
    pub(crate) fn partial_observation(
        &self,
        mode: Option<&str>,
        slot_ms: u32,
        lost: &str,
    ) -> Option<NodeObservation> {
        let s = &self.step;
        if s.chunks == 0 {
            return None;
        }
        let said = format!(
            "streamed during the step before the link was lost ({lost}): {} chunk{}{}",
            s.chunks,
            if s.chunks == 1 { "" } else { "s" },
            if s.missing_chunks > 0 {
                format!(", {} more sent and never received", s.missing_chunks)
            } else {
                String::new()
            }
        );
        let trace = (!s.seconds.is_empty()).then(|| {
            let mut t = trace_of(s.seconds.values(), mode.unwrap_or("ebpf"), slot_ms);
            let histograms = match &s.so_far {
                Some(so_far) => with_histograms(&mut t, so_far),
                None => "no size or latency histograms (none had come)".to_string(),
            };
            t.note = Some(format!(
                "{said}; per-second series and their sums, IO by activity class where the kernel attributes it, {histograms} (no cgroup or process)"
            ));
            t
        });
        let sys = s.sys_header.clone().map(|mut doc| {
            doc.samples.clone_from(&s.samples);
            doc.ended_unix_ms = s.samples.last().map_or(doc.started_unix_ms, |x| x.unix_ms);
            doc.notes.push(said.clone());
            doc
        });
        let mut events: Vec<DbEvent> = s.events.values().cloned().collect();
        events.sort_by_key(|e| e.start_unix_ms);
        Some(NodeObservation {
            trace,
            sys,
            events,
            ..Default::default()
        })
    }

    /// The first second the streamed part lacks (unix ms, host's clock): after the last whole
    /// traced second, else after the last system sample; None when nothing of either came.
    pub(crate) fn partial_from(&self) -> Option<u64> {
        let s = &self.step;
        let after_seconds = s.seconds.keys().next_back().map(|t| t + 1000);
        let after_samples = s.samples.last().map(|x| x.unix_ms);
        after_seconds.or(after_samples)
    }
}

/// Puts the histograms that streamed into the part's per-op figures (its IOs and bytes stay the
/// streamed seconds' sums, so the series and the totals agree); says what they cover.
fn with_histograms(t: &mut TraceDoc, so_far: &SoFar) -> String {
    let (mut in_histograms, mut in_seconds) = (0u64, 0u64);
    for dev in &mut t.devices {
        in_seconds += dev.ops.values().map(|o| o.ios).sum::<u64>();
        let Some(had) = so_far.devices.iter().find(|d| d.name == dev.name) else {
            continue;
        };
        for (op, h) in &had.ops {
            in_histograms += h.ios;
            let o = dev.ops.entry(op.clone()).or_default();
            o.size_hist.clone_from(&h.size_hist);
            o.size_bytes_hist.clone_from(&h.size_bytes_hist);
            o.latency.clone_from(&h.latency);
        }
    }
    t.histograms = true;
    let after = i128::from(so_far.through_unix_ms) - i128::from(t.end_unix_ms);
    let when = if after >= 0 {
        format!("{after} ms after the last streamed second ended")
    } else {
        format!("{} ms before the last streamed second ended", -after)
    };
    format!(
        "size and latency histograms as the tracer had counted them {when}: {in_histograms} IOs, where the streamed seconds hold {in_seconds} (their queue time: the seconds sent with them)"
    )
}

/// An event as a line for the live view.
fn event_text(e: &DbEvent) -> String {
    match (e.end_unix_ms, e.bytes) {
        (Some(end), Some(b)) => format!(
            "{} {} done in {} ms, {:.1} MB",
            e.kind,
            e.detail,
            end.saturating_sub(e.start_unix_ms),
            b as f64 / 1e6
        ),
        (Some(end), None) => format!(
            "{} {} done in {} ms",
            e.kind,
            e.detail,
            end.saturating_sub(e.start_unix_ms)
        ),
        (None, _) => format!("{} {} started", e.kind, e.detail),
    }
}

/// A trace document of the seconds that arrived: each device's series as the tracer completed
/// it, its per-op totals as their sums, and, where the seconds carry IO by activity class,
/// the attribution by class those classes sum to.
pub(crate) fn trace_of<'a>(
    seconds: impl Iterator<Item = &'a LiveSecond>,
    mode: &str,
    slot_ms: u32,
) -> TraceDoc {
    let mut devices: BTreeMap<String, DeviceTrace> = BTreeMap::new();
    let mut by_class = ClassSeconds::new();
    let (mut start, mut end) = (u64::MAX, 0);
    for second in seconds {
        for d in &second.devices {
            for (class, ops) in &d.classes {
                for (op, &(ios, bytes)) in ops {
                    let row = by_class
                        .entry((d.name.clone(), op.clone(), class.clone()))
                        .or_default();
                    row.push(AttrSecond {
                        unix_ms: d.second.unix_ms,
                        ios,
                        bytes,
                        ..Default::default()
                    });
                }
            }
            let dev = devices
                .entry(d.name.clone())
                .or_insert_with(|| DeviceTrace {
                    name: d.name.clone(),
                    ops: ["read", "write", "discard", "flush"]
                        .into_iter()
                        .map(|op| (op.to_string(), OpTrace::default()))
                        .collect(),
                    ..Default::default()
                });
            for (op, o) in &d.second.ops {
                let total = dev.ops.entry(op.clone()).or_default();
                total.ios += o.ios;
                total.bytes += o.bytes;
            }
            start = start.min(d.second.unix_ms + (1000 - d.second.covered_ms.min(1000)));
            end = end.max(d.second.unix_ms + d.second.covered_ms.min(1000));
            dev.seconds.push(d.second.clone());
        }
    }
    let devices: Vec<DeviceTrace> = devices.into_values().collect();
    let mut doc = TraceDoc {
        mode: mode.to_string(),
        start_unix_ms: if start == u64::MAX { 0 } else { start },
        end_unix_ms: end,
        slot_ms,
        histograms: false,
        ..Default::default()
    };
    if !by_class.is_empty() {
        let attribution = attribution_by_class(by_class, &devices);
        doc.self_check.attribution_match = Some(attribution.sums_match());
        doc.self_check.attribution = Some(attribution);
    }
    doc.devices = devices;
    doc
}

/// Each (device, op, class)'s seconds as they streamed.
type ClassSeconds = BTreeMap<(String, String, String), Vec<AttrSecond>>;

/// The attribution of a streamed part: a row per device, op and class with its seconds (the
/// agent streams IO by class each second; cgroups, processes, sizes and latencies come only
/// with the whole step), checked against the devices' totals as the tracer checks its own.
fn attribution_by_class(by_class: ClassSeconds, devices: &[DeviceTrace]) -> Attribution {
    let rows: Vec<AttrRow> = by_class
        .into_iter()
        .map(|((device, op, class), seconds)| AttrRow {
            ios: seconds.iter().map(|s| s.ios).sum(),
            bytes: seconds.iter().map(|s| s.bytes).sum(),
            device,
            op,
            class,
            seconds,
            ..Default::default()
        })
        .collect();
    let check = devices
        .iter()
        .flat_map(|d| d.ops.iter().map(move |(op, t)| (d, op, t)))
        .filter(|(d, op, t)| t.ios > 0 || rows.iter().any(|r| r.device == d.name && &r.op == *op))
        .map(|(d, op, t)| {
            let of_it = rows.iter().filter(|r| r.device == d.name && &r.op == op);
            AttrCheck {
                device: d.name.clone(),
                op: op.clone(),
                device_ios: t.ios,
                class_ios: of_it.clone().map(|r| r.ios).sum(),
                device_bytes: t.bytes,
                class_bytes: of_it.map(|r| r.bytes).sum(),
            }
        })
        .collect();
    Attribution {
        enabled: true,
        notes: vec![
            "streamed by the agent second by second before its link was lost: IO by activity class only (no cgroup or process, and no sizes or latencies by class)".into(),
        ],
        classes: iodig_iotrace::attr::class_infos(),
        background_classes: (iodig_iotrace::attr::BACKGROUND.iter())
            .map(ToString::to_string)
            .collect(),
        rows,
        check,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::protocol::StreamedEvent;
    use iodig_model::trace::{DeviceSecond, LiveDevice, OpSecond};

    fn second(unix_ms: u64, write_ios: u64) -> LiveSecond {
        LiveSecond {
            unix_ms,
            so_far: None,
            devices: vec![LiveDevice {
                name: "vda".into(),
                second: DeviceSecond {
                    unix_ms,
                    covered_ms: 1000,
                    ops: [(
                        "write".to_string(),
                        OpSecond {
                            ios: write_ios,
                            bytes: write_ios * 4096,
                            ..Default::default()
                        },
                    )]
                    .into(),
                    ..Default::default()
                },
                classes: BTreeMap::new(),
            }],
        }
    }

    /// Records what it is handed.
    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl LiveSink for Seen {
        fn io_second(&self, place: &str, s: &LiveSecond) {
            self.0
                .lock()
                .unwrap()
                .push(format!("io {place} {}", s.unix_ms));
        }
        fn sys_sample(&self, place: &str, s: &SysSample) {
            self.0
                .lock()
                .unwrap()
                .push(format!("sys {place} {}", s.unix_ms));
        }
        fn event(&self, e: &LiveEvent) {
            self.0
                .lock()
                .unwrap()
                .push(format!("event {} {}", e.place, e.text));
        }
    }

    fn flush(end: Option<u64>) -> DbEvent {
        DbEvent {
            kind: "flush".into(),
            start_unix_ms: 10_500,
            end_unix_ms: end,
            bytes: end.map(|_| 1_000_000),
            node: "10.0.0.1".into(),
            detail: "ycsb.usertable".into(),
        }
    }

    #[test]
    fn a_partial_part_sums_the_streamed_classes_into_attribution_rows() {
        let with_classes = |unix_ms: u64, flush: u64, worker: u64| {
            let mut s = second(unix_ms, flush + worker);
            s.devices[0].classes = [
                (
                    "rocksdb.flush".to_string(),
                    [("write".to_string(), (flush, flush * 4096))].into(),
                ),
                (
                    "iodig.worker".to_string(),
                    [("write".to_string(), (worker, worker * 4096))].into(),
                ),
            ]
            .into();
            s
        };
        let t = trace_of(
            [with_classes(10_000, 2, 1), with_classes(11_000, 0, 4)].iter(),
            "ebpf",
            100,
        );
        let a = t
            .attribution()
            .expect("classes streamed: attribution by class");
        assert!(a.enabled && a.sums_match(), "{:?}", a.check);
        assert_eq!(t.self_check.attribution_match, Some(true));
        let flush = a.rows.iter().find(|r| r.class == "rocksdb.flush").unwrap();
        assert_eq!((flush.device.as_str(), flush.op.as_str()), ("vda", "write"));
        assert_eq!((flush.ios, flush.bytes), (2, 2 * 4096));
        assert_eq!(flush.seconds.len(), 2, "each second as it streamed");
        let worker = a.rows.iter().find(|r| r.class == "iodig.worker").unwrap();
        assert_eq!(worker.ios, 5);
        let write = a.check.iter().find(|c| c.op == "write").unwrap();
        assert_eq!((write.device_ios, write.class_ios), (7, 7));
        assert!(
            a.check.iter().all(|c| c.op == "write"),
            "ops without IO are not checked: {:?}",
            a.check
        );
        assert!(a.classes.iter().any(|c| c.name == "rocksdb.flush"));
    }

    #[test]
    fn chunks_are_kept_published_and_make_a_partial_step() {
        let seen = Arc::new(Seen::default());
        let stream = HostStream::shared("10.0.0.1".into());
        let mut s = HostStream::lock(&stream);
        s.watch(seen.clone());
        s.take(
            StreamChunk {
                seq: 0,
                seconds: vec![second(10_000, 1)],
                ..Default::default()
            },
            1,
        );
        assert_eq!(s.chunks(), 0, "before the step starts, a chunk is not its");
        s.start_step(2_000);
        s.take(
            StreamChunk {
                seq: 0,
                seconds: vec![second(10_000, 3), second(11_000, 5)],
                sys_header: Some(Box::new(SysDoc {
                    started_unix_ms: 9_700,
                    ..Default::default()
                })),
                samples: vec![SysSample {
                    unix_ms: 11_000,
                    secs: 1.0,
                    ..Default::default()
                }],
                events: vec![StreamedEvent {
                    id: 4,
                    event: flush(None),
                }],
            },
            12_100,
        );
        // Chunk 1 was lost on the way; chunk 2 completes the flush.
        s.take(
            StreamChunk {
                seq: 2,
                seconds: vec![second(12_000, 7)],
                events: vec![StreamedEvent {
                    id: 4,
                    event: flush(Some(12_500)),
                }],
                ..Default::default()
            },
            14_100,
        );
        assert_eq!(s.chunks(), 2);
        assert_eq!(s.last_arrival(), Some(14_100));
        assert_eq!(
            s.partial_from(),
            Some(13_000),
            "after the last second that came"
        );
        let o = s
            .partial_observation(Some("ebpf"), 100, "lost at 14.9 s")
            .unwrap();
        let t = o.trace.unwrap();
        assert_eq!((t.start_unix_ms, t.end_unix_ms), (10_000, 13_000));
        assert_eq!(t.devices.len(), 1);
        let vda = &t.devices[0];
        assert_eq!(vda.seconds.len(), 3);
        assert_eq!(vda.ops["write"].ios, 15, "the totals are the seconds' sums");
        assert_eq!(vda.ops["write"].bytes, 15 * 4096);
        assert_eq!(vda.ops["read"].ios, 0, "the four ops are always there");
        assert!(!t.histograms);
        assert!(
            t.attribution().is_none(),
            "no class came with the seconds: no attribution is made up"
        );
        assert!(
            t.note
                .as_deref()
                .unwrap()
                .contains("1 more sent and never received"),
            "{:?}",
            t.note
        );
        let sys = o.sys.unwrap();
        assert_eq!(sys.samples.len(), 1);
        assert_eq!(sys.ended_unix_ms, 11_000);
        assert_eq!(o.events, vec![flush(Some(12_500))], "completed in place");
        let seen = seen.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                "io 10.0.0.1 8000",
                "io 10.0.0.1 9000",
                "sys 10.0.0.1 9000",
                "event 10.0.0.1 flush ycsb.usertable started",
                "io 10.0.0.1 10000",
            ],
            "published on this machine's clock as it arrived"
        );
        s.end_step();
        s.start_step(0);
        assert!(
            s.partial_observation(None, 100, "x").is_none(),
            "a new step starts empty"
        );
    }

    fn so_far(through_unix_ms: u64, write_ios: u64) -> SoFar {
        use iodig_model::trace::{Bucket, Latency, SoFarDevice};
        SoFar {
            through_unix_ms,
            devices: vec![SoFarDevice {
                name: "vda".into(),
                ops: [(
                    "write".to_string(),
                    OpTrace {
                        ios: write_ios,
                        bytes: write_ios * 4096,
                        size_hist: vec![Bucket {
                            lower: 0,
                            upper: 4096,
                            count: write_ios,
                        }],
                        size_bytes_hist: vec![Bucket {
                            lower: 0,
                            upper: 4096,
                            count: write_ios * 4096,
                        }],
                        latency: [(
                            "device".to_string(),
                            Latency {
                                count: write_ios,
                                ..Default::default()
                            },
                        )]
                        .into(),
                    },
                )]
                .into(),
            }],
        }
    }

    #[test]
    fn a_partial_part_keeps_the_newest_histograms_that_streamed() {
        let stream = HostStream::shared("10.0.0.1".into());
        let mut s = HostStream::lock(&stream);
        s.start_step(0);
        let mut first = second(10_000, 3);
        first.so_far = Some(so_far(11_400, 4));
        let mut later = second(12_000, 5);
        later.so_far = Some(so_far(13_300, 8));
        s.take(
            StreamChunk {
                seq: 0,
                seconds: vec![first, second(11_000, 1)],
                ..Default::default()
            },
            11_500,
        );
        // An older reading arriving late does not replace a newer one.
        let mut stale = second(13_000, 0);
        stale.so_far = Some(so_far(11_000, 2));
        s.take(
            StreamChunk {
                seq: 1,
                seconds: vec![later, stale],
                ..Default::default()
            },
            13_500,
        );
        assert!(
            s.step.seconds.values().all(|x| x.so_far.is_none()),
            "the seconds are kept without them"
        );
        let t = s
            .partial_observation(Some("ebpf"), 100, "lost at 14 s")
            .unwrap()
            .trace
            .unwrap();
        assert!(t.histograms);
        let write = &t.devices[0].ops["write"];
        assert_eq!(write.ios, 9, "the totals stay the seconds' sums");
        assert_eq!(write.size_hist[0].count, 8, "the newest histograms");
        assert_eq!(write.size_bytes_hist[0].count, 8 * 4096);
        assert_eq!(write.latency["device"].count, 8);
        let note = t.note.unwrap();
        assert!(
            note.contains(
                "700 ms before the last streamed second ended: 8 IOs, where the streamed seconds hold 9"
            ),
            "{note}"
        );
    }
}
