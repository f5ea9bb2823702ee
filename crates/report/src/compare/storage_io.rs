//! The briefs' drive comparison on the database's IO: for each workload and thread count, the
//! IO each run's database did underneath — measured on its nodes when they were observed, else
//! on the host it ran on — side by side: its worst write burst, deepest queue, slowest second's
//! read p99 at the device and in the OS, and the shares of reads, writes and discards by
//! volume, beside the client's ops/s and read p99 at the same thread count.

use super::Runs;
use crate::analysis::{analyse_with, findings, StepView};
use crate::doc::{thousands, Doc, Table};

/// One run's step at a workload × thread count, as the comparison reads it.
struct Cell<'a> {
    view: &'a StepView,
}

impl Cell<'_> {
    /// The places whose IO is the database's: its nodes, or the step's own host.
    fn story(&self) -> Vec<&StepView> {
        if self.view.node_views.is_empty() {
            vec![self.view]
        } else {
            self.view.node_views.iter().collect()
        }
    }

    /// The largest value of a per-place line over the story, with the place's name when the
    /// story has several places.
    fn worst(&self, pick: impl Fn(&StepView) -> Option<&[(f64, f64)]>) -> Option<(f64, String)> {
        let story = self.story();
        let several = story.len() > 1;
        story
            .into_iter()
            .filter_map(|v| {
                let max = pick(v)?.iter().map(|p| p.1).fold(f64::NAN, f64::max);
                (!max.is_nan()).then(|| (max, v.place.name()))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(v, name)| {
                (
                    v,
                    if several {
                        format!(" ({name})")
                    } else {
                        String::new()
                    },
                )
            })
    }

    /// Bytes of `op` over the story's places, and of every op.
    fn bytes(&self, op: &str) -> (u64, u64) {
        let rows = self.story().into_iter().flat_map(|v| v.io_rows.iter());
        rows.fold((0, 0), |(o, all), r| {
            (o + if r.op == op { r.bytes } else { 0 }, all + r.bytes)
        })
    }
}

/// The section; nothing when no run traced its database's IO.
pub(super) fn section(doc: &mut Doc, runs: &Runs) {
    let reports: Vec<_> = runs
        .runs
        .iter()
        .map(|r| analyse_with(r, &runs.op))
        .collect();
    let traced = reports.iter().any(|r| {
        r.steps.iter().any(|s| {
            s.node_views
                .iter()
                .chain([s])
                .any(|v| !v.io_rows.is_empty())
        })
    });
    if !traced {
        return;
    }
    doc.h(2, "The database's IO, side by side");
    doc.p(
        "What each run's database did underneath at equal threads: on its nodes when they were \
         observed on their hosts (the worst node named when there are several), else on the \
         host it ran on. The first repetition of each thread count is shown.",
    );
    let names: Vec<String> = runs.runs.iter().map(crate::data::RunData::name).collect();
    for w in runs.base_sweeps() {
        let mut headers = vec!["threads".to_string(), "measure".to_string()];
        headers.extend(names.iter().cloned());
        let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&header_refs).text_columns(&[1]);
        for threads in runs.thread_union(&w.workload) {
            let cells: Vec<Option<Cell>> = reports
                .iter()
                .map(|r| {
                    r.steps
                        .iter()
                        .find(|s| {
                            s.phase == "run" && s.workload == w.workload && s.threads == threads
                        })
                        .map(|view| Cell { view })
                })
                .collect();
            if cells.iter().all(|c| {
                c.as_ref()
                    .is_none_or(|c| c.story().iter().all(|v| v.io_rows.is_empty()))
            }) {
                continue;
            }
            type Measure = (&'static str, fn(&Cell) -> Option<String>);
            let measures: [Measure; 8] = [
                ("client ops/s", |c| {
                    Some(thousands(c.view.throughput_ops_per_sec))
                }),
                ("client read p99 (worst second)", |c| {
                    c.view
                        .lat_p99_ms
                        .get("READ")
                        .and_then(|l| l.iter().map(|p| p.1).reduce(f64::max))
                        .map(findings::lat_ms)
                }),
                ("write burst, busiest slot", |c| {
                    c.worst(|v| v.io.get("write").map(|l| &l.mb_s_max[..]))
                        .map(|(v, n)| format!("{}{n}", findings::rate(v)))
                }),
                ("peak queue depth", |c| {
                    c.worst(|v| Some(&v.qd_max[..]))
                        .map(|(v, n)| format!("{v:.0}{n}"))
                }),
                ("read p99 at the device (slowest second)", |c| {
                    c.worst(|v| v.io.get("read").map(|l| &l.lat_p99_ms[..]))
                        .map(|(v, n)| format!("{}{n}", findings::lat_ms(v)))
                }),
                ("read p99 in the OS (slowest second)", |c| {
                    c.worst(|v| v.io.get("read").map(|l| &l.os_p99_ms[..]))
                        .map(|(v, n)| format!("{}{n}", findings::lat_ms(v)))
                }),
                ("% by volume: read / write / discard", |c| {
                    let (r, all) = c.bytes("read");
                    (all > 0).then(|| {
                        let pct = |op: &str| 100.0 * c.bytes(op).0 as f64 / all as f64;
                        format!(
                            "{:.0} / {:.0} / {:.0} %",
                            100.0 * r as f64 / all as f64,
                            pct("write"),
                            pct("discard")
                        )
                    })
                }),
                ("GB read / written", |c| {
                    let (r, all) = c.bytes("read");
                    (all > 0).then(|| {
                        format!(
                            "{:.2} / {:.2}",
                            r as f64 / 1e9,
                            c.bytes("write").0 as f64 / 1e9
                        )
                    })
                }),
            ];
            for (what, f) in measures {
                let mut row = vec![threads.to_string(), what.to_string()];
                row.extend(
                    cells
                        .iter()
                        .map(|c| c.as_ref().and_then(f).unwrap_or_else(|| "–".into())),
                );
                t.row(row);
            }
        }
        if !t.rows.is_empty() {
            doc.h(3, format!("{}: IO underneath by thread count", w.workload));
            doc.table(t);
        }
    }
}
