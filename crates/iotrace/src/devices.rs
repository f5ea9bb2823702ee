//! Block devices: name and MAJ:MIN resolution through sysfs, queue limits and the mount that a
//! path lives on, so a trace can say which whole disk it watched and how that disk is set up.

use anyhow::{bail, Context, Result};
pub use iodig_model::trace::DeviceInfo;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A whole disk as the tracer needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    /// Kernel name under /sys/block, e.g. `vda`, `nvme0n1`, `loop0`.
    pub name: String,
    /// Major device number.
    pub major: u32,
    /// Minor device number (of the whole disk, not a partition).
    pub minor: u32,
}

impl Disk {
    /// dev_t in the kernel's own encoding (MINORBITS = 20), as the BPF side builds it.
    pub fn kernel_dev(&self) -> u32 {
        (self.major << 20) | self.minor
    }

    /// `MAJ:MIN`, as /proc/diskstats and the document's `dev` write it.
    pub fn dev(&self) -> String {
        format!("{}:{}", self.major, self.minor)
    }
}

/// Whole-disk names under /sys/block, sorted.
pub fn list() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/sys/block")
        .map(|rd| {
            rd.filter_map(std::result::Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn read_trim(p: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn parse_majmin(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The whole disk of a sysfs block entry (itself, or the parent of a partition).
fn whole_disk_of(sys: &Path) -> Result<Disk> {
    let real =
        std::fs::canonicalize(sys).with_context(|| format!("cannot resolve {}", sys.display()))?;
    let disk_dir = if real.join("partition").exists() {
        real.parent().map(Path::to_path_buf).unwrap_or(real)
    } else {
        real
    };
    let name = disk_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dev = read_trim(disk_dir.join("dev"))
        .with_context(|| format!("no dev file under {}", disk_dir.display()))?;
    let (major, minor) =
        parse_majmin(&dev).with_context(|| format!("bad MAJ:MIN {dev:?} for {name}"))?;
    Ok(Disk { name, major, minor })
}

/// Resolves "vda", "/dev/vda" or a partition name ("vda1") to its whole disk; None if unknown.
pub fn resolve_name(name: &str) -> Option<Disk> {
    let base = name.strip_prefix("/dev/").unwrap_or(name);
    let sys = PathBuf::from("/sys/class/block").join(base);
    if sys.exists() {
        return whole_disk_of(&sys).ok();
    }
    // A /dev path under another name (e.g. /dev/disk/by-id/…): follow its device number.
    let meta = std::fs::metadata(name).ok()?;
    if meta.rdev() == 0 {
        return None;
    }
    let (ma, mi) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
    whole_disk_of(&PathBuf::from(format!("/sys/dev/block/{ma}:{mi}"))).ok()
}

/// Every whole disk that could see request-level IO (non-zero size), at most `max`.
pub fn candidates(max: usize) -> Vec<Disk> {
    list()
        .iter()
        .filter(|n| read_trim(format!("/sys/block/{n}/size")).is_some_and(|s| s != "0"))
        .filter_map(|n| resolve_name(n))
        .take(max)
        .collect()
}

/// The whole disk under a file or directory, with its queue settings and the mount holding it.
pub fn resolve_path(path: &Path) -> Result<DeviceInfo> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot stat {}", path.display()))?;
    let (fs_ma, fs_mi) = (libc::major(meta.dev()), libc::minor(meta.dev()));
    // btrfs (like other file systems that span devices) gives its files an anonymous device
    // number 0:N; the block device is the source its mount names.
    let Some((ma, mi)) = (if fs_ma == 0 {
        device_behind_anonymous(path)
    } else {
        Some((fs_ma, fs_mi))
    }) else {
        bail!("{} is on a virtual file system (device {fs_ma}:{fs_mi}, e.g. tmpfs or overlay, and its mount names no block device): no block device to trace; pass --device", path.display());
    };
    let disk =
        whole_disk_of(&PathBuf::from(format!("/sys/dev/block/{ma}:{mi}"))).with_context(|| {
            format!(
                "device {ma}:{mi} of {} is not in /sys/dev/block",
                path.display()
            )
        })?;
    let mut info = info(&disk);
    if let Some(m) = mount_of(path, (fs_ma != 0).then_some((fs_ma, fs_mi))) {
        info.mount_point = Some(m.mount_point.to_string_lossy().into_owned());
        info.fs_type = Some(m.fs_type);
    }
    Ok(info)
}

/// The block device a file system on an anonymous device (`0:N`) names as its mount's source
/// (btrfs: the device it was mounted from; of a btrfs over several devices, that one only).
/// None for tmpfs, overlay and the like, whose source is not a block device.
fn device_behind_anonymous(path: &Path) -> Option<(u32, u32)> {
    let source = mount_of(path, None)?.source;
    let rdev = std::fs::metadata(&source).ok()?.rdev();
    (rdev != 0).then(|| (libc::major(rdev), libc::minor(rdev)))
}

/// Queue settings and model of a whole disk.
pub fn info(disk: &Disk) -> DeviceInfo {
    let q = |f: &str| read_trim(format!("/sys/block/{}/queue/{f}", disk.name));
    let num = |f: &str| q(f).and_then(|s| s.parse::<u64>().ok());
    DeviceInfo {
        name: disk.name.clone(),
        dev: disk.dev(),
        model: read_trim(format!("/sys/block/{}/device/model", disk.name))
            .filter(|s| !s.is_empty()),
        rotational: num("rotational").map(|v| v == 1),
        scheduler: q("scheduler").map(|s| active_scheduler(&s)),
        nr_requests: num("nr_requests"),
        max_sectors_kb: num("max_sectors_kb"),
        discard_max_bytes: num("discard_max_bytes"),
        write_cache: q("write_cache"),
        mount_point: None,
        fs_type: None,
    }
}

/// "none [mq-deadline] kyber" → "mq-deadline".
fn active_scheduler(s: &str) -> String {
    s.split_whitespace()
        .find(|w| w.starts_with('['))
        .map(|w| w.trim_matches(['[', ']']).to_string())
        .unwrap_or_else(|| s.to_string())
}

/// The innermost mount that holds `path`, of the device `MAJ:MIN` when one is given. Anonymous
/// devices are matched by path alone: a btrfs subvolume's files carry another anonymous number
/// than the mount's line in mountinfo.
fn mount_of(path: &Path, dev: Option<(u32, u32)>) -> Option<Mount> {
    let want = dev.map(|(ma, mi)| format!("{ma}:{mi}"));
    let abs = std::fs::canonicalize(path).ok()?;
    mounts()
        .into_iter()
        .filter(|m| want.as_ref().is_none_or(|w| &m.dev == w) && abs.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.as_os_str().len())
}

/// A mount, from one line of /proc/self/mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    /// `MAJ:MIN` of the file system's device (`0:N` for btrfs, tmpfs, overlay; for btrfs not
    /// always the number its files carry).
    pub dev: String,
    /// The directory of the file system that is mounted here (`/` for its root; for a cgroup2
    /// mount in a cgroup namespace, that namespace's cgroup).
    pub root: String,
    pub mount_point: PathBuf,
    pub fs_type: String,
    /// What was mounted: `/dev/vda1`, `tmpfs`, `overlay`.
    pub source: String,
    pub super_options: String,
}

/// Every mount of this process's mount namespace.
pub(crate) fn mounts() -> Vec<Mount> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(parse_mount)
        .collect()
}

/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`
/// (proc(5)): optional fields end at `-`; paths escape space, tab, newline and `\` as octal.
fn parse_mount(line: &str) -> Option<Mount> {
    let (pre, post) = line.split_once(" - ")?;
    let mut pre = pre.split(' ');
    let dev = pre.nth(2)?.to_string();
    let root = unescape_octal(pre.next()?);
    let mount_point = PathBuf::from(unescape_octal(pre.next()?));
    let mut post = post.split(' ');
    Some(Mount {
        dev,
        root,
        mount_point,
        fs_type: post.next()?.to_string(),
        source: unescape_octal(post.next()?),
        super_options: post.next().unwrap_or("").to_string(),
    })
}

/// `\040` → space, and the kernel's other octal escapes (`\011`, `\012`, `\134`).
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) if b[i] == b'\\' => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_parse_with_escapes_and_optional_fields() {
        let m = parse_mount(
            "36 35 0:32 /sub\\040vol /var/lib/my\\040data rw,noatime shared:1 master:2 - btrfs /dev/vdb rw,space_cache=v2",
        )
        .unwrap();
        assert_eq!(m.dev, "0:32");
        assert_eq!(m.root, "/sub vol");
        assert_eq!(m.mount_point, PathBuf::from("/var/lib/my data"));
        assert_eq!(m.fs_type, "btrfs");
        assert_eq!(m.source, "/dev/vdb");
        assert_eq!(m.super_options, "rw,space_cache=v2");
        assert_eq!(unescape_octal("a\\011b\\134c\\9"), "a\tb\\c\\9");
        assert!(parse_mount("garbage").is_none());
    }

    #[test]
    fn scheduler_and_majmin_parsing() {
        assert_eq!(
            active_scheduler("none [mq-deadline] kyber bfq"),
            "mq-deadline"
        );
        assert_eq!(active_scheduler("none"), "none");
        assert_eq!(parse_majmin("254:16\n"), Some((254, 16)));
        assert_eq!(parse_majmin("x"), None);
        assert_eq!(
            Disk {
                name: "x".into(),
                major: 254,
                minor: 1
            }
            .kernel_dev(),
            (254 << 20) | 1
        );
    }

    #[test]
    fn resolves_root_and_rejects_unknown() {
        let info = resolve_path(Path::new("/")).expect("/ is on a block device on the test VM");
        assert!(
            list().contains(&info.name),
            "{} not in {:?}",
            info.name,
            list()
        );
        assert_eq!(info.mount_point.as_deref(), Some("/"));
        assert!(resolve_name("no-such-disk").is_none());
        let by_dev = resolve_name(&format!("/dev/{}", info.name)).unwrap();
        assert_eq!(by_dev.dev(), info.dev);
    }
}
