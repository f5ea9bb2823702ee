//! The trace's seconds as they complete, sent while tracing (`TraceOptions::live`): the
//! figures `trace.json` will hold for each second, built by the same code as its series from
//! what the session has drained so far (`ebpf::live` for the kernel's slots, `fallback` for
//! diskstats samples). The record stays the whole-step document; this is what a live view and
//! an agent's stream show before it exists.

use iodig_model::trace::{DeviceSecond, LiveSecond};
use std::sync::mpsc::Sender;

/// Where completed seconds go. A receiver that went away stops the feed, not the trace.
pub type LiveFeed = Sender<LiveSecond>;

/// A second a device did IO in: devices picked automatically are sent only then, as the
/// document keeps only those with IO.
pub(crate) fn active(s: &DeviceSecond) -> bool {
    s.ops.values().any(|o| o.ios > 0 || o.bytes > 0)
}

/// Sends a second; a feed whose receiver went away is dropped.
pub(crate) fn send(feed: &mut Option<LiveFeed>, second: LiveSecond) {
    if let Some(f) = feed {
        if f.send(second).is_err() {
            *feed = None;
        }
    }
}
