//! Two series against one x on a left and a right axis (ops/s and latency against workers).

use super::bars::bar_value;
use super::*;
use std::fmt::Write;

/// One line of a [`TwoAxisChart`]: a value per category, `None` where the run has no point.
#[derive(Debug, Clone, Default)]
pub struct AxisSeries {
    /// The line's tooltip, and its legend entry unless the chart's `legend` is given.
    pub name: String,
    /// Index into the palette (one colour per run in compare).
    pub color: usize,
    /// One value per category; a `None` breaks the line there.
    pub values: Vec<Option<f64>>,
}

/// Two quantities against one categorical x axis (thread counts, evenly spaced as the briefs
/// draw workers): solid lines on the left axis, dashed lines on the right one, so ops/s and
/// average read latency share one chart.
#[derive(Debug, Clone, Default)]
pub struct TwoAxisChart {
    /// Bold heading above the legend; also the SVG's accessible label.
    pub title: String,
    /// Caption under the x axis.
    pub x_label: String,
    /// Caption beside the left axis (with the unit).
    pub left_label: String,
    /// Caption beside the right axis (with the unit).
    pub right_label: String,
    /// The x positions, evenly spaced, in order (thread counts as text).
    pub categories: Vec<String>,
    /// Solid lines against the left axis.
    pub left: Vec<AxisSeries>,
    /// Dashed lines against the right axis.
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

    /// The chart as a standalone SVG document, 900 × 300.
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
        open_svg(&mut o, &self.title);
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
