//! Integrity of a run's versioned writes: the ledger saved beside run.json after every step, and
//! the read-back of every key it holds (`--verify` at the end of a run, `iodig verify` later),
//! judged field by field into run.json's `integrity`.

use crate::errors::{RunError, UsageError};
use crate::step::async_runtime;
use crate::utc::unix_ms;
use anyhow::{Context, Result};
use iodig_db::{Db, DbFactory, Execution, Record, Status};
use iodig_model::integrity::{IntegrityDoc, IntegrityExample, NodeIntegrity, ReadsJudged};
use iodig_workload::integrity::{self, Ledger, Verdict};
use iodig_workload::keys::KeyNamer;
use iodig_workload::WorkloadSpec;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The ledger's place in a run directory.
pub const LEDGER_FILE: &str = "integrity/ledger.bin";
/// `--restore-each-step`: the ledger as the dataset stood when it was snapshotted (after the
/// load, before the first run step). Each restore puts the database back to that state, so the
/// ledger is put back to this one.
pub const LEDGER_AT_RESTORE_POINT: &str = "integrity/ledger-at-restore-point.bin";
/// Problems listed by key in run.json; the counts cover all of them.
const EXAMPLES: usize = 10;
/// Reads in flight during the check of a network database.
const CONCURRENT_READS: usize = 32;

/// The ledger file of a run as this process writes it: a snapshot, then a batch of the keys
/// changed since at each save (appended and fsync'd), and a new snapshot (written beside the
/// file and renamed over it) when the batches outweigh the snapshot. A save takes the shards'
/// locks only to hand over their lists of changes, so workers never wait for the disk, and a
/// kill at any moment leaves a file that reads back as of its last whole save.
pub struct LedgerJournal {
    path: PathBuf,
    /// The file to append to, once a snapshot of this process is in it.
    file: Option<std::fs::File>,
    snapshot_bytes: u64,
    appended_bytes: u64,
}

/// Batches are appended until they outweigh the snapshot and this much.
const COMPACT_AFTER: u64 = 64 << 20;

/// What one save wrote.
#[derive(Debug, Clone, Copy, Default)]
pub struct SaveStats {
    /// Keys written (every key for a snapshot).
    pub keys: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Whether it was a new snapshot rather than a batch.
    pub snapshot: bool,
}

impl LedgerJournal {
    /// The journal of `run_dir`'s ledger ([`LEDGER_FILE`]). Its first save is a snapshot, so
    /// a file left by an earlier process (a resumed run, the first format) is rewritten whole
    /// once and then appended to.
    pub fn new(run_dir: &Path) -> Self {
        Self {
            path: run_dir.join(LEDGER_FILE),
            file: None,
            snapshot_bytes: 0,
            appended_bytes: 0,
        }
    }

    /// Saves what changed since the last save (or a new snapshot when due).
    pub fn save(&mut self, ledger: &Ledger) -> Result<SaveStats> {
        let due = self.appended_bytes > self.snapshot_bytes + COMPACT_AFTER;
        match self.file.as_mut() {
            Some(file) if !due => {
                let mut batch = Vec::new();
                let appended = ledger.save_changes(&mut batch).and_then(|keys| {
                    use std::io::Write;
                    file.write_all(&batch)?;
                    file.sync_data()?;
                    Ok(keys)
                });
                match appended {
                    Ok(keys) => {
                        self.appended_bytes += batch.len() as u64;
                        Ok(SaveStats {
                            keys,
                            bytes: batch.len() as u64,
                            snapshot: false,
                        })
                    }
                    Err(e) => {
                        // The changes taken are not listed again, and the file may end in a
                        // part of the batch: the next save writes a new snapshot.
                        self.file = None;
                        Err(e).with_context(|| format!("cannot append to {}", self.path.display()))
                    }
                }
            }
            _ => self.snapshot(ledger),
        }
    }

    /// Writes `ledger` whole in place of what the file held: a ledger rewound to the restore
    /// point ([`rewound_ledger`]) replaces the run's, so a kill after the restore reads back
    /// the ledger the database was put back to.
    pub fn replace(&mut self, ledger: &Ledger) -> Result<SaveStats> {
        self.snapshot(ledger)
    }

    fn snapshot(&mut self, ledger: &Ledger) -> Result<SaveStats> {
        self.file = None;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        iodig_model::fsio::write_atomic_with(&self.path, |out| ledger.save_from_scratch(out))?;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .with_context(|| format!("cannot open {} to append to it", self.path.display()))?;
        self.snapshot_bytes = file
            .metadata()
            .with_context(|| format!("cannot read the size of {}", self.path.display()))?
            .len();
        self.appended_bytes = 0;
        self.file = Some(file);
        Ok(SaveStats {
            keys: ledger.key_count(),
            bytes: self.snapshot_bytes,
            snapshot: true,
        })
    }
}

/// Saves the ledger every few seconds while a step runs, so a run killed mid-step still has
/// the writes acknowledged up to the last save checked. [`finish`](Self::finish) saves once
/// more and says whether that worked; dropped without it (a step that failed), it saves once
/// more with a warning at most.
pub struct LedgerSaver {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    ledger: Arc<Ledger>,
    journal: Arc<Mutex<LedgerJournal>>,
    /// Saved by `finish`: nothing left for drop to do.
    finished: bool,
}

/// How often the ledger is saved during a step.
const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

impl LedgerSaver {
    /// Saves `ledger` through `journal` every 2 s from a thread of its own; a failed save there
    /// is a warning, not an error.
    pub fn start(ledger: Arc<Ledger>, journal: Arc<Mutex<LedgerJournal>>) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let thread = {
            let (ledger, journal) = (Arc::clone(&ledger), Arc::clone(&journal));
            std::thread::Builder::new()
                .name("iodig-ledger".into())
                .spawn(move || {
                    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                        rx.recv_timeout(SAVE_EVERY)
                    {
                        if let Err(e) = lock(&journal).save(&ledger) {
                            iodig_model::eprintln_lossy!(
                                "warning: the ledger of versioned writes could not be saved: {e:#}"
                            );
                        }
                    }
                })
                .ok()
        };
        Self {
            stop: Some(tx),
            thread,
            ledger,
            journal,
            finished: false,
        }
    }

    /// Stops the periodic saves and saves what the step changed since the last one, the
    /// error returned.
    pub fn finish(mut self) -> Result<()> {
        self.stop_thread();
        self.finished = true;
        lock(&self.journal).save(&self.ledger).map(|_| ())
    }

    fn stop_thread(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for LedgerSaver {
    fn drop(&mut self) {
        self.stop_thread();
        if self.finished {
            return;
        }
        // Once more, so the file holds every write acknowledged in the step even when the
        // step's recording failed.
        if let Err(e) = lock(&self.journal).save(&self.ledger) {
            iodig_model::eprintln_lossy!(
                "warning: the ledger of versioned writes could not be saved: {e:#}"
            );
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Refuses a run directory that holds no ledger: its run wrote no versioned values.
pub fn require_ledger(run_dir: &Path) -> Result<(), RunError> {
    if run_dir.join(LEDGER_FILE).is_file() {
        return Ok(());
    }
    Err(UsageError(format!(
        "{}: this run wrote no versioned values (no {LEDGER_FILE}); nothing to verify. Run with -p versionedwrites=true to verify a run afterwards",
        run_dir.display()
    ))
    .into())
}

/// Reads the ledger of `run_dir`, refusing a run that wrote no versioned values. A save cut
/// short by a kill is said and dropped: the writes in it read back as unacknowledged, never as
/// lost, since the saves before it are all older.
pub fn load_ledger(run_dir: &Path) -> Result<Ledger> {
    require_ledger(run_dir)?;
    let path = run_dir.join(LEDGER_FILE);
    let file =
        std::fs::File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let loaded = Ledger::load_noting_tail(&mut std::io::BufReader::with_capacity(1 << 20, file))
        .with_context(|| format!("{}: not a ledger iodig can read", path.display()))?;
    if loaded.ignored_bytes > 0 {
        iodig_model::eprintln_lossy!(
            "note: {}: its last {} bytes are a save cut short (the run was killed while saving); the ledger is read as of the save before, so writes acknowledged after it count as unacknowledged, not lost",
            path.display(),
            loaded.ignored_bytes
        );
    }
    Ok(loaded.ledger)
}

/// Keeps `ledger` as the restore point of `--restore-each-step`
/// ([`LEDGER_AT_RESTORE_POINT`]), unless the run (resumed) has one already: the first restore
/// puts back the dataset as it stood then, which this ledger describes.
pub fn keep_restore_point(run_dir: &Path, ledger: &Ledger) -> Result<()> {
    let path = run_dir.join(LEDGER_AT_RESTORE_POINT);
    if path.is_file() {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    iodig_model::fsio::write_atomic_with(&path, |out| ledger.save(out)).with_context(|| {
        format!(
            "cannot keep the ledger's restore point in {}",
            path.display()
        )
    })
}

/// The ledger of the restore point ([`keep_restore_point`]), carrying the read counts of
/// `now`: after a restore the database holds the writes of the restore point and none since,
/// and a ledger that still held the undone writes would judge every value put back stale.
pub fn rewound_ledger(run_dir: &Path, now: &Ledger) -> Result<Ledger> {
    let path = run_dir.join(LEDGER_AT_RESTORE_POINT);
    let file =
        std::fs::File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let rewound = Ledger::load(&mut std::io::BufReader::with_capacity(1 << 20, file))
        .with_context(|| format!("{}: not a ledger iodig can read", path.display()))?;
    rewound.set_read_counts(now.read_counts());
    Ok(rewound)
}

/// Reads back every key of `ledger` through `factory` and judges each field. The jobs take the
/// keys in slices of key numbers as they go, so a check holds a few thousand keys at a time,
/// not the ledger's billion.
pub fn check<F: DbFactory>(
    factory: &F,
    spec: &WorkloadSpec,
    ledger: &Arc<Ledger>,
    checked_by: &str,
    read_with: String,
) -> Result<IntegrityDoc> {
    let target = Arc::new(Target {
        namer: spec.key_namer(),
        table: spec.table.clone(),
        fields: spec.field_names(),
    });
    let ranges = Arc::new(KeyRanges::new(ledger));
    let jobs = match F::EXECUTION {
        Execution::Threads => {
            std::thread::available_parallelism().map_or(2, std::num::NonZero::get)
        }
        Execution::Tasks => CONCURRENT_READS,
    }
    .min(ranges.count().max(1));
    let mut tallies = Vec::new();
    match F::EXECUTION {
        Execution::Threads => std::thread::scope(|s| -> Result<()> {
            let mut handles = Vec::new();
            for _ in 0..jobs {
                let mut db = factory.worker().map_err(crate::errors::db_error)?;
                let (target, ledger, ranges) =
                    (Arc::clone(&target), Arc::clone(ledger), Arc::clone(&ranges));
                handles.push(s.spawn(move || {
                    futures_lite::future::block_on(check_keys(&mut db, &target, &ledger, &ranges))
                }));
            }
            for h in handles {
                tallies.push(h.join().expect("a verify thread panicked"));
            }
            Ok(())
        })?,
        Execution::Tasks => {
            let rt = async_runtime()?;
            let mut handles = Vec::new();
            for _ in 0..jobs {
                let mut db = factory.worker().map_err(crate::errors::db_error)?;
                let (target, ledger, ranges) =
                    (Arc::clone(&target), Arc::clone(ledger), Arc::clone(&ranges));
                handles.push(
                    rt.spawn(async move { check_keys(&mut db, &target, &ledger, &ranges).await }),
                );
            }
            rt.block_on(async {
                for h in handles {
                    tallies.push(h.await.expect("a verify task panicked"));
                }
            });
        }
    }
    let reads = ledger.read_counts();
    let mut doc = IntegrityDoc {
        checked_by: checked_by.to_string(),
        checked_unix_ms: unix_ms(SystemTime::now()),
        read_with,
        during_run: ReadsJudged {
            checked: reads.checked,
            stale: reads.stale,
            corrupt: reads.corrupt,
            missing: reads.missing,
        },
        ..IntegrityDoc::default()
    };
    for t in tallies {
        doc.keys += t.keys;
        doc.ok += t.ok;
        doc.missing += t.missing;
        doc.stale += t.stale;
        doc.corrupt += t.corrupt;
        doc.unacknowledged += t.unacknowledged;
        doc.unreadable += t.unreadable;
        doc.examples.extend(t.examples);
    }
    doc.examples.sort_by(|a, b| a.key.cmp(&b.key));
    doc.examples.truncate(EXAMPLES);
    Ok(doc)
}

/// One node's share of a check that read it alone.
pub fn node_integrity(node: &str, doc: &IntegrityDoc) -> NodeIntegrity {
    NodeIntegrity {
        node: node.to_string(),
        read_with: doc.read_with.clone(),
        keys: doc.keys,
        ok: doc.ok,
        missing: doc.missing,
        stale: doc.stale,
        corrupt: doc.corrupt,
        unreadable: doc.unreadable,
    }
}

/// What a check job needs to name keys and fields.
struct Target {
    namer: KeyNamer,
    table: String,
    fields: Vec<String>,
}

#[derive(Default)]
struct Tally {
    keys: u64,
    ok: u64,
    missing: u64,
    stale: u64,
    corrupt: u64,
    unacknowledged: u64,
    unreadable: u64,
    examples: Vec<IntegrityExample>,
}

/// The worst problem of one key, with the field that shows it.
struct Finding {
    verdict: &'static str,
    field: String,
    acknowledged_version: u64,
    found_version: Option<u64>,
}

/// Slices of key numbers for the check's jobs to take: the flat array's in order, then every
/// key beyond it in one.
struct KeyRanges {
    next: AtomicU64,
    flat_end: u64,
    beyond_taken: AtomicBool,
}

/// Key numbers per slice: enough to keep a job busy, few enough to hold.
const RANGE_KEYS: u64 = 4096;

impl KeyRanges {
    fn new(ledger: &Ledger) -> Self {
        Self {
            next: AtomicU64::new(0),
            flat_end: ledger.flat_end(),
            beyond_taken: AtomicBool::new(false),
        }
    }

    /// How many slices there are, about.
    fn count(&self) -> usize {
        usize::try_from(self.flat_end.div_ceil(RANGE_KEYS)).unwrap_or(usize::MAX) + 1
    }

    fn take(&self) -> Option<(u64, u64)> {
        let start = self.next.fetch_add(RANGE_KEYS, Ordering::Relaxed);
        if start < self.flat_end {
            return Some((start, (start + RANGE_KEYS).min(self.flat_end)));
        }
        (!self.beyond_taken.swap(true, Ordering::Relaxed)).then_some((Ledger::FLAT_KEYS, u64::MAX))
    }
}

async fn check_keys<D: Db>(
    db: &mut D,
    target: &Target,
    ledger: &Ledger,
    ranges: &KeyRanges,
) -> Tally {
    let mut tally = Tally::default();
    let mut key = String::new();
    let mut record = Record::new();
    let mut keys = Vec::new();
    let _ = db.init().await;
    while let Some((lo, hi)) = ranges.take() {
        let mut from = lo;
        loop {
            keys.clear();
            let next = ledger.keys_from(from, hi, 1024, &mut keys);
            for &keynum in &keys {
                if let Some(expected) = ledger.expect(keynum) {
                    check_key(
                        db,
                        target,
                        keynum,
                        &expected,
                        &mut key,
                        &mut record,
                        &mut tally,
                    )
                    .await;
                }
            }
            match next {
                Some(n) => from = n,
                None => break,
            }
        }
    }
    let _ = db.cleanup().await;
    tally
}

/// Reads one key back and judges each field it must hold into `tally`.
async fn check_key<D: Db>(
    db: &mut D,
    target: &Target,
    keynum: u64,
    expected: &integrity::KeyExpectation,
    key: &mut String,
    record: &mut Record,
    tally: &mut Tally,
) {
    if !expected.any_acknowledged() {
        // Only writes that failed or timed out: the key may rightly be absent.
        return;
    }
    tally.keys += 1;
    target.namer.build(keynum, key);
    let status = db.read(&target.table, key, None, record).await;
    let mut finding = None;
    let mut unacknowledged = false;
    match status {
        Status::Ok => {
            for (i, name) in target.fields.iter().enumerate() {
                let Some(e) = expected.field(i as u16) else {
                    continue;
                };
                let problem = match record.get(name) {
                    None => Some(("missing", None)),
                    Some(value) => {
                        let found = integrity::decode(key, name, value);
                        match integrity::judge(&e, found) {
                            Verdict::Ok => None,
                            Verdict::Unacknowledged => {
                                unacknowledged = true;
                                None
                            }
                            Verdict::Stale => Some(("stale", found)),
                            Verdict::Corrupt => Some(("corrupt", found)),
                        }
                    }
                };
                if let Some((verdict, found)) = problem {
                    let worse = finding
                        .as_ref()
                        .is_none_or(|f: &Finding| severity(verdict) > severity(f.verdict));
                    if worse {
                        finding = Some(Finding {
                            verdict,
                            field: name.clone(),
                            acknowledged_version: e.acked,
                            found_version: found,
                        });
                    }
                }
            }
        }
        Status::NotFound => {
            let acked = (0..target.fields.len() as u16)
                .filter_map(|i| expected.field(i))
                .map(|e| e.acked)
                .max()
                .unwrap_or(0);
            finding = Some(Finding {
                verdict: "missing",
                field: String::new(),
                acknowledged_version: acked,
                found_version: None,
            });
        }
        _ => {
            tally.unreadable += 1;
            return;
        }
    }
    match &finding {
        None => {
            tally.ok += 1;
            tally.unacknowledged += u64::from(unacknowledged);
        }
        Some(f) => {
            match f.verdict {
                "missing" => tally.missing += 1,
                "stale" => tally.stale += 1,
                _ => tally.corrupt += 1,
            }
            if tally.examples.len() < EXAMPLES {
                tally.examples.push(IntegrityExample {
                    key: key.clone(),
                    verdict: f.verdict.to_string(),
                    field: f.field.clone(),
                    acknowledged_version: f.acknowledged_version,
                    found_version: f.found_version,
                });
            }
        }
    }
}

/// Which problem of a key is reported when it has several.
fn severity(verdict: &str) -> u8 {
    match verdict {
        "corrupt" => 3,
        "stale" => 2,
        _ => 1,
    }
}

/// The run directory `iodig verify` was given, checked.
pub fn run_dir_arg(path: &Path) -> Result<PathBuf, RunError> {
    if !path.join(iodig_model::files::RUN).is_file() {
        return Err(UsageError(format!(
            "{}: not a run directory (no run.json); give the directory iodig run printed as 'run directory:'",
            path.display()
        ))
        .into());
    }
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodig_workload::integrity::ALL_FIELDS;

    fn write(ledger: &Ledger, keynum: u64) -> u64 {
        let ticket = ledger.begin(keynum, ALL_FIELDS);
        let version = ticket.version;
        ledger.end(ticket, true);
        version
    }

    fn acked(ledger: &Ledger, keynum: u64) -> Option<u64> {
        ledger
            .expect(keynum)
            .and_then(|e| e.field(0))
            .map(|e| e.acked)
    }

    #[test]
    fn a_ledger_rewound_to_the_restore_point_forgets_later_writes_and_keeps_the_reads() {
        let run = tempfile::tempdir().unwrap();
        let ledger = Ledger::new();
        let loaded = [write(&ledger, 0), write(&ledger, 1)];
        keep_restore_point(run.path(), &ledger).unwrap();
        // After the first restore: updates of key 1, a new key 2, and reads judged.
        let updated = write(&ledger, 1);
        write(&ledger, 2);
        ledger.count_read(Verdict::Ok);
        ledger.count_read(Verdict::Stale);
        assert!(updated > loaded[1]);
        // A second call (the next step, a resumed run) keeps the first restore point.
        keep_restore_point(run.path(), &ledger).unwrap();

        let rewound = rewound_ledger(run.path(), &ledger).unwrap();
        assert_eq!(acked(&rewound, 0), Some(loaded[0]));
        assert_eq!(acked(&rewound, 1), Some(loaded[1]), "key 1's update undone");
        assert_eq!(acked(&rewound, 2), None, "key 2's insert undone");
        assert_eq!(rewound.read_counts(), ledger.read_counts());
        assert_eq!(rewound.read_counts().stale, 1);
    }

    #[test]
    fn a_rewind_without_a_restore_point_names_the_file() {
        let run = tempfile::tempdir().unwrap();
        let Err(e) = rewound_ledger(run.path(), &Ledger::new()) else {
            panic!("rewound without a restore point");
        };
        let e = format!("{e:#}");
        assert!(e.contains(LEDGER_AT_RESTORE_POINT), "{e}");
    }
}
