//! How two points are set side by side: ratios in the briefs' words ("1.5X better", "7.0X
//! lower") with their 95% intervals over repetitions (or why there is none), Welch
//! significance, and the note column that says what weighs on a ratio.

use super::ALPHA;
use crate::analysis::Point;
use crate::doc::target_rate;
use crate::stat::{ratio_ci95, welch};

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

/// The 95% interval of mean(new) ÷ mean(base) over two runs' repetitions, or why there is
/// none: an interval needs the spread of repetitions, and one repetition has none. (Per-second
/// samples are not repetitions: successive seconds are correlated, and an interval on them
/// would be far too narrow.)
pub fn ratio_interval(base: &[f64], new: &[f64]) -> Result<(f64, f64), String> {
    match (base.len() >= 2, new.len() >= 2) {
        (false, false) => Err("no interval: one repetition each".into()),
        (false, true) => Err("no interval: one repetition in the baseline".into()),
        (true, false) => Err("no interval: one repetition in this run".into()),
        (true, true) => {
            ratio_ci95(base, new).ok_or_else(|| "no interval: a repetition measured nothing".into())
        }
    }
}

/// An interval as a cell: "1.31–1.76" in the direction the words read (so a "worse" or
/// "higher" ratio's interval is of baseline ÷ new, like its figure), or why there is none.
pub fn interval_cell(ci: &Result<(f64, f64), String>, flip: bool) -> String {
    match ci {
        Ok((lo, hi)) if flip => format!("{}–{}", x(1.0 / hi), x(1.0 / lo)),
        Ok((lo, hi)) => format!("{}–{}", x(*lo), x(*hi)),
        Err(why) => why.clone(),
    }
}

/// [`better`] with its interval of new ÷ baseline when there is one: "1.52X better (95% CI
/// 1.31–1.76)".
pub fn better_with(ratio: f64, ci: &Result<(f64, f64), String>) -> String {
    let words = better(ratio);
    match ci {
        Ok(_) if ratio.is_finite() && ratio > 0.0 => {
            format!("{words} (95% CI {})", interval_cell(ci, ratio < 1.0))
        }
        _ => words,
    }
}

/// [`lower`] with its interval of baseline ÷ new when there is one: "7.0X lower (95% CI
/// 6.1–8.0)".
pub fn lower_with(base_us: f64, new_us: f64, ci: &Result<(f64, f64), String>) -> String {
    let words = lower(base_us, new_us);
    match ci {
        Ok(_) if base_us > 0.0 && new_us > 0.0 => {
            format!("{words} (95% CI {})", interval_cell(ci, base_us < new_us))
        }
        _ => words,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_read_in_the_direction_of_the_words() {
        let ci = Ok((1.31, 1.76));
        assert_eq!(better_with(1.52, &ci), "1.5X better (95% CI 1.3–1.8)");
        // Worse: the figure and its interval are baseline ÷ new.
        let ci = Ok((0.5, 0.75));
        assert_eq!(better_with(0.625, &ci), "1.6X worse (95% CI 1.3–2.0)");
        // One that may go either way says so by crossing 1.
        let ci = Ok((0.95, 1.09));
        assert_eq!(better_with(1.02, &ci), "1.02X better (95% CI 0.95–1.09)");
        // Latency: base ÷ new.
        let ci = Ok((6.1, 8.0));
        assert_eq!(
            lower_with(7000.0, 1000.0, &ci),
            "7.0X lower (95% CI 6.1–8.0)"
        );
        let ci = Ok((0.4, 0.5));
        assert_eq!(
            lower_with(1000.0, 2200.0, &ci),
            "2.2X higher (95% CI 2.0–2.5)"
        );
        let none = Err("no interval: one repetition each".to_string());
        assert_eq!(better_with(1.52, &none), "1.5X better");
        assert_eq!(
            interval_cell(&none, false),
            "no interval: one repetition each"
        );
    }

    #[test]
    fn no_interval_says_which_side_has_one_repetition() {
        let two = [100.0, 101.0];
        assert_eq!(
            ratio_interval(&[100.0], &[120.0]),
            Err("no interval: one repetition each".into())
        );
        assert!(ratio_interval(&[100.0], &two)
            .unwrap_err()
            .contains("in the baseline"));
        assert!(ratio_interval(&two, &[100.0])
            .unwrap_err()
            .contains("in this run"));
        let (lo, hi) = ratio_interval(&two, &[120.0, 121.0]).unwrap();
        assert!(lo < 1.2 && 1.2 < hi);
    }
}
