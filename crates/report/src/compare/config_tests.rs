//! The configuration table's tests: rows from run.json and from the observed nodes' own descriptions.

use super::*;

#[test]
fn locations_and_settings_are_told_from_work() {
    for k in [
        "rocksdb.dir",
        "hosts",
        "cassandra.storagedir",
        "cassandra.logdir",
        "port",
    ] {
        assert!(is_location(k), "{k}");
    }
    for k in ["rocksdb.directreads", "readproportion", "recordcount"] {
        assert!(!is_location(k), "{k}");
    }
    for k in [
        "rocksdb.blockcachesize",
        "cassandra.readconsistencylevel",
        "faultdisk.size",
    ] {
        assert!(is_setting(k), "{k}");
    }
    for k in [
        "readproportion",
        "requestdistribution",
        "operationcount",
        "fieldlength",
    ] {
        assert!(!is_setting(k) && !is_location(k), "{k}");
    }
}

/// A run of `nodes` observed nodes whose data sits on `model` drives, node 2's memtable
/// setting `memtable` (the others `2048MiB`); node 3 sent no description when `mute`.
fn cluster_run(label: &str, model: &str, memtable: &str, mute: bool) -> RunData {
    use iodig_model::cluster::{ClusterDoc, ObservedHost};
    let observed = (1..=3)
        .map(|i| {
            let env = Environment {
                hostname: format!("node{i}"),
                kernel: "6.12.0".into(),
                storage: Some(iodig_model::run::StorageInfo {
                    device: Some(format!("loop{i}")),
                    model: Some(model.into()),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let mut settings = std::collections::BTreeMap::new();
            let m = if i == 2 { memtable } else { "2048MiB" };
            settings.insert("memtable_heap_space".to_string(), m.to_string());
            ObservedHost {
                host: format!("node{i}"),
                environment: (!(mute && i == 3)).then_some(env),
                node: Some(HostNode {
                    address: format!("127.0.0.{i}:9042"),
                    settings,
                    ..Default::default()
                }),
                ..Default::default()
            }
        })
        .collect();
    let mut doc = iodig_model::RunDoc::default();
    doc.config.label = Some(label.into());
    doc.config.db = "cassandra".into();
    doc.environment.hostname = "loadgen".into();
    doc.cluster = Some(ClusterDoc {
        observed,
        ..Default::default()
    });
    RunData {
        path: label.into(),
        doc,
        steps: Vec::new(),
        state: None,
        step_views: Vec::new(),
    }
}

#[test]
fn the_nodes_drives_and_settings_are_the_runs_configuration_folded_where_they_agree() {
    let runs = [
        cluster_run("nvme", "NVMe 9300", "2048MiB", false),
        cluster_run("sata", "SATA 5200", "512MiB", true),
    ];
    let rows = rows(&runs);
    let row = |name: &str| {
        rows.iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("{name}: {rows:#?}"))
            .values
            .clone()
    };
    // All three nodes agree in the first run; the second's third node did not say.
    assert_eq!(
        row("device model"),
        vec![
            "NVMe 9300".to_string(),
            "127.0.0.1: SATA 5200; 127.0.0.2: SATA 5200; 127.0.0.3: unknown (its agent sent no description)".to_string()
        ]
    );
    assert_eq!(
        row("device")[0],
        "127.0.0.1: loop1; 127.0.0.2: loop2; 127.0.0.3: loop3"
    );
    assert_eq!(
        row("node memtable_heap_space"),
        vec![
            "2048MiB".to_string(),
            "127.0.0.1: 2048MiB; 127.0.0.2: 512MiB; 127.0.0.3: 2048MiB".to_string()
        ]
    );
    // The machines are the nodes', the load generator apart.
    assert_eq!(
        row("host")[0],
        "127.0.0.1: node1; 127.0.0.2: node2; 127.0.0.3: node3"
    );
    assert!(
        row("load generator")[0].starts_with("loadgen ("),
        "{rows:#?}"
    );
    // The device rows lead the table, as the briefs' drive comparisons do.
    assert_eq!(rows[0].name, "device");
    assert!(!row("device model").is_empty() && !rows[1].equal());
}

#[test]
fn clusters_of_different_sizes_are_compared_with_a_caveat_naming_it() {
    let mut small = cluster_run("small", "NVMe 9300", "2048MiB", false);
    if let Some(c) = small.doc.cluster.as_mut() {
        c.observed.truncate(2);
    }
    let runs = [cluster_run("big", "NVMe 9300", "2048MiB", false), small];
    let caveats = super::super::caveats::run_differences(&runs);
    assert!(
        caveats.iter().any(|c| c.starts_with(
            "Node counts differ: 3 observed nodes in big, 2 observed nodes in small."
        )),
        "{caveats:?}"
    );
    // Every row still has a cell per run.
    assert!(rows(&runs).iter().all(|r| r.values.len() == 2));
}

#[test]
fn sizes_and_choices_read_as_the_briefs_write_them() {
    assert_eq!(binary_size(512), "512 B");
    assert_eq!(binary_size(960_197_124_096), "894.3 GiB");
    assert_eq!(binary_size(15_362_991_415_296), "14.0 TiB");
    assert_eq!(active("none [mq-deadline] kyber"), "mq-deadline");
    assert_eq!(active("none"), "none");
    assert_eq!(cell(&"x".repeat(300)).chars().count(), MAX_CELL);
}
