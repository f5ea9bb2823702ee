//! The comparison's title and one line per run (path, database, status, target, kernel,
//! storage), then how the ratios read.

use super::caveats::run_targets;
use super::Runs;
use crate::doc::{Block, Doc};

/// Starts the document: the title, the runs, how to read a ratio.
pub(super) fn section(runs: &Runs) -> Doc {
    let mut doc = Doc::new(&format!(
        "iodig compare: {} vs {}",
        runs.base().name(),
        runs.runs[1..]
            .iter()
            .map(super::super::data::RunData::name)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let mut facts = Vec::new();
    for (i, r) in runs.runs.iter().enumerate() {
        let e = &r.doc.environment;
        let storage = e
            .storage
            .as_ref()
            .map(|s| {
                let device = s.device.clone().unwrap_or_else(|| s.source.clone());
                match &s.model {
                    Some(m) => format!("{device} {m} on {}", s.fs_type),
                    None => format!("{device} on {}", s.fs_type),
                }
            })
            .unwrap_or_else(|| "storage unknown".into());
        facts.push((
            if i == 0 {
                format!("{} (baseline)", r.name())
            } else {
                r.name()
            },
            format!(
                "{} · {} · {} · target {} · kernel {} · {}",
                r.path.display(),
                r.doc.config.db,
                r.doc.status,
                run_targets(r),
                e.kernel,
                storage
            ),
        ));
    }
    doc.blocks.push(Block::Facts(facts));
    doc.p("Ratios compare each run with the baseline (the first run): ops/s as new ÷ baseline (\"better\" when higher), latency as baseline ÷ new (\"lower\" when the new run waits less).");
    doc
}
