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

use crate::step_plan::{Phase, StepPlan};
use crate::utc::format_utc;
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
    crate::utc::parse_rfc3339(s).ok_or_else(bad)
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
