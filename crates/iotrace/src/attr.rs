//! Who issued each IO: the activity-class table (thread names → classes, the one place to
//! extend), its encoding for the kernel, cgroup ids mapped back to paths, and `--cgroup` /
//! `--pid` targets.
//!
//! The kernel classifies at `block_io_start` by the first rule whose thread-name pattern and
//! op match (see `classify` in iotrace.bpf.c; [`classify`] here is the same function, tested).

use iodig_model::trace::ClassInfo;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Op bits of a rule (op indexes as `OPS`: read, write, discard, flush, other).
pub const READ: u32 = 1;
/// Writes (including the empty write that comes with an `fsync`'s flush).
pub const WRITE: u32 = 2;
/// Discards (trims).
pub const DISCARD: u32 = 4;
/// Cache flushes (an `fsync` on a device with a volatile write cache).
pub const FLUSH: u32 = 8;
/// Every other op: secure erase, write zeroes, zone and driver ops.
pub const OTHER: u32 = 16;
/// All five ops.
pub const ANY: u32 = 31;
/// Every op but read: what a foreground thread writes, syncs or trims.
pub const NOT_READ: u32 = ANY & !READ;

/// One activity class: name (`group.activity`), meaning, and the thread-name patterns it
/// takes, each `Prefix*` (prefix match) or an exact name, with the ops it applies to.
pub struct Class {
    /// `group.activity` (e.g. `cassandra.flush`), as rows and `attribution.classes` name it.
    pub name: &'static str,
    /// What the class's IO is, in words, for `attribution.classes`.
    pub description: &'static str,
    /// Thread-name patterns (at most 15 characters before any `*`) with the op bits each applies
    /// to; empty for the rows the kernel fills without a rule.
    pub threads: &'static [(&'static str, u32)],
}

/// Rows the kernel fills without a rule: indexes fixed by the BPF side's rodata.
pub const UNKNOWN: usize = 0;
/// `capped`: IO of new keys once the kernel's attribution key cap is hit, one row per device × op.
pub const CAPPED: usize = 1;
/// `other`: user threads matching no rule.
pub const OTHER_USER: usize = 2;
/// `kernel.other`: kernel threads (`PF_KTHREAD`) matching no rule.
pub const KERNEL_OTHER: usize = 3;
/// `kernel.swap`: IO flagged `REQ_SWAP`, whichever thread submitted it, before any rule.
pub const SWAP: usize = 4;

/// The class table, in match order (first match wins, so specific patterns come first).
/// Linux keeps 15 characters of a thread name: patterns are written truncated.
pub const CLASSES: &[Class] = &[
    Class {
        name: "unknown",
        description: "not seen at submission: in flight when tracing started, passthrough, or no block_io_start on this kernel",
        threads: &[],
    },
    Class {
        name: "capped",
        description: "the kernel's attribution key cap was hit (counted in capped_ios)",
        threads: &[],
    },
    Class {
        name: "other",
        description: "user threads matching no rule",
        threads: &[],
    },
    Class {
        name: "kernel.other",
        description: "kernel threads matching no rule",
        threads: &[],
    },
    Class {
        name: "kernel.swap",
        description: "swap IO (REQ_SWAP in cmd_flags, any thread) and kswapd",
        threads: &[("kswapd*", ANY)],
    },
    Class {
        name: "kernel.writeback",
        description: "page-cache writeback by kernel flusher threads (kworker) — under cgroup v1 charged to the root cgroup",
        threads: &[("kworker/*", NOT_READ), ("flush-*", NOT_READ)],
    },
    Class {
        name: "kernel.journal",
        description: "file-system journal: ext4 jbd2, XFS AIL",
        threads: &[("jbd2/*", ANY), ("xfsaild/*", ANY)],
    },
    Class {
        name: "cassandra.read",
        description: "Cassandra query reads",
        threads: &[
            ("ReadStage*", ANY),
            ("Native-Transpor*", ANY),
            ("ReadRepairStage*", ANY),
        ],
    },
    Class {
        name: "cassandra.flush",
        description: "Cassandra memtable flush",
        threads: &[
            ("MemtableFlushWr*", ANY),
            ("PerDiskMemtable*", ANY),
            ("MemtablePostFlu*", ANY),
            ("MemtableReclaim*", ANY),
        ],
    },
    Class {
        name: "cassandra.compaction",
        description: "Cassandra compaction, validation, view and index builds",
        threads: &[
            ("CompactionExecu*", ANY),
            ("ValidationExecu*", ANY),
            ("ViewBuildExecut*", ANY),
            ("SecondaryIndexM*", ANY),
        ],
    },
    Class {
        name: "cassandra.commitlog",
        description: "Cassandra commit log writes and syncs (batch, periodic and group modes) and segment allocation",
        // PERIODIC-COMMIT-LOG-SYNCER is the default `commitlog_sync: periodic`;
        // GROUP-COMMIT-LOG-WRITER is `group`, COMMIT-LOG-WRITER is `batch` (Cassandra 4.0–5.0).
        threads: &[
            ("COMMIT-LOG-WRIT*", ANY),
            ("PERIODIC-COMMIT*", ANY),
            ("GROUP-COMMIT-LO*", ANY),
            ("COMMIT-LOG-ALLO*", ANY),
        ],
    },
    Class {
        name: "cassandra.hints_streaming",
        description: "Cassandra hints and streaming",
        threads: &[("Hints*", ANY), ("Stream*", ANY), ("NettyStreaming*", ANY)],
    },
    Class {
        name: "cassandra.other",
        description: "other Cassandra stages and tasks",
        threads: &[
            ("MutationStage*", ANY),
            ("CounterMutation*", ANY),
            ("ViewMutationSta*", ANY),
            ("GossipStage*", ANY),
            ("MigrationStage*", ANY),
            ("AntiEntropyStag*", ANY),
            ("ScheduledTasks*", ANY),
            ("OptionalTasks*", ANY),
            ("BatchlogTasks*", ANY),
            ("CacheCleanupExe*", ANY),
            ("SlabPoolCleaner*", ANY),
            ("Messaging-Event*", ANY),
            ("NonPeriodicTask*", ANY),
            ("ScheduledFastTa*", ANY),
            ("IndexSummaryMan*", ANY),
            ("SnapshotCleanup*", ANY),
        ],
    },
    Class {
        name: "rocksdb.read",
        description: "RocksDB foreground reads (iodig's worker threads)",
        threads: &[("iodig-worker*", READ)],
    },
    Class {
        name: "rocksdb.wal",
        description: "RocksDB WAL: writes and syncs from foreground (iodig worker) threads",
        threads: &[("iodig-worker*", NOT_READ)],
    },
    Class {
        name: "rocksdb.flush",
        description: "RocksDB memtable flush (high-priority pool)",
        threads: &[("rocksdb:high*", ANY)],
    },
    Class {
        name: "rocksdb.compaction",
        description: "RocksDB compaction (low- and bottom-priority pools)",
        threads: &[("rocksdb:low*", ANY), ("rocksdb:bottom*", ANY)],
    },
    Class {
        name: "rocksdb.other",
        description: "other RocksDB threads (user pool, older rocksdb:bgN names)",
        threads: &[("rocksdb:*", ANY)],
    },
];

/// Classes whose IO runs beside the foreground (memtable flush, compaction): every other
/// read and write is split by whether one of these was in the block layer during its life.
pub const BACKGROUND: &[&str] = &[
    "cassandra.flush",
    "cassandra.compaction",
    "rocksdb.flush",
    "rocksdb.compaction",
];

/// Max classes (MAX_CLASSES in iotrace.h: the background set is a 32-bit mask).
pub const MAX_CLASSES: usize = 32;

/// The background classes as the kernel's bit mask (bit = class index).
pub fn background_mask() -> u32 {
    assert!(
        CLASSES.len() <= MAX_CLASSES,
        "{} classes > {MAX_CLASSES}",
        CLASSES.len()
    );
    CLASSES
        .iter()
        .enumerate()
        .filter(|(_, c)| BACKGROUND.contains(&c.name))
        .fold(0, |m, (i, _)| m | 1 << i)
}

/// Max rules the kernel takes (MAX_RULES in iotrace.h).
pub const MAX_RULES: usize = 64;

/// A rule as the kernel matches it: `comm & mask == val` over 16 bytes, op bit in `ops`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The pattern's bytes, NUL-padded, as the two native-endian words of a 16-byte thread name.
    pub val: [u64; 2],
    /// Which bytes must equal `val`: the prefix, plus the NUL after an exact name.
    pub mask: [u64; 2],
    /// Op bits ([`READ`], [`WRITE`], …) the rule applies to.
    pub ops: u32,
    /// Index in [`CLASSES`] of the class a matching IO gets.
    pub class: u32,
}

/// Encodes `Prefix*` (prefix) or `name` (exact: its NUL terminator is matched too).
pub fn encode(pattern: &str, ops: u32, class: u32) -> Rule {
    let (text, prefix) = match pattern.strip_suffix('*') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let bytes = text.as_bytes();
    assert!(
        bytes.len() <= 15,
        "thread pattern {pattern:?} longer than 15"
    );
    let mut val = [0u8; 16];
    let mut mask = [0u8; 16];
    val[..bytes.len()].copy_from_slice(bytes);
    let n = if prefix { bytes.len() } else { bytes.len() + 1 };
    mask[..n].fill(0xff);
    let word = |b: &[u8; 16], i: usize| u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    Rule {
        val: [word(&val, 0), word(&val, 1)],
        mask: [word(&mask, 0), word(&mask, 1)],
        ops,
        class,
    }
}

/// The rules of [`CLASSES`] in match order.
pub fn rules() -> Vec<Rule> {
    let v: Vec<Rule> = CLASSES
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            c.threads
                .iter()
                .map(move |(p, ops)| encode(p, *ops, i as u32))
        })
        .collect();
    assert!(
        v.len() <= MAX_RULES,
        "{} thread rules > {MAX_RULES}",
        v.len()
    );
    v
}

/// The class of an IO, as the kernel computes it: swap flag first, then the first matching
/// rule, then kernel thread or user thread.
pub fn classify(comm: &str, op: usize, swap: bool, kthread: bool) -> usize {
    if swap {
        return SWAP;
    }
    let mut b = [0u8; 16];
    let n = comm.len().min(15);
    b[..n].copy_from_slice(&comm.as_bytes()[..n]);
    let w = [
        u64::from_ne_bytes(b[..8].try_into().unwrap()),
        u64::from_ne_bytes(b[8..].try_into().unwrap()),
    ];
    for r in rules() {
        if w[0] & r.mask[0] == r.val[0] && w[1] & r.mask[1] == r.val[1] && r.ops & (1 << op) != 0 {
            return r.class as usize;
        }
    }
    if kthread {
        KERNEL_OTHER
    } else {
        OTHER_USER
    }
}

/// The class table for the document.
pub fn class_infos() -> Vec<ClassInfo> {
    let ops = |m: u32| match m {
        ANY => String::new(),
        READ => " (read)".into(),
        NOT_READ => " (not read)".into(),
        _ => format!(" (ops {m:#x})"),
    };
    CLASSES
        .iter()
        .map(|c| ClassInfo {
            name: c.name.into(),
            description: c.description.into(),
            threads: c
                .threads
                .iter()
                .map(|(p, m)| format!("{p}{}", ops(*m)))
                .collect(),
        })
        .collect()
}

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

/// Mounts from /proc/self/mountinfo: (mount point, fs type, super options).
fn mounts() -> Vec<(PathBuf, String, String)> {
    crate::devices::mounts()
        .into_iter()
        .map(|m| (m.mount_point, m.fs_type, m.super_options))
        .collect()
}

/// The hierarchy the blkcg lives in: a v1 mount with `blkio` wins (the kernel binds the
/// controller there), else the v2 mount.
pub fn io_hierarchy() -> Option<Hierarchy> {
    let m = mounts();
    if let Some((root, _, _)) = m
        .iter()
        .find(|(_, fs, o)| fs == "cgroup" && o.split(',').any(|x| x == "blkio"))
    {
        return Some(Hierarchy {
            root: root.clone(),
            version: 1,
            io_enabled: true,
        });
    }
    let (root, _, _) = m.iter().find(|(_, fs, _)| fs == "cgroup2")?;
    let ctl = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
    Some(Hierarchy {
        root: root.clone(),
        version: 2,
        io_enabled: ctl.split_whitespace().any(|c| c == "io"),
    })
}

/// Every cgroup directory of the hierarchy: inode number (= kernfs id) → path from its root
/// (`/` for the root). Bounded walk (depth 16, 100k directories).
pub fn cgroup_paths(h: &Hierarchy) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    let mut stack = vec![(h.root.clone(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        if out.len() >= 100_000 {
            break;
        }
        let Ok(md) = std::fs::metadata(&dir) else {
            continue;
        };
        let rel = dir.strip_prefix(&h.root).unwrap_or(Path::new(""));
        out.insert(md.ino(), format!("/{}", rel.display()));
        if depth >= 16 {
            continue;
        }
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push((e.path(), depth + 1));
                }
            }
        }
    }
    out
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
    /// A cgroup of the v2 tree where IO is not charged there (a hybrid host's v2 tree, v2
    /// without `io`): matched per IO by the submitting task's cgroup, which the kernel reads at
    /// submission (`task_cgroup_id` of the rows), its descendants included.
    TaskCgroup {
        /// The `--cgroup` as given.
        given: String,
        /// Its directory.
        dir: PathBuf,
        /// Its id and its descendants' (directory inode numbers) when tracing started; those
        /// under it when tracing stops are added.
        ids_at_start: Vec<u64>,
    },
    /// A cgroup in another v1 hierarchy than blkio's: watched through the processes in it and
    /// in the cgroups under it, as found when tracing starts and again when it stops.
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
    /// The cgroup ids of a [`Target::TaskCgroup`]: at start, and under it now; empty for the
    /// other targets.
    pub fn task_cgroup_ids(&self) -> Vec<u64> {
        let Target::TaskCgroup {
            dir, ids_at_start, ..
        } = self
        else {
            return Vec::new();
        };
        let mut ids = ids_at_start.clone();
        for id in cgroup_ids_under(dir) {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids
    }

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
    /// Whether the kernel must key IO by the submitting task's v2 cgroup too.
    pub fn by_task_cgroup(&self) -> bool {
        self.targets
            .iter()
            .any(|t| matches!(t, Target::TaskCgroup { .. }))
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
        w.targets
            .extend(resolve_cgroup(c, h.as_ref(), &mut w.notes)?);
    }
    Ok(w)
}

fn resolve_cgroup(
    c: &Path,
    h: Option<&Hierarchy>,
    notes: &mut Vec<String>,
) -> Result<Vec<Target>, String> {
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
                return Ok(vec![task_cgroup_of(given, under)]);
            }
            return Ok(vec![Target::Cgroup {
                given,
                path,
                id: md.ino(),
            }]);
        }
    }
    // Elsewhere (another v1 hierarchy, the v2 tree on a hybrid host): not where IO is charged;
    // watch the processes in it.
    let mut other = vec![c.to_path_buf()];
    if c.is_relative() || !c.starts_with("/sys/fs/cgroup") {
        for (mnt, fs, _) in mounts() {
            if fs == "cgroup" || fs == "cgroup2" {
                other.push(mnt.join(c.strip_prefix("/").unwrap_or(c)));
            }
        }
    }
    for p in other {
        if p.join("cgroup.procs").is_file() && in_v2_tree(&p) {
            notes.push(format!(
                "--cgroup {given}: {} is in the cgroup v2 tree, not in the hierarchy IO is charged to ({}); {BY_TASK_CGROUP}",
                p.display(),
                h.map_or("none".into(), Hierarchy::describe)
            ));
            return Ok(vec![task_cgroup_of(given, p)]);
        }
        if p.join("cgroup.procs").is_file() {
            notes.push(format!(
                "--cgroup {given}: {} is not in the hierarchy IO is charged to ({}); {WATCHING_PROCESSES}",
                p.display(),
                h.map_or("none".into(), Hierarchy::describe)
            ));
            return Ok(vec![processes_of(given, p)]);
        }
        let p = p.display().to_string();
        if !tried.contains(&p) {
            tried.push(p);
        }
    }
    Err(format!(
        "--cgroup {given}: no such cgroup (looked at {}); give a cgroup directory, e.g. {}/system.slice/NAME.service",
        tried.join(", "),
        h.map_or("/sys/fs/cgroup".into(), |h| h.root.display().to_string())
    ))
}

/// How a cgroup of the v2 tree is watched where IO is not charged to it, for its note.
const BY_TASK_CGROUP: &str = "its IO is told by the cgroup of the task that submitted it, which the kernel reads per IO (writeback that a kernel flusher thread submits for it is not counted)";

fn task_cgroup_of(given: String, dir: PathBuf) -> Target {
    Target::TaskCgroup {
        given,
        ids_at_start: cgroup_ids_under(&dir),
        dir,
    }
}

/// Whether `p` lies in a cgroup2 mount (the default hierarchy, whose ids the kernel's
/// `bpf_get_current_cgroup_id` gives).
fn in_v2_tree(p: &Path) -> bool {
    let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    mounts()
        .iter()
        .any(|(mnt, fs, _)| fs == "cgroup2" && p.starts_with(mnt))
}

/// The ids (directory inode numbers) of cgroup `dir` and every cgroup under it.
fn cgroup_ids_under(dir: &Path) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(md) = std::fs::metadata(&d) else {
            continue;
        };
        ids.push(md.ino());
        if let Ok(entries) = std::fs::read_dir(&d) {
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
    }
    ids
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
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let text = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
        out.extend(
            text.lines()
                .filter_map(|l| l.trim().parse::<u32>().ok())
                .map(|pid| (pid, comm_of(pid).unwrap_or_default())),
        );
        if let Ok(entries) = std::fs::read_dir(&d) {
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
    }
    out
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

    fn class(comm: &str, op: usize) -> &'static str {
        CLASSES[classify(comm, op, false, comm.starts_with('k'))].name
    }

    #[test]
    fn real_thread_names_get_their_class() {
        assert_eq!(class("ReadStage-3", 0), "cassandra.read");
        assert_eq!(class("Native-Transpor", 0), "cassandra.read");
        assert_eq!(class("MemtableFlushWr", 1), "cassandra.flush");
        assert_eq!(class("PerDiskMemtable", 1), "cassandra.flush");
        assert_eq!(class("CompactionExecu", 0), "cassandra.compaction");
        assert_eq!(class("COMMIT-LOG-WRIT", 1), "cassandra.commitlog");
        assert_eq!(class("PERIODIC-COMMIT", 1), "cassandra.commitlog");
        assert_eq!(class("GROUP-COMMIT-LO", 1), "cassandra.commitlog");
        assert_eq!(class("COMMIT-LOG-ALLO", 1), "cassandra.commitlog");
        assert_eq!(class("HintsDispatcher", 0), "cassandra.hints_streaming");
        assert_eq!(class("MutationStage-1", 1), "cassandra.other");
        assert_eq!(class("IndexSummaryMan", 1), "cassandra.other");
        assert_eq!(class("rocksdb:high", 1), "rocksdb.flush");
        assert_eq!(class("rocksdb:low", 1), "rocksdb.compaction");
        assert_eq!(class("rocksdb:bottom", 0), "rocksdb.compaction");
        assert_eq!(class("rocksdb:bg0", 0), "rocksdb.other");
        assert_eq!(class("iodig-worker-3", 0), "rocksdb.read");
        assert_eq!(class("iodig-worker-3", 1), "rocksdb.wal");
        assert_eq!(class("iodig-worker-3", 3), "rocksdb.wal");
        assert_eq!(class("kworker/u8:2", 1), "kernel.writeback");
        assert_eq!(class("kworker/u8:2", 0), "kernel.other");
        assert_eq!(class("jbd2/vda1-8", 1), "kernel.journal");
        assert_eq!(class("kswapd0", 0), "kernel.swap");
        assert_eq!(class("fio", 0), "other");
        assert_eq!(CLASSES[classify("fio", 1, true, false)].name, "kernel.swap");
        assert_eq!(CLASSES[UNKNOWN].name, "unknown");
        assert_eq!(CLASSES[CAPPED].name, "capped");
        assert_eq!(CLASSES[OTHER_USER].name, "other");
        assert_eq!(CLASSES[KERNEL_OTHER].name, "kernel.other");
        assert_eq!(CLASSES[SWAP].name, "kernel.swap");
    }

    #[test]
    fn exact_and_prefix_patterns() {
        let exact = encode("java", ANY, 7);
        let pre = encode("java*", ANY, 7);
        let w = |s: &str| {
            let mut b = [0u8; 16];
            b[..s.len()].copy_from_slice(s.as_bytes());
            [
                u64::from_ne_bytes(b[..8].try_into().unwrap()),
                u64::from_ne_bytes(b[8..].try_into().unwrap()),
            ]
        };
        let m = |r: &Rule, s: &str| {
            let c = w(s);
            c[0] & r.mask[0] == r.val[0] && c[1] & r.mask[1] == r.val[1]
        };
        assert!(m(&exact, "java") && !m(&exact, "javac"));
        assert!(m(&pre, "java") && m(&pre, "javac"));
        assert!(m(&encode("COMMIT-LOG-WRIT*", ANY, 0), "COMMIT-LOG-WRIT"));
        assert!(rules().len() <= MAX_RULES);
    }

    #[test]
    fn background_mask_names_flush_and_compaction_only() {
        let m = background_mask();
        let named: Vec<&str> = (0..CLASSES.len())
            .filter(|i| m & (1 << i) != 0)
            .map(|i| CLASSES[i].name)
            .collect();
        assert_eq!(named.len(), BACKGROUND.len(), "{named:?}");
        assert!(named
            .iter()
            .all(|n| n.ends_with(".flush") || n.ends_with(".compaction")));
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
        assert!(
            w.notes
                .iter()
                .any(|n| n.contains("a thread (watched-thread)")),
            "{:?}",
            w.notes
        );
        assert!(
            w.notes
                .iter()
                .any(|n| n.contains("the processes it starts")),
            "{:?}",
            w.notes
        );
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
}
