//! Benchmark of the ledger of versioned writes: bytes of memory per key after a load of N keys
//! (the process's RSS, read from /proc), the cost of a save, and how long workers wait while
//! saves run. `old` is the ledger before the flat array (whole file rewritten under the locks),
//! `new` the current one (a snapshot, then batches of the keys changed appended and fsync'd).
//!
//! `cargo run --release -p iodig-workload --example ledger_bench -- new|old KEYS DIR [WORKERS]
//! [SECONDS]`; prints one JSON line. `scripts/bench-ledger.sh` runs both side by side.

mod old_ledger;

use iodig_workload::integrity::{Ledger, ALL_FIELDS};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the benchmark does to a ledger, old or new.
trait Subject: Send + Sync {
    /// One acknowledged write of `field` of `keynum`.
    fn write(&self, keynum: u64, field: u16);
    /// What a read of `keynum` must find (the work a judged read does in the ledger).
    fn read(&self, keynum: u64) -> bool;
}

impl Subject for Ledger {
    fn write(&self, keynum: u64, field: u16) {
        let t = self.begin(keynum, field);
        self.end(t, true);
    }
    fn read(&self, keynum: u64) -> bool {
        self.expect(keynum).is_some()
    }
}

impl Subject for old_ledger::Ledger {
    fn write(&self, keynum: u64, field: u16) {
        let t = self.begin(keynum, field);
        self.end(t, true);
    }
    fn read(&self, keynum: u64) -> bool {
        self.expect(keynum).is_some()
    }
}

/// Saves one ledger into one file the way its runner does.
trait Saver: Send {
    /// One save; returns the bytes written.
    fn save(&mut self) -> std::io::Result<u64>;
}

/// The old way: the whole ledger into a temporary file, fsync'd, renamed over the old one.
struct WholeSaver {
    ledger: Arc<old_ledger::Ledger>,
    path: PathBuf,
}

impl Saver for WholeSaver {
    fn save(&mut self) -> std::io::Result<u64> {
        let tmp = self.path.with_extension("tmp");
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
        self.ledger.save(&mut out)?;
        let f = out
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        f.sync_all()?;
        let bytes = f.metadata()?.len();
        std::fs::rename(&tmp, &self.path)?;
        Ok(bytes)
    }
}

/// The new way (as `runner::verify::LedgerJournal`): a snapshot first, then each save appends
/// the keys changed since and fsyncs.
struct JournalSaver {
    ledger: Arc<Ledger>,
    path: PathBuf,
    file: Option<std::fs::File>,
}

impl Saver for JournalSaver {
    fn save(&mut self) -> std::io::Result<u64> {
        if let Some(file) = self.file.as_mut() {
            let mut batch = Vec::new();
            let t = Instant::now();
            self.ledger.save_changes(&mut batch)?;
            let taken = t.elapsed();
            file.write_all(&batch)?;
            let written = t.elapsed();
            file.sync_data()?;
            if std::env::var_os("LEDGER_BENCH_SPLIT").is_some() {
                eprintln!(
                    "save: changes taken and encoded {taken:?}, written {written:?}, fsync'd {:?}",
                    t.elapsed()
                );
            }
            return Ok(batch.len() as u64);
        }
        let tmp = self.path.with_extension("tmp");
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
        self.ledger.save_from_scratch(&mut out)?;
        let f = out
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        f.sync_all()?;
        let bytes = f.metadata()?.len();
        std::fs::rename(&tmp, &self.path)?;
        self.file = Some(std::fs::OpenOptions::new().append(true).open(&self.path)?);
        Ok(bytes)
    }
}

/// The process's resident memory now, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Latencies of the workers' ledger operations, in power-of-two buckets of ns.
#[derive(Default, Clone)]
struct Latencies {
    buckets: [u64; 32],
    max_ns: u64,
    ops: u64,
}

impl Latencies {
    fn add(&mut self, ns: u64) {
        self.buckets[(64 - ns.leading_zeros() as usize).min(31)] += 1;
        self.max_ns = self.max_ns.max(ns);
        self.ops += 1;
    }
    fn merge(&mut self, o: &Latencies) {
        for (a, b) in self.buckets.iter_mut().zip(o.buckets) {
            *a += b;
        }
        self.max_ns = self.max_ns.max(o.max_ns);
        self.ops += o.ops;
    }
    /// Operations that took 1 ms or more (the bucket bounds are powers of two: ≥ 2^20 ns).
    fn over_1ms(&self) -> u64 {
        self.buckets[21..].iter().sum()
    }
}

/// Workers doing workload A against the ledger for `secs`: half reads, half single-field
/// updates of uniformly chosen keys; a saver every 2 s when given.
fn mixed(
    subject: Arc<dyn Subject>,
    keys: u64,
    workers: usize,
    secs: u64,
    saver: Option<&mut dyn Saver>,
) -> (Latencies, Vec<(f64, u64)>) {
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let (subject, stop) = (Arc::clone(&subject), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut lat = Latencies::default();
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (w as u64 + 1);
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let keynum = x % keys;
                    let start = Instant::now();
                    if x >> 63 == 0 {
                        std::hint::black_box(subject.read(keynum));
                    } else {
                        subject.write(keynum, ((x >> 40) % 10) as u16);
                    }
                    lat.add(start.elapsed().as_nanos() as u64);
                }
                lat
            })
        })
        .collect();
    let mut saves = Vec::new();
    let end = Instant::now() + Duration::from_secs(secs);
    match saver {
        Some(saver) => {
            while Instant::now() + Duration::from_secs(2) <= end {
                std::thread::sleep(Duration::from_secs(2));
                let start = Instant::now();
                let bytes = saver.save().expect("save");
                saves.push((start.elapsed().as_secs_f64(), bytes));
            }
            std::thread::sleep(end.saturating_duration_since(Instant::now()));
        }
        None => std::thread::sleep(Duration::from_secs(secs)),
    }
    stop.store(true, Ordering::Relaxed);
    let mut all = Latencies::default();
    for h in handles {
        all.merge(&h.join().unwrap());
    }
    (all, saves)
}

/// Writes keys 0..`keys` once each from `threads` threads, in key order within each, while the
/// saver saves every 2 s as the runner's does; returns the seconds and the saves' seconds.
fn fill(
    subject: &Arc<dyn Subject>,
    keys: u64,
    threads: u64,
    saver: &mut dyn Saver,
) -> (f64, Vec<f64>) {
    let start = Instant::now();
    let done = AtomicUsize::new(0);
    let mut saves = Vec::new();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (subject, done) = (Arc::clone(subject), &done);
            s.spawn(move || {
                let (lo, hi) = (keys * t / threads, keys * (t + 1) / threads);
                for k in lo..hi {
                    subject.write(k, ALL_FIELDS);
                }
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
        let mut next = Instant::now() + Duration::from_secs(2);
        while done.load(Ordering::Relaxed) < threads as usize {
            std::thread::sleep(Duration::from_millis(10));
            if Instant::now() >= next {
                let t = Instant::now();
                saver.save().expect("save");
                saves.push(t.elapsed().as_secs_f64());
                next = Instant::now() + Duration::from_secs(2);
            }
        }
    });
    (start.elapsed().as_secs_f64(), saves)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: ledger_bench new|old KEYS DIR [WORKERS] [SECONDS]";
    let which = args.get(1).expect(usage).clone();
    let keys: u64 = args.get(2).and_then(|a| a.parse().ok()).expect(usage);
    let dir = Path::new(args.get(3).expect(usage)).to_path_buf();
    let workers: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(4);
    let secs: u64 = args.get(5).and_then(|a| a.parse().ok()).unwrap_or(10);
    std::fs::create_dir_all(&dir).expect("DIR can be made");
    let path = dir.join(format!("ledger-{which}.bin"));

    let rss_before = rss();
    let (subject, mut saver): (Arc<dyn Subject>, Box<dyn Saver>) = match which.as_str() {
        "new" => {
            let l = Arc::new(Ledger::new());
            (
                Arc::clone(&l) as Arc<dyn Subject>,
                Box::new(JournalSaver {
                    ledger: l,
                    path,
                    file: None,
                }),
            )
        }
        "old" => {
            let l = Arc::new(old_ledger::Ledger::new());
            (
                Arc::clone(&l) as Arc<dyn Subject>,
                Box::new(WholeSaver { ledger: l, path }),
            )
        }
        _ => panic!("{usage}"),
    };
    let (fill_secs, fill_saves) = fill(&subject, keys, 2, saver.as_mut());
    // The step's last save, as the runner makes when a step ends.
    let start = Instant::now();
    let last_bytes = saver.save().expect("the load's last save");
    let last_save_secs = start.elapsed().as_secs_f64();
    let rss_loaded = rss();

    let (quiet, _) = mixed(Arc::clone(&subject), keys, workers, secs, None);
    // The quiet phase's changes are saved first, untimed: each timed save then holds 2 s of
    // changes, as in a run.
    saver.save().expect("save");
    let (busy, saves) = mixed(
        Arc::clone(&subject),
        keys,
        workers,
        secs,
        Some(saver.as_mut()),
    );
    let per_key = (rss_loaded.saturating_sub(rss_before)) as f64 / keys as f64;
    println!(
        "{{\"ledger\":\"{which}\",\"keys\":{keys},\"fill_s\":{fill_secs:.2},\"rss_before_mib\":{:.1},\"rss_loaded_mib\":{:.1},\"bytes_per_key\":{per_key:.2},\"saves_during_load\":{},\"load_save_s_max\":{:.3},\"last_save_s\":{last_save_secs:.3},\"last_save_mib\":{:.2},\"saves\":{},\"save_s_median\":{:.4},\"save_s_max\":{:.4},\"save_kib_median\":{:.1},\"workers\":{workers},\"ops_per_s_without_saves\":{:.0},\"ops_per_s_with_saves\":{:.0},\"max_op_ms_without_saves\":{:.2},\"max_op_ms_with_saves\":{:.2},\"ops_over_1ms_without_saves\":{},\"ops_over_1ms_with_saves\":{},\"rss_end_mib\":{:.1}}}",
        rss_before as f64 / 1048576.0,
        rss_loaded as f64 / 1048576.0,
        fill_saves.len(),
        fill_saves.iter().copied().fold(0.0, f64::max),
        last_bytes as f64 / 1048576.0,
        saves.len(),
        median(saves.iter().map(|s| s.0).collect()),
        saves.iter().map(|s| s.0).fold(0.0, f64::max),
        median(saves.iter().map(|s| s.1 as f64 / 1024.0).collect()),
        quiet.ops as f64 / secs as f64,
        busy.ops as f64 / secs as f64,
        quiet.max_ns as f64 / 1e6,
        busy.max_ns as f64 / 1e6,
        quiet.over_1ms(),
        busy.over_1ms(),
        rss() as f64 / 1048576.0,
    );
}
