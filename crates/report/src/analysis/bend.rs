//! Where a sweep stops scaling: the latency bend and the throughput plateau between one thread
//! count and the next (the rule is in docs/report.md, "The bend").

use super::Point;

/// Bend rule: latency bends at the first thread step where p99 grows more than this factor…
pub const BEND_P99_FACTOR: f64 = 2.0;
/// …while ops/s grows by less than this fraction.
pub const BEND_OPS_GAIN: f64 = 0.10;

/// A throughput change in percent with its sign, as the sweep's findings word it: "+35%",
/// "-12%", and "0%" for a change that rounds to nothing (never "-0%").
pub fn gain_pct(pct: f64) -> String {
    let r = pct.round();
    if r == 0.0 {
        "0%".into()
    } else {
        format!("{r:+.0}%")
    }
}

/// Where a sweep stops scaling.
#[derive(Debug, Clone, PartialEq)]
pub struct Bend {
    /// The previous thread count of the sweep (points whose operations all failed skipped).
    pub before: u64,
    /// The thread count where it shows.
    pub at: u64,
    /// Growth of mean ops/s from `before` to `at`, in % (negative when throughput fell).
    pub ops_gain_pct: f64,
    /// p99 at `at` ÷ p99 at `before`, of the sweep's latency op.
    pub p99_ratio: f64,
    /// p99.99 at `at` ÷ p99.99 at `before` (a p99.99 of 0 µs counts as 1 µs).
    pub p9999_ratio: f64,
}

/// The bend: first step where p99 (of the sweep's latency op) grows > [`BEND_P99_FACTOR`]× while ops/s grows <
/// [`BEND_OPS_GAIN`]; the plateau: first step where ops/s grows < [`BEND_OPS_GAIN`]. Points
/// whose operations all failed are skipped: their figures measure failures.
pub fn find_bend(points: &[Point]) -> (Option<Bend>, Option<Bend>) {
    let mut bend = None;
    let mut plateau = None;
    let usable: Vec<&Point> = points.iter().filter(|p| !p.all_failed).collect();
    for w in usable.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a.ops_per_sec <= 0.0 || a.lat.p99_us == 0 {
            continue;
        }
        let gain = b.ops_per_sec / a.ops_per_sec - 1.0;
        let r = Bend {
            before: a.threads,
            at: b.threads,
            ops_gain_pct: gain * 100.0,
            p99_ratio: b.lat.p99_us as f64 / a.lat.p99_us as f64,
            p9999_ratio: b.lat.p9999_us as f64 / a.lat.p9999_us.max(1) as f64,
        };
        if gain < BEND_OPS_GAIN {
            if plateau.is_none() {
                plateau = Some(r.clone());
            }
            if bend.is_none() && r.p99_ratio > BEND_P99_FACTOR {
                bend = Some(r);
            }
        }
    }
    (bend, plateau)
}

#[cfg(test)]
mod tests {
    use super::gain_pct;

    #[test]
    fn a_gain_that_rounds_to_nothing_has_no_sign() {
        assert_eq!(gain_pct(-0.3), "0%");
        assert_eq!(gain_pct(0.4), "0%");
        assert_eq!(gain_pct(-0.6), "-1%");
        assert_eq!(gain_pct(35.2), "+35%");
        assert_eq!(gain_pct(-12.0), "-12%");
    }
}
