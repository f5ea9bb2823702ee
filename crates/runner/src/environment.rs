//! Facts about the machine and the storage under the data directory, stored in run.json so a
//! result always says what it measured.

use iodig_model::{Environment, StorageInfo};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn read_trim(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Host facts, and the storage of `data_dir` when given.
pub fn describe(data_dir: Option<&Path>) -> Environment {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    Environment {
        hostname: read_trim("/proc/sys/kernel/hostname").unwrap_or_default(),
        kernel: read_trim("/proc/sys/kernel/osrelease").unwrap_or_default(),
        cpu_model: cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .and_then(|r| r.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_default(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get() as u64)
            .unwrap_or(0),
        memory_bytes: meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024),
        data_dir: data_dir.map(|d| d.display().to_string()),
        storage: data_dir.and_then(storage_of),
    }
}

/// The mount and whole-disk block device holding `path`.
pub fn storage_of(path: &Path) -> Option<StorageInfo> {
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = format!("{major}:{minor}");
    let canonical = std::fs::canonicalize(path).ok()?;
    // The longest mount point containing the path, among mounts of this device.
    let (mount_point, fs_type, source) = mountinfo
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let sep = f.iter().position(|x| *x == "-")?;
            (f.get(2) == Some(&want.as_str())).then(|| {
                (
                    f[4].to_string(),
                    f[sep + 1].to_string(),
                    f[sep + 2].to_string(),
                )
            })
        })
        .filter(|(mp, _, _)| canonical.starts_with(mp))
        .max_by_key(|(mp, _, _)| mp.len())?;
    let mut info = StorageInfo {
        mount_point,
        fs_type,
        source,
        ..Default::default()
    };
    // /sys/dev/block/MAJ:MIN resolves to the partition or the disk; a partition's parent is its disk.
    if let Ok(sys) = std::fs::canonicalize(format!("/sys/dev/block/{want}")) {
        let disk = if sys.join("partition").exists() {
            sys.parent().map(Path::to_path_buf)
        } else {
            Some(sys)
        };
        if let Some(disk) = disk {
            info.device = disk.file_name().map(|n| n.to_string_lossy().to_string());
            info.dev_t = read_trim(disk.join("dev"));
            info.model = read_trim(disk.join("device/model"));
            info.rotational = read_trim(disk.join("queue/rotational")).map(|r| r == "1");
            info.scheduler = read_trim(disk.join("queue/scheduler"));
        }
    }
    Some(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_of_the_temp_dir_names_a_mount() {
        let s = storage_of(&std::env::temp_dir()).expect("the temp dir is on some mount");
        assert!(s.mount_point.starts_with('/'));
        assert!(!s.fs_type.is_empty());
    }

    #[test]
    fn host_facts_are_filled() {
        let e = describe(None);
        assert!(e.cpus >= 1);
        assert!(e.memory_bytes > 0);
        assert!(!e.kernel.is_empty());
    }
}
