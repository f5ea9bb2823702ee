//! The workers' clock: the CPU's time-stamp counter (`rdtsc`) mapped onto `Instant`'s timeline
//! where the TSC is invariant and the kernel itself keeps time with it, the OS clock elsewhere.
//!
//! Why: two clock reads per operation (its start and end) were a third of a no-op binding's
//! CPU per operation through `clock_gettime` (vDSO, ~45 ns each on this kind of VM), against
//! ~15 ns for `rdtsc`. Times are nanoseconds since one process-wide epoch (`u64`), so the hot
//! path does integer arithmetic instead of `Timespec` arithmetic.
//!
//! Accuracy: the rate (ns per tick) is measured once per process against `CLOCK_MONOTONIC`
//! over [`CALIBRATION`], and kept only when its readings bound its relative error below
//! [`MAX_RATE_ERROR`] (1e-5, far below HDR's three significant digits); a calibration whose
//! thread was preempted between a tick and its OS read is taken again, and after
//! [`CALIBRATION_TRIES`] such the OS clock is read instead. Each reader re-anchors itself on the OS clock every
//! [`REANCHOR_TICKS`] (about 2 ms), so its times never drift from `Instant` by more than the
//! rate error over that span (tens of ns), which keeps the placement of operations in
//! seconds and the warm-up boundary exact to well under a microsecond.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long the rate is measured for, once per process (slept, not spun).
const CALIBRATION: Duration = Duration::from_millis(20);

/// The largest relative error of the rate a calibration may keep: the widths of its two
/// paired readings (each a tick interval around one OS clock read) over the ticks between.
const MAX_RATE_ERROR: f64 = 1e-5;

/// Calibrations tried before the OS clock is read instead.
const CALIBRATION_TRIES: u32 = 3;

/// Ticks after which a reader takes a new anchor on the OS clock: 2^22 ticks, 1.7 ms at
/// 2.5 GHz, one `clock_gettime` per ~10,000 no-op operations.
pub const REANCHOR_TICKS: u64 = 1 << 22;

/// Fractional bits of the fixed-point ns-per-tick scale.
const SCALE_SHIFT: u32 = 32;

/// The process's clock: its epoch and, when the TSC is usable, the TSC's rate.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: Instant,
    /// Nanoseconds per tick, fixed point with [`SCALE_SHIFT`] fractional bits; `None`: the OS
    /// clock is read instead.
    scale: Option<u64>,
}

impl Clock {
    /// The process-wide clock, calibrated on first use (20 ms, once). Call it before taking
    /// any `Instant` that will be converted, since earlier instants saturate to the epoch.
    pub fn global() -> Clock {
        static CLOCK: OnceLock<Clock> = OnceLock::new();
        *CLOCK.get_or_init(|| {
            let forced_os = std::env::var("IODIG_CLOCK").is_ok_and(|v| v == "os");
            Clock {
                epoch: Instant::now(),
                scale: if forced_os { None } else { tsc::calibrate() },
            }
        })
    }

    /// A clock that always reads the OS clock (tests, and `IODIG_CLOCK=os`).
    pub fn os() -> Clock {
        Clock {
            epoch: Instant::now(),
            scale: None,
        }
    }

    /// Whether this clock reads the TSC.
    pub fn is_tsc(&self) -> bool {
        self.scale.is_some()
    }

    /// Nanoseconds from the epoch to `t`; 0 for an instant before the epoch.
    #[inline]
    pub fn ns_of(&self, t: Instant) -> u64 {
        duration_ns(t.saturating_duration_since(self.epoch))
    }

    /// A reader for one worker (each keeps its own anchor, so readers share nothing).
    pub fn reader(&self) -> Reader {
        let mut r = Reader {
            clock: *self,
            anchor_tick: 0,
            anchor_ns: 0,
        };
        if self.scale.is_some() {
            r.reanchor();
        }
        r
    }
}

/// Whole nanoseconds of a duration, saturating (585 years).
#[inline]
pub fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One worker's view of the [`Clock`].
#[derive(Debug, Clone)]
pub struct Reader {
    clock: Clock,
    anchor_tick: u64,
    anchor_ns: u64,
}

impl Reader {
    /// Now, in nanoseconds since the clock's epoch. Not strictly monotonic across a re-anchor
    /// (a step back of at most the drift since the last anchor, tens of ns): differences are
    /// taken saturating.
    #[inline]
    pub fn now(&mut self) -> u64 {
        let Some(scale) = self.clock.scale else {
            return self.clock.ns_of(Instant::now());
        };
        // A tick before the anchor (wrapping to a huge delta) re-anchors too.
        let delta = tsc::read().wrapping_sub(self.anchor_tick);
        if delta >= REANCHOR_TICKS {
            return self.reanchor();
        }
        self.anchor_ns + ticks_to_ns(delta, scale)
    }

    /// The clock this reader reads.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Takes a new anchor: the OS clock's now and the tick count around it.
    #[cold]
    fn reanchor(&mut self) -> u64 {
        let (tick, ns, _) = tsc::paired_reading(&self.clock.epoch);
        self.anchor_tick = tick;
        self.anchor_ns = ns;
        ns
    }
}

/// `delta` ticks in nanoseconds under a fixed-point `scale`.
#[inline]
fn ticks_to_ns(delta: u64, scale: u64) -> u64 {
    // 128-bit product: a single `mul` on x86_64, and no overflow whatever the delta.
    ((u128::from(delta) * u128::from(scale)) >> SCALE_SHIFT) as u64
}

/// The fixed-point ns-per-tick scale of `ns` nanoseconds over `ticks` ticks, when plausible: a
/// TSC between 100 MHz and 20 GHz.
fn scale_of(ticks: u64, ns: u64) -> Option<u64> {
    if ticks == 0 || ns == 0 {
        return None;
    }
    let scale = (u128::from(ns) << SCALE_SHIFT) / u128::from(ticks);
    let lo = (1u128 << SCALE_SHIFT) / 20; // 0.05 ns per tick: 20 GHz
    let hi = 10u128 << SCALE_SHIFT; // 10 ns per tick: 100 MHz
    (lo..=hi).contains(&scale).then_some(scale as u64)
}

/// The most a rate measured over `ticks` can be off, relatively, when each end's tick is known
/// to within half its pairing's width.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn rate_error_bound(width0: u64, width1: u64, ticks: u64) -> f64 {
    if ticks == 0 {
        return f64::INFINITY;
    }
    (width0 as f64 + width1 as f64) / 2.0 / ticks as f64
}

/// Whether `/proc/cpuinfo`'s flags promise a TSC that ticks at one rate in every power state
/// (`constant_tsc`, `nonstop_tsc`).
fn invariant_tsc(cpuinfo: &str) -> bool {
    let Some(flags) = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, f)| f)
    else {
        return false;
    };
    let has = |want: &str| flags.split_whitespace().any(|f| f == want);
    has("constant_tsc") && has("nonstop_tsc")
}

#[cfg(target_arch = "x86_64")]
mod tsc {
    use super::{
        duration_ns, invariant_tsc, rate_error_bound, scale_of, CALIBRATION, CALIBRATION_TRIES,
        MAX_RATE_ERROR,
    };
    use std::time::Instant;

    /// The time-stamp counter. Not serialising: an operation's start may be read a few
    /// instructions early, which is nothing at HDR's microsecond resolution.
    #[inline]
    pub fn read() -> u64 {
        // SAFETY: rdtsc exists on every x86_64 CPU and has no memory effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// One tick count and the OS clock's nanoseconds since `epoch` read at the same moment,
    /// and the width (ticks) of the interval that brackets the OS read: of sixteen tries, the
    /// narrowest, the tick taken half-way.
    pub fn paired_reading(epoch: &Instant) -> (u64, u64, u64) {
        let mut best = (u64::MAX, 0, 0);
        for _ in 0..16 {
            let a = read();
            let ns = duration_ns(Instant::now().saturating_duration_since(*epoch));
            let b = read();
            let width = b.wrapping_sub(a);
            if width < best.0 {
                best = (width, a.wrapping_add(width / 2), ns);
            }
        }
        (best.1, best.2, best.0)
    }

    /// The TSC's rate against the OS clock, when the TSC can stand in for it: invariant
    /// (`/proc/cpuinfo`), the kernel's own clocksource (so synchronised across CPUs, or the
    /// kernel would have dropped it), and cheaper to read than the OS clock.
    pub fn calibrate() -> Option<u64> {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        let source = std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .ok()?;
        if !invariant_tsc(&cpuinfo) || source.trim() != "tsc" {
            return None;
        }
        let epoch = Instant::now();
        for _ in 0..CALIBRATION_TRIES {
            let (t0, n0, w0) = paired_reading(&epoch);
            std::thread::sleep(CALIBRATION);
            let (t1, n1, w1) = paired_reading(&epoch);
            let ticks = t1.checked_sub(t0)?;
            if rate_error_bound(w0, w1, ticks) <= MAX_RATE_ERROR {
                return scale_of(ticks, n1.checked_sub(n0)?);
            }
        }
        None
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod tsc {
    //! No TSC: the OS clock is read (`calibrate` says so), and nothing else here is called.
    use std::time::Instant;

    pub fn read() -> u64 {
        0
    }

    pub fn paired_reading(epoch: &Instant) -> (u64, u64, u64) {
        (
            0,
            super::duration_ns(Instant::now().saturating_duration_since(*epoch)),
            0,
        )
    }

    pub fn calibrate() -> Option<u64> {
        let _ = super::invariant_tsc;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_the_kernel_keeps_time_with_an_invariant_tsc_the_calibration_keeps_it() {
        let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let source = std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .unwrap_or_default();
        let usable =
            cfg!(target_arch = "x86_64") && invariant_tsc(&flags) && source.trim() == "tsc";
        // Three calibrations in a row each failing to pair their readings within 1e-5 would
        // mean the bound is too strict for a real machine, and the TSC never used.
        assert_eq!(tsc::calibrate().is_some(), usable, "clocksource {source:?}");
    }

    #[test]
    fn a_calibration_is_kept_only_when_its_readings_bound_the_rate_error() {
        // 20 ms at 2.5 GHz: pairings of 100 ticks each bound the error at 2e-6.
        let ticks = 50_000_000;
        assert!(rate_error_bound(100, 100, ticks) <= MAX_RATE_ERROR);
        // A thread preempted for 100 µs between a tick and its OS read: 0.25 %, refused.
        assert!(rate_error_bound(250_000, 100, ticks) > MAX_RATE_ERROR);
        assert!(rate_error_bound(0, 0, 0).is_infinite());
    }

    #[test]
    fn scale_is_fixed_point_ns_per_tick_and_refuses_implausible_rates() {
        // 2.5 GHz: 0.4 ns per tick.
        let s = scale_of(25_000_000, 10_000_000).unwrap();
        assert_eq!(ticks_to_ns(2_500, s), 999, "truncated, never rounded up");
        assert_eq!(ticks_to_ns(2_500_000_000, s), 999_999_999);
        // Exact rates convert exactly: 1 GHz.
        let one = scale_of(1_000, 1_000).unwrap();
        assert_eq!(one, 1 << 32);
        assert_eq!(ticks_to_ns(REANCHOR_TICKS, one), REANCHOR_TICKS);
        assert_eq!(ticks_to_ns(u64::MAX, one), u64::MAX, "no overflow");
        assert!(scale_of(0, 5).is_none() && scale_of(5, 0).is_none());
        assert!(scale_of(1_000, 11_000).is_none(), "a 91 MHz TSC");
        assert!(scale_of(1_000_000, 40_000).is_none(), "a 25 GHz TSC");
    }

    #[test]
    fn the_conversion_error_is_far_below_hdr_precision() {
        // A 2.9 GHz rate (0.3448… ns per tick) loses under one ns per re-anchor span.
        let s = scale_of(2_900_000_000, 1_000_000_000).unwrap();
        let exact = REANCHOR_TICKS as f64 / 2.9;
        let got = ticks_to_ns(REANCHOR_TICKS, s) as f64;
        assert!((exact - got).abs() < 1.0, "{exact} vs {got}");
    }

    #[test]
    fn invariance_needs_both_flags() {
        let both = "processor\t: 0\nflags\t\t: fpu tsc constant_tsc rdtscp nonstop_tsc\n";
        assert!(invariant_tsc(both));
        assert!(!invariant_tsc("flags\t\t: fpu tsc constant_tsc rdtscp\n"));
        assert!(!invariant_tsc(
            "flags\t\t: fpu tsc nonstop_tsc_x constant_tsc\n"
        ));
        assert!(!invariant_tsc("processor\t: 0\n"));
    }

    /// Whichever clock this machine gets, a reader follows `Instant`: its times of two
    /// instants are those instants' own to well under HDR's microsecond.
    #[test]
    fn a_reader_follows_the_os_clock() {
        for clock in [Clock::global(), Clock::os()] {
            let mut r = clock.reader();
            for _ in 0..20 {
                let before = clock.ns_of(Instant::now());
                let ours = r.now();
                let after = clock.ns_of(Instant::now());
                // Bounds widened by 2 µs for a preempted read on a busy machine: what matters
                // is that no drift accumulates, checked over the sleeps below.
                assert!(
                    ours + 2_000 >= before && ours <= after + 2_000,
                    "{before} {ours} {after} (tsc: {})",
                    clock.is_tsc()
                );
                std::thread::sleep(Duration::from_millis(3));
            }
            let (a, t) = (r.now(), Instant::now());
            std::thread::sleep(Duration::from_millis(30));
            let (b, d) = (r.now(), t.elapsed());
            let ours = (b - a) as f64;
            let os = d.as_nanos() as f64;
            assert!((ours - os).abs() < 20_000.0, "{ours} vs {os} ns");
        }
    }
}
