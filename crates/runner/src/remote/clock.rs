//! The observed host's clock against this machine's, measured over the same SSH channel the
//! results come back on: a few pings, keeping the one with the shortest round trip (its
//! midpoint is the best estimate, known to ± half that round trip), as NTP does.

use iodig_model::cluster::ClockSample;
use std::time::{SystemTime, UNIX_EPOCH};

/// Pings per comparison.
pub const PINGS: usize = 5;

/// Nanoseconds since the unix epoch on this host's clock.
pub fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// One ping: local send time, the host's clock, local receive time (all ns).
#[derive(Debug, Clone, Copy)]
pub struct Ping {
    /// When the request left, on this machine's clock.
    pub sent_ns: u64,
    /// The host's clock as its agent read it.
    pub remote_ns: u64,
    /// When the reply arrived, on this machine's clock.
    pub received_ns: u64,
}

/// The sample of the ping with the shortest round trip.
pub fn best(pings: &[Ping]) -> Option<ClockSample> {
    pings
        .iter()
        .min_by_key(|p| p.received_ns.saturating_sub(p.sent_ns))
        .map(|p| {
            let mid = (p.sent_ns as f64 + p.received_ns as f64) / 2.0;
            ClockSample {
                offset_ms: (p.remote_ns as f64 - mid) / 1e6,
                rtt_ms: p.received_ns.saturating_sub(p.sent_ns) as f64 / 1e6,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortest_round_trip_wins() {
        let ms = 1_000_000;
        let pings = [
            // A slow ping whose reply was delayed: would say +40 ms.
            Ping {
                sent_ns: 0,
                remote_ns: 90 * ms,
                received_ns: 100 * ms,
            },
            // A quick one: the host is 250 ms ahead.
            Ping {
                sent_ns: 200 * ms,
                remote_ns: 451 * ms,
                received_ns: 202 * ms,
            },
        ];
        let s = best(&pings).unwrap();
        assert!((s.offset_ms - 250.0).abs() < 1e-9, "{s:?}");
        assert!((s.rtt_ms - 2.0).abs() < 1e-9, "{s:?}");
        assert!(best(&[]).is_none());
    }
}
