//! Which operation's latency the curves, OPS tables, bends and comparisons show: READ unless
//! told otherwise (`--op`), because the briefs always quote read latency ("avg read latency vs
//! ops/s", "7.0X lower read latency"); any other op, or all ops merged, on request.

use super::{Point, OP_SERIES};
use iodig_model::SeriesSummary;

/// The latency a sweep is drawn and compared with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LatencyOp {
    /// READ: the briefs' latency.
    #[default]
    Read,
    /// Another op, by its YCSB series name (`UPDATE`, `SCAN`, `READ-MODIFY-WRITE`, …).
    Op(&'static str),
    /// Every device-facing op merged (see [`super::ALL_OPS_SERIES`]).
    All,
}

/// The words `--op` accepts, for messages.
pub const OP_CHOICES: &str = "read, update, insert, scan, read-modify-write (rmw), delete or all";

impl LatencyOp {
    /// Parses `--op`: an op name in any case (`read`, `UPDATE`, `rmw`) or `all`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let u = s.trim().to_ascii_uppercase().replace('_', "-");
        let name = match u.as_str() {
            "ALL" | "ALL-OPS" => return Ok(LatencyOp::All),
            "RMW" => "READ-MODIFY-WRITE",
            other => other,
        };
        match OP_SERIES.iter().find(|o| **o == name) {
            Some(&"READ") => Ok(LatencyOp::Read),
            Some(o) => Ok(LatencyOp::Op(o)),
            None => Err(format!("--op {s:?}: unknown operation; use {OP_CHOICES}")),
        }
    }

    /// The series name (`READ`), or `None` for all ops.
    pub fn series(&self) -> Option<&'static str> {
        match self {
            LatencyOp::Read => Some("READ"),
            LatencyOp::Op(o) => Some(o),
            LatencyOp::All => None,
        }
    }

    /// How headings and sentences name it: "read", "update", "read-modify-write", "all ops".
    pub fn words(&self) -> String {
        self.series()
            .map(str::to_ascii_lowercase)
            .unwrap_or_else(|| "all ops".into())
    }

    /// The point's latency of this op (all ops: the merge), when the point measured it.
    pub fn of<'a>(&self, p: &'a Point) -> Option<&'a SeriesSummary> {
        match self.series() {
            None => Some(&p.all).filter(|s| s.count > 0),
            Some(name) => p.per_op.get(name).filter(|s| s.count > 0),
        }
    }

    /// Whether any of the points measured this op.
    pub fn measured_in<'a>(&self, mut points: impl Iterator<Item = &'a Point>) -> bool {
        points.any(|p| self.of(p).is_some())
    }
}

/// The ops with measurements in any of `points`, in [`OP_SERIES`] order.
pub fn measured_ops<'a>(points: impl Iterator<Item = &'a Point> + Clone) -> Vec<&'static str> {
    OP_SERIES
        .iter()
        .copied()
        .filter(|o| {
            points
                .clone()
                .any(|p| p.per_op.get(*o).is_some_and(|s| s.count > 0))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_parse_in_any_case() {
        assert_eq!(LatencyOp::parse("read"), Ok(LatencyOp::Read));
        assert_eq!(LatencyOp::parse("READ"), Ok(LatencyOp::Read));
        assert_eq!(LatencyOp::parse("Update"), Ok(LatencyOp::Op("UPDATE")));
        assert_eq!(
            LatencyOp::parse("rmw"),
            Ok(LatencyOp::Op("READ-MODIFY-WRITE"))
        );
        assert_eq!(
            LatencyOp::parse("read_modify_write"),
            Ok(LatencyOp::Op("READ-MODIFY-WRITE"))
        );
        assert_eq!(LatencyOp::parse("all"), Ok(LatencyOp::All));
        let e = LatencyOp::parse("reads").unwrap_err();
        assert!(e.contains("\"reads\"") && e.contains("read, update"), "{e}");
        assert_eq!(LatencyOp::All.words(), "all ops");
        assert_eq!(LatencyOp::Read.words(), "read");
    }
}
