//! The steps table: every step, the load included, with what its return codes and end say.

use crate::analysis::{status_text, Report};
use crate::doc::{target_rate, thousands, Doc, Table};

/// One row per step, the load included, with what its return codes and end say.
pub(super) fn section(doc: &mut Doc, report: &Report) {
    doc.h(2, "Steps");
    let mut t = Table::new(&[
        "step",
        "phase",
        "workload",
        "threads",
        "target",
        "operations",
        "ops/s",
        "failed ops",
        "status",
    ])
    .text_columns(&[1, 2, 4, 8]);
    for s in &report.steps {
        t.row(vec![
            s.index.to_string(),
            s.phase.clone(),
            s.workload.clone(),
            s.threads.to_string(),
            target_rate(s.target_ops_per_sec),
            thousands(s.operations as f64),
            thousands(s.throughput_ops_per_sec),
            s.outcome.failed_cell(),
            status_text(&s.caveats()),
        ]);
    }
    doc.table(t);
}
