//! Values left unwritten for a binding that does not read them: every key, operation and
//! length is the same as for a binding that reads them, and what a reading binding gets are
//! YCSB's value bytes, the same from run to run.

use iodig_db::{Db, Fields, Record, Status};
use iodig_model::props::Properties;
use iodig_model::OpKind;
use iodig_workload::core::{CoreWorkload, MeasuredDb};
use iodig_workload::spec::WorkloadSpec;
use std::time::{Duration, Instant};

/// Logs every call; with `reads`, the values of every write too.
struct LoggingDb {
    reads: bool,
    log: Vec<String>,
    values: Vec<Vec<u8>>,
}

impl LoggingDb {
    fn write(&mut self, op: &str, key: &str, values: &Record) -> Status {
        self.log.push(format!(
            "{op} {key} {} fields {} bytes",
            values.len(),
            values.value_bytes()
        ));
        if self.reads {
            self.values
                .extend(values.iter().map(|(name, v)| [name.as_bytes(), v].concat()));
        } else {
            assert!(values.has_deferred() || values.value_bytes() == 0);
        }
        Status::Ok
    }
}

impl Db for LoggingDb {
    async fn read(&mut self, _t: &str, key: &str, _f: Fields<'_>, out: &mut Record) -> Status {
        out.clear();
        self.log.push(format!("READ {key}"));
        Status::Ok
    }

    async fn scan(
        &mut self,
        _t: &str,
        key: &str,
        n: usize,
        _f: Fields<'_>,
        out: &mut Vec<Record>,
    ) -> Status {
        out.clear();
        self.log.push(format!("SCAN {key} {n}"));
        Status::Ok
    }

    async fn update(&mut self, _t: &str, key: &str, values: &Record) -> Status {
        self.write("UPDATE", key, values)
    }

    async fn insert(&mut self, _t: &str, key: &str, values: &Record) -> Status {
        self.write("INSERT", key, values)
    }

    async fn delete(&mut self, _t: &str, key: &str) -> Status {
        self.log.push(format!("DELETE {key}"));
        Status::Ok
    }

    fn reads_values(&self) -> bool {
        self.reads
    }
}

impl MeasuredDb for LoggingDb {
    fn record(&mut self, _op: OpKind, _s: Status, _start: Instant, _end: Instant) {}

    async fn pause(&mut self, _d: Duration) {}
}

/// A load of 100 records and 3000 transactions of every kind, lengths uniform, one worker
/// under `seed`: the call log and the values written.
fn run(reads: bool, seed: u64) -> (Vec<String>, Vec<Vec<u8>>) {
    let mut p = Properties::new();
    for (k, v) in [
        ("recordcount", "100"),
        ("readproportion", "0.2"),
        ("updateproportion", "0.3"),
        ("insertproportion", "0.2"),
        ("scanproportion", "0.1"),
        ("readmodifywriteproportion", "0.2"),
        ("fieldlengthdistribution", "uniform"),
        ("minfieldlength", "1"),
        ("fieldlength", "200"),
    ] {
        p.set(k, v);
    }
    let workload = CoreWorkload::new(WorkloadSpec::from_properties(&p).unwrap(), seed);
    let mut load = workload.worker(0);
    let mut db = LoggingDb {
        reads,
        log: Vec::new(),
        values: Vec::new(),
    };
    futures_lite::future::block_on(async {
        for _ in 0..100 {
            assert!(load.do_insert(&mut db).await);
        }
        let run = CoreWorkload::new(WorkloadSpec::from_properties(&p).unwrap(), seed);
        let mut worker = run.worker(1);
        for _ in 0..3000 {
            worker.do_transaction(&mut db).await.unwrap();
        }
    });
    (db.log, db.values)
}

#[test]
fn unread_values_change_no_key_operation_or_length() {
    let (read_log, values) = run(true, 5);
    let (unread_log, none) = run(false, 5);
    assert_eq!(read_log, unread_log);
    assert!(none.is_empty());
    assert!(values.len() > 1000, "{}", values.len());
    // YCSB's alphabet: printable ASCII from ' '.
    assert!(values
        .iter()
        .all(|v| v.iter().all(|b| (b' '..=0x7f).contains(b))));
}

#[test]
fn read_values_repeat_under_a_seed_and_differ_across_seeds() {
    assert_eq!(run(true, 5).1, run(true, 5).1);
    assert_ne!(run(true, 5).1, run(true, 6).1);
}
