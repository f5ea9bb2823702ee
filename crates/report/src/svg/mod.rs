//! Inline SVG charts (lines with labelled points, shaded time bands, grouped bars, latency heat
//! maps, scatters of single IOs) written by hand: the report must open offline with no
//! JavaScript, and a small writer of our own keeps the output compact (long per-second series
//! are drawn at the chart's resolution, each pixel column's minimum and maximum kept, so bursts
//! stay visible) and the labels exactly as the briefs word them. One file per chart kind
//! (`line`, `bars`, `two_axis`, `heat`, `scatter`); here what they share: colours, margins,
//! ticks, decimation.

mod bars;
mod heat;
mod line;
mod scatter;
mod two_axis;

pub use bars::BarChart;
pub use heat::{HeatColumn, HeatMap};
pub use line::{Band, LineChart, Series, XKind};
pub use scatter::Scatter;
pub use two_axis::{AxisSeries, TwoAxisChart};

use std::fmt::Write;

/// Colours that stay apart for the colour-blind and on paper (Okabe–Ito, then greys).
const PALETTE: [&str; 9] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8B0000", "#000000",
    "#777777",
];
/// Band fills by kind index (flush, compaction, other).
const BAND_FILLS: [&str; 3] = ["#F0E442", "#56B4E9", "#CCCCCC"];

/// Width of every chart's SVG, px.
pub const WIDTH: f64 = 900.0;
/// Height of every chart's SVG, px.
pub const HEIGHT: f64 = 300.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 52.0;
const BOTTOM: f64 = 48.0;
/// Legend spacing of bar and two-axis charts: the swatch and gap, then the width of a character
/// of 12 px sans-serif (digits and dashes run wider than the line charts' estimate).
const LEGEND_GAP: f64 = 36.0;
const LEGEND_CHAR: f64 = 7.2;

/// A long series at the chart's own resolution: at most two points per pixel column, its
/// minimum and its maximum in x order, so a one-second burst in an hour-long series still
/// reaches its height and a one-second dip its depth. Series of at most two points a column
/// are drawn whole.
pub fn decimate(points: &[(f64, f64)], columns: usize) -> Vec<(f64, f64)> {
    let finite: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    if finite.len() <= columns * 2 || columns == 0 {
        return finite;
    }
    let (x0, x1) = (finite[0].0, finite[finite.len() - 1].0);
    let width = (x1 - x0).max(f64::MIN_POSITIVE) / columns as f64;
    let mut out = Vec::with_capacity(columns * 2);
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
        out.push(finite[lo.min(hi)]);
        if hi != lo {
            out.push(finite[lo.max(hi)]);
        }
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

/// `HH:MM:SS` (UTC) of a unix-ms time: the second it lies in, as a clock reads and as the
/// per-second tables key their seconds (by their start), so a second drawn at its middle is
/// named as itself. The microsecond of slack keeps a tick computed a hair under a whole second
/// on it.
pub fn clock(ms: f64) -> String {
    let s = (ms / 1000.0 + 1e-6).floor() as i64;
    let d = s.rem_euclid(86400);
    format!("{:02}:{:02}:{:02}", d / 3600, d % 3600 / 60, d % 60)
}

/// The frame of the charts of IOs over time (heat maps, scatters): the step's time on x, a
/// latency on a log y axis, the database's events shaded under the data.
struct TimeLogFrame {
    x0: f64,
    x1: f64,
    y_ticks: Vec<f64>,
    ylo: f64,
    yhi: f64,
}

impl TimeLogFrame {
    /// Over `x` (unix ms) and the data's positive `lo`..`hi` (a 1 µs–1 ms axis when empty).
    fn new(x: (f64, f64), lo: f64, hi: f64) -> TimeLogFrame {
        let (lo, hi) = if lo.is_finite() && hi > lo {
            (lo, hi)
        } else {
            (0.001, 1.0)
        };
        let y_ticks = log_ticks(lo, hi);
        TimeLogFrame {
            x0: x.0,
            x1: x.1,
            ylo: y_ticks.first().copied().unwrap_or(lo).min(lo),
            yhi: y_ticks.last().copied().unwrap_or(hi).max(hi),
            y_ticks,
        }
    }

    fn pw() -> f64 {
        WIDTH - LEFT - RIGHT
    }

    fn ph() -> f64 {
        HEIGHT - TOP - BOTTOM
    }

    fn sx(&self, x: f64) -> f64 {
        let span = (self.x1 - self.x0).max(1.0);
        LEFT + ((x - self.x0) / span).clamp(0.0, 1.0) * Self::pw()
    }

    fn sy(&self, v: f64) -> f64 {
        let (lo, hi) = (self.ylo.ln(), self.yhi.ln());
        TOP + Self::ph() - (v.max(self.ylo).ln() - lo) / (hi - lo) * Self::ph()
    }

    /// The opening, the shaded events and the grid, under whatever the chart draws next.
    fn open(&self, o: &mut String, title: &str, bands: &[Band]) {
        open_svg(o, title);
        let ph = Self::ph();
        for b in bands {
            let (a, z) = (self.sx(b.x0), self.sx(b.x1));
            let _ = write!(
                o,
                r#"<rect x="{a:.1}" y="{TOP}" width="{:.1}" height="{ph}" fill="{}" opacity="0.35"/>"#,
                (z - a).max(1.0),
                BAND_FILLS[b.kind.min(2)]
            );
        }
        y_grid(o, &self.y_ticks, |v| self.sy(v), Self::pw());
    }

    /// The time ticks, the frame and both axis labels, over what the chart drew.
    fn axes(&self, o: &mut String, y_label: &str) {
        let (pw, ph) = (Self::pw(), Self::ph());
        for t in time_ticks(self.x0, self.x1) {
            let _ = write!(
                o,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                self.sx(t),
                TOP + ph + 16.0,
                clock(t)
            );
        }
        let _ = write!(
            o,
            r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/><text x="{:.1}" y="{:.1}" text-anchor="middle">time (UTC, hh:mm:ss)</text><text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
            LEFT + pw / 2.0,
            HEIGHT - 8.0,
            TOP + ph / 2.0,
            esc(y_label)
        );
    }
}

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

/// Tick labels: 0.25, 2.5, 1500, 12.5k, 120k, 2.5M (k from 10,000 up), trailing zeros trimmed.
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

/// The opening of a chart with a white background and its bold title (bar, two-axis and
/// heat charts; line charts draw their own for the time bands under the title).
fn open_svg(o: &mut String, title: &str) {
    let _ = write!(
        o,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12" role="img" aria-label="{0}"><rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/><text x="{LEFT}" y="18" font-size="14" font-weight="bold">{0}</text>"##,
        esc(title)
    );
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
        pts[20_001].1 = 0.25;
        let d = decimate(&pts, 800);
        assert!(d.len() <= 1600, "{}", d.len());
        assert!(d.iter().any(|p| p.1 == 500.0), "the spike");
        assert!(d.iter().any(|p| p.1 == 0.25), "the dip");
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0), "in x order");
        let short: Vec<(f64, f64)> = pts[..1600].to_vec();
        assert_eq!(decimate(&short, 800), short, "drawn whole");
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
        assert_eq!(
            clock(3_723_500.0),
            "01:02:03",
            "a second drawn at its middle"
        );
        assert_eq!(clock(3_723_999.0), "01:02:03");
        assert_eq!(
            clock(3_722_999.999_999_9),
            "01:02:03",
            "a tick a hair under"
        );
    }
}
