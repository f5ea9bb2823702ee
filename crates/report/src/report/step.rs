//! A step's section: when it ran and what it found, then its charts on one time axis (client,
//! block IO, system) with the drive's own statistics beside the block IO, the per-second
//! figures and the IO summary.

use super::{
    attribution, block_io, client, cluster, device_stats, events, io_summary, per_io, per_second,
    system,
};
use crate::analysis::StepView;
use crate::data::Place;
use crate::doc::Doc;
use crate::svg::{Band, HeatMap, LineChart, Scatter, Series, XKind};

pub(super) fn section(doc: &mut Doc, s: &StepView) {
    doc.h(2, s.title.clone());
    intro(doc, s);
    let t = Timeline::of(s);
    client::charts(doc, s, &t);
    if s.node_views.is_empty() {
        // The one host's detail: on a page of its own too when a long run's report is large.
        let title = format!("{}: {}", s.title, s.place.name());
        doc.detail(title, |doc| io_sections(doc, s, &t));
        cluster::step_nodes(doc, s, &t);
        return;
    }
    // The database's nodes tell the story: the roll-up first, then each node's IO on its own
    // time line (its flushes and compactions shaded), then the client host apart.
    cluster::step_nodes(doc, s, &t);
    for n in &s.node_views {
        let name = n.place.name();
        let host = match &n.place {
            Place::Node { host, .. } if *host != name => format!(" (host {host})"),
            _ => String::new(),
        };
        doc.h(3, format!("Node {name}{host}"));
        doc.list(place_facts(n));
        let nt = Timeline::of(n);
        let title = format!("{}: node {name}{host}", s.title);
        doc.detail(title, |doc| {
            doc.nested(&name, |doc| io_sections(doc, n, &nt));
        });
    }
    doc.h(3, "The client host (not the database's IO)");
    let mut facts = vec![
        "iodig's own machine: its disks are not the database's, whose IO is the nodes' above."
            .to_string(),
    ];
    facts.extend(place_facts(s));
    facts.extend(s.host_findings.iter().cloned());
    doc.list(facts);
    let title = format!("{}: the client host", s.title);
    doc.detail(title, |doc| {
        doc.nested("client host", |doc| io_sections(doc, s, &t));
    });
}

/// Every IO section of one place: block-IO charts, the drive's own statistics, every IO by
/// size, system charts, per-second figures, the IO summary and who issued the IO.
fn io_sections(doc: &mut Doc, s: &StepView, t: &Timeline) {
    block_io::charts(doc, s, t);
    device_stats::section(doc, s);
    per_io::section(doc, s, t);
    system::charts(doc, s, t);
    per_second::table(doc, s);
    io_summary::tables(doc, s);
    attribution::tables(doc, s);
}

/// How a place was traced, its self-check and its database events.
fn place_facts(s: &StepView) -> Vec<String> {
    let mut facts = vec![format!(
        "Trace mode {}{}.",
        s.trace_mode,
        s.trace_note
            .as_ref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    )];
    facts.extend(s.diskstats_check.clone());
    facts.extend(events::sentence(s));
    facts.extend(s.place_notes.iter().cloned());
    facts
}

/// When the step was measured and how it was traced, its database events, its findings.
fn intro(doc: &mut Doc, s: &StepView) {
    let mut facts = vec![format!(
        "Measured {} → {} UTC{}.",
        crate::svg::clock(s.start_ms),
        crate::svg::clock(s.end_ms),
        if s.node_views.is_empty() {
            format!(
                "; trace mode {}{}",
                s.trace_mode,
                s.trace_note
                    .as_ref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            )
        } else {
            format!(
                "; the database's IO measured on its {} node(s), each below",
                s.node_views.len()
            )
        }
    )];
    if s.node_views.is_empty() {
        facts.extend(s.diskstats_check.clone());
        facts.extend(events::sentence(s));
    }
    doc.list(facts);
    if !s.warnings.is_empty() || !s.findings.is_empty() {
        doc.h(3, "Findings");
        doc.list(s.warnings.iter().chain(&s.findings).cloned().collect());
    }
}

/// The time axis every chart of a step shares: the step's clock range, and its database
/// events shaded so that a burst or a slow second can be read against a flush.
pub(super) struct Timeline {
    bands: Vec<Band>,
    legend: Vec<(usize, String)>,
    range: Option<(f64, f64)>,
}

impl Timeline {
    pub(super) fn of(s: &StepView) -> Self {
        let (bands, legend) = events::bands(s);
        Timeline {
            bands,
            legend,
            range: Some((s.start_ms, s.end_ms.max(s.start_ms + 1000.0))),
        }
    }

    /// An empty chart on the step's time axis.
    pub(super) fn chart(&self, title: &str, y_label: &str) -> LineChart {
        let mut c = LineChart::new(title, "time (UTC, hh:mm:ss)", y_label, XKind::UnixMs);
        c.bands = self.bands.clone();
        c.band_legend = self.legend.clone();
        c.x_range = self.range;
        c
    }

    /// An empty scatter on the step's time axis.
    pub(super) fn scatter(&self, title: &str, y_label: &str) -> Scatter {
        Scatter {
            title: title.into(),
            y_label: y_label.into(),
            x_range: self.range,
            bands: self.bands.clone(),
            ..Default::default()
        }
    }

    /// An empty heat map on the step's time axis.
    pub(super) fn heat_map(&self, title: &str, y_label: &str) -> HeatMap {
        HeatMap {
            title: title.into(),
            y_label: y_label.into(),
            x_range: self.range,
            bands: self.bands.clone(),
            band_legend: self.legend.clone(),
            ..Default::default()
        }
    }
}

/// A plain time series (no markers or labels).
pub(super) fn line(
    name: impl Into<String>,
    points: &[(f64, f64)],
    color: usize,
    dashed: bool,
) -> Series {
    Series {
        name: name.into(),
        points: points.to_vec(),
        color,
        dashed,
        ..Default::default()
    }
}
