//! Latency heat maps over time: one column per second, one row per latency octave, each cell
//! shaded by how many IOs completed there, so every IO is on the chart (the blog's per-IO
//! scatter, from the kernel's per-second histograms instead of a per-IO stream).

use super::*;
use std::fmt::Write;

/// One column's IOs by latency: `(lower ms, upper ms, IOs)` per non-empty row.
#[derive(Debug, Clone, Default)]
pub struct HeatColumn {
    /// Start of the column (unix ms).
    pub x_ms: f64,
    /// A second, or several on a long step (at most ~300 columns are drawn).
    pub width_ms: f64,
    /// `(lower ms, upper ms, IOs)`: one latency octave and the IOs that took that long.
    pub cells: Vec<(f64, f64, u64)>,
}

/// A latency heat map: IO counts per time column and latency octave, on a log latency axis.
#[derive(Debug, Clone, Default)]
pub struct HeatMap {
    /// Bold heading above the legend; also the SVG's accessible label.
    pub title: String,
    /// Caption beside the latency axis (with the unit).
    pub y_label: String,
    /// The columns, in time order.
    pub columns: Vec<HeatColumn>,
    /// Fixed x range (the step's time axis), unix ms.
    pub x_range: Option<(f64, f64)>,
    /// Shaded database events under the cells, as on the step's line charts.
    pub bands: Vec<Band>,
    /// Legend entries of the band kinds present, e.g. `(0, "memtable flush")`.
    pub band_legend: Vec<(usize, String)>,
}

/// Light to dark blue: more IOs, darker cell.
const RAMP: [&str; 6] = [
    "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#3182bd", "#08519c",
];

impl HeatMap {
    /// True when no column has an IO: nothing to draw.
    pub fn is_empty(&self) -> bool {
        self.columns.iter().all(|c| c.cells.is_empty())
    }

    /// IOs on the chart (every cell's count), for a reader checking it against the trace.
    pub fn total(&self) -> u64 {
        self.columns
            .iter()
            .flat_map(|c| c.cells.iter().map(|x| x.2))
            .sum()
    }

    /// The chart as a standalone SVG document, 900 × 300; each cell carries `data-count`,
    /// `data-lower-ms` and `data-upper-ms`.
    pub fn svg(&self) -> String {
        let cells = || self.columns.iter().flat_map(|c| c.cells.iter());
        let lo = cells()
            .map(|c| c.0)
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        let hi = cells().map(|c| c.1).fold(0.0f64, f64::max);
        let x = self.x_range.unwrap_or_else(|| {
            let a = self.columns.first().map_or(0.0, |c| c.x_ms);
            let b = self.columns.last().map_or(1000.0, |c| c.x_ms + c.width_ms);
            (a, b)
        });
        let f = TimeLogFrame::new(x, lo, hi);
        let max_count = cells().map(|c| c.2).max().unwrap_or(1).max(1);
        let mut o = String::new();
        f.open(&mut o, &self.title, &self.bands);
        for col in &self.columns {
            let (a, z) = (f.sx(col.x_ms), f.sx(col.x_ms + col.width_ms));
            for &(l, u, n) in &col.cells {
                // Log shade: a second with one slow IO among thousands still shows.
                let level = ((n as f64).ln_1p() / (max_count as f64).ln_1p() * RAMP.len() as f64)
                    .ceil()
                    .clamp(1.0, RAMP.len() as f64) as usize
                    - 1;
                let (yt, yb) = (f.sy(u), f.sy(l));
                let _ = write!(
                    o,
                    r#"<rect data-count="{n}" data-lower-ms="{l}" data-upper-ms="{u}" x="{a:.1}" y="{yt:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} · {}–{} ms: {} IO{}</title></rect>"#,
                    (z - a).max(1.0),
                    (yb - yt).max(1.0),
                    RAMP[level],
                    clock(col.x_ms),
                    fmt_tick(l),
                    fmt_tick(u),
                    crate::doc::thousands(n as f64),
                    if n == 1 { "" } else { "s" }
                );
            }
        }
        f.axes(&mut o, &self.y_label);
        // Legend: the ramp's ends, then the shaded events.
        let mut lx = LEFT;
        for (i, fill) in RAMP.iter().enumerate() {
            let _ = write!(
                o,
                r#"<rect x="{:.1}" y="30" width="12" height="11" fill="{fill}"/>"#,
                lx + 12.0 * i as f64
            );
        }
        lx += 12.0 * RAMP.len() as f64 + 6.0;
        let text = format!(
            "1 → {} IOs per cell",
            crate::doc::thousands(max_count as f64)
        );
        let _ = write!(o, r#"<text x="{lx:.1}" y="40">{}</text>"#, esc(&text));
        lx += LEGEND_GAP + LEGEND_CHAR * text.chars().count() as f64;
        for (kind, name) in &self.band_legend {
            let _ = write!(
                o,
                r#"<rect x="{lx:.1}" y="30" width="16" height="11" fill="{}" opacity="0.6"/><text x="{:.1}" y="40">{}</text>"#,
                BAND_FILLS[(*kind).min(2)],
                lx + 20.0,
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
    fn every_io_is_a_cell_and_the_slow_one_shows() {
        let h = HeatMap {
            title: "reads".into(),
            y_label: "device latency (ms)".into(),
            columns: vec![
                HeatColumn {
                    x_ms: 1_000_000.0,
                    width_ms: 1000.0,
                    cells: vec![(0.1, 0.2, 9_000), (40.0, 80.0, 1)],
                },
                HeatColumn {
                    x_ms: 1_001_000.0,
                    width_ms: 1000.0,
                    cells: vec![(0.1, 0.2, 8_000)],
                },
            ],
            ..Default::default()
        };
        assert_eq!(h.total(), 17_001);
        let svg = h.svg();
        assert_eq!(svg.matches("<rect data-count").count(), 3);
        let slow = svg.split(r#"data-count="1" "#).nth(1).unwrap();
        assert!(slow.contains(r##"fill="#deebf7""##), "lightest, but drawn");
        assert!(svg.contains("00:16:40 · 40–80 ms: 1 IO"), "{svg}");
    }
}
