//! The report's header: what ran (command, database, workload, threads, target, key
//! properties), where (host, CPU, memory, device, file system) and how it was traced, then
//! run.json's notes.

use crate::analysis::Report;
use crate::data::RunData;
use crate::doc::{distinct, target_rate, Block, Doc};

/// One line of the header: (name, value).
type Fact = (String, String);

pub(super) fn section(doc: &mut Doc, run: &RunData, report: &Report) {
    let mut facts = config_facts(run, report);
    facts.extend(host_facts(run));
    facts.push(machines_fact(run));
    facts.extend(device_facts(run));
    facts.extend(kernel_facts(run));
    facts.extend(dataset_fact(run));
    if let Some(dd) = &run.doc.environment.data_dir {
        facts.push(("data directory".into(), dd.clone()));
    }
    facts.push(trace_fact(run, report));
    doc.blocks.push(Block::Facts(facts));
    if !report.notes.is_empty() {
        doc.h(3, "Notes");
        doc.list(report.notes.clone());
    }
}

/// The run, the tool and the configuration it ran with.
fn config_facts(run: &RunData, report: &Report) -> Vec<Fact> {
    let d = &run.doc;
    let c = &d.config;
    let mut facts = vec![
        (
            "run".into(),
            match &c.label {
                // The label names the configuration; the directory says where the files are.
                Some(_) => format!("{} · {} ({})", report.run_name, run.dir_name(), d.status),
                None => format!("{} ({})", report.run_name, d.status),
            },
        ),
        (
            "tool".into(),
            match &d.tool.revision {
                Some(r) => format!("{} {} (revision {r})", d.tool.name, d.tool.version),
                None => format!("{} {}", d.tool.name, d.tool.version),
            },
        ),
        ("command".into(), d.tool.command_line.join(" ")),
        (
            "database".into(),
            match &d.environment.database_version {
                Some(v) => format!("{} ({v})", c.db),
                None => c.db.clone(),
            },
        ),
        ("workload files".into(), workload_files(run)),
        (
            "threads".into(),
            c.threads
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        ),
        ("target".into(), target_rate(c.target_ops_per_sec)),
        (
            "latency shown".into(),
            format!(
                "{} (curves, OPS tables, peak and bend; iodig report --op chooses another op or all)",
                report.op.words()
            ),
        ),
        ("warm-up".into(), format!("{} s per step", c.warmup_secs)),
        ("seed".into(), c.seed.to_string()),
    ];
    if let Some(rule) = &c.stop_when {
        facts.push((
            "stop rule".into(),
            format!("{rule} (a workload's sweep ends at the first step that meets it)"),
        ));
    }
    for key in [
        "hosts",
        "recordcount",
        "operationcount",
        "fieldcount",
        "fieldlength",
        "requestdistribution",
    ] {
        if let Some(v) = c.properties.get(key) {
            facts.push((key.into(), v.clone()));
        }
    }
    facts
}

fn host_facts(run: &RunData) -> [Fact; 2] {
    let e = &run.doc.environment;
    [
        (
            "host".into(),
            format!("{} · kernel {}", e.hostname, e.kernel),
        ),
        (
            "CPU".into(),
            format!(
                "{} × {} · {:.1} GiB memory",
                e.cpus,
                e.cpu_model,
                e.memory_bytes as f64 / (1u64 << 30) as f64
            ),
        ),
    ]
}

/// Which machines ran the client and which the database, as the briefs state "client" and
/// "server" apart: an observed host whose kernel boot id is the client's is the same machine.
fn machines_fact(run: &RunData) -> Fact {
    let d = &run.doc;
    let client = format!("client on {}", d.environment.hostname);
    let Some(cluster) = d.cluster.as_ref().filter(|c| !c.nodes.is_empty()) else {
        let db = match d.config.db.as_str() {
            "basic" => "no database (the no-op binding)".to_string(),
            "rocksdb" => "the database embedded in the client process".to_string(),
            _ => match d.config.properties.get("hosts") {
                Some(h) => format!("the database at {h} (its nodes not described)"),
                None => "the database at its binding's default address".to_string(),
            },
        };
        return ("machines".into(), format!("{client}, {db}"));
    };
    let mut placed: Vec<String> = Vec::new();
    // Nodes are named by IP (`127.0.0.2`), observed nodes by socket address (`127.0.0.2:9042`).
    let ip_of = |a: &str| -> String {
        a.parse::<std::net::SocketAddr>()
            .map_or_else(|_| a.to_string(), |s| s.ip().to_string())
    };
    for n in &cluster.nodes {
        let ip = ip_of(&n.address);
        let observed = cluster
            .observed
            .iter()
            .find(|h| h.node.as_ref().is_some_and(|hn| ip_of(&hn.address) == ip));
        let loopback = ip
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback());
        let place = match observed {
            Some(h) if Some(&h.boot_id) == d.environment.boot_id.as_ref() => {
                "the client's machine".to_string()
            }
            Some(h) => format!("{} (observed)", h.hostname),
            None if loopback || ip == "localhost" => "the client's machine (loopback)".to_string(),
            None => "a host of its own, not observed".to_string(),
        };
        placed.push(format!("{} on {place}", n.address));
    }
    (
        "machines".into(),
        format!(
            "{client}; {} node(s): {}",
            cluster.nodes.len(),
            placed.join(", ")
        ),
    )
}

/// The device under the data directory, or for a remote database the devices the block-IO
/// trace saw.
fn device_facts(run: &RunData) -> Vec<Fact> {
    let mut facts = Vec::new();
    let traced = traced_devices(run);
    let traced_list = |t: &[(String, String)]| {
        t.iter()
            .map(|(_, d)| d.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    };
    if let Some(s) = &run.doc.environment.storage {
        let name = s.device.clone().unwrap_or_else(|| s.source.clone());
        facts.push((
            "device".into(),
            describe_device(
                &name,
                s.model.as_deref(),
                s.rotational,
                s.scheduler.as_deref(),
            ),
        ));
        facts.extend(drive_facts(s));
        facts.push((
            "file system".into(),
            format!("{} on {} ({})", s.fs_type, s.mount_point, s.source),
        ));
        if let Some(o) = &s.mount_options {
            facts.push(("mount options".into(), o.clone()));
        }
        // `--device` can add devices beyond the one under the data directory.
        if traced.iter().any(|(n, _)| *n != name) {
            facts.push(("traced devices".into(), traced_list(&traced)));
        }
    } else if !traced.is_empty() {
        facts.push((
            "device".into(),
            format!("{} (from the block-IO trace)", traced_list(&traced)),
        ));
    }
    facts
}

/// Trace mode as asked, and as it ran per step when that differs.
fn trace_fact(run: &RunData, report: &Report) -> Fact {
    let modes = distinct(report.steps.iter().map(|s| match &s.trace_note {
        Some(n) => format!("{} ({n})", s.trace_mode),
        None => s.trace_mode.clone(),
    }));
    (
        "trace".into(),
        format!(
            "asked: {} · ran: {}",
            run.doc.config.trace,
            modes.join("; ")
        ),
    )
}

/// What `-P` named or, without a file, the built-in workload the runner fell back to (its
/// label names it: the runner labels such steps with the built-in's name).
fn workload_files(run: &RunData) -> String {
    let files = &run.doc.config.property_files;
    if !files.is_empty() {
        return files.join(", ");
    }
    // "workload" is the runner's label when it knew no name.
    let labels = distinct(
        run.steps
            .iter()
            .map(|s| s.summary.workload.as_str())
            .filter(|w| *w != "workload"),
    );
    if labels.is_empty() {
        "built-in defaults (no -P file)".into()
    } else {
        format!("built-in {} (no -P file)", labels.join(", "))
    }
}

/// "nvme0n1 (Samsung SSD) · non-rotational · scheduler none".
/// Firmware and capacity, md/dm members, queue settings and the device's own latency
/// statistics (run.json files from before they were kept have none: nothing is shown).
fn drive_facts(s: &iodig_model::StorageInfo) -> Vec<Fact> {
    let mut facts = Vec::new();
    let mut drive = Vec::new();
    if let Some(f) = &s.firmware {
        drive.push(format!("firmware {f}"));
    }
    if let Some(c) = s.capacity_bytes {
        drive.push(format!("capacity {:.1} GB", c as f64 / 1e9));
    }
    if !drive.is_empty() {
        facts.push(("drive".into(), drive.join(" · ")));
    }
    if !s.members.is_empty() {
        facts.push(("members".into(), s.members.join(", ")));
    }
    let mut queue = Vec::new();
    if let Some(r) = s.read_ahead_kb {
        queue.push(format!("read-ahead {r} KiB"));
    }
    if let Some(n) = s.nr_requests {
        queue.push(format!("nr_requests {n}"));
    }
    if let Some(w) = &s.write_cache {
        queue.push(format!("write cache {w}"));
    }
    if !queue.is_empty() {
        facts.push(("block queue".into(), queue.join(" · ")));
    }
    if let Some(l) = &s.device_latency_stats {
        facts.push(("device latency statistics".into(), l.clone()));
    }
    facts
}

/// The dataset's logical size (records × fields × field length, YCSB's defaults 10 × 100 B
/// where not set) against memory: the briefs insist the dataset dwarfs memory. Not the size on
/// disk (compression, keys and the database's own overhead change that).
fn dataset_fact(run: &RunData) -> Option<Fact> {
    let p = &run.doc.config.properties;
    let num = |k: &str, d: u64| {
        p.get(k)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(d)
    };
    let records = p.get("recordcount")?.trim().parse::<u64>().ok()?;
    let (fields, len) = (num("fieldcount", 10), num("fieldlength", 100));
    let bytes = crate::analysis::storage::logical_dataset_bytes(p)?;
    let observed_nodes = run
        .doc
        .cluster
        .as_ref()
        .is_some_and(|c| c.observed.iter().any(|h| h.node.is_some()));
    let mem = run.doc.environment.memory_bytes;
    // The client's memory says nothing of a database that runs elsewhere: each node weighs its
    // own share against its own memory in its storage-bound section.
    let vs = if observed_nodes {
        "; each node's share against its own memory is in its step sections".to_string()
    } else if mem > 0 {
        format!(
            " against {:.1} GiB memory ({:.2}×)",
            mem as f64 / (1u64 << 30) as f64,
            bytes as f64 / mem as f64
        )
    } else {
        String::new()
    };
    Some((
        "dataset (logical)".into(),
        format!(
            "{:.3} GB = {records} records × {fields} fields × {len} B{vs}",
            bytes as f64 / 1e9
        ),
    ))
}

/// The vm and THP settings in effect, as the briefs tabulate them.
fn kernel_facts(run: &RunData) -> Vec<Fact> {
    let k = &run.doc.environment.kernel_settings;
    if k.is_empty() {
        return Vec::new();
    }
    vec![(
        "kernel settings".into(),
        k.iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect::<Vec<_>>()
            .join(" · "),
    )]
}

fn describe_device(
    name: &str,
    model: Option<&str>,
    rotational: Option<bool>,
    scheduler: Option<&str>,
) -> String {
    let mut dev = name.to_string();
    if let Some(m) = model {
        dev.push_str(&format!(" ({m})"));
    }
    if let Some(r) = rotational {
        dev.push_str(if r {
            " · rotational"
        } else {
            " · non-rotational"
        });
    }
    if let Some(sch) = scheduler {
        dev.push_str(&format!(" · scheduler {sch}"));
    }
    dev
}

/// The devices the steps' block-IO traces recorded, each once, in order of appearance: the
/// only device facts of a run whose database is remote (no data directory to resolve).
fn traced_devices(run: &RunData) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for d in run
        .steps
        .iter()
        .filter_map(|s| s.trace.as_ref())
        .flat_map(|t| &t.devices)
    {
        if out.iter().any(|(n, _)| *n == d.name) {
            continue;
        }
        let info = d.info.as_ref();
        let desc = describe_device(
            &d.name,
            info.and_then(|i| i.model.as_deref()),
            info.and_then(|i| i.rotational),
            info.and_then(|i| i.scheduler.as_deref()),
        );
        out.push((d.name.clone(), desc));
    }
    out
}
