//! A step's "who issued the IO" tables: per op and activity class, and per op and node, each
//! with the briefs' "% by IO count / % by volume", and the attribution self-check.

use crate::analysis::attribution::ShareRow;
use crate::analysis::StepView;
use crate::doc::{thousands, Doc, Table};

pub(super) fn tables(doc: &mut Doc, s: &StepView) {
    if s.classes.is_empty() {
        return;
    }
    doc.h(3, "Who issued the IO");
    share_table(doc, "activity", &s.classes);
    // One node (or none) says nothing the class table does not.
    let nodes: Vec<&ShareRow> = s.nodes.iter().filter(|r| r.who != "(no cgroup)").collect();
    if nodes.len() > 1 {
        share_table(doc, "node / cgroup", &s.nodes);
    }
    if let Some(check) = &s.attribution_check {
        doc.p(check.clone());
    }
}

fn share_table(doc: &mut Doc, who: &str, rows: &[ShareRow]) {
    let mut t =
        Table::new(&["op", who, "IOs", "MB", "% by IO count", "% by volume"]).text_columns(&[1]);
    for r in rows {
        t.row(vec![
            r.op.clone(),
            r.who.clone(),
            thousands(r.ios as f64),
            format!("{:.1}", r.bytes as f64 / 1e6),
            format!("{:.1}%", r.pct_ios),
            format!("{:.1}%", r.pct_bytes),
        ]);
    }
    doc.table(t);
}
