//! Who issued each IO, by cgroup and process: the cgroup hierarchy IO is charged in, its ids
//! mapped back to paths, and the `--cgroup` / `--pid` targets a trace watches (how the kernel
//! tells each target's IO apart: docs/tracing.md, "Attribution").

use crate::devices::Mount;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The cgroup hierarchy IO is charged in.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    /// Its mount point, e.g. `/sys/fs/cgroup/blkio` (v1) or `/sys/fs/cgroup` (v2).
    pub root: PathBuf,
    /// `v1` (blkio controller) or `v2`.
    pub version: u8,
    /// v2 only: whether the `io` controller is enabled (else everything is the root).
    pub io_enabled: bool,
}

impl Hierarchy {
    /// The hierarchy in one line, for the document's `cgroup_hierarchy` and for messages.
    pub fn describe(&self) -> String {
        match (self.version, self.io_enabled) {
            (1, _) => format!("cgroup v1 blkio at {}", self.root.display()),
            (_, true) => format!("cgroup v2 with io at {}", self.root.display()),
            _ => format!("cgroup v2 at {} (no io controller)", self.root.display()),
        }
    }
}

/// The cgroup mounts of /proc/self/mountinfo (v1 `cgroup` and `cgroup2`).
fn cgroup_mounts() -> Vec<Mount> {
    crate::devices::mounts()
        .into_iter()
        .filter(|m| m.fs_type == "cgroup" || m.fs_type == "cgroup2")
        .collect()
}

/// The hierarchy the blkcg lives in: a v1 mount with `blkio` wins (the kernel binds the
/// controller there), else the v2 mount.
pub fn io_hierarchy() -> Option<Hierarchy> {
    let m = cgroup_mounts();
    if let Some(v1) = m
        .iter()
        .find(|m| m.fs_type == "cgroup" && m.super_options.split(',').any(|x| x == "blkio"))
    {
        return Some(Hierarchy {
            root: v1.mount_point.clone(),
            version: 1,
            io_enabled: true,
        });
    }
    let root = &m.iter().find(|m| m.fs_type == "cgroup2")?.mount_point;
    Some(Hierarchy {
        root: root.clone(),
        version: 2,
        io_enabled: has_io_controller(root),
    })
}

/// Whether the v2 cgroup `dir` has the io controller: listed in its own `cgroup.controllers`
/// (its parent's `subtree_control` enabled it; the root lists every controller the tree has).
/// Without it, the cgroup's IO is charged to the nearest ancestor that has it.
fn has_io_controller(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.controllers"))
        .unwrap_or_default()
        .split_whitespace()
        .any(|c| c == "io")
}

/// Cgroup directory `dir` and every one under it, with their depth below `dir`; bounded (depth
/// 16, 100k directories) so that a huge tree cannot stall tracing.
fn cgroup_dirs(dir: &Path) -> Vec<(PathBuf, usize)> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        if out.len() >= 100_000 {
            break;
        }
        if depth < 16 {
            if let Ok(rd) = std::fs::read_dir(&d) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push((e.path(), depth + 1));
                    }
                }
            }
        }
        out.push((d, depth));
    }
    out
}

/// Every cgroup directory of the hierarchy: inode number (= kernfs id) → path from its root
/// (`/` for the root).
pub fn cgroup_paths(h: &Hierarchy) -> HashMap<u64, String> {
    cgroup_dirs(&h.root)
        .into_iter()
        .filter_map(|(dir, _)| {
            let md = std::fs::metadata(&dir).ok()?;
            let rel = dir.strip_prefix(&h.root).unwrap_or(Path::new(""));
            Some((md.ino(), format!("/{}", rel.display())))
        })
        .collect()
}

/// A resolved `--cgroup` / `--pid` target.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A cgroup of the IO hierarchy (path from its root, kernfs id); its descendants count too.
    Cgroup {
        /// The path as given to `--cgroup`, for messages and `attribution.watched`.
        given: String,
        /// Its path from the hierarchy's root (`/` for the root itself).
        path: String,
        /// Its kernfs id (the directory's inode number), as the kernel reports it per IO.
        id: u64,
    },
    /// A process, by thread-group id (`--pid`).
    Pid {
        /// The `--pid` as given (a thread's id is replaced by its process's).
        given: String,
        /// The process id (thread-group id), matched against each row's `pid`.
        pid: u32,
        /// Its name (`/proc/PID/comm`).
        name: String,
    },
    /// A cgroup of the v2 tree whose IO is not charged to it (the v2 tree of a hybrid host, v2
    /// without `io`, a cgroup whose parent does not enable `io`): the kernel checks per IO
    /// whether the submitting task is inside it (its ancestor at `level` is `id`), so cgroups
    /// made under it during the trace count too.
    TaskCgroup {
        /// The `--cgroup` as given.
        given: String,
        /// Its directory.
        dir: PathBuf,
        /// Its depth in the v2 hierarchy (the root is 0), as the kernel counts ancestors.
        level: u32,
        /// Its id (the directory's inode number).
        id: u64,
        /// Its bit in the rows' `in_watched` key: its place among the `TaskCgroup` targets.
        bit: u32,
    },
    /// A cgroup in another v1 hierarchy than blkio's, with no twin in the v2 tree: watched
    /// through the processes in it and in the cgroups under it, as found when tracing starts and
    /// again when it stops.
    Processes {
        /// The `--cgroup` as given.
        given: String,
        /// Its directory.
        dir: PathBuf,
        /// The processes found when tracing started (pid, name).
        at_start: Vec<(u32, String)>,
    },
}

impl Target {
    /// The processes of a [`Target::Processes`] now, and at start, without repeats (pid,
    /// name); empty for the other targets.
    pub fn processes(&self) -> Vec<(u32, String)> {
        let Target::Processes { dir, at_start, .. } = self else {
            return Vec::new();
        };
        let mut all = at_start.clone();
        for p in processes_under(dir) {
            if !all.iter().any(|(pid, _)| *pid == p.0) {
                all.push(p);
            }
        }
        all
    }
}

/// What `--cgroup` / `--pid` resolve to, with caveats for the document.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    /// The targets in the order given (pids first), a cgroup outside the IO hierarchy expanded to
    /// its processes.
    pub targets: Vec<Target>,
    /// Caveats for the document's `attribution.notes`, e.g. a cgroup watched through its processes.
    pub notes: Vec<String>,
}

impl Watch {
    /// The cgroups the kernel must key IO by (level, id), in the order of their bits.
    pub fn task_cgroups(&self) -> Vec<(u32, u64)> {
        self.targets
            .iter()
            .filter_map(|t| match t {
                Target::TaskCgroup { level, id, .. } => Some((*level, *id)),
                _ => None,
            })
            .collect()
    }

    /// The `--cgroup` of each bit set in a row's `in_watched` key.
    pub fn task_cgroups_in(&self, in_watched: u64) -> Vec<String> {
        self.targets
            .iter()
            .filter_map(|t| match t {
                Target::TaskCgroup { given, bit, .. } if in_watched & (1 << bit) != 0 => {
                    Some(given.clone())
                }
                _ => None,
            })
            .collect()
    }
}

fn comm_of(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Resolves the targets. Errors name the flag and the fix (the CLI exits 2 on them).
pub fn resolve(cgroups: &[PathBuf], pids: &[u32]) -> Result<Watch, String> {
    let mut w = Watch::default();
    let h = io_hierarchy();
    for &given in pids {
        let name = comm_of(given).ok_or_else(|| {
            format!("--pid {given}: no such process (is it running? see `pgrep -a NAME`)")
        })?;
        // A thread's id (from top -H, a JVM thread dump) names a thread of a process; IO is
        // kept per process.
        let pid = tgid_of(given).unwrap_or(given);
        let name = if pid == given {
            name
        } else {
            let process = comm_of(pid).unwrap_or_default();
            w.notes.push(format!(
                "--pid {given}: a thread ({name}) of process {pid} ({process}); watching the process, IO is kept per process"
            ));
            process
        };
        if has_children(pid) {
            w.notes.push(format!(
                "--pid {given}: the IO of process {pid} itself; the processes it starts are processes of their own (watch their cgroup with --cgroup to count them together)"
            ));
        }
        w.targets.push(Target::Pid {
            given: given.to_string(),
            pid,
            name,
        });
    }
    for c in cgroups {
        let bit = w.task_cgroups().len() as u32;
        let t = resolve_cgroup(c, h.as_ref(), bit, &mut w.notes)?;
        if matches!(t, Target::TaskCgroup { .. }) && bit as usize >= MAX_WATCH_CG {
            return Err(format!(
                "--cgroup {}: at most {MAX_WATCH_CG} cgroups of the v2 tree can be watched at once (their IO is told apart in the kernel); watch a common parent instead",
                c.display()
            ));
        }
        w.targets.push(t);
    }
    Ok(w)
}

/// Most `--cgroup` targets the kernel tells apart by the submitting task's v2 cgroup
/// (MAX_WATCH_CG in iotrace.h).
pub const MAX_WATCH_CG: usize = 16;

fn resolve_cgroup(
    c: &Path,
    h: Option<&Hierarchy>,
    bit: u32,
    notes: &mut Vec<String>,
) -> Result<Target, String> {
    let given = c.display().to_string();
    let mut tried = Vec::new();
    if let Some(h) = h {
        let under = if c.starts_with(&h.root) {
            c.to_path_buf()
        } else {
            h.root.join(c.strip_prefix("/").unwrap_or(c))
        };
        tried.push(under.display().to_string());
        if let Some(md) = std::fs::metadata(&under)
            .ok()
            .filter(std::fs::Metadata::is_dir)
        {
            let rel = under.strip_prefix(&h.root).unwrap_or(Path::new(""));
            let path = format!("/{}", rel.display());
            if h.version == 2 && !h.io_enabled {
                notes.push(format!(
                    "--cgroup {given}: the cgroup v2 tree has no io controller here, so IO is charged to the root; {BY_TASK_CGROUP}"
                ));
                return task_cgroup_of(given, under, bit);
            }
            if h.version == 2 && !has_io_controller(&under) {
                notes.push(format!(
                    "--cgroup {given}: the io controller is not enabled for it (its parent's cgroup.subtree_control), so its IO is charged to an ancestor; {BY_TASK_CGROUP}"
                ));
                return task_cgroup_of(given, under, bit);
            }
            return Ok(Target::Cgroup {
                given,
                path,
                id: md.ino(),
            });
        }
    }
    // Elsewhere: not where IO is charged. In the v2 tree (a hybrid host's), the kernel tells
    // the IO of its tasks exactly; in another v1 hierarchy only its processes can be watched,
    // unless the v2 tree has the same cgroup (systemd keeps its units in both).
    let mounts = cgroup_mounts();
    let v2 = mounts.iter().find(|m| m.fs_type == "cgroup2");
    let mut candidates = Vec::new();
    match mounts.iter().find(|m| c.starts_with(&m.mount_point)) {
        Some(m) if m.fs_type == "cgroup" => {
            // The twin only when it holds the same processes now: the same unit, not a cgroup
            // that merely has the same name.
            let rel = c.strip_prefix(&m.mount_point).unwrap_or(Path::new(""));
            let pids = |d: &Path| {
                let mut p: Vec<u32> = processes_under(d).into_iter().map(|p| p.0).collect();
                p.sort_unstable();
                p
            };
            if let Some(twin) = v2
                .filter(|_| !rel.as_os_str().is_empty())
                .map(|v2| v2.mount_point.join(rel))
                .filter(|t| t.join("cgroup.procs").is_file() && pids(t) == pids(c))
            {
                candidates.push(twin);
            }
            candidates.push(c.to_path_buf());
        }
        Some(_) => candidates.push(c.to_path_buf()),
        None => {
            let rel = c.strip_prefix("/").unwrap_or(c);
            let (v2s, v1s): (Vec<&Mount>, Vec<&Mount>) =
                mounts.iter().partition(|m| m.fs_type == "cgroup2");
            candidates.extend(v2s.iter().chain(&v1s).map(|m| m.mount_point.join(rel)));
            if c.is_absolute() {
                candidates.insert(0, c.to_path_buf());
            }
        }
    }
    for p in candidates {
        if !p.join("cgroup.procs").is_file() {
            let p = p.display().to_string();
            if !tried.contains(&p) {
                tried.push(p);
            }
            continue;
        }
        let charged = h.map_or("none".into(), Hierarchy::describe);
        if in_v2_tree(&p) {
            let twin = if p == c {
                String::new()
            } else {
                format!(
                    " (watched as {}, its twin in the cgroup v2 tree)",
                    p.display()
                )
            };
            notes.push(format!(
                "--cgroup {given}{twin}: not in the hierarchy IO is charged to ({charged}); {BY_TASK_CGROUP}"
            ));
            return task_cgroup_of(given, p, bit);
        }
        notes.push(format!(
            "--cgroup {given}: {} is not in the hierarchy IO is charged to ({charged}); {WATCHING_PROCESSES}",
            p.display()
        ));
        return Ok(processes_of(given, p));
    }
    Err(format!(
        "--cgroup {given}: no such cgroup (looked at {}); give a cgroup directory, e.g. {}/system.slice/NAME.service",
        tried.join(", "),
        h.map_or("/sys/fs/cgroup".into(), |h| h.root.display().to_string())
    ))
}

/// How a cgroup of the v2 tree is watched where IO is not charged to it, for its note.
const BY_TASK_CGROUP: &str = "the kernel tells its IO by whether the task that submitted it is inside it or a cgroup under it (also one made during the trace); writeback that a kernel flusher thread submits for it is not counted";

/// A [`Target::TaskCgroup`] for v2 cgroup directory `dir`: its id, and its level from the
/// hierarchy's real root (a cgroup namespace's mount starts below it).
fn task_cgroup_of(given: String, dir: PathBuf, bit: u32) -> Result<Target, String> {
    let dir = dir.canonicalize().unwrap_or(dir);
    let md = std::fs::metadata(&dir)
        .map_err(|e| format!("--cgroup {given}: cannot read {}: {e}", dir.display()))?;
    let mount = cgroup_mounts()
        .into_iter()
        .filter(|m| m.fs_type == "cgroup2" && dir.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.as_os_str().len())
        .ok_or_else(|| {
            format!(
                "--cgroup {given}: {} is not in a cgroup2 mount",
                dir.display()
            )
        })?;
    let depth = |p: &Path| {
        p.components()
            .filter(|c| matches!(c, std::path::Component::Normal(_)))
            .count() as u32
    };
    let rel = dir
        .strip_prefix(&mount.mount_point)
        .unwrap_or(Path::new(""));
    Ok(Target::TaskCgroup {
        given,
        level: depth(Path::new(&mount.root)) + depth(rel),
        id: md.ino(),
        bit,
        dir,
    })
}

/// Whether `p` lies in a cgroup2 mount (the default hierarchy, whose ids the kernel's
/// `bpf_get_current_ancestor_cgroup_id` gives).
fn in_v2_tree(p: &Path) -> bool {
    let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    cgroup_mounts()
        .iter()
        .any(|m| m.fs_type == "cgroup2" && p.starts_with(&m.mount_point))
}

/// How a cgroup outside the IO hierarchy is watched, for its note.
const WATCHING_PROCESSES: &str = "watching the processes in it and in the cgroups under it, as found when tracing starts and when it stops (a process that starts and ends in between is missed)";

fn processes_of(given: String, dir: PathBuf) -> Target {
    Target::Processes {
        given,
        at_start: processes_under(&dir),
        dir,
    }
}

/// The processes in cgroup directory `dir` and every cgroup under it (pid, name).
fn processes_under(dir: &Path) -> Vec<(u32, String)> {
    cgroup_dirs(dir)
        .into_iter()
        .flat_map(|(d, _)| {
            std::fs::read_to_string(d.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse::<u32>().ok())
                .map(|pid| (pid, comm_of(pid).unwrap_or_default()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether any process has `pid` as its parent now.
fn has_children(pid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // "PID (comm) STATE PPID …": the name may hold spaces and parentheses.
        stat.rsplit_once(") ")
            .and_then(|(_, rest)| rest.split(' ').nth(1)?.parse::<u32>().ok())
            == Some(pid)
    })
}

/// The thread-group id of a task id: the process a thread belongs to.
fn tgid_of(tid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One of `w`'s notes says `words`.
    fn assert_note(w: &Watch, words: &str) {
        assert!(w.notes.iter().any(|n| n.contains(words)), "{:?}", w.notes);
    }

    #[test]
    fn bad_targets_name_the_flag() {
        let e = resolve(&[], &[u32::MAX - 1]).unwrap_err();
        assert!(e.starts_with("--pid"), "{e}");
        let e = resolve(&[PathBuf::from("/no/such/cgroup-iodig")], &[]).unwrap_err();
        assert!(
            e.starts_with("--cgroup") && e.contains("no such cgroup"),
            "{e}"
        );
        let me = std::process::id();
        let w = resolve(&[], &[me]).unwrap();
        assert!(matches!(&w.targets[0], Target::Pid { pid, .. } if *pid == me));
    }

    /// A thread's id names its process (IO is kept per process), and a process with children
    /// is told that they are not counted with it.
    #[test]
    fn a_thread_id_watches_its_process_and_children_are_named_apart() {
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("watched-thread".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions and cannot fail.
                tx.send(unsafe { libc::gettid() } as u32).unwrap();
                let _ = done_rx.recv();
            })
            .unwrap();
        let tid = rx.recv().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let w = resolve(&[], &[tid]);
        let _ = child.kill();
        let _ = child.wait();
        done_tx.send(()).unwrap();
        t.join().unwrap();
        let w = w.unwrap();
        assert!(
            matches!(&w.targets[0], Target::Pid { pid, given, .. } if *pid == me && *given == tid.to_string()),
            "{:?}",
            w.targets
        );
        assert_note(&w, "a thread (watched-thread)");
        assert_note(&w, "the processes it starts");
    }

    /// A cgroup outside the IO hierarchy is watched through its processes and those of the
    /// cgroups under it, as they are when tracing stops too.
    #[test]
    fn processes_of_a_cgroup_outside_the_io_hierarchy_include_its_children_and_latecomers() {
        let dir = tempfile::tempdir().unwrap();
        let child = dir.path().join("child");
        std::fs::create_dir(&child).unwrap();
        let me = std::process::id();
        std::fs::write(dir.path().join("cgroup.procs"), "").unwrap();
        std::fs::write(child.join("cgroup.procs"), format!("{me}\n")).unwrap();
        let t = processes_of("x".into(), dir.path().to_path_buf());
        assert_eq!(
            t.processes().iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![me]
        );
        std::fs::write(dir.path().join("cgroup.procs"), "1\n").unwrap();
        let now: Vec<u32> = t.processes().iter().map(|p| p.0).collect();
        assert_eq!(now, vec![me, 1], "the one found at start, then a latecomer");
    }

    /// On a hybrid host (v1 controllers, the v2 tree beside them): a cgroup of a v1 hierarchy
    /// that has a twin with the same processes in the v2 tree (as systemd keeps its units) is
    /// watched as that twin, by the kernel, at the twin's level; one without a twin through its
    /// processes; one whose v2 namesake holds other processes is not taken for it.
    #[test]
    fn a_v1_cgroup_is_watched_as_its_v2_twin_when_it_has_one() {
        let mounts = cgroup_mounts();
        let v2 = mounts.iter().find(|m| m.fs_type == "cgroup2");
        let v1 = mounts
            .iter()
            .find(|m| m.fs_type == "cgroup" && !m.super_options.split(',').any(|o| o == "blkio"));
        let (Some(v2), Some(v1)) = (v2, v1) else {
            eprintln!("skipped: no v1 hierarchy beside the v2 tree here (not a hybrid host)");
            return;
        };
        let name = format!("iodig-twin-{}", std::process::id());
        let (one, twin) = (v1.mount_point.join(&name), v2.mount_point.join(&name));
        let lone = v1.mount_point.join(format!("{name}-lone"));
        for d in [&one, &twin, &lone] {
            std::fs::create_dir(d).unwrap();
        }
        let resolved = resolve(&[one.clone(), lone.clone()], &[]);
        // A process in the twin alone: no longer the same unit.
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        std::fs::write(twin.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
        let apart = resolve(std::slice::from_ref(&one), &[]);
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        for d in [&one, &twin, &lone] {
            let _ = std::fs::remove_dir(d);
        }
        let w = resolved.unwrap();
        let level = v2.root.split('/').filter(|c| !c.is_empty()).count() as u32 + 1;
        assert!(
            matches!(&w.targets[0], Target::TaskCgroup { dir, level: l, bit: 0, .. }
                if *dir == twin && *l == level),
            "{:?}",
            w.targets
        );
        assert!(
            matches!(&w.targets[1], Target::Processes { dir, .. } if *dir == lone),
            "{:?}",
            w.targets
        );
        assert_eq!(w.task_cgroups().len(), 1);
        assert_eq!(w.task_cgroups_in(1), vec![one.display().to_string()]);
        assert_note(&w, "its twin in the cgroup v2 tree");
        let apart = apart.unwrap();
        assert!(
            matches!(&apart.targets[0], Target::Processes { .. }),
            "a namesake with other processes is not the twin: {:?}",
            apart.targets
        );
    }
}
