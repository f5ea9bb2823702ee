//! One second of a trace as it completes while a step runs, for the live views and the
//! agents' stream.

use super::device::DeviceSecond;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One second of a trace as it completes while a step runs (`--metrics`, the live line, and
/// the agents' stream): every traced device's [`DeviceSecond`], with its IO by activity class
/// when attribution runs. The whole-step `trace.json` stays the record; this is the preview.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LiveSecond {
    /// Start of the second (unix ms, a multiple of 1000).
    pub unix_ms: u64,
    /// One entry per traced device that had the second in its window.
    pub devices: Vec<LiveDevice>,
}

/// One device in a [`LiveSecond`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LiveDevice {
    /// Kernel name of the whole disk (`nvme0n1`).
    pub name: String,
    /// The second as `trace.json` will hold it (busiest slot and queue depth included).
    pub second: DeviceSecond,
    /// IOs and bytes by activity class and op (`cassandra.flush` → `write` → (ios, bytes)),
    /// empty without attribution.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub classes: BTreeMap<String, BTreeMap<String, (u64, u64)>>,
}
