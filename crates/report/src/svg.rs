//! Inline SVG charts (lines with labelled points, shaded time bands, grouped bars) written by
//! hand: the report must open offline as one file with no JavaScript, and a small writer of our
//! own keeps the output compact (long per-second series are decimated to min/max per pixel so
//! bursts stay visible) and the labels exactly as the briefs word them.

use std::fmt::Write;

/// Colours that stay apart for the colour-blind and on paper (Okabe–Ito, then greys).
const PALETTE: [&str; 9] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8B0000", "#000000",
    "#777777",
];
/// Band fills by kind index (flush, compaction, other).
const BAND_FILLS: [&str; 3] = ["#F0E442", "#56B4E9", "#CCCCCC"];

pub const WIDTH: f64 = 900.0;
pub const HEIGHT: f64 = 300.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 52.0;
const BOTTOM: f64 = 48.0;
/// Legend spacing of bar and two-axis charts: the swatch and gap, then the width of a character
/// of 12 px sans-serif (digits and dashes run wider than the line charts' estimate).
const LEGEND_GAP: f64 = 36.0;
const LEGEND_CHAR: f64 = 7.2;

/// What the x values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XKind {
    Number,
    /// Unix milliseconds, ticked as UTC clock time.
    UnixMs,
}

/// One line of a chart.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Index into the palette.
    pub color: usize,
    pub dashed: bool,
    /// Draw a marker at every point (sweep curves); time series are plain lines.
    pub markers: bool,
    /// Text next to each point (thread counts), same length as `points` or empty.
    pub labels: Vec<String>,
}

/// A shaded x range (a flush or a compaction).
#[derive(Debug, Clone)]
pub struct Band {
    pub x0: f64,
    pub x1: f64,
    /// 0 flush, 1 compaction, 2 other.
    pub kind: usize,
}

#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_kind: XKind,
    pub series: Vec<Series>,
    pub bands: Vec<Band>,
    /// Legend entries of the band kinds present, e.g. `(0, "memtable flush")`.
    pub band_legend: Vec<(usize, String)>,
    /// Fixed x range (so every chart of a step shares one time axis).
    pub x_range: Option<(f64, f64)>,
    /// Logarithmic y axis: latency curves span from sub-millisecond averages to tail spikes.
    pub y_log: bool,
}

impl LineChart {
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

/// Grouped bars: one group per category, one bar per series.
#[derive(Debug, Clone, Default)]
pub struct BarChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub categories: Vec<String>,
    /// (name, value per category); NaN = not measured, drawn as "not tested" (the briefs' words
    /// for a point one configuration did not run).
    pub groups: Vec<(String, Vec<f64>)>,
    /// Text above a bar, by group then category ("1.5X better"); empty = none. For a NaN value
    /// it replaces "not tested" (e.g. "no baseline" when only the ratio is missing).
    pub bar_labels: Vec<Vec<String>>,
    /// A dashed horizontal line at this value: 1.0 on charts relative to a baseline.
    pub reference: Option<f64>,
    /// Unit after each bar's value in its tooltip ("X", " ops/s", " ms").
    pub unit: String,
}

impl BarChart {
    pub fn svg(&self) -> String {
        let pw = WIDTH - LEFT - RIGHT;
        let ph = HEIGHT - TOP - BOTTOM;
        let ymax = self
            .groups
            .iter()
            .flat_map(|g| g.1.iter().copied())
            .chain(self.reference)
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max);
        let y_ticks = nice_ticks(0.0, if ymax > 0.0 { ymax * 1.05 } else { 1.0 });
        let y1 = *y_ticks.last().unwrap_or(&1.0);
        let sy = |y: f64| TOP + ph - (y / y1) * ph;
        let n = self.categories.len().max(1) as f64;
        let cw = pw / n;
        let bw = (cw * 0.8) / self.groups.len().max(1) as f64;
        let mut o = String::new();
        let _ = write!(
            o,
            r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12" role="img" aria-label="{0}"><rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/><text x="{LEFT}" y="18" font-size="14" font-weight="bold">{0}</text>"##,
            esc(&self.title)
        );
        y_grid(&mut o, &y_ticks, sy, pw);
        for (ci, cat) in self.categories.iter().enumerate() {
            let cx = LEFT + cw * ci as f64;
            for (gi, (name, vals)) in self.groups.iter().enumerate() {
                let v = vals.get(ci).copied().unwrap_or(0.0);
                let x = cx + cw * 0.1 + bw * gi as f64;
                let label = self
                    .bar_labels
                    .get(gi)
                    .and_then(|l| l.get(ci))
                    .filter(|l| !l.is_empty());
                if v.is_nan() {
                    // Said on the chart, as the briefs' tables say "(not tested)".
                    let why = label.map_or("not tested", String::as_str);
                    let _ = write!(
                        o,
                        r##"<text data-series="{0}" data-category="{1}" data-missing="{2}" transform="translate({3:.1} {4:.1}) rotate(-90)" font-size="9" fill="#777">{2}<title>{0} {1}: {2}</title></text>"##,
                        esc(name),
                        esc(cat),
                        esc(why),
                        x + bw / 2.0 + 3.0,
                        TOP + ph - 4.0
                    );
                    continue;
                }
                if v <= 0.0 {
                    continue;
                }
                let _ = write!(
                    o,
                    r#"<rect data-series="{name}" data-category="{cat}" data-value="{v}" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{fill}"><title>{name} {cat}: {shown}{unit}</title></rect>"#,
                    fill = PALETTE[gi % PALETTE.len()],
                    name = esc(name),
                    cat = esc(cat),
                    shown = bar_value(v),
                    unit = esc(&self.unit),
                    y = sy(v),
                    w = bw.max(1.0),
                    h = TOP + ph - sy(v),
                );
                if let Some(l) = label {
                    let _ = write!(
                        o,
                        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                        x + bw / 2.0,
                        sy(v) - 4.0,
                        esc(l)
                    );
                }
            }
            // Label every category when they fit, else every other one.
            let step = if n > 24.0 { 2 } else { 1 };
            if ci % step == 0 {
                let _ = write!(
                    o,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                    cx + cw / 2.0,
                    TOP + ph + 14.0,
                    esc(cat)
                );
            }
        }
        if let Some(r) = self.reference {
            let _ = write!(
                o,
                r##"<line x1="{LEFT}" x2="{:.1}" y1="{1:.1}" y2="{1:.1}" stroke="#333" stroke-dasharray="4 3"/>"##,
                LEFT + pw,
                sy(r)
            );
        }
        let _ = write!(
            o,
            r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
            LEFT + pw / 2.0,
            HEIGHT - 8.0,
            esc(&self.x_label),
            TOP + ph / 2.0,
            esc(&self.y_label)
        );
        let mut lx = LEFT;
        for (gi, (name, _)) in self.groups.iter().enumerate() {
            let _ = write!(
                o,
                r#"<rect x="{lx:.1}" y="30" width="16" height="11" fill="{}"/><text x="{:.1}" y="40">{}</text>"#,
                PALETTE[gi % PALETTE.len()],
                lx + 20.0,
                esc(name)
            );
            lx += LEGEND_GAP + LEGEND_CHAR * name.chars().count() as f64;
        }
        o.push_str("</svg>");
        o
    }
}

/// A bar's value in its tooltip: two decimals for ratios and small values, thousands apart for
/// rates.
fn bar_value(v: f64) -> String {
    if v >= 1000.0 {
        crate::doc::thousands(v)
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// One line of a [`TwoAxisChart`]: a value per category, `None` where the run has no point.
#[derive(Debug, Clone, Default)]
pub struct AxisSeries {
    pub name: String,
    pub color: usize,
    pub values: Vec<Option<f64>>,
}

/// Two quantities against one categorical x axis (thread counts, evenly spaced as the briefs
/// draw workers): solid lines on the left axis, dashed lines on the right one, so ops/s and
/// average read latency share one chart.
#[derive(Debug, Clone, Default)]
pub struct TwoAxisChart {
    pub title: String,
    pub x_label: String,
    pub left_label: String,
    pub right_label: String,
    pub categories: Vec<String>,
    pub left: Vec<AxisSeries>,
    pub right: Vec<AxisSeries>,
    /// Legend entries (name, colour); empty = one per series. Naming each colour once (a run)
    /// keeps long names on one row, the axis labels saying which line style is which.
    pub legend: Vec<(String, usize)>,
}

impl TwoAxisChart {
    /// True when there is nothing to draw.
    pub fn is_empty(&self) -> bool {
        self.left
            .iter()
            .chain(&self.right)
            .all(|s| s.values.iter().all(Option::is_none))
    }

    pub fn svg(&self) -> String {
        const RIGHT2: f64 = 78.0;
        let pw = WIDTH - LEFT - RIGHT2;
        let ph = HEIGHT - TOP - BOTTOM;
        let top_of = |series: &[AxisSeries]| {
            let m = series
                .iter()
                .flat_map(|s| s.values.iter().flatten().copied())
                .filter(|v| v.is_finite())
                .fold(0.0f64, f64::max);
            let t = nice_ticks(0.0, if m > 0.0 { m * 1.05 } else { 1.0 });
            let top = *t.last().unwrap_or(&1.0);
            (t, top)
        };
        let (lt, ltop) = top_of(&self.left);
        let (rt, rtop) = top_of(&self.right);
        let n = self.categories.len().max(1) as f64;
        let sx = |i: usize| LEFT + pw * (i as f64 + 0.5) / n;
        let sy = |v: f64, top: f64| TOP + ph - v / top * ph;
        let mut o = String::with_capacity(8 * 1024);
        let _ = write!(
            o,
            r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12" role="img" aria-label="{0}"><rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/><text x="{LEFT}" y="18" font-size="14" font-weight="bold">{0}</text>"##,
            esc(&self.title)
        );
        y_grid(&mut o, &lt, |v| sy(v, ltop), pw);
        for &t in &rt {
            let _ = write!(
                o,
                r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                LEFT + pw + 6.0,
                sy(t, rtop) + 4.0,
                fmt_tick(t)
            );
        }
        for (i, c) in self.categories.iter().enumerate() {
            let _ = write!(
                o,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                sx(i),
                TOP + ph + 16.0,
                esc(c)
            );
        }
        let _ = write!(
            o,
            r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text><text transform="translate({:.1} {:.1}) rotate(90)" text-anchor="middle">{}</text>"##,
            LEFT + pw / 2.0,
            HEIGHT - 8.0,
            esc(&self.x_label),
            TOP + ph / 2.0,
            esc(&self.left_label),
            WIDTH - 14.0,
            TOP + ph / 2.0,
            esc(&self.right_label)
        );
        let mut lx = LEFT;
        for (series, top, dashed) in [(&self.left, ltop, false), (&self.right, rtop, true)] {
            let dash = if dashed {
                r#" stroke-dasharray="6 3""#
            } else {
                ""
            };
            for s in series {
                let color = PALETTE[s.color % PALETTE.len()];
                // A missing point breaks the line: nothing is drawn across an untested count.
                let mut d = String::new();
                let mut pen_down = false;
                for (i, v) in s.values.iter().enumerate() {
                    match v.filter(|v| v.is_finite()) {
                        Some(v) => {
                            let _ = write!(
                                d,
                                "{}{:.1},{:.1}",
                                if pen_down { "L" } else { "M" },
                                sx(i),
                                sy(v, top)
                            );
                            pen_down = true;
                        }
                        None => pen_down = false,
                    }
                }
                let _ = write!(
                    o,
                    r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.8"{dash}><title>{}</title></path>"#,
                    esc(&s.name)
                );
                for (i, v) in s.values.iter().enumerate() {
                    if let Some(v) = v.filter(|v| v.is_finite()) {
                        let _ = write!(
                            o,
                            r#"<circle data-series="{0}" data-category="{1}" data-value="{v}" cx="{2:.1}" cy="{3:.1}" r="3.2" fill="{color}"><title>{0} at {1}: {4}</title></circle>"#,
                            esc(&s.name),
                            esc(self.categories.get(i).map_or("", String::as_str)),
                            sx(i),
                            sy(v, top),
                            bar_value(v)
                        );
                    }
                }
                if self.legend.is_empty() {
                    let _ = write!(
                        o,
                        r#"<line x1="{lx:.1}" x2="{:.1}" y1="36" y2="36" stroke="{color}" stroke-width="2.5"{dash}/><text x="{:.1}" y="40">{}</text>"#,
                        lx + 18.0,
                        lx + 22.0,
                        esc(&s.name)
                    );
                    lx += LEGEND_GAP + LEGEND_CHAR * s.name.chars().count() as f64;
                }
            }
        }
        for (name, color) in &self.legend {
            let _ = write!(
                o,
                r#"<rect x="{lx:.1}" y="30" width="16" height="11" fill="{}"/><text x="{:.1}" y="40">{}</text>"#,
                PALETTE[color % PALETTE.len()],
                lx + 20.0,
                esc(name)
            );
            lx += LEGEND_GAP + LEGEND_CHAR * name.chars().count() as f64;
        }
        o.push_str("</svg>");
        o
    }
}

/// Keeps at most ~4 points per pixel column: first, min, max and last of each column, in x
/// order, so a one-second burst in an hour-long series still reaches its height.
pub fn decimate(points: &[(f64, f64)], columns: usize) -> Vec<(f64, f64)> {
    let finite: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    if finite.len() <= columns * 4 || columns == 0 {
        return finite;
    }
    let (x0, x1) = (finite[0].0, finite[finite.len() - 1].0);
    let width = (x1 - x0).max(f64::MIN_POSITIVE) / columns as f64;
    let mut out = Vec::with_capacity(columns * 4);
    let mut i = 0;
    while i < finite.len() {
        let col = ((finite[i].0 - x0) / width).floor();
        let mut j = i;
        let (mut lo, mut hi) = (i, i);
        while j < finite.len() && ((finite[j].0 - x0) / width).floor() == col {
            if finite[j].1 < finite[lo].1 {
                lo = j;
            }
            if finite[j].1 > finite[hi].1 {
                hi = j;
            }
            j += 1;
        }
        let mut idx = vec![i, lo, hi, j - 1];
        idx.sort_unstable();
        idx.dedup();
        out.extend(idx.into_iter().map(|k| finite[k]));
        i = j;
    }
    out
}

/// Round tick values covering [lo, hi] (about 5 of them), the last one ≥ hi.
pub fn nice_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 6.0)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).floor() * step;
    let mut t = Vec::new();
    let mut v = start;
    while v < hi + step * 0.999 {
        t.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        if v >= hi {
            break;
        }
        v += step;
    }
    t
}

/// 1-2-5 ticks per decade covering [lo, hi] for a log axis.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut d = 10f64.powf(lo.log10().floor());
    let mut t = Vec::new();
    loop {
        for m in [1.0, 2.0, 5.0] {
            let v = d * m;
            if v * 5.0 >= lo && (t.last().is_none_or(|l: &f64| *l < hi)) {
                t.push(v);
            }
        }
        if *t.last().unwrap_or(&0.0) >= hi || t.len() > 40 {
            break;
        }
        d *= 10.0;
    }
    // Keep one tick at or below the lowest value.
    while t.len() > 2 && t[1] <= lo {
        t.remove(0);
    }
    t
}

fn time_ticks(x0: f64, x1: f64) -> Vec<f64> {
    let span_s = ((x1 - x0) / 1000.0).max(1.0);
    let steps = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
        21600.0,
    ];
    let step = steps
        .iter()
        .copied()
        .find(|s| span_s / s <= 8.0)
        .unwrap_or(86400.0)
        * 1000.0;
    let mut t = Vec::new();
    let mut v = (x0 / step).ceil() * step;
    while v <= x1 {
        t.push(v);
        v += step;
    }
    t
}

/// `HH:MM:SS` (UTC) of a unix-ms time.
pub fn clock(ms: f64) -> String {
    let s = (ms / 1000.0).round() as i64;
    let d = s.rem_euclid(86400);
    format!("{:02}:{:02}:{:02}", d / 3600, d % 3600 / 60, d % 60)
}

/// Tick labels: 1.5k, 120k, 2.5M, 0.25.
/// Horizontal grid lines with their labels at the y ticks, across the plot width `pw`.
fn y_grid(o: &mut String, ticks: &[f64], sy: impl Fn(f64) -> f64, pw: f64) {
    for &t in ticks {
        let y = sy(t);
        let _ = write!(
            o,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            y + 4.0,
            fmt_tick(t)
        );
    }
}

pub fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e9 {
        format!("{}G", trim(format!("{:.2}", v / 1e9)))
    } else if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.2}"))
    } else {
        trim(format!("{v:.4}"))
    }
}

/// XML text escaping.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(
            nice_ticks(0.0, 97.0),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        let t = nice_ticks(0.0, 0.37);
        assert!(*t.last().unwrap() >= 0.37 && t.len() <= 8, "{t:?}");
    }

    #[test]
    fn decimation_keeps_spikes() {
        let mut pts: Vec<(f64, f64)> = (0..36_000).map(|i| (f64::from(i), 1.0)).collect();
        pts[17_777].1 = 500.0;
        let d = decimate(&pts, 800);
        assert!(d.len() <= 3200);
        assert!(d.iter().any(|p| p.1 == 500.0));
    }

    #[test]
    fn bars_say_their_values_and_untested_points() {
        let c = BarChart {
            title: "Relative performance".into(),
            categories: vec!["a 8t".into(), "a 16t".into()],
            groups: vec![
                ("base".into(), vec![1.0, f64::NAN]),
                ("new".into(), vec![1.53, f64::NAN]),
            ],
            bar_labels: vec![vec![], vec!["1.5X better".into()]],
            reference: Some(1.0),
            unit: "X".into(),
            ..Default::default()
        };
        let svg = c.svg();
        assert!(svg.contains(r#"data-series="new" data-category="a 8t" data-value="1.53""#));
        assert!(svg.contains("<title>new a 8t: 1.53X</title>"));
        assert!(svg.contains("1.5X better"));
        assert_eq!(svg.matches(r#"data-missing="not tested""#).count(), 2);
        assert_eq!(svg.matches("<rect data-series").count(), 2);
        assert!(svg.contains(r#"stroke-dasharray="4 3""#), "the 1.0 line");
    }

    #[test]
    fn two_axis_lines_break_where_a_run_has_no_point() {
        let c = TwoAxisChart {
            title: "w".into(),
            categories: vec!["8".into(), "16".into(), "32".into()],
            left: vec![AxisSeries {
                name: "a ops/s".into(),
                color: 0,
                values: vec![Some(100.0), None, Some(300.0)],
            }],
            right: vec![AxisSeries {
                name: "a avg read ms".into(),
                color: 0,
                values: vec![Some(1.0), Some(2.0), Some(3.0)],
            }],
            ..Default::default()
        };
        let svg = c.svg();
        let ops_path = svg.split("<path d=\"").nth(1).unwrap();
        assert_eq!(ops_path.matches('M').count(), 2, "the line breaks at 16");
        assert_eq!(svg.matches("<circle").count(), 5);
        assert!(svg.contains("rotate(90)"), "a right axis label");
    }

    #[test]
    fn tick_labels() {
        assert_eq!(fmt_tick(120_000.0), "120k");
        assert_eq!(fmt_tick(2_500_000.0), "2.5M");
        assert_eq!(fmt_tick(0.25), "0.25");
        assert_eq!(clock(3_723_000.0), "01:02:03");
    }
}
