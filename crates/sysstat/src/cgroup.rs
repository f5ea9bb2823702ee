//! Cgroups iodig makes for the processes it starts, so the block-IO tracer can tell their IO
//! apart: on the v1 `blkio` hierarchy where it is mounted (hybrid hosts such as this project's
//! CI), else on cgroup v2 where the `io` controller is available. Made under an `iodig/` parent,
//! removed when the process is gone.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Where the v1 blkio hierarchy is mounted on hybrid and v1 hosts.
const BLKIO_V1: &str = "/sys/fs/cgroup/blkio";
/// The v2 tree: the root on pure v2 hosts, `unified` on hybrid ones.
const V2_ROOTS: &[&str] = &["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];

/// Which hierarchy charges block IO to cgroups on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IoHierarchy {
    /// cgroup v1 `blkio`: IO is charged to the submitting task's cgroup; writeback by kernel
    /// flusher threads is not charged to the cgroup that dirtied the pages.
    V1Blkio(PathBuf),
    /// cgroup v2 with the `io` controller: writeback is charged to the dirtying cgroup too.
    V2Io(PathBuf),
}

impl IoHierarchy {
    /// The hierarchy to use here, or why there is none.
    pub fn detect() -> Result<IoHierarchy, String> {
        if Path::new(BLKIO_V1).join("cgroup.procs").exists() {
            return Ok(IoHierarchy::V1Blkio(PathBuf::from(BLKIO_V1)));
        }
        for root in V2_ROOTS {
            let controllers = fs::read_to_string(Path::new(root).join("cgroup.controllers"));
            if let Ok(c) = controllers {
                if c.split_whitespace().any(|w| w == "io") {
                    return Ok(IoHierarchy::V2Io(PathBuf::from(root)));
                }
            }
        }
        Err(
            "neither a cgroup v1 blkio hierarchy nor cgroup v2 with the io controller is available"
                .into(),
        )
    }

    fn root(&self) -> &Path {
        match self {
            IoHierarchy::V1Blkio(p) | IoHierarchy::V2Io(p) => p,
        }
    }
}

/// The cgroup a process's block IO is charged to, relative to the IO hierarchy's root (`/` for
/// the root), from /proc/PID/cgroup: the `blkio` line on v1, the unified line on v2.
pub fn of_process(pid: u32) -> Option<String> {
    let hierarchy = IoHierarchy::detect().ok()?;
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let wanted = match hierarchy {
            IoHierarchy::V1Blkio(_) => controllers.split(',').any(|c| c == "blkio"),
            IoHierarchy::V2Io(_) => controllers.is_empty(),
        };
        wanted.then(|| path.to_string())
    })
}

/// Creates (or reuses) the cgroup `iodig/<name>` and moves process `pid`, with all its
/// threads, into it. Returns the cgroup's directory.
pub fn place(name: &str, pid: u32) -> Result<PathBuf, String> {
    let hierarchy = IoHierarchy::detect()?;
    let parent = hierarchy.root().join("iodig");
    let dir = parent.join(name);
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create cgroup {}: {e}", dir.display()))?;
    if let IoHierarchy::V2Io(root) = &hierarchy {
        // A v2 child only gets the io controller when every ancestor delegates it.
        for p in [root.as_path(), parent.as_path()] {
            let _ = fs::write(p.join("cgroup.subtree_control"), "+io");
        }
    }
    fs::write(dir.join("cgroup.procs"), pid.to_string()).map_err(|e| {
        format!(
            "cannot move process {pid} into cgroup {}: {e}",
            dir.display()
        )
    })?;
    Ok(dir)
}

/// Removes a cgroup made by [`place`] once no process is left in it; the `iodig` parent goes
/// too when it is empty. A cgroup still in use stays (and is reused by the next `place`).
pub fn remove(dir: &Path) -> io::Result<()> {
    fs::remove_dir(dir)?;
    if let Some(parent) = dir.parent().filter(|p| p.ends_with("iodig")) {
        let _ = fs::remove_dir(parent);
    }
    Ok(())
}

/// A block-IO limit for one device (`run --fault …:cap=…`): bytes or IOs per second, each
/// direction the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoLimit {
    /// At most this many bytes per second of reads, and as many of writes (`cap=5MB/s`).
    BytesPerSec(u64),
    /// At most this many read IOs per second, and as many write IOs (`cap=200iops`).
    IosPerSec(u64),
    /// No limit (lifts an earlier one).
    None,
}

/// Sets `limit` on device `dev` (`MAJ:MIN`, a whole disk) for the cgroup `dir` made by
/// [`place`]: blkio.throttle.* on v1, io.max on v2. Says which mechanism ran.
pub fn limit_io(dir: &Path, dev: &str, limit: IoLimit) -> Result<&'static str, String> {
    let write = |file: &str, value: String| {
        fs::write(dir.join(file), &value).map_err(|e| {
            format!(
                "cannot write {value:?} to {}: {e}",
                dir.join(file).display()
            )
        })
    };
    match IoHierarchy::detect()? {
        IoHierarchy::V1Blkio(_) => {
            let (bps, iops) = match limit {
                IoLimit::BytesPerSec(n) => (n, 0),
                IoLimit::IosPerSec(n) => (0, n),
                IoLimit::None => (0, 0),
            };
            for dir in ["read", "write"] {
                write(
                    &format!("blkio.throttle.{dir}_bps_device"),
                    format!("{dev} {bps}"),
                )?;
                write(
                    &format!("blkio.throttle.{dir}_iops_device"),
                    format!("{dev} {iops}"),
                )?;
            }
            Ok("cgroup v1 blkio throttling")
        }
        IoHierarchy::V2Io(_) => {
            let value = match limit {
                IoLimit::BytesPerSec(n) => format!("{dev} rbps={n} wbps={n} riops=max wiops=max"),
                IoLimit::IosPerSec(n) => format!("{dev} rbps=max wbps=max riops={n} wiops={n}"),
                IoLimit::None => format!("{dev} rbps=max wbps=max riops=max wiops=max"),
            };
            write("io.max", value)?;
            Ok("cgroup v2 io.max")
        }
    }
}

/// Moves process `pid` (all its threads) back into the cgroup `path` of the IO hierarchy, as
/// [`of_process`] named it before.
pub fn move_back(path: &str, pid: u32) -> Result<(), String> {
    let hierarchy = IoHierarchy::detect()?;
    let dir = hierarchy.root().join(path.trim_start_matches('/'));
    fs::write(dir.join("cgroup.procs"), pid.to_string())
        .map_err(|e| format!("cannot move process {pid} back into {}: {e}", dir.display()))
}
