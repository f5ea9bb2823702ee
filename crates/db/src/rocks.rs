//! `rocksdb`: the embedded default, the real RocksDB through the `rocksdb` crate. One database
//! per process, shared by every worker, one column family per table, and YCSB's RocksDB value
//! layout so data and behaviour match YCSB's own binding.

use crate::{Db, DbError, DbFactory, Execution, Fields, Properties, PropertyError, Record, Status};
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, Env, FlushOptions,
    Options, WriteOptions, DB,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// How long closing waits for RocksDB's memtable flush.
const CLOSE_FLUSH_WAIT: Duration = Duration::from_secs(20);
/// How long a flush request may sit with no flush running before it is made again.
const CLOSE_FLUSH_RETRY: Duration = Duration::from_millis(200);

/// Property names this binding reads, for the unknown-property check.
pub const PROPERTIES: &[&str] = &[
    "rocksdb.dir",
    "rocksdb.optionsfile",
    "rocksdb.directreads",
    "rocksdb.directwrites",
    "rocksdb.blockcachesize",
    "rocksdb.writebuffersize",
    "rocksdb.compression",
    "rocksdb.sync",
    "rocksdb.disablewal",
    "rocksdb.backgroundjobs",
];

/// The "storage-bound" defaults: reads bypass the page cache and the block cache is small, so
/// a data set larger than a few megabytes is read from the device, as in the briefs where the
/// data far exceeded memory. Set `rocksdb.directreads=false` and a large
/// `rocksdb.blockcachesize` to measure a memory-bound configuration instead.
pub const DEFAULT_BLOCK_CACHE: u64 = 8 << 20;

/// The open database, shared by all workers of this process.
pub struct RocksFactory {
    /// Swapped for the database reopened after a restore (between steps, when no worker holds
    /// it); none when a restore could not open it again.
    db: RwLock<Option<Arc<DB>>>,
    /// The properties it was opened with, to open it again the same way.
    props: Properties,
    dir: PathBuf,
    table: String,
    /// Column family holding the table (the table's name, or `default` with an options file
    /// that has no section for it).
    cf_name: String,
    write_opts: Arc<WriteOptions>,
    update_locks: Arc<KeyLocks>,
}

/// Striped locks that make an update's read-merge-write atomic per key. YCSB's binding reads,
/// merges and writes back unlocked, so two workers updating different fields of one key at
/// once lose one update (the write of the second carries the first's old field): acknowledged
/// writes lost, which `versionedwrites` finds. An uncontended lock costs tens of nanoseconds.
struct KeyLocks(Box<[std::sync::Mutex<()>]>);

impl KeyLocks {
    const STRIPES: usize = 1024;

    fn new() -> Self {
        Self(
            (0..Self::STRIPES)
                .map(|_| std::sync::Mutex::new(()))
                .collect(),
        )
    }

    fn lock(&self, key: &str) -> std::sync::MutexGuard<'_, ()> {
        let h = key.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
        });
        self.0[(h % Self::STRIPES as u64) as usize]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The process holding RocksDB's lock on the database in `dir` (a POSIX lock on `dir/LOCK`), if
/// another process does; asked before wiping a data directory a running benchmark still uses.
pub fn lock_holder(dir: &Path) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("LOCK"))
        .ok()?;
    // SAFETY: flock is a plain C struct for which all-zero bytes are a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: F_GETLK fills the flock struct we own; the descriptor stays open for the call.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut fl) } != 0 {
        return None;
    }
    (fl.l_type != libc::F_UNLCK as libc::c_short).then_some(fl.l_pid as u32)
}

impl RocksFactory {
    /// Opens (or creates) the database under `rocksdb.dir` with the column family for `table`.
    pub fn open(props: &Properties) -> Result<Self, DbError> {
        let cfg = |e: PropertyError| DbError::Config(e.0);
        let dir = PathBuf::from(props.get("rocksdb.dir").ok_or_else(|| {
            DbError::Config("property rocksdb.dir is not set; give the database directory with -p rocksdb.dir=PATH".into())
        })?);
        let table = props.get_str("table", "usertable").to_string();
        std::fs::create_dir_all(&dir).map_err(|e| {
            DbError::Config(format!(
                "rocksdb.dir={}: cannot create the directory ({e}); choose a writable path with -p rocksdb.dir=PATH",
                dir.display()
            ))
        })?;
        let (db, cf_name) = open_db(props, &dir, &table)?;
        let mut write_opts = WriteOptions::default();
        write_opts.set_sync(props.get_bool("rocksdb.sync", false).map_err(cfg)?);
        write_opts.disable_wal(props.get_bool("rocksdb.disablewal", false).map_err(cfg)?);
        Ok(Self {
            db: RwLock::new(Some(Arc::new(db))),
            props: props.clone(),
            dir,
            table,
            cf_name,
            write_opts: Arc::new(write_opts),
            update_locks: Arc::new(KeyLocks::new()),
        })
    }

    /// The database as it is now.
    fn current(&self) -> Result<Arc<DB>, DbError> {
        self.db
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| {
                DbError::Unavailable(format!(
                    "the database in {} is closed: a restore could not open it again",
                    self.dir.display()
                ))
            })
    }
}

/// Opens the database in `dir` as `props` configure it: the database and the column family
/// holding `table`.
fn open_db(props: &Properties, dir: &Path, table: &str) -> Result<(DB, String), DbError> {
    let (db_opts, cfs, cf_name) = match props.get("rocksdb.optionsfile") {
        Some(file) => options_from_file(Path::new(file), table)?,
        None => {
            let (db_opts, cf_opts) = default_options(props)?;
            (
                db_opts,
                vec![ColumnFamilyDescriptor::new(table.to_string(), cf_opts)],
                table.to_string(),
            )
        }
    };
    let db = DB::open_cf_descriptors(&db_opts, dir, cfs).map_err(|e| open_error(dir, e))?;
    Ok((db, cf_name))
}

fn open_error(dir: &Path, e: rocksdb::Error) -> DbError {
    let msg = e.to_string();
    if msg.contains("lock") || msg.contains("LOCK") {
        DbError::Config(format!(
            "rocksdb.dir={}: the database is held by another process ({msg}); stop that process or use another directory with -p rocksdb.dir=PATH",
            dir.display()
        ))
    } else {
        DbError::Unavailable(format!(
            "rocksdb.dir={}: cannot open RocksDB: {msg}",
            dir.display()
        ))
    }
}

/// Parses a byte size such as `8388608`, `64K`, `8M`, `8MB`, `1G`.
pub fn parse_size(key: &str, value: &str) -> Result<u64, PropertyError> {
    let v = value.trim().to_ascii_uppercase();
    let v = v
        .strip_suffix("IB")
        .or_else(|| v.strip_suffix('B'))
        .unwrap_or(&v);
    let (num, mult) = match v.chars().last() {
        Some('K') => (&v[..v.len() - 1], 1u64 << 10),
        Some('M') => (&v[..v.len() - 1], 1 << 20),
        Some('G') => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| {
            PropertyError(format!(
                "property {key}={value}: expected a size in bytes such as 8388608, 64K, 8M or 1G"
            ))
        })
}

/// YCSB's RocksDB defaults (level-style compaction, parallelism from the core count) plus the
/// storage-bound read path described at [`DEFAULT_BLOCK_CACHE`].
fn default_options(props: &Properties) -> Result<(Options, Options), DbError> {
    let cfg = |e: PropertyError| DbError::Config(e.0);
    let cores = std::thread::available_parallelism()
        .map(std::num::NonZero::get)
        .unwrap_or(2) as i32;
    let mut db_opts = Options::default();
    db_opts.create_if_missing(true);
    db_opts.create_missing_column_families(true);
    db_opts.increase_parallelism(cores);
    let jobs = props
        .get_u64("rocksdb.backgroundjobs", (2 * cores) as u64)
        .map_err(cfg)?;
    db_opts.set_max_background_jobs(jobs.clamp(1, 256) as i32);
    db_opts.set_use_direct_reads(props.get_bool("rocksdb.directreads", true).map_err(cfg)?);
    db_opts.set_use_direct_io_for_flush_and_compaction(
        props.get_bool("rocksdb.directwrites", false).map_err(cfg)?,
    );

    let mut cf_opts = Options::default();
    cf_opts.optimize_level_style_compaction(512 << 20);
    if let Some(v) = props.get("rocksdb.writebuffersize") {
        cf_opts
            .set_write_buffer_size(parse_size("rocksdb.writebuffersize", v).map_err(cfg)? as usize);
    }
    let compression = props
        .get_choice("rocksdb.compression", "lz4", &["lz4", "none"])
        .map_err(cfg)?;
    cf_opts.set_compression_type(if compression == "lz4" {
        DBCompressionType::Lz4
    } else {
        DBCompressionType::None
    });
    let cache_bytes = match props.get("rocksdb.blockcachesize") {
        Some(v) => parse_size("rocksdb.blockcachesize", v).map_err(cfg)?,
        None => DEFAULT_BLOCK_CACHE,
    };
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(&Cache::new_lru_cache(cache_bytes as usize));
    cf_opts.set_block_based_table_factory(&table);
    Ok((db_opts, cf_opts))
}

/// Loads a RocksDB OPTIONS file (YCSB's `rocksdb.optionsfile`). The crate can only load the
/// latest OPTIONS file of a directory, so the file is staged in a private temporary directory.
/// Column-family options cannot be copied out of a loaded descriptor, so the table lives in the
/// file's section of the same name, or else in its `default` column family.
fn options_from_file(
    file: &Path,
    table: &str,
) -> Result<(Options, Vec<ColumnFamilyDescriptor>, String), DbError> {
    let bad = |why: String| {
        DbError::Config(format!(
            "rocksdb.optionsfile={}: {why}; give a RocksDB OPTIONS file (as written in a database directory)",
            file.display()
        ))
    };
    let text = std::fs::read(file).map_err(|e| bad(format!("cannot read it ({e})")))?;
    let stage = std::env::temp_dir().join(format!("iodig-rocksdb-options-{}", std::process::id()));
    std::fs::create_dir_all(&stage).map_err(|e| bad(e.to_string()))?;
    std::fs::write(stage.join("OPTIONS-000001"), text).map_err(|e| bad(e.to_string()))?;
    let env = Env::new().map_err(|e| bad(e.to_string()))?;
    let loaded = Options::load_latest(
        &stage,
        env,
        false,
        Cache::new_lru_cache(DEFAULT_BLOCK_CACHE as usize),
    );
    let _ = std::fs::remove_dir_all(&stage);
    let (mut db_opts, cfs) = loaded.map_err(|e| bad(e.to_string()))?;
    db_opts.create_if_missing(true);
    db_opts.create_missing_column_families(true);
    let cf_name = if cfs.iter().any(|cf| cf.name() == table) {
        table.to_string()
    } else {
        "default".to_string()
    };
    Ok((db_opts, cfs, cf_name))
}

impl RocksFactory {
    /// The open database, for benchmarks that compare the harness with bare RocksDB calls.
    pub fn db(&self) -> Arc<DB> {
        self.current().expect("the database is open")
    }

    /// The column family holding the workload's table.
    pub fn column_family(&self) -> &str {
        &self.cf_name
    }
}

impl DbFactory for RocksFactory {
    type Db = RocksDb;
    const NAME: &'static str = "rocksdb";
    const EXECUTION: Execution = Execution::Threads;

    fn worker(&self) -> Result<RocksDb, DbError> {
        Ok(RocksDb {
            db: self.current()?,
            table: self.table.clone(),
            cf_name: self.cf_name.clone(),
            write_opts: Arc::clone(&self.write_opts),
            update_locks: Arc::clone(&self.update_locks),
            current: Record::new(),
            buf: Vec::new(),
        })
    }

    fn data_dir(&self) -> Option<PathBuf> {
        Some(self.dir.clone())
    }

    fn events_since(&self, since_unix_ms: u64) -> Vec<iodig_model::events::DbEvent> {
        crate::rocks_log::events(&self.dir, since_unix_ms).unwrap_or_default()
    }

    fn version(&self) -> Option<String> {
        crate::rocks_log::version(&self.dir)
    }

    fn close(&self) -> Result<(), DbError> {
        // Flush memtables so the next invocation starts from the same on-disk state and the
        // WAL replay does not distort its first step.
        let Ok(db) = self.current() else {
            return Ok(());
        };
        let cf = db
            .cf_handle(&self.cf_name)
            .expect("column family opened with the database");
        close_flush(&db, &cf)
    }

    fn checkpoint(&self, to: &Path) -> Result<(), DbError> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            DbError::Unavailable(format!(
                "--restore-each-step: cannot {what} {}: {e}",
                to.display()
            ))
        };
        if to.exists() {
            std::fs::remove_dir_all(to).map_err(|e| failed("replace the checkpoint", &e))?;
        }
        // Memtables are flushed into it first (RocksDB's own checkpoint, hard links of the
        // immutable files on the same file system).
        let db = self.current()?;
        rocksdb::checkpoint::Checkpoint::new(&db)
            .and_then(|c| c.create_checkpoint(to))
            .map_err(|e| failed("make the checkpoint", &e))
    }

    fn restore(&self, from: &Path) -> Result<(), DbError> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            DbError::Unavailable(format!(
                "--restore-each-step: cannot {what} (from {} into {}): {e}",
                from.display(),
                self.dir.display()
            ))
        };
        let mut slot = self.db.write().unwrap_or_else(PoisonError::into_inner);
        // Closed before its files are replaced: every worker of the last step is gone, so
        // this is the last handle.
        if slot.as_ref().is_some_and(|db| Arc::strong_count(db) > 1) {
            return Err(failed("close the database", &"a worker still holds it"));
        }
        drop(slot.take());
        crate::rocks_restore::replace_state(&self.dir, from).map_err(|e| failed("put back", &e))?;
        let (db, _) = open_db(&self.props, &self.dir, &self.table)
            .map_err(|e| failed("open the restored database", &e))?;
        *slot = Some(Arc::new(db));
        Ok(())
    }
}

/// Flushes every memtable of `cf` without waiting inside RocksDB. A waiting manual flush can
/// hang forever when `min_write_buffer_number_to_merge` > 1 (YCSB's level-style defaults set 2)
/// and a "write buffer full" flush picks the memtables just before it: the memtable the manual
/// flush switched out is left alone below the merge threshold with nobody to flush it
/// (facebook/rocksdb#13280; seen here after a SIGTERM ended a step, about one close in six).
/// So the flush is only requested, the immutable memtables are watched, and the request is
/// repeated when one is left with no flush running, which marks it for flush again.
fn close_flush(db: &DB, cf: &impl rocksdb::AsColumnFamilyRef) -> Result<(), DbError> {
    let mut request = FlushOptions::default();
    request.set_wait(false);
    let failed = |e: rocksdb::Error| DbError::Unavailable(format!("rocksdb flush failed: {e}"));
    let property = |name: &str| db.property_int_value_cf(cf, name).ok().flatten();
    let started = Instant::now();
    let mut requested = Instant::now();
    db.flush_cf_opt(cf, &request).map_err(failed)?;
    loop {
        if property("rocksdb.num-immutable-mem-table") == Some(0) {
            return Ok(());
        }
        if started.elapsed() > CLOSE_FLUSH_WAIT {
            iodig_model::eprintln_lossy!(
                "warning: RocksDB's closing flush did not finish within {} s; its memtable stays in the write-ahead log, which the next run replays",
                CLOSE_FLUSH_WAIT.as_secs()
            );
            return Ok(());
        }
        let idle = property("rocksdb.num-running-flushes") == Some(0)
            && property("rocksdb.mem-table-flush-pending") == Some(0);
        if idle && requested.elapsed() > CLOSE_FLUSH_RETRY {
            db.flush_cf_opt(cf, &request).map_err(failed)?;
            requested = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One worker's handle on the shared database.
pub struct RocksDb {
    db: Arc<DB>,
    table: String,
    cf_name: String,
    write_opts: Arc<WriteOptions>,
    update_locks: Arc<KeyLocks>,
    /// Scratch record for update's read-merge-write.
    current: Record,
    buf: Vec<u8>,
}

impl RocksDb {
    /// Reads one record (no await: a key's lock may be held across it).
    fn get(&self, table: &str, key: &str, fields: Fields<'_>, out: &mut Record) -> Status {
        let got = self.with_cf(table, |cf| self.db.get_pinned_cf(cf, key));
        match got {
            Ok(Ok(Some(v))) if decode(&v, fields, out) => Status::Ok,
            Ok(Ok(Some(_))) => Status::UnexpectedState,
            Ok(Ok(None)) => Status::NotFound,
            Ok(Err(_)) => Status::Error,
            Err(s) => s,
        }
    }

    fn with_cf<R>(
        &self,
        table: &str,
        f: impl FnOnce(&rocksdb::ColumnFamily) -> R,
    ) -> Result<R, Status> {
        if table != self.table {
            return Err(Status::BadRequest);
        }
        self.db.cf_handle(&self.cf_name).map(f).ok_or(Status::Error)
    }

    fn put(&self, table: &str, key: &str, value: &[u8]) -> Status {
        match self.with_cf(table, |cf| {
            self.db.put_cf_opt(cf, key, value, &self.write_opts)
        }) {
            Ok(Ok(())) => Status::Ok,
            Ok(Err(_)) => Status::Error,
            Err(s) => s,
        }
    }
}

/// YCSB RocksDB layout: `[i32 BE name len][name][i32 BE value len][value]…`.
pub fn encode(values: &Record, out: &mut Vec<u8>) {
    out.clear();
    for (name, value) in values.iter() {
        out.extend_from_slice(&(name.len() as i32).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(value.len() as i32).to_be_bytes());
        out.extend_from_slice(value);
    }
}

/// Decodes the YCSB layout, keeping only `fields` when given. False on a corrupt value.
pub fn decode(bytes: &[u8], fields: Fields<'_>, out: &mut Record) -> bool {
    out.clear();
    let mut rest = bytes;
    loop {
        if rest.is_empty() {
            return true;
        }
        let Some(name) = next_chunk(&mut rest) else {
            return false;
        };
        let Some(value) = next_chunk(&mut rest) else {
            return false;
        };
        let Ok(name) = std::str::from_utf8(name) else {
            return false;
        };
        if fields.is_none_or(|f| f.iter().any(|n| n == name)) {
            out.push(name, value);
        }
    }
}

fn next_chunk<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len_bytes: [u8; 4] = rest.get(..4)?.try_into().ok()?;
    let len = usize::try_from(i32::from_be_bytes(len_bytes)).ok()?;
    let chunk = rest.get(4..4 + len)?;
    *rest = &rest[4 + len..];
    Some(chunk)
}

impl Db for RocksDb {
    async fn read(
        &mut self,
        table: &str,
        key: &str,
        fields: Fields<'_>,
        out: &mut Record,
    ) -> Status {
        self.get(table, key, fields, out)
    }

    async fn scan(
        &mut self,
        table: &str,
        start_key: &str,
        count: usize,
        fields: Fields<'_>,
        out: &mut Vec<Record>,
    ) -> Status {
        out.clear();
        let result = self.with_cf(table, |cf| {
            let mut it = self.db.raw_iterator_cf(cf);
            it.seek(start_key);
            while it.valid() && out.len() < count {
                let mut rec = Record::new();
                if !decode(it.value().unwrap_or_default(), fields, &mut rec) {
                    return Status::UnexpectedState;
                }
                out.push(rec);
                it.next();
            }
            match it.status() {
                Ok(()) => Status::Ok,
                Err(_) => Status::Error,
            }
        });
        result.unwrap_or_else(|s| s)
    }

    async fn update(&mut self, table: &str, key: &str, values: &Record) -> Status {
        // YCSB's binding: read the record, merge the new fields, write it back; under the key's
        // lock, so concurrent updates of one key do not lose each other's fields.
        let locks = Arc::clone(&self.update_locks);
        let _guard = locks.lock(key);
        let mut current = std::mem::take(&mut self.current);
        let status = self.get(table, key, None, &mut current);
        if status != Status::Ok {
            self.current = current;
            return status;
        }
        let mut merged = Record::new();
        for (name, value) in current.iter() {
            merged.push(name, values.get(name).unwrap_or(value));
        }
        for (name, value) in values.iter() {
            if current.get(name).is_none() {
                merged.push(name, value);
            }
        }
        self.current = current;
        let mut buf = std::mem::take(&mut self.buf);
        encode(&merged, &mut buf);
        let status = self.put(table, key, &buf);
        self.buf = buf;
        status
    }

    async fn insert(&mut self, table: &str, key: &str, values: &Record) -> Status {
        let mut buf = std::mem::take(&mut self.buf);
        encode(values, &mut buf);
        let status = self.put(table, key, &buf);
        self.buf = buf;
        status
    }

    async fn delete(&mut self, table: &str, key: &str) -> Status {
        match self.with_cf(table, |cf| self.db.delete_cf_opt(cf, key, &self.write_opts)) {
            Ok(Ok(())) => Status::Ok,
            Ok(Err(_)) => Status::Error,
            Err(s) => s,
        }
    }
}

#[cfg(test)]
#[path = "rocks_tests.rs"]
mod tests;
