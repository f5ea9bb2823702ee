//! Versioned writes (`versionedwrites=true`): every written value carries the version of its
//! write, and the [`Ledger`] remembers, per key and field, the last acknowledged version and the
//! oldest version that may still legitimately be the stored one. A value read back is then
//! judged ok, stale, corrupt or from a write that was never acknowledged ([`Verdict`]).
//!
//! Versions are microseconds since the epoch, made strictly increasing within the process, so
//! a later write always has a higher version. Two writes to one key that overlap in time may
//! land in either order; the ledger keeps, with each acknowledged write, the oldest write that
//! was still in flight on that key when it was issued (its *floor*), and accepts any version
//! from the floor up. Anything older was acknowledged before the last acknowledged write began:
//! reading it back is a lost update.
//!
//! The ledger is held by key number in a flat array of 8 bytes per key ([`ledger`]), and written
//! to disk as a snapshot followed by appended batches of the keys changed since
//! ([`journal`]), so saving it costs what changed, not what it holds.

mod journal;
mod ledger;

pub use journal::Loaded;
pub use ledger::Ledger;

use std::io::Write;

/// The property that turns versioned writes on.
pub const PROPERTY: &str = "versionedwrites";
/// Bytes of a value taken by its version: 16 hex digits and `:`.
pub const HEADER_LEN: usize = 17;
/// Field index of a write that set every field (inserts, `writeallfields` updates).
pub const ALL_FIELDS: u16 = u16::MAX;

/// Writes the value of `field` of `key` at `version`, `len` bytes long (at least
/// [`HEADER_LEN`]): the version in hex, then printable bytes derived from key, field and
/// version, so a value moved, cut or garbled no longer checks.
pub fn encode(key: &str, field: &str, version: u64, len: usize, out: &mut Vec<u8>) {
    let start = out.len();
    let _ = write!(out, "{version:016x}:");
    let mut state = seed(key, field, version, len);
    while out.len() - start < len {
        // xorshift64*: cheap, and every byte depends on the seed.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let bits = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        for k in 0..8 {
            if out.len() - start == len {
                break;
            }
            out.push(b'!' + ((bits >> (8 * k)) as u8 % 90));
        }
    }
}

/// The version a value carries, or `None` when it is not a value [`encode`] wrote for this key
/// and field (corrupt).
pub fn decode(key: &str, field: &str, value: &[u8]) -> Option<u64> {
    if value.len() < HEADER_LEN || value[HEADER_LEN - 1] != b':' {
        return None;
    }
    let hex = std::str::from_utf8(&value[..HEADER_LEN - 1]).ok()?;
    let version = u64::from_str_radix(hex, 16).ok()?;
    let mut expected = Vec::with_capacity(value.len());
    encode(key, field, version, value.len(), &mut expected);
    (expected == value).then_some(version)
}

/// FNV-1a of key, field, version and length (so a cut value no longer checks), never 0
/// (xorshift's fixed point).
fn seed(key: &str, field: &str, version: u64, len: usize) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in key
        .bytes()
        .chain([0])
        .chain(field.bytes())
        .chain(version.to_le_bytes())
        .chain((len as u64).to_le_bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h | 1
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

/// A key's acknowledged writes, as a read must find them.
#[derive(Debug, Clone)]
pub struct KeyExpectation {
    fields: Vec<FieldState>,
    unacked_max: u64,
}

impl KeyExpectation {
    /// What field `field` must hold: the later of its own last acknowledged write and the last
    /// one that set every field. `None` when neither was acknowledged.
    pub fn field(&self, field: u16) -> Option<Expectation> {
        let own = self.fields.iter().find(|f| f.field == field);
        let all = self.fields.iter().find(|f| f.field == ALL_FIELDS);
        let best = match (own, all) {
            (Some(a), Some(b)) => {
                if a.acked >= b.acked {
                    a
                } else {
                    b
                }
            }
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return None,
        };
        (best.acked > 0).then_some(Expectation {
            acked: best.acked,
            floor: best.floor,
            unacked_max: self.unacked_max,
        })
    }

    /// Whether some write of this key was acknowledged (so the record must exist).
    pub fn any_acknowledged(&self) -> bool {
        self.fields.iter().any(|f| f.acked > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_catch_tampering() {
        let mut v = Vec::new();
        encode("user42", "field3", 0x1234_5678_9abc, 100, &mut v);
        assert_eq!(v.len(), 100);
        assert!(v.starts_with(b"000012345678"));
        assert_eq!(decode("user42", "field3", &v), Some(0x1234_5678_9abc));
        // Another key, another field, a cut value or one flipped byte do not check.
        assert_eq!(decode("user43", "field3", &v), None);
        assert_eq!(decode("user42", "field4", &v), None);
        assert_eq!(
            decode("user42", "field3", &v[..99]),
            None,
            "cut values are corrupt"
        );
        let mut flipped = v.clone();
        flipped[60] ^= 1;
        assert_eq!(decode("user42", "field3", &flipped), None);
        assert_eq!(decode("user42", "field3", b"short"), None);
    }

    #[test]
    fn a_lost_acknowledged_update_is_stale_and_overlapping_writes_are_not() {
        let ledger = Ledger::new();
        let first = ledger.begin(7, 0);
        ledger.end(first, true);
        let second = ledger.begin(7, 0);
        ledger.end(second, true);
        let e = ledger.expect(7).unwrap().field(0).unwrap();
        assert_eq!(judge(&e, Some(second.version)), Verdict::Ok);
        assert_eq!(judge(&e, Some(first.version)), Verdict::Stale);
        assert_eq!(judge(&e, None), Verdict::Corrupt);
        assert_eq!(judge(&e, Some(second.version + 5)), Verdict::Unacknowledged);

        // Two writes in flight together: either may be the one stored.
        let a = ledger.begin(8, 1);
        let b = ledger.begin(8, 1);
        ledger.end(b, true);
        ledger.end(a, true);
        let e = ledger.expect(8).unwrap().field(1).unwrap();
        assert_eq!(e.acked, b.version);
        assert_eq!(judge(&e, Some(a.version)), Verdict::Ok);
        assert_eq!(judge(&e, Some(b.version)), Verdict::Ok);
    }

    #[test]
    fn writes_of_every_field_and_failed_writes_count() {
        let ledger = Ledger::new();
        let insert = ledger.begin(1, ALL_FIELDS);
        ledger.end(insert, true);
        let update = ledger.begin(1, 2);
        ledger.end(update, true);
        let failed = ledger.begin(1, 3);
        ledger.end(failed, false);
        let k = ledger.expect(1).unwrap();
        assert!(k.any_acknowledged());
        // Field 2 was updated after the insert; field 3 still holds the insert's version.
        assert_eq!(k.field(2).unwrap().acked, update.version);
        assert_eq!(k.field(3).unwrap().acked, insert.version);
        let e3 = k.field(3).unwrap();
        assert_eq!(judge(&e3, Some(failed.version)), Verdict::Unacknowledged);
        // A key only ever written by failed writes may be absent.
        let lost = ledger.begin(2, ALL_FIELDS);
        ledger.end(lost, false);
        assert!(!ledger.expect(2).unwrap().any_acknowledged());
        assert!(ledger.expect(3).is_none());
    }

    #[test]
    fn the_ledger_survives_a_save_and_load() {
        let ledger = Ledger::new();
        for k in 0..100 {
            let t = ledger.begin(k, ALL_FIELDS);
            ledger.end(t, k % 7 != 0);
        }
        ledger.count_read(Verdict::Stale);
        ledger.count_read(Verdict::Ok);
        ledger.count_missing_read();
        let mut bytes = Vec::new();
        ledger.save(&mut bytes).unwrap();
        let back = Ledger::load(&mut bytes.as_slice()).unwrap();
        assert_eq!(back.keys(), ledger.keys());
        assert_eq!(
            back.read_counts(),
            ReadTally {
                checked: 3,
                stale: 1,
                corrupt: 0,
                missing: 1
            }
        );
        for k in 0..100 {
            assert_eq!(
                back.expect(k).unwrap().field(0),
                ledger.expect(k).unwrap().field(0)
            );
        }
        assert!(Ledger::load(&mut &b"something else\n"[..]).is_err());
        assert!(Ledger::load(&mut &bytes[..bytes.len() - 3]).is_err());
    }

    /// Every key's expectation of every field, for comparing ledgers.
    fn expectations(ledger: &Ledger) -> Vec<(u64, Vec<Option<Expectation>>, bool)> {
        ledger
            .keys()
            .into_iter()
            .map(|k| {
                let e = ledger.expect(k).unwrap();
                let fields = (0..4).chain([ALL_FIELDS]).map(|f| e.field(f)).collect();
                (k, fields, e.any_acknowledged())
            })
            .collect()
    }

    /// Keys of every kind: plain inserts in a run, overlapping writes, single-field updates,
    /// failed writes, and a key beyond the flat array.
    fn write_some(ledger: &Ledger, round: u64) {
        for k in 0..300 {
            let t = ledger.begin(k, ALL_FIELDS);
            ledger.end(t, true);
        }
        let a = ledger.begin(400 + round, 1);
        let b = ledger.begin(400 + round, 1);
        ledger.end(b, true);
        ledger.end(a, true);
        let u = ledger.begin(7 + round, 2);
        ledger.end(u, true);
        let f = ledger.begin(9, 3);
        ledger.end(f, false);
        let far = ledger.begin(Ledger::FLAT_KEYS + 5 + round, ALL_FIELDS);
        ledger.end(far, true);
        ledger.count_read(Verdict::Ok);
    }

    #[test]
    fn a_save_appends_only_what_changed_and_a_batch_cut_short_reads_as_before_it() {
        let ledger = Ledger::new();
        write_some(&ledger, 0);
        let mut file = Vec::new();
        ledger.save_from_scratch(&mut file).unwrap();
        let snapshot_len = file.len();
        // 300 plain keys in a row cost about 8 bytes each.
        assert!(snapshot_len < 300 * 8 + 400, "{snapshot_len} bytes");
        let before = expectations(&Ledger::load(&mut file.as_slice()).unwrap());
        assert_eq!(before, expectations(&ledger));

        assert_eq!(
            ledger.save_changes(&mut file).unwrap(),
            0,
            "nothing changed"
        );
        let t = ledger.begin(3, 1);
        ledger.end(t, true);
        write_some(&ledger, 1);
        let batch_start = file.len();
        let changed = ledger.save_changes(&mut file).unwrap();
        // Keys 0..300 (among them 3, 8 and 9), 401 and the one beyond the flat array.
        assert_eq!(changed, 300 + 2, "each changed key once");
        let after = expectations(&ledger);
        let loaded = Ledger::load_noting_tail(&mut file.as_slice()).unwrap();
        assert_eq!(loaded.ignored_bytes, 0);
        assert_eq!(expectations(&loaded.ledger), after);
        assert_eq!(loaded.ledger.read_counts(), ledger.read_counts());

        // A kill at any byte of the batch: the ledger reads back as the snapshot had it, every
        // change of the batch dropped with the cut block.
        for cut in batch_start..file.len() {
            let loaded = Ledger::load_noting_tail(&mut &file[..cut]).unwrap();
            assert_eq!(expectations(&loaded.ledger), before, "cut at {cut}");
            assert_eq!(loaded.ignored_bytes, (cut - batch_start) as u64);
        }
        // A snapshot is written whole or not at all: one cut short is refused.
        for cut in [snapshot_len - 1, snapshot_len / 2, 20] {
            assert!(Ledger::load(&mut &file[..cut]).is_err(), "cut at {cut}");
        }
        // A damaged byte in the batch drops the batch, never reads as something else.
        let mut garbled = file.clone();
        garbled[batch_start + 30] ^= 0x40;
        let loaded = Ledger::load_noting_tail(&mut garbled.as_slice()).unwrap();
        assert_eq!(expectations(&loaded.ledger), before);
    }

    #[test]
    fn a_ledger_of_the_first_format_still_reads() {
        // keynum 5: inserted (every field) at 100, field 2 updated at 300 with a write from 250
        // overlapping; keynum 9: a failed write only.
        let mut v1 =
            b"iodig-ledger 1 reads_checked=4 stale_reads=1 corrupt_reads=0 missing_reads=2\n"
                .to_vec();
        for (keynum, unacked, entries) in [
            (
                5u64,
                0u64,
                vec![(ALL_FIELDS, 100u64, 100u64), (2, 300, 250)],
            ),
            (9, 700, vec![]),
        ] {
            v1.extend_from_slice(&keynum.to_le_bytes());
            v1.extend_from_slice(&unacked.to_le_bytes());
            v1.extend_from_slice(&(entries.len() as u16).to_le_bytes());
            for (field, acked, floor) in entries {
                v1.extend_from_slice(&field.to_le_bytes());
                v1.extend_from_slice(&acked.to_le_bytes());
                v1.extend_from_slice(&floor.to_le_bytes());
            }
        }
        let ledger = Ledger::load(&mut v1.as_slice()).unwrap();
        assert_eq!(ledger.keys(), vec![5, 9]);
        let k = ledger.expect(5).unwrap();
        assert_eq!(judge(&k.field(2).unwrap(), Some(260)), Verdict::Ok);
        assert_eq!(judge(&k.field(2).unwrap(), Some(100)), Verdict::Stale);
        assert_eq!(k.field(0).unwrap().acked, 100);
        assert!(!ledger.expect(9).unwrap().any_acknowledged());
        assert_eq!(ledger.read_counts().missing, 2);
        // Saved again, it is of the current format and says the same.
        let mut again = Vec::new();
        ledger.save(&mut again).unwrap();
        assert!(again.starts_with(b"iodig-ledger 2\n"));
        assert_eq!(
            expectations(&Ledger::load(&mut again.as_slice()).unwrap()),
            expectations(&ledger)
        );
        assert!(Ledger::load(&mut &v1[..v1.len() - 3]).is_err());
    }

    #[test]
    fn plain_keys_are_a_word_and_a_key_with_more_returns_to_one() {
        let ledger = Ledger::new();
        let a = ledger.begin(1, ALL_FIELDS);
        let b = ledger.begin(1, ALL_FIELDS);
        ledger.end(a, true);
        ledger.end(b, true);
        let e = ledger.expect(1).unwrap().field(0).unwrap();
        assert_eq!((e.acked, e.floor), (b.version, a.version), "overlap kept");
        let c = ledger.begin(1, ALL_FIELDS);
        ledger.end(c, true);
        let e = ledger.expect(1).unwrap().field(0).unwrap();
        assert_eq!((e.acked, e.floor), (c.version, c.version));
        assert_eq!(ledger.key_count(), 1);
        assert!(ledger.expect(2).is_none());
        assert!(ledger.expect(Ledger::FLAT_KEYS + 1).is_none());
    }
}
