//! The ledger in memory: one 8-byte word per key number in a flat array (the last acknowledged
//! write of every field, for the common key nothing else happened to), and the rare richer
//! facts (an overlapping write's floor, single-field writes, writes not acknowledged) kept
//! sparsely beside it. It also keeps which keys changed since the last save, so a save costs
//! what changed.

use super::{FieldState, KeyExpectation, ReadTally, Verdict, WriteTicket, ALL_FIELDS};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The low bits of a word: the version of the key's last acknowledged write of every field,
/// 0 for none. Versions are µs since 1970, below 2^52 until the year 2112; a key whose version
/// does not fit is kept with the sparse facts.
pub(super) const VERSION_MASK: u64 = (1 << 52) - 1;
/// The key changed since the saver last took it (and is on its shard's list of changes).
const DIRTY: u64 = 1 << 62;
/// The key's state is in its shard's sparse map, not in the word.
const EXTRA: u64 = 1 << 63;
/// Keys per segment of the flat array: 32 MiB of address space, zero pages until written.
const SEGMENT_BITS: u32 = 22;
const SEGMENT_KEYS: usize = 1 << SEGMENT_BITS;
/// Segments the flat array can hold: key numbers below 2^38 (2.7 × 10^11) are kept flat;
/// higher ones (a far `insertstart`) live in the sparse map, correct but not compact.
const SEGMENTS: usize = 1 << 16;
pub(super) const FLAT_KEYS: u64 = (SEGMENTS as u64) << SEGMENT_BITS;
/// Shards of the sparse facts and of the writes in flight, by keynum: enough that 1,024
/// workers rarely wait on one another.
const SHARDS: usize = 256;

/// What is known of one key when it is more than a word: the last acknowledged write of every
/// field together, the single-field writes (YCSB's default update) only when there were any,
/// and the newest write whose outcome was not an acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeyState {
    pub(super) all: FieldState,
    pub(super) fields: Option<Box<[FieldState]>>,
    pub(super) unacked_max: u64,
}

impl KeyState {
    pub(super) fn empty() -> Self {
        Self::plain(0)
    }

    /// A key whose only fact is its last write of every field, acknowledged at `version` with
    /// no write overlapping it.
    pub(super) fn plain(version: u64) -> Self {
        Self {
            all: FieldState {
                field: ALL_FIELDS,
                acked: version,
                floor: version,
            },
            fields: None,
            unacked_max: 0,
        }
    }

    /// Whether the word alone can say it.
    fn is_plain(&self) -> bool {
        self.fields.is_none()
            && self.unacked_max == 0
            && self.all.floor == self.all.acked
            && self.all.acked <= VERSION_MASK
    }

    pub(super) fn written(&self) -> bool {
        self.all.acked > 0 || self.unacked_max > 0 || self.fields.is_some()
    }

    pub(super) fn entries(&self) -> impl Iterator<Item = FieldState> + '_ {
        (self.all.acked > 0)
            .then_some(self.all)
            .into_iter()
            .chain(self.fields.iter().flat_map(|f| f.iter().copied()))
    }

    pub(super) fn entry_mut(&mut self, field: u16) -> &mut FieldState {
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

/// A key's state as a save writes it: a word's version, or the whole state.
pub(super) enum Saved {
    Plain(u64),
    Full(KeyState),
}

/// Hashes a key number with one multiplication (Fibonacci hashing): key numbers are not chosen
/// by an adversary, and the sparse map is looked up on every write of a key that lives in it.
#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type KeyMap = HashMap<u64, KeyState, std::hash::BuildHasherDefault<KeyHasher>>;

/// The keys changed since the last save: plain ones as (keynum, version), in key order, and the
/// others already encoded as records (`full`, each ending at the offset in `full_ends`).
#[derive(Default)]
pub(super) struct Changes {
    pub(super) plain: Vec<(u64, u64)>,
    pub(super) full: Vec<u8>,
    pub(super) full_ends: Vec<usize>,
}

/// One shard: the writes in flight on its keys (few: at most one per worker), the keys whose
/// state is more than a word (and every key beyond the flat array), and the keys changed since
/// the last save.
#[derive(Debug, Default)]
struct Shard {
    in_flight: Vec<(u64, u64)>,
    extras: KeyMap,
    changed: Vec<u64>,
}

/// Counts of values judged during the run's own reads.
#[derive(Debug, Default)]
struct ReadCounts {
    checked: AtomicU64,
    stale: AtomicU64,
    corrupt: AtomicU64,
    missing: AtomicU64,
}

/// The acknowledged writes of a run, shared by every worker of every step.
pub struct Ledger {
    flat: Box<[OnceLock<Box<[AtomicU64]>>]>,
    /// One past the highest key number held in the flat array.
    flat_end: AtomicU64,
    shards: Box<[Mutex<Shard>]>,
    clock: AtomicU64,
    reads: ReadCounts,
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new()
    }
}

/// A segment of zeroed words, allocated zeroed so the system hands out pages only as keys in
/// them are written: a ledger for 10^9 keys costs nothing until the keys are.
fn zeroed_words(n: usize) -> Box<[AtomicU64]> {
    let layout = std::alloc::Layout::array::<AtomicU64>(n).expect("a segment's size fits");
    assert!(layout.size() > 0, "segments are never empty");
    // SAFETY: the layout is non-zero in size (checked above); a null return is handled; zero
    // bytes are a valid AtomicU64 (0), and the allocation has exactly the layout of
    // `[AtomicU64; n]`, which is what Box<[AtomicU64]> frees it with.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<AtomicU64>();
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n))
    }
}

impl Ledger {
    /// An empty ledger: no key written yet, no read counted.
    pub fn new() -> Self {
        Self {
            flat: (0..SEGMENTS).map(|_| OnceLock::new()).collect(),
            flat_end: AtomicU64::new(0),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            clock: AtomicU64::new(0),
            reads: ReadCounts::default(),
        }
    }

    fn shard(&self, keynum: u64) -> MutexGuard<'_, Shard> {
        lock(&self.shards[(keynum % SHARDS as u64) as usize])
    }

    /// The word of `keynum`, when its segment exists.
    fn word(&self, keynum: u64) -> Option<&AtomicU64> {
        if keynum >= FLAT_KEYS {
            return None;
        }
        let segment = self.flat[(keynum >> SEGMENT_BITS) as usize].get()?;
        Some(&segment[keynum as usize & (SEGMENT_KEYS - 1)])
    }

    /// The word of `keynum`, its segment made when missing; `None` beyond the flat array.
    fn word_or_make(&self, keynum: u64) -> Option<&AtomicU64> {
        if keynum >= FLAT_KEYS {
            return None;
        }
        let segment =
            self.flat[(keynum >> SEGMENT_BITS) as usize].get_or_init(|| zeroed_words(SEGMENT_KEYS));
        Some(&segment[keynum as usize & (SEGMENT_KEYS - 1)])
    }

    /// The state of `keynum`, read under its shard's lock (`shard`): the word's flag says
    /// whether to look in the sparse map, so the common key costs no hashing.
    fn state_in(&self, shard: &Shard, keynum: u64) -> Option<KeyState> {
        if let Some(word) = self.word(keynum) {
            let w = word.load(Ordering::Acquire);
            if w & EXTRA == 0 {
                let version = w & VERSION_MASK;
                return (version > 0).then(|| KeyState::plain(version));
            }
        }
        shard.extras.get(&keynum).cloned()
    }

    /// Replaces the state of `keynum` under its shard's lock; `track` puts it on the list of
    /// changes the next save writes (not when the state comes from a saved ledger).
    fn store_in(&self, shard: &mut Shard, keynum: u64, state: KeyState, track: bool) {
        let Some(word) = self.word_or_make(keynum) else {
            shard.extras.insert(keynum, state);
            if track {
                shard.changed.push(keynum);
            }
            return;
        };
        self.extend_flat_end(keynum);
        let plain = state.is_plain();
        let new = if plain {
            state.all.acked
        } else {
            // In the map before the word says so: a reader seeing the flag finds the state.
            shard.extras.insert(keynum, state);
            EXTRA
        };
        // One atomic swap, so a save clearing DIRTY either sees the new word or leaves the
        // flag for this write to find clear and list the key again.
        let before = word.swap(new | if track { DIRTY } else { 0 }, Ordering::AcqRel);
        if plain && before & EXTRA != 0 {
            shard.extras.remove(&keynum);
        }
        if track && before & DIRTY == 0 {
            shard.changed.push(keynum);
        }
    }

    /// Makes the flat array's end cover `keynum`. Read first: every worker writes keys, and a
    /// write to this one shared word for each would bounce its cache line between the cores.
    fn extend_flat_end(&self, keynum: u64) {
        if self.flat_end.load(Ordering::Relaxed) <= keynum {
            self.flat_end.fetch_max(keynum + 1, Ordering::AcqRel);
        }
    }

    /// Sets the saved state of `keynum` while a ledger is read back.
    pub(super) fn restore(&self, keynum: u64, state: &KeyState) {
        if state.is_plain() && keynum < FLAT_KEYS {
            // The common key, without the shard's lock: only the reader touches the ledger.
            let word = self.word_or_make(keynum).expect("below FLAT_KEYS");
            let before = word.swap(state.all.acked, Ordering::AcqRel);
            self.extend_flat_end(keynum);
            if before & EXTRA != 0 {
                self.shard(keynum).extras.remove(&keynum);
            }
            return;
        }
        let mut shard = self.shard(keynum);
        self.store_in(&mut shard, keynum, state.clone(), false);
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
        let mut guard = self.shard(ticket.keynum);
        let shard = &mut *guard;
        if let Some(i) = shard
            .in_flight
            .iter()
            .position(|&w| w == (ticket.keynum, ticket.version))
        {
            shard.in_flight.swap_remove(i);
        }
        let record = |state: &mut KeyState| {
            if acknowledged {
                let entry = state.entry_mut(ticket.field);
                if ticket.version > entry.acked {
                    entry.acked = ticket.version;
                    entry.floor = ticket.floor;
                }
            } else {
                state.unacked_max = state.unacked_max.max(ticket.version);
            }
        };
        let word = self.word_or_make(ticket.keynum);
        let in_map = word.is_none_or(|w| w.load(Ordering::Acquire) & EXTRA != 0);
        if !in_map {
            let mut state = self
                .state_in(shard, ticket.keynum)
                .unwrap_or_else(KeyState::empty);
            record(&mut state);
            self.store_in(shard, ticket.keynum, state, true);
            return;
        }
        // Changed where it lies, without taking it out of the map and putting it back.
        let state = shard
            .extras
            .entry(ticket.keynum)
            .or_insert_with(KeyState::empty);
        record(state);
        match word {
            Some(_) if state.is_plain() => {
                let state = shard.extras.remove(&ticket.keynum).expect("just changed");
                self.store_in(shard, ticket.keynum, state, true);
            }
            Some(w) => {
                if w.fetch_or(DIRTY, Ordering::AcqRel) & DIRTY == 0 {
                    shard.changed.push(ticket.keynum);
                }
            }
            None => shard.changed.push(ticket.keynum),
        }
    }

    /// What a read of `keynum` must find, per field index; `None` when the run never wrote it.
    pub fn expect(&self, keynum: u64) -> Option<KeyExpectation> {
        if keynum < FLAT_KEYS {
            // Most keys are a word: read without the shard's lock.
            let w = self.word(keynum)?.load(Ordering::Acquire);
            if w & EXTRA == 0 {
                let version = w & VERSION_MASK;
                return (version > 0).then(|| KeyExpectation {
                    fields: vec![KeyState::plain(version).all],
                    unacked_max: 0,
                });
            }
        }
        let shard = self.shard(keynum);
        if let Some(s) = shard.extras.get(&keynum) {
            return s.written().then(|| KeyExpectation {
                fields: s.entries().collect(),
                unacked_max: s.unacked_max,
            });
        }
        // Changed back to a word since it was looked at.
        let version = self.word(keynum)?.load(Ordering::Acquire) & VERSION_MASK;
        (version > 0).then(|| KeyExpectation {
            fields: vec![KeyState::plain(version).all],
            unacked_max: 0,
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

    /// Sets the read counts: those of a saved ledger, or, when a ledger is rewound to an
    /// earlier state of the dataset, the reads the run made before.
    pub fn set_read_counts(&self, r: ReadTally) {
        self.reads.checked.store(r.checked, Ordering::Relaxed);
        self.reads.stale.store(r.stale, Ordering::Relaxed);
        self.reads.corrupt.store(r.corrupt, Ordering::Relaxed);
        self.reads.missing.store(r.missing, Ordering::Relaxed);
    }

    /// Keys with at least one write, in ascending order. Costs 8 bytes a key: a check of
    /// many keys walks them with [`Ledger::keys_from`] instead.
    pub fn keys(&self) -> Vec<u64> {
        let mut keys = Vec::new();
        let mut from = 0;
        while let Some(next) = self.keys_from(from, u64::MAX, 1 << 16, &mut keys) {
            from = next;
        }
        keys
    }

    /// How many keys have at least one write.
    pub fn key_count(&self) -> u64 {
        let mut count = 0u64;
        self.for_each_word(0, self.flat_end.load(Ordering::Acquire), |_, _| {
            count += 1;
            true
        });
        count + self.beyond_flat().len() as u64
    }

    /// One past the highest key number a save or a check has to look at in the flat array;
    /// keys beyond it, if any, are at or above [`Ledger::FLAT_KEYS`].
    pub fn flat_end(&self) -> u64 {
        self.flat_end.load(Ordering::Acquire)
    }

    /// Key numbers from which on keys are no longer kept in the flat array.
    pub const FLAT_KEYS: u64 = FLAT_KEYS;

    /// Appends to `out` the written keys in `from..to`, in ascending order, at most `max` of
    /// them; returns where to go on from, or `None` when the range is done.
    pub fn keys_from(&self, from: u64, to: u64, max: usize, out: &mut Vec<u64>) -> Option<u64> {
        let end = to.min(self.flat_end.load(Ordering::Acquire));
        let mut taken = 0;
        let mut resume = None;
        if from < end {
            self.for_each_word(from, end, |keynum, _| {
                if taken == max {
                    resume = Some(keynum);
                    return false;
                }
                out.push(keynum);
                taken += 1;
                true
            });
        }
        if resume.is_some() {
            return resume;
        }
        if to > FLAT_KEYS {
            // Keys beyond the flat array: few, taken in one go.
            let mut beyond: Vec<u64> = self
                .beyond_flat()
                .into_iter()
                .filter(|&k| k >= from && k < to)
                .collect();
            beyond.sort_unstable();
            out.extend(beyond);
        }
        None
    }

    /// Calls `f` with each written key in `from..to` of the flat array and its word, in
    /// ascending order, until `f` says stop.
    fn for_each_word(&self, from: u64, to: u64, mut f: impl FnMut(u64, u64) -> bool) {
        let to = to.min(FLAT_KEYS);
        let mut keynum = from;
        while keynum < to {
            let segment_start = keynum & !(SEGMENT_KEYS as u64 - 1);
            let segment_end = (segment_start + SEGMENT_KEYS as u64).min(to);
            let Some(segment) = self.flat[(keynum >> SEGMENT_BITS) as usize].get() else {
                keynum = segment_end;
                continue;
            };
            let lo = (keynum - segment_start) as usize;
            let hi = (segment_end - segment_start) as usize;
            for (i, word) in segment[lo..hi].iter().enumerate() {
                let w = word.load(Ordering::Acquire);
                if w & (VERSION_MASK | EXTRA) != 0 && !f(keynum + i as u64, w) {
                    return;
                }
            }
            keynum = segment_end;
        }
    }

    /// Keys at or above [`FLAT_KEYS`], unordered.
    fn beyond_flat(&self) -> Vec<u64> {
        self.shards
            .iter()
            .flat_map(|s| {
                lock(s)
                    .extras
                    .keys()
                    .copied()
                    .filter(|&k| k >= FLAT_KEYS)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Every written key's state, in ascending key order within the flat array (then the keys
    /// beyond it), for a snapshot. Workers go on meanwhile: a key's lock is taken only to read a
    /// state that is more than a word, and only for that key.
    pub(super) fn for_each_saved(
        &self,
        mut f: impl FnMut(u64, Saved) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let mut result = Ok(());
        self.for_each_word(0, self.flat_end.load(Ordering::Acquire), |keynum, w| {
            let saved = if w & EXTRA == 0 {
                Saved::Plain(w & VERSION_MASK)
            } else {
                match self.state_in(&self.shard(keynum), keynum) {
                    Some(s) => Saved::Full(s),
                    None => return true,
                }
            };
            result = f(keynum, saved);
            result.is_ok()
        });
        result?;
        let mut beyond = self.beyond_flat();
        beyond.sort_unstable();
        for keynum in beyond {
            if let Some(s) = self.state_in(&self.shard(keynum), keynum) {
                f(keynum, Saved::Full(s))?;
            }
        }
        Ok(())
    }

    /// Takes the keys changed since the last call with their states now; a key changed again
    /// meanwhile is listed again for the next call. Workers wait on a shard only while its list
    /// is swapped out, or while a few dozen of its keys are read: a key with more than a word
    /// is encoded right there, with no copy made of it.
    pub(super) fn take_changes(&self) -> Changes {
        let mut changes = Changes::default();
        for s in &*self.shards {
            let mut keys = std::mem::take(&mut lock(s).changed);
            keys.sort_unstable();
            keys.dedup();
            for chunk in keys.chunks(32) {
                let shard = lock(s);
                for &keynum in chunk {
                    if let Some(word) = self.word(keynum) {
                        let w = word.fetch_and(!DIRTY, Ordering::AcqRel);
                        if w & EXTRA == 0 {
                            changes.plain.push((keynum, w & VERSION_MASK));
                            continue;
                        }
                    }
                    if let Some(state) = shard.extras.get(&keynum) {
                        super::journal::encode_full(&mut changes.full, keynum, state);
                        changes.full_ends.push(changes.full.len());
                    }
                }
            }
        }
        // In key order, so keys changed together (a load) make runs of plain keys.
        changes.plain.sort_unstable_by_key(|c| c.0);
        changes
    }

    /// Forgets the changes listed so far: a snapshot taken next holds them.
    pub(super) fn forget_changes(&self) {
        for s in &*self.shards {
            let keys = std::mem::take(&mut lock(s).changed);
            for keynum in keys {
                if let Some(word) = self.word(keynum) {
                    word.fetch_and(!DIRTY, Ordering::AcqRel);
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
