//! The trace's seconds as they complete, sent while tracing (`TraceOptions::live`): the
//! figures `trace.json` will hold for each second, built by the same code ([`SecondsBuilder`],
//! [`series::from_diskstats`]) from what the session has drained so far. The record stays the
//! whole-step document; this is what a live view and an agent's stream show before it exists.

use crate::attr;
use crate::devices::Disk;
use crate::diskstats::Stat;
use crate::ebpf::{AttrRaw, DevRaw};
use crate::series::{self, SecondsBuilder, Window};
use iodig_model::trace::{DeviceSecond, LiveDevice, LiveSecond, OPS};
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::Sender;

/// Where completed seconds go. A receiver that went away stops the feed, not the trace.
pub type LiveFeed = Sender<LiveSecond>;

const NS: u64 = 1_000_000_000;

/// Device `i`, op `o` and activity class `c` of an attribution row, as the document names them.
pub(crate) type RowIdentity = (usize, usize, usize);

/// One device's IOs and bytes by class, then op, as [`LiveDevice::classes`] holds them.
type ByClass = BTreeMap<String, BTreeMap<String, (u64, u64)>>;

/// The feed of one eBPF session: a builder per device, the next second to send.
pub(crate) struct EbpfLive {
    feed: Option<LiveFeed>,
    names: Vec<String>,
    only_active: bool,
    builders: Vec<SecondsBuilder>,
    next_sec: u64,
    slot_ns: u64,
}

impl EbpfLive {
    /// Starts at the window's first second; `only_active` leaves out devices without IO in a
    /// second (devices picked automatically, as the document leaves out idle ones).
    pub(crate) fn new(feed: LiveFeed, disks: &[Disk], only_active: bool, w: Window) -> Self {
        EbpfLive {
            feed: Some(feed),
            names: disks.iter().map(|d| d.name.clone()).collect(),
            only_active,
            builders: disks.iter().map(|_| SecondsBuilder::new(w)).collect(),
            next_sec: w.start_ns / NS,
            slot_ns: w.slot_ns,
        }
    }

    /// Sends every second whose slots are drained (ids below `slots_to`) and whose latency
    /// histograms are (seconds below `secs_to`). `identity` names an attribution row.
    pub(crate) fn send_complete(
        &mut self,
        devs: &[DevRaw],
        attr: &BTreeMap<u32, AttrRaw>,
        identity: &mut dyn FnMut(u32) -> Option<RowIdentity>,
        slots_to: u64,
        secs_to: u64,
    ) {
        while self.feed.is_some()
            && (self.next_sec + 1) * NS / self.slot_ns <= slots_to
            && self.next_sec < secs_to
        {
            let sec = self.next_sec;
            self.next_sec += 1;
            let second = self.second(sec, devs, attr, identity);
            self.send(second);
        }
    }

    /// At the end of the window: its last seconds, the final one partial.
    pub(crate) fn finish(
        &mut self,
        devs: &[DevRaw],
        attr: &BTreeMap<u32, AttrRaw>,
        identity: &mut dyn FnMut(u32) -> Option<RowIdentity>,
        end_ns: u64,
    ) {
        for b in &mut self.builders {
            b.end_at(end_ns);
        }
        while self.feed.is_some() && self.next_sec <= end_ns.saturating_sub(1) / NS {
            let sec = self.next_sec;
            self.next_sec += 1;
            let second = self.second(sec, devs, attr, identity);
            self.send(second);
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
        }
    }

    fn send(&mut self, mut second: LiveSecond) {
        if self.only_active {
            second.devices.retain(|d| active(&d.second));
        }
        if let Some(feed) = &self.feed {
            if feed.send(second).is_err() {
                self.feed = None;
            }
        }
    }
}

fn active(s: &DeviceSecond) -> bool {
    s.ops.values().any(|o| o.ios > 0 || o.bytes > 0)
}

/// The feed of a diskstats session: each second once a sample past its end exists.
pub(crate) struct DiskstatsLive {
    feed: Option<LiveFeed>,
    names: Vec<String>,
    only_active: bool,
    next_sec: Option<u64>,
}

impl DiskstatsLive {
    pub(crate) fn new(feed: LiveFeed, disks: &[Disk], only_active: bool) -> Self {
        DiskstatsLive {
            feed: Some(feed),
            names: disks.iter().map(|d| d.name.clone()).collect(),
            only_active,
            next_sec: None,
        }
    }

    /// Sends the seconds the samples now close; `last` is true at the end of the window (its
    /// last second is then as whole as it will get).
    pub(crate) fn send_complete(&mut self, samples: &[(u64, HashMap<String, Stat>)], last: bool) {
        let (Some(first), Some(newest)) = (samples.first(), samples.last()) else {
            return;
        };
        let mut sec = self.next_sec.unwrap_or(first.0 / NS);
        while self.feed.is_some() && (newest.0 >= (sec + 1) * NS || (last && newest.0 > sec * NS)) {
            // The pairs whose first sample falls in the second: from the first such sample
            // through the one after the last.
            let from = samples.partition_point(|s| s.0 < sec * NS);
            let to = (samples.partition_point(|s| s.0 < (sec + 1) * NS) + 1).min(samples.len());
            let window = &samples[from.min(to)..to];
            let devices = self
                .names
                .iter()
                .filter_map(|name| {
                    let per: Vec<(u64, Stat)> = window
                        .iter()
                        .filter_map(|(t, m)| m.get(name).map(|s| (*t, *s)))
                        .collect();
                    let second = series::from_diskstats(&per)
                        .into_iter()
                        .find(|s| s.unix_ms == sec * 1000)?;
                    (!self.only_active || active(&second)).then(|| LiveDevice {
                        name: name.clone(),
                        second,
                        classes: BTreeMap::new(),
                    })
                })
                .collect();
            let second = LiveSecond {
                unix_ms: sec * 1000,
                devices,
            };
            if let Some(feed) = &self.feed {
                if feed.send(second).is_err() {
                    self.feed = None;
                }
            }
            sec += 1;
        }
        self.next_sec = Some(sec);
    }
}
