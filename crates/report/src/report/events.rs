//! Database events (flushes, compactions) in a step's section: the sentence that counts them and
//! the shaded bands every chart of the step carries.

use crate::analysis::StepView;
use crate::svg::Band;

/// "Database events: N flushes, M compactions (shaded on the charts)." when there are any.
pub(super) fn sentence(s: &StepView) -> Option<String> {
    if s.events.is_empty() {
        return None;
    }
    let flushes = s.events.iter().filter(|e| e.kind == "flush").count();
    let comps = s.events.iter().filter(|e| e.kind == "compaction").count();
    let stalls = match s.events.iter().filter(|e| e.kind == "stall").count() {
        0 => String::new(),
        n => format!(", {n} write stalls"),
    };
    let gcs = match s.events.iter().filter(|e| e.kind == "gc").count() {
        0 => String::new(),
        n => format!(", {n} long JVM collections logged"),
    };
    let faults: Vec<String> = s
        .events
        .iter()
        .filter(|e| e.kind == "fault")
        .map(|e| {
            format!(
                "{} at {} ({})",
                e.node,
                crate::svg::clock(e.start_unix_ms as f64),
                e.detail
            )
        })
        .collect();
    let faults = if faults.is_empty() {
        String::new()
    } else {
        format!(" Faults injected: {}.", faults.join("; "))
    };
    Some(format!(
        "Database events: {flushes} flushes, {comps} compactions{stalls}{gcs} (shaded on the charts).{faults}"
    ))
}

/// One band per event (an event still running at the step's end ends with it), and the legend:
/// each kind once, in order of appearance.
pub(super) fn bands(s: &StepView) -> (Vec<Band>, Vec<(usize, String)>) {
    let mut kinds: Vec<(usize, String)> = Vec::new();
    let bands = s
        .events
        .iter()
        .map(|e| {
            let kind = match e.kind.as_str() {
                "flush" => 0,
                "compaction" => 1,
                _ => 2,
            };
            let name = if kind == 2 {
                e.kind.clone()
            } else {
                format!("{} (db)", e.kind)
            };
            if !kinds.iter().any(|k| k.0 == kind) {
                kinds.push((kind, name));
            }
            Band {
                x0: e.start_unix_ms as f64,
                x1: e.end_unix_ms.map(|v| v as f64).unwrap_or(s.end_ms),
                kind,
            }
        })
        .collect();
    (bands, kinds)
}
