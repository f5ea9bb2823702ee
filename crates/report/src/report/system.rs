//! A step's system charts: CPU busy and iowait, memory waiting for and under writeback, and the
//! CPU of iodig and the database's processes.

use super::step::{line, Timeline};
use crate::analysis::StepView;
use crate::doc::Doc;

pub(super) fn charts(doc: &mut Doc, s: &StepView, t: &Timeline) {
    let mut c = t.chart("CPU (all CPUs)", "CPU time (%)");
    c.series.push(line("busy", &s.cpu_busy, 0, false));
    c.series.push(line("iowait", &s.cpu_iowait, 1, false));
    if !s.cpu_busiest.is_empty() {
        c.series.push(line("busiest CPU", &s.cpu_busiest, 3, false));
    }
    doc.line_chart(c);
    if let Some(why) = &s.per_cpu_summarised {
        // Said where the CPU is shown: the one CPU line left is the busiest, not a CPU's own.
        doc.p(format!(
            "The busiest CPU's busy % is each second's busiest, whichever CPU it was: {why}."
        ));
    }
    let mut c = t.chart("Memory waiting for and under writeback", "memory (MB)");
    c.series.push(line("dirty", &s.dirty_mb, 4, false));
    c.series.push(line("writeback", &s.writeback_mb, 6, false));
    doc.line_chart(c);
    if !s.proc_cpu.is_empty() {
        let mut c = t.chart(
            "CPU of iodig and the database processes (0 while one is down)",
            "CPU (% of one CPU)",
        );
        for (i, (name, points)) in s.proc_cpu.iter().enumerate() {
            c.series.push(line(name.clone(), points, i, false));
        }
        doc.line_chart(c);
    }
}
