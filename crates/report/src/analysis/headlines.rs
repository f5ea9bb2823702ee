//! The report's front page: a handful of headline findings, each the worst case of one story
//! the briefs tell (write bursts behind the mean, the queue leaping, reads slow in the OS or on
//! the device, the client slowed by flushes, the size mix, memory serving the reads), each
//! naming the node and step where it is worst, with the chart that shows it. The sentence is
//! the findings rule's own, so the front page and the step's section say the same thing.

use super::step::StepView;
use super::sweep::WorkloadSweep;

/// At most this many headlines: the briefs open with a handful of figures, not thirty.
pub const MAX_HEADLINES: usize = 8;

/// What a headline is about, and so which chart shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    /// Write throughput's busiest slot against its mean.
    WriteBursts,
    /// The queue depth's peak.
    QueueDepth,
    /// Device latency outliers against the op's p99.
    DeviceLatency,
    /// Reads' and writes' p99 in the OS queue against the device.
    SystemVsDevice,
    /// The client's p99 while the database flushes or compacts.
    ClientDuringFlush,
    /// The dominant sizes by count and by volume.
    SizeMix,
    /// Reads served from memory.
    NotStorageBound,
    /// A workload's sweep: its peak or where it stops scaling.
    Sweep,
}

/// One headline: its sentence, and where its chart's data is.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// What it is about.
    pub topic: Topic,
    /// The sentence, naming the node (when the database's IO is a node's) and the step.
    pub sentence: String,
    /// Index of the step in the report's `steps`; none for a sweep's headline.
    pub step: Option<usize>,
    /// Index of the node in that step's `node_views`; none when the step's own view tells it.
    pub node: Option<usize>,
    /// For a sweep's headline, the index of the sweep in the report's `sweeps`.
    pub sweep: Option<usize>,
}

/// One topic: how bad a view's case is, and how its finding starts (after any node's name).
/// The severity is of the quantity the finding states, given the finding itself, so a write
/// finding is ranked by writes and a slowdown by its factor.
struct Rule {
    topic: Topic,
    severity: fn(&StepView, &str) -> f64,
    starts: &'static [&'static str],
}

/// The op a finding is about: `write` when it says so first, else `read`.
fn op_of(finding: &str) -> &'static str {
    let f = finding.to_ascii_lowercase();
    if f.starts_with("write") || f.starts_with("device write") {
        "write"
    } else {
        "read"
    }
}

/// The factor a finding states (`… is 3.4× higher …`): the number before its first `×`.
fn stated_factor(finding: &str) -> f64 {
    finding
        .split('×')
        .next()
        .and_then(|head| head.split_whitespace().last())
        .and_then(|n| n.replace(',', "").parse().ok())
        .unwrap_or(0.0)
}

fn line_max(l: Option<&[(f64, f64)]>) -> f64 {
    l.unwrap_or_default()
        .iter()
        .map(|p| p.1)
        .fold(0.0, f64::max)
}

const RULES: [Rule; 7] = [
    Rule {
        topic: Topic::WriteBursts,
        severity: |v, _| {
            let peak = line_max(v.io.get("write").map(|l| &l.mb_s_max[..]));
            let bytes = v
                .io_rows
                .iter()
                .find(|r| r.op == "write")
                .map_or(0, |r| r.bytes);
            let mean = bytes as f64 / 1e6 / (v.trace_window_ms as f64 / 1000.0).max(1e-3);
            if mean > 0.0 {
                peak / mean
            } else {
                0.0
            }
        },
        starts: &["Write bursts reach"],
    },
    Rule {
        topic: Topic::QueueDepth,
        severity: |v, _| line_max(Some(&v.qd_max)),
        starts: &["Queue depth on"],
    },
    Rule {
        topic: Topic::SystemVsDevice,
        severity: |v, f| line_max(v.io.get(op_of(f)).map(|l| &l.os_p99_ms[..])),
        starts: &["Read p99 spikes", "Write p99 spikes"],
    },
    Rule {
        topic: Topic::DeviceLatency,
        severity: |v, f| line_max(v.io.get(op_of(f)).map(|l| &l.lat_max_ms[..])),
        starts: &["Device read latency peaks", "Device write latency peaks"],
    },
    Rule {
        topic: Topic::ClientDuringFlush,
        // "P99 read latency is 3.4× higher while a flush runs": the slowdown it states.
        severity: |_, f| stated_factor(f),
        starts: &["P99 "],
    },
    Rule {
        topic: Topic::SizeMix,
        severity: |v, _| v.io_rows.iter().map(|r| r.bytes as f64).sum(),
        starts: &["Write sizes at", "Read sizes at"],
    },
    Rule {
        topic: Topic::NotStorageBound,
        severity: |v, _| v.storage.as_ref().map_or(0.0, |s| s.db_reads as f64),
        starts: &["Not storage-bound"],
    },
];

/// The findings of `v` a rule matches, without the node's name: the view's findings are
/// `NODE: finding` for a node, the finding itself for the client host.
fn findings_of<'a>(v: &'a StepView, starts: &'a [&str]) -> impl Iterator<Item = &'a str> {
    let prefix = v.place.is_node().then(|| format!("{}: ", v.place.name()));
    v.findings.iter().filter_map(move |f| {
        let body = match &prefix {
            Some(p) => f.strip_prefix(p.as_str())?,
            None => f.as_str(),
        };
        starts
            .iter()
            .any(|s| {
                body.get(..s.len())
                    .is_some_and(|b| b.eq_ignore_ascii_case(s))
            })
            .then_some(body)
    })
}

/// The headlines of a run: the sweeps' peaks and bends (three at most), then per topic the
/// measured step and node where it is worst, at most [`MAX_HEADLINES`] in all.
pub fn headlines(steps: &[StepView], sweeps: &[WorkloadSweep]) -> Vec<Headline> {
    // The sweeps' peaks and bends first, as the briefs open with ops/s and latency, but at most
    // three: the rest of the front page is the IO underneath.
    let mut out: Vec<Headline> = sweeps
        .iter()
        .enumerate()
        .flat_map(|(wi, w)| {
            super::findings::sweep_headlines(w)
                .into_iter()
                .map(move |f| Headline {
                    topic: Topic::Sweep,
                    sentence: f,
                    step: None,
                    node: None,
                    sweep: Some(wi),
                })
        })
        .take(3)
        .collect();
    for rule in &RULES {
        let mut worst: Option<(f64, usize, Option<usize>, &str)> = None;
        for (si, s) in steps.iter().enumerate().filter(|(_, s)| s.phase != "load") {
            let story: Vec<(Option<usize>, &StepView)> = if s.node_views.is_empty() {
                vec![(None, s)]
            } else {
                s.node_views
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (Some(i), n))
                    .collect()
            };
            for (ni, v) in story {
                for f in findings_of(v, rule.starts) {
                    let sev = (rule.severity)(v, f);
                    if worst.is_none_or(|w| sev > w.0) {
                        worst = Some((sev, si, ni, f));
                    }
                }
            }
        }
        if let Some((_, si, ni, f)) = worst {
            let s = &steps[si];
            let at = match ni {
                Some(i) => format!("{} in {}", s.node_views[i].place.name(), s.label),
                None => super::findings::capitalise(&s.label),
            };
            out.push(Headline {
                topic: rule.topic,
                sentence: format!("{at}: {}", lower_first(f)),
                step: Some(si),
                node: ni,
                sweep: None,
            });
        }
    }
    out.truncate(MAX_HEADLINES);
    out
}

/// "write bursts …" from "Write bursts …"; an acronym ("IO", "P99") keeps its case.
fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match (c.next(), s.chars().nth(1)) {
        (Some(a), Some(b)) if a.is_uppercase() && b.is_lowercase() => {
            a.to_lowercase().chain(c).collect()
        }
        _ => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Place;

    fn node(name: &str, findings: &[&str], qd: f64) -> StepView {
        StepView {
            place: Place::Node {
                host: name.into(),
                node: Some(format!("{name}:9042")),
            },
            phase: "run".into(),
            findings: findings.iter().map(|f| format!("{name}: {f}")).collect(),
            qd_max: vec![(1500.0, qd)],
            ..Default::default()
        }
    }

    #[test]
    fn each_topic_names_the_node_and_step_where_it_is_worst() {
        let step = |index: usize, nodes: Vec<StepView>| StepView {
            index,
            label: format!("step {index} (workloada × 32 threads)"),
            phase: "run".into(),
            node_views: nodes,
            ..Default::default()
        };
        let steps = vec![
            step(
                1,
                vec![
                    node(
                        "10.0.0.1",
                        &["Queue depth on sda peaks at 90 against a mean of 3.0."],
                        90.0,
                    ),
                    node("10.0.0.2", &[], 4.0),
                ],
            ),
            step(
                2,
                vec![
                    node("10.0.0.1", &[], 10.0),
                    node(
                        "10.0.0.2",
                        &["Queue depth on sdb peaks at 812 against a mean of 20.0."],
                        812.0,
                    ),
                ],
            ),
        ];
        let h = headlines(&steps, &[]);
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!(h[0].topic, Topic::QueueDepth);
        assert_eq!((h[0].step, h[0].node), (Some(1), Some(1)));
        assert_eq!(
            h[0].sentence,
            "10.0.0.2 in step 2 (workloada × 32 threads): queue depth on sdb peaks at 812 against a mean of 20.0."
        );
    }

    #[test]
    fn a_slowdown_is_ranked_by_its_factor_and_a_write_finding_by_writes() {
        use crate::analysis::IoLines;
        let step = |index: usize, threads: u64, findings: &[&str], read_os: f64, write_os: f64| {
            let mut io = std::collections::BTreeMap::new();
            for (op, ms) in [("read", read_os), ("write", write_os)] {
                io.insert(
                    op.to_string(),
                    IoLines {
                        os_p99_ms: vec![(1500.0, ms)],
                        ..Default::default()
                    },
                );
            }
            StepView {
                index,
                threads,
                label: format!("step {index}"),
                phase: "run".into(),
                findings: findings.iter().map(ToString::to_string).collect(),
                io,
                ..Default::default()
            }
        };
        let steps = vec![
            step(
                1,
                64,
                &["P99 read latency is 1.6× higher while a flush runs (2 ms vs 1 ms)."],
                1.0,
                1.0,
            ),
            step(
                2,
                8,
                &[
                    "P99 read latency is 4.2× higher while a flush runs (4 ms vs 1 ms).",
                    "Write p99 spikes are system level: …",
                ],
                50.0,
                3.0,
            ),
            step(3, 4, &["Write p99 spikes are system level: …"], 1.0, 30.0),
        ];
        let h = headlines(&steps, &[]);
        let of = |t: Topic| h.iter().find(|x| x.topic == t).unwrap();
        // The larger slowdown, not the step with the most threads.
        assert_eq!(of(Topic::ClientDuringFlush).step, Some(1), "{h:?}");
        // The write finding whose writes are slowest in the OS, not the step whose reads are.
        assert_eq!(of(Topic::SystemVsDevice).step, Some(2), "{h:?}");
        assert!(
            of(Topic::SystemVsDevice).sentence.starts_with("Step 3"),
            "{h:?}"
        );
    }
}
