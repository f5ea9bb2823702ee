//! CSV exporter: the steps, the per-point ops table, the per-second client series and the
//! per-second block IO series, in long form (one row per step × series or second × op) so
//! spreadsheets and pandas read them without reshaping. Empty cells mean "not measured"; the
//! failed-operation counts and status words are the ones report.md shows.

use crate::analysis::{status_text, Report};
use crate::data::{RunData, StepData};
use std::fmt::Write;

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// Quotes a field when it needs it (RFC 4180).
pub(crate) fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Failed operations and their share in percent (empty when no return code was recorded).
fn failed(o: &crate::outcome::Outcome) -> String {
    format!(
        "{},{}",
        o.failed(),
        opt(o.failed_pct().map(|p| format!("{p:.3}")))
    )
}

/// One row per step, the load included: what it ran, how much, and how it ended.
pub fn steps(report: &Report) -> String {
    let mut o = String::from(
        "step,phase,workload,threads,target_ops_per_sec,operations,ops_per_sec,failed_ops,failed_pct,not_found,interrupted,status\n",
    );
    for s in &report.steps {
        let _ = writeln!(
            o,
            "{},{},{},{},{},{},{:.3},{},{},{},{}",
            s.index,
            field(&s.phase),
            field(&s.workload),
            s.threads,
            opt(s.target_ops_per_sec),
            s.operations,
            s.throughput_ops_per_sec,
            failed(&s.outcome),
            s.outcome.not_found,
            s.interrupted,
            field(&status_text(&s.caveats()))
        );
    }
    o
}

/// One row per point and latency series, plus the sweep's aggregated "ALL" row per point; the
/// failed counts and status are the point's (every step of it, left-out ones included). A
/// thread count the stop rule left out has one row with its reason in `status`.
pub fn ops(report: &Report) -> String {
    let mut o = String::from(
        "workload,threads,repetitions,steps,ops_per_sec,ops_ci95,series,count,mean_us,p50_us,p90_us,p95_us,p99_us,p999_us,p9999_us,max_us,client_cpu_us_per_op,failed_ops,failed_pct,status\n",
    );
    for s in &report.sweeps {
        for p in &s.points {
            let steps = p
                .steps
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ");
            let rows = std::iter::once(("ALL".to_string(), &p.all))
                .chain(p.per_op.iter().map(|(k, v)| (k.clone(), v)));
            let (failed, status) = (failed(&p.outcome), field(&p.status()));
            for (name, v) in rows {
                let _ = writeln!(
                    o,
                    "{},{},{},{},{:.3},{},{},{},{:.3},{},{},{},{},{},{},{},{},{failed},{status}",
                    field(&s.workload),
                    p.threads,
                    p.rep_ops.len(),
                    steps,
                    p.ops_per_sec,
                    opt(p.ops_ci95.map(|c| format!("{c:.3}"))),
                    name,
                    v.count,
                    v.mean_us,
                    v.p50_us,
                    v.p90_us,
                    v.p95_us,
                    v.p99_us,
                    v.p999_us,
                    v.p9999_us,
                    v.max_us,
                    opt(p.client_cpu_us_per_op.map(|c| format!("{c:.3}")))
                );
            }
        }
        // Thread counts the stop rule left out: no figures, the reason in the status.
        for n in &s.not_tested {
            let _ = writeln!(
                o,
                "{},{},0,,,,,,,,,,,,,,,,,{}",
                field(&s.workload),
                n.threads,
                field(&format!("not tested: {}", n.why))
            );
        }
    }
    o
}

/// Per-second client samples: one row per step, second and series.
pub fn client(run: &RunData) -> String {
    let mut o = client_header();
    for st in &run.steps {
        client_rows(st, &mut o);
    }
    o
}

/// The header line of [`client`].
pub fn client_header() -> String {
    String::from("step,phase,workload,threads,unix_ms,t,secs,ops_per_sec,series,count,mean_us,p50_us,p99_us,p999_us,p9999_us,max_us\n")
}

/// One step's rows of [`client`], appended to `o`.
pub fn client_rows(st: &StepData, o: &mut String) {
    {
        let sum = &st.summary;
        for s in &st.timeseries {
            for (name, v) in &s.series {
                let _ = writeln!(
                    o,
                    "{},{},{},{},{},{},{},{:.3},{},{},{:.3},{},{},{},{},{}",
                    sum.index,
                    field(&sum.phase),
                    field(&sum.workload),
                    sum.threads,
                    s.unix_ms,
                    s.t,
                    s.secs,
                    s.ops_per_sec,
                    name,
                    v.count,
                    v.mean_us,
                    v.p50_us,
                    v.p99_us,
                    v.p999_us,
                    v.p9999_us,
                    v.max_us
                );
            }
        }
    }
}

/// Per-second block IO: one row per step, device, second and op with IO.
pub fn io(run: &RunData) -> String {
    let mut o = io_header();
    for st in &run.steps {
        io_rows(st, &mut o);
    }
    o
}

/// The header line of [`io`].
pub fn io_header() -> String {
    String::from(
        "step,phase,device,unix_ms,covered_ms,op,ios,bytes,mb_s,mb_s_max,iops,iops_max,lat_max_ns,lat_p99_ns,await_ms,qd_mean,qd_max\n",
    )
}

/// One step's rows of [`io`], appended to `o`.
pub fn io_rows(st: &StepData, o: &mut String) {
    {
        let Some(t) = &st.trace else { return };
        for d in &t.devices {
            for s in &d.seconds {
                for (op, v) in &s.ops {
                    if v.ios == 0 && v.bytes == 0 {
                        continue;
                    }
                    let _ = writeln!(
                        o,
                        "{},{},{},{},{},{},{},{},{:.3},{:.3},{:.1},{:.1},{},{},{},{},{}",
                        st.summary.index,
                        field(&st.summary.phase),
                        field(&d.name),
                        s.unix_ms,
                        s.covered_ms,
                        op,
                        v.ios,
                        v.bytes,
                        v.mb_s,
                        v.mb_s_max,
                        v.iops,
                        v.iops_max,
                        opt(v.lat_max_ns),
                        opt(v.lat_p99_ns),
                        opt(v.await_ms),
                        opt(s.qd_mean.map(|q| format!("{q:.2}"))),
                        opt(s.qd_max)
                    );
                }
            }
        }
    }
}

/// `slow-seconds.csv`: one row per slow second of an op in every step, with its most likely
/// cause and the evidence (docs/report.md, "Why the slowest seconds were slow").
pub fn slow_seconds(report: &Report) -> String {
    let mut o = String::from(
        "step,workload,threads,second_utc,unix_ms,op,client_p99_ms,client_max_ms,typical_p99_ms,node,cause,evidence\n",
    );
    for st in &report.steps {
        for s in &st.slow_seconds {
            let _ = writeln!(
                o,
                "{},{},{},{},{},{},{:.3},{:.3},{:.3},{},{},{}",
                st.index,
                field(&st.workload),
                st.threads,
                iodig_model::utc::iso_second(s.start_unix_ms),
                s.start_unix_ms,
                s.op,
                s.p99_ms,
                s.max_ms,
                s.typical_p99_ms,
                field(&s.place),
                s.cause.name(),
                field(&s.evidence)
            );
        }
    }
    o
}
