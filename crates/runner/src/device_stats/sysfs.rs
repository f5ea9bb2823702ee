//! Which NVMe controller serves a block device, from sysfs: a namespace's `device` link names
//! its controller (`nvme0`) or, under native NVMe multipath, its subsystem (`nvme-subsys0`),
//! whose controllers are listed inside it; md and dm devices are followed through their
//! `slaves` to the disks that do the IO.

use std::path::Path;

/// Why a device has no statistics of its own: it is no NVMe namespace.
pub const NOT_NVME: &str =
    "not an NVMe device — the device reports no latency statistics of its own";

/// md over dm over md… is followed this deep, no further.
const MAX_STACK: usize = 4;

/// One disk whose controller would be read for a traced device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The member disk of an md/dm device; none when the traced disk itself is read.
    pub member: Option<String>,
    /// The controller's name (`nvme0`), or why there is none.
    pub controller: Result<String, String>,
}

/// The disks to read for the whole disk `device`, under `sys_block` (/sys/block): the device
/// itself, or each member of an md/dm device.
pub fn locate(sys_block: &Path, device: &str) -> Vec<Located> {
    if !sys_block.join(device).exists() {
        return vec![Located {
            member: None,
            controller: Err(format!("no disk {device} in {}", sys_block.display())),
        }];
    }
    let mut members = Vec::new();
    members_of(sys_block, device, 0, &mut members);
    if members.is_empty() {
        return vec![Located {
            member: None,
            controller: controller_of(&sys_block.join(device)),
        }];
    }
    members
        .into_iter()
        .map(|m| Located {
            controller: controller_of(&sys_block.join(&m)),
            member: Some(m),
        })
        .collect()
}

/// The whole disks under a stacked device, sorted, each once; a member that is stacked itself
/// is replaced by its own members.
fn members_of(sys_block: &Path, disk: &str, depth: usize, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(sys_block.join(disk).join("slaves")) else {
        return;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| whole_disk(sys_block, &e.path()))
        .collect();
    names.sort();
    names.dedup();
    for name in names {
        let stacked = std::fs::read_dir(sys_block.join(&name).join("slaves"))
            .is_ok_and(|mut d| d.next().is_some());
        if stacked && depth < MAX_STACK {
            members_of(sys_block, &name, depth + 1, out);
        } else if !out.contains(&name) {
            out.push(name);
        }
    }
}

/// The whole disk of a `slaves` entry: a disk is under /sys/block itself, a partition's disk
/// is its parent directory.
fn whole_disk(sys_block: &Path, entry: &Path) -> Option<String> {
    let name = entry.file_name()?.to_string_lossy().into_owned();
    if sys_block.join(&name).exists() {
        return Some(name);
    }
    let real = std::fs::canonicalize(entry).ok()?;
    real.join("partition")
        .exists()
        .then(|| real.parent()?.file_name())
        .flatten()
        .map(|n| n.to_string_lossy().into_owned())
}

/// `nvme` followed by digits: a controller, not a namespace (`nvme0n1`) or a subsystem.
fn is_controller(name: &str) -> bool {
    name.strip_prefix("nvme")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The controller of the disk at `disk_dir` (its /sys/block entry).
fn controller_of(disk_dir: &Path) -> Result<String, String> {
    // Virtual disks (loop, zram, dm) have no `device` link at all.
    let device =
        std::fs::canonicalize(disk_dir.join("device")).map_err(|_| NOT_NVME.to_string())?;
    let name = device
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if is_controller(&name) {
        return Ok(name);
    }
    if !name.starts_with("nvme-subsys") {
        return Err(NOT_NVME.to_string());
    }
    // Native multipath: any path's controller answers for the subsystem's SMART log; the
    // lowest numbered is as good as another and the same every time.
    let mut controllers: Vec<(u64, String)> = std::fs::read_dir(&device)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| is_controller(n))
        .map(|n| (n[4..].parse().unwrap_or(u64::MAX), n))
        .collect();
    controllers.sort();
    controllers
        .into_iter()
        .next()
        .map(|(_, n)| n)
        .ok_or_else(|| format!("the NVMe subsystem {name} lists no controller"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    /// A sysfs in miniature: /sys/devices with an NVMe controller, a multipath subsystem with
    /// two controllers and a virtio disk; /sys/block with their disks, a partitioned disk, an
    /// md device over a partition and a disk, a dm device over the md device, and a loop.
    fn fake_sysfs() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let devices = root.join("devices");
        for d in [
            "pci/nvme/nvme0",
            "virtual/nvme-subsystem/nvme-subsys1/nvme3",
            "virtual/nvme-subsystem/nvme-subsys1/nvme2",
            "virtual/nvme-subsystem/nvme-subsys1/nvme1n1",
            "pci/virtio1",
        ] {
            std::fs::create_dir_all(devices.join(d)).unwrap();
        }
        let block = root.join("block");
        let disk = |name: &str, device: Option<&str>| {
            std::fs::create_dir_all(block.join(name).join("slaves")).unwrap();
            if let Some(d) = device {
                symlink(devices.join(d), block.join(name).join("device")).unwrap();
            }
        };
        disk("nvme0n1", Some("pci/nvme/nvme0"));
        disk("nvme1n1", Some("virtual/nvme-subsystem/nvme-subsys1"));
        disk("vda", Some("pci/virtio1"));
        disk("loop0", None);
        disk("md0", None);
        disk("dm-0", None);
        let part = block.join("nvme0n1").join("nvme0n1p1");
        std::fs::create_dir_all(&part).unwrap();
        std::fs::write(part.join("partition"), "1\n").unwrap();
        symlink(&part, block.join("md0/slaves/nvme0n1p1")).unwrap();
        symlink(block.join("vda"), block.join("md0/slaves/vda")).unwrap();
        symlink(block.join("md0"), block.join("dm-0/slaves/md0")).unwrap();
        (t, block)
    }

    fn controllers(block: &Path, device: &str) -> Vec<(Option<String>, Result<String, String>)> {
        locate(block, device)
            .into_iter()
            .map(|l| (l.member, l.controller))
            .collect()
    }

    #[test]
    fn a_namespace_is_read_through_its_controller() {
        let (_t, block) = fake_sysfs();
        assert_eq!(controllers(&block, "nvme0n1"), [(None, Ok("nvme0".into()))]);
        // Multipath: the subsystem's lowest numbered controller.
        assert_eq!(controllers(&block, "nvme1n1"), [(None, Ok("nvme2".into()))]);
    }

    #[test]
    fn other_disks_say_why_they_have_no_statistics() {
        let (_t, block) = fake_sysfs();
        assert_eq!(controllers(&block, "vda"), [(None, Err(NOT_NVME.into()))]);
        assert_eq!(controllers(&block, "loop0"), [(None, Err(NOT_NVME.into()))]);
        let missing = controllers(&block, "sdz");
        assert!(missing[0]
            .1
            .as_ref()
            .unwrap_err()
            .starts_with("no disk sdz in"));
    }

    #[test]
    fn stacked_devices_are_read_through_their_members() {
        let (_t, block) = fake_sysfs();
        let md = [
            (Some("nvme0n1".into()), Ok("nvme0".into())),
            (Some("vda".into()), Err(NOT_NVME.into())),
        ];
        assert_eq!(
            controllers(&block, "md0"),
            md,
            "a partition counts as its disk"
        );
        assert_eq!(controllers(&block, "dm-0"), md, "dm over md: md's members");
    }
}
