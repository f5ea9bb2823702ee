//! Progress on stderr: a live bar on a terminal (with each place's IO beside ops/s and p99),
//! YCSB-style status lines otherwise (every `status.interval` seconds), nothing in CI unless
//! asked for with `-s`.

use crate::live::{LiveHub, PlaceLine};
use crate::step_plan::{Phase, StepPlan};
use indicatif::{ProgressBar, ProgressStyle};
use iodig_model::Sample;
use iodig_stats::SeriesSet;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A live progress bar: stderr is a terminal, outside CI.
    Bar,
    /// YCSB-style status lines on stderr, one every `every_secs`.
    Lines {
        /// Seconds between lines (`status.interval`, default 10; at least 1).
        every_secs: u64,
    },
    /// Nothing: in CI without `-s`.
    Quiet,
}

impl ProgressMode {
    /// A bar on a terminal; plain lines when `-s` is given or stderr is a file outside CI.
    pub fn detect(status_flag: bool, every_secs: u64) -> Self {
        let ci = std::env::var_os("CI").is_some();
        if std::io::stderr().is_terminal() && !ci {
            ProgressMode::Bar
        } else if status_flag || !ci {
            ProgressMode::Lines {
                every_secs: every_secs.max(1),
            }
        } else {
            ProgressMode::Quiet
        }
    }
}

/// The progress display of the current step.
pub struct Progress {
    mode: ProgressMode,
    label: String,
    bar: Option<ProgressBar>,
    last_line_secs: u64,
    /// The run's live figures: the bar shows each place's IO from them, and the collector
    /// publishes the client's seconds to them.
    live: Arc<LiveHub>,
}

impl Progress {
    /// A display in `mode`, with no step yet.
    pub fn new(mode: ProgressMode) -> Self {
        Self::watched(mode, Arc::new(LiveHub::new()))
    }

    /// A display in `mode` that shows, and publishes to, the run's live figures.
    pub fn watched(mode: ProgressMode, live: Arc<LiveHub>) -> Self {
        Self {
            mode,
            label: String::new(),
            bar: None,
            last_line_secs: 0,
            live,
        }
    }

    /// The run's live figures.
    pub(crate) fn live(&self) -> Arc<LiveHub> {
        Arc::clone(&self.live)
    }

    /// Names the step shown on the following lines (e.g. `workloada t=8`).
    pub fn set_label(&mut self, label: impl Into<String>) {
        self.label = label.into();
    }

    pub(crate) fn phase_started(&mut self, plan: &StepPlan) {
        self.last_line_secs = 0;
        if self.mode != ProgressMode::Bar {
            return;
        }
        let (len, unit) = match (plan.operation_count, plan.max_execution) {
            (n, _) if n > 0 => (n, "ops"),
            (_, Some(d)) => (d.as_secs().max(1), "s"),
            _ => (0, "ops"),
        };
        let bar = if len > 0 {
            ProgressBar::new(len)
        } else {
            ProgressBar::new_spinner()
        };
        let template = format!("{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {unit} {{msg}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(format!("{} {}", plan.phase.name(), self.label));
        if !plan.warmup.is_zero() {
            bar.set_message(format!("warming up {:.0}s", plan.warmup.as_secs_f64()));
        }
        bar.enable_steady_tick(Duration::from_millis(250));
        self.live.set_bar(Some(bar.clone()));
        self.bar = Some(bar);
    }

    pub(crate) fn tick(
        &mut self,
        plan: &StepPlan,
        totals: &SeriesSet,
        operations: u64,
        elapsed: Duration,
        last: Option<&Sample>,
    ) {
        let rate = last.map_or(0.0, |s| s.ops_per_sec);
        match self.mode {
            ProgressMode::Quiet => {}
            ProgressMode::Bar => {
                if let Some(bar) = &self.bar {
                    let pos = if plan.operation_count > 0 {
                        operations
                    } else {
                        elapsed.as_secs()
                    };
                    bar.set_position(pos);
                    let io = io_brief(&self.live.place_lines());
                    bar.set_message(format!("{:.0} ops/s {}{io}", rate, brief(last)));
                }
            }
            ProgressMode::Lines { every_secs } => {
                let secs = elapsed.as_secs();
                if secs >= self.last_line_secs + every_secs {
                    self.last_line_secs = secs;
                    iodig_model::eprintln_lossy!(
                        "{}",
                        status_line(&self.label, plan.phase, secs, operations, rate, totals)
                    );
                }
            }
        }
    }

    pub(crate) fn finished(&mut self) {
        if let Some(bar) = self.bar.take() {
            self.live.set_bar(None);
            bar.finish_and_clear();
        }
    }
}

fn brief(last: Option<&Sample>) -> String {
    last.map(|s| {
        s.series
            .iter()
            .filter(|(n, _)| !n.contains('-') || n.as_str() == "READ-MODIFY-WRITE")
            .map(|(n, v)| format!("{n} p99={}us", v.p99_us))
            .collect::<Vec<_>>()
            .join(" ")
    })
    .unwrap_or_default()
}

/// Each place's IO for the bar: ` | client write 12.3 MB/s (step mean 4.1) qd≤37 flush`.
pub fn io_brief(places: &[PlaceLine]) -> String {
    let mut out = String::new();
    for p in places {
        out.push_str(&format!(
            " | {} write {:.1} MB/s (step mean {:.1}) qd≤{}",
            p.place, p.write_mb_s, p.write_mean_mb_s, p.qd_peak
        ));
        for class in &p.background {
            // `rocksdb.flush` → `flush`: the place already says whose.
            out.push(' ');
            out.push_str(class.rsplit('.').next().unwrap_or(class));
        }
    }
    out
}

/// YCSB's `-s` status line: `<secs> sec: <ops> operations; <rate> current ops/sec; [READ: …]`.
pub fn status_line(
    label: &str,
    phase: Phase,
    secs: u64,
    operations: u64,
    rate: f64,
    totals: &SeriesSet,
) -> String {
    let mut line = format!(
        "{} {label} {secs} sec: {operations} operations; {rate:.2} current ops/sec;",
        phase.name()
    );
    for (name, s) in totals.summaries() {
        line.push_str(&format!(
            " [{name}: Count={}, Max={}, Min={}, Avg={:.2}, 90={}, 99={}, 99.9={}, 99.99={}]",
            s.count, s.max_us, s.min_us, s.mean_us, s.p90_us, s.p99_us, s.p999_us, s.p9999_us
        ));
    }
    line
}
