//! What a step's return codes say about its figures: whether any operation succeeded, how many
//! failed and how many reads found no record, worded once for the report, the CSV and compare.
//! A step whose operations all failed still has a throughput (failures can be fast), so every
//! view must know it is not a measurement of the database doing its work.

use crate::analysis::ALL_OPS_SERIES;
use crate::doc::thousands;
use iodig_model::StepSummary;
use std::collections::BTreeMap;

/// Return codes YCSB counts as success (`Status.isOk`).
pub const OK_CODES: [&str; 2] = ["OK", "BATCHED_OK"];
/// The code of a read whose key is not in the database.
pub const NOT_FOUND: &str = "NOT_FOUND";
/// Ops whose NOT_FOUND means a missing record (a read or scan of a key that was never loaded).
const READ_OPS: [&str; 2] = ["READ", "SCAN"];
/// Said wherever NOT_FOUND shows: the usual cause and the fix.
pub const NOT_FOUND_HINT: &str =
    "NOT_FOUND usually means the dataset is not loaded (`iodig load`, or `iodig run --reload`)";

/// Return-code counts of one step or of several merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Operations with a return code, over [`ALL_OPS_SERIES`] so each device-facing op counts
    /// once (a read-modify-write's inner read and update are already there; CLEANUP and VERIFY
    /// are not operations on the data).
    pub total: u64,
    /// Operations that returned a success code ([`OK_CODES`]).
    pub ok: u64,
    /// READ and SCAN operations with a return code.
    pub reads: u64,
    /// Those reads that returned NOT_FOUND (also counted in `failures`).
    pub not_found: u64,
    /// Failed operations by op then code.
    pub failures: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Outcome {
    /// Counts a step's return codes (run.json's `returns`).
    pub fn of(summary: &StepSummary) -> Self {
        let mut o = Outcome::default();
        for (op, codes) in &summary.returns {
            if !ALL_OPS_SERIES.contains(&op.as_str()) {
                continue;
            }
            for (code, &n) in codes {
                o.total += n;
                let is_read = READ_OPS.contains(&op.as_str());
                if is_read {
                    o.reads += n;
                }
                if OK_CODES.contains(&code.as_str()) {
                    o.ok += n;
                    continue;
                }
                if is_read && code == NOT_FOUND {
                    o.not_found += n;
                }
                *o.failures
                    .entry(op.clone())
                    .or_default()
                    .entry(code.clone())
                    .or_default() += n;
            }
        }
        o
    }

    /// The sum of several steps' outcomes (the repetitions of a point).
    pub fn merged<'a>(parts: impl IntoIterator<Item = &'a Outcome>) -> Self {
        let mut o = Outcome::default();
        for p in parts {
            o.total += p.total;
            o.ok += p.ok;
            o.reads += p.reads;
            o.not_found += p.not_found;
            for (op, codes) in &p.failures {
                for (code, n) in codes {
                    *o.failures
                        .entry(op.clone())
                        .or_default()
                        .entry(code.clone())
                        .or_default() += n;
                }
            }
        }
        o
    }

    /// Operations that did not succeed, NOT_FOUND included.
    pub fn failed(&self) -> u64 {
        self.total - self.ok
    }

    /// Operations ran and none succeeded: the step's throughput and latency measure failures.
    pub fn all_failed(&self) -> bool {
        self.total > 0 && self.ok == 0
    }

    /// Share of failed operations in percent; none when no operation has a return code.
    pub fn failed_pct(&self) -> Option<f64> {
        (self.total > 0).then(|| 100.0 * self.failed() as f64 / self.total as f64)
    }

    /// A status mark when reads missed records (and some operation succeeded, else the step is
    /// "all failed"): "80.0% of reads NOT_FOUND".
    pub fn not_found_mark(&self) -> Option<String> {
        (self.not_found > 0 && !self.all_failed()).then(|| {
            format!(
                "{} of reads NOT_FOUND",
                pct(100.0 * self.not_found as f64 / self.reads.max(1) as f64)
            )
        })
    }

    /// "READ ERROR 2,549,214, UPDATE ERROR 12".
    pub fn failure_list(&self) -> String {
        self.failures
            .iter()
            .flat_map(|(op, codes)| {
                codes
                    .iter()
                    .map(move |(code, n)| format!("{op} {code} {}", thousands(*n as f64)))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The failed count and share for tables: "0", "12 (0.50%)", "2,549,214 (100%)".
    pub fn failed_cell(&self) -> String {
        match self.failed_pct() {
            Some(p) if self.failed() > 0 => {
                format!("{} ({})", thousands(self.failed() as f64), pct(p))
            }
            Some(_) => "0".into(),
            None => "–".into(),
        }
    }

    /// Sentences about the return codes (none when every operation succeeded), to follow the
    /// step's name; `operations` is the step's count as YCSB reports it.
    pub fn findings(&self, operations: u64) -> Vec<String> {
        let hint = if self.not_found > 0 {
            format!(": {NOT_FOUND_HINT}")
        } else {
            String::new()
        };
        if self.all_failed() {
            return vec![format!(
                "none of its {} operations succeeded ({}){hint}; its throughput and latency measure failures, so it is left out of peaks, bends and comparisons.",
                // YCSB's count when the step has one (merged steps may not).
                thousands(if operations > 0 { operations } else { self.total } as f64),
                self.failure_list()
            )];
        }
        let mut f = Vec::new();
        if self.not_found > 0 {
            f.push(format!(
                "{} of its {} reads ({}) returned NOT_FOUND{hint}.",
                thousands(self.not_found as f64),
                thousands(self.reads as f64),
                pct(100.0 * self.not_found as f64 / self.reads.max(1) as f64)
            ));
        }
        let other = self.failed() - self.not_found;
        if other > 0 {
            f.push(format!(
                "{} of its {} operations failed ({}): {}.",
                thousands(self.failed() as f64),
                thousands(self.total as f64),
                pct(self.failed_pct().unwrap_or(0.0)),
                self.failure_list()
            ));
        }
        f
    }
}

/// A percentage with digits that keep small shares visible: "0.05%", "12.5%", "100%".
pub fn pct(p: f64) -> String {
    if (99.95..100.0).contains(&p) {
        // Never round a partial failure up to the "100%" of a total one.
        "99.9%".into()
    } else if p == 100.0 || p == 0.0 {
        format!("{p:.0}%")
    } else if p < 0.01 {
        "<0.01%".into()
    } else if p < 1.0 {
        format!("{p:.2}%")
    } else {
        format!("{p:.1}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(rows: &[(&str, &str, u64)]) -> StepSummary {
        let mut returns: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for (op, code, n) in rows {
            returns
                .entry(op.to_string())
                .or_default()
                .insert(code.to_string(), *n);
        }
        StepSummary {
            index: 0,
            phase: "run".into(),
            dir: String::new(),
            workload: "workloada".into(),
            threads: 8,
            target_ops_per_sec: None,
            started_unix_ms: 0,
            runtime_ms: 1000,
            operations: rows.iter().filter(|r| r.0 != "CLEANUP").map(|r| r.2).sum(),
            throughput_ops_per_sec: 0.0,
            interrupted: false,
            series: BTreeMap::new(),
            returns,
            trace_mode: None,
            trace_note: None,
            client_cpu_s: None,
            nodes: Vec::new(),
            sweep_stop: None,
            node_reads: Default::default(),
            node_reads_notes: Vec::new(),
            ended_early: None,
        }
    }

    #[test]
    fn all_failed_ignores_cleanup_and_names_the_codes() {
        let s = summary(&[
            ("READ", "ERROR", 2_549_000),
            ("UPDATE", "ERROR", 214),
            ("CLEANUP", "OK", 8),
        ]);
        let o = Outcome::of(&s);
        assert!(o.all_failed(), "CLEANUP OK is not a successful operation");
        assert_eq!(o.failed_cell(), "2,549,214 (100%)");
        let f = o.findings(s.operations);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].starts_with(
                "none of its 2,549,214 operations succeeded (READ ERROR 2,549,000, UPDATE ERROR 214)"
            ),
            "{f:?}"
        );
        assert!(!f[0].contains("NOT_FOUND"), "errors are not missing data");
    }

    #[test]
    fn not_found_share_is_said_with_the_hint() {
        let o = Outcome::of(&summary(&[
            ("READ", "OK", 200),
            ("READ", "NOT_FOUND", 800),
            ("UPDATE", "OK", 1000),
        ]));
        assert!(!o.all_failed());
        assert_eq!(o.failed_cell(), "800 (40.0%)");
        assert_eq!(o.not_found_mark().unwrap(), "80.0% of reads NOT_FOUND");
        let f = o.findings(2000);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with("800 of its 1,000 reads (80.0%) returned NOT_FOUND: NOT_FOUND usually means the dataset is not loaded"),
            "{f:?}"
        );
        // All reads missing: one sentence, with the hint.
        let o = Outcome::of(&summary(&[("READ", "NOT_FOUND", 800)]));
        assert_eq!(o.not_found_mark(), None, "said as all failed");
        let f = o.findings(800);
        assert!(
            f[0].starts_with(
                "none of its 800 operations succeeded (READ NOT_FOUND 800): NOT_FOUND usually"
            ),
            "{f:?}"
        );
    }

    #[test]
    fn rmw_and_verify_are_not_counted_twice() {
        let o = Outcome::of(&summary(&[
            ("READ", "OK", 10),
            ("UPDATE", "OK", 10),
            ("READ-MODIFY-WRITE", "OK", 10),
            ("VERIFY", "UNEXPECTED_STATE", 3),
        ]));
        assert_eq!((o.total, o.ok, o.failed()), (20, 20, 0));
        assert!(o.findings(20).is_empty());
        assert_eq!(o.failed_cell(), "0");
        assert_eq!(Outcome::default().failed_cell(), "–");
        assert!(
            !Outcome::default().all_failed(),
            "no return codes is not a failure"
        );
    }

    #[test]
    fn merged_sums_and_percent_digits() {
        let a = Outcome::of(&summary(&[("READ", "OK", 3), ("READ", "ERROR", 1)]));
        let b = Outcome::of(&summary(&[("READ", "ERROR", 4)]));
        let m = Outcome::merged([&a, &b]);
        assert_eq!((m.total, m.ok), (8, 3));
        assert_eq!(m.failure_list(), "READ ERROR 5");
        assert_eq!(pct(0.05), "0.05%");
        assert_eq!(pct(0.001), "<0.01%");
        assert_eq!(pct(99.99), "99.9%");
        assert_eq!(pct(100.0), "100%");
    }
}
