//! The regression check (`--fail-on-regression PCT`): each later run's point against the
//! baseline's, a verdict or the reason there is none, and the section that lists them.

use super::{md_list, Runs};
use crate::analysis::{steps_list, LatencyOp, Point};
use crate::doc::{target_rate, thousands, us_as_ms, Doc};

/// What the check found (both empty without a limit).
#[derive(Debug, Clone, Default)]
pub(super) struct Check {
    /// One sentence per regression beyond the limit.
    pub regressions: Vec<String>,
    /// Points given no verdict, with why.
    pub unchecked: Vec<String>,
}

/// Checks every point of the baseline's workloads, then writes the section; the points not
/// checked also go into the terminal summary.
pub(super) fn section(doc: &mut Doc, runs: &Runs, pct: f64, summary: &mut String) -> Check {
    let check = check(runs, pct);
    doc.h(
        2,
        format!(
            "Regression check (limit {pct}% on ops/s and {} p99)",
            runs.op.words()
        ),
    );
    if check.regressions.is_empty() {
        doc.p("No checked point is worse than the baseline beyond the limit.");
    } else {
        doc.list(check.regressions.clone());
    }
    if !check.unchecked.is_empty() {
        doc.p("Not checked (no verdict either way):");
        doc.list(check.unchecked.clone());
        summary.push('\n');
        summary.push_str(&md_list("Not checked for regressions", &check.unchecked));
    }
    check
}

fn check(runs: &Runs, pct: f64) -> Check {
    let mut c = Check::default();
    let base_name = runs.base().name();
    for w in runs.base_sweeps() {
        for bp in &w.points {
            for (r, op) in runs.later_points(&w.workload, bp.threads) {
                let point = format!("{} {} × {} threads", r.name(), w.workload, bp.threads);
                let Some(op) = op else {
                    c.unchecked.push(format!(
                        "{point}: not checked: {} has no such step",
                        r.name()
                    ));
                    continue;
                };
                match verdict(bp, op) {
                    Verdict::Check => c.regressions.extend(
                        limit_regressions(bp, op, &w.op, &base_name, pct)
                            .into_iter()
                            .map(|s| format!("{point}: {s}")),
                    ),
                    Verdict::Regression(why) => c.regressions.push(format!("{point}: {why}")),
                    Verdict::Skip(why) => c.unchecked.push(format!("{point}: not checked: {why}")),
                }
            }
        }
    }
    c
}

/// What the regression check does with a later run's point.
#[derive(Debug, Clone, PartialEq)]
enum Verdict {
    /// Compare ops/s and p99 with the limit.
    Check,
    /// A regression whatever the limit, with why.
    Regression(String),
    /// No verdict either way, with why.
    Skip(String),
}

/// Points whose figures cannot be compared get no ratio-based verdict: all failures in the
/// baseline leave nothing to compare with; all failures in the later run are a regression (a
/// check must not pass a run that did no work); partial (interrupted) steps and other target
/// rates are said and skipped.
fn verdict(base: &Point, new: &Point) -> Verdict {
    if base.all_failed {
        return Verdict::Skip(
            "no operation of the baseline's succeeded, so there is nothing to compare with".into(),
        );
    }
    if new.all_failed {
        return Verdict::Regression(format!(
            "none of its operations succeeded ({}) while the baseline's did",
            new.outcome.failure_list()
        ));
    }
    let mut partial = Vec::new();
    if !base.interrupted.is_empty() {
        partial.push(format!("the baseline's {}", steps_list(&base.interrupted)));
    }
    if !new.interrupted.is_empty() {
        partial.push(format!("its {}", steps_list(&new.interrupted)));
    }
    let mut why = Vec::new();
    if !partial.is_empty() {
        why.push(format!(
            "{} ended early (interrupted), so the figures cover part of a step",
            partial.join(" and ")
        ));
    }
    if base.target_ops_per_sec != new.target_ops_per_sec {
        why.push(format!(
            "its target rate ({}) is not the baseline's ({})",
            target_rate(new.target_ops_per_sec),
            target_rate(base.target_ops_per_sec)
        ));
    }
    if !why.is_empty() {
        return Verdict::Skip(why.join("; "));
    }
    Verdict::Check
}

/// Ops/s drop and p99 rise of `new` against `base` beyond `pct`, as sentences after the point's name.
fn limit_regressions(
    base: &Point,
    new: &Point,
    op: &LatencyOp,
    base_name: &str,
    pct: f64,
) -> Vec<String> {
    let mut out = Vec::new();
    let drop = (1.0 - new.ops_per_sec / base.ops_per_sec) * 100.0;
    if drop > pct {
        out.push(format!(
            "ops/s {drop:.1}% lower than {base_name} ({} vs {}), over the {pct}% limit",
            thousands(new.ops_per_sec),
            thousands(base.ops_per_sec)
        ));
    }
    if base.lat.p99_us > 0 {
        let rise = (new.lat.p99_us as f64 / base.lat.p99_us as f64 - 1.0) * 100.0;
        if rise > pct {
            out.push(format!(
                "{} p99 {rise:.1}% higher than {base_name} ({} ms vs {} ms), over the {pct}% limit",
                op.words(),
                us_as_ms(new.lat.p99_us as f64),
                us_as_ms(base.lat.p99_us as f64)
            ));
        }
    }
    out
}
