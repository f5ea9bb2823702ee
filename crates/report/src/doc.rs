//! A format-neutral document (headings, paragraphs, lists, tables, charts) that the exporters
//! render: the report and the comparison are built once here, so the HTML and the Markdown say
//! the same thing with the same numbers.

use crate::svg::{BarChart, HeatMap, LineChart, Scatter, TwoAxisChart};

/// A table: a header row and rows of cells already formatted as text.
#[derive(Debug, Clone)]
pub struct Table {
    /// Column headings, one per column.
    pub headers: Vec<String>,
    /// Right-align these columns (numbers).
    pub numeric: Vec<bool>,
    /// Rows of cells, one per column; a table without rows is not added to a [`Doc`].
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headings and no rows; every column but the first is right-aligned as
    /// a number until [`Table::text_columns`] says otherwise.
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(ToString::to_string).collect(),
            // Every column but the first is a number unless said otherwise.
            numeric: (0..headers.len()).map(|i| i > 0).collect(),
            rows: Vec::new(),
        }
    }

    /// Marks the columns at these indexes as text (left-aligned); out-of-range indexes are ignored.
    pub fn text_columns(mut self, cols: &[usize]) -> Self {
        for &c in cols {
            if let Some(n) = self.numeric.get_mut(c) {
                *n = false;
            }
        }
        self
    }

    /// Appends a row of cells.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

/// A chart of any kind, drawn as an SVG document.
#[derive(Debug, Clone)]
pub enum Chart {
    /// Per-second series or curves on shared axes.
    Line(LineChart),
    /// Grouped bars.
    Bar(BarChart),
    /// Two series against a left and a right y axis.
    TwoAxis(TwoAxisChart),
    /// IO counts per second and latency octave, shaded.
    Heat(HeatMap),
    /// One dot per IO.
    Scatter(Scatter),
}

impl Chart {
    /// The chart's title: its heading in the SVG, and (as a slug) its file name in compare.
    pub fn title(&self) -> &str {
        match self {
            Chart::Line(c) => &c.title,
            Chart::Bar(c) => &c.title,
            Chart::TwoAxis(c) => &c.title,
            Chart::Heat(c) => &c.title,
            Chart::Scatter(c) => &c.title,
        }
    }

    fn title_mut(&mut self) -> &mut String {
        match self {
            Chart::Line(c) => &mut c.title,
            Chart::Bar(c) => &mut c.title,
            Chart::TwoAxis(c) => &mut c.title,
            Chart::Heat(c) => &mut c.title,
            Chart::Scatter(c) => &mut c.title,
        }
    }

    /// The chart as a standalone SVG document (inlined in HTML, or written as a file).
    pub fn svg(&self) -> String {
        match self {
            Chart::Line(c) => c.svg(),
            Chart::Bar(c) => c.svg(),
            Chart::TwoAxis(c) => c.svg(),
            Chart::Heat(c) => c.svg(),
            Chart::Scatter(c) => c.svg(),
        }
    }
}

/// One piece of a [`Doc`], in reading order.
#[derive(Debug, Clone)]
pub enum Block {
    /// A heading of this level (2 for a section, 3 and 4 below; level 1 is the document's title).
    Heading(u8, String),
    /// A paragraph.
    Para(String),
    /// A bulleted list, one item per entry.
    List(Vec<String>),
    /// Two-column facts (the header).
    Facts(Vec<(String, String)>),
    /// A table of figures.
    Table(Table),
    /// A table folded away under a one-line summary (HTML `<details>`), for rows a reader
    /// seldom needs, such as the settings every compared run shares.
    Folded(String, Table),
    /// A chart (boxed: charts are much larger than the other blocks).
    Chart(Box<Chart>),
    /// One place's detail inside a step (a node's or the client host's IO sections): inline
    /// in a report of ordinary size, a page of its own in one too large to open as one file
    /// (see [`crate::html`]).
    Detail(Detail),
}

/// The blocks of one place's detail, and the title a link to its page shows.
#[derive(Debug, Clone)]
pub struct Detail {
    /// "step 3 (workloada × 64 threads): node 127.0.0.2": what the page is about.
    pub title: String,
    /// The content, in reading order.
    pub blocks: Vec<Block>,
}

/// A document built once and rendered by [`crate::html`] and [`crate::markdown`].
#[derive(Debug, Clone, Default)]
pub struct Doc {
    /// The document's title: the HTML page's title and the level-1 heading of both renderings.
    pub title: String,
    /// The content, in reading order.
    pub blocks: Vec<Block>,
    /// Levels added to every heading, and the place named before every chart's title, while
    /// [`Doc::nested`] lays out one place's sections (a node's inside its step).
    nesting: Vec<String>,
}

impl Doc {
    /// An empty document with this title.
    pub fn new(title: &str) -> Self {
        Doc {
            title: title.into(),
            blocks: Vec::new(),
            nesting: Vec::new(),
        }
    }
    /// Lays out `f`'s sections one heading level down, every chart's title starting with
    /// `place` ("127.0.0.3: Write throughput"), so one place's sections read as a part of the
    /// section they sit in and its charts say whose they are.
    pub fn nested(&mut self, place: &str, f: impl FnOnce(&mut Doc)) {
        self.nesting.push(place.to_string());
        f(self);
        self.nesting.pop();
    }
    /// What `f` adds kept together as one [`Block::Detail`] titled `title`, so the HTML can
    /// give it a page of its own.
    pub fn detail(&mut self, title: impl Into<String>, f: impl FnOnce(&mut Doc)) {
        let outer = std::mem::take(&mut self.blocks);
        f(self);
        let blocks = std::mem::replace(&mut self.blocks, outer);
        if !blocks.is_empty() {
            self.blocks.push(Block::Detail(Detail {
                title: title.into(),
                blocks,
            }));
        }
    }
    /// Adds a heading of `level` (2 for a section, 3 and 4 below).
    pub fn h(&mut self, level: u8, text: impl Into<String>) {
        let level = level.saturating_add(self.nesting.len() as u8).min(6);
        self.blocks.push(Block::Heading(level, text.into()));
    }
    fn chart(&mut self, mut c: Chart) {
        if let Some(place) = self.nesting.last() {
            let title = c.title_mut();
            *title = format!("{place}: {title}");
        }
        self.blocks.push(Block::Chart(Box::new(c)));
    }
    /// Adds a paragraph.
    pub fn p(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Para(text.into()));
    }
    /// Adds a bulleted list; nothing when `items` is empty.
    pub fn list(&mut self, items: Vec<String>) {
        if !items.is_empty() {
            self.blocks.push(Block::List(items));
        }
    }
    /// Adds a table; nothing when it has no rows.
    pub fn table(&mut self, t: Table) {
        if !t.rows.is_empty() {
            self.blocks.push(Block::Table(t));
        }
    }
    /// Adds a table folded under `summary`; nothing when it has no rows.
    pub fn folded(&mut self, summary: impl Into<String>, t: Table) {
        if !t.rows.is_empty() {
            self.blocks.push(Block::Folded(summary.into(), t));
        }
    }
    /// Adds a line chart; nothing when it has no points to draw.
    pub fn line_chart(&mut self, c: LineChart) {
        if !c.is_empty() {
            self.chart(Chart::Line(c));
        }
    }
    /// Adds a bar chart; nothing when it has no categories.
    pub fn bar_chart(&mut self, c: BarChart) {
        if !c.categories.is_empty() {
            self.chart(Chart::Bar(c));
        }
    }
    /// Adds a scatter; nothing when it has no dots.
    pub fn scatter(&mut self, c: Scatter) {
        if !c.is_empty() {
            self.chart(Chart::Scatter(c));
        }
    }
    /// Adds a heat map; nothing when it has no cells.
    pub fn heat_map(&mut self, c: HeatMap) {
        if !c.is_empty() {
            self.chart(Chart::Heat(c));
        }
    }
    /// Adds a two-axis chart; nothing when it has no points to draw.
    pub fn two_axis_chart(&mut self, c: TwoAxisChart) {
        if !c.is_empty() {
            self.chart(Chart::TwoAxis(c));
        }
    }

    /// The charts in document order, those of every detail included.
    pub fn charts(&self) -> impl Iterator<Item = &Chart> {
        fn walk<'a>(blocks: &'a [Block], out: &mut Vec<&'a Chart>) {
            for b in blocks {
                match b {
                    Block::Chart(c) => out.push(c.as_ref()),
                    Block::Detail(d) => walk(&d.blocks, out),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.blocks, &mut out);
        out.into_iter()
    }
}

/// A thread count a run did not run (its stop rule, or another sweep), as the briefs' tables
/// say it.
pub const NOT_TESTED: &str = "(not tested)";

/// Thousands separators for counts and rates: 123,456.
pub fn thousands(v: f64) -> String {
    let neg = v < 0.0;
    let s = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if neg {
        format!("-{out}")
    } else {
        out
    }
}

/// Distinct values in order of appearance, for "a, b" lists.
pub fn distinct<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// A target rate as the header and tables say it: "2,000 ops/s" or "as fast as possible".
pub fn target_rate(t: Option<f64>) -> String {
    t.map(|t| format!("{} ops/s", thousands(t)))
        .unwrap_or_else(|| "as fast as possible".into())
}

/// A latency in µs shown in ms with 3 significant-ish decimals.
pub fn us_as_ms(us: f64) -> String {
    let ms = us / 1000.0;
    if ms >= 100.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.3}")
    }
}
