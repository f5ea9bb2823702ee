//! Line charts over time or over a numeric x: series with labelled points, shaded time bands.

use super::*;
use std::fmt::Write;

/// What the x values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XKind {
    /// Plain numbers (throughput in ops/s on the sweep curves), the axis starting at 0.
    Number,
    /// Unix milliseconds, ticked as UTC clock time.
    UnixMs,
}

/// One line of a chart.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Legend entry, also the line's tooltip.
    pub name: String,
    /// (x, y) points in x order; non-finite ones are skipped.
    pub points: Vec<(f64, f64)>,
    /// Index into the palette.
    pub color: usize,
    /// Drawn dashed: the second measure of a pair (mean beside p99, busiest slot beside mean).
    pub dashed: bool,
    /// Draw a marker at every point (sweep curves); time series are plain lines.
    pub markers: bool,
    /// Text next to each point (thread counts), same length as `points` or empty.
    pub labels: Vec<String>,
    /// Markers alone, no line between them: chosen moments (the slowest seconds) marked on
    /// another series.
    pub only_markers: bool,
}

/// A shaded x range (a flush or a compaction).
#[derive(Debug, Clone)]
pub struct Band {
    /// Start of the range, in x units (unix ms on time charts).
    pub x0: f64,
    /// End of the range, in x units.
    pub x1: f64,
    /// 0 flush, 1 compaction, 2 other.
    pub kind: usize,
}

/// A line chart: series over time or over a numeric x, optional shaded bands and log y axis.
#[derive(Debug, Clone)]
pub struct LineChart {
    /// Bold heading above the legend; also the SVG's accessible label.
    pub title: String,
    /// Caption under the x axis.
    pub x_label: String,
    /// Caption beside the y axis (with the unit).
    pub y_label: String,
    /// What the x values are, and so how they are ticked.
    pub x_kind: XKind,
    /// The lines, drawn and listed in the legend in this order.
    pub series: Vec<Series>,
    /// Shaded ranges under the lines (the database's flushes and compactions).
    pub bands: Vec<Band>,
    /// Legend entries of the band kinds present, e.g. `(0, "memtable flush")`.
    pub band_legend: Vec<(usize, String)>,
    /// Fixed x range (so every chart of a step shares one time axis).
    pub x_range: Option<(f64, f64)>,
    /// Logarithmic y axis: latency curves span from sub-millisecond averages to tail spikes.
    pub y_log: bool,
}

impl LineChart {
    /// An empty chart with linear y, no bands and an x range fitted to the data.
    pub fn new(title: &str, x_label: &str, y_label: &str, x_kind: XKind) -> Self {
        LineChart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_kind,
            series: Vec::new(),
            bands: Vec::new(),
            band_legend: Vec::new(),
            x_range: None,
            y_log: false,
        }
    }

    /// True when there is nothing to draw.
    pub fn is_empty(&self) -> bool {
        self.series.iter().all(|s| s.points.is_empty())
    }

    /// The chart as a standalone SVG document, 900 × 300.
    pub fn svg(&self) -> String {
        let pw = WIDTH - LEFT - RIGHT;
        let ph = HEIGHT - TOP - BOTTOM;
        let pts = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        let mut ymin = f64::INFINITY;
        for &(x, y) in pts {
            if x.is_finite() && y.is_finite() {
                x0 = x0.min(x);
                x1 = x1.max(x);
                y1 = y1.max(y);
                if y > 0.0 {
                    ymin = ymin.min(y);
                }
            }
        }
        if let Some((a, b)) = self.x_range {
            x0 = a;
            x1 = b;
        }
        if !x0.is_finite() {
            x0 = 0.0;
            x1 = 1.0;
        }
        let x_ticks = match self.x_kind {
            XKind::Number => {
                // Sweep curves start at zero so that ratios between points read true.
                x0 = x0.min(0.0);
                let t = nice_ticks(x0, x1 * 1.08);
                x1 = *t.last().unwrap_or(&x1);
                t
            }
            XKind::UnixMs => time_ticks(x0, x1),
        };
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let (y_ticks, ylo, yhi) = if self.y_log && ymin.is_finite() {
            let t = log_ticks(ymin, y1);
            let (a, b) = (t[0].log10(), t[t.len() - 1].log10());
            (t, a, b)
        } else {
            let t = nice_ticks(0.0, if y1 > 0.0 { y1 * 1.05 } else { 1.0 });
            let top = *t.last().unwrap_or(&1.0);
            (t, 0.0, top)
        };
        let log = self.y_log && ymin.is_finite();
        let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
        let sy = |y: f64| {
            let v = if log {
                y.max(f64::MIN_POSITIVE).log10()
            } else {
                y
            };
            TOP + ph - ((v - ylo) / (yhi - ylo).max(1e-12)) * ph
        };

        let mut o = String::with_capacity(16 * 1024);
        let _ = write!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12" role="img" aria-label="{}">"#,
            esc(&self.title)
        );
        let _ = write!(
            o,
            r##"<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>"##
        );
        let _ = write!(
            o,
            r#"<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{}</text>"#,
            esc(&self.title)
        );
        // Bands under everything else.
        for b in &self.bands {
            let (a, c) = (sx(b.x0.max(x0)), sx(b.x1.min(x1)));
            if c >= LEFT && a <= LEFT + pw {
                let _ = write!(
                    o,
                    r#"<rect x="{a:.1}" y="{TOP}" width="{:.1}" height="{ph}" fill="{}" fill-opacity="0.35"/>"#,
                    (c - a).max(1.0),
                    BAND_FILLS[b.kind.min(2)]
                );
            }
        }
        // Grid and ticks.
        y_grid(&mut o, &y_ticks, sy, pw);
        for &t in &x_ticks {
            if t < x0 - 1e-9 || t > x1 + 1e-9 {
                continue;
            }
            let x = sx(t);
            let label = match self.x_kind {
                XKind::Number => fmt_tick(t),
                XKind::UnixMs => clock(t),
            };
            let _ = write!(
                o,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
                TOP + ph,
                TOP + ph + 16.0
            );
        }
        let _ = write!(
            o,
            r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
        );
        let _ = write!(
            o,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            HEIGHT - 8.0,
            esc(&self.x_label)
        );
        let _ = write!(
            o,
            r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            TOP + ph / 2.0,
            esc(&self.y_label)
        );
        // Lines.
        o.push_str("<g>");
        for s in &self.series {
            let color = PALETTE[s.color % PALETTE.len()];
            // Points outside a fixed x range would draw over the axes.
            let inside: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|p| p.0 >= x0 && p.0 <= x1)
                .collect();
            let pts = decimate(&inside, pw as usize);
            if pts.is_empty() {
                continue;
            }
            if s.only_markers {
                for (x, y) in &inside {
                    let _ = write!(
                        o,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="none" stroke="{color}" stroke-width="2"><title>{}</title></circle>"#,
                        sx(*x),
                        sy(*y),
                        esc(&s.name)
                    );
                }
                continue;
            }
            let mut d = String::with_capacity(pts.len() * 14);
            for (i, (x, y)) in pts.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{:.1},{:.1}",
                    if i == 0 { "M" } else { "L" },
                    sx(*x),
                    sy(*y)
                );
            }
            let dash = if s.dashed {
                r#" stroke-dasharray="6 3""#
            } else {
                ""
            };
            let _ = write!(
                o,
                r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.6"{dash}><title>{}</title></path>"#,
                esc(&s.name)
            );
            if s.markers {
                for (i, (x, y)) in s.points.iter().enumerate() {
                    let _ = write!(
                        o,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3.2" fill="{color}"/>"#,
                        sx(*x),
                        sy(*y)
                    );
                    if let Some(l) = s.labels.get(i) {
                        let _ = write!(
                            o,
                            r#"<text x="{:.1}" y="{:.1}" font-size="10" fill="{color}">{}</text>"#,
                            sx(*x) + 5.0,
                            sy(*y) - 5.0,
                            esc(l)
                        );
                    }
                }
            }
        }
        let _ = write!(o, "</g>");
        // Legend row under the title.
        let mut lx = LEFT;
        for s in &self.series {
            let color = PALETTE[s.color % PALETTE.len()];
            let dash = if s.dashed {
                r#" stroke-dasharray="6 3""#
            } else {
                ""
            };
            let _ = write!(
                o,
                r#"<line x1="{lx:.1}" x2="{:.1}" y1="36" y2="36" stroke="{color}" stroke-width="2.5"{dash}/><text x="{:.1}" y="40">{}</text>"#,
                lx + 18.0,
                lx + 22.0,
                esc(&s.name)
            );
            lx += 34.0 + 6.5 * s.name.chars().count() as f64;
        }
        for (kind, name) in &self.band_legend {
            let _ = write!(
                o,
                r#"<rect x="{lx:.1}" y="30" width="16" height="11" fill="{}" fill-opacity="0.5"/><text x="{:.1}" y="40">{}</text>"#,
                BAND_FILLS[(*kind).min(2)],
                lx + 20.0,
                esc(name)
            );
            lx += 34.0 + 6.5 * name.chars().count() as f64;
        }
        o.push_str("</svg>");
        o
    }
}
