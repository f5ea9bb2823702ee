//! The eBPF session's live feed: each second sent once its slots and per-second histograms are
//! drained, built by the same [`SecondsBuilder`] as `trace.json`'s series, with each device's
//! IO by activity class from the attribution rows' slots.

use super::collect::{AttrRaw, DevRaw};
use crate::attr;
use crate::devices::Disk;
use crate::live::{active, send, LiveFeed};
use crate::series::{SecondsBuilder, Window};
use iodig_model::trace::{LiveDevice, LiveSecond, OPS};
use std::collections::BTreeMap;

const NS: u64 = 1_000_000_000;

/// Device `i`, op `o` and activity class `c` of an attribution row, as the document names them.
pub(super) type RowIdentity = (usize, usize, usize);

/// One device's IOs and bytes by class, then op, as [`LiveDevice::classes`] holds them.
type ByClass = BTreeMap<String, BTreeMap<String, (u64, u64)>>;

/// The feed of one eBPF session: a builder per device, the next second to send.
pub(super) struct EbpfLive {
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
    pub(super) fn new(feed: LiveFeed, disks: &[Disk], only_active: bool, w: Window) -> Self {
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
    pub(super) fn send_complete(
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
    pub(super) fn finish(
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
        send(&mut self.feed, second);
    }
}
