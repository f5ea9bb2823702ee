//! How two points are set side by side: ratios in the briefs' words ("1.5X better", "7.0X
//! lower"), Welch significance, and the note column that says what weighs on a ratio.

use super::ALPHA;
use crate::analysis::Point;
use crate::doc::target_rate;
use crate::stat::welch;

/// "1.5X better" / "1.2X worse" for a higher-is-better ratio new/base.
pub fn better(ratio: f64) -> String {
    if !ratio.is_finite() || ratio <= 0.0 {
        "–".into()
    } else if ratio >= 1.0 {
        format!("{}X better", x(ratio))
    } else {
        format!("{}X worse", x(1.0 / ratio))
    }
}

/// A ratio ≥ 1 as the briefs print it ("1.5"), with two decimals under 1.1 so that small
/// differences do not all read "1.0X".
fn x(r: f64) -> String {
    if r < 1.1 {
        format!("{r:.2}")
    } else {
        format!("{r:.1}")
    }
}

/// "7.0X lower" / "1.3X higher" for latencies base/new.
pub fn lower(base_us: f64, new_us: f64) -> String {
    if base_us <= 0.0 || new_us <= 0.0 {
        "–".into()
    } else if base_us >= new_us {
        format!("{}X lower", x(base_us / new_us))
    } else {
        format!("{}X higher", x(new_us / base_us))
    }
}

/// Welch test of two points: on repetition throughputs when both have two or more, else on
/// per-second throughput samples (autocorrelated, so the p-value is optimistic; said so).
pub fn significance(a: &Point, b: &Point) -> String {
    let (w, basis) = if a.rep_ops.len() >= 2 && b.rep_ops.len() >= 2 {
        (welch(&a.rep_ops, &b.rep_ops), "repetitions")
    } else {
        (welch(&a.second_ops, &b.second_ops), "per-second")
    };
    match w {
        Some(w) if w.p < ALPHA => format!("yes (p={}, {basis})", fmt_p(w.p)),
        Some(w) => format!("no (p={}, {basis})", fmt_p(w.p)),
        None => "n/a".into(),
    }
}

fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// Ratios only between points whose operations succeeded.
pub(super) fn comparable(base: &Point, new: &Point) -> bool {
    !base.all_failed && !new.all_failed
}

/// A point's caveats for the tables' note column ("" when none).
pub(super) fn note(p: &Point) -> String {
    p.caveats().join("; ")
}

/// A later run's point's note: its caveats and a target that differs from the baseline's.
pub(super) fn pair_note(base: &Point, new: &Point) -> String {
    let mut n = new.caveats();
    if base.all_failed {
        n.push("baseline all failed".into());
    }
    if base.target_ops_per_sec != new.target_ops_per_sec {
        n.push(format!(
            "target {} (baseline {})",
            target_rate(new.target_ops_per_sec),
            target_rate(base.target_ops_per_sec)
        ));
    }
    n.join("; ")
}
