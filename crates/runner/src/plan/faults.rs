//! The refusals of `--fault` before anything starts: each fault parsed, aimed at something the
//! deployment can break (a managed node, an observed host's node, the device under embedded
//! RocksDB), by a mechanism this host has, and due inside the steps.

use super::ResolvedWorkload;
use crate::errors::UsageError;
use crate::fault::{self, Fault, FaultAction};
use crate::remote;
use crate::request::RunRequest;
use anyhow::Result;
use iodig_model::props::Properties;
use std::path::Path;
use std::time::Duration;

/// `--fault` values: parsed, aimed at managed nodes that exist, and due inside the steps.
/// A cap on the device under the database: iodig must be able to make cgroups and throttle in
/// them (root, cgroup v1 blkio or v2 io), and the target must be what holds the data.
fn check_device_fault(req: &RunRequest, props: &Properties, f: &Fault) -> Result<()> {
    if f.action.needs_faulty_disk() {
        return check_faulty_disk(req, props, f);
    }
    let spec = &f.spec;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(UsageError(format!(
            "--fault {spec}: capping a device means throttling in a cgroup, which needs root; run iodig as root (sudo) or leave the fault out"
        ))
        .into());
    }
    if let Err(e) = iodig_sysstat::cgroup::IoHierarchy::detect() {
        return Err(UsageError(format!(
            "--fault {spec}: cannot throttle block IO here: {e}"
        ))
        .into());
    }
    let wants_device = req.db == "rocksdb";
    if wants_device && f.target != "device" {
        return Err(UsageError(format!(
            "--fault {spec}: the target of a cap on embedded RocksDB is its data device; write it as e.g. 2s:cap=5MB/s:device"
        ))
        .into());
    }
    if !wants_device && (req.db != "cassandra" || props.contains("hosts")) {
        return Err(UsageError(format!(
            "--fault {spec}: device caps apply to embedded RocksDB (target device) or to nodes iodig manages (--db cassandra without hosts, target nodeN); --db {} has neither",
            req.db
        ))
        .into());
    }
    Ok(())
}

/// Slow, failing and full devices: iodig mounts a disk of its own (ext4 on device-mapper, or on
/// a loop device over a FUSE file) on `rocksdb.dir`, or under a managed node before it starts,
/// which needs one of those deployments, root, one of the two mechanisms and the tools.
fn check_faulty_disk(req: &RunRequest, props: &Properties, f: &Fault) -> Result<()> {
    let spec = &f.spec;
    let action = f.action.name();
    let managed_nodes = req.db == "cassandra" && !props.contains("hosts");
    if req.db != "rocksdb" && !managed_nodes {
        return Err(UsageError(format!(
            "--fault {spec}: {action} works on a disk iodig mounts under embedded RocksDB (--db rocksdb, target device) or under a node iodig starts (--db cassandra without hosts, target nodeN); for --db {}{} use cap=RATE or faults to its nodes",
            req.db,
            if props.contains("hosts") { " with hosts" } else { "" }
        ))
        .into());
    }
    // A managed node's number is checked with the other node faults.
    if req.db == "rocksdb" && f.target != "device" {
        return Err(UsageError(format!(
            "--fault {spec}: the target of {action} is the data device; write it as {}:{action}:device",
            spec.split(':').next().unwrap_or("3s")
        ))
        .into());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(UsageError(format!(
            "--fault {spec}: {action} mounts a disk of its own (a loop device under device-mapper or over a FUSE file), which needs root; run iodig as root (sudo) or leave the fault out"
        ))
        .into());
    }
    let mechanism = iodig_faultdisk::Mechanism::parse(props.get("faultdisk.mechanism"))
        .and_then(iodig_faultdisk::Mechanism::resolve)
        .map_err(|e| UsageError(format!("--fault {spec}: {e}")))?;
    if mechanism == iodig_faultdisk::Mechanism::Fuse && !Path::new("/dev/fuse").exists() {
        return Err(UsageError(format!(
            "--fault {spec}: {action} serves the disk through FUSE, and /dev/fuse is missing; load the fuse module (modprobe fuse) or leave the fault out"
        ))
        .into());
    }
    fault::faulty_disk_size(props.get("faultdisk.size")).map_err(UsageError)?;
    Ok(())
}

/// A process fault to a node on an observed host: the target must be one of them, the action
/// one that SSH and a signal can do.
fn check_observed_fault(req: &RunRequest, f: &Fault) -> Result<()> {
    let spec = &f.spec;
    if remote::faults::target_index(&f.target, &req.observe).is_none() {
        return Err(UsageError(format!(
            "--fault {spec}: target {:?} is not an observed host; name one as given to --observe ({}) or nodeN for the N-th",
            f.target,
            req.observe.join(",")
        ))
        .into());
    }
    if let Some(why) = remote::faults::unsupported(&f.action) {
        return Err(UsageError(format!("--fault {spec}: {why}")).into());
    }
    // iodig starts an observed node again only as it read it when it took it down.
    let host = remote::faults::target_index(&f.target, &req.observe);
    let taken_down_before = req
        .faults
        .iter()
        .filter_map(|s| fault::parse(s).ok())
        .any(|o| {
            matches!(o.action, FaultAction::Kill | FaultAction::Stop)
                && o.at < f.at
                && remote::faults::target_index(&o.target, &req.observe) == host
        });
    if f.action == FaultAction::Restart && !taken_down_before {
        return Err(UsageError(format!(
            "--fault {spec}: iodig restarts a node on an observed host only after a kill or stop of it earlier in the step (it repeats the command line it read then); add e.g. --fault 5s:kill:{} before it, or restart the node by the host's own means",
            f.target
        ))
        .into());
    }
    Ok(())
}

pub(super) fn check_faults(
    req: &RunRequest,
    props: &Properties,
    workloads: &[ResolvedWorkload],
) -> Result<Vec<Fault>> {
    let mut faults = Vec::new();
    for spec in &req.faults {
        let f = fault::parse(spec).map_err(UsageError)?;
        if req.db == "cassandra" && props.contains("hosts") && !req.observe.is_empty() {
            check_observed_fault(req, &f)?;
        } else if f.action.on_device() {
            check_device_fault(req, props, &f)?;
        } else if req.db == "rocksdb" {
            return Err(UsageError(format!(
                "--fault {spec}: {} is a fault to a server process, and embedded RocksDB runs inside iodig itself; caps on the device under it work (cap=RATE, uncap on target device), process faults need managed nodes (--db cassandra)",
                f.action.name()
            ))
            .into());
        } else if req.db != "cassandra" || props.contains("hosts") {
            return Err(UsageError(format!(
                "--fault {spec}: faults are injected into database nodes iodig manages (--db cassandra without -p hosts, --nodes N) or observes over SSH (--observe HOST with -p hosts); --db {}{} has none",
                req.db,
                if props.contains("hosts") { " with hosts" } else { "" }
            ))
            .into());
        }
        let nodes = req.nodes.unwrap_or(1);
        let index = f
            .target
            .strip_prefix("node")
            .or_else(|| f.target.strip_prefix("127.0.0."))
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|n| (1..=nodes).contains(n));
        if req.db == "cassandra" && index.is_none() && !props.contains("hosts") {
            return Err(UsageError(format!(
                "--fault {spec}: target {:?} is not one of the {nodes} managed node(s); use node1…node{nodes} or 127.0.0.1…127.0.0.{nodes}",
                f.target
            ))
            .into());
        }
        for w in workloads {
            let duration = req.duration.or(match w.max_execution_secs {
                0 => None,
                s => Some(Duration::from_secs(s)),
            });
            if let Some(d) = duration.filter(|d| f.at >= *d) {
                return Err(UsageError(format!(
                    "--fault {spec}: at {:.1} s, past the end of {}'s {:.1} s steps; give an earlier time or a longer --duration",
                    f.at.as_secs_f64(),
                    w.label,
                    d.as_secs_f64()
                ))
                .into());
            }
        }
        faults.push(f);
    }
    Ok(faults)
}
