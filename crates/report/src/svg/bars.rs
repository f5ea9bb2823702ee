//! Grouped bar charts, as the briefs draw their comparisons.

use super::*;
use std::fmt::Write;

/// Grouped bars: one group per category, one bar per series.
#[derive(Debug, Clone, Default)]
pub struct BarChart {
    /// Bold heading above the legend; also the SVG's accessible label.
    pub title: String,
    /// Caption under the x axis.
    pub x_label: String,
    /// Caption beside the y axis (with the unit).
    pub y_label: String,
    /// One group of bars each, labelled under it (every other one past 24 groups).
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
    /// The chart as a standalone SVG document, 900 × 300; each bar carries `data-series`,
    /// `data-category` and `data-value` (or `data-missing`) for scripts.
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
        open_svg(&mut o, &self.title);
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
pub(super) fn bar_value(v: f64) -> String {
    if v >= 1000.0 {
        crate::doc::thousands(v)
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
