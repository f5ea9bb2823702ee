//! One step's view: its figures, and its client, block-IO and system series on one unix-ms time
//! axis (each per-second value at the middle of its interval), with the step's findings.

use super::attribution::{check_sentence, class_shares, node_shares, ShareRow};
use super::background::{background, Background};
use super::findings::step_findings;
use super::io::{io_lines, io_rows, op_bands, size_hists, IoLines, IoRow, OpBands, SizeHist};
use super::{is_primary_series, Line};
use crate::data::{DbEvent, StepData};
use crate::outcome::Outcome;
use iodig_model::sys::{ProcState, SysDoc};
use std::collections::BTreeMap;

/// Everything shown for one step, its IO as measured at one place ([`StepView::place`]). A step
/// whose database nodes were observed on their own hosts holds each node's view in
/// `node_views`; its own IO fields are then the client host's, shown apart.
#[derive(Debug, Clone, Default)]
pub struct StepView {
    /// Where the IO fields below were measured: the client host, or a database node.
    pub place: crate::data::Place,
    /// Each database node's view of the step (its own trace, events, samples and drive
    /// statistics, beside the same client series); empty when the database's IO is the
    /// client host's (embedded, managed nodes not observed) or its hosts were not observed.
    pub node_views: Vec<StepView>,
    /// The nodes summed, with the worst node for every peak; none without node views.
    pub rollup: Option<super::story::Rollup>,
    /// With node views, the client host's own findings, kept apart from the database's
    /// (`findings` then holds the nodes'); empty otherwise.
    pub host_findings: Vec<String>,
    /// The traced window's length, ms; 0 without a trace.
    pub trace_window_ms: u64,
    /// On a node: what its host's part lacks and why (its data partial from a lost link, a
    /// log that cannot be read), one line each; empty otherwise.
    pub place_notes: Vec<String>,
    /// Position in the run, from 0 (a load step comes first).
    pub index: usize,
    /// Section heading ([`StepData::title`]): `Step 3: workloada × 8 threads`.
    pub title: String,
    /// The step's name in sentences ([`StepData::label`]): `step 3 (workloada × 8 threads)`.
    pub label: String,
    /// `load` or `run`.
    pub phase: String,
    /// Workload label (`workloada`, …).
    pub workload: String,
    /// Client threads.
    pub threads: u64,
    /// YCSB's `target` rate, ops/s; none when not throttled.
    pub target_ops_per_sec: Option<f64>,
    /// Operations done in the measured window, failed ones included (YCSB's count).
    pub operations: u64,
    /// Operations per second over the measured window (YCSB's overall throughput).
    pub throughput_ops_per_sec: f64,
    /// Ctrl-C, SIGTERM or a fatal error ended the step early.
    pub interrupted: bool,
    /// Why the step ended before its time (the database became unusable).
    pub ended_early: Option<String>,
    /// What its return codes say: failures, NOT_FOUND, all failed.
    pub outcome: Outcome,
    /// Start of the measured window (after warm-up), unix ms.
    pub start_ms: f64,
    /// End of the measured window, unix ms.
    pub end_ms: f64,
    /// Client ops/s per second.
    pub ops_per_sec: Line,
    /// Per op series name (`READ`, `UPDATE`, …): per-second client p99 latency, ms.
    pub lat_p99_ms: BTreeMap<String, Line>,
    /// Per op series name: per-second client mean latency, ms.
    pub lat_mean_ms: BTreeMap<String, Line>,
    /// By op name (`read`, `write`, `discard`, `flush`, `other`), only ops with IO.
    pub io: BTreeMap<String, IoLines>,
    /// Time-weighted mean queue depth of each second, summed over devices.
    pub qd_mean: Line,
    /// Deepest queue of each second, summed over devices.
    pub qd_max: Line,
    /// All-CPU busy % per sample (everything but idle and iowait).
    pub cpu_busy: Line,
    /// All-CPU iowait % per sample.
    pub cpu_iowait: Line,
    /// The busiest CPU's busy % per sample, when the samples keep it (a host whose per-CPU
    /// samples are summarised, more than `iodig_model::sys::PER_CPU_KEPT` CPUs).
    pub cpu_busiest: Line,
    /// Why the per-CPU samples are summarised, as the samples' file says, when they are.
    pub per_cpu_summarised: Option<String>,
    /// Page cache waiting to be written back (Dirty), MB (10^6 bytes), per sample.
    pub dirty_mb: Line,
    /// Page cache being written back (Writeback), MB, per sample.
    pub writeback_mb: Line,
    /// CPU of each sampled process (iodig, database nodes here and on observed hosts), in %
    /// of one CPU per sample, 0 while it was gone: (name, points).
    pub proc_cpu: Vec<(String, Line)>,
    /// The database's flushes, compactions and file deletions (`db-events.jsonl.gz`); flushes and
    /// compactions are shaded on the charts.
    pub events: Vec<DbEvent>,
    /// The IO summary's rows, one per op with IO; empty without a trace.
    pub io_rows: Vec<IoRow>,
    /// Who issued the IO (eBPF attribution), per op × activity class; empty without
    /// attribution.
    pub classes: Vec<ShareRow>,
    /// The same per op × node: managed node's address, other cgroup's path, or `(no cgroup)`.
    pub nodes: Vec<ShareRow>,
    /// The attribution self-check, worded; none without attribution.
    pub attribution_check: Option<String>,
    /// Each node observed over SSH: its IO in this step.
    pub cluster_nodes: Vec<super::cluster::NodeIo>,
    /// What flush and compaction IO did to the client and to the other classes' IO.
    pub background: Option<Background>,
    /// Block size histograms per op in power-of-two bins; empty without size histograms
    /// (diskstats mode or no trace).
    pub size_hists: Vec<SizeHist>,
    /// Dominant size buckets per op at the trace's 4 KiB resolution.
    pub bands: Vec<OpBands>,
    /// Every IO by size, from the per-IO stream (`run --events`), when the step has one.
    pub per_io: Option<super::per_io::PerIo>,
    /// The seconds whose client p99 stood out, each with its most likely cause (computed
    /// over every place of the step, so held by the step's own view, not its node views).
    pub slow_seconds: Vec<super::slow::SlowSecond>,
    /// Reads' and writes' per-second OS time against device time.
    pub levels: Vec<super::levels::LevelRow>,
    /// Device reads per database read, page cache and memory (traced steps that read).
    pub storage: Option<super::storage::StorageBound>,
    /// Each traced disk's own statistics beside the trace's, or why it has none; empty when
    /// the step has no `device-stats.json`.
    pub device_stats: Vec<super::device_stats::DeviceStatsView>,
    /// `ebpf`, `diskstats` or `off`: the trace's own word, else run.json's.
    pub trace_mode: String,
    /// Why that mode ran when it is not the one asked for (the fallback reason), when said.
    pub trace_note: Option<String>,
    /// The tracer's totals against /proc/diskstats over the step, in words (eBPF mode).
    pub diskstats_check: Option<String>,
    /// What the return codes say (all failed, NOT_FOUND): listed up front whatever the run's length.
    pub warnings: Vec<String>,
    /// The step's findings, each a sentence with its numbers (docs/report.md, "Findings rules").
    pub findings: Vec<String>,
}

impl StepView {
    /// Keeps of each chart line only its highest point, and of the latency heat maps nothing,
    /// here and in the node views: what a comparison reads of a step (each figure's peak),
    /// without every second of every chart held for every step of every run.
    pub fn keep_peaks(&mut self) {
        fn peak(line: &mut Line) {
            // NaN marks a gap, not a value: as the comparison's max ignores it.
            let top = line
                .iter()
                .copied()
                .filter(|p| !p.1.is_nan())
                .max_by(|a, b| a.1.total_cmp(&b.1));
            *line = top.into_iter().collect();
        }
        for line in [
            &mut self.ops_per_sec,
            &mut self.qd_mean,
            &mut self.qd_max,
            &mut self.cpu_busy,
            &mut self.cpu_iowait,
            &mut self.cpu_busiest,
            &mut self.dirty_mb,
            &mut self.writeback_mb,
        ] {
            peak(line);
        }
        for line in self.lat_mean_ms.values_mut() {
            peak(line);
        }
        for (_, line) in &mut self.proc_cpu {
            peak(line);
        }
        for io in self.io.values_mut() {
            for line in [
                &mut io.mb_s,
                &mut io.mb_s_max,
                &mut io.iops,
                &mut io.lat_max_ms,
                &mut io.lat_p99_ms,
                &mut io.os_p99_ms,
                &mut io.os_max_ms,
            ] {
                peak(line);
            }
            io.lat_octaves.clear();
        }
        for n in &mut self.node_views {
            n.keep_peaks();
        }
    }

    /// What a reader must know before trusting the step's figures; empty when nothing.
    pub fn caveats(&self) -> Vec<String> {
        let mut c = Vec::new();
        if self.outcome.all_failed() {
            c.push("all failed".to_string());
        }
        c.extend(self.outcome.not_found_mark());
        if self.interrupted {
            c.push("interrupted".to_string());
        }
        if self.ended_early.is_some() {
            c.push("ended early".to_string());
        }
        c
    }
}

/// The tracer's self-check against the kernel's own counters, as the report states it: equal
/// on every device and op, or each difference with its size and whether IO at the window's
/// edges explains it, and the completions the kernel did not run the tracer for.
pub fn diskstats_sentence(trace: &iodig_model::trace::TraceDoc) -> Option<String> {
    let verdict = trace.self_check.diskstats_match?;
    let mut differ = Vec::new();
    for d in &trace.devices {
        for c in d
            .diskstats_check
            .iter()
            .filter(|c| c.tracer_ios != c.diskstats_ios)
        {
            let diff = c.tracer_ios as f64 - c.diskstats_ios as f64;
            differ.push(format!(
                "{} {}: {} IOs traced against {} in /proc/diskstats ({:+.2} %)",
                d.name,
                c.op,
                c.tracer_ios,
                c.diskstats_ios,
                100.0 * diff / (c.diskstats_ios.max(1)) as f64
            ));
        }
    }
    let unseen = match trace.self_check.completions_unseen {
        Some(n) if n > 0 => format!(
            " The kernel did not run the tracer's completion program for {n} requests; the tracer counted them when their requests were used again (docs/tracing.md)."
        ),
        _ => String::new(),
    };
    if differ.is_empty() {
        return Some(format!(
            "Tracer self-check: the traced IO counts equal /proc/diskstats on every device and op.{unseen}"
        ));
    }
    let why = if verdict {
        "within what IO completing at the window's edges explains (64 IOs or 0.1 %)"
    } else {
        "more than IO completing at the window's edges explains (64 IOs or 0.1 %)"
    };
    Some(format!(
        "Tracer self-check: {}; {why}; the other counts are equal.{unseen}",
        differ.join("; ")
    ))
}

pub(super) fn step_view(step: &StepData) -> StepView {
    let sum = &step.summary;
    let (ops, lat_p99, lat_mean) = client_lines(step);
    let (io, qd_mean, qd_max) = step.trace.as_ref().map(io_lines).unwrap_or_default();
    let [busy, iowait, dirty, wb, busiest] = sys_lines(step);
    let (trace_mode, trace_note) = trace_mode(step);
    let outcome = Outcome::of(sum);
    let attribution = step.trace.as_ref().and_then(|t| t.attribution());
    let mut v = StepView {
        place: step.place.clone(),
        node_views: Vec::new(),
        rollup: None,
        host_findings: Vec::new(),
        place_notes: Vec::new(),
        trace_window_ms: step
            .trace
            .as_ref()
            .map_or(0, |t| t.end_unix_ms.saturating_sub(t.start_unix_ms)),
        index: sum.index,
        title: step.title(),
        label: step.label(),
        phase: sum.phase.clone(),
        workload: sum.workload.clone(),
        threads: sum.threads,
        target_ops_per_sec: sum.target_ops_per_sec,
        operations: sum.operations,
        throughput_ops_per_sec: sum.throughput_ops_per_sec,
        interrupted: sum.interrupted,
        ended_early: sum.ended_early.clone(),
        warnings: outcome
            .findings(sum.operations)
            .into_iter()
            .chain(sum.ended_early.iter().map(|r| {
                format!(
                    "It ended after {:.1} s: {r}.",
                    sum.runtime_ms as f64 / 1000.0
                )
            }))
            .collect(),
        outcome,
        start_ms: sum.started_unix_ms as f64,
        end_ms: step.end_unix_ms() as f64,
        ops_per_sec: ops,
        lat_p99_ms: lat_p99,
        lat_mean_ms: lat_mean,
        io,
        qd_mean,
        qd_max,
        cpu_busy: busy,
        cpu_iowait: iowait,
        cpu_busiest: busiest,
        per_cpu_summarised: step.sys.as_ref().and_then(|s| s.per_cpu_summarised.clone()),
        dirty_mb: dirty,
        writeback_mb: wb,
        proc_cpu: proc_cpu_lines(step),
        events: step.events.clone(),
        io_rows: step.trace.as_ref().map(io_rows).unwrap_or_default(),
        classes: attribution.map(class_shares).unwrap_or_default(),
        nodes: attribution.map(node_shares).unwrap_or_default(),
        attribution_check: attribution.map(check_sentence),
        cluster_nodes: Vec::new(),
        background: background(step),
        size_hists: step
            .trace
            .as_ref()
            .filter(|t| t.histograms)
            .map(size_hists)
            .unwrap_or_default(),
        bands: step
            .trace
            .as_ref()
            .filter(|t| t.histograms)
            .map(op_bands)
            .unwrap_or_default(),
        per_io: super::per_io::per_io(step),
        slow_seconds: Vec::new(),
        levels: Vec::new(),
        diskstats_check: step.trace.as_ref().and_then(diskstats_sentence),
        storage: super::storage::storage_bound(step),
        device_stats: super::device_stats::device_stats(step),
        trace_mode,
        trace_note,
        findings: Vec::new(),
    };
    v.levels = super::levels::levels(&v.io);
    v.findings = step_findings(step, &v);
    v
}

/// Client ops/s, and per op the p99 and mean latency in ms, per second.
fn client_lines(step: &StepData) -> (Line, BTreeMap<String, Line>, BTreeMap<String, Line>) {
    let mut lat_p99 = BTreeMap::new();
    let mut lat_mean = BTreeMap::new();
    let mut ops = Vec::with_capacity(step.timeseries.len());
    for s in &step.timeseries {
        // Client samples end at unix_ms; draw them at the middle of their interval.
        let x = s.unix_ms as f64 - s.secs * 500.0;
        ops.push((x, s.ops_per_sec));
        for (name, v) in &s.series {
            if is_primary_series(name) && v.count > 0 {
                lat_p99
                    .entry(name.clone())
                    .or_insert_with(Vec::new)
                    .push((x, v.p99_us as f64 / 1000.0));
                lat_mean
                    .entry(name.clone())
                    .or_insert_with(Vec::new)
                    .push((x, v.mean_us / 1000.0));
            }
        }
    }
    (ops, lat_p99, lat_mean)
}

/// CPU busy and iowait (%), memory dirty and under writeback (MB), and the busiest CPU's busy %
/// where the samples keep it, per second.
fn sys_lines(step: &StepData) -> [Line; 5] {
    let (mut busy, mut iowait, mut dirty, mut wb, mut busiest) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if let Some(sys) = &step.sys {
        for s in &sys.samples {
            let x = s.unix_ms as f64 - s.secs * 500.0;
            busy.push((x, s.cpu.busy()));
            iowait.push((x, s.cpu.iowait));
            dirty.push((x, s.mem.dirty_bytes as f64 / 1e6));
            wb.push((x, s.mem.writeback_bytes as f64 / 1e6));
            if let Some(spread) = &s.cpu_spread {
                busiest.push((x, spread.busiest_pct));
            }
        }
    }
    [busy, iowait, dirty, wb, busiest]
}

/// Each sampled process's CPU per sample: the local ones by their label, an observed host's as
/// `HOST: label`.
fn proc_cpu_lines(step: &StepData) -> Vec<(String, Line)> {
    let observed = step
        .nodes
        .iter()
        .filter_map(|n| Some((Some(n.step.host.as_str()), n.sys.as_ref()?)));
    step.sys
        .iter()
        .map(|sys| (None, sys))
        .chain(observed)
        .flat_map(|(host, sys)| proc_cpu(sys, host))
        .collect()
}

/// One sampler's processes' CPU (% of one CPU) per sample, named `HOST: label` with a host. A
/// process that is gone used no CPU, so it reads 0 until it runs again (a node killed and
/// restarted); the sample that found it back spans two processes and has no figure.
fn proc_cpu(sys: &SysDoc, host: Option<&str>) -> Vec<(String, Line)> {
    sys.processes
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let points: Line = sys
                .samples
                .iter()
                .filter_map(|s| {
                    let x = s.unix_ms as f64 - s.secs * 500.0;
                    let sample = s.procs.get(i)?;
                    match (&sample.stats, sample.state) {
                        (Some(st), _) => Some((x, st.cpu_pct())),
                        (None, ProcState::Exited) => Some((x, 0.0)),
                        (None, _) => None,
                    }
                })
                .collect();
            let name = match host {
                Some(h) => format!("{h}: {}", p.label),
                None => p.label.clone(),
            };
            (!points.is_empty()).then_some((name, points))
        })
        .collect()
}

/// The trace mode the step ran with (the trace's own word first) and why it differs, if said.
fn trace_mode(step: &StepData) -> (String, Option<String>) {
    let sum = &step.summary;
    match (&step.trace, &sum.trace_mode) {
        (Some(t), _) => (t.mode.clone(), t.note.clone().or(sum.trace_note.clone())),
        (None, Some(m)) => (m.clone(), sum.trace_note.clone()),
        (None, None) => ("off".into(), sum.trace_note.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::diskstats_sentence;
    use iodig_model::trace::{DeviceTrace, DiskstatsCheck, SelfCheck, TraceDoc};

    #[test]
    fn a_process_reads_zero_while_down_and_has_no_figure_for_the_second_it_came_back() {
        use iodig_model::sys::{ProcInfo, ProcSample, ProcState, ProcStats, SysDoc, SysSample};
        let at = |unix_ms: u64, state: ProcState, cpu: Option<f64>| SysSample {
            unix_ms,
            secs: 1.0,
            procs: vec![ProcSample {
                label: "node".into(),
                pid: 1,
                state,
                stats: cpu.map(|c| ProcStats {
                    cpu_user_pct: c,
                    ..Default::default()
                }),
            }],
            ..Default::default()
        };
        let sys = SysDoc {
            processes: vec![ProcInfo {
                label: "node 127.0.0.2:9042".into(),
                ..Default::default()
            }],
            samples: vec![
                at(1_000, ProcState::Running, Some(150.0)),
                at(2_000, ProcState::Exited, None),
                at(3_000, ProcState::Running, None),
                at(4_000, ProcState::Running, Some(90.0)),
            ],
            ..Default::default()
        };
        let lines = super::proc_cpu(&sys, Some("db2"));
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].0, "db2: node 127.0.0.2:9042");
        assert_eq!(
            lines[0].1,
            vec![(500.0, 150.0), (1_500.0, 0.0), (3_500.0, 90.0)]
        );
        let never = SysDoc {
            samples: vec![at(1_000, ProcState::Missing, None)],
            ..sys
        };
        assert!(
            super::proc_cpu(&never, None).is_empty(),
            "no line for a process never seen"
        );
    }

    fn doc(traced: u64, in_diskstats: u64, agrees: bool, unseen: Option<u64>) -> TraceDoc {
        TraceDoc {
            mode: "ebpf".into(),
            end_unix_ms: 1000,
            slot_ms: 100,
            histograms: true,
            devices: vec![DeviceTrace {
                name: "vda".into(),
                dev: "254:0".into(),
                diskstats_check: vec![DiskstatsCheck {
                    op: "read".into(),
                    tracer_ios: traced,
                    diskstats_ios: in_diskstats,
                    tracer_sectors: traced * 8,
                    diskstats_sectors: in_diskstats * 8,
                }],
                ..Default::default()
            }],
            self_check: SelfCheck {
                diskstats_match: Some(agrees),
                completions_unseen: unseen,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn equal_only_when_every_count_is() {
        let s = diskstats_sentence(&doc(500, 500, true, Some(0))).unwrap();
        assert!(s.contains("equal /proc/diskstats on every device"), "{s}");
        assert!(!s.contains("did not run"), "{s}");
        let s = diskstats_sentence(&doc(500, 500, true, Some(32))).unwrap();
        assert!(
            s.contains("equal /proc/diskstats on every device")
                && s.contains("program for 32 requests; the tracer counted them"),
            "{s}"
        );

        let s = diskstats_sentence(&doc(490, 500, true, Some(0))).unwrap();
        assert!(!s.contains("on every device"), "{s}");
        assert!(
            s.contains("vda read: 490 IOs traced against 500 in /proc/diskstats (-2.00 %)")
                && s.contains("within what IO completing at the window's edges explains"),
            "{s}"
        );
        assert!(!s.contains("did not run"), "{s}");

        let s = diskstats_sentence(&doc(300_000, 300_544, false, Some(512))).unwrap();
        assert!(
            s.contains("more than IO completing at the window's edges explains")
                && s.contains("did not run the tracer's completion program for 512 requests"),
            "{s}"
        );
    }
}
