//! Integration tests against the real kernel (root required, as in CI): known IO on a loop
//! device must come out of the tracer exactly, and match /proc/diskstats.

mod common;

use common::*;
use iodig_iotrace::{start, TraceMode, TraceOptions};
use iodig_model::trace::TraceDoc;

const KIB: u64 = 1024;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

fn opts(dev: &LoopDev, mode: TraceMode) -> TraceOptions {
    TraceOptions {
        mode,
        devices: vec![dev.path.clone()],
        slot_ms: 100,
        events_file: None,
        live: None,
        live_histograms: false,
    }
}

/// The known workload: 200 reads of 4 KiB, 40 writes of 512 KiB, one 3 GiB discard, 5 fsyncs.
fn known_io(dev: &LoopDev) {
    let f = dev.open_direct();
    let buf = AlignedBuf::new(512 * KIB as usize);
    for i in 0..200u64 {
        pread_direct(&f, &buf, 4096, (i * 37 % 4000) * 4096);
    }
    for i in 0..40u64 {
        pwrite_direct(&f, &buf, 512 * KIB as usize, 64 * MIB + i * 512 * KIB);
    }
    discard(&f, 4 * GIB, 3 * GIB);
    for _ in 0..5 {
        f.sync_all().unwrap();
    }
}

/// 100 reads of 4 KiB, one at a time and none adjacent (nothing merges), then 10 writes of
/// 64 KiB from `writes_at`, `stride` apart.
fn reads_then_writes(f: &std::fs::File, buf: &AlignedBuf, writes_at: u64, stride: u64) {
    for i in 0..100u64 {
        pread_direct(f, buf, 4096, i * 8192);
    }
    for i in 0..10u64 {
        pwrite_direct(f, buf, 64 * KIB as usize, writes_at + i * stride);
    }
}

/// Issue, complete, requeue, and io_start where the kernel attributes IO (6.5+).
fn expected_progs() -> usize {
    3 + usize::from(iodig_iotrace::attribution_available())
}

fn op<'a>(doc: &'a TraceDoc, name: &str) -> &'a iodig_model::trace::OpTrace {
    &doc.devices[0].ops[name]
}

/// What `known_io` must come out as in every attach flavour: each op's IOs and bytes exactly,
/// a device latency per read, diskstats matching, nothing lost or collided.
fn assert_known_io_counted(doc: &TraceDoc) {
    let r = op(doc, "read");
    assert_eq!((r.ios, r.bytes), (200, 200 * 4096));
    // fsync on a block device sends an empty PREFLUSH write; blk-flush turns it into a flush
    // request, and the empty write itself completes (0 bytes): diskstats counts it as a write.
    let w = op(doc, "write");
    assert_eq!(w.bytes, 40 * 512 * KIB);
    assert_eq!(op(doc, "flush").ios, 5, "one flush per fsync");
    assert_eq!(w.ios, 40 + 5);
    assert_eq!(op(doc, "discard").bytes, 3 * GIB);
    assert_eq!(r.latency["device"].count, 200);
    assert_eq!(doc.self_check.diskstats_match, Some(true));
    assert_eq!(
        doc.self_check.lost_events + doc.self_check.state_collisions,
        0
    );
}

#[test]
fn ebpf_counts_sizes_and_op_split_match_issued_io_and_diskstats() {
    let _g = lock();
    let dev = LoopDev::new(8 * GIB, 0, false);
    let session = start(&opts(&dev, TraceMode::Ebpf)).expect("eBPF tracing loads as root");
    assert_eq!(session.mode(), "ebpf");
    known_io(&dev);
    // An idle second at the end: its depth must be back at zero (no leaked in-flight count).
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let doc = session.stop().unwrap();
    assert_eq!(doc.devices.len(), 1);
    assert_eq!(doc.devices[0].name, dev.name);

    assert_known_io_counted(&doc);
    let r = op(&doc, "read");
    assert_eq!(r.size_hist.len(), 1);
    assert_eq!(
        (
            r.size_hist[0].lower,
            r.size_hist[0].upper,
            r.size_hist[0].count
        ),
        (0, 4096, 200)
    );

    let w = op(&doc, "write");
    let w512 = w
        .size_hist
        .iter()
        .find(|b| b.upper == 512 * KIB)
        .expect("a 508–512 KiB bucket");
    assert_eq!(w512.count, 40);
    assert_eq!(doc.dominant_band("read").unwrap().label, "100% 0–4 KiB");
    assert_eq!(
        doc.devices[0].dominant_band("write").unwrap().label,
        format!("{:.0}% 508–512 KiB", 4000.0 / 45.0)
    );

    let d = op(&doc, "discard");
    assert!(
        d.ios >= 1 && d.size_hist.iter().all(|b| b.lower >= 2 * GIB),
        "{:?}",
        d.size_hist
    );
    assert_eq!(doc.dominant_band("discard").unwrap().label, "100% > 2 GiB");

    for k in &doc.devices[0].diskstats_check {
        assert_eq!(
            (k.tracer_ios, k.tracer_sectors),
            (k.diskstats_ios, k.diskstats_sectors),
            "{k:?}"
        );
    }
    assert_eq!(doc.self_check.recursion_misses, 0);

    // Latency and the per-second series exist and add up to the totals.
    assert!(
        r.latency["device"].p99_ns > 0 && r.latency["device"].p99_ns <= r.latency["device"].max_ns
    );
    let secs = &doc.devices[0].seconds;
    assert!(secs.windows(2).all(|p| p[1].unix_ms == p[0].unix_ms + 1000));
    assert_eq!(secs.iter().map(|s| s.ops["read"].ios).sum::<u64>(), 200);
    assert_eq!(
        secs.iter().map(|s| s.ops["discard"].bytes).sum::<u64>(),
        3 * GIB
    );
    let mix = doc.op_mix();
    let rd = mix.iter().find(|m| m.op == "read").unwrap();
    assert!((rd.pct_ios - 100.0 * 200.0 / (250 + d.ios) as f64).abs() < 1e-9);
    // Everything traced left the device again: the depth ends at zero.
    assert_eq!(
        secs.last().unwrap().qd_max.unwrap_or(0),
        0,
        "{:?}",
        secs.last()
    );
}

/// The raw_tp twins (probe reads, for kernels where tp_btf does not load) count the known
/// workload exactly as the tp_btf programs do; forced here, where tp_btf would load.
#[test]
fn the_raw_tp_twins_count_the_known_io_exactly() {
    let _g = lock();
    let dev = LoopDev::new(8 * GIB, 0, false);
    std::env::set_var("IODIG_TRACER_FLAVOUR", "raw_tp");
    let session = start(&opts(&dev, TraceMode::Ebpf));
    std::env::remove_var("IODIG_TRACER_FLAVOUR");
    let session = session.expect("raw_tp programs load as root");
    known_io(&dev);
    let doc = session.stop().unwrap();
    assert_eq!(doc.attach.as_deref(), Some("raw_tp"));
    assert_known_io_counted(&doc);
    assert_eq!(doc.self_check.programs.len(), expected_progs());
    if iodig_iotrace::attribution_available() {
        assert_eq!(doc.self_check.attribution_match, Some(true));
    }
}

#[test]
fn max_queue_depth_reaches_the_ios_held_in_flight() {
    let _g = lock();
    const N: usize = 32;
    // Real data behind the loop device and direct IO to its backing file: each read goes to the
    // VM's disk, so the 32 requests issued from one io_submit plug are all in flight together.
    let dev = LoopDev::new(256 * MIB, 64 * MIB, true);
    let session = start(&opts(&dev, TraceMode::Ebpf)).unwrap();
    let f = dev.open_direct();
    let done = aio_read_batches(&f, N, 20, 64 * MIB);
    let doc = session.stop().unwrap();
    let secs = &doc.devices[0].seconds;
    let max = secs.iter().filter_map(|s| s.qd_max).max().unwrap();
    let sc = &doc.self_check;
    assert!(
        max >= N as u64,
        "max queue depth {max} < {N} in flight: {sc:?}"
    );
    assert!(
        max <= N as u64,
        "max queue depth {max} > the {N} IOs ever in flight: {sc:?}"
    );
    assert_eq!(op(&doc, "read").ios, done as u64, "{sc:?}");
    let mean = secs.iter().filter_map(|s| s.qd_mean).fold(0.0, f64::max);
    assert!(mean > 0.0 && mean <= N as f64, "time-weighted mean {mean}");
}

/// An I/O scheduler on a loop device, put back to `none` on drop: the loop device outlives
/// `losetup -d` and would keep it for whoever attaches it next.
struct Scheduler(String);

impl Scheduler {
    fn set(dev: &LoopDev, name: &str) -> Scheduler {
        let path = format!("/sys/block/{}/queue/scheduler", dev.name);
        std::fs::write(&path, name).unwrap_or_else(|e| panic!("scheduler {name} on {}: {e}; this test needs it in the kernel (modprobe mq-deadline)", dev.name));
        Scheduler(path)
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, "none");
    }
}

/// Through a scheduler, with 32 requests waiting at once: every timed request gets exactly one
/// OS-time sample (allocation → issue), and per request OS time + device time = total time, so
/// the three histograms' bucket bounds on the sums must overlap.
#[test]
fn os_time_and_device_time_add_up_to_each_requests_total_through_a_scheduler() {
    let _g = lock();
    // Buffered loop device over cached data: completions come from the loop worker, not from
    // the VM disk's interrupts.
    let dev = LoopDev::new(256 * MIB, 64 * MIB, false);
    let _sched = Scheduler::set(&dev, "mq-deadline");
    let session = start(&opts(&dev, TraceMode::Ebpf)).unwrap();
    let f = dev.open_direct();
    let buf = AlignedBuf::new(64 * KIB as usize);
    reads_then_writes(&f, &buf, 128 * MIB, 128 * KIB);
    aio_read_batches(&f, 32, 10, 64 * MIB);
    let doc = session.stop().unwrap();
    let (r, w) = (op(&doc, "read"), op(&doc, "write"));
    assert!(r.ios >= 100, "{}", r.ios);
    let sc = &doc.self_check;
    for (name, o) in [("read", r), ("write", w)] {
        let (queue, device, total) = (
            &o.latency["queue"],
            &o.latency["device"],
            &o.latency["total"],
        );
        assert_eq!(
            (queue.count, device.count),
            (o.ios, o.ios),
            "{name}: {sc:?}"
        );
        let (q, d, t) = (sum_bounds(queue), sum_bounds(device), sum_bounds(total));
        assert!(
            q.0 + d.0 <= t.1 && t.0 <= q.1 + d.1,
            "{name}: OS + device time {:?} ns against total {t:?} ns",
            (q.0 + d.0, q.1 + d.1)
        );
    }
    assert_eq!(w.ios, 10);
    assert_eq!(sc.state_collisions, 0);
    assert_eq!(sc.diskstats_match, Some(true));
}

/// Lower and upper bounds of the sum of a latency histogram's samples, in ns.
fn sum_bounds(l: &iodig_model::trace::Latency) -> (u64, u64) {
    l.buckets.iter().fold((0, 0), |(lo, hi), b| {
        (lo + b.lower * b.count, hi + b.upper * b.count)
    })
}

/// As many whole disks as the tracer takes (16) at once, in eBPF mode: the programs must pass
/// the verifier whatever the number of devices (until 2026-11-24 two were already too many:
/// every program was verified once per device, past the kernel's limit, and the trace fell
/// back to diskstats), and IO on the first and the last is counted on each exactly.
#[test]
fn sixteen_devices_trace_at_once_and_each_gets_exactly_its_io() {
    let _g = lock();
    let devs: Vec<LoopDev> = (0..iodig_iotrace::MAX_DEVS)
        .map(|_| LoopDev::new(64 * MIB, 0, false))
        .collect();
    let session = start(&TraceOptions {
        mode: TraceMode::Ebpf,
        devices: devs.iter().map(|d| d.path.clone()).collect(),
        slot_ms: 100,
        events_file: None,
        live: None,
        live_histograms: false,
    })
    .expect("eBPF tracing loads as root");
    assert_eq!(session.mode(), "ebpf", "sixteen devices load in eBPF mode");
    let buf = AlignedBuf::new(4096);
    let reads = |dev: &LoopDev, n: u64| {
        let f = dev.open_direct();
        for i in 0..n {
            pread_direct(&f, &buf, 4096, i * 8192);
        }
    };
    reads(&devs[0], 10);
    reads(&devs[15], 30);
    let doc = session.stop().unwrap();
    assert_eq!(doc.devices.len(), devs.len());
    for (i, dev) in devs.iter().enumerate() {
        let d = doc.devices.iter().find(|d| d.name == dev.name).unwrap();
        let want = match i {
            0 => 10,
            15 => 30,
            _ => 0,
        };
        let got = d.ops.get("read").map_or(0, |o| o.ios);
        assert_eq!(got, want, "reads on {} (device {i})", dev.name);
        for k in &d.diskstats_check {
            assert_eq!(k.tracer_ios, k.diskstats_ios, "{}: {k:?}", dev.name);
        }
    }
    assert_eq!(doc.self_check.diskstats_match, Some(true));
}

#[test]
fn diskstats_fallback_reports_the_same_io_counts() {
    let _g = lock();
    let dev = LoopDev::new(GIB, 0, false);
    let session = start(&opts(&dev, TraceMode::Diskstats)).unwrap();
    assert_eq!(session.mode(), "diskstats");
    let f = dev.open_direct();
    let buf = AlignedBuf::new(64 * KIB as usize);
    reads_then_writes(&f, &buf, 256 * MIB, 64 * KIB);
    std::thread::sleep(std::time::Duration::from_millis(250));
    let doc = session.stop().unwrap();
    assert_eq!(doc.mode, "diskstats");
    assert!(!doc.histograms);
    assert_eq!(
        (op(&doc, "read").ios, op(&doc, "read").bytes),
        (100, 100 * 4096)
    );
    assert_eq!(
        (op(&doc, "write").ios, op(&doc, "write").bytes),
        (10, 10 * 64 * KIB)
    );
    let secs = &doc.devices[0].seconds;
    assert_eq!(secs.iter().map(|s| s.ops["read"].ios).sum::<u64>(), 100);
    let busiest = secs
        .iter()
        .map(|s| s.ops["write"].avg_size_bytes.unwrap_or(0.0))
        .fold(0.0, f64::max);
    assert_eq!(busiest, 65536.0);
    assert!(secs
        .iter()
        .any(|s| s.util_pct.is_some() && s.qd_mean.is_some()));
}

/// Reads and writes spread over about three seconds, so the live feed has whole seconds to
/// send before the trace stops.
fn io_over_three_seconds(dev: &LoopDev) {
    let f = dev.open_direct();
    let buf = AlignedBuf::new(64 * KIB as usize);
    for round in 0..6u64 {
        reads_then_writes(&f, &buf, 256 * MIB + round * MIB, 64 * KIB);
        std::thread::sleep(std::time::Duration::from_millis(450));
    }
}

#[test]
fn the_live_feed_sends_each_second_as_the_trace_will_hold_it() {
    let _g = lock();
    let dev = LoopDev::new(GIB, 0, false);
    let (tx, rx) = std::sync::mpsc::channel();
    let session = start(&TraceOptions {
        live: Some(tx),
        ..opts(&dev, TraceMode::Ebpf)
    })
    .expect("eBPF tracing loads as root");
    io_over_three_seconds(&dev);
    let before_stop: Vec<_> = rx.try_iter().collect();
    assert!(
        !before_stop.is_empty(),
        "whole seconds are sent while tracing, not only at stop"
    );
    let doc = session.stop().unwrap();
    let mut live: Vec<_> = before_stop;
    live.extend(rx.try_iter());
    let traced = &doc.devices[0];
    let seconds: Vec<_> = live
        .iter()
        .map(|s| {
            assert_eq!(s.devices.len(), 1, "one device asked for, one sent");
            assert_eq!(s.devices[0].name, dev.name);
            s.devices[0].second.clone()
        })
        .collect();
    assert_eq!(
        seconds, traced.seconds,
        "every second of trace.json, sent once, in order, with the same figures"
    );
    assert_eq!(seconds.iter().map(|s| s.ops["read"].ios).sum::<u64>(), 600);
    assert!(
        live.iter().all(|s| s.so_far.is_none()),
        "no histograms unless asked for"
    );
    if let Some(a) = &doc.self_check.attribution {
        for op in ["read", "write"] {
            let by_rows: u64 = a
                .rows
                .iter()
                .filter(|r| r.device == dev.name && r.op == op)
                .flat_map(|r| r.seconds.iter().map(|s| s.ios))
                .sum();
            let by_live: u64 = live
                .iter()
                .flat_map(|s| s.devices[0].classes.values())
                .filter_map(|ops| ops.get(op).map(|v| v.0))
                .sum();
            assert_eq!(by_live, by_rows, "{op}: IO by class, live and in the rows");
        }
    }
}

#[test]
fn the_live_feed_carries_the_histograms_so_far_when_asked() {
    let _g = lock();
    let dev = LoopDev::new(GIB, 0, false);
    let (tx, rx) = std::sync::mpsc::channel();
    let session = start(&TraceOptions {
        live: Some(tx),
        live_histograms: true,
        ..opts(&dev, TraceMode::Ebpf)
    })
    .expect("eBPF tracing loads as root");
    io_over_three_seconds(&dev);
    let mut live: Vec<_> = rx.try_iter().collect();
    let mid_trace = live.iter().filter(|s| s.so_far.is_some()).count();
    assert!(mid_trace >= 1, "sent while tracing, every 2 s");
    let doc = session.stop().unwrap();
    live.extend(rx.try_iter());
    let so_far: Vec<_> = live.iter().filter_map(|s| s.so_far.as_ref()).collect();
    assert!(
        so_far.len() <= live.len().div_ceil(2) + 1,
        "every 2 s, not every second: {} of {} seconds",
        so_far.len(),
        live.len()
    );
    let reads = |f: &iodig_model::trace::SoFar| {
        f.devices
            .iter()
            .find(|d| d.name == dev.name)
            .and_then(|d| d.ops.get("read"))
            .map_or(0, |o| o.ios)
    };
    assert!(
        so_far
            .windows(2)
            .all(|w| reads(w[0]) <= reads(w[1]) && w[0].through_unix_ms <= w[1].through_unix_ms),
        "they only grow"
    );
    // The last comes with the last second, read after the probes are gone: the whole trace's
    // figures, exactly as trace.json holds them (its queue time summed over the same seconds).
    let last = so_far.last().expect("the last second carries them");
    assert_eq!(last.devices.len(), 1);
    let traced = &doc.devices[0];
    for (op, o) in &last.devices[0].ops {
        assert_eq!(o, &traced.ops[op], "{op}: as trace.json holds it");
    }
    assert_eq!(last.devices[0].ops["read"].ios, 600);
    assert_eq!(
        last.devices[0].ops["read"]
            .size_hist
            .iter()
            .map(|b| b.count)
            .sum::<u64>(),
        600
    );
    assert!(last.devices[0].ops["write"].latency.contains_key("device"));
}

#[test]
fn the_live_feed_runs_in_diskstats_mode_too() {
    let _g = lock();
    let dev = LoopDev::new(GIB, 0, false);
    let (tx, rx) = std::sync::mpsc::channel();
    let session = start(&TraceOptions {
        live: Some(tx),
        ..opts(&dev, TraceMode::Diskstats)
    })
    .unwrap();
    io_over_three_seconds(&dev);
    let mut live: Vec<_> = rx.try_iter().collect();
    assert!(!live.is_empty(), "seconds are sent while sampling");
    let doc = session.stop().unwrap();
    // What was sent while sampling and the rest at stop add up to the trace.
    live.extend(rx.try_iter());
    let sum = |op: &str| -> u64 {
        live.iter()
            .flat_map(|s| s.devices.iter())
            .map(|d| d.second.ops[op].ios)
            .sum()
    };
    assert_eq!(sum("read"), op(&doc, "read").ios);
    assert_eq!(sum("write"), op(&doc, "write").ios);
    assert_eq!(sum("read"), 600);
}

#[test]
fn nothing_stays_attached_after_stop_or_drop() {
    let _g = lock();
    let dev = LoopDev::new(GIB, 0, false);
    let before = bpf_objects().1.len();
    let s = start(&opts(&dev, TraceMode::Ebpf)).unwrap();
    let n = expected_progs();
    assert_eq!(
        our_progs().len(),
        n,
        "{n} programs while tracing: {:?}",
        our_progs()
    );
    assert_eq!(bpf_objects().1.len(), before + n, "{n} links while tracing");
    s.stop().unwrap();
    assert_eq!(
        our_progs_after_release(),
        Vec::<String>::new(),
        "left after stop"
    );
    assert_eq!(bpf_objects().1.len(), before, "links left after stop");
    drop(start(&opts(&dev, TraceMode::Ebpf)).unwrap());
    assert_eq!(
        our_progs_after_release(),
        Vec::<String>::new(),
        "left after drop"
    );
}

/// Child side of the kill -9 test: trace until killed.
fn kill_child() {
    let dev = std::env::var("IODIG_KILL_CHILD_DEV").unwrap();
    let _s = start(&TraceOptions {
        mode: TraceMode::Ebpf,
        devices: vec![dev],
        ..Default::default()
    })
    .unwrap();
    println!("tracing");
    std::thread::sleep(std::time::Duration::from_secs(60));
}

#[test]
fn kill_9_of_a_tracing_process_leaves_nothing_attached() {
    if std::env::var("IODIG_KILL_CHILD_DEV").is_ok() {
        return kill_child();
    }
    let _g = lock();
    let dev = LoopDev::new(GIB, 0, false);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "kill_9_of_a_tracing_process_leaves_nothing_attached",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("IODIG_KILL_CHILD_DEV", &dev.path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("tracing") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0,
            "child exited before tracing"
        );
    }
    assert_eq!(
        our_progs().len(),
        expected_progs(),
        "child's programs visible: {:?}",
        our_progs()
    );
    // SAFETY: kill(2) on our own child's pid with SIGKILL.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGKILL) }, 0);
    child.wait().unwrap();
    assert_eq!(
        our_progs_after_release(),
        Vec::<String>::new(),
        "left after kill -9"
    );
}
