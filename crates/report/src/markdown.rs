//! Markdown exporter of a [`Doc`]: GitHub-flavoured tables, charts left to the HTML (a line says
//! so), so the text diffs well and reads in a terminal.

use crate::doc::{Block, Chart, Doc, Table};
use std::fmt::Write;

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

pub fn table(t: &Table) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "| {} |",
        t.headers
            .iter()
            .map(|h| cell(h))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let aligns: Vec<&str> = t
        .numeric
        .iter()
        .map(|n| if *n { "---:" } else { "---" })
        .collect();
    let _ = writeln!(o, "|{}|", aligns.join("|"));
    for r in &t.rows {
        let _ = writeln!(
            o,
            "| {} |",
            r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
        );
    }
    o
}

pub fn render(doc: &Doc) -> String {
    let mut o = format!("# {}\n\n", doc.title);
    for b in &doc.blocks {
        match b {
            Block::Heading(l, t) => {
                let _ = writeln!(o, "{} {t}\n", "#".repeat(usize::from(*l)));
            }
            Block::Para(t) => {
                let _ = writeln!(o, "{t}\n");
            }
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(o, "- {i}");
                }
                o.push('\n');
            }
            Block::Facts(f) => {
                let mut t = Table::new(&["", ""]).text_columns(&[1]);
                for (k, v) in f {
                    t.row(vec![k.clone(), v.clone()]);
                }
                o.push_str(&table(&t));
                o.push('\n');
            }
            Block::Table(t) => {
                o.push_str(&table(t));
                o.push('\n');
            }
            Block::Chart(c) => {
                let title = match c.as_ref() {
                    Chart::Line(l) => &l.title,
                    Chart::Bar(b) => &b.title,
                };
                let _ = writeln!(o, "*Chart in the HTML report: {title}.*\n");
            }
        }
    }
    o
}
