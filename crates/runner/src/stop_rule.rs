//! The sweep's stop rule (`--stop-when 'read.p99 > 50ms'`, `stop_when` in experiment files):
//! once a step meets it, the thread counts after it in that workload's sweep are not run, as the
//! briefs stopped testing a drive "beyond 512 workers due to unreasonably high read latency".
//! The step that met the rule carries a [`SweepStop`] in run.json, so the report and compare
//! show the skipped thread counts as "(not tested)".

use crate::rundir::RunDir;
use anyhow::Result;
use iodig_model::{SeriesSummary, StepSummary, SweepStop};
use std::collections::BTreeSet;
use std::fmt;

/// What a rule may look at: the YCSB series, by the names users write.
const OPS: [(&str, &str); 7] = [
    ("read", "READ"),
    ("update", "UPDATE"),
    ("insert", "INSERT"),
    ("scan", "SCAN"),
    ("delete", "DELETE"),
    ("rmw", "READ-MODIFY-WRITE"),
    ("read-modify-write", "READ-MODIFY-WRITE"),
];

/// The grammar, for every error message.
const HOW: &str = "write OP.STAT > LIMIT, e.g. 'read.p99 > 50ms': OP read|update|insert|scan|delete|rmw, STAT avg|p50|p90|p95|p99|p99.9|p99.99|max, > >= < <=, LIMIT in us, ms or s";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stat {
    Avg,
    P50,
    P90,
    P95,
    P99,
    P999,
    P9999,
    Max,
}

impl Stat {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "avg" | "mean" => Stat::Avg,
            "p50" => Stat::P50,
            "p90" => Stat::P90,
            "p95" => Stat::P95,
            "p99" => Stat::P99,
            "p99.9" | "p999" => Stat::P999,
            "p99.99" | "p9999" => Stat::P9999,
            "max" => Stat::Max,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Stat::Avg => "avg",
            Stat::P50 => "p50",
            Stat::P90 => "p90",
            Stat::P95 => "p95",
            Stat::P99 => "p99",
            Stat::P999 => "p99.9",
            Stat::P9999 => "p99.99",
            Stat::Max => "max",
        }
    }

    fn of(self, s: &SeriesSummary) -> f64 {
        match self {
            Stat::Avg => s.mean_us,
            Stat::P50 => s.p50_us as f64,
            Stat::P90 => s.p90_us as f64,
            Stat::P95 => s.p95_us as f64,
            Stat::P99 => s.p99_us as f64,
            Stat::P999 => s.p999_us as f64,
            Stat::P9999 => s.p9999_us as f64,
            Stat::Max => s.max_us as f64,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Gt,
    Ge,
    Lt,
    Le,
}

impl Cmp {
    fn holds(self, v: f64, limit: f64) -> bool {
        match self {
            Cmp::Gt => v > limit,
            Cmp::Ge => v >= limit,
            Cmp::Lt => v < limit,
            Cmp::Le => v <= limit,
        }
    }

    fn text(self) -> &'static str {
        match self {
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
        }
    }
}

/// A parsed stop rule: one op's latency statistic against a limit.
#[derive(Debug, Clone, PartialEq)]
pub struct StopRule {
    /// YCSB series name (`READ`).
    series: &'static str,
    /// The op as the user wrote it, lower case (`read`, `rmw`).
    op: String,
    stat: Stat,
    cmp: Cmp,
    limit_us: f64,
    /// The limit as written, without spaces (`50ms`).
    limit_text: String,
}

impl StopRule {
    /// Parses `read.p99 > 50ms`; the error names the rule and shows the grammar.
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("stop rule {s:?}: {why}; {HOW}");
        let t = s.trim();
        let at = t
            .find(['>', '<'])
            .ok_or_else(|| bad("no comparison (> >= < <=)"))?;
        let (lhs, rest) = t.split_at(at);
        let (cmp, rhs) = if let Some(r) = rest.strip_prefix(">=") {
            (Cmp::Ge, r)
        } else if let Some(r) = rest.strip_prefix("<=") {
            (Cmp::Le, r)
        } else if let Some(r) = rest.strip_prefix('>') {
            (Cmp::Gt, r)
        } else {
            (Cmp::Lt, &rest[1..])
        };
        let lhs = lhs.trim().to_ascii_lowercase();
        let (op, stat) = lhs
            .split_once('.')
            .ok_or_else(|| bad("the left side is not OP.STAT"))?;
        let series = OPS
            .iter()
            .find(|(name, _)| *name == op)
            .map(|(_, series)| *series)
            .ok_or_else(|| bad(&format!("unknown operation {op:?}")))?;
        let stat = Stat::parse(stat).ok_or_else(|| bad(&format!("unknown statistic {stat:?}")))?;
        let limit_text: String = rhs.chars().filter(|c| !c.is_whitespace()).collect();
        let split = limit_text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(limit_text.len());
        let (num, unit) = limit_text.split_at(split);
        let v: f64 = num.parse().map_err(|_| {
            bad(&format!(
                "the limit {limit_text:?} is not a number with a unit"
            ))
        })?;
        let scale = match unit {
            "us" | "µs" => 1.0,
            "ms" => 1e3,
            "s" => 1e6,
            "" => return Err(bad(&format!("the limit {limit_text:?} has no unit"))),
            u => return Err(bad(&format!("unknown unit {u:?}"))),
        };
        if !(v.is_finite() && v > 0.0) {
            return Err(bad("the limit must be above 0"));
        }
        Ok(StopRule {
            series,
            op: op.to_string(),
            stat,
            cmp,
            limit_us: v * scale,
            limit_text,
        })
    }

    /// When the step meets the rule, what it measured against the limit (`read.p99 62.3 ms >
    /// 50ms`); a step without that op never meets it.
    pub fn met_by(&self, step: &StepSummary) -> Option<String> {
        let s = step.series.get(self.series).filter(|s| s.count > 0)?;
        let v = self.stat.of(s);
        self.cmp.holds(v, self.limit_us).then(|| {
            format!(
                "{}.{} {} ms {} {}",
                self.op,
                self.stat.name(),
                ms(v),
                self.cmp.text(),
                self.limit_text
            )
        })
    }
}

/// A latency in µs as ms with three significant-ish decimals.
fn ms(us: f64) -> String {
    let m = us / 1000.0;
    if m >= 100.0 {
        format!("{m:.1}")
    } else {
        format!("{m:.3}")
    }
}

impl fmt::Display for StopRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{} {} {}",
            self.op,
            self.stat.name(),
            self.cmp.text(),
            self.limit_text
        )
    }
}

impl std::str::FromStr for StopRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        StopRule::parse(s)
    }
}

/// The sweep's side of the rule: which workload × thread counts are no longer run.
#[derive(Debug, Default)]
pub struct SweepStops {
    rule: Option<StopRule>,
    skipped: BTreeSet<(String, u64)>,
}

impl SweepStops {
    /// Nothing skipped yet; with no rule nothing ever is.
    pub fn new(rule: Option<StopRule>) -> Self {
        SweepStops {
            rule,
            skipped: BTreeSet::new(),
        }
    }

    /// Whether the rule took `threads` out of `workload`'s sweep (in an earlier repetition too).
    pub fn skips(&self, workload: &str, threads: u64) -> bool {
        self.skipped.contains(&(workload.to_string(), threads))
    }

    /// A step of a resumed run met the rule before the run stopped: the thread counts it took
    /// out of `workload`'s sweep stay out.
    pub fn replay(&mut self, workload: &str, skipped: &[u64]) {
        for &t in skipped {
            self.skipped.insert((workload.to_string(), t));
        }
    }

    /// After the run's last step (of `workload` at `threads`, in the order of `sweep`): when
    /// it meets the rule, the thread counts after it are skipped and the step records why in
    /// run.json.
    pub fn after_step(
        &mut self,
        run: &mut RunDir,
        workload: &str,
        sweep: &[u64],
        threads: u64,
    ) -> Result<()> {
        let Some(rule) = &self.rule else {
            return Ok(());
        };
        let Some(step) = run.doc.steps.last_mut() else {
            return Ok(());
        };
        let Some(reason) = rule.met_by(step) else {
            return Ok(());
        };
        let later = sweep.iter().skip_while(|&&t| t != threads).skip(1);
        let skipped: Vec<u64> = later
            .copied()
            .filter(|&t| !self.skips(workload, t))
            .collect();
        for &t in &skipped {
            self.skipped.insert((workload.to_string(), t));
        }
        let left_out = if skipped.is_empty() {
            "no thread count left to skip".to_string()
        } else {
            format!(
                "not testing {} threads",
                skipped
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        iodig_model::eprintln_lossy!(
            "stop rule met by {workload} at {threads} threads ({reason}): {left_out}"
        );
        step.sweep_stop = Some(SweepStop { reason, skipped });
        run.save()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn step(read_p99_us: u64) -> StepSummary {
        let mut series = BTreeMap::new();
        series.insert(
            "READ".to_string(),
            SeriesSummary {
                count: 10,
                mean_us: 900.0,
                p99_us: read_p99_us,
                ..Default::default()
            },
        );
        StepSummary {
            index: 1,
            phase: "run".into(),
            dir: String::new(),
            workload: "workloada".into(),
            threads: 8,
            target_ops_per_sec: None,
            started_unix_ms: 0,
            runtime_ms: 1000,
            operations: 10,
            throughput_ops_per_sec: 10.0,
            interrupted: false,
            series,
            returns: BTreeMap::new(),
            trace_mode: None,
            trace_note: None,
            client_cpu_s: None,
            nodes: Vec::new(),
            sweep_stop: None,
            node_reads: Default::default(),
            node_reads_notes: Vec::new(),
            ended_early: None,
        }
    }

    #[test]
    fn rules_parse_with_any_spacing_and_unit() {
        let r = StopRule::parse("read.p99 > 50ms").unwrap();
        assert_eq!(r.series, "READ");
        assert_eq!(r.stat, Stat::P99);
        assert_eq!(r.cmp, Cmp::Gt);
        assert_eq!(r.limit_us, 50_000.0);
        assert_eq!(r.to_string(), "read.p99 > 50ms");
        let r = StopRule::parse("  UPDATE.p99.99>=1.5 s ").unwrap();
        assert_eq!((r.series, r.stat, r.cmp), ("UPDATE", Stat::P9999, Cmp::Ge));
        assert_eq!(r.limit_us, 1_500_000.0);
        assert_eq!(r.to_string(), "update.p99.99 >= 1.5s");
        let r = StopRule::parse("rmw.avg<=800us").unwrap();
        assert_eq!(
            (r.series, r.stat, r.cmp),
            ("READ-MODIFY-WRITE", Stat::Avg, Cmp::Le)
        );
        assert_eq!(r.limit_us, 800.0);
        assert_eq!(StopRule::parse("read.max < 2µs").unwrap().limit_us, 2.0);
    }

    #[test]
    fn bad_rules_say_what_is_wrong_and_how_to_write_one() {
        for (rule, why) in [
            ("read.p99 50ms", "no comparison"),
            ("p99 > 50ms", "not OP.STAT"),
            ("reads.p99 > 50ms", "unknown operation \"reads\""),
            ("read.p98 > 50ms", "unknown statistic \"p98\""),
            ("read.p99 > 50", "has no unit"),
            ("read.p99 > 50 min", "unknown unit \"min\""),
            ("read.p99 > fast", "not a number"),
            ("read.p99 > 0ms", "above 0"),
            ("read.p99 > ", "not a number"),
        ] {
            let e = StopRule::parse(rule).unwrap_err();
            assert!(e.contains(why), "{rule}: {e}");
            assert!(e.contains(&format!("{rule:?}")), "{rule}: {e}");
            assert!(e.contains("e.g. 'read.p99 > 50ms'"), "{e}");
        }
    }

    #[test]
    fn a_step_meets_the_rule_on_its_own_figures() {
        let r = StopRule::parse("read.p99 > 50ms").unwrap();
        assert_eq!(r.met_by(&step(50_000)), None, "not above the limit");
        assert_eq!(
            r.met_by(&step(62_345)).as_deref(),
            Some("read.p99 62.345 ms > 50ms")
        );
        let avg = StopRule::parse("read.avg >= 0.9ms").unwrap();
        assert!(avg.met_by(&step(1)).is_some());
        let scan = StopRule::parse("scan.p99 > 1us").unwrap();
        assert_eq!(scan.met_by(&step(1_000_000)), None, "no SCAN in the step");
    }
}
