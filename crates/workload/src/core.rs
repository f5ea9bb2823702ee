//! YCSB's `CoreWorkload`: the shared state of one phase ([`CoreWorkload`]) and each worker's
//! generators and buffers ([`Worker`]), doing exactly YCSB's `doInsert` and `doTransaction*`.

use crate::generators::{
    AcknowledgedCounter, Counter, Discrete, Exponential, Hotspot, ScrambledZipfian, Sequential,
    SkewedLatest, TooManyUnacknowledged, Uniform, Zipfian,
};
use crate::integrity::{self, Ledger, Verdict, WriteTicket, ALL_FIELDS};
use crate::keys::KeyNamer;
use crate::rng::Rng;
use crate::spec::{LengthDistribution, RequestDistribution, WorkloadSpec};
use crate::values::{
    deterministic_value, fill_random_seeded, java_hashmap_order, random_value_state,
};
use iodig_db::{Db, Deferred, Fields, Record, Status};
use iodig_model::OpKind;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The measured database as the workload sees it: a [`Db`] whose calls are timed by the
/// runner's wrapper, plus the two things only the workload can time or do.
pub trait MeasuredDb: Db {
    /// Records a measurement the workload timed itself (`READ-MODIFY-WRITE`, `VERIFY`).
    fn record(&mut self, op: OpKind, status: Status, start: Instant, end: Instant);

    /// Sleeps without blocking other workers (insert retries).
    fn pause(&mut self, d: Duration) -> impl Future<Output = ()> + Send;
}

/// One operation of the run phase, in the order of YCSB's `DiscreteGenerator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxOp {
    /// A read of one key (`readproportion`), recorded as `READ`.
    Read,
    /// An update of one random field, or of every field with `writeallfields` (`updateproportion`).
    Update,
    /// An insert of the next new key past the loaded ones, all fields (`insertproportion`).
    Insert,
    /// A scan of up to `maxscanlength` records from a chosen key (`scanproportion`).
    Scan,
    /// A read and an update of one key, timed together as `READ-MODIFY-WRITE` besides their own
    /// `READ` and `UPDATE` (`readmodifywriteproportion`).
    ReadModifyWrite,
}

/// A fatal workload error: the run cannot go on correctly.
#[derive(Debug)]
pub enum WorkloadError {
    /// More than 2^20 run-phase inserts were outstanding at once: the step stops with this error.
    TooManyUnacknowledged,
}

impl std::fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "too many unacknowledged insertion keys (more than 2^20 inserts outstanding, as YCSB's limit); lower the thread count or the insert proportion",
        )
    }
}

impl std::error::Error for WorkloadError {}

impl From<TooManyUnacknowledged> for WorkloadError {
    fn from(_: TooManyUnacknowledged) -> Self {
        WorkloadError::TooManyUnacknowledged
    }
}

/// How a read picks its fields.
#[derive(Debug, Clone, Copy)]
enum ReadFields {
    /// `None`: the binding reads every field.
    All,
    /// Every field, by name (`readallfieldsbyname`).
    AllByName,
    /// One uniformly chosen field.
    One,
}

impl ReadFields {
    /// The field list to pass to the binding: every name, or the one chosen field.
    fn fields<'a>(self, all_names: &'a [String], one: &'a [String]) -> Fields<'a> {
        match self {
            ReadFields::All => None,
            ReadFields::AllByName => Some(all_names),
            ReadFields::One => Some(one),
        }
    }
}

/// Key chooser, per worker (zipfian ζ is extended per worker as inserts are acknowledged).
#[derive(Debug, Clone)]
enum KeyChooser {
    Uniform(Uniform),
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest),
    Hotspot(Hotspot),
    Exponential(Exponential),
    Sequential,
}

#[derive(Debug, Clone)]
enum LengthGen {
    Constant(u64),
    Uniform(Uniform),
    Zipfian(Zipfian),
}

impl LengthGen {
    fn new(dist: LengthDistribution, min: u64, max: u64) -> Self {
        match dist {
            LengthDistribution::Constant => LengthGen::Constant(max),
            LengthDistribution::Uniform => LengthGen::Uniform(Uniform::new(min, max)),
            LengthDistribution::Zipfian => LengthGen::Zipfian(Zipfian::new(min, max)),
        }
    }

    #[inline]
    fn next(&self, rng: &mut Rng) -> u64 {
        match self {
            LengthGen::Constant(n) => *n,
            LengthGen::Uniform(g) => g.next(rng),
            LengthGen::Zipfian(g) => g.next(rng),
        }
    }
}

/// Shared state of one phase: the load key counter, the run-phase insert counter, the op mix,
/// and prototypes of the per-worker generators (built once: zipfian setup is O(n)).
pub struct CoreWorkload {
    /// The checked properties this phase runs with.
    pub spec: WorkloadSpec,
    namer: KeyNamer,
    field_names: Vec<String>,
    /// `field_names` indices in Java HashMap order, the order YCSB hands values to bindings.
    field_order: Vec<usize>,
    key_sequence: Counter,
    insert_sequence: AcknowledgedCounter,
    sequential: Sequential,
    op_chooser: Discrete<TxOp>,
    key_chooser: KeyChooser,
    field_length: LengthGen,
    scan_length: LengthGen,
    seed: u64,
    /// The run's acknowledged writes, with `versionedwrites`.
    ledger: Option<Arc<Ledger>>,
}

impl CoreWorkload {
    /// The shared state of one phase under `seed`; with `versionedwrites`, a ledger of its own.
    pub fn new(spec: WorkloadSpec, seed: u64) -> Arc<Self> {
        Self::with_ledger(spec, seed, None)
    }

    /// A phase whose versioned writes go into `ledger`, shared with the run's other phases (a
    /// fresh ledger when `None` and the spec asks for versioned writes).
    pub fn with_ledger(spec: WorkloadSpec, seed: u64, ledger: Option<Arc<Ledger>>) -> Arc<Self> {
        let ledger = ledger.or_else(|| spec.versioned_writes.then(|| Arc::new(Ledger::new())));
        let lb = spec.insert_start;
        let ub = (spec.insert_start + spec.insert_count).saturating_sub(1);
        let key_chooser = match spec.request_distribution {
            RequestDistribution::Uniform => KeyChooser::Uniform(Uniform::new(lb, ub)),
            RequestDistribution::Zipfian => KeyChooser::Zipfian(ScrambledZipfian::new(
                lb,
                spec.insert_start + spec.insert_count + spec.expected_new_keys(),
            )),
            RequestDistribution::Latest => {
                KeyChooser::Latest(SkewedLatest::new(spec.record_count.saturating_sub(1)))
            }
            RequestDistribution::Hotspot => KeyChooser::Hotspot(Hotspot::new(
                lb,
                ub,
                spec.hotspot_data_fraction,
                spec.hotspot_opn_fraction,
            )),
            RequestDistribution::Exponential => KeyChooser::Exponential(Exponential::new(
                spec.exponential_percentile,
                spec.record_count as f64 * spec.exponential_frac,
            )),
            RequestDistribution::Sequential => KeyChooser::Sequential,
        };
        let [read, update, insert, scan, rmw] = spec.proportions;
        let field_names = spec.field_names();
        Arc::new(Self {
            namer: spec.key_namer(),
            field_order: java_hashmap_order(&field_names),
            field_names,
            key_sequence: Counter::new(spec.insert_start),
            insert_sequence: AcknowledgedCounter::new(spec.record_count),
            sequential: Sequential::new(lb, ub.max(lb)),
            op_chooser: Discrete::new(&[
                (TxOp::Read, read),
                (TxOp::Update, update),
                (TxOp::Insert, insert),
                (TxOp::Scan, scan),
                (TxOp::ReadModifyWrite, rmw),
            ]),
            key_chooser,
            field_length: LengthGen::new(
                spec.field_length_distribution,
                spec.min_field_length,
                spec.field_length,
            ),
            scan_length: LengthGen::new(
                spec.scan_length_distribution,
                spec.min_scan_length,
                spec.max_scan_length,
            ),
            seed,
            spec,
            ledger,
        })
    }

    /// The ledger of versioned writes, when the spec asks for them.
    pub fn ledger(&self) -> Option<&Arc<Ledger>> {
        self.ledger.as_ref()
    }

    /// How this workload turns key numbers into key names (`insertorder`, `zeropadding`).
    pub fn key_namer(&self) -> KeyNamer {
        self.namer
    }

    /// The worker `index` of `count`; its random stream depends only on the seed and index.
    pub fn worker(self: &Arc<Self>, index: u64) -> Worker {
        Worker {
            rng: Rng::seeded(self.seed, index),
            key_chooser: self.key_chooser.clone(),
            key: String::with_capacity(32),
            values: Record::new(),
            // Only `dataintegrity` looks at what a read returns; otherwise count, don't copy.
            result: if self.spec.data_integrity || self.ledger.is_some() {
                Record::new()
            } else {
                Record::counting()
            },
            scan_out: Vec::new(),
            one_field: Vec::with_capacity(1),
            shared: Arc::clone(self),
        }
    }
}

/// YCSB's split of `total` operations over `threads`: `total/threads` each, one more for the
/// first `total % threads`.
pub fn ops_for_thread(total: u64, threads: u64, index: u64) -> u64 {
    total / threads + u64::from(index < total % threads)
}

/// One worker's generators and reusable buffers.
pub struct Worker {
    shared: Arc<CoreWorkload>,
    rng: Rng,
    key_chooser: KeyChooser,
    key: String,
    values: Record,
    result: Record,
    scan_out: Vec<Record>,
    one_field: Vec<String>,
}

impl Worker {
    fn spec(&self) -> &WorkloadSpec {
        &self.shared.spec
    }

    /// YCSB's `nextKeynum`: never a key whose insert is not yet acknowledged.
    #[inline]
    pub fn next_keynum(&mut self) -> u64 {
        let last = self.shared.insert_sequence.last_value();
        let rng = &mut self.rng;
        // A bounded redraw: YCSB loops forever when no key can satisfy the bound.
        for _ in 0..10_000 {
            let k = match &mut self.key_chooser {
                KeyChooser::Exponential(g) => {
                    let s = g.next(rng);
                    if s > last {
                        continue;
                    }
                    return last - s;
                }
                KeyChooser::Latest(g) => return g.next(last, rng),
                KeyChooser::Uniform(g) => g.next(rng),
                KeyChooser::Zipfian(g) => g.next(rng),
                KeyChooser::Hotspot(g) => g.next(rng),
                KeyChooser::Sequential => self.shared.sequential.next(),
            };
            if k <= last {
                return k;
            }
        }
        last
    }

    /// Picks the next run-phase operation.
    #[inline]
    pub fn next_op(&mut self) -> TxOp {
        self.shared.op_chooser.next(&mut self.rng)
    }

    /// The key name of the next run-phase read/update/scan, for tests and benchmarks.
    pub fn next_key(&mut self) -> &str {
        let k = self.next_keynum();
        self.shared.namer.build(k, &mut self.key);
        &self.key
    }

    /// Appends the value of `field` for the current key to `values`, carrying `version` when
    /// writes are versioned.
    fn build_value(&mut self, field: usize, version: Option<u64>) {
        let shared = &self.shared;
        let name = &shared.field_names[field];
        if let Some(v) = version {
            let len = shared.field_length.next(&mut self.rng) as usize;
            let key = &self.key;
            self.values
                .push_with(name, |buf| integrity::encode(key, name, v, len, buf));
        } else if shared.spec.data_integrity {
            let size = shared.spec.field_length as usize;
            let key = &self.key;
            self.values
                .push_with(name, |buf| deterministic_value(key, name, size, buf));
        } else {
            // Deferred: written from its own generator's seed only if the binding reads values;
            // the seed is one draw either way, so every later choice is the same.
            let len = shared.field_length.next(&mut self.rng) as usize;
            self.values.push_deferred(
                name,
                Deferred {
                    state: random_value_state(&mut self.rng),
                    len,
                    fill: fill_random_seeded,
                },
            );
        }
    }

    /// Writes out the values built for the next write if `db` reads them.
    #[inline]
    fn ready_values<D: Db>(&mut self, db: &D) {
        if db.reads_values() {
            self.values.materialize();
        }
    }

    /// YCSB's `buildValues`: every field, in HashMap order.
    fn build_all_values(&mut self, version: Option<u64>) {
        self.values.clear();
        for i in 0..self.shared.field_order.len() {
            let field = self.shared.field_order[i];
            self.build_value(field, version);
        }
    }

    /// YCSB's `buildSingleValue`: one uniformly chosen field.
    fn build_single_value(&mut self, version: Option<u64>) {
        self.values.clear();
        let field = self.random_field();
        self.build_value(field, version);
    }

    /// The values of an update (YCSB's `writeallfields` decides all or one), versioned when
    /// the run keeps a ledger: the write's ticket is returned for [`Worker::end_write`].
    fn build_update_values(&mut self, keynum: u64) -> Option<WriteTicket> {
        let Some(ledger) = self.shared.ledger.clone() else {
            if self.spec().write_all_fields {
                self.build_all_values(None);
            } else {
                self.build_single_value(None);
            }
            return None;
        };
        if self.spec().write_all_fields {
            let ticket = ledger.begin(keynum, ALL_FIELDS);
            self.build_all_values(Some(ticket.version));
            Some(ticket)
        } else {
            self.values.clear();
            let field = self.random_field();
            let ticket = ledger.begin(keynum, field as u16);
            self.build_value(field, Some(ticket.version));
            Some(ticket)
        }
    }

    /// The values of an insert (every field), versioned when the run keeps a ledger.
    fn build_insert_values(&mut self, keynum: u64) -> Option<WriteTicket> {
        let ticket = self
            .shared
            .ledger
            .as_ref()
            .map(|l| l.begin(keynum, ALL_FIELDS));
        self.build_all_values(ticket.map(|t| t.version));
        ticket
    }

    /// Records whether a versioned write was acknowledged.
    fn end_write(&self, ticket: Option<WriteTicket>, status: Status) {
        if let (Some(ledger), Some(t)) = (&self.shared.ledger, ticket) {
            ledger.end(t, status.is_ok());
        }
    }

    /// With versioned writes, judges what a read returned (`status`, the values) against the
    /// writes acknowledged before it began (`expected`), counts it and records it as `VERIFY`:
    /// a record not found although its insert was acknowledged is a lost write too, and so is
    /// a field the read asked for (`requested`) that the record came back without.
    fn check_versions<M: MeasuredDb>(
        &self,
        db: &mut M,
        status: Status,
        expected: Option<integrity::KeyExpectation>,
        requested: ReadFields,
    ) {
        let (Some(ledger), Some(expected)) = (&self.shared.ledger, expected) else {
            return;
        };
        let start = Instant::now();
        let missing = |db: &mut M| {
            ledger.count_missing_read();
            db.record(
                OpKind::Verify,
                Status::UnexpectedState,
                start,
                Instant::now(),
            );
        };
        if status == Status::NotFound && expected.any_acknowledged() {
            return missing(db);
        }
        if !status.is_ok() {
            return;
        }
        let mut worst = Verdict::Ok;
        for (name, value) in self.result.iter() {
            let Some(field) = self.shared.field_names.iter().position(|n| n == name) else {
                worst = Verdict::Corrupt;
                continue;
            };
            let Some(e) = expected.field(field as u16) else {
                continue;
            };
            let verdict = integrity::judge(&e, integrity::decode(&self.key, name, value));
            if matches!(verdict, Verdict::Stale | Verdict::Corrupt) && worst != Verdict::Corrupt {
                worst = verdict;
            }
        }
        if matches!(worst, Verdict::Ok | Verdict::Unacknowledged)
            && self.lacks_an_acknowledged_field(&expected, requested)
        {
            return missing(db);
        }
        ledger.count_read(worst);
        let status = match worst {
            Verdict::Ok | Verdict::Unacknowledged => Status::Ok,
            Verdict::Stale | Verdict::Corrupt => Status::UnexpectedState,
        };
        db.record(OpKind::Verify, status, start, Instant::now());
    }

    /// Whether a field the read asked for, with a write acknowledged before it began, is
    /// absent from what came back.
    fn lacks_an_acknowledged_field(
        &self,
        expected: &integrity::KeyExpectation,
        requested: ReadFields,
    ) -> bool {
        let names = &self.shared.field_names;
        let absent = |i: usize| {
            expected.field(i as u16).is_some_and(|e| e.acked > 0)
                && !self
                    .result
                    .iter()
                    .any(|(name, _)| name == names[i].as_str())
        };
        match requested {
            ReadFields::All | ReadFields::AllByName => (0..names.len()).any(absent),
            ReadFields::One => self
                .one_field
                .first()
                .and_then(|one| names.iter().position(|n| n == one))
                .is_some_and(absent),
        }
    }

    fn random_field(&mut self) -> usize {
        (self.rng.next_u64() >> 1) as usize % self.shared.field_names.len()
    }

    /// Field selection of a read (YCSB's `readallfields`, `readallfieldsbyname`); a single
    /// random field is placed in `one_field`.
    fn choose_read_fields(&mut self) -> ReadFields {
        match (
            self.shared.spec.read_all_fields,
            self.shared.spec.read_all_fields_by_name,
        ) {
            (true, false) => ReadFields::All,
            (true, true) => ReadFields::AllByName,
            (false, _) => {
                let f = self.random_field();
                let name = &self.shared.field_names[f];
                // Reuse the one name's buffer: no allocation per read.
                match self.one_field.first_mut() {
                    Some(one) => one.clone_from(name),
                    None => self.one_field.push(name.clone()),
                }
                ReadFields::One
            }
        }
    }

    /// YCSB's `doInsert` for the load phase: the next key of the shared counter, all fields,
    /// retried `core_workload_insertion_retry_limit` times. True when the insert succeeded.
    pub async fn do_insert<M: MeasuredDb>(&mut self, db: &mut M) -> bool {
        let keynum = self.shared.key_sequence.next();
        self.shared.namer.build(keynum, &mut self.key);
        let ticket = self.build_insert_values(keynum);
        self.ready_values(db);
        let mut retries = 0;
        loop {
            let status = db
                .insert(&self.shared.spec.table, &self.key, &self.values)
                .await;
            if status.is_ok() {
                self.end_write(ticket, status);
                return true;
            }
            retries += 1;
            if retries > self.spec().insertion_retry_limit {
                self.end_write(ticket, status);
                return false;
            }
            // YCSB sleeps the interval ×[0.8, 1.2) so retrying clients do not move in lock step.
            let factor = 0.8 + 0.4 * self.rng.next_f64();
            let secs = self.spec().insertion_retry_interval_secs * factor;
            db.pause(Duration::from_secs_f64(secs)).await;
        }
    }

    /// YCSB's `doTransaction`: one operation of the mix.
    pub async fn do_transaction<M: MeasuredDb>(
        &mut self,
        db: &mut M,
    ) -> Result<TxOp, WorkloadError> {
        let op = self.next_op();
        match op {
            TxOp::Read => self.do_read(db).await,
            TxOp::Update => self.do_update(db).await,
            TxOp::Insert => self.do_tx_insert(db).await?,
            TxOp::Scan => self.do_scan(db).await,
            TxOp::ReadModifyWrite => self.do_read_modify_write(db).await,
        }
        Ok(op)
    }

    async fn do_read<M: MeasuredDb>(&mut self, db: &mut M) {
        let keynum = self.next_keynum();
        self.shared.namer.build(keynum, &mut self.key);
        let choice = self.choose_read_fields();
        let fields = choice.fields(&self.shared.field_names, &self.one_field);
        let expected = self.shared.ledger.as_ref().and_then(|l| l.expect(keynum));
        let status = db
            .read(&self.shared.spec.table, &self.key, fields, &mut self.result)
            .await;
        if self.shared.spec.data_integrity && status.is_ok() {
            self.verify(db);
        }
        self.check_versions(db, status, expected, choice);
    }

    /// YCSB's `verifyRow`: every value read must be the deterministic value of its field.
    fn verify<M: MeasuredDb>(&mut self, db: &mut M) {
        let start = Instant::now();
        let size = self.shared.spec.field_length as usize;
        let mut expected = Vec::with_capacity(size);
        let status = if self.result.is_empty() {
            Status::Error
        } else if self.result.iter().all(|(name, value)| {
            expected.clear();
            deterministic_value(&self.key, name, size, &mut expected);
            expected == value
        }) {
            Status::Ok
        } else {
            Status::UnexpectedState
        };
        db.record(OpKind::Verify, status, start, Instant::now());
    }

    async fn do_update<M: MeasuredDb>(&mut self, db: &mut M) {
        let keynum = self.next_keynum();
        self.shared.namer.build(keynum, &mut self.key);
        let ticket = self.build_update_values(keynum);
        self.ready_values(db);
        let status = db
            .update(&self.shared.spec.table, &self.key, &self.values)
            .await;
        self.end_write(ticket, status);
    }

    async fn do_tx_insert<M: MeasuredDb>(&mut self, db: &mut M) -> Result<(), WorkloadError> {
        let keynum = self.shared.insert_sequence.next();
        self.shared.namer.build(keynum, &mut self.key);
        let ticket = self.build_insert_values(keynum);
        self.ready_values(db);
        let status = db
            .insert(&self.shared.spec.table, &self.key, &self.values)
            .await;
        self.end_write(ticket, status);
        // Acknowledged whatever the outcome, as YCSB does in `finally`.
        self.shared.insert_sequence.acknowledge(keynum)?;
        Ok(())
    }

    async fn do_scan<M: MeasuredDb>(&mut self, db: &mut M) {
        let keynum = self.next_keynum();
        self.shared.namer.build(keynum, &mut self.key);
        let len = self.shared.scan_length.next(&mut self.rng) as usize;
        let choice = self.choose_read_fields();
        let fields = choice.fields(&self.shared.field_names, &self.one_field);
        db.scan(
            &self.shared.spec.table,
            &self.key,
            len,
            fields,
            &mut self.scan_out,
        )
        .await;
    }

    /// YCSB's `doTransactionReadModifyWrite`: the inner read and update are recorded under
    /// READ and UPDATE by the wrapper, and the whole under READ-MODIFY-WRITE here.
    async fn do_read_modify_write<M: MeasuredDb>(&mut self, db: &mut M) {
        let keynum = self.next_keynum();
        self.shared.namer.build(keynum, &mut self.key);
        let choice = self.choose_read_fields();
        let expected = self.shared.ledger.as_ref().and_then(|l| l.expect(keynum));
        let start = Instant::now();
        // The write's version is taken when it begins, after the read, like a client that
        // reads, modifies and writes back.
        let table = &self.shared.spec.table;
        let fields = choice.fields(&self.shared.field_names, &self.one_field);
        let read = db.read(table, &self.key, fields, &mut self.result).await;
        let ticket = self.build_update_values(keynum);
        self.ready_values(db);
        let table = &self.shared.spec.table;
        let update = db.update(table, &self.key, &self.values).await;
        let end = Instant::now();
        self.end_write(ticket, update);
        if self.shared.spec.data_integrity && read.is_ok() {
            self.verify(db);
        }
        self.check_versions(db, read, expected, choice);
        let status = if read.is_ok() { update } else { read };
        db.record(OpKind::ReadModifyWrite, status, start, end);
    }
}
