//! Facts about the machine and the storage under the data directory, stored in run.json so a
//! result always says what it measured.

use crate::device_stats::DeviceStatsProbe;
use iodig_model::{Environment, StorageInfo};
use std::collections::BTreeMap;
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
        os: std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|r| os_name(&r)),
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
        storage: data_dir.and_then(storage_of).map(|mut s| {
            // Here, not in storage_of: finding out reads the drive, once per run is enough.
            s.device_latency_stats = s.device.as_deref().map(latency_stats);
            s
        }),
        kernel_settings: kernel_settings(Path::new("/proc/sys/vm"), Path::new("/sys/kernel/mm")),
        boot_id: read_trim("/proc/sys/kernel/random/boot_id"),
        database_version: None,
    }
}

/// The vm and transparent-huge-page settings that shape storage IO (see
/// [`Environment::kernel_settings`], and `vm.max_map_count`, which Cassandra's mmapped
/// sstables need raised), read under `vm` (/proc/sys/vm) and `mm` (/sys/kernel/mm).
pub fn kernel_settings(vm: &Path, mm: &Path) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for key in [
        "dirty_ratio",
        "dirty_background_ratio",
        "dirty_bytes",
        "dirty_background_bytes",
        "dirty_expire_centisecs",
        "dirty_writeback_centisecs",
        "swappiness",
        "max_map_count",
    ] {
        if let Some(v) = read_trim(vm.join(key)) {
            m.insert(format!("vm.{key}"), v);
        }
    }
    for key in ["enabled", "defrag"] {
        // "always [madvise] never": the bracketed word is the one in effect.
        if let Some(v) = read_trim(mm.join("transparent_hugepage").join(key)) {
            m.insert(format!("transparent_hugepage.{key}"), bracketed(&v));
        }
    }
    m
}

/// The system's name from `/etc/os-release`: `PRETTY_NAME`, else `NAME VERSION_ID`.
fn os_name(release: &str) -> Option<String> {
    let field = |k: &str| {
        release.lines().find_map(|l| {
            let v = l.strip_prefix(k)?.strip_prefix('=')?;
            Some(v.trim().trim_matches('"').to_string()).filter(|v| !v.is_empty())
        })
    };
    field("PRETTY_NAME").or_else(|| {
        let name = field("NAME")?;
        Some(match field("VERSION_ID") {
            Some(v) => format!("{name} {v}"),
            None => name,
        })
    })
}

/// The bracketed choice of a sysfs list (`none [mq-deadline] kyber` → `mq-deadline`).
fn bracketed(v: &str) -> String {
    v.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .unwrap_or(v)
        .to_string()
}

/// Firmware, capacity, queue settings and md/dm members of the whole disk at `disk` (its
/// /sys/block directory).
fn disk_facts(info: &mut StorageInfo, disk: &Path) {
    info.firmware = ["device/firmware_rev", "device/rev"]
        .iter()
        .find_map(|f| read_trim(disk.join(f)));
    info.capacity_bytes = read_trim(disk.join("size"))
        .and_then(|v| v.parse::<u64>().ok())
        .map(|sectors| sectors * 512);
    let num = |f: &str| read_trim(disk.join(f)).and_then(|v| v.parse::<u64>().ok());
    info.read_ahead_kb = num("queue/read_ahead_kb");
    info.nr_requests = num("queue/nr_requests");
    info.write_cache = read_trim(disk.join("queue/write_cache"));
    let mut members: Vec<String> = std::fs::read_dir(disk.join("slaves"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            // A member may be a partition: its model is its disk's.
            let sys = std::fs::canonicalize(e.path()).unwrap_or_else(|_| e.path());
            let model = read_trim(sys.join("device/model"))
                .or_else(|| sys.parent().and_then(|p| read_trim(p.join("device/model"))));
            match model {
                Some(m) => format!("{name} ({m})"),
                None => name,
            }
        })
        .collect();
    members.sort();
    info.members = members;
}

/// Whether the whole disk `device` (or each member of an md/dm device) reports statistics of
/// its own (NVMe SMART / OCP latency monitor), found by reading them once: what iodig reads
/// around each step, or why it reads nothing. Never invented.
pub fn latency_stats(device: &str) -> String {
    let mut probe = DeviceStatsProbe::locate(&[device.to_string()]);
    probe.read_before();
    probe.availability()
}

/// The mount and whole-disk block device holding `path`.
pub fn storage_of(path: &Path) -> Option<StorageInfo> {
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = format!("{major}:{minor}");
    let canonical = std::fs::canonicalize(path).ok()?;
    // The longest mount point containing the path, among mounts of this device.
    let (mount_point, fs_type, source, options) = mountinfo
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let sep = f.iter().position(|x| *x == "-")?;
            (f.get(2) == Some(&want.as_str())).then(|| {
                let mut options = f.get(5).copied().unwrap_or_default().to_string();
                if let Some(sb) = f.get(sep + 3).filter(|o| !o.is_empty()) {
                    options.push_str(" · super block ");
                    options.push_str(sb);
                }
                (
                    f[4].to_string(),
                    f[sep + 1].to_string(),
                    f[sep + 2].to_string(),
                    options,
                )
            })
        })
        .filter(|(mp, _, _, _)| canonical.starts_with(mp))
        .max_by_key(|(mp, _, _, _)| mp.len())?;
    let mut info = StorageInfo {
        mount_point,
        fs_type,
        source,
        mount_options: Some(options).filter(|o| !o.is_empty()),
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
            disk_facts(&mut info, &disk);
        }
    }
    Some(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device_stats::NOT_NVME;

    #[test]
    fn storage_of_the_temp_dir_names_a_mount() {
        let s = storage_of(&std::env::temp_dir()).expect("the temp dir is on some mount");
        assert!(s.mount_point.starts_with('/'));
        assert!(!s.fs_type.is_empty());
    }

    #[test]
    fn the_os_is_named_as_os_release_names_it() {
        let alma = "NAME=\"AlmaLinux\"\nVERSION=\"8.7 (Stone Smilodon)\"\nVERSION_ID=\"8.7\"\nPRETTY_NAME=\"AlmaLinux 8.7 (Stone Smilodon)\"\n";
        assert_eq!(
            os_name(alma).as_deref(),
            Some("AlmaLinux 8.7 (Stone Smilodon)")
        );
        assert_eq!(
            os_name("NAME=Debian\nVERSION_ID=12\n").as_deref(),
            Some("Debian 12")
        );
        assert_eq!(os_name("ID=x\n"), None);
    }

    #[test]
    fn kernel_settings_read_the_files_and_the_bracketed_choice() {
        let dir = tempfile::tempdir().unwrap();
        let (vm, mm) = (dir.path().join("vm"), dir.path().join("mm"));
        std::fs::create_dir_all(&vm).unwrap();
        std::fs::create_dir_all(mm.join("transparent_hugepage")).unwrap();
        std::fs::write(vm.join("dirty_ratio"), "20\n").unwrap();
        std::fs::write(vm.join("dirty_background_ratio"), "10\n").unwrap();
        std::fs::write(
            mm.join("transparent_hugepage/enabled"),
            "always [madvise] never\n",
        )
        .unwrap();
        let k = kernel_settings(&vm, &mm);
        assert_eq!(k["vm.dirty_ratio"], "20");
        assert_eq!(k["vm.dirty_background_ratio"], "10");
        assert_eq!(k["transparent_hugepage.enabled"], "madvise");
        assert!(
            !k.contains_key("vm.swappiness"),
            "unreadable keys are absent"
        );
        assert_eq!(bracketed("none [mq-deadline] kyber"), "mq-deadline");
    }

    #[test]
    fn latency_stats_say_why_a_disk_has_none() {
        // Wherever the temp dir is, a disk that is not NVMe says so, and an NVMe one says what
        // is read or why it cannot be.
        let s = storage_of(&std::env::temp_dir()).unwrap();
        let Some(device) = s.device else { return };
        let words = latency_stats(&device);
        if std::fs::canonicalize(format!("/sys/block/{device}/device"))
            .is_ok_and(|d| d.to_string_lossy().contains("nvme"))
        {
            assert!(
                words.contains("NVMe controller") || words.starts_with("not available: "),
                "{words}"
            );
        } else if std::fs::read_dir(format!("/sys/block/{device}/slaves"))
            .map_or(true, |mut d| d.next().is_none())
        {
            assert_eq!(words, format!("not available: {device}: {NOT_NVME}"));
        }
        assert_eq!(
            latency_stats("no-such-disk"),
            "not available: no-such-disk: no disk no-such-disk in /sys/block"
        );
    }

    #[test]
    fn host_facts_are_filled() {
        let e = describe(None);
        assert!(e.cpus >= 1);
        assert!(e.memory_bytes > 0);
        assert!(!e.kernel.is_empty());
    }
}
