//! The ledger as it was before the flat array (commit c3c650c, `crates/workload/src/integrity.rs`),
//! kept here only so the benchmark can measure it beside the current one: 40 bytes of state per
//! key in 256 locked shards, saved by rewriting the whole file under each shard's lock.
#![allow(dead_code, missing_docs)]

use std::io::{self, BufRead, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub const ALL_FIELDS: u16 = u16::MAX;
const FORMAT: &str = "iodig-ledger 1";
const SHARDS: usize = 256;

#[derive(Debug, Clone)]
pub struct KeyExpectation {
    fields: Vec<FieldState>,
    unacked_max: u64,
}

/// One write in flight: what [`Ledger::end`] needs to record its outcome.
#[derive(Debug, Clone, Copy)]
pub struct WriteTicket {
    /// The key number written.
    pub keynum: u64,
    /// The field index written, or [`ALL_FIELDS`].
    pub field: u16,
    /// The version the values carry: µs since the epoch, above every version the ledger issued
    /// before.
    pub version: u64,
    floor: u64,
}

/// What is known of one field of one key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FieldState {
    /// The field index, or [`ALL_FIELDS`] for writes of every field.
    pub field: u16,
    /// The highest acknowledged version, 0 when no write of it was acknowledged.
    pub acked: u64,
    /// The oldest version that may be stored after the `acked` write (overlapping writes).
    pub floor: u64,
}

/// What is known of one key: the last acknowledged write of every field together, the
/// single-field writes (YCSB's default update) only when there were any, and the newest write
/// whose outcome was not an acknowledgement. 40 bytes, kept densely by keynum.
#[derive(Debug, Default, Clone)]
struct KeyState {
    all: FieldState,
    fields: Option<Box<[FieldState]>>,
    unacked_max: u64,
}

impl KeyState {
    fn written(&self) -> bool {
        self.all.acked > 0 || self.unacked_max > 0 || self.fields.is_some()
    }

    fn entries(&self) -> impl Iterator<Item = FieldState> + '_ {
        (self.all.acked > 0)
            .then_some(self.all)
            .into_iter()
            .chain(self.fields.iter().flat_map(|f| f.iter().copied()))
    }

    fn entry_mut(&mut self, field: u16) -> &mut FieldState {
        if field == ALL_FIELDS {
            self.all.field = ALL_FIELDS;
            return &mut self.all;
        }
        let mut fields = self.fields.take().map(Vec::from).unwrap_or_default();
        let i = match fields.iter().position(|f| f.field == field) {
            Some(i) => i,
            None => {
                fields.push(FieldState {
                    field,
                    acked: 0,
                    floor: 0,
                });
                fields.len() - 1
            }
        };
        let fields = self.fields.insert(fields.into_boxed_slice());
        &mut fields[i]
    }
}

/// One shard: the keys whose keynum is its index modulo [`SHARDS`], at keynum / SHARDS, and
/// the writes in flight on them (few: at most one per worker).
#[derive(Debug, Default)]
struct Shard {
    keys: Vec<KeyState>,
    in_flight: Vec<(u64, u64)>,
}

impl Shard {
    fn key_mut(&mut self, keynum: u64) -> &mut KeyState {
        let i = (keynum / SHARDS as u64) as usize;
        if i >= self.keys.len() {
            self.keys.resize(i + 1, KeyState::default());
        }
        &mut self.keys[i]
    }

    fn key(&self, keynum: u64) -> Option<&KeyState> {
        self.keys
            .get((keynum / SHARDS as u64) as usize)
            .filter(|k| k.written())
    }
}

/// What is expected of one field when it is read: the stronger of its own writes and the
/// writes of every field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expectation {
    /// The last acknowledged version; a newer one read back is [`Verdict::Unacknowledged`].
    pub acked: u64,
    /// The oldest version a read may find without being [`Verdict::Stale`]: the oldest write in
    /// flight on the key when the `acked` one began.
    pub floor: u64,
    /// The newest version of the key's unacknowledged writes (failed, timed out); 0 when none.
    pub unacked_max: u64,
}

/// The judgement of one value read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The last acknowledged version, or one that overlapped it.
    Ok,
    /// Newer than every acknowledged write: a write that failed, timed out or was never
    /// recorded as acknowledged landed.
    Unacknowledged,
    /// Older than the last acknowledged write allows: an acknowledged update was lost.
    Stale,
    /// Not a value written to this key and field, or a version never issued for it.
    Corrupt,
}

/// Judges the version `read` (or `None` for a value that does not decode) against `expected`.
/// A value that decodes was written by iodig to this key and field at that version (its bytes
/// depend on all three), so a version above the last acknowledged one is a write whose
/// acknowledgement the ledger does not hold: failed, timed out, or after the ledger's last
/// save in a run that was killed. Only a value that does not decode is corrupt.
pub fn judge(expected: &Expectation, read: Option<u64>) -> Verdict {
    let Some(v) = read else {
        return Verdict::Corrupt;
    };
    if v >= expected.floor && v <= expected.acked {
        Verdict::Ok
    } else if v > expected.acked {
        Verdict::Unacknowledged
    } else {
        Verdict::Stale
    }
}

/// Counts of values judged during the run's own reads.
#[derive(Debug, Default)]
struct ReadCounts {
    checked: AtomicU64,
    stale: AtomicU64,
    corrupt: AtomicU64,
    missing: AtomicU64,
}

/// What the run's own reads found, judged against the writes acknowledged before each began.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadTally {
    /// Reads judged (every read of a key with an acknowledged write).
    pub checked: u64,
    /// Of those, reads with a value older than an acknowledged write allows.
    pub stale: u64,
    /// Of those, reads with a value iodig did not write.
    pub corrupt: u64,
    /// Of those, reads that found no record (NOT_FOUND) although its insert was acknowledged,
    /// or a record without a field the read asked for whose write was acknowledged.
    pub missing: u64,
}

/// The acknowledged writes of a run, shared by every worker of every step.
pub struct Ledger {
    shards: Box<[Mutex<Shard>]>,
    clock: AtomicU64,
    reads: ReadCounts,
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new()
    }
}

impl Ledger {
    /// An empty ledger: no key written yet, no read counted.
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            clock: AtomicU64::new(0),
            reads: ReadCounts::default(),
        }
    }

    fn shard(&self, keynum: u64) -> std::sync::MutexGuard<'_, Shard> {
        self.shards[(keynum % SHARDS as u64) as usize]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new version: the wall clock in microseconds, strictly above every earlier one.
    fn next_version(&self) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let mut last = self.clock.load(Ordering::Relaxed);
        loop {
            let v = now.max(last + 1);
            match self
                .clock
                .compare_exchange_weak(last, v, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return v,
                Err(seen) => last = seen,
            }
        }
    }

    /// Starts a write of `field` (or [`ALL_FIELDS`]) of `keynum`: its version, to be written
    /// into the values, and the ticket [`Ledger::end`] takes.
    pub fn begin(&self, keynum: u64, field: u16) -> WriteTicket {
        let mut shard = self.shard(keynum);
        // The version is taken under the key's lock, so versions of one key are issued in
        // the order the key's writes begin.
        let version = self.next_version();
        shard.in_flight.push((keynum, version));
        let floor = shard
            .in_flight
            .iter()
            .filter(|w| w.0 == keynum)
            .map(|w| w.1)
            .min()
            .unwrap_or(version);
        WriteTicket {
            keynum,
            field,
            version,
            floor,
        }
    }

    /// Records the outcome of a write: acknowledged or not (failed, timed out, unknown).
    pub fn end(&self, ticket: WriteTicket, acknowledged: bool) {
        let mut shard = self.shard(ticket.keynum);
        if let Some(i) = shard
            .in_flight
            .iter()
            .position(|&w| w == (ticket.keynum, ticket.version))
        {
            shard.in_flight.swap_remove(i);
        }
        let state = shard.key_mut(ticket.keynum);
        if !acknowledged {
            state.unacked_max = state.unacked_max.max(ticket.version);
            return;
        }
        let entry = state.entry_mut(ticket.field);
        if ticket.version > entry.acked {
            entry.acked = ticket.version;
            entry.floor = ticket.floor;
        }
    }

    /// What a read of `keynum` must find, per field index; `None` when the run never wrote it.
    pub fn expect(&self, keynum: u64) -> Option<KeyExpectation> {
        let shard = self.shard(keynum);
        shard.key(keynum).map(|s| KeyExpectation {
            fields: s.entries().collect(),
            unacked_max: s.unacked_max,
        })
    }

    /// Counts a value judged during a run's read.
    pub fn count_read(&self, verdict: Verdict) {
        self.reads.checked.fetch_add(1, Ordering::Relaxed);
        match verdict {
            Verdict::Stale => {
                self.reads.stale.fetch_add(1, Ordering::Relaxed);
            }
            Verdict::Corrupt => {
                self.reads.corrupt.fetch_add(1, Ordering::Relaxed);
            }
            Verdict::Ok | Verdict::Unacknowledged => {}
        }
    }

    /// Counts a read that found no record although a write of it was acknowledged.
    pub fn count_missing_read(&self) {
        self.reads.checked.fetch_add(1, Ordering::Relaxed);
        self.reads.missing.fetch_add(1, Ordering::Relaxed);
    }

    /// What the run's own reads found so far.
    pub fn read_counts(&self) -> ReadTally {
        ReadTally {
            checked: self.reads.checked.load(Ordering::Relaxed),
            stale: self.reads.stale.load(Ordering::Relaxed),
            corrupt: self.reads.corrupt.load(Ordering::Relaxed),
            missing: self.reads.missing.load(Ordering::Relaxed),
        }
    }

    /// Keys with at least one write, in ascending order.
    pub fn keys(&self) -> Vec<u64> {
        let mut keys: Vec<u64> = self
            .shards
            .iter()
            .enumerate()
            .flat_map(|(i, s)| {
                let shard = s.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                shard
                    .keys
                    .iter()
                    .enumerate()
                    .filter(|(_, k)| k.written())
                    .map(|(j, _)| j as u64 * SHARDS as u64 + i as u64)
                    .collect::<Vec<_>>()
            })
            .collect();
        keys.sort_unstable();
        keys
    }

    /// Writes the ledger: a line naming the format and the run's read counts, then one
    /// little-endian record per key (keynum, unacked_max, field count, then field, acked and
    /// floor per field). Writes in flight are not saved: they have no outcome yet.
    pub fn save(&self, out: &mut (impl Write + ?Sized)) -> io::Result<()> {
        let r = self.read_counts();
        writeln!(
            out,
            "{FORMAT} reads_checked={} stale_reads={} corrupt_reads={} missing_reads={}",
            r.checked, r.stale, r.corrupt, r.missing
        )?;
        for (i, shard) in self.shards.iter().enumerate() {
            let shard = shard
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (j, s) in shard.keys.iter().enumerate().filter(|(_, k)| k.written()) {
                let keynum = j as u64 * SHARDS as u64 + i as u64;
                let entries: Vec<FieldState> = s.entries().collect();
                out.write_all(&keynum.to_le_bytes())?;
                out.write_all(&s.unacked_max.to_le_bytes())?;
                out.write_all(&(entries.len() as u16).to_le_bytes())?;
                for f in &entries {
                    out.write_all(&f.field.to_le_bytes())?;
                    out.write_all(&f.acked.to_le_bytes())?;
                    out.write_all(&f.floor.to_le_bytes())?;
                }
            }
        }
        Ok(())
    }

    /// Reads a ledger [`Ledger::save`] wrote.
    pub fn load(input: &mut impl BufRead) -> io::Result<Ledger> {
        let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
        let mut line = String::new();
        input.read_line(&mut line)?;
        let rest = line
            .trim_end()
            .strip_prefix(FORMAT)
            .ok_or_else(|| bad("not an iodig ledger (its first line does not name the format)"))?;
        let ledger = Ledger::new();
        for pair in rest.split_whitespace() {
            let (name, value) = pair.split_once('=').ok_or_else(|| bad("bad header"))?;
            let value: u64 = value.parse().map_err(|_| bad("bad header count"))?;
            match name {
                "reads_checked" => ledger.reads.checked.store(value, Ordering::Relaxed),
                "stale_reads" => ledger.reads.stale.store(value, Ordering::Relaxed),
                "corrupt_reads" => ledger.reads.corrupt.store(value, Ordering::Relaxed),
                "missing_reads" => ledger.reads.missing.store(value, Ordering::Relaxed),
                _ => {}
            }
        }
        let mut u64_buf = [0u8; 8];
        let mut u16_buf = [0u8; 2];
        loop {
            match input.read_exact(&mut u64_buf) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(e),
            }
            let keynum = u64::from_le_bytes(u64_buf);
            let truncated = |_| bad("the ledger is cut short");
            input.read_exact(&mut u64_buf).map_err(truncated)?;
            let unacked_max = u64::from_le_bytes(u64_buf);
            input.read_exact(&mut u16_buf).map_err(truncated)?;
            let n = u16::from_le_bytes(u16_buf);
            let mut fields = Vec::with_capacity(usize::from(n));
            for _ in 0..n {
                input.read_exact(&mut u16_buf).map_err(truncated)?;
                let field = u16::from_le_bytes(u16_buf);
                input.read_exact(&mut u64_buf).map_err(truncated)?;
                let acked = u64::from_le_bytes(u64_buf);
                input.read_exact(&mut u64_buf).map_err(truncated)?;
                let floor = u64::from_le_bytes(u64_buf);
                fields.push(FieldState {
                    field,
                    acked,
                    floor,
                });
            }
            let mut shard = ledger.shard(keynum);
            let state = shard.key_mut(keynum);
            state.unacked_max = unacked_max;
            for f in fields {
                *state.entry_mut(f.field) = f;
            }
        }
        Ok(ledger)
    }
}
