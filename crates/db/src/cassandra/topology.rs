//! The cluster as the driver's metadata and the nodes' system tables describe it: every node's
//! tokens, version, datacenter and rack, and its effective ownership of the keyspace (what
//! `nodetool status KEYSPACE` prints as "Owns (effective)", which the briefs tabulate).

use std::collections::{BTreeMap, HashMap};

use iodig_model::cluster::{ClusterDoc, NodeFacts};
use scylla::client::session::Session;
use scylla::cluster::metadata::Strategy;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::statement::unprepared::Statement;

/// Reads the cluster's facts for `keyspace`; what cannot be read is a note, not an error.
pub async fn read(session: &Session, keyspace: &str) -> ClusterDoc {
    let _ = session.refresh_metadata().await;
    let state = session.get_cluster_state();
    let mut notes = Vec::new();
    let ring: Vec<(i64, String)> = state
        .replica_locator()
        .ring()
        .iter()
        .map(|(t, n)| (t.value(), n.address.ip().to_string()))
        .collect();
    let mut nodes: BTreeMap<String, NodeFacts> = BTreeMap::new();
    for n in state.get_nodes_info() {
        let address = n.address.ip().to_string();
        nodes.insert(
            address.clone(),
            NodeFacts {
                address,
                datacenter: n.datacenter.clone(),
                rack: n.rack.clone(),
                ..Default::default()
            },
        );
    }
    for (_, owner) in &ring {
        if let Some(n) = nodes.get_mut(owner) {
            n.tokens += 1;
        }
    }
    let dc_of: HashMap<String, Option<String>> = nodes
        .values()
        .map(|n| (n.address.clone(), n.datacenter.clone()))
        .collect();
    let replication = match state.get_keyspace(keyspace).map(|k| &k.strategy) {
        Some(Strategy::SimpleStrategy { replication_factor }) => {
            for (node, pct) in effective_ownership(&ring, |_| Some(*replication_factor)) {
                if let Some(n) = nodes.get_mut(&node) {
                    n.owns_pct = Some(pct);
                }
            }
            Some(format!("SimpleStrategy rf={replication_factor}"))
        }
        Some(Strategy::NetworkTopologyStrategy {
            datacenter_repfactors,
        }) => {
            // Each datacenter holds its own replicas: walk its nodes' tokens only. Racks are
            // not considered (replicas of a range may then be placed differently).
            for (dc, rf) in datacenter_repfactors {
                let dc_ring: Vec<(i64, String)> = ring
                    .iter()
                    .filter(|(_, n)| dc_of.get(n).and_then(Option::as_deref) == Some(dc))
                    .cloned()
                    .collect();
                for (node, pct) in effective_ownership(&dc_ring, |_| Some(*rf)) {
                    if let Some(n) = nodes.get_mut(&node) {
                        n.owns_pct = Some(pct);
                    }
                }
            }
            if nodes.values().any(|n| n.rack.is_some()) {
                notes.push("ownership under NetworkTopologyStrategy is computed per datacenter without rack placement".into());
            }
            let mut dcs: Vec<String> = datacenter_repfactors
                .iter()
                .map(|(dc, rf)| format!("{dc}:{rf}"))
                .collect();
            dcs.sort();
            Some(format!("NetworkTopologyStrategy {}", dcs.join(",")))
        }
        Some(other) => {
            notes.push(format!(
                "replication {other:?} of keyspace {keyspace}: ownership not computed"
            ));
            None
        }
        None => {
            notes.push(format!(
                "keyspace {keyspace} not in the driver's metadata: ownership not computed"
            ));
            None
        }
    };
    read_versions(session, &mut nodes, &mut notes).await;
    ClusterDoc {
        keyspace: Some(keyspace.to_string()),
        replication,
        nodes: nodes.into_values().collect(),
        observed: Vec::new(),
        notes,
    }
}

/// Each node's reads of `keyspace.table` served by its own storage engine so far: the counts of
/// its `system_views.local_read_latency` and `local_scan_latency` rows (Cassandra 4.0+), asked
/// of that node alone, as virtual tables answer for the node that holds them.
pub async fn local_reads(
    session: &Session,
    keyspace: &str,
    table: &str,
) -> BTreeMap<String, Result<u64, String>> {
    let state = session.get_cluster_state();
    let mut out = BTreeMap::new();
    for node in state.get_nodes_info() {
        let mut total = Ok(0u64);
        for view in ["local_read_latency", "local_scan_latency"] {
            let q = on_node(
                format!(
                    "SELECT count FROM system_views.{view} WHERE keyspace_name = ? AND table_name = ?"
                ),
                node,
            );
            let count = match session.query_unpaged(q, (keyspace, table)).await {
                Ok(r) => r
                    .into_rows_result()
                    .map_err(|e| e.to_string())
                    .and_then(|rows| {
                        rows.maybe_first_row::<(Option<i64>,)>()
                            .map_err(|e| e.to_string())
                    })
                    // No row: the node has no such table yet, so it served none.
                    .map(|row| row.and_then(|(c,)| c).unwrap_or(0)),
                Err(e) => Err(e.to_string()),
            };
            total = match (total, count) {
                (Ok(t), Ok(c)) => Ok(t + u64::try_from(c).unwrap_or(0)),
                (Err(e), _) | (_, Err(e)) => Err(format!("system_views.{view}: {e}")),
            };
        }
        out.insert(node.address.ip().to_string(), total);
    }
    out
}

/// `cql` sent to `node` alone: node-local tables (`system.local`, `system_views`) answer for
/// the node that holds them, whichever coordinates.
fn on_node(cql: impl Into<String>, node: &std::sync::Arc<scylla::cluster::Node>) -> Statement {
    let mut q = Statement::new(cql.into());
    q.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
        NodeIdentifier::Node(node.clone()),
        None,
    )));
    q
}

/// Each node's version from its own `system.local`: the statement is sent to that node alone
/// (a coordinator answers `system.local` with its own row, whichever node it is).
async fn read_versions(
    session: &Session,
    nodes: &mut BTreeMap<String, NodeFacts>,
    notes: &mut Vec<String>,
) {
    let state = session.get_cluster_state();
    for node in state.get_nodes_info() {
        let address = node.address.ip().to_string();
        let q = on_node("SELECT release_version FROM system.local", node);
        let version = match session.query_unpaged(q, ()).await {
            Ok(r) => r
                .into_rows_result()
                .map_err(|e| e.to_string())
                .and_then(|rows| {
                    rows.maybe_first_row::<(Option<String>,)>()
                        .map_err(|e| e.to_string())
                }),
            Err(e) => Err(e.to_string()),
        };
        match version {
            Ok(Some((v,))) => {
                if let Some(n) = nodes.get_mut(&address) {
                    n.version = v;
                }
            }
            Ok(None) => notes.push(format!("{address}: system.local has no row")),
            Err(e) => notes.push(format!("{address}: version not read: {e}")),
        }
    }
}

/// Effective ownership per node in percent: each range `(previous token, token]` belongs to the
/// node holding `token` and the next `rf - 1` distinct nodes clockwise, as SimpleStrategy places
/// replicas. Sums to `rf × 100` when there are at least `rf` nodes.
pub fn effective_ownership(
    ring: &[(i64, String)],
    rf: impl Fn(&str) -> Option<usize>,
) -> BTreeMap<String, f64> {
    let mut owned: BTreeMap<String, f64> = BTreeMap::new();
    if ring.is_empty() {
        return owned;
    }
    let mut sorted = ring.to_vec();
    sorted.sort_by_key(|(t, _)| *t);
    let distinct = {
        let mut d: Vec<&str> = sorted.iter().map(|(_, n)| n.as_str()).collect();
        d.sort_unstable();
        d.dedup();
        d.len()
    };
    let full = 2f64.powi(64);
    for i in 0..sorted.len() {
        let (token, owner) = &sorted[i];
        let prev = if i == 0 {
            sorted[sorted.len() - 1].0
        } else {
            sorted[i - 1].0
        };
        // Ring arithmetic on the Murmur3 token space; one token owns the whole ring.
        let width = if sorted.len() == 1 {
            full
        } else {
            (i128::from(*token) - i128::from(prev)).rem_euclid(1i128 << 64) as f64
        };
        let wanted = rf(owner).unwrap_or(1).min(distinct);
        let mut replicas: Vec<&str> = Vec::with_capacity(wanted);
        let mut j = i;
        while replicas.len() < wanted {
            let n = sorted[j].1.as_str();
            if !replicas.contains(&n) {
                replicas.push(n);
            }
            j = (j + 1) % sorted.len();
        }
        for r in replicas {
            *owned.entry(r.to_string()).or_default() += 100.0 * width / full;
        }
    }
    owned
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(tokens: &[(i64, &str)]) -> Vec<(i64, String)> {
        tokens.iter().map(|(t, n)| (*t, n.to_string())).collect()
    }

    #[test]
    fn ownership_sums_to_rf_times_100() {
        let r = ring(&[
            (-6_000_000_000_000_000_000, "a"),
            (-1_000_000_000_000_000_000, "b"),
            (2_000_000_000_000_000_000, "c"),
            (5_000_000_000_000_000_000, "a"),
            (7_000_000_000_000_000_000, "b"),
        ]);
        for rf in 1..=3 {
            let o = effective_ownership(&r, |_| Some(rf));
            let total: f64 = o.values().sum();
            assert!((total - 100.0 * rf as f64).abs() < 1e-6, "rf {rf}: {o:?}");
        }
        // Three nodes at RF 3: every node holds everything.
        let o = effective_ownership(&r, |_| Some(3));
        assert!(o.values().all(|p| (p - 100.0).abs() < 1e-6), "{o:?}");
    }

    #[test]
    fn primary_ranges_at_rf_1_are_the_token_gaps() {
        // Two tokens at 0 and 2^62: "b" owns (0, 2^62], a quarter; "a" the rest.
        let r = ring(&[(0, "a"), (1 << 62, "b")]);
        let o = effective_ownership(&r, |_| Some(1));
        assert!((o["b"] - 25.0).abs() < 1e-9, "{o:?}");
        assert!((o["a"] - 75.0).abs() < 1e-9, "{o:?}");
    }

    #[test]
    fn rf_beyond_the_node_count_is_capped() {
        let r = ring(&[(0, "a"), (1 << 62, "b")]);
        let o = effective_ownership(&r, |_| Some(3));
        assert!(o.values().all(|p| (p - 100.0).abs() < 1e-9), "{o:?}");
    }
}
