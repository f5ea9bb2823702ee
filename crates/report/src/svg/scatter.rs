//! Scatter charts of single IOs over time: one dot per IO at its completion and device latency
//! (log scale), coloured by its size class, as the blog drew "4 KB reads" against "512 KB
//! writes". The caller chooses which IOs to draw (the slowest and a sample of the rest).

use super::*;
use std::fmt::Write;

/// A scatter of single IOs: one dot per IO at its completion time and device latency (log y).
#[derive(Debug, Clone, Default)]
pub struct Scatter {
    /// Bold heading above the legend; also the SVG's accessible label.
    pub title: String,
    /// Caption beside the latency axis (with the unit).
    pub y_label: String,
    /// `(unix ms, value, colour index)`.
    pub points: Vec<(f64, f64, usize)>,
    /// `(colour index, name)` of each colour used.
    pub legend: Vec<(usize, String)>,
    /// Fixed x range (the step's time axis), unix ms.
    pub x_range: Option<(f64, f64)>,
    /// Shaded database events under the dots, as on the step's line charts.
    pub bands: Vec<Band>,
}

impl Scatter {
    /// True when there is no dot to draw.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The chart as a standalone SVG document, 900 × 300.
    pub fn svg(&self) -> String {
        let ys = || self.points.iter().map(|p| p.1).filter(|v| *v > 0.0);
        let lo = ys().fold(f64::INFINITY, f64::min);
        let hi = ys().fold(0.0f64, f64::max);
        let x = self.x_range.unwrap_or_else(|| {
            let a = self.points.first().map_or(0.0, |p| p.0);
            let b = self.points.last().map_or(1000.0, |p| p.0);
            (a, b)
        });
        let f = TimeLogFrame::new(x, lo, hi);
        let mut o = String::new();
        f.open(&mut o, &self.title, &self.bands);
        // One path per colour, a short stroke per dot: far smaller than a circle element each.
        let mut by_colour: std::collections::BTreeMap<usize, String> = Default::default();
        for &(x, y, c) in &self.points {
            let d = by_colour.entry(c).or_default();
            let _ = write!(d, "M{:.1} {:.1}h0", f.sx(x), f.sy(y));
        }
        for (c, d) in &by_colour {
            let _ = write!(
                o,
                r#"<path data-dots="{}" d="{d}" stroke="{}" stroke-width="3" stroke-linecap="round" opacity="0.7"/>"#,
                d.matches('M').count(),
                PALETTE[c % PALETTE.len()]
            );
        }
        f.axes(&mut o, &self.y_label);
        let mut lx = LEFT;
        for (c, name) in &self.legend {
            let _ = write!(
                o,
                r#"<circle cx="{:.1}" cy="35.5" r="4" fill="{}"/><text x="{:.1}" y="40">{}</text>"#,
                lx + 5.0,
                PALETTE[c % PALETTE.len()],
                lx + 14.0,
                esc(name)
            );
            lx += LEGEND_GAP + LEGEND_CHAR * name.chars().count() as f64;
        }
        o.push_str("</svg>");
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_is_a_dot_of_its_colour() {
        let s = Scatter {
            title: "reads".into(),
            y_label: "device latency (ms, log)".into(),
            points: vec![
                (1_000_000.0, 0.1, 0),
                (1_000_500.0, 0.2, 0),
                (1_001_000.0, 50.0, 1),
            ],
            legend: vec![(0, "≤4 KiB".into()), (1, "256–512 KiB".into())],
            ..Default::default()
        };
        let svg = s.svg();
        assert!(svg.contains(r#"data-dots="2""#), "{svg}");
        assert!(svg.contains(r#"data-dots="1""#), "{svg}");
        assert!(svg.contains("256–512 KiB"));
        assert!(svg.ends_with("</svg>"));
    }
}
