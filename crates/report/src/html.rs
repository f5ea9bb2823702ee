//! HTML exporter of a [`Doc`]: one self-contained file, charts as inline SVG, a small embedded
//! stylesheet, no scripts and no network, so it opens offline and mails as one file.

use crate::doc::{Block, Doc, Table};
use crate::svg::esc;
use std::fmt::Write;

const STYLE: &str = "body{font-family:sans-serif;max-width:960px;margin:1.5em auto;padding:0 1em;color:#222;line-height:1.4}\
h1{font-size:1.6em}h2{font-size:1.3em;border-bottom:1px solid #ccc;margin-top:2em}h3{font-size:1.05em}\
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}td,th{border:1px solid #ccc;padding:3px 7px}\
th{background:#f2f2f2}td.n{text-align:right;font-variant-numeric:tabular-nums}\
figure{margin:.8em 0}summary{cursor:pointer;margin:.6em 0}svg{max-width:100%;height:auto}table.facts td:first-child{font-weight:bold;background:#fafafa}";

/// The document as one self-contained HTML page: inline SVG charts, an embedded stylesheet, no
/// script and no network access.
pub fn render(doc: &Doc) -> String {
    let mut o = String::with_capacity(256 * 1024);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{0}</title><style>{STYLE}</style></head><body><h1>{0}</h1>\n",
        esc(&doc.title)
    );
    for b in &doc.blocks {
        match b {
            Block::Heading(l, t) => {
                let _ = writeln!(o, "<h{l}>{}</h{l}>", esc(t));
            }
            Block::Para(t) => {
                let _ = writeln!(o, "<p>{}</p>", esc(t));
            }
            Block::List(items) => {
                o.push_str("<ul>");
                for i in items {
                    let _ = write!(o, "<li>{}</li>", esc(i));
                }
                o.push_str("</ul>\n");
            }
            Block::Facts(f) => {
                o.push_str("<table class=\"facts\">");
                for (k, v) in f {
                    let _ = write!(o, "<tr><td>{}</td><td>{}</td></tr>", esc(k), esc(v));
                }
                o.push_str("</table>\n");
            }
            Block::Table(t) => table(&mut o, t),
            Block::Folded(summary, t) => {
                let _ = write!(o, "<details><summary>{}</summary>", esc(summary));
                table(&mut o, t);
                o.push_str("</details>\n");
            }
            Block::Chart(c) => {
                o.push_str("<figure>");
                o.push_str(&c.svg());
                o.push_str("</figure>\n");
            }
        }
    }
    o.push_str("</body></html>\n");
    o
}

/// A table, numeric columns right-aligned.
fn table(o: &mut String, t: &Table) {
    o.push_str("<table><tr>");
    for h in &t.headers {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr>");
    for r in &t.rows {
        o.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let class = if t.numeric.get(i).copied().unwrap_or(false) {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(o, "<td{class}>{}</td>", esc(c));
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>\n");
}
