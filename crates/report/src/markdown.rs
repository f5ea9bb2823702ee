//! Markdown exporter of a [`Doc`]: GitHub-flavoured tables, charts left to the HTML (a line says
//! so) or, where they were also written as SVG files (compare), linked as images, so the text
//! diffs well and reads in a terminal.

use crate::doc::{Block, Doc, Table};
use std::fmt::Write;

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A GitHub-flavoured Markdown table, numeric columns right-aligned; `|` in cells is escaped.
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

/// The document as Markdown, each chart replaced by a line naming it (drawn in the HTML).
pub fn render(doc: &Doc) -> String {
    render_linked(doc, &[])
}

/// [`render`], with the charts that were also written as files (`files[i]` for the i-th chart)
/// shown as images.
pub fn render_linked(doc: &Doc, files: &[String]) -> String {
    let mut o = format!("# {}\n\n", doc.title);
    blocks(&mut o, &doc.blocks, files, &mut 0);
    o
}

/// `bs` in order; `charts` counts the charts written so far, to find each one's file.
fn blocks(o: &mut String, bs: &[Block], files: &[String], charts: &mut usize) {
    for b in bs {
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
            Block::Folded(summary, t) => {
                // GitHub folds <details>; a plain Markdown reader shows the table under the line.
                let _ = writeln!(o, "<details><summary>{summary}</summary>\n");
                o.push_str(&table(t));
                o.push_str("\n</details>\n\n");
            }
            Block::Chart(c) => {
                let title = c.title();
                match files.get(*charts) {
                    Some(f) => {
                        let _ = writeln!(o, "![{title}]({f})\n");
                    }
                    None => {
                        let _ = writeln!(o, "*Chart in the HTML report: {title}.*\n");
                    }
                }
                *charts += 1;
            }
            // The text is small at any scale: a place's detail stays in line.
            Block::Detail(d) => blocks(o, &d.blocks, files, charts),
        }
    }
}
