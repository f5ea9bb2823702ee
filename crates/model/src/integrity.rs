//! What `iodig verify` (or `--verify` at the end of a run) found when it read back every key
//! the run's versioned writes had acknowledged: in run.json as `integrity`.

use serde::{Deserialize, Serialize};

/// The check of a run's acknowledged writes, and what its own reads saw along the way.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IntegrityDoc {
    /// `run` (checked at the end of the run) or `verify` (by `iodig verify` afterwards).
    pub checked_by: String,
    /// When the read-back finished (unix ms).
    pub checked_unix_ms: u64,
    /// How the values were read back, e.g. `cassandra at QUORUM` or `rocksdb`.
    pub read_with: String,
    /// Keys with at least one acknowledged write: each one was read back.
    pub keys: u64,
    /// Keys whose every field held its last acknowledged value (or a write that overlapped it).
    pub ok: u64,
    /// Keys absent, or with a field absent, although a write of it was acknowledged.
    pub missing: u64,
    /// Keys with a field older than its last acknowledged write allows: a lost update.
    pub stale: u64,
    /// Keys with a field that is not a value iodig wrote there (garbled, cut, moved).
    pub corrupt: u64,
    /// Keys holding a value from a write that failed or timed out but landed anyway: allowed,
    /// counted because it shows writes the client was told had not happened.
    #[serde(default)]
    pub unacknowledged: u64,
    /// Keys whose read failed (timeout, unavailable): not judged.
    #[serde(default)]
    pub unreadable: u64,
    /// The first few problems, for a person to look at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<IntegrityExample>,
    /// The run's own reads, judged as they returned against the writes acknowledged before
    /// each began.
    #[serde(default)]
    pub during_run: ReadsJudged,
    /// Each node read alone (`-p verify.eachnode=true` on managed nodes): which replica is
    /// behind. Informative: a replica behind is not a lost write while the cluster's reads at
    /// the run's consistency find it; the verdict is the cluster's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_node: Vec<NodeIntegrity>,
}

/// One node's own copy of the acknowledged writes, read with no other replica to answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeIntegrity {
    /// The node's address (`127.0.0.2`).
    pub node: String,
    /// How it was read, e.g. `127.0.0.2 alone at ONE (the other nodes paused)`.
    pub read_with: String,
    /// Keys with at least one acknowledged write, each read from this node.
    pub keys: u64,
    /// Keys whose every field this node holds as acknowledged.
    pub ok: u64,
    /// Keys this node lacks (record or field).
    pub missing: u64,
    /// Keys this node holds older than acknowledged.
    pub stale: u64,
    /// Keys this node holds garbled.
    pub corrupt: u64,
    /// Keys whose read from this node failed: not judged.
    pub unreadable: u64,
}

impl NodeIntegrity {
    /// Whether this node holds every acknowledged write as acknowledged.
    pub fn current(&self) -> bool {
        self.missing == 0 && self.stale == 0 && self.corrupt == 0 && self.unreadable == 0
    }
}

/// One key found wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntegrityExample {
    /// The record's key as the workload names it.
    pub key: String,
    /// `missing`, `stale`, `corrupt`.
    pub verdict: String,
    /// The field, or empty for a record that was not there.
    #[serde(default)]
    pub field: String,
    /// The last acknowledged version of the field (microseconds since the epoch).
    pub acknowledged_version: u64,
    /// The version found, when the value had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_version: Option<u64>,
}

/// Reads judged while the workload ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadsJudged {
    /// Values the run's own reads returned that had a write to judge them by.
    pub checked: u64,
    /// Of those, values older than a write acknowledged before the read began.
    pub stale: u64,
    /// Of those, values that are not one iodig wrote.
    pub corrupt: u64,
    /// Reads that found no record (NOT_FOUND) although its insert was acknowledged before
    /// they began.
    #[serde(default)]
    pub missing: u64,
}

impl IntegrityDoc {
    /// Whether every acknowledged write was read back and found as acknowledged. A key that
    /// could not be read proves nothing, so it leaves the check short of clean.
    pub fn clean(&self) -> bool {
        !self.lost_or_damaged() && self.unreadable == 0
    }

    /// Whether a key read back was missing, stale or corrupt.
    pub fn lost_or_damaged(&self) -> bool {
        self.missing > 0 || self.stale > 0 || self.corrupt > 0
    }

    /// `ok`, `FAILED` (a write lost or damaged) or `UNPROVEN` (only unreadable keys kept it
    /// from ok).
    pub fn verdict(&self) -> &'static str {
        if self.lost_or_damaged() {
            "FAILED"
        } else if self.unreadable > 0 {
            "UNPROVEN"
        } else {
            "ok"
        }
    }

    /// One line: the counts as a person reads them.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} keys with acknowledged writes read back ({}): {} missing, {} stale, {} corrupt",
            self.keys, self.read_with, self.missing, self.stale, self.corrupt
        );
        if self.unreadable > 0 {
            s.push_str(&format!(", {} unreadable", self.unreadable));
        }
        if self.unacknowledged > 0 {
            s.push_str(&format!(
                ", {} holding a write that was not acknowledged",
                self.unacknowledged
            ));
        }
        let d = self.during_run;
        if d.checked > 0 {
            s.push_str(&format!(
                "; during the run {} of {} reads were stale and {} corrupt",
                d.stale, d.checked, d.corrupt
            ));
        }
        if !self.per_node.is_empty() {
            let nodes: Vec<String> = self
                .per_node
                .iter()
                .map(|n| {
                    let mut one = format!(
                        "{} {} missing, {} stale, {} corrupt",
                        n.node, n.missing, n.stale, n.corrupt
                    );
                    if n.unreadable > 0 {
                        one.push_str(&format!(", {} unreadable", n.unreadable));
                    }
                    one
                })
                .collect();
            s.push_str(&format!("; each node read alone: {}", nodes.join("; ")));
        }
        s
    }
}
