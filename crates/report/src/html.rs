//! HTML exporter of a [`Doc`]: self-contained pages, charts as inline SVG, a small embedded
//! stylesheet, no scripts and no network, so a report opens offline and mails as one file; one
//! too large for a browser to open comfortably has its places' details on pages beside it.

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
    let mut o = open(&doc.title);
    blocks(&mut o, &doc.blocks);
    o.push_str(CLOSE);
    o
}

/// Above this many bytes of HTML a report is split: a browser takes seconds to lay out tens of
/// MB of inline SVG, and a brief-scale run (4 nodes × 40 step-hours) draws hundreds.
pub const ONE_FILE_BUDGET: usize = 20 << 20;

/// What [`render_pages`] made: the main page, and whether each detail went to a page of its own.
pub struct Pages {
    /// The main page's HTML.
    pub main: String,
    /// Pages written through the sink (0 when every detail is inline).
    pub pages: usize,
}

/// The document as HTML, one file while it stays within `budget` bytes. Beyond it, each
/// [`Block::Detail`] (a node's or the client host's part of a step) becomes a page of its own,
/// handed to `page` as `(file name, HTML)` as soon as it is made, and the main page links to it
/// where it stood: the front page, the tables, the sweeps and each step's client and cluster
/// charts stay in the main page. Details are held only until the budget is reached, so memory
/// stays near `budget` whatever the run's size.
/// `main_page` is the main page's file name and `dir` the pages' directory beside it (one
/// level down), for the links each way.
pub fn render_pages<E>(
    doc: &Doc,
    budget: usize,
    main_page: &str,
    dir: &str,
    mut page: impl FnMut(&str, &str) -> Result<(), E>,
) -> Result<Pages, E> {
    enum Part {
        Text(String),
        Detail(usize),
    }
    let head = open(&doc.title);
    let (mut size, mut split) = (head.len(), false);
    let mut parts = vec![Part::Text(head)];
    // Each detail's title, and its HTML while it is held for the main page.
    let mut held: Vec<(String, Option<String>)> = Vec::new();
    let file = |i: usize| format!("{dir}/detail-{:04}.html", i + 1);
    // The details held from `from` on, each to its page.
    let mut pages_of_held = |held: &mut [(String, Option<String>)], from: usize| -> Result<(), E> {
        for (j, (title, body)) in held.iter_mut().enumerate().skip(from) {
            if let Some(body) = body.take() {
                page(&file(j), &detail_page(doc, title, main_page, &body))?;
            }
        }
        Ok(())
    };
    for b in &doc.blocks {
        let Block::Detail(d) = b else {
            let mut o = String::new();
            blocks(&mut o, std::slice::from_ref(b));
            size += o.len();
            parts.push(Part::Text(o));
            continue;
        };
        let i = held.len();
        let mut body = String::new();
        blocks(&mut body, &d.blocks);
        size += body.len();
        held.push((d.title.clone(), Some(body)));
        parts.push(Part::Detail(i));
        // From the detail that passes the budget on, every detail is a page, those held so
        // far first.
        let from = if split {
            i
        } else if size > budget {
            split = true;
            0
        } else {
            continue;
        };
        pages_of_held(&mut held, from)?;
    }
    // The text after the last detail may pass the budget too.
    if !split && size > budget {
        split = true;
        pages_of_held(&mut held, 0)?;
    }
    let mut main = String::with_capacity(if split { 1 << 20 } else { size + 64 });
    for p in parts {
        match p {
            Part::Text(t) => main.push_str(&t),
            Part::Detail(i) => match held[i].1.take() {
                Some(body) => main.push_str(&body),
                None => {
                    let _ = writeln!(
                        main,
                        "<p class=\"detail\"><a href=\"{}\">{} →</a> (a page of its own: this report is too large to open as one file)</p>",
                        esc(&file(i)),
                        esc(&held[i].0)
                    );
                }
            },
        }
    }
    main.push_str(CLOSE);
    Ok(Pages {
        main,
        pages: if split { held.len() } else { 0 },
    })
}

/// A detail's own page: its title, a link back to the report, and its blocks.
fn detail_page(doc: &Doc, title: &str, main_page: &str, body: &str) -> String {
    let mut o = open(&format!("{} — {title}", doc.title));
    let _ = writeln!(
        o,
        "<p><a href=\"../{}\">← the report</a></p>",
        esc(main_page)
    );
    o.push_str(body);
    o.push_str(CLOSE);
    o
}

const CLOSE: &str = "</body></html>\n";

fn open(title: &str) -> String {
    let mut o = String::with_capacity(256 * 1024);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{0}</title><style>{STYLE}</style></head><body><h1>{0}</h1>\n",
        esc(title)
    );
    o
}

fn blocks(o: &mut String, bs: &[Block]) {
    for b in bs {
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
            Block::Table(t) => table(o, t),
            Block::Folded(summary, t) => {
                let _ = write!(o, "<details><summary>{}</summary>", esc(summary));
                table(o, t);
                o.push_str("</details>\n");
            }
            Block::Chart(c) => {
                o.push_str("<figure>");
                o.push_str(&c.svg());
                o.push_str("</figure>\n");
            }
            Block::Detail(d) => blocks(o, &d.blocks),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Doc {
        let mut d = Doc::new("run");
        d.h(2, "step 0");
        for node in ["127.0.0.1", "127.0.0.2"] {
            d.detail(format!("step 0: node {node}"), |d| {
                d.nested(node, |d| {
                    d.h(3, "Block IO");
                    d.p(format!("{node} wrote {}", "x".repeat(1000)));
                });
            });
        }
        d.p("the end");
        d
    }

    fn pages(budget: usize) -> (Pages, Vec<(String, String)>) {
        let mut written = Vec::new();
        let p = render_pages::<()>(
            &doc(),
            budget,
            "report.html",
            "report-pages",
            |name, html| {
                written.push((name.to_string(), html.to_string()));
                Ok(())
            },
        )
        .unwrap();
        (p, written)
    }

    #[test]
    fn a_report_within_its_budget_is_one_file() {
        let (p, written) = pages(ONE_FILE_BUDGET);
        assert_eq!(p.main, render(&doc()));
        assert_eq!((p.pages, written.len()), (0, 0));
        assert!(p.main.contains("127.0.0.2 wrote"));
    }

    #[test]
    fn text_after_the_last_detail_counts_too() {
        let mut d = doc();
        d.p("y".repeat(3000));
        let mut written = 0;
        let p = render_pages::<()>(&d, 3500, "report.html", "report-pages", |_, _| {
            written += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((p.pages, written), (2, 2), "split after the last detail");
        assert!(p.main.contains("detail-0002.html") && !p.main.contains("wrote"));
    }

    #[test]
    fn over_its_budget_every_detail_is_a_page_linked_where_it_stood() {
        let (p, written) = pages(1500);
        assert_eq!(p.pages, 2);
        let names: Vec<&str> = written.iter().map(|w| w.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "report-pages/detail-0001.html",
                "report-pages/detail-0002.html"
            ]
        );
        assert!(!p.main.contains("wrote"), "no detail left inline");
        let first = p.main.find("detail-0001.html").unwrap();
        let second = p.main.find("detail-0002.html").unwrap();
        let end = p.main.find("the end").unwrap();
        assert!(first < second && second < end, "in reading order");
        assert!(p.main.contains("step 0: node 127.0.0.2 →"));
        let (_, html) = &written[1];
        assert!(html.contains("127.0.0.2 wrote") && !html.contains("127.0.0.1 wrote"));
        assert!(html.contains("<title>run — step 0: node 127.0.0.2</title>"));
        assert!(html.contains(r#"href="../report.html""#) && html.ends_with(CLOSE));
        assert!(html.contains("<h3>Block IO</h3>") || html.contains("<h4>Block IO</h4>"));
    }
}
