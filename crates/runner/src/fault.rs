//! Fault schedules (`--fault AT:ACTION:TARGET`, `faults = [...]` in an experiment file): at an
//! offset into every run step, kill, pause, stop or restart a database node, cap the device
//! under the database, or make the disk under embedded RocksDB slow, failing or full, while the
//! workload runs, and put each fault on the step's time line as an event next to the client's
//! errors, the IO and the latency. What a fault does is the deployment's (`FaultHandler`);
//! parsing and timing are here.

pub use iodig_faultdisk::Direction;
pub use iodig_sysstat::cgroup::IoLimit;

use iodig_model::duration::parse_duration;
use iodig_model::events::DbEvent;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What to do to the target.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAction {
    /// SIGKILL, as a crash.
    Kill,
    /// SIGSTOP for the duration, then SIGCONT.
    Pause(Duration),
    /// A graceful stop (SIGTERM, drain).
    Stop,
    /// Start a node that is down again.
    Restart,
    /// Cap the block IO of the database (its process or node) on its data device, each
    /// direction, until `uncap` or the step's end.
    Cap(IoLimit),
    /// Lift a cap.
    Uncap,
    /// Add a delay to every IO of the direction on the faulty disk.
    Slow(Duration, Direction),
    /// Fail every IO of the direction on the faulty disk with EIO.
    Fail(Direction),
    /// Fill the file system on the faulty disk.
    Fill,
    /// Lift every slow, fail and fill on the faulty disk.
    Heal,
}

impl FaultAction {
    /// Short form with its parameter normalised, for messages: `kill`, `pause=3000ms`,
    /// `cap=5000000B/s`, `cap=200iops`, `slow-reads=50ms`, `full`, ….
    pub fn name(&self) -> String {
        match self {
            FaultAction::Kill => "kill".into(),
            FaultAction::Pause(d) => format!("pause={}ms", d.as_millis()),
            FaultAction::Stop => "stop".into(),
            FaultAction::Restart => "restart".into(),
            FaultAction::Cap(IoLimit::BytesPerSec(n)) => format!("cap={n}B/s"),
            FaultAction::Cap(IoLimit::IosPerSec(n)) => format!("cap={n}iops"),
            FaultAction::Cap(IoLimit::None) | FaultAction::Uncap => "uncap".into(),
            FaultAction::Slow(d, dir) => format!("{}={}ms", slow_name(*dir), d.as_millis()),
            FaultAction::Fail(dir) => fail_name(*dir).into(),
            FaultAction::Fill => "full".into(),
            FaultAction::Heal => "heal".into(),
        }
    }

    /// Whether the fault is on the device under the database rather than on a process.
    pub fn on_device(&self) -> bool {
        !matches!(
            self,
            FaultAction::Kill | FaultAction::Pause(_) | FaultAction::Stop | FaultAction::Restart
        )
    }

    /// Whether the fault needs the disk iodig makes under the database (loop over FUSE), not
    /// only a throttle on the device the data is already on.
    pub fn needs_faulty_disk(&self) -> bool {
        matches!(
            self,
            FaultAction::Slow(..) | FaultAction::Fail(_) | FaultAction::Fill | FaultAction::Heal
        )
    }
}

/// What a cap or uncap did, in the words every fault event uses: "capped at 5.0 MB/s each
/// way", "capped at 200 IOPS each way" or "uncapped".
pub fn cap_done(limit: IoLimit) -> String {
    match limit {
        IoLimit::BytesPerSec(n) => format!("capped at {:.1} MB/s each way", n as f64 / 1e6),
        IoLimit::IosPerSec(n) => format!("capped at {n} IOPS each way"),
        IoLimit::None => "uncapped".into(),
    }
}

fn slow_name(dir: Direction) -> &'static str {
    match dir {
        Direction::Both => "slow",
        Direction::Reads => "slow-reads",
        Direction::Writes => "slow-writes",
    }
}

fn fail_name(dir: Direction) -> &'static str {
    match dir {
        Direction::Both => "fail",
        Direction::Reads => "fail-reads",
        Direction::Writes => "fail-writes",
    }
}

/// `5MB/s`, `512KB/s`, `1GiB/s` (decimal K/M/G, binary Ki/Mi/Gi) or `200iops`.
fn parse_limit(s: &str) -> Result<IoLimit, String> {
    let bad = || {
        format!("the cap {s:?} is not a rate; write e.g. cap=5MB/s, cap=512KiB/s or cap=200iops")
    };
    if let Some(n) = s.strip_suffix("iops") {
        let n: u64 = n.trim().parse().map_err(|_| bad())?;
        return (n > 0).then_some(IoLimit::IosPerSec(n)).ok_or_else(bad);
    }
    let v = s.strip_suffix("/s").ok_or_else(bad)?;
    let bytes = parse_bytes(v).ok_or_else(bad)?;
    (bytes > 0)
        .then_some(IoLimit::BytesPerSec(bytes))
        .ok_or_else(bad)
}

/// `5MB`, `512KiB`, `2GiB`, `100B` (decimal K/M/G, binary Ki/Mi/Gi).
fn parse_bytes(v: &str) -> Option<u64> {
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let num: f64 = num.parse().ok()?;
    let mult = match unit {
        "B" => 1.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some((num * mult) as u64)
}

/// The faulty disk's size (`-p faultdisk.size`, 2 GiB by default): a sparse image, so only what
/// the database writes takes room on the real disk.
pub fn faulty_disk_size(value: Option<&str>) -> Result<u64, String> {
    const MIN: u64 = 64 << 20;
    let Some(v) = value else {
        return Ok(2 << 30);
    };
    match parse_bytes(v.trim()) {
        Some(n) if n >= MIN => Ok(n),
        _ => Err(format!(
            "faultdisk.size={v:?}: give a size of at least 64MiB, e.g. -p faultdisk.size=2GiB"
        )),
    }
}

/// One scheduled fault.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// Offset from the start of the step's measured window.
    pub at: Duration,
    /// What is done.
    pub action: FaultAction,
    /// `nodeN` (the N-th managed or observed node), a node's address or observed host, or
    /// `device` for the device under embedded RocksDB.
    pub target: String,
    /// As written.
    pub spec: String,
}

/// Parses `AT:ACTION:TARGET`: `10s:kill:node2`, `5s:pause=3s:node3`, `30s:restart:node2`,
/// `8s:stop:127.0.0.2`. The error names the part that is wrong and the forms that work.
pub fn parse(spec: &str) -> Result<Fault, String> {
    let forms = "write AT:ACTION:TARGET, e.g. 10s:kill:node2, 5s:pause=3s:node3, 30s:restart:node2, 2s:cap=5MB/s:device, 6s:uncap:device, 3s:slow=50ms:device, 4s:fail-writes:device, 5s:full:device, 8s:heal:device (actions: kill, pause=DURATION, stop, restart, cap=RATE, uncap, slow[-reads|-writes]=DURATION, fail[-reads|-writes], full, heal)";
    let parts: Vec<&str> = spec.trim().splitn(3, ':').collect();
    let [at, action, target] = parts.as_slice() else {
        return Err(format!("--fault {spec:?}: {forms}"));
    };
    let at = parse_duration(at).map_err(|e| format!("--fault {spec:?}: the time {e}; {forms}"))?;
    let action = match action.split_once('=') {
        None if *action == "kill" => FaultAction::Kill,
        None if *action == "stop" => FaultAction::Stop,
        None if *action == "restart" => FaultAction::Restart,
        None if *action == "uncap" => FaultAction::Uncap,
        None if *action == "full" => FaultAction::Fill,
        None if *action == "heal" => FaultAction::Heal,
        None if action.starts_with("fail") => FaultAction::Fail(
            direction(action.trim_start_matches("fail"))
                .ok_or_else(|| format!("--fault {spec:?}: unknown action {action:?}; {forms}"))?,
        ),
        Some((name, d)) if name.starts_with("slow") => {
            let dir = direction(name.trim_start_matches("slow"))
                .ok_or_else(|| format!("--fault {spec:?}: unknown action {name:?}; {forms}"))?;
            let d = parse_duration(d).map_err(|e| format!("--fault {spec:?}: the delay {e}"))?;
            if d.is_zero() {
                return Err(format!(
                    "--fault {spec:?}: a delay of 0 slows nothing; give e.g. slow=50ms, and heal to lift it"
                ));
            }
            FaultAction::Slow(d, dir)
        }
        Some(("cap", rate)) => {
            FaultAction::Cap(parse_limit(rate).map_err(|e| format!("--fault {spec:?}: {e}"))?)
        }
        Some(("pause", d)) => FaultAction::Pause(
            parse_duration(d).map_err(|e| format!("--fault {spec:?}: the pause {e}"))?,
        ),
        _ => {
            return Err(format!(
                "--fault {spec:?}: unknown action {action:?}; {forms}"
            ))
        }
    };
    if target.is_empty() {
        return Err(format!("--fault {spec:?}: no target; {forms}"));
    }
    Ok(Fault {
        at,
        action,
        target: (*target).to_string(),
        spec: spec.trim().to_string(),
    })
}

/// The direction suffix of `slow…` and `fail…`: none, `-reads` or `-writes`.
fn direction(suffix: &str) -> Option<Direction> {
    match suffix {
        "" => Some(Direction::Both),
        "-reads" => Some(Direction::Reads),
        "-writes" => Some(Direction::Writes),
        _ => None,
    }
}

/// Does a fault to a node; returns the node's name and what was done, or why it could not.
pub type FaultHandler = Arc<dyn Fn(&Fault) -> Result<(String, String), String> + Send + Sync>;

/// A step's schedule, running on a thread of its own from the start of measurement.
pub struct FaultRunner {
    cancel: Arc<AtomicBool>,
    thread: JoinHandle<Vec<DbEvent>>,
}

impl FaultRunner {
    /// Starts the schedule now (measurement started): each fault at its offset, in order.
    /// Each fault is told to `live` as it fires (the terminal prints it, timestamped).
    pub fn start(
        faults: &[Fault],
        handler: FaultHandler,
        live: Arc<dyn crate::live::LiveSink>,
    ) -> FaultRunner {
        let cancel = Arc::new(AtomicBool::new(false));
        let mut faults = faults.to_vec();
        faults.sort_by_key(|f| f.at);
        let stop = cancel.clone();
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("iodig-faults".into())
            .spawn(move || {
                let mut events = Vec::new();
                for f in faults {
                    while started.elapsed() < f.at {
                        if stop.load(Ordering::Relaxed) {
                            return events;
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let start = unix_ms();
                    let (node, detail, text) = match handler(&f) {
                        Ok((node, done)) => {
                            let text = format!("fault {}: {node} {done}", f.spec);
                            (node, format!("{}: {done}", f.spec), text)
                        }
                        Err(e) => (
                            f.target.clone(),
                            format!("{}: failed: {e}", f.spec),
                            format!("warning: fault {} failed: {e}", f.spec),
                        ),
                    };
                    live.event(&crate::live::LiveEvent {
                        unix_ms: start,
                        place: node.clone(),
                        kind: "fault".into(),
                        text,
                    });
                    events.push(DbEvent {
                        kind: "fault".into(),
                        start_unix_ms: start,
                        end_unix_ms: Some(unix_ms()),
                        bytes: None,
                        node,
                        detail,
                    });
                }
                events
            })
            .expect("a thread starts");
        FaultRunner { cancel, thread }
    }

    /// The step ended: faults not yet due are dropped (a fault in hand finishes first).
    pub fn finish(self) -> Vec<DbEvent> {
        self.cancel.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_that_work() {
        let f = parse("10s:kill:node2").unwrap();
        assert_eq!(
            (f.at, &f.action, f.target.as_str()),
            (Duration::from_secs(10), &FaultAction::Kill, "node2")
        );
        let f = parse("1.5s:pause=300ms:127.0.0.3").unwrap();
        assert_eq!(f.action, FaultAction::Pause(Duration::from_millis(300)));
        assert_eq!(f.target, "127.0.0.3");
        assert_eq!(
            parse("2m:restart:node1").unwrap().at,
            Duration::from_secs(120)
        );
        assert_eq!(parse("0:stop:node1").unwrap().action, FaultAction::Stop);
        // The same durations as --duration: hours too, at the time and in pause= and slow=.
        let f = parse("1h:kill:node2").unwrap();
        assert_eq!(
            (f.at, f.action),
            (Duration::from_secs(3600), FaultAction::Kill)
        );
        assert_eq!(
            parse("90min:pause=0.5h:node1").unwrap().action,
            FaultAction::Pause(Duration::from_secs(1800))
        );
        let f = parse("2s:cap=5MB/s:device").unwrap();
        assert_eq!(f.action, FaultAction::Cap(IoLimit::BytesPerSec(5_000_000)));
        assert!(f.action.on_device());
        assert_eq!(
            parse("2s:cap=1.5MiB/s:device").unwrap().action,
            FaultAction::Cap(IoLimit::BytesPerSec(1_572_864))
        );
        assert_eq!(
            parse("2s:cap=200iops:node2").unwrap().action,
            FaultAction::Cap(IoLimit::IosPerSec(200))
        );
        assert_eq!(parse("6s:uncap:device").unwrap().action, FaultAction::Uncap);
        let f = parse("3s:slow=50ms:device").unwrap();
        assert_eq!(
            f.action,
            FaultAction::Slow(Duration::from_millis(50), Direction::Both)
        );
        assert!(f.action.needs_faulty_disk() && f.action.on_device());
        assert_eq!(f.action.name(), "slow=50ms");
        assert_eq!(
            parse("3s:slow-reads=0.5s:device").unwrap().action,
            FaultAction::Slow(Duration::from_millis(500), Direction::Reads)
        );
        assert_eq!(
            parse("4s:fail-writes:device").unwrap().action,
            FaultAction::Fail(Direction::Writes)
        );
        assert_eq!(
            parse("4s:fail:device").unwrap().action,
            FaultAction::Fail(Direction::Both)
        );
        assert_eq!(parse("5s:full:device").unwrap().action, FaultAction::Fill);
        assert_eq!(parse("8s:heal:device").unwrap().action, FaultAction::Heal);
        assert!(!FaultAction::Cap(IoLimit::IosPerSec(1)).needs_faulty_disk());
        assert!(!FaultAction::Kill.on_device());
    }

    #[test]
    fn the_faulty_disk_size_is_a_size_of_some_room() {
        assert_eq!(faulty_disk_size(None), Ok(2 << 30));
        assert_eq!(faulty_disk_size(Some("512MiB")), Ok(512 << 20));
        assert_eq!(faulty_disk_size(Some("1GB")), Ok(1_000_000_000));
        for bad in ["1MiB", "big", "12"] {
            let e = faulty_disk_size(Some(bad)).unwrap_err();
            assert!(e.contains("faultdisk.size") && e.contains("64MiB"), "{e}");
        }
    }

    #[test]
    fn bad_faults_name_the_part_that_is_wrong() {
        for (bad, says) in [
            ("kill:node2", "AT:ACTION:TARGET"),
            ("x:kill:node2", "the time"),
            ("5s:explode:node2", "unknown action \"explode\""),
            ("5s:pause=forever:node2", "the pause"),
            ("5s:kill:", "no target"),
            ("5s:cap=fast:device", "cap=5MB/s"),
            ("5s:cap=0iops:device", "not a rate"),
            ("5s:cap=5MB:device", "not a rate"),
            ("5s:slow=0ms:device", "slows nothing"),
            ("5s:slow=fast:device", "the delay"),
            (
                "5s:slow-sideways=5ms:device",
                "unknown action \"slow-sideways\"",
            ),
            ("5s:fail-often:device", "unknown action \"fail-often\""),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.starts_with("--fault"), "{e}");
        }
    }

    #[test]
    fn faults_run_in_order_at_their_offsets_and_undue_ones_are_dropped() {
        let faults = vec![
            parse("60ms:kill:b").unwrap(),
            parse("10ms:kill:a").unwrap(),
            parse("10s:kill:c").unwrap(),
        ];
        let handler: FaultHandler = Arc::new(|f: &Fault| Ok((f.target.clone(), "done".into())));
        let r = FaultRunner::start(&faults, handler, Arc::new(crate::live::NoLive));
        std::thread::sleep(Duration::from_millis(300));
        let events = r.finish();
        let nodes: Vec<&str> = events.iter().map(|e| e.node.as_str()).collect();
        assert_eq!(nodes, ["a", "b"]);
        assert!(events.iter().all(|e| e.kind == "fault"));
        assert!(events[0].start_unix_ms <= events[1].start_unix_ms);
    }
}
