//! A step's system charts: CPU busy and iowait, memory waiting for and under writeback.

use super::step::{line, Timeline};
use crate::analysis::StepView;
use crate::doc::Doc;

pub(super) fn charts(doc: &mut Doc, s: &StepView, t: &Timeline) {
    let mut c = t.chart("CPU (all CPUs)", "CPU time (%)");
    c.series.push(line("busy", &s.cpu_busy, 0, false));
    c.series.push(line("iowait", &s.cpu_iowait, 1, false));
    doc.line_chart(c);
    let mut c = t.chart("Memory waiting for and under writeback", "memory (MB)");
    c.series.push(line("dirty", &s.dirty_mb, 4, false));
    c.series.push(line("writeback", &s.writeback_mb, 6, false));
    doc.line_chart(c);
}
