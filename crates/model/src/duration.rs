//! The one duration syntax of every flag, experiment-file setting and property that takes a
//! time (`--duration`, `--warmup`, `--fault AT:…`, `pause=`, `slow=`, `maxexecutiontime`): two
//! parsers that had drifted apart refused `--fault 1h:kill:node2` while `--duration 1h` worked.

use std::time::Duration;

/// Parses `30s`, `500ms`, `2m` (or `2min`), `1h`, or plain seconds (`10`, `0.5`); surrounding
/// spaces are ignored. Negative, non-finite and unit-less-but-garbled values are refused with a
/// message that shows the forms that work.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration; write e.g. 30s, 500ms, 2m, 1h or 10"))?;
    let secs = match unit.trim_start() {
        "" | "s" => v,
        "ms" => v / 1000.0,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        unit => {
            return Err(format!(
                "{s:?}: unknown duration unit {unit:?}; use ms, s, m or h"
            ))
        }
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is not a duration"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_and_plain_seconds() {
        for (text, want) in [
            ("30s", Duration::from_secs(30)),
            ("500ms", Duration::from_millis(500)),
            ("2m", Duration::from_secs(120)),
            ("2min", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("1.5h", Duration::from_secs(5400)),
            ("7", Duration::from_secs(7)),
            ("0.5", Duration::from_millis(500)),
            ("0", Duration::ZERO),
            (" 10s ", Duration::from_secs(10)),
            ("10 s", Duration::from_secs(10)),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text:?}");
        }
    }

    #[test]
    fn garbage_is_refused_with_the_forms_that_work() {
        for bad in ["", "abc", "-3s", "s", "1.2.3s", "inf", "NaN"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("not a duration"), "{bad:?}: {e}");
        }
        for bad in ["10x", "3d", "5us", "1hour"] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains("unknown duration unit"), "{bad:?}: {e}");
        }
        let huge = format!("{}h", "9".repeat(30));
        assert!(parse_duration(&huge).is_err());
    }
}
