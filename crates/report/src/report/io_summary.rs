//! A step's IO summary as in the blog (per op: dominant block size, GB, shares of IOs and
//! bytes) and its block-size histograms, by IO count and by volume.

use crate::analysis::StepView;
use crate::doc::{thousands, Doc, Table};
use crate::svg::BarChart;
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn tables(doc: &mut Doc, s: &StepView) {
    summary(doc, s);
    if let Some(sb) = &s.storage {
        storage_bound(doc, sb);
    }
    if !s.bands.is_empty() {
        bands(doc, s);
    }
    if !s.size_hists.is_empty() {
        size_histograms(doc, s);
    }
}

fn summary(doc: &mut Doc, s: &StepView) {
    if !s.io_rows.is_empty() {
        doc.h(3, "IO summary");
        let mut t = Table::new(&[
            "op",
            "block size",
            "total GB",
            "% by IO count",
            "% by volume",
            "IOs",
        ])
        .text_columns(&[1]);
        for r in &s.io_rows {
            t.row(vec![
                r.op.clone(),
                r.band.clone(),
                format!("{:.2}", r.gb),
                format!("{:.1}%", r.pct_ios),
                format!("{:.1}%", r.pct_bytes),
                thousands(r.ios as f64),
            ]);
        }
        doc.table(t);
    }
}

/// Storage-bound or not: the database's reads against the device's.
fn storage_bound(doc: &mut Doc, sb: &crate::analysis::storage::StorageBound) {
    doc.h(3, "Storage-bound or not");
    let gib = |b: f64| format!("{:.2}", b / (1u64 << 30) as f64);
    let mut headers = vec![
        "database reads",
        "device reads",
        "device reads per database read",
        "device read GB",
        "page cache mean GiB",
        "page cache max GiB",
        "memory GiB",
    ];
    // A node weighs its own share of the dataset against its own memory.
    if sb.node_share.is_some() {
        headers.push("the node's share of the dataset GB");
    }
    let mut t = Table::new(&headers);
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "–".into());
    let mut row = vec![
        thousands(sb.db_reads as f64),
        thousands(sb.device_reads as f64),
        format!("{:.3}", sb.ratio()),
        format!("{:.3}", sb.device_read_bytes as f64 / 1e9),
        or_dash(sb.page_cache_mean_bytes.map(gib)),
        or_dash(sb.page_cache_max_bytes.map(|b| gib(b as f64))),
        or_dash(sb.memory_bytes.map(|b| gib(b as f64))),
    ];
    if let Some(n) = &sb.node_share {
        row.push(format!("{:.3} ({})", n.bytes as f64 / 1e9, n.how));
    }
    t.row(row);
    doc.table(t);
}

/// The dominant buckets at the trace's own resolution: "74 % by volume in 508–512 KiB".
fn bands(doc: &mut Doc, s: &StepView) {
    doc.h(3, "Size bands at the trace's 4 KiB resolution");
    doc.p(
        "Each op's three largest size buckets by volume and by IO count, one bucket each \
           (4 KiB wide up to 2 MiB, a sixteenth of a power of two above): the blog's \
           \"74 % 508 KB–512 KB\".",
    );
    let mut t = Table::new(&[
        "op",
        "size band",
        "% of the op's IOs",
        "% of the op's bytes",
        "IOs",
    ])
    .text_columns(&[1]);
    for ob in &s.bands {
        for b in &ob.bands {
            t.row(vec![
                ob.op.clone(),
                b.label.clone(),
                format!("{:.1}%", b.pct_ios),
                format!("{:.1}%", b.pct_bytes),
                thousands(b.ios as f64),
            ]);
        }
    }
    doc.table(t);
}

/// Power-of-two bins (the union over ops), drawn as two bar charts and listed as a table.
fn size_histograms(doc: &mut Doc, s: &StepView) {
    let bins: BTreeSet<u64> = s
        .size_hists
        .iter()
        .flat_map(|h| h.by_count_pct.keys().chain(h.by_bytes_pct.keys()).copied())
        .collect();
    let cats: Vec<String> = bins
        .iter()
        .map(|b| format!("≤{}", size_short(*b)))
        .collect();
    for (title, by_bytes) in [
        ("Block sizes by IO count", false),
        ("Block sizes by volume", true),
    ] {
        let groups = s
            .size_hists
            .iter()
            .map(|h| {
                let m = if by_bytes {
                    &h.by_bytes_pct
                } else {
                    &h.by_count_pct
                };
                (h.op.clone(), bins.iter().map(|b| share(m, b)).collect())
            })
            .collect();
        doc.bar_chart(BarChart {
            title: format!("{title} (power-of-two bins)"),
            x_label: "IO size (bytes, upper bound of bin)".into(),
            y_label: if by_bytes {
                "share of the op's bytes (%)".into()
            } else {
                "share of the op's IOs (%)".into()
            },
            categories: cats.clone(),
            groups,
            unit: "%".into(),
            ..Default::default()
        });
    }
    histogram_table(doc, s, &bins, &cats);
}

fn histogram_table(doc: &mut Doc, s: &StepView, bins: &BTreeSet<u64>, cats: &[String]) {
    doc.h(3, "Block size histogram");
    let mut headers = vec!["size ≤".to_string()];
    for h in &s.size_hists {
        headers.push(format!("{} % IOs", h.op));
        headers.push(format!("{} % bytes", h.op));
    }
    let hs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut t = Table::new(&hs);
    for (b, cat) in bins.iter().zip(cats) {
        let mut row = vec![cat.clone()];
        for h in &s.size_hists {
            row.push(format!("{:.1}", share(&h.by_count_pct, b)));
            row.push(format!("{:.1}", share(&h.by_bytes_pct, b)));
        }
        t.row(row);
    }
    doc.table(t);
}

/// An op's share in a bin; 0 where it has no IO of that size.
fn share(by_bin: &BTreeMap<u64, f64>, bin: &u64) -> f64 {
    by_bin.get(bin).copied().unwrap_or(0.0)
}

/// 4K, 512K, 1M, 2G.
pub fn size_short(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{}G", b >> 30),
        b if b >= 1 << 20 => format!("{}M", b >> 20),
        b if b >= 1 << 10 => format!("{}K", b >> 10),
        b => format!("{b}B"),
    }
}
