//! Drives the sampler against the real /proc of this machine with real processes, files and
//! sockets, and checks the figures move the way the load says they must.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use iodig_sysstat::sys::{ProcState, SysDoc};
use iodig_sysstat::{Sampler, SysOptions};

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn opts(interval_ms: u64, pids: Vec<(String, u32)>, per_cpu: bool) -> SysOptions {
    SysOptions {
        interval: Duration::from_millis(interval_ms),
        pids,
        per_cpu,
        ..Default::default()
    }
}

/// Kills and reaps the child even when an assertion fails, so no busy loop outlives the test.
struct Reaped(Child);
impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Samples that cover (nearly) a whole interval: the partial first and last ones are noisier.
fn full(doc: &SysDoc) -> impl Iterator<Item = &iodig_sysstat::sys::SysSample> {
    let iv = doc.interval_ms as f64 / 1000.0;
    doc.samples.iter().filter(move |s| s.secs >= iv * 0.8)
}

#[test]
fn busy_child_shows_high_cpu_and_resident_memory() {
    // Builds run beside the tests on a small machine, and with autogroup scheduling plain nice
    // only ranks tasks inside one session. So the child takes a session of its own (setsid
    // execs in place: the spawned pid stays the spinning shell) and raises that session's
    // weight; unprivileged, both writes fail and it just spins.
    let script =
        "echo -20 > /proc/$$/autogroup 2>/dev/null; renice -n -20 $$ >/dev/null 2>&1; while :; do :; done";
    let child = Reaped(
        Command::new("setsid")
            .args(["sh", "-c", script])
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    // Let setsid exec the shell first, so the name read at start is the shell's.
    sleep(Duration::from_millis(100));
    let s = Sampler::start(opts(500, vec![("busy".into(), pid)], true)).unwrap();
    sleep(Duration::from_millis(2300));
    let doc = s.stop();
    drop(child);

    assert_eq!(doc.processes.len(), 1);
    assert_eq!(doc.processes[0].comm, "sh");
    assert_eq!(doc.processes[0].state, ProcState::Running);
    let samples: Vec<_> = full(&doc).collect();
    assert!(
        samples.len() >= 2,
        "want 2+ full samples, got {:?}",
        doc.samples
    );
    let mut cpu = 0.0;
    for s in &samples {
        let st = s.procs[0].stats.expect("busy child readable");
        assert!(st.rss_bytes > 0, "{st:?}");
        assert!(st.threads >= 1);
        cpu += st.cpu_pct();
        // The whole machine is at least as busy as one spinning CPU out of all of them.
        assert!(
            s.cpu.busy() > 100.0 / f64::from(doc.host.cpus) * 0.5,
            "{:?}",
            s.cpu
        );
        assert_eq!(s.per_cpu.len(), doc.host.cpus as usize);
        for c in &s.per_cpu {
            let sum = c.user + c.nice + c.system + c.iowait + c.irq + c.softirq + c.steal + c.idle;
            // Each share is rounded to 0.001, so the sum may be off by a few thousandths.
            assert!((sum - 100.0).abs() < 0.01 || sum == 0.0, "{c:?}");
        }
    }
    let mean = cpu / samples.len() as f64;
    assert!(mean > 50.0, "busy loop at {mean:.1}% CPU: {samples:?}");
    assert!(
        mean < 100.0 * 1.2,
        "one thread cannot use more than one CPU: {mean:.1}%"
    );
}

#[test]
fn dirty_pages_rise_after_a_buffered_write() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let me = std::process::id();
    let s = Sampler::start(opts(200, vec![("self".into(), me)], false)).unwrap();
    sleep(Duration::from_millis(450));
    let written_at = unix_ms();
    const MIB: u64 = 1 << 20;
    let mut f = std::fs::File::create(dir.path().join("dirty")).unwrap();
    let buf = vec![0xa5u8; MIB as usize];
    for _ in 0..256 {
        f.write_all(&buf).unwrap();
    }
    sleep(Duration::from_millis(500));
    let doc = s.stop();
    // Unlinking drops the dirty pages without writing them back: the test costs no disk IO.
    drop(f);
    drop(dir);

    let baseline = doc
        .samples
        .iter()
        .find(|s| s.unix_ms < written_at)
        .expect("sample before write");
    let peak = doc
        .samples
        .iter()
        .filter(|s| s.unix_ms > written_at)
        .map(|s| s.mem.dirty_bytes)
        .max();
    let peak = peak.expect("sample after write");
    // 256 MiB dirtied; other writers may flush at the same time, so ask for a quarter of it.
    assert!(
        peak > baseline.mem.dirty_bytes + 64 * MIB,
        "dirty {} -> {} bytes",
        baseline.mem.dirty_bytes,
        peak
    );
    assert!(baseline.mem.total_bytes == doc.host.mem_total_bytes && doc.host.mem_total_bytes > 0);
    // This process dirtied those pages, so its storage write rate must account for them.
    let written: f64 = doc
        .samples
        .iter()
        .filter_map(|s| {
            s.procs[0]
                .stats
                .and_then(|st| st.io)
                .map(|io| io.write_bytes_per_s * s.secs)
        })
        .sum();
    assert!(
        written >= 200.0 * MIB as f64,
        "process write_bytes saw {written} bytes"
    );
}

#[test]
fn samples_are_monotonic_aligned_and_stop_is_prompt() {
    let start_ms = unix_ms();
    let s = Sampler::start(opts(1000, vec![], false)).unwrap();
    // Stop 300 ms after a whole second, at least two boundaries in, so the final partial sample
    // has a known length and the full ones are on whole seconds.
    let stop_at = ((start_ms + 1600) / 1000 + 1) * 1000 + 300;
    sleep(Duration::from_millis(stop_at - unix_ms()));
    let t = Instant::now();
    let doc = s.stop();
    let took = t.elapsed();
    assert!(took < Duration::from_millis(200), "stop took {took:?}");

    let n = doc.samples.len();
    assert!(n >= 3, "{:?}", doc.samples);
    let mut prev = doc.started_unix_ms;
    for (i, s) in doc.samples.iter().enumerate() {
        assert!(s.unix_ms > prev, "not increasing at {i}: {:?}", doc.samples);
        assert!(s.secs > 0.0);
        prev = s.unix_ms;
        if i + 1 < n {
            // Woken at the boundary; allow for scheduling delay on a loaded machine.
            assert!(
                s.unix_ms % 1000 < 100,
                "sample {i} at {} is not on a whole second",
                s.unix_ms
            );
        }
        if i > 0 && i + 1 < n {
            assert!((s.secs - 1.0).abs() < 0.1, "interval {i} lasted {}", s.secs);
        }
    }
    let last = &doc.samples[n - 1];
    assert!(
        last.secs > 0.2 && last.secs < 0.5,
        "final partial sample lasted {}",
        last.secs
    );
    assert!(doc.aligned);
    assert_eq!(doc.ended_unix_ms, last.unix_ms);
    let covered: f64 = doc.samples.iter().map(|s| s.secs).sum();
    let wall = (doc.ended_unix_ms - doc.started_unix_ms) as f64 / 1000.0;
    assert!(
        (covered - wall).abs() < 0.05,
        "samples cover {covered} s of {wall} s"
    );
}

#[test]
fn exited_process_is_marked_and_sampling_goes_on() {
    let mut short = Command::new("sleep").arg("0.5").spawn().unwrap();
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let pids = vec![("short".into(), short.id()), ("gone".into(), gone_pid)];
    let s = Sampler::start(opts(200, pids, false)).unwrap();
    sleep(Duration::from_millis(700));
    // Left a zombie for a while first: a zombie is exited too.
    sleep(Duration::from_millis(300));
    short.wait().unwrap();
    sleep(Duration::from_millis(300));
    let doc = s.stop();

    assert_eq!(
        doc.processes[0].state,
        ProcState::Exited,
        "{:?}",
        doc.processes
    );
    let exited_at = doc.processes[0].exited_unix_ms.expect("exit time");
    assert_eq!(doc.processes[1].state, ProcState::Missing);
    assert!(
        doc.notes.iter().any(|n| n.contains("gone")),
        "{:?}",
        doc.notes
    );
    let states: Vec<_> = doc.samples.iter().map(|s| s.procs[0].state).collect();
    assert_eq!(states[0], ProcState::Running, "{states:?}");
    assert!(doc.samples[0].procs[0].stats.is_some());
    let after: Vec<_> = doc
        .samples
        .iter()
        .filter(|s| s.unix_ms >= exited_at)
        .collect();
    assert!(
        after.len() >= 3,
        "sampling must go on after the exit: {states:?}"
    );
    for s in after {
        assert_eq!(s.procs[0].state, ProcState::Exited);
        assert!(s.procs[0].stats.is_none());
        assert_eq!(s.procs[1].state, ProcState::Missing);
    }
}

/// A `sleep` whose command line no other process has, standing in for a database node;
/// returned once it runs that command line (until its exec it shows the test's).
fn node(tag: &str) -> Reaped {
    let child = Reaped(Command::new("sleep").arg(tag).spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !iodig_sysstat::command_line(child.0.id()).is_some_and(|c| c.starts_with(b"sleep\0")) {
        assert!(Instant::now() < deadline, "sleep did not start");
        sleep(Duration::from_millis(5));
    }
    child
}

#[test]
fn a_process_killed_and_started_again_is_sampled_on_under_its_new_pid() {
    let tag = format!("1000.{}77", std::process::id());
    let mut first = node(&tag);
    let first_pid = first.0.id();
    let follow = |pid| SysOptions {
        follow_restarts: true,
        ..opts(100, vec![("node".into(), pid)], false)
    };
    let s = Sampler::start(follow(first_pid)).unwrap();
    // Unfollowed, the same events leave the process exited: what the option changes.
    let plain = Sampler::start(opts(100, vec![("node".into(), first_pid)], false)).unwrap();
    sleep(Duration::from_millis(350));
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    sleep(Duration::from_millis(350));
    // Another process with another command line comes and is not taken for it.
    let _other = node(&format!("{tag}1"));
    sleep(Duration::from_millis(250));
    let again = node(&tag);
    sleep(Duration::from_millis(450));
    let doc = s.stop();
    let unfollowed = plain.stop();

    let p = &doc.processes[0];
    assert_eq!(p.pid, first_pid);
    assert_eq!(p.state, ProcState::Running, "{p:?}");
    let exited_at = p.exited_unix_ms.expect("the kill was seen");
    assert_eq!(p.restarts.len(), 1, "{p:?}");
    let back = &p.restarts[0];
    assert_eq!(back.pid, again.0.id());
    assert!(back.unix_ms >= exited_at + 400, "{p:?}");
    let by_pid = |pid: u32| {
        doc.samples
            .iter()
            .filter(move |s| s.procs[0].pid == pid && s.procs[0].stats.is_some())
            .count()
    };
    assert!(by_pid(first_pid) >= 2, "{:?}", doc.samples);
    assert!(
        by_pid(again.0.id()) >= 2,
        "sampled under the new pid after the restart: {:?}",
        doc.samples
    );
    for s in doc.samples.iter().filter(|s| s.unix_ms >= exited_at) {
        let state = s.procs[0].state;
        if s.unix_ms < back.unix_ms {
            assert_eq!(state, ProcState::Exited, "{s:?}");
        } else {
            assert_eq!(state, ProcState::Running, "{s:?}");
            // The interval it was found in spans two processes: no figures for it.
            assert_eq!(
                s.procs[0].stats.is_none(),
                s.unix_ms == back.unix_ms,
                "{s:?}"
            );
        }
    }
    let q = &unfollowed.processes[0];
    assert_eq!((q.state, q.restarts.len()), (ProcState::Exited, 0), "{q:?}");
}

#[test]
fn loopback_traffic_is_counted_apart() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let s = Sampler::start(opts(200, vec![], false)).unwrap();
    const TOTAL: usize = 32 << 20;
    let reader = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0;
        while n < TOTAL {
            n += c.read(&mut buf).unwrap();
        }
    });
    let mut c = TcpStream::connect(addr).unwrap();
    let chunk = vec![1u8; 1 << 20];
    for _ in 0..32 {
        c.write_all(&chunk).unwrap();
    }
    reader.join().unwrap();
    sleep(Duration::from_millis(250));
    let doc = s.stop();

    let rx: f64 = doc
        .samples
        .iter()
        .map(|s| s.net.lo.rx_bytes_per_s * s.secs)
        .sum();
    let tx: f64 = doc
        .samples
        .iter()
        .map(|s| s.net.lo.tx_bytes_per_s * s.secs)
        .sum();
    assert!(
        rx >= TOTAL as f64 && tx >= TOTAL as f64,
        "lo saw rx {rx} tx {tx}"
    );
    let pkts: f64 = doc
        .samples
        .iter()
        .map(|s| s.net.lo.rx_packets_per_s * s.secs)
        .sum();
    assert!(pkts > 0.0);
    assert!(!doc.host.net_interfaces.iter().any(|n| n == "lo"));
}

#[test]
fn document_round_trips_through_json() {
    let s = Sampler::start(opts(100, vec![("self".into(), std::process::id())], true)).unwrap();
    sleep(Duration::from_millis(250));
    let doc = s.stop();
    assert!(!doc.samples.is_empty());
    let text = serde_json::to_string(&doc).unwrap();
    let back: SysDoc = serde_json::from_str(&text).unwrap();
    assert_eq!(back, doc);
    assert!(doc.host.clock_ticks_per_s > 0 && doc.host.page_size_bytes > 0);
    let sum = doc.summary();
    assert_eq!(sum.procs.len(), 1);
    assert!(sum.procs[0].rss_bytes.max > 0.0);
}

#[test]
fn too_short_interval_is_refused() {
    let err = Sampler::start(opts(1, vec![], false))
        .err()
        .expect("1 ms must be refused");
    assert!(format!("{err:#}").contains("too short"));
}

#[test]
fn a_fed_sampler_sends_each_sample_as_it_is_taken() {
    let (tx, rx) = std::sync::mpsc::channel();
    let s = Sampler::start_with_live(opts(200, vec![], false), Some(tx)).unwrap();
    assert!(s.header().samples.is_empty());
    assert!(s.header().host.cpus > 0, "{:?}", s.header().host);
    // The first sample arrives while the sampler runs, not at stop.
    let first = rx
        .recv_timeout(Duration::from_secs(2))
        .expect("no sample sent while sampling");
    sleep(Duration::from_millis(500));
    let doc = s.stop();
    let fed: Vec<_> = std::iter::once(first).chain(rx.try_iter()).collect();
    assert_eq!(
        fed, doc.samples,
        "the feed holds every sample, in order, once"
    );
}

#[test]
fn spinners_sharing_one_cpu_wait_on_its_run_queue() {
    // Three spinning shells pinned to CPU 0 share it: each runs about a third of the time and
    // waits runnable the rest, which the scheduler counts as the sampled one's run delay and
    // as CPU pressure.
    let spin = || {
        Reaped(
            Command::new("taskset")
                .args(["-c", "0", "sh", "-c", "while :; do :; done"])
                .spawn()
                .unwrap(),
        )
    };
    let (a, _b, _c) = (spin(), spin(), spin());
    sleep(Duration::from_millis(100));
    let s = Sampler::start(opts(1000, vec![("spinner".into(), a.0.id())], false)).unwrap();
    sleep(Duration::from_millis(3200));
    let doc = s.stop();
    let samples: Vec<_> = full(&doc).collect();
    assert!(samples.len() >= 2, "{:?}", doc.samples);
    for s in &samples {
        let st = s.procs[0].stats.expect("spinner readable");
        let rq = st.run_queue.expect("this kernel keeps schedstats");
        // About 667 ms a second; other work on a shared machine only adds to it.
        assert!(rq.wait_ms > 300.0, "{rq:?} in {s:?}");
        assert!(rq.wait_ms <= s.secs * 1000.0 * 1.05, "one thread, {rq:?}");
        assert_eq!(rq.threads_waiting, 1, "{rq:?}");
        assert!((rq.max_thread_ms - rq.wait_ms).abs() < 1e-6, "{rq:?}");
        let p = s.pressure.expect("this kernel has PSI");
        assert!(p.cpu_some_ms > 300.0, "{p:?}");
    }
}

#[test]
fn a_probes_running_pause_total_becomes_each_samples_pause_time() {
    let total = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(5_000_000));
    let me = std::process::id();
    let s = Sampler::start(SysOptions {
        pause_totals: vec![(me, std::sync::Arc::clone(&total))],
        ..opts(100, vec![("me".into(), me)], false)
    })
    .unwrap();
    sleep(Duration::from_millis(250));
    total.fetch_add(212_000, std::sync::atomic::Ordering::Relaxed);
    sleep(Duration::from_millis(250));
    let doc = s.stop();
    let pauses: Vec<f64> = doc
        .samples
        .iter()
        .filter_map(|x| x.procs[0].stats?.jvm_pause_ms)
        .collect();
    assert!(pauses.len() >= 3, "every sample has it: {pauses:?}");
    // The total before sampling started is not a pause of the window.
    assert!(
        (pauses.iter().sum::<f64>() - 212.0).abs() < 1e-9,
        "{pauses:?}"
    );
    assert_eq!(pauses.iter().filter(|p| **p > 0.0).count(), 1, "{pauses:?}");
}
