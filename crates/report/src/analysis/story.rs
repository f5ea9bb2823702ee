//! Whose IO tells a step's story. In the briefs the database runs on servers of its own: when
//! its nodes are observed on their hosts (`--observe`), every IO analysis runs on each node's
//! own trace and events, the cluster is rolled up from them (sums, and the worst node for each
//! peak), and the client host's disks are shown apart, never as the database's IO. When the
//! database runs here (embedded, or managed nodes not observed), the client host is the
//! database's host and tells the story itself: one code path, a node being a place like any.

use super::step::{step_view, StepView};
use super::{findings, times};
use crate::data::{Place, RunData, StepData};
use std::collections::BTreeSet;

/// The observed hosts of a step that hold a database node, as (index in `step.nodes`, the
/// node's client address): the places whose IO is the database's.
pub fn database_nodes(run: &RunData, step: &StepData) -> Vec<(usize, String)> {
    let Some(c) = &run.doc.cluster else {
        return Vec::new();
    };
    step.nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let host = c.observed.iter().find(|h| h.host == n.step.host)?;
            Some((i, host.node.as_ref()?.address.clone()))
        })
        .collect()
}

/// The client host's own IO: its trace without the devices that database nodes observed on
/// this same kernel traced (their IO is the nodes' story, not the client's).
fn client_host_apart(run: &RunData, step: &StepData, nodes: &[(usize, String)]) -> StepData {
    let here = run.doc.environment.boot_id.as_deref();
    let observed = run.doc.cluster.as_ref().map(|c| &c.observed[..]);
    let nodes_devices: BTreeSet<String> = nodes
        .iter()
        .map(|(i, _)| &step.nodes[*i])
        .filter(|n| {
            observed
                .and_then(|o| o.iter().find(|h| h.host == n.step.host))
                .is_some_and(|h| Some(h.boot_id.as_str()) == here)
        })
        .filter_map(|n| n.trace.as_ref())
        .flat_map(|t| t.devices.iter().map(|d| d.name.clone()))
        .collect();
    let mut apart = step.without_nodes();
    if let Some(t) = &step.trace {
        apart.trace = Some(t.without_devices(&|d| nodes_devices.contains(d)));
    }
    if let Some(ds) = &mut apart.device_stats {
        ds.devices.retain(|d| !nodes_devices.contains(&d.device));
    }
    apart
}

/// A step's view: the client host's, and when database nodes were observed, each node's view
/// with its findings named after it, the cluster roll-up, and the step's findings told from
/// the nodes (the client host's own kept apart in `host_findings`).
pub(super) fn step_story(run: &RunData, step: &StepData) -> StepView {
    let nodes = database_nodes(run, step);
    if nodes.is_empty() {
        let mut v = step_view(step);
        v.slow_seconds = super::slow::slow_seconds(step, &[(step, super::slow::Role::Database)]);
        return v;
    }
    let client = client_host_apart(run, step, &nodes);
    let mut v = step_view(&client);
    // The load generator's disk did not serve the database's reads: no storage verdict of it.
    v.storage = None;
    v.findings
        .retain(|f| !f.starts_with(super::storage::NOT_STORAGE_BOUND));
    v.host_findings = std::mem::take(&mut v.findings);
    let node_data: Vec<(usize, String, StepData)> = nodes
        .into_iter()
        .map(|(i, addr)| (i, addr.clone(), step.at_node(i, Some(addr))))
        .collect();
    let client_role = match node_beside_client(run, step, &node_data) {
        Some(node) => super::slow::Role::ClientBeside(node),
        None => super::slow::Role::ClientApart,
    };
    let places: Vec<(&StepData, super::slow::Role)> = node_data
        .iter()
        .map(|(_, _, d)| (d, super::slow::Role::Database))
        .chain(std::iter::once((&client, client_role)))
        .collect();
    v.slow_seconds = super::slow::slow_seconds(step, &places);
    let devices: Vec<Vec<NodeDevice>> = node_data
        .iter()
        .map(|(i, _, data)| node_devices(run, &step.nodes[*i].step.host, data))
        .collect();
    v.node_views = node_data
        .into_iter()
        .map(|(i, addr, data)| {
            let mut nv = step_view(&data);
            let ns = &step.nodes[i].step;
            nv.place_notes = ns
                .partial
                .iter()
                .map(|p| format!("Its data for this step is partial: {p}."))
                .chain(
                    ns.notes
                        .iter()
                        .map(|n| format!("{}.", n.trim_end_matches('.'))),
                )
                .collect();
            if let Some(sb) = nv.storage.as_mut() {
                sb.node_share = node_share(run, &addr);
                nv.findings.extend(super::storage::node_share_finding(sb));
            }
            let name = nv.place.name();
            nv.findings = nv.findings.iter().map(|f| named(&name, f)).collect();
            nv
        })
        .collect();
    let rollup = Rollup::of(&v.node_views, &devices);
    v.findings = v
        .node_views
        .iter()
        .flat_map(|n| n.findings.iter().cloned())
        .chain(rollup.findings())
        .collect();
    v.rollup = Some(rollup);
    v
}

/// The first database node on the client host's own kernel (the same boot id), when one is.
fn node_beside_client(
    run: &RunData,
    step: &StepData,
    nodes: &[(usize, String, StepData)],
) -> Option<String> {
    let here = run.doc.environment.boot_id.as_deref()?;
    let observed = &run.doc.cluster.as_ref()?.observed;
    nodes.iter().find_map(|(i, _, data)| {
        let host = &step.nodes[*i].step.host;
        observed
            .iter()
            .any(|h| h.host == *host && h.boot_id == here)
            .then(|| data.place.name())
    })
}

/// A node's traced devices as the roll-up counts them: each is its kernel's (the host's boot
/// id, else the host) and its name, so nodes that share a kernel and a drive count it once.
fn node_devices(run: &RunData, host: &str, data: &StepData) -> Vec<NodeDevice> {
    let kernel = run
        .doc
        .cluster
        .as_ref()
        .and_then(|c| c.observed.iter().find(|h| h.host == host))
        .map(|h| h.boot_id.clone())
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| format!("host {host}"));
    let Some(t) = &data.trace else {
        return Vec::new();
    };
    t.devices
        .iter()
        .map(|d| {
            let bytes = |op: &str| d.ops.get(op).map_or(0, |o| o.bytes);
            NodeDevice {
                key: (kernel.clone(), d.name.clone()),
                read: bytes("read"),
                write: bytes("write"),
                discard: bytes("discard"),
            }
        })
        .collect()
}

/// The database's storage-bound figures of a step: the client host's when the database's IO
/// is its own, else its observed nodes' device reads summed against the client's database
/// reads, never the load generator's idle disk.
pub fn database_storage_bound(
    run: &RunData,
    step: &StepData,
) -> Option<super::storage::StorageBound> {
    let nodes = database_nodes(run, step);
    if nodes.is_empty() {
        return super::storage::storage_bound(step);
    }
    let per_node: Vec<_> = nodes
        .into_iter()
        .filter_map(|(i, addr)| super::storage::storage_bound(&step.at_node(i, Some(addr))))
        .collect();
    super::storage::summed(&per_node, super::storage::client_reads(step))
}

/// A node's share of the dataset: the bytes under its data directories at the start (measured
/// on its host), else its effective ownership of the logical dataset.
fn node_share(run: &RunData, addr: &str) -> Option<super::storage::NodeShare> {
    let c = run.doc.cluster.as_ref()?;
    let ip = |a: &str| a.split(':').next().unwrap_or(a).to_string();
    let measured = c
        .observed
        .iter()
        .filter_map(|h| h.node.as_ref())
        .find(|n| n.address == addr)
        .and_then(|n| n.data_bytes);
    if let Some(bytes) = measured.filter(|b| *b > 0) {
        return Some(super::storage::NodeShare {
            bytes,
            how: "its data and commit-log directories at the start".into(),
        });
    }
    let owns = c
        .nodes
        .iter()
        .find(|n| ip(&n.address) == ip(addr))?
        .owns_pct?;
    let logical = super::storage::logical_dataset_bytes(&run.doc.config.properties)?;
    Some(super::storage::NodeShare {
        bytes: (logical as f64 * owns / 100.0) as u64,
        how: format!(
            "{owns:.1} % effective ownership of the {:.3} GB logical dataset",
            logical as f64 / 1e9
        ),
    })
}

/// "127.0.0.3: write bursts reach …": a finding named after its place, its first word
/// lower-cased unless it is an acronym ("IO", "OS").
pub fn named(place: &str, finding: &str) -> String {
    let mut chars = finding.chars();
    let first: String = match (chars.next(), chars.next()) {
        (Some(a), Some(b)) if a.is_uppercase() && b.is_lowercase() => {
            a.to_lowercase().chain(std::iter::once(b)).collect()
        }
        (Some(a), Some(b)) => [a, b].into_iter().collect(),
        (Some(a), None) => a.to_string(),
        _ => String::new(),
    };
    format!("{place}: {first}{}", chars.as_str())
}

/// One peak of the cluster: its value, the node where it was reached and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Peak {
    /// What peaked, in words (`write MB/s in a 100 ms slot`).
    pub what: &'static str,
    /// The peak's value in the unit `what` names.
    pub value: f64,
    /// The node where it was reached ([`Place::name`]).
    pub node: String,
    /// Unix ms at the middle of the second it was reached in; none for a whole-step figure.
    pub at_ms: Option<f64>,
}

/// One traced device of a node in a step: its kernel (boot id) and name, and the bytes moved.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeDevice {
    /// (the host's boot id, the device's name): the same drive under two nodes of one kernel.
    pub key: (String, String),
    /// Bytes read in the node's traced window.
    pub read: u64,
    /// Bytes written.
    pub write: u64,
    /// Bytes discarded.
    pub discard: u64,
}

/// The database's nodes in one step, summed, with the worst node for every peak.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rollup {
    /// Nodes with a trace in the step.
    pub traced: usize,
    /// Nodes observed in the step.
    pub nodes: usize,
    /// Distinct devices traced (a drive that nodes on one kernel share counts once).
    pub devices: usize,
    /// Traced devices of a node that another node of the same kernel had already counted.
    pub shared: usize,
    /// Bytes read, written and discarded over all nodes.
    pub read_bytes: u64,
    /// Bytes written over all nodes.
    pub write_bytes: u64,
    /// Bytes discarded over all nodes.
    pub discard_bytes: u64,
    /// Write MB/s over the step, summed over nodes (each node's bytes over its traced window).
    pub write_mb_s_mean: f64,
    /// Read MB/s over the step, summed over nodes.
    pub read_mb_s_mean: f64,
    /// Each peak with the node that reached it: busiest write and read slots (as MB/s), read
    /// IOPS, deepest queue, slowest read p99 at the device and in the OS of any second.
    pub peaks: Vec<Peak>,
}

impl Rollup {
    /// Sums and peaks over the node views; `devices[i]` are node i's traced devices, each
    /// summed once over all nodes (a drive nodes share is their one drive).
    pub fn of(nodes: &[StepView], devices: &[Vec<NodeDevice>]) -> Rollup {
        let mut r = Rollup {
            nodes: nodes.len(),
            ..Default::default()
        };
        let mut seen = BTreeSet::new();
        for (i, n) in nodes.iter().enumerate() {
            let secs = (n.trace_window_ms as f64 / 1000.0).max(1e-3);
            if n.trace_mode != "off" && !n.io_rows.is_empty() {
                r.traced += 1;
            }
            for d in devices.get(i).map_or(&[][..], Vec::as_slice) {
                if !seen.insert(d.key.clone()) {
                    r.shared += 1;
                    continue;
                }
                r.read_bytes += d.read;
                r.write_bytes += d.write;
                r.discard_bytes += d.discard;
                r.write_mb_s_mean += d.write as f64 / 1e6 / secs;
                r.read_mb_s_mean += d.read as f64 / 1e6 / secs;
            }
        }
        r.devices = seen.len();
        type Pick = fn(&StepView) -> Option<(f64, f64)>;
        let picks: [(&'static str, Pick); 6] = [
            ("write MB/s in its busiest slot", |n| {
                max_of(n.io.get("write").map(|l| &l.mb_s_max[..]))
            }),
            ("read MB/s in its busiest slot", |n| {
                max_of(n.io.get("read").map(|l| &l.mb_s_max[..]))
            }),
            ("read IOPS", |n| {
                max_of(n.io.get("read").map(|l| &l.iops[..]))
            }),
            ("queue depth", |n| max_of(Some(&n.qd_max[..]))),
            ("read p99 at the device (ms)", |n| {
                max_of(n.io.get("read").map(|l| &l.lat_p99_ms[..]))
            }),
            ("read p99 in the OS (ms)", |n| {
                max_of(n.io.get("read").map(|l| &l.os_p99_ms[..]))
            }),
        ];
        for (what, pick) in picks {
            let worst = nodes
                .iter()
                .filter_map(|n| pick(n).map(|(x, v)| (n, x, v)))
                .max_by(|a, b| a.2.total_cmp(&b.2));
            if let Some((n, x, v)) = worst.filter(|w| w.2 > 0.0) {
                r.peaks.push(Peak {
                    what,
                    value: v,
                    node: n.place.name(),
                    at_ms: Some(x),
                });
            }
        }
        r
    }

    /// The peak of `what`, when one was reached.
    pub fn peak(&self, what: &str) -> Option<&Peak> {
        self.peaks.iter().find(|p| p.what == what)
    }

    /// The roll-up in one sentence, when there are several nodes: totals, and where each
    /// peak was reached (the briefs' "QD 800 during the flush" is one node's, not a sum's).
    pub fn findings(&self) -> Vec<String> {
        if self.nodes < 2 || self.traced == 0 {
            return Vec::new();
        }
        let gb = |b: u64| b as f64 / 1e9;
        let shared = if self.shared > 0 {
            format!(
                "; {} drives, as nodes on one kernel share some and each is counted once",
                self.devices
            )
        } else {
            String::new()
        };
        let mut s = format!(
            "The {} nodes together read {:.2} GB and wrote {:.2} GB ({} read, {} written on average{shared})",
            self.nodes,
            gb(self.read_bytes),
            gb(self.write_bytes),
            findings::rate(self.read_mb_s_mean),
            findings::rate(self.write_mb_s_mean),
        );
        if let Some(p) = self.peak("write MB/s in its busiest slot") {
            // A node's busiest slot is its drive's: set against the mean per traced drive.
            let mean_per_drive = self.write_mb_s_mean / self.devices.max(1) as f64;
            let ratio = if mean_per_drive > 0.0 {
                format!(", {} a drive's mean", times(p.value / mean_per_drive))
            } else {
                String::new()
            };
            s.push_str(&format!(
                "; the worst write burst is {}'s ({}{ratio}{})",
                p.node,
                findings::rate(p.value),
                at(p)
            ));
        }
        if let Some(p) = self.peak("queue depth") {
            s.push_str(&format!(
                "; the deepest queue {}'s ({:.0}{})",
                p.node,
                p.value,
                at(p)
            ));
        }
        if let Some(p) = self.peak("read p99 at the device (ms)") {
            s.push_str(&format!(
                "; the slowest second's read p99 at the device {}'s ({}{})",
                p.node,
                findings::lat_ms(p.value),
                at(p)
            ));
        }
        vec![s + "."]
    }
}

/// " at 13:04:21" for a peak with a second.
fn at(p: &Peak) -> String {
    p.at_ms
        .map(|x| format!(" at {}", crate::svg::clock(x)))
        .unwrap_or_default()
}

/// The largest value of a line with its x.
fn max_of(line: Option<&[(f64, f64)]>) -> Option<(f64, f64)> {
    line?.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The place names of a step's story: its nodes, or the client host.
pub fn story_places(v: &StepView) -> Vec<Place> {
    if v.node_views.is_empty() {
        vec![v.place.clone()]
    } else {
        v.node_views.iter().map(|n| n.place.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_is_named_after_its_node_with_its_first_word_lowered() {
        assert_eq!(
            named("127.0.0.3", "Write bursts reach 41×"),
            "127.0.0.3: write bursts reach 41×"
        );
        assert_eq!(
            named("127.0.0.3", "IO by class"),
            "127.0.0.3: IO by class",
            "an acronym keeps its case"
        );
    }

    fn view(name: &str, write_max: f64, qd: f64, write_bytes: u64) -> StepView {
        let mut v = StepView {
            place: Place::Node {
                host: name.into(),
                node: Some(format!("{name}:9042")),
            },
            trace_mode: "ebpf".into(),
            trace_window_ms: 10_000,
            ..Default::default()
        };
        v.io.insert(
            "write".into(),
            super::super::IoLines {
                mb_s_max: vec![(1500.0, write_max / 2.0), (2500.0, write_max)],
                ..Default::default()
            },
        );
        v.qd_max = vec![(1500.0, qd)];
        v.io_rows.push(super::super::IoRow {
            op: "write".into(),
            band: String::new(),
            gb: write_bytes as f64 / 1e9,
            pct_ios: 100.0,
            pct_bytes: 100.0,
            ios: 10,
            bytes: write_bytes,
        });
        v
    }

    #[test]
    fn the_roll_up_sums_nodes_and_names_the_worst_for_each_peak() {
        let nodes = [
            view("10.0.0.1", 900.0, 40.0, 100_000_000),
            view("10.0.0.2", 5600.0, 12.0, 300_000_000),
            view("10.0.0.3", 700.0, 812.0, 200_000_000),
        ];
        let devices: Vec<Vec<NodeDevice>> = nodes
            .iter()
            .map(|n| {
                vec![NodeDevice {
                    key: ("boot".into(), n.place.name()),
                    write: n.io_rows[0].bytes,
                    ..Default::default()
                }]
            })
            .collect();
        let r = Rollup::of(&nodes, &devices);
        assert_eq!(r.write_bytes, 600_000_000);
        assert!((r.write_mb_s_mean - 60.0).abs() < 1e-9, "{r:?}");
        let w = r.peak("write MB/s in its busiest slot").unwrap();
        assert_eq!((w.node.as_str(), w.value), ("10.0.0.2", 5600.0));
        let q = r.peak("queue depth").unwrap();
        assert_eq!((q.node.as_str(), q.value), ("10.0.0.3", 812.0));
        let f = r.findings();
        assert_eq!(f.len(), 1);
        assert!(
            f[0].contains("the worst write burst is 10.0.0.2's (5.6 GB/s, 280× a drive's mean")
                && f[0].contains("the deepest queue 10.0.0.3's (812"),
            "{f:?}"
        );
        assert!(
            Rollup::of(&nodes[..1], &devices[..1]).findings().is_empty(),
            "one node is its own roll-up"
        );
    }

    #[test]
    fn nodes_sharing_a_kernel_and_a_drive_count_it_once() {
        let nodes = [
            view("10.0.0.1", 900.0, 40.0, 300_000_000),
            view("10.0.0.2", 900.0, 40.0, 300_000_000),
            view("10.0.0.3", 700.0, 12.0, 100_000_000),
        ];
        let drive = |boot: &str, name: &str, write: u64| {
            vec![NodeDevice {
                key: (boot.into(), name.into()),
                write,
                ..Default::default()
            }]
        };
        // Nodes 1 and 2 on one kernel's vdb (each traced the whole drive); node 3 has a vdb
        // of its own, on another kernel.
        let devices = [
            drive("A", "vdb", 300_000_000),
            drive("A", "vdb", 300_000_000),
            drive("B", "vdb", 100_000_000),
        ];
        let r = Rollup::of(&nodes, &devices);
        assert_eq!((r.write_bytes, r.devices, r.shared), (400_000_000, 2, 1));
        assert!((r.write_mb_s_mean - 40.0).abs() < 1e-9, "{r:?}");
        let f = r.findings();
        assert!(
            f[0].contains("2 drives, as nodes on one kernel share some and each is counted once")
                && f[0].contains("(900 MB/s, 45× a drive's mean"),
            "{f:?}"
        );
    }
}
