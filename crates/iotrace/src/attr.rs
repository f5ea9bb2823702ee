//! Who issued each IO, by activity: the class table (thread names → classes, the one place to
//! extend) and its encoding for the kernel. The cgroup side (the hierarchy IO is charged in,
//! `--cgroup` / `--pid` targets) is `crate::cgroups`.
//!
//! The kernel classifies at `block_io_start` by the first rule whose thread-name pattern and
//! op match (see `classify` in iotrace.bpf.c; [`classify`] here is the same function, tested).

use iodig_model::trace::ClassInfo;

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
}
