//! A database that acknowledges an insert and then does not have it, or has it without one of
//! its fields: the run's own reads of what is gone are judged missing (a lost write seen during
//! the run, before any `iodig verify`).

use iodig_db::{Db, Fields, Record, Status};
use iodig_model::props::Properties;
use iodig_model::OpKind;
use iodig_workload::core::{CoreWorkload, MeasuredDb};
use iodig_workload::integrity::{Ledger, ReadTally};
use iodig_workload::spec::WorkloadSpec;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Keeps every record in memory except the first one inserted, whose insert it acknowledges
/// all the same, and keeps the others without `dropped_field` when one is named; counts the
/// failed `VERIFY` measurements the workload records.
#[derive(Default)]
struct LosingDb {
    records: HashMap<String, Record>,
    lost: Option<String>,
    dropped_field: Option<&'static str>,
    verify_failures: u64,
}

impl Db for LosingDb {
    fn read(
        &mut self,
        _table: &str,
        key: &str,
        fields: Fields<'_>,
        out: &mut Record,
    ) -> impl Future<Output = Status> + Send {
        out.clear();
        let status = match self.records.get(key) {
            Some(r) => {
                for (name, value) in r.iter() {
                    if fields.is_none_or(|f| f.iter().any(|n| n == name)) {
                        out.push(name, value);
                    }
                }
                Status::Ok
            }
            None => Status::NotFound,
        };
        async move { status }
    }

    async fn scan(
        &mut self,
        _table: &str,
        _start_key: &str,
        _count: usize,
        _fields: Fields<'_>,
        _out: &mut Vec<Record>,
    ) -> Status {
        Status::Ok
    }

    async fn update(&mut self, _table: &str, _key: &str, _values: &Record) -> Status {
        Status::Ok
    }

    fn insert(
        &mut self,
        _table: &str,
        key: &str,
        values: &Record,
    ) -> impl Future<Output = Status> + Send {
        if self.lost.is_none() {
            self.lost = Some(key.to_string());
        } else {
            let mut r = Record::new();
            for (name, value) in values.iter() {
                if self.dropped_field != Some(name) {
                    r.push(name, value);
                }
            }
            self.records.insert(key.to_string(), r);
        }
        async { Status::Ok }
    }

    fn delete(&mut self, _table: &str, key: &str) -> impl Future<Output = Status> + Send {
        self.records.remove(key);
        async { Status::Ok }
    }
}

impl MeasuredDb for LosingDb {
    fn record(&mut self, op: OpKind, status: Status, _start: Instant, _end: Instant) {
        if op == OpKind::Verify && status == Status::UnexpectedState {
            self.verify_failures += 1;
        }
    }

    async fn pause(&mut self, _d: Duration) {}
}

/// Loads 10 records into `db` with versioned writes, then runs `reads` uniform reads; the
/// ledger's read counts.
fn load_and_read(db: &mut LosingDb, reads: u64, extra: &[(&str, &str)]) -> ReadTally {
    let mut p = Properties::new();
    for (k, v) in [
        ("recordcount", "10"),
        ("readproportion", "1"),
        ("updateproportion", "0"),
        ("requestdistribution", "uniform"),
        ("versionedwrites", "true"),
    ]
    .into_iter()
    .chain(extra.iter().copied())
    {
        p.set(k, v);
    }
    let spec = WorkloadSpec::from_properties(&p).unwrap();
    let ledger = Arc::new(Ledger::new());
    let workload = CoreWorkload::with_ledger(spec, 7, Some(Arc::clone(&ledger)));
    let mut worker = workload.worker(0);
    futures_lite::future::block_on(async {
        // The load: every insert acknowledged; the database loses the first.
        for _ in 0..10 {
            assert!(worker.do_insert(db).await);
        }
        for _ in 0..reads {
            worker.do_transaction(db).await.unwrap();
        }
    });
    assert!(db.lost.is_some());
    ledger.read_counts()
}

#[test]
fn reads_of_an_acknowledged_insert_that_is_gone_are_counted_missing() {
    let mut db = LosingDb::default();
    let reads = load_and_read(&mut db, 400, &[]);
    // 400 uniform reads over 10 keys: about 40 of the lost key; the others are found whole.
    assert_eq!(reads.checked, 400, "{reads:?}");
    assert!(reads.missing > 10, "{reads:?}");
    assert_eq!(reads.missing, db.verify_failures, "{reads:?}");
    assert_eq!(reads.stale + reads.corrupt, 0, "{reads:?}");
}

/// Records found without a field whose insert was acknowledged: every read of all fields is
/// missing; a read of one field only when it asks for the dropped one (or the lost record).
#[test]
fn a_found_record_without_an_acknowledged_field_is_counted_missing() {
    let mut db = LosingDb {
        dropped_field: Some("field3"),
        ..LosingDb::default()
    };
    let reads = load_and_read(&mut db, 200, &[("readallfields", "true")]);
    assert_eq!(reads.checked, 200, "{reads:?}");
    assert_eq!(reads.missing, 200, "{reads:?}");
    assert_eq!(reads.missing, db.verify_failures, "{reads:?}");

    let mut db = LosingDb {
        dropped_field: Some("field3"),
        ..LosingDb::default()
    };
    let reads = load_and_read(&mut db, 400, &[("readallfields", "false")]);
    // 1 record in 10 lost, 1 field in 10 dropped: about 19 % of the reads miss something.
    assert!(
        (40..=120).contains(&reads.missing),
        "{reads:?} (expected about 76 of 400)"
    );
    assert_eq!(reads.missing, db.verify_failures, "{reads:?}");
    assert_eq!(reads.stale + reads.corrupt, 0, "{reads:?}");
}
