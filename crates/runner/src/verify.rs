//! Integrity of a run's versioned writes: the ledger saved beside run.json after every step, and
//! the read-back of every key it holds (`--verify` at the end of a run, `iodig verify` later),
//! judged field by field into run.json's `integrity`.

use crate::errors::{RunError, UsageError};
use crate::step::{async_runtime, unix_ms};
use anyhow::{Context, Result};
use iodig_db::{Db, DbFactory, Execution, Record, Status};
use iodig_model::integrity::{IntegrityDoc, IntegrityExample, NodeIntegrity, ReadsJudged};
use iodig_workload::integrity::{self, Ledger, Verdict};
use iodig_workload::keys::KeyNamer;
use iodig_workload::WorkloadSpec;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

/// The ledger's place in a run directory.
pub const LEDGER_FILE: &str = "integrity/ledger.bin";
/// Problems listed by key in run.json; the counts cover all of them.
const EXAMPLES: usize = 10;
/// Reads in flight during the check of a network database.
const CONCURRENT_READS: usize = 32;

/// Writes the ledger atomically: a crash keeps the previous step's.
pub fn save_ledger(run_dir: &Path, ledger: &Ledger) -> Result<()> {
    let path = run_dir.join(LEDGER_FILE);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    iodig_model::fsio::write_atomic_with(&path, |out| ledger.save(out))
}

/// Saves the ledger every few seconds while a step runs, so a run killed mid-step still has
/// the writes acknowledged up to the last save checked. [`finish`](Self::finish) saves once
/// more and says whether that worked; dropped without it (a step that failed), it saves once
/// more with a warning at most.
pub struct LedgerSaver {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    ledger: Arc<Ledger>,
    run_dir: PathBuf,
    /// Saved by `finish`: nothing left for drop to do.
    finished: bool,
}

/// How often the ledger is saved during a step.
const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

impl LedgerSaver {
    /// Saves `ledger` into `run_dir` ([`LEDGER_FILE`]) every 2 s from a thread of its own; a
    /// failed save there is a warning, not an error.
    pub fn start(ledger: Arc<Ledger>, run_dir: PathBuf) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let thread = {
            let (ledger, run_dir) = (Arc::clone(&ledger), run_dir.clone());
            std::thread::Builder::new()
                .name("iodig-ledger".into())
                .spawn(move || {
                    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                        rx.recv_timeout(SAVE_EVERY)
                    {
                        if let Err(e) = save_ledger(&run_dir, &ledger) {
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
            run_dir,
            finished: false,
        }
    }

    /// Stops the periodic saves and saves the whole step's ledger once, the error returned.
    pub fn finish(mut self) -> Result<()> {
        self.stop_thread();
        self.finished = true;
        save_ledger(&self.run_dir, &self.ledger)
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
        if let Err(e) = save_ledger(&self.run_dir, &self.ledger) {
            iodig_model::eprintln_lossy!(
                "warning: the ledger of versioned writes could not be saved: {e:#}"
            );
        }
    }
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

/// Reads the ledger of `run_dir`, refusing a run that wrote no versioned values.
pub fn load_ledger(run_dir: &Path) -> Result<Ledger> {
    require_ledger(run_dir)?;
    let path = run_dir.join(LEDGER_FILE);
    let file =
        std::fs::File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
    Ledger::load(&mut std::io::BufReader::new(file))
        .with_context(|| format!("{}: not a ledger iodig can read", path.display()))
}

/// Reads back every key of `ledger` through `factory` and judges each field.
pub fn check<F: DbFactory>(
    factory: &F,
    spec: &WorkloadSpec,
    ledger: &Ledger,
    checked_by: &str,
    read_with: String,
) -> Result<IntegrityDoc> {
    let keys = ledger.keys();
    let target = Arc::new(Target {
        namer: KeyNamer {
            ordered: spec.ordered_inserts,
            zero_padding: spec.zero_padding,
        },
        table: spec.table.clone(),
        fields: spec.field_names(),
    });
    let jobs = match F::EXECUTION {
        Execution::Threads => {
            std::thread::available_parallelism().map_or(2, std::num::NonZero::get)
        }
        Execution::Tasks => CONCURRENT_READS,
    }
    .min(keys.len().max(1));
    let chunk = keys.len().div_ceil(jobs).max(1);
    let expectations: Vec<Vec<(u64, integrity::KeyExpectation)>> = keys
        .chunks(chunk)
        .map(|c| {
            c.iter()
                .filter_map(|&k| ledger.expect(k).map(|e| (k, e)))
                .collect()
        })
        .collect();
    let mut tallies = Vec::new();
    match F::EXECUTION {
        Execution::Threads => std::thread::scope(|s| -> Result<()> {
            let mut handles = Vec::new();
            for part in expectations {
                let mut db = factory.worker().map_err(crate::deployment::db_error)?;
                let target = Arc::clone(&target);
                handles.push(s.spawn(move || {
                    futures_lite::future::block_on(check_keys(&mut db, &target, part))
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
            for part in expectations {
                let mut db = factory.worker().map_err(crate::deployment::db_error)?;
                let target = Arc::clone(&target);
                handles.push(rt.spawn(async move { check_keys(&mut db, &target, part).await }));
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

async fn check_keys<D: Db>(
    db: &mut D,
    target: &Target,
    part: Vec<(u64, integrity::KeyExpectation)>,
) -> Tally {
    let mut tally = Tally::default();
    let mut key = String::new();
    let mut record = Record::new();
    let _ = db.init().await;
    for (keynum, expected) in part {
        if !expected.any_acknowledged() {
            // Only writes that failed or timed out: the key may rightly be absent.
            continue;
        }
        tally.keys += 1;
        target.namer.build(keynum, &mut key);
        let status = db.read(&target.table, &key, None, &mut record).await;
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
                            let found = integrity::decode(&key, name, value);
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
                continue;
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
    let _ = db.cleanup().await;
    tally
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
