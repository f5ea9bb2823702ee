//! Helpers for front ends of the tracer (`iodig trace`, the runner): duration parsing and a
//! SIGINT/SIGTERM flag so Ctrl-C ends tracing with partial results instead of killing the
//! process (the probes would go anyway, but the results would be lost).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// Makes SIGINT and SIGTERM set the flag read by [`stop_requested`] instead of terminating.
pub fn install_stop_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: on_signal is an extern "C" fn that only touches an atomic, which is
        // async-signal-safe; signal() replaces the disposition of a valid signal number.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// "30s", "500ms", "2m", "1h" or a bare number of seconds ("10", "0.5").
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: use e.g. 30s, 500ms, 2m or 10"))?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1000.0,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => {
            return Err(format!(
                "invalid duration unit {unit:?} in {s:?}: use ms, s, m or h"
            ))
        }
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("invalid duration {s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert!(parse_duration("10x").unwrap_err().contains("unit"));
        assert!(parse_duration("abc").is_err());
    }
}
