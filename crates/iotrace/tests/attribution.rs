//! Ground truth for attribution on the real kernel (root, Linux 6.5+ with cgroup v1 blkio or
//! v2 io): threads named like Cassandra's and RocksDB's issue known O_DIRECT IO, and a process
//! in a cgroup of its own does a buffered write + fsync; every class and the cgroup must get
//! exactly their IOs and bytes, and the classes must sum to the device totals and diskstats.

mod common;

use common::*;
use iodig_iotrace::{start_watching, TraceMode, TraceOptions, WatchOptions};
use iodig_model::trace::{AttrRow, TraceDoc};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

const KIB: u64 = 1024;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// A blkio (v1) or io (v2) cgroup of our own, removed on drop even when the test fails.
struct TestCgroup {
    dir: PathBuf,
    parent_procs: PathBuf,
}

impl TestCgroup {
    fn new() -> Option<TestCgroup> {
        let h = iodig_iotrace::cgroups::io_hierarchy()?;
        let dir = h
            .root
            .join(format!("iodig-test-{}-attr", std::process::id()));
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        Some(TestCgroup {
            parent_procs: h.root.join("cgroup.procs"),
            dir,
        })
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // Move anything left back to the root, then remove (rmdir fails while tasks remain).
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines() {
            let _ = std::fs::write(&self.parent_procs, pid);
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!("could not remove {}", self.dir.display());
    }
}

/// eBPF tracing of `dev` alone, in 100 ms slots.
fn ebpf_on(dev: &LoopDev) -> TraceOptions {
    TraceOptions {
        mode: TraceMode::Ebpf,
        devices: vec![dev.path.clone()],
        slot_ms: 100,
        events_file: None,
        live: None,
        live_histograms: false,
    }
}

/// A job for [`on_thread`]: opens `path` with O_DIRECT and runs `f` on it with a 512 KiB
/// buffer.
fn direct_io(path: &str, f: fn(&std::fs::File, &AlignedBuf)) -> impl FnOnce() + Send + 'static {
    let path = path.to_string();
    move || {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .unwrap();
        f(&file, &AlignedBuf::new(512 * KIB as usize));
    }
}

/// Runs `f` on a thread named `name` (Linux keeps 15 characters) and waits for it.
fn on_thread(name: &str, f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .unwrap()
        .join()
        .expect("IO thread panicked");
}

fn rows<'a>(doc: &'a TraceDoc, class: &str) -> Vec<&'a AttrRow> {
    let a = doc.attribution().unwrap();
    a.rows.iter().filter(|r| r.class == class).collect()
}

/// (ios, bytes) of `class` and `op`, summed over its rows.
fn got(doc: &TraceDoc, class: &str, op: &str) -> (u64, u64) {
    rows(doc, class)
        .iter()
        .filter(|r| r.op == op)
        .fold((0, 0), |(i, b), r| (i + r.ios, b + r.bytes))
}

#[test]
fn named_threads_and_a_cgroup_get_exactly_their_io() {
    if !iodig_iotrace::attribution_available() {
        eprintln!("skipped: kernel has no block_io_start (needs 6.5+)");
        return;
    }
    let _g = lock();
    let cg = TestCgroup::new().expect("a cgroup hierarchy with blkio/io");
    let dev = LoopDev::new(8 * GIB, 0, false);
    let opts = ebpf_on(&dev);
    let watch = WatchOptions {
        cgroups: vec![cg.dir.clone()],
        pids: vec![std::process::id()],
        ..Default::default()
    };
    let session = start_watching(&opts, &watch).expect("eBPF tracing loads as root");

    let io = |f: fn(&std::fs::File, &AlignedBuf)| direct_io(&dev.path, f);
    use std::os::unix::fs::OpenOptionsExt;
    on_thread(
        "ReadStage-1",
        io(|f, b| (0..100).for_each(|i| pread_direct(f, b, 4096, i * 8192))),
    );
    on_thread(
        "CompactionExecutor:1",
        io(|f, b| (0..20).for_each(|i| pwrite_direct(f, b, 512 << 10, 64 * MIB + i * (512 << 10)))),
    );
    // The commit log's thread in Cassandra's default `commitlog_sync: periodic`.
    on_thread(
        "PERIODIC-COMMIT-LOG-SYNCER",
        io(|f, b| {
            (0..5).for_each(|i| pwrite_direct(f, b, 512 << 10, 128 * MIB + i * (512 << 10)));
            f.sync_all().unwrap();
        }),
    );
    on_thread(
        "rocksdb:low",
        io(|f, b| {
            (0..10).for_each(|i| pwrite_direct(f, b, 512 << 10, 256 * MIB + i * (512 << 10)));
        }),
    );
    on_thread("rocksdb:high", io(|f, _| discard(f, 4 * GIB, GIB)));
    on_thread(
        "iodig-worker-0",
        io(|f, b| {
            (0..50).for_each(|i| pread_direct(f, b, 4096, 512 * MIB + i * 8192));
            (0..10).for_each(|i| pwrite_direct(f, b, 512 << 10, 768 * MIB + i * (512 << 10)));
        }),
    );
    // Query reads beside a memtable flush: the flush writes 8 MiB at a time (many requests in
    // flight at once) back to back; the reads run from its first write until it has written
    // eight more, so most of them meet its IO whatever the scheduling.
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    let written = std::sync::Arc::new(AtomicU64::new(0));
    let done = std::sync::Arc::new(AtomicU64::new(0));
    let (w1, w2, d1, d2) = (written.clone(), written.clone(), done.clone(), done.clone());
    let open = |p: &str| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(p)
            .unwrap()
    };
    let (f1, f2) = (open(&dev.path), open(&dev.path));
    let flush = std::thread::Builder::new()
        .name("MemtableFlushWriter:1".into())
        .spawn(move || {
            let b = AlignedBuf::new(8 * MIB as usize);
            let mut i = 0;
            while d1.load(SeqCst) == 0 && i < 1024 {
                pwrite_direct(&f1, &b, 8 << 20, 2 * GIB + (i % 64) * (8 << 20));
                w1.fetch_add(1, SeqCst);
                i += 1;
            }
        })
        .unwrap();
    let reader = std::thread::Builder::new()
        .name("ReadStage-2".into())
        .spawn(move || {
            let b = AlignedBuf::new(4096);
            while w2.load(SeqCst) == 0 {
                std::thread::yield_now();
            }
            let until = w2.load(SeqCst) + 8;
            let mut n = 0;
            while w2.load(SeqCst) < until && n < 100_000 {
                pread_direct(&f2, &b, 4096, 3 * GIB + (n % 4096) * 8192);
                n += 1;
            }
            d2.store(1, SeqCst);
            n
        })
        .unwrap();
    let beside = reader.join().unwrap();
    flush.join().unwrap();
    // A process of its own in the test cgroup: one buffered 4 KiB write, then fsync.
    let procs = cg.dir.join("cgroup.procs");
    let mut cmd = std::process::Command::new("dd");
    cmd.args([
        "if=/dev/zero",
        &format!("of={}", dev.path),
        "bs=4096",
        "count=1",
        "seek=300000",
        "conv=fsync,notrunc",
        "status=none",
    ]);
    let procs_file = std::fs::OpenOptions::new()
        .write(true)
        .open(&procs)
        .unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&procs_file);
    // SAFETY: between fork and exec the closure only calls write(2) on an fd opened before the
    // fork (async-signal-safe, no allocation); "0" moves the calling process into the cgroup.
    unsafe {
        cmd.pre_exec(move || {
            if libc::write(fd, b"0".as_ptr().cast(), 1) == 1 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let st = cmd.status().expect("dd runs");
    assert!(st.success(), "dd failed: {st}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let doc = session.stop().unwrap();
    let a = doc.attribution().expect("attribution in eBPF mode");
    assert!(a.enabled);
    let sum = |v: &[(u64, u64)]| v.iter().fold((0, 0), |s, x| (s.0 + x.0, s.1 + x.1));

    let query_reads = 100 + beside;
    assert_eq!(
        got(&doc, "cassandra.read", "read"),
        (query_reads, query_reads * 4096)
    );
    assert_eq!(
        got(&doc, "cassandra.compaction", "write"),
        (20, 20 * 512 * KIB)
    );
    // fsync on the device: an empty PREFLUSH write (0 bytes) and the flush request it causes,
    // which the kernel issues on the PREFLUSH write's tag: both are the commit log's.
    assert_eq!(
        got(&doc, "cassandra.commitlog", "write"),
        (5 + 1, 5 * 512 * KIB)
    );
    assert_eq!(got(&doc, "cassandra.commitlog", "flush"), (1, 0));
    assert_eq!(
        got(&doc, "rocksdb.compaction", "write"),
        (10, 10 * 512 * KIB)
    );
    let discard_ios = doc.devices[0].ops["discard"].ios;
    assert!(discard_ios >= 1);
    assert_eq!(got(&doc, "rocksdb.flush", "discard"), (discard_ios, GIB));
    assert_eq!(got(&doc, "rocksdb.read", "read"), (50, 50 * 4096));
    assert_eq!(got(&doc, "rocksdb.wal", "write"), (10, 10 * 512 * KIB));

    // The dd process: charged to the test cgroup (kernfs id = the directory's inode number).
    let cg_id = std::fs::metadata(&cg.dir).unwrap().ino();
    let cg_rows: Vec<&AttrRow> = a.rows.iter().filter(|r| r.cgroup_id == cg_id).collect();
    assert!(
        !cg_rows.is_empty(),
        "no row in the test cgroup: {:#?}",
        a.rows
    );
    let name = cg.dir.file_name().unwrap().to_string_lossy();
    for r in &cg_rows {
        assert_eq!(r.process, "dd", "{r:?}");
        assert_eq!(r.class, "other", "{r:?}");
        assert_eq!(r.cgroup.as_deref(), Some(format!("/{name}").as_str()));
    }
    let by_op = |op: &str| {
        sum(&cg_rows
            .iter()
            .filter(|r| r.op == op)
            .map(|r| (r.ios, r.bytes))
            .collect::<Vec<_>>())
    };
    assert_eq!(by_op("write"), (2, 4096), "data + empty PREFLUSH write");
    assert_eq!(by_op("flush"), (1, 0));
    let w = a
        .watched
        .iter()
        .find(|w| w.flag == "--cgroup")
        .expect("the watched cgroup");
    assert_eq!((w.ios, w.bytes), (3, 4096), "{w:?}");
    assert!(w.name.contains(&*name), "{w:?}");
    let me = a.watched.iter().find(|w| w.flag == "--pid").unwrap();
    let flushed = got(&doc, "cassandra.flush", "write");
    assert!(
        flushed.0 >= 1 && flushed.1.is_multiple_of(8 * MIB),
        "{flushed:?}"
    );
    assert_eq!(
        me.ios,
        query_reads + 20 + 6 + 1 + 10 + discard_ios + 60 + flushed.0,
        "{me:?}"
    );

    // The background split. The first 100 query reads and RocksDB's 50 ran with no flush or
    // compaction IO anywhere near them: all "without". Of those beside the flush, the ones that
    // met one of its requests in flight are "with": how many depends on the scheduling of three
    // threads on this 2-CPU machine, so only "some" is asserted.
    let split = |class: &str, op: &str| {
        let s = a
            .splits
            .iter()
            .find(|s| s.class == class && s.op == op)
            .unwrap_or_else(|| panic!("no split for {class} {op}: {:#?}", a.splits));
        (s.with_background.ios, s.without_background.ios)
    };
    let (with, without) = split("cassandra.read", "read");
    eprintln!("cassandra.read beside background IO: with {with}, without {without}");
    assert_eq!(with + without, query_reads);
    assert!(with > 0 && without >= 100, "with {with} without {without}");
    assert_eq!(split("rocksdb.read", "read"), (0, 50));
    // Compaction writes one at a time: no *other* background request beside them, until the
    // flush's writes (another background class) — which ran after them.
    assert_eq!(split("cassandra.compaction", "write"), (0, 20));
    assert!(a.background_classes.iter().any(|c| c == "cassandra.flush"));
    // Our own threads are not in the test cgroup.
    assert!(a
        .rows
        .iter()
        .filter(|r| r.pid == std::process::id())
        .all(|r| r.cgroup_id != cg_id));

    // Everything adds up: classes = device totals = diskstats.
    assert!(!a.check.is_empty());
    for c in &a.check {
        assert_eq!(
            (c.class_ios, c.class_bytes),
            (c.device_ios, c.device_bytes),
            "{c:?}"
        );
    }
    assert_eq!(doc.self_check.attribution_match, Some(true));
    for k in &doc.devices[0].diskstats_check {
        assert_eq!(
            (k.tracer_ios, k.tracer_sectors),
            (k.diskstats_ios, k.diskstats_sectors),
            "{k:?}"
        );
    }
    assert_eq!(a.capped_ios, 0);
    assert_eq!(
        doc.self_check.lost_events + doc.self_check.state_collisions,
        0
    );
    // Per-second rows add up to their totals, and the table names the classes.
    for r in &a.rows {
        assert_eq!(r.seconds.iter().map(|s| s.ios).sum::<u64>(), r.ios, "{r:?}");
    }
    let text = iodig_iotrace::render::by(&doc, iodig_iotrace::render::By::Class);
    assert!(
        text.contains("cassandra.commitlog") && text.contains("rocksdb.wal"),
        "{text}"
    );
}

/// Short-lived processes each take one of the kernel's keys (the key has the process). Once
/// they are used up, the IO of later processes must keep its class and cgroup, in a row
/// without a process, instead of falling into `capped`: the database that starts reading
/// after a host's cron jobs ran is still the database.
#[test]
fn processes_past_the_key_cap_keep_their_class() {
    if !iodig_iotrace::attribution_available() {
        eprintln!("skipped: kernel has no block_io_start (needs 6.5+)");
        return;
    }
    let _g = lock();
    let dev = LoopDev::new(GIB, 0, false);
    let session = start_watching(&ebpf_on(&dev), &WatchOptions::default())
        .expect("eBPF tracing loads as root");
    let procs = u64::from(iodig_iotrace::ATTR_KEYS) + 48;
    for i in 0..procs {
        let ok = std::process::Command::new("dd")
            .arg(format!("if={}", dev.path))
            .args([
                "of=/dev/null",
                "bs=4096",
                "count=1",
                "iflag=direct",
                "status=none",
            ])
            .arg(format!("skip={}", i * 2))
            .status()
            .unwrap()
            .success();
        assert!(ok, "dd {i}");
    }
    let io = |f: fn(&std::fs::File, &AlignedBuf)| direct_io(&dev.path, f);
    on_thread(
        "ReadStage-1",
        io(|f, b| (0..50).for_each(|i| pread_direct(f, b, 4096, 512 * MIB + i * 8192))),
    );
    on_thread(
        "rocksdb:low0",
        io(|f, b| {
            (0..10).for_each(|i| pwrite_direct(f, b, 512 << 10, 256 * MIB + i * (512 << 10)));
        }),
    );
    let doc = session.stop().unwrap();
    let a = doc.attribution().unwrap();

    assert_eq!(
        got(&doc, "other", "read"),
        (procs, procs * 4 * KIB),
        "every dd's read"
    );
    assert_eq!(got(&doc, "cassandra.read", "read"), (50, 50 * 4 * KIB));
    assert_eq!(
        got(&doc, "rocksdb.compaction", "write"),
        (10, 10 * 512 * KIB)
    );
    assert_eq!(a.capped_ios, 0, "{:?}", a.notes);
    assert!(
        a.past_process_keys_ios >= procs - u64::from(iodig_iotrace::ATTR_KEYS) + 60,
        "the later dd's and both named threads' IOs: {}",
        a.past_process_keys_ios
    );
    let merged: Vec<&AttrRow> = a
        .rows
        .iter()
        .filter(|r| r.process == iodig_model::trace::PAST_PROCESS_KEYS)
        .collect();
    assert!(merged.iter().all(|r| r.pid == 0), "{merged:?}");
    assert_eq!(
        merged.iter().map(|r| r.ios).sum::<u64>(),
        a.past_process_keys_ios
    );
    assert!(
        a.notes
            .iter()
            .any(|n| n.contains("keys for processes ran out")),
        "{:?}",
        a.notes
    );
    for c in &a.check {
        assert_eq!(
            (c.class_ios, c.class_bytes),
            (c.device_ios, c.device_bytes),
            "{c:?}"
        );
    }
    let text = iodig_iotrace::render::by(&doc, iodig_iotrace::render::By::Process);
    assert!(
        text.contains(iodig_model::trace::PAST_PROCESS_KEYS),
        "{text}"
    );
}

/// The cgroup v2 tree's mount point (mounted on every systemd host, hybrid or not).
fn v2_mount() -> PathBuf {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
        })
        .expect("a cgroup v2 tree")
}

/// Moves this whole process into v2 cgroup `dir` (cgroup.procs takes a process), and back to
/// where it was when dropped, so a failing test leaves nothing behind.
struct MovedInto {
    home: PathBuf,
}

impl MovedInto {
    fn new(dir: &std::path::Path) -> MovedInto {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let rel = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .expect("this process's v2 cgroup in /proc/self/cgroup");
        let home = v2_mount().join(rel.trim_start_matches('/'));
        std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()).unwrap();
        MovedInto { home }
    }
}

impl Drop for MovedInto {
    fn drop(&mut self) {
        let _ = std::fs::write(
            self.home.join("cgroup.procs"),
            std::process::id().to_string(),
        );
    }
}

/// Keeps the calling thread on CPU 0, so that the tracer's per-CPU cache of its submitters
/// sees every IO it issues.
fn pin_to_cpu0() {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes within it; pid 0 = this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

/// A cgroup of the v2 tree watched with `--cgroup`: on a hybrid host (blkio on v1, as here) IO
/// is not charged there, so the kernel checks per IO whether the submitting task is inside it.
/// Counted exactly: a shell that moves itself into a child of the watched cgroup, and the dd it
/// becomes, which ends before tracing stops; and one thread of this process that writes outside,
/// then from a cgroup made under the watched one after tracing started, then outside again
/// (the same thread on the same CPU, so the tracer's per-thread cache must notice each move).
/// (On a v2 host with io, the same cgroup is watched by where IO is charged; the counts must be
/// the same.)
#[test]
fn a_v2_cgroup_counts_exactly_what_its_tasks_submitted() {
    if !iodig_iotrace::attribution_available() {
        eprintln!("skipped: kernel has no block_io_start (needs 6.5+)");
        return;
    }
    let _g = lock();
    let watched = v2_mount().join(format!("iodig-test-{}-v2", std::process::id()));
    let child = watched.join("child");
    let late = watched.join("late");
    std::fs::create_dir_all(&child).unwrap();
    let dev = LoopDev::new(GIB, 0, false);
    let watch = WatchOptions {
        cgroups: vec![watched.clone()],
        ..Default::default()
    };
    let session = start_watching(&ebpf_on(&dev), &watch).expect("eBPF tracing loads as root");
    std::fs::create_dir(&late).unwrap();
    let shell = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec dd if=/dev/zero of={} bs=512k count=20 oflag=direct status=none",
            child.display(),
            dev.path
        ))
        .status();
    let (path, late_dir) = (dev.path.clone(), late.clone());
    on_thread("mover", move || {
        use std::os::unix::fs::OpenOptionsExt;
        pin_to_cpu0();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .unwrap();
        let buf = AlignedBuf::new(4096);
        (0..7).for_each(|i| pwrite_direct(&f, &buf, 4096, 256 * MIB + i * 8192));
        {
            let _inside = MovedInto::new(&late_dir);
            (0..3).for_each(|i| pwrite_direct(&f, &buf, 4096, 300 * MIB + i * 8192));
        }
        (0..2).for_each(|i| pwrite_direct(&f, &buf, 4096, 400 * MIB + i * 8192));
    });
    let removed_late = std::fs::remove_dir(&late);
    let doc = session.stop().unwrap();
    let _ = std::fs::remove_dir(&child);
    let _ = std::fs::remove_dir(&watched);
    assert!(shell.unwrap().success());
    removed_late.expect("the late cgroup is empty again before tracing stops");
    let a = doc.attribution().unwrap();
    assert_eq!(a.watched.len(), 1, "{:?}", a.watched);
    let w = &a.watched[0];
    assert_eq!(
        (w.ios, w.bytes),
        (23, 20 * 512 * KIB + 3 * 4 * KIB),
        "dd's writes and the 3 from the late cgroup, nothing else: {w:?}; notes {:?}",
        a.notes
    );
    assert_eq!(
        got(&doc, "other", "write"),
        (32, 20 * 512 * KIB + 12 * 4 * KIB),
        "every writer traced"
    );
    let given = watched.display().to_string();
    assert!(
        a.rows
            .iter()
            .filter(|r| r.submitter_in.contains(&given))
            .all(|r| r.op == "write"),
        "only the rows of the watched tasks name it: {:?}",
        a.rows
    );
}

#[test]
fn missing_targets_are_refused_with_the_flag_named() {
    let opts = TraceOptions {
        mode: TraceMode::Diskstats,
        ..Default::default()
    };
    let bad_pid = WatchOptions {
        pids: vec![u32::MAX - 7],
        ..Default::default()
    };
    let e = start_watching(&opts, &bad_pid).err().unwrap();
    assert!(
        matches!(&e, iodig_iotrace::TraceError::Other(a) if a.downcast_ref::<iodig_iotrace::BadTarget>().is_some())
    );
    assert!(e.to_string().starts_with("--pid"), "{e}");
    let bad_cg = WatchOptions {
        cgroups: vec!["no-such-iodig-cgroup".into()],
        ..Default::default()
    };
    let e = start_watching(&opts, &bad_cg).err().unwrap();
    assert!(
        e.to_string().contains("--cgroup no-such-iodig-cgroup"),
        "{e}"
    );
}

/// The kernel skips the completion program for whole batches of completions on 6.18
/// (docs/tracing.md); the tracer simulates that here by skipping every 3rd final completion
/// (IODIG_TRACER_DROP_EVERY). A request whose completion went unseen is counted when it is
/// used again, and a compaction write gives back its background-IO mark then: query reads
/// issued after every compaction write has ended must all be filed as without background IO,
/// and the IOs counted are exactly those completed seen plus those found again.
#[test]
fn completions_the_kernel_skips_give_back_their_background_mark() {
    if !iodig_iotrace::attribution_available() {
        eprintln!("skipped: kernel has no block_io_start (needs 6.5+)");
        return;
    }
    let _g = lock();
    let dev = LoopDev::new(GIB, 0, false);
    let opts = ebpf_on(&dev);
    std::env::set_var("IODIG_TRACER_DROP_EVERY", "3");
    let session = start_watching(&opts, &WatchOptions::default());
    std::env::remove_var("IODIG_TRACER_DROP_EVERY");
    let session = session.expect("eBPF tracing loads as root");
    let io = |f: fn(&std::fs::File, &AlignedBuf)| direct_io(&dev.path, f);
    // 30 compaction writes, one at a time, 1 MiB apart (nothing merges): 10 completions skipped.
    on_thread(
        "rocksdb:low",
        io(|f, b| (0..30).for_each(|i| pwrite_direct(f, b, 512 << 10, i * MIB))),
    );
    // Foreground reads 128 at a time, 8 times: every tag of the loop device (128), so every
    // request of the compaction writes, is used again.
    on_thread(
        "iodig-worker-0",
        io(|f, _| assert_eq!(aio_read_batches(f, 128, 8, 256 * MIB), 1024)),
    );
    on_thread(
        "ReadStage-1",
        io(|f, b| (0..150).for_each(|i| pread_direct(f, b, 4096, 512 * MIB + i * 8192))),
    );
    let doc = session.stop().unwrap();
    let a = doc.attribution().expect("attribution on");
    let query = a
        .splits
        .iter()
        .find(|s| s.class == "cassandra.read" && s.op == "read")
        .expect("the query reads' split");
    let unseen = doc.self_check.completions_unseen;
    assert_eq!(
        query.with_background.ios, 0,
        "query reads after the compaction ended, filed as beside it: {query:?}; unseen {unseen:?}; self-check {:?}; ops {:?}",
        (doc.self_check.completions_without_issue, doc.self_check.state_collisions, doc.self_check.requeues),
        doc.devices[0].ops.iter().map(|(k, v)| (k.clone(), v.ios)).collect::<Vec<_>>()
    );
    assert!(
        (90..=110).contains(&query.without_background.ios),
        "two thirds of 150 query reads counted: {query:?}"
    );
    // 401 of the 1,204 final completions were skipped; all but those whose request was not
    // used again before the end (at most one per tag) are found, and counted.
    let unseen = unseen.expect("the self-check counts unseen completions");
    assert!((401 - 128..=401).contains(&unseen), "unseen {unseen}");
    let ops = &doc.devices[0].ops;
    let (reads, writes) = (ops["read"].ios, ops["write"].ios);
    assert_eq!(
        reads + writes,
        1204 - 401 + unseen,
        "{reads} reads, {writes} writes"
    );
    assert_eq!(ops["write"].bytes, writes * (512 << 10));
    let classes: u64 = a.rows.iter().map(|r| r.ios).sum();
    assert_eq!(
        classes,
        reads + writes,
        "the classes hold the unseen IOs too"
    );
}
