//! The report's run-level findings (the rules are in [`crate::analysis::findings`]).

use crate::analysis::Report;
use crate::doc::Doc;

pub(super) fn section(doc: &mut Doc, report: &Report) {
    doc.h(2, "Findings");
    if report.steps.len() > 3 {
        doc.p("Each step's own findings (bursts, queue depth, latency during flushes) are listed in its section below.");
    }
    if report.findings.is_empty() {
        doc.p("No finding passed its rule on this data (see docs/report.md for the rules).");
    } else {
        doc.list(report.findings.clone());
    }
}
