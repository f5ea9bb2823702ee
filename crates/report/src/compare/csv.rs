//! `compare-ops.csv`: the wide tables' figures in long form, one row per workload × thread
//! count × run, each run under the name the comparison gives it (its label), with the ratios
//! to the baseline as plain numbers and their 95% intervals, so a spreadsheet or pandas can
//! redraw the briefs' tables without parsing "1.5X better".

use super::ratio::comparable;
use super::Runs;
use crate::csv::field;
use std::fmt::Write;

/// The file written into `--out`.
pub const FILE: &str = "compare-ops.csv";

/// The columns; ratios are new ÷ baseline for both ops/s (above 1 is better) and p99 (below
/// 1 is better), empty where there is no ratio or no interval (`no_interval` says why).
const HEADER: &str = "workload,threads,run,baseline,ops_per_sec,latency_op,p99_ms,ops_vs_baseline,ops_vs_baseline_ci95_low,ops_vs_baseline_ci95_high,p99_vs_baseline,p99_vs_baseline_ci95_low,p99_vs_baseline_ci95_high,no_interval,note";

fn num(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite())
        .map(|v| format!("{v:.6}"))
        .unwrap_or_default()
}

/// Every tested point of the baseline's workloads, baseline row first at each thread count.
pub(super) fn ops(runs: &Runs) -> String {
    let mut o = format!("{HEADER}\n");
    for w in runs.base_sweeps() {
        for threads in runs.thread_union(&w.workload) {
            let base = runs.point(0, &w.workload, threads);
            for (ri, r) in runs.runs.iter().enumerate() {
                let Some(p) = runs.point(ri, &w.workload, threads) else {
                    continue;
                };
                let has_lat = p.lat.count > 0;
                let mut ratios = [None; 6];
                let mut why = Vec::new();
                if let Some(b) = base.filter(|b| ri > 0 && comparable(b, p)) {
                    ratios[0] = Some(p.ops_per_sec / b.ops_per_sec);
                    match runs.ops_interval(b, p) {
                        Ok((lo, hi)) => (ratios[1], ratios[2]) = (Some(lo), Some(hi)),
                        Err(e) => why.push(e),
                    }
                    if has_lat && b.lat.count > 0 && b.lat.p99_us > 0 {
                        let l = runs.latency_ratio(b, ri, p, &w.op, |s| s.p99_us as f64);
                        ratios[3] = l.new_over_base();
                        // The interval is of baseline ÷ new, as the tables read it: inverted.
                        match l.ci {
                            Ok((lo, hi)) => {
                                (ratios[4], ratios[5]) = (Some(1.0 / hi), Some(1.0 / lo));
                            }
                            Err(e) if !why.contains(&e) => why.push(e),
                            Err(_) => {}
                        }
                    }
                }
                let _ = writeln!(
                    o,
                    "{},{threads},{},{},{:.3},{},{},{},{},{}",
                    field(&w.workload),
                    field(&r.name()),
                    ri == 0,
                    p.ops_per_sec,
                    field(&w.op.words()),
                    if has_lat {
                        format!("{:.3}", p.lat.p99_us as f64 / 1000.0)
                    } else {
                        String::new()
                    },
                    ratios.map(num).join(","),
                    field(&why.join("; ")),
                    field(&p.caveats().join("; "))
                );
            }
        }
    }
    o
}
