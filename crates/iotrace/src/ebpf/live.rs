//! The eBPF session's live feed: each second sent once its slots and per-second histograms are
//! drained, built by the same [`SecondsBuilder`] as `trace.json`'s series, with each device's
//! IO by activity class from the attribution rows' slots, and, every few seconds when asked,
//! the whole trace's size and latency histograms so far, built as `trace.json`'s are.

use super::collect::{AttrRaw, DevRaw, NOPS};
use super::LiveConfig;
use crate::attr;
use crate::devices::Disk;
use crate::doc::{add_os_time, op_trace_of};
use crate::hist::SEC_BUCKETS;
use crate::live::{active, send, LiveFeed};
use crate::series::{SecondsBuilder, Window};
use iodig_model::trace::{LiveDevice, LiveSecond, SoFar, SoFarDevice, OPS};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const NS: u64 = 1_000_000_000;

/// Device `i`, op `o` and activity class `c` of an attribution row, as the document names them.
pub(super) type RowIdentity = (usize, usize, usize);

/// One device's IOs and bytes by class, then op, as [`LiveDevice::classes`] holds them.
type ByClass = BTreeMap<String, BTreeMap<String, (u64, u64)>>;

/// Reads the kernel's whole-trace totals and histograms of every device, as they are now.
pub(super) type ReadSoFar<'a> = dyn FnMut() -> Vec<DevRaw> + 'a;

/// The feed of one eBPF session: a builder per device, the next second to send.
pub(super) struct EbpfLive {
    feed: Option<LiveFeed>,
    names: Vec<String>,
    only_active: bool,
    builders: Vec<SecondsBuilder>,
    next_sec: u64,
    slot_ns: u64,
    histograms_every: Option<Duration>,
    /// When the histograms so far were last sent.
    histograms_sent: Option<Instant>,
    /// Per device and op, the OS time of the seconds sent (their per-second histograms summed,
    /// as the document sums them for the run).
    os_time: Vec<Vec<Vec<u64>>>,
}

impl EbpfLive {
    /// Starts at the window's first second; `only_active` leaves out devices without IO in a
    /// second (devices picked automatically, as the document leaves out idle ones).
    pub(super) fn new(live: LiveConfig, disks: &[Disk], w: Window) -> Self {
        EbpfLive {
            feed: Some(live.feed),
            names: disks.iter().map(|d| d.name.clone()).collect(),
            only_active: live.only_active,
            builders: disks.iter().map(|_| SecondsBuilder::new(w)).collect(),
            next_sec: w.start_ns / NS,
            slot_ns: w.slot_ns,
            histograms_every: live.histograms_every,
            histograms_sent: None,
            os_time: vec![vec![vec![0; SEC_BUCKETS]; NOPS]; disks.len()],
        }
    }

    /// Sends every second whose slots are drained (ids below `slots_to`) and whose latency
    /// histograms are (seconds below `secs_to`). `identity` names an attribution row.
    pub(super) fn send_complete(
        &mut self,
        devs: &[DevRaw],
        attr: &BTreeMap<u32, AttrRaw>,
        identity: &mut dyn FnMut(u32) -> Option<RowIdentity>,
        read_so_far: &mut ReadSoFar<'_>,
        slots_to: u64,
        secs_to: u64,
    ) {
        let mut ready = Vec::new();
        while self.feed.is_some()
            && (self.next_sec + 1) * NS / self.slot_ns <= slots_to
            && self.next_sec < secs_to
        {
            let sec = self.next_sec;
            self.next_sec += 1;
            ready.push(self.second(sec, devs, attr, identity));
        }
        let due = self
            .histograms_every
            .is_some_and(|every| self.histograms_sent.is_none_or(|t| t.elapsed() >= every));
        self.send_all(ready, due, read_so_far);
    }

    /// At the end of the window: its last seconds, the final one partial.
    pub(super) fn finish(
        &mut self,
        devs: &[DevRaw],
        attr: &BTreeMap<u32, AttrRaw>,
        identity: &mut dyn FnMut(u32) -> Option<RowIdentity>,
        read_so_far: &mut ReadSoFar<'_>,
        end_ns: u64,
    ) {
        for b in &mut self.builders {
            b.end_at(end_ns);
        }
        let mut ready = Vec::new();
        while self.feed.is_some() && self.next_sec <= end_ns.saturating_sub(1) / NS {
            let sec = self.next_sec;
            self.next_sec += 1;
            ready.push(self.second(sec, devs, attr, identity));
        }
        let wanted = self.histograms_every.is_some();
        self.send_all(ready, wanted, read_so_far);
    }

    /// Sends `seconds`, the last carrying the histograms so far when `with_histograms`.
    fn send_all(
        &mut self,
        mut seconds: Vec<LiveSecond>,
        with_histograms: bool,
        read_so_far: &mut ReadSoFar<'_>,
    ) {
        if with_histograms && self.feed.is_some() {
            if let Some(last) = seconds.last_mut() {
                last.so_far = Some(self.so_far(read_so_far()));
                self.histograms_sent = Some(Instant::now());
            }
        }
        for s in seconds {
            self.send(s);
        }
    }

    /// The whole trace's histograms as the kernel holds them now, with the OS time of the
    /// seconds sent so far.
    fn so_far(&self, raw: Vec<DevRaw>) -> SoFar {
        let devices = raw
            .iter()
            .zip(&self.names)
            .zip(&self.os_time)
            .filter_map(|((dev, name), os_time)| {
                let ops: BTreeMap<String, _> = (0..NOPS)
                    .filter(|&op| dev.totals[op].0 > 0)
                    .filter_map(|op| {
                        let name = OPS.get(op)?;
                        Some((name.to_string(), op_trace_of(dev, op, &os_time[op])))
                    })
                    .collect();
                (!ops.is_empty()).then(|| SoFarDevice {
                    name: name.clone(),
                    ops,
                })
            })
            .collect();
        SoFar {
            through_unix_ms: super::unix_now_ns() / 1_000_000,
            devices,
        }
    }

    fn second(
        &mut self,
        sec: u64,
        devs: &[DevRaw],
        attr: &BTreeMap<u32, AttrRaw>,
        identity: &mut dyn FnMut(u32) -> Option<RowIdentity>,
    ) -> LiveSecond {
        let mut classes: Vec<ByClass> = vec![BTreeMap::new(); devs.len()];
        let slots = sec * NS / self.slot_ns..(sec + 1) * NS / self.slot_ns;
        for (&idx, row) in attr {
            let (ios, bytes) = row
                .slots
                .range(slots.clone())
                .fold((0, 0), |(i, b), (_, s)| (i + s.0, b + s.1));
            if ios == 0 && bytes == 0 {
                continue;
            }
            let Some((d, op, class)) = identity(idx) else {
                continue;
            };
            let (Some(by_class), Some(op), Some(class)) =
                (classes.get_mut(d), OPS.get(op), attr::CLASSES.get(class))
            else {
                continue;
            };
            let e = by_class
                .entry(class.name.to_string())
                .or_default()
                .entry(op.to_string())
                .or_default();
            *e = (e.0 + ios, e.1 + bytes);
        }
        for (acc, raw) in self.os_time.iter_mut().zip(devs) {
            for (op, acc) in acc.iter_mut().enumerate() {
                if let Some(h) = raw.sec_lat.get(&(sec, op)) {
                    add_os_time(acc, h);
                }
            }
        }
        let devices = self
            .builders
            .iter_mut()
            .zip(devs)
            .zip(classes)
            .zip(&self.names)
            .map(|(((b, raw), classes), name)| LiveDevice {
                name: name.clone(),
                second: b.second(sec, &raw.slots, &raw.sec_lat),
                classes,
            })
            .collect();
        LiveSecond {
            unix_ms: sec * 1000,
            devices,
            so_far: None,
        }
    }

    fn send(&mut self, mut second: LiveSecond) {
        if self.only_active {
            second.devices.retain(|d| active(&d.second));
        }
        send(&mut self.feed, second);
    }
}
