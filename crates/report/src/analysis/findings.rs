//! The findings rules: every sentence the report states about the data comes from a rule here.
//!
//! **Where a new finding goes.** A rule on one step's data (its trace, client series, system
//! samples, database events) is a [`StepRule`] appended to [`STEP_RULES`]; a rule on a
//! workload's thread sweep is a [`SweepRule`] appended to [`SWEEP_RULES`]. A rule returns its
//! sentences (none when it does not hold), each carrying its numbers. The lists' order is the
//! order of the sentences in the report. Add the rule's row to the "Findings rules" table of
//! docs/report.md so that readers know when it fires. Failed operations are not a rule here:
//! [`crate::outcome::Outcome::findings`] words them, and they always come first.

use super::step::StepView;
use super::sweep::WorkloadSweep;
use crate::data::{DbEvent, StepData};

/// A rule on one step: its sentences, without the step's name (added where they are listed).
pub type StepRule = fn(&StepData, &StepView) -> Vec<String>;
/// A rule on one workload's sweep: its sentences, starting with the workload's name.
pub type SweepRule = fn(&WorkloadSweep) -> Vec<String>;

/// The step rules, in the order their sentences are listed.
pub const STEP_RULES: [StepRule; 11] = [
    io_bursts,
    queue_depth_peak,
    device_latency_outliers,
    system_vs_device,
    size_bands,
    per_io_sizes,
    not_storage_bound,
    latency_during_db_events,
    cpu_pressure,
    who_issued_io,
    beside_background_io,
];

/// The sweep rules, in the order their sentences are listed.
pub const SWEEP_RULES: [SweepRule; 3] = [peak, plateau, bend];

/// The run-level list: failed operations first whatever the run's length (every other figure of
/// such a step misleads), then the sweeps' findings, then each step's on short runs only.
pub(super) fn run_findings(steps: &[StepView], sweeps: &[WorkloadSweep]) -> Vec<String> {
    let mut findings: Vec<String> = steps
        .iter()
        .flat_map(|s| s.warnings.iter().map(|f| step_sentence(s, f)))
        .collect();
    findings.extend(sweeps.iter().flat_map(sweep_findings));
    // With a long sweep the per-step findings stay in their sections; a short run (the blog's
    // single traced step, the default run's three) lists its run steps' up front.
    let run_steps: Vec<&StepView> = steps.iter().filter(|s| s.phase != "load").collect();
    let short = run_steps.len() <= 3;
    for s in run_steps.into_iter().filter(|_| short) {
        findings.extend(s.findings.iter().map(|f| step_sentence(s, f)));
    }
    findings
}

pub(super) fn step_findings(step: &StepData, v: &StepView) -> Vec<String> {
    STEP_RULES.iter().flat_map(|rule| rule(step, v)).collect()
}

/// A sweep's findings (its peak, plateau and bend), the front page's sweep headlines too.
pub(super) fn sweep_headlines(s: &WorkloadSweep) -> Vec<String> {
    sweep_findings(s)
}

fn sweep_findings(s: &WorkloadSweep) -> Vec<String> {
    SWEEP_RULES.iter().flat_map(|rule| rule(s)).collect()
}

/// Every IO by size (the per-IO stream): the slowest IO's size, the commonest size's tail.
fn per_io_sizes(_: &StepData, v: &StepView) -> Vec<String> {
    v.per_io
        .as_ref()
        .map(super::per_io::sentences)
        .unwrap_or_default()
}

/// Bursts: the busiest slot against the mean over the traced window, per op.
fn io_bursts(step: &StepData, v: &StepView) -> Vec<String> {
    let mut f = Vec::new();
    let Some(trace) = &step.trace else { return f };
    let secs = (trace.end_unix_ms.saturating_sub(trace.start_unix_ms)) as f64 / 1000.0;
    for op in ["write", "read", "discard"] {
        let (_, bytes) = trace.op_totals(op);
        let Some(l) = v.io.get(op) else { continue };
        if secs <= 0.0 || bytes == 0 {
            continue;
        }
        let mean = bytes as f64 / 1e6 / secs;
        let Some(&(_, peak)) = l.mb_s_max.iter().max_by(|a, b| a.1.total_cmp(&b.1)) else {
            continue;
        };
        let ratio = peak / mean;
        // Tiny rates make big ratios that mean nothing: a burst must reach 10 MB/s.
        if ratio >= 5.0 && peak >= 10.0 {
            let mut s = format!(
                "{} bursts reach {ratio:.0}× the mean {op} throughput ({} vs {})",
                capitalise(op),
                rate(peak),
                rate(mean)
            );
            match bursts_by_class(trace, op, &l.mb_s_max, peak) {
                Some(who) => s.push_str(&who),
                None if !step.events.is_empty() => {
                    s.push_str(&bursts_in_db_events(step, &l.mb_s_max, peak));
                }
                None => {}
            }
            f.push(s + ".");
        }
    }
    f
}

/// "; the kernel attributes 97 % of the burst seconds' write bytes to rocksdb.flush": who
/// issued the IO of the seconds whose busiest slot reaches half the peak, from the trace's
/// attribution (per class and second). `None` without attribution.
fn bursts_by_class(
    trace: &iodig_model::trace::TraceDoc,
    op: &str,
    mb_s_max: &[(f64, f64)],
    peak: f64,
) -> Option<String> {
    let attribution = trace.attribution()?;
    let burst: Vec<u64> = mb_s_max
        .iter()
        .filter(|p| p.1 >= 0.5 * peak)
        // The io lines put each second at its middle.
        .map(|p| (p.0 as u64).saturating_sub(500))
        .collect();
    let mut by_class: std::collections::BTreeMap<&str, u64> = Default::default();
    for r in attribution.rows.iter().filter(|r| r.op == op) {
        for s in r.seconds.iter().filter(|s| burst.contains(&s.unix_ms)) {
            *by_class.entry(r.class.as_str()).or_default() += s.bytes;
        }
    }
    let total: u64 = by_class.values().sum();
    let (class, bytes) = by_class.into_iter().max_by_key(|c| c.1)?;
    (total > 0).then(|| {
        format!(
            "; the kernel attributes {:.0} % of the burst seconds' {op} bytes to {class}",
            100.0 * bytes as f64 / total as f64
        )
    })
}

/// ", all inside flushes or compactions" or ", N of M burst seconds inside …": how many
/// seconds whose busiest slot reaches half the peak overlap a database event.
fn bursts_in_db_events(step: &StepData, mb_s_max: &[(f64, f64)], peak: f64) -> String {
    let end = step.end_unix_ms();
    let burst: Vec<f64> = mb_s_max
        .iter()
        .filter(|p| p.1 >= 0.5 * peak)
        .map(|p| p.0)
        .collect();
    let inside = burst
        .iter()
        .filter(|x| {
            let a = **x as u64 - 500;
            overlaps(&step.events, "flush", a, a + 1000, end)
                || overlaps(&step.events, "compaction", a, a + 1000, end)
        })
        .count();
    if inside == burst.len() {
        ", all inside flushes or compactions".into()
    } else {
        format!(
            ", {inside} of {} burst seconds inside flushes or compactions",
            burst.len()
        )
    }
}

/// Queue depth: the peak against the mean, on the device with the highest peak, the second it
/// was reached in and how long reads waited in the OS queue then (the blog's "the queues are
/// filling up fast during the memtable flush, and the system is piling on").
fn queue_depth_peak(step: &StepData, v: &StepView) -> Vec<String> {
    let Some(trace) = &step.trace else {
        return Vec::new();
    };
    let busiest = trace
        .devices
        .iter()
        .filter_map(|d| {
            let means: Vec<f64> = d.seconds.iter().filter_map(|s| s.qd_mean).collect();
            let max = d.seconds.iter().filter_map(|s| s.qd_max).max()?;
            (!means.is_empty()).then(|| (d, max, means.iter().sum::<f64>() / means.len() as f64))
        })
        .max_by_key(|x| x.1);
    let Some((d, max, mean)) = busiest else {
        return Vec::new();
    };
    let mut f = Vec::new();
    if max >= 8 && max as f64 >= 4.0 * mean {
        let of = if trace.devices.len() > 1 {
            format!(" (busiest of {} devices)", trace.devices.len())
        } else {
            String::new()
        };
        let when = d
            .seconds
            .iter()
            .find(|s| s.qd_max == Some(max))
            .map(|s| {
                // Per-second lines are drawn at the middle of their second.
                let mid = (s.unix_ms + 500) as f64;
                let queued = v.io.get("read")
                        .and_then(|l| l.os_p99_ms.iter().find(|p| p.0 == mid))
                        // Said when reads waited long enough to feel it (the blog's 40 ms).
                        .filter(|p| p.1 >= 1.0)
                        .map(|p| format!(" (reads queued {} at p99 in the OS then)", lat_ms(p.1)))
                        .unwrap_or_default();
                format!(" at {}{queued}", crate::svg::clock(mid))
            })
            .unwrap_or_default();
        f.push(format!(
            "Queue depth on {}{of} peaks at {max}{when} against a mean of {mean:.1}.",
            d.name
        ));
    }
    f
}

/// Device latency outliers against the op's own p99 (the worst device's of each).
fn device_latency_outliers(step: &StepData, _: &StepView) -> Vec<String> {
    let mut f = Vec::new();
    let Some(trace) = &step.trace else { return f };
    for op in ["read", "write"] {
        let worst = |pick: fn(&iodig_model::trace::Latency) -> u64| {
            trace
                .devices
                .iter()
                .filter_map(|d| d.ops.get(op)?.latency.get("device").map(pick))
                .max()
                .unwrap_or(0)
        };
        let p99 = worst(|l| l.p99_ns);
        let max = worst(|l| l.max_ns);
        if p99 > 0 && max >= 1_000_000 && max >= 10 * p99 {
            f.push(format!(
                "Device {op} latency peaks at {} while its p99 is {} ({:.0}×).",
                lat_ms(max as f64 / 1e6),
                lat_ms(p99 as f64 / 1e6),
                max as f64 / p99 as f64
            ));
        }
    }
    f
}

/// Where reads' and writes' worst per-second p99 lives: in the OS queue or on the device, and
/// what the drive's own latency log or its scheduler adds to that verdict.
fn system_vs_device(step: &StepData, v: &StepView) -> Vec<String> {
    let schedulers: Vec<(String, String)> = step
        .trace
        .iter()
        .flat_map(|t| &t.devices)
        .filter_map(|d| {
            let s = d.info.as_ref()?.scheduler.as_deref()?;
            // "none [mq-deadline]" names the one in effect in brackets; a lone word is it.
            let active = s
                .split_whitespace()
                .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
                .unwrap_or(s);
            Some((d.name.clone(), active.to_string()))
        })
        .collect();
    let worded = super::levels::findings(&v.levels);
    let shown = v
        .levels
        .iter()
        .filter(|r| r.worst_os_ms.max(r.worst_device_ms) >= 1.0);
    worded
        .into_iter()
        .zip(shown)
        .map(
            |(f, r)| match super::levels::drive_evidence(r, &v.device_stats, &schedulers) {
                Some(e) => format!("{f} {e}"),
                None => f,
            },
        )
        .collect()
}

/// Reads mostly served from memory: few device reads per database read.
fn not_storage_bound(_: &StepData, v: &StepView) -> Vec<String> {
    v.storage
        .as_ref()
        .map(super::storage::findings)
        .unwrap_or_default()
}

/// The blog's size bands: an op (with ≥ 100 IOs) one 4 KiB-wide bucket of which holds ≥ 25 % of
/// its bytes or of its IOs.
fn size_bands(_: &StepData, v: &StepView) -> Vec<String> {
    let mut f = Vec::new();
    for ob in v.bands.iter().filter(|b| b.ios >= 100 && b.op != "flush") {
        let by = |key: fn(&iodig_model::trace::NarrowBand) -> f64| {
            ob.bands.iter().max_by(|a, b| key(a).total_cmp(&key(b)))
        };
        let (Some(vol), Some(cnt)) = (by(|b| b.pct_bytes), by(|b| b.pct_ios)) else {
            continue;
        };
        let mut parts = Vec::new();
        if vol.pct_bytes >= 25.0 {
            parts.push(format!(
                "{:.0}% of {} bytes in {} ({:.0}% of its IOs)",
                vol.pct_bytes, ob.op, vol.label, vol.pct_ios
            ));
        }
        if cnt.pct_ios >= 25.0 && cnt.label != vol.label {
            parts.push(format!(
                "{:.0}% of {} IOs in {} ({:.0}% of its bytes)",
                cnt.pct_ios, ob.op, cnt.label, cnt.pct_bytes
            ));
        }
        if !parts.is_empty() {
            f.push(format!(
                "{} sizes at 4 KiB resolution: {}.",
                capitalise(&ob.op),
                parts.join("; ")
            ));
        }
    }
    f
}

/// Client latency while the database flushes or compacts, per op.
fn latency_during_db_events(step: &StepData, v: &StepView) -> Vec<String> {
    let mut f = Vec::new();
    for (kind, what) in [
        ("flush", "a flush runs"),
        ("compaction", "a compaction runs"),
    ] {
        if !step.events.iter().any(|e| e.kind == kind) {
            continue;
        }
        for series in v.lat_p99_ms.keys() {
            let (inside, outside) = p99_inside_outside(step, series, kind);
            if inside.len() < 3 || outside.len() < 3 {
                continue;
            }
            let mi = inside.iter().sum::<f64>() / inside.len() as f64;
            let mo = outside.iter().sum::<f64>() / outside.len() as f64;
            if mo > 0.0 && mi / mo >= 1.5 {
                f.push(format!(
                    "P99 {} latency is {:.1}× higher while {what} ({} vs {}, means of per-second p99 over {} and {} s).",
                    series.to_lowercase(),
                    mi / mo,
                    lat_ms(mi),
                    lat_ms(mo),
                    inside.len(),
                    outside.len()
                ));
            }
        }
    }
    f
}

/// The series' per-second p99 (ms) in seconds that overlap an event of `kind`, and in the others.
fn p99_inside_outside(step: &StepData, series: &str, kind: &str) -> (Vec<f64>, Vec<f64>) {
    let end = step.end_unix_ms();
    let (mut inside, mut outside) = (Vec::new(), Vec::new());
    for s in &step.timeseries {
        let Some(sum) = s.series.get(series) else {
            continue;
        };
        if sum.count == 0 {
            continue;
        }
        let b = s.unix_ms;
        let a = b.saturating_sub((s.secs * 1000.0) as u64);
        let v = sum.p99_us as f64 / 1000.0;
        if overlaps(&step.events, kind, a, b, end) {
            inside.push(v);
        } else {
            outside.push(v);
        }
    }
    (inside, outside)
}

/// CPU iowait (threads wait on the device) and CPU saturation.
fn cpu_pressure(step: &StepData, _: &StepView) -> Vec<String> {
    let mut f = Vec::new();
    let Some(sys) = &step.sys else { return f };
    let s = sys.summary();
    if s.cpu_iowait_pct.mean >= 5.0 {
        f.push(format!(
            "CPU iowait averages {:.0}% (max {:.0}%): threads wait on the device.",
            s.cpu_iowait_pct.mean, s.cpu_iowait_pct.max
        ));
    }
    if s.cpu_busy_pct.mean >= 90.0 {
        f.push(format!(
            "CPUs are {:.0}% busy on average: the client or the database is CPU-bound.",
            s.cpu_busy_pct.mean
        ));
    }
    f
}

/// The peak, when the sweep has more than one usable thread count.
fn peak(s: &WorkloadSweep) -> Vec<String> {
    let Some(p) = s.peak_point().filter(|_| s.usable_points().count() > 1) else {
        return Vec::new();
    };
    vec![format!(
        "{}: peak throughput is {} ops/s at {} threads ({} p99 {}, p99.99 {}).",
        s.workload,
        crate::doc::thousands(p.ops_per_sec),
        p.threads,
        s.op.words(),
        lat_ms(p.lat.p99_us as f64 / 1000.0),
        lat_ms(p.lat.p9999_us as f64 / 1000.0)
    )]
}

/// The plateau, when the tail grew with it.
fn plateau(s: &WorkloadSweep) -> Vec<String> {
    s.plateau
        .iter()
        .filter(|p| p.p9999_ratio >= 1.5)
        .map(|p| {
            format!(
                "{}: throughput stops growing after {} threads ({} at {}) while {} p99.99 grows {:.1}×.",
                s.workload, p.before, super::gain_pct(p.ops_gain_pct), p.at, s.op.words(), p.p9999_ratio
            )
        })
        .collect()
}

/// The bend (see [`super::bend`]).
fn bend(s: &WorkloadSweep) -> Vec<String> {
    s.bend
        .iter()
        .map(|b| {
            format!(
                "{}: latency bends at {} threads: {} p99 grows {:.1}× for {} ops/s.",
                s.workload,
                b.at,
                s.op.words(),
                b.p99_ratio,
                super::gain_pct(b.ops_gain_pct)
            )
        })
        .collect()
}

/// `interval` of a sample overlaps one of `events` (of `kind`).
fn overlaps(events: &[DbEvent], kind: &str, a: u64, b: u64, step_end: u64) -> bool {
    events
        .iter()
        .any(|e| e.kind == kind && e.start_unix_ms < b && e.end_unix_ms.unwrap_or(step_end) > a)
}

/// "5.6 GB/s" or "136 MB/s" (decimal, as iostat and the briefs print them).
pub fn rate(mb_s: f64) -> String {
    if mb_s >= 1000.0 {
        format!("{:.1} GB/s", mb_s / 1000.0)
    } else if mb_s >= 10.0 {
        format!("{mb_s:.0} MB/s")
    } else {
        format!("{mb_s:.2} MB/s")
    }
}

/// Latency in ms with sensible digits.
pub fn lat_ms(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 1.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

/// "Step 3 (workloada × 8 threads): …", "Load (workloadb × 4 threads): …".
fn step_sentence(s: &StepView, sentence: &str) -> String {
    format!("{}: {sentence}", capitalise(&s.label))
}

pub(crate) fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// Who issued the IO (eBPF attribution): the write shares by activity, a node that stands out,
/// what background writes did to the reads, and a failed self-check.
fn who_issued_io(step: &StepData, _v: &StepView) -> Vec<String> {
    step.trace
        .as_ref()
        .map(super::attribution::findings)
        .unwrap_or_default()
}

/// What flush and compaction IO did: the client's reads with and without it (per second), and
/// the query reads' queue and device time (per IO, from the kernel).
fn beside_background_io(_step: &StepData, v: &StepView) -> Vec<String> {
    v.background
        .as_ref()
        .map(super::background::findings)
        .unwrap_or_default()
}
