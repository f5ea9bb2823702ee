//! One second of a trace as it completes while a step runs, for the live views and the
//! agents' stream.

use super::device::{DeviceSecond, OpTrace};
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
    /// The whole step's size and latency histograms as far as the tracer had counted them,
    /// every few seconds, when the feed asks for them (an agent's stream does, so a host whose
    /// link is lost keeps them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub so_far: Option<SoFar>,
}

/// The whole step's histograms of each device and op, from the start of the trace to
/// `through_unix_ms`: the figures `trace.json`'s `ops` will hold, read while tracing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SoFar {
    /// When the tracer read them (unix ms, the traced host's clock); IOs completed after the
    /// last second sent are in them. Their queue (OS) time is the per-second histograms summed
    /// through the second they come with.
    pub through_unix_ms: u64,
    /// Devices with IO so far.
    pub devices: Vec<SoFarDevice>,
}

/// One device in [`SoFar`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SoFarDevice {
    /// Kernel name of the whole disk.
    pub name: String,
    /// Ops with IO so far, by name: IOs, bytes, size and latency histograms.
    pub ops: BTreeMap<String, OpTrace>,
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
