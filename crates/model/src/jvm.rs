//! A JVM's stop-the-world pauses over a step (`jvm-pauses.json` in a step or node directory):
//! every safepoint and collection its HotSpot reported, on the run's clock.

use serde::{Deserialize, Serialize};

/// The pauses of the database's JVM processes over one step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JvmPausesDoc {
    /// One per JVM looked at (a node's process), including those that could not be probed.
    pub processes: Vec<JvmProcess>,
}

/// One JVM process and its pauses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JvmProcess {
    /// Who the process is (`node 127.0.0.2:9042`), as the system samples name it.
    pub label: String,
    /// Its pid on its host.
    pub pid: u32,
    /// Where the pauses came from (HotSpot's USDT probes `hs_private:safepoint__begin/end`
    /// and `hotspot:gc__begin/end` in `/usr/lib/jvm/…/libjvm.so`), or why there are none: not a JVM, a JVM
    /// without the probes, probes that could not be attached, and the reason.
    pub source: String,
    /// True when the probes were attached: `pauses` is then every pause of the window.
    pub probed: bool,
    /// Unix ms of the window watched (from attach to detach).
    pub started_unix_ms: u64,
    /// See `started_unix_ms`.
    pub ended_unix_ms: u64,
    /// Each ended pause, in the order they ended.
    pub pauses: Vec<JvmPause>,
}

/// One stop-the-world pause or collection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JvmPause {
    /// `safepoint` (every Java thread stopped) or `gc` (a collection, inside a safepoint for
    /// HotSpot's stop-the-world collectors).
    pub kind: String,
    /// When it began, unix µs.
    pub start_unix_us: u64,
    /// How long it lasted, µs.
    pub duration_us: u64,
    /// For `gc`: whether HotSpot called it a full collection; none when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full: Option<bool>,
}

impl JvmPause {
    /// When it ended, unix µs.
    pub fn end_unix_us(&self) -> u64 {
        self.start_unix_us.saturating_add(self.duration_us)
    }
}
