//! `--start-at TIME`: clients on several machines begin their steps together, each by its own
//! clock, from one start time they were all given and a schedule they all compute alike (no
//! channel between them is needed, so Kubernetes Jobs or Ansible can start them).
//!
//! The first step begins (its warm-up starts) at TIME. A step of known length (a run step bound
//! by time: `--duration` or `maxexecutiontime`, no operation count) is followed by the next one
//! at its own scheduled start + warm-up + duration + [`STEP_GAP`], rounded up to a whole second.
//! A step of unknown length (a load, a step bound by `operationcount`) is followed by the next
//! [`REALIGN`] mark counted from TIME that is at least [`STEP_GAP`] after the step ended: clients
//! that ended in the same interval start the next step together. A client that reaches a
//! scheduled start late begins at once and says by how much; `iodig merge` then states how much
//! the clients' windows overlapped.

use crate::step::{Phase, StepPlan};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Time allowed between the end of one step and the start of the next for writing the step's
/// files and the deployment's work between steps.
pub const STEP_GAP: Duration = Duration::from_secs(3);
/// The grid on which clients meet again after a step whose length nobody knew in advance.
pub const REALIGN: Duration = Duration::from_secs(10);
/// How late a step may begin without a warning (sleeping is not exact to the millisecond).
const LATE: Duration = Duration::from_millis(50);

/// Parses `--start-at`: unix seconds (`1767225600`, `1767225600.5`) or RFC 3339
/// (`2026-01-01T00:00:00Z`, `2026-01-01T01:00:00+01:00`, fractions of a second allowed).
pub fn parse_start_at(s: &str) -> Result<SystemTime, String> {
    let s = s.trim();
    let bad = || {
        format!(
            "{s:?} is not a time; give unix seconds (e.g. 1767225600) or RFC 3339 (e.g. 2026-01-01T00:00:00Z)"
        )
    };
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let secs: f64 = s.parse().map_err(|_| bad())?;
        return Duration::try_from_secs_f64(secs)
            .map(|d| UNIX_EPOCH + d)
            .map_err(|_| bad());
    }
    parse_rfc3339(s).ok_or_else(bad)
}

/// `YYYY-MM-DD(T| )HH:MM:SS[.fraction](Z|±HH:MM)`.
fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos = 0u64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let f = &frac[..digits.min(9)];
        nanos = f.parse::<u64>().ok()? * 10u64.pow(9 - f.len() as u32);
        rest = &frac[digits..];
    }
    let offset_secs = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (oh, om) = rest[1..].split_once(':')?;
            if oh.len() != 2 || om.len() != 2 {
                return None;
            }
            let (oh, om): (i64, i64) = (oh.parse().ok()?, om.parse().ok()?);
            if oh > 23 || om > 59 {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    let unix = days * 86_400 + h * 3600 + mi * 60 + sec - offset_secs;
    let unix = u64::try_from(unix).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(unix) + Duration::from_nanos(nanos))
}

/// Days since 1970-01-01 of a civil date, Howard Hinnant's algorithm.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// RFC 3339 in UTC with milliseconds, as messages and run.json notes show times.
pub fn format_utc(t: SystemTime) -> String {
    let ms = crate::step::unix_ms(t);
    let stamp = crate::rundir::timestamp_utc(t);
    // `YYYYMMDD-HHMMSS` → `YYYY-MM-DDTHH:MM:SS`.
    format!(
        "{}-{}-{}T{}:{}:{}.{:03}Z",
        &stamp[0..4],
        &stamp[4..6],
        &stamp[6..8],
        &stamp[9..11],
        &stamp[11..13],
        &stamp[13..15],
        ms % 1000
    )
}

/// The common start of each step, computed by every client the same way.
pub struct StartSchedule {
    origin: SystemTime,
    /// When the next step begins.
    next: SystemTime,
}

impl StartSchedule {
    /// A schedule whose first step begins at `origin` (`--start-at`).
    pub fn new(origin: SystemTime) -> StartSchedule {
        StartSchedule {
            origin,
            next: origin,
        }
    }

    /// Sleeps until the step's common start (waking early on Ctrl-C); returns a note when this
    /// client reached it late, for run.json.
    pub fn wait(&self, step: &str, stop: &AtomicBool) -> Option<String> {
        let now = SystemTime::now();
        if let Ok(late) = now.duration_since(self.next) {
            if late <= LATE {
                return None;
            }
            let note = format!(
                "step {step} began {:.3} s after its common start {} (--start-at): this client was not ready in time, so its window overlaps the other clients' less",
                late.as_secs_f64(),
                format_utc(self.next)
            );
            iodig_model::eprintln_lossy!("warning: {note}");
            return Some(note);
        }
        iodig_model::eprintln_lossy!(
            "waiting for the common start of step {step}: {} (--start-at)",
            format_utc(self.next)
        );
        while !stop.load(Ordering::Relaxed) {
            let Ok(left) = self.next.duration_since(SystemTime::now()) else {
                break;
            };
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
        None
    }

    /// A step ended (now): decides when the next one begins.
    pub fn step_ended(&mut self, plan: &StepPlan) {
        self.next = next_start(self.origin, self.next, plan, SystemTime::now());
    }
}

/// When the step after `plan` (which was scheduled at `scheduled` and ended at `ended`) begins.
fn next_start(
    origin: SystemTime,
    scheduled: SystemTime,
    plan: &StepPlan,
    ended: SystemTime,
) -> SystemTime {
    let known_length = plan.phase == Phase::Run && plan.operation_count == 0;
    match plan.max_execution.filter(|_| known_length) {
        Some(d) => {
            let slot = plan.warmup + d + STEP_GAP;
            scheduled + Duration::from_secs(slot.as_secs() + u64::from(slot.subsec_nanos() > 0))
        }
        None => {
            let earliest = ended + STEP_GAP;
            let since = earliest.duration_since(origin).unwrap_or_default();
            let marks = since.as_nanos().div_ceil(REALIGN.as_nanos());
            origin + REALIGN * u32::try_from(marks).unwrap_or(u32::MAX)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodig_stats::IntervalMode;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn start_times_parse_as_unix_seconds_or_rfc3339() {
        assert_eq!(parse_start_at("1767225600").unwrap(), at(1_767_225_600));
        assert_eq!(
            parse_start_at("1767225600.25").unwrap(),
            at(1_767_225_600) + Duration::from_millis(250)
        );
        assert_eq!(
            parse_start_at("2026-01-01T00:00:00Z").unwrap(),
            at(1_767_225_600)
        );
        assert_eq!(
            parse_start_at("2026-01-01T01:00:00+01:00").unwrap(),
            at(1_767_225_600)
        );
        assert_eq!(
            parse_start_at("2025-12-31 19:00:00.5-05:00").unwrap(),
            at(1_767_225_600) + Duration::from_millis(500)
        );
        assert_eq!(
            parse_start_at("2000-02-29T12:00:00Z").unwrap(),
            at(951_825_600)
        );
        for bad in [
            "",
            "soon",
            "2026-01-01",
            "2026-01-01T00:00:00",
            "2026-13-01T00:00:00Z",
            "2026-01-01T00:00:00+1:00",
            "1.2.3",
        ] {
            let e = parse_start_at(bad).unwrap_err();
            assert!(e.contains("RFC 3339"), "{bad}: {e}");
        }
        assert_eq!(
            format_utc(at(1_767_225_600) + Duration::from_millis(42)),
            "2026-01-01T00:00:00.042Z"
        );
    }

    fn plan(phase: Phase, ops: u64, duration: Option<u64>, warmup: u64) -> StepPlan {
        StepPlan {
            phase,
            threads: 1,
            target_ops_per_sec: None,
            operation_count: ops,
            max_execution: duration.map(Duration::from_secs),
            warmup: Duration::from_secs(warmup),
            interval_mode: IntervalMode::Op,
            unusable_after: None,
        }
    }

    #[test]
    fn timed_steps_follow_by_their_planned_length_whatever_their_actual_end() {
        let origin = at(1000);
        // 2 s warm-up + 10 s + the gap: 15 s after the step's scheduled start, for a client
        // that ended on time and for one that ended late alike.
        let p = plan(Phase::Run, 0, Some(10), 2);
        assert_eq!(next_start(origin, at(1000), &p, at(1012)), at(1015));
        assert_eq!(next_start(origin, at(1000), &p, at(1013)), at(1015));
        assert_eq!(next_start(origin, at(1015), &p, at(1027)), at(1030));
        // Fractions of a second round up, so every step starts on a whole second of TIME.
        let mut half = plan(Phase::Run, 0, Some(1), 0);
        half.max_execution = Some(Duration::from_millis(1500));
        assert_eq!(next_start(origin, at(1000), &half, at(1002)), at(1005));
    }

    #[test]
    fn untimed_steps_realign_on_the_grid_from_the_start_time() {
        let origin = at(1000);
        let load = plan(Phase::Load, 5000, None, 0);
        // Ended at 1004 or 1006.9: both meet at 1010 (≥ end + 3 s).
        assert_eq!(next_start(origin, at(1000), &load, at(1004)), at(1010));
        let late = at(1006) + Duration::from_millis(900);
        assert_eq!(next_start(origin, at(1000), &load, late), at(1010));
        // Ended at 1007.5: the next mark with room for the gap is 1020.
        let later = at(1007) + Duration::from_millis(500);
        assert_eq!(next_start(origin, at(1000), &load, later), at(1020));
        // A run step bound by operationcount has no known length either.
        let counted = plan(Phase::Run, 1000, Some(10), 0);
        assert_eq!(next_start(origin, at(1000), &counted, at(1001)), at(1010));
    }

    #[test]
    fn a_late_client_starts_at_once_and_says_so() {
        let s = StartSchedule::new(SystemTime::now() - Duration::from_secs(2));
        let note = s.wait("workloada-t1", &AtomicBool::new(false)).unwrap();
        assert!(note.contains("workloada-t1") && note.contains("after its common start"));
        let soon = StartSchedule::new(SystemTime::now() + Duration::from_millis(200));
        let begun = std::time::Instant::now();
        assert!(soon.wait("x", &AtomicBool::new(false)).is_none());
        let waited = begun.elapsed();
        assert!(
            waited >= Duration::from_millis(150) && waited < Duration::from_millis(400),
            "{waited:?}"
        );
        // Ctrl-C ends the wait.
        let far = StartSchedule::new(SystemTime::now() + Duration::from_secs(60));
        let begun = std::time::Instant::now();
        assert!(far.wait("x", &AtomicBool::new(true)).is_none());
        assert!(begun.elapsed() < Duration::from_secs(1));
    }
}
