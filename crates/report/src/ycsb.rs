//! YCSB's text output (`TextMeasurementsExporter` over HDR histograms), line for line, so that
//! scripts written for YCSB parse iodig's summaries: `[OVERALL], RunTime(ms), …`,
//! `[READ], 99thPercentileLatency(us), …`, `[READ], Return=OK, …`.

use iodig_model::{SeriesSummary, StepSummary};
use std::fmt::Write;

/// Percentiles iodig prints by default (`hdrhistogram.percentiles`); YCSB's default is `95,99`.
pub const DEFAULT_PERCENTILES: &[f64] = &[50.0, 90.0, 95.0, 99.0, 99.9, 99.99];

/// Percentiles a step summary holds, so the only ones `hdrhistogram.percentiles` may name.
pub const SUPPORTED_PERCENTILES: &[f64] = &[50.0, 90.0, 95.0, 99.0, 99.9, 99.99];

/// Parses `hdrhistogram.percentiles` (comma separated).
pub fn parse_percentiles(value: &str) -> Result<Vec<f64>, String> {
    value
        .split(',')
        .map(|p| {
            let v: f64 = p.trim().parse().map_err(|_| format!("hdrhistogram.percentiles={value}: {p:?} is not a number"))?;
            if SUPPORTED_PERCENTILES.contains(&v) {
                Ok(v)
            } else {
                Err(format!("hdrhistogram.percentiles={value}: {v} is not available; use any of 50,90,95,99,99.9,99.99"))
            }
        })
        .collect()
}

/// Java's `Double.toString`: shortest round-trip digits, at least one decimal, `E` notation
/// outside [10^-3, 10^7).
pub fn java_double(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let a = v.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        let s = format!("{v}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let s = format!("{v:e}");
        let (mantissa, exp) = s.split_once('e').expect("exponent format has an e");
        let mantissa = if mantissa.contains('.') {
            mantissa.to_string()
        } else {
            format!("{mantissa}.0")
        };
        format!("{mantissa}E{exp}")
    }
}

/// YCSB's ordinal label of a percentile: `95th`, `99.9`, `1st`, `11th`.
pub fn ordinal(p: f64) -> String {
    if p.fract() != 0.0 {
        return java_double(p);
    }
    let j = p as i64;
    let suffix = match j % 100 {
        11..=13 => "th",
        _ => ["th", "st", "nd", "rd", "th", "th", "th", "th", "th", "th"][(j % 10) as usize],
    };
    format!("{j}{suffix}")
}

fn percentile_value(s: &SeriesSummary, p: f64) -> u64 {
    let table = [
        (50.0, s.p50_us),
        (90.0, s.p90_us),
        (95.0, s.p95_us),
        (99.0, s.p99_us),
        (99.9, s.p999_us),
    ];
    table
        .iter()
        .find(|(q, _)| *q == p)
        .map_or(s.p9999_us, |(_, v)| *v)
}

/// Series in a stable order: OVERALL first in the caller, then ops in YCSB's usual order.
fn series_rank(name: &str) -> (usize, usize, String) {
    const ORDER: [&str; 8] = [
        "CLEANUP",
        "READ",
        "UPDATE",
        "INSERT",
        "SCAN",
        "READ-MODIFY-WRITE",
        "DELETE",
        "VERIFY",
    ];
    let (base, variant) = if let Some(b) = name.strip_prefix("Intended-") {
        b.strip_suffix("-FAILED").map_or((b, 2), |b| (b, 3))
    } else if let Some(b) = name.strip_suffix("-FAILED") {
        (b, 1)
    } else {
        (name, 0)
    };
    let pos = ORDER.iter().position(|o| *o == base).unwrap_or(ORDER.len());
    (variant, pos, name.to_string())
}

/// The summary text of one step, exactly as YCSB prints it at the end of a run.
pub fn step_text(step: &StepSummary, percentiles: &[f64]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "[OVERALL], RunTime(ms), {}", step.runtime_ms);
    let _ = writeln!(
        out,
        "[OVERALL], Throughput(ops/sec), {}",
        java_double(step.throughput_ops_per_sec)
    );
    let mut names: Vec<&String> = step.series.keys().collect();
    names.sort_by_key(|n| series_rank(n));
    for name in names {
        let s = &step.series[name];
        let _ = writeln!(out, "[{name}], Operations, {}", s.count);
        let _ = writeln!(
            out,
            "[{name}], AverageLatency(us), {}",
            java_double(s.mean_us)
        );
        let _ = writeln!(out, "[{name}], MinLatency(us), {}", s.min_us);
        let _ = writeln!(out, "[{name}], MaxLatency(us), {}", s.max_us);
        for p in percentiles {
            let _ = writeln!(
                out,
                "[{name}], {}PercentileLatency(us), {}",
                ordinal(*p),
                percentile_value(s, *p)
            );
        }
        if let Some(returns) = step.returns.get(name.as_str()) {
            for (status, count) in returns {
                let _ = writeln!(out, "[{name}], Return={status}, {count}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_like_java() {
        assert_eq!(java_double(98.91196834817013), "98.91196834817013");
        assert_eq!(java_double(1234.0), "1234.0");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(1.0e7), "1.0E7");
        assert_eq!(java_double(12_345_678.5), "1.23456785E7");
        assert_eq!(java_double(0.0001), "1.0E-4");
    }

    #[test]
    fn ordinals_match_ycsb() {
        assert_eq!(ordinal(95.0), "95th");
        assert_eq!(ordinal(99.0), "99th");
        assert_eq!(ordinal(50.0), "50th");
        assert_eq!(ordinal(1.0), "1st");
        assert_eq!(ordinal(11.0), "11th");
        assert_eq!(ordinal(99.9), "99.9");
        assert_eq!(ordinal(99.99), "99.99");
    }

    #[test]
    fn percentiles_property_is_checked() {
        assert_eq!(parse_percentiles("95,99").unwrap(), vec![95.0, 99.0]);
        assert!(parse_percentiles("95,42")
            .unwrap_err()
            .contains("hdrhistogram.percentiles"));
    }
}
