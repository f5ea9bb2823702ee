//! A record's fields, reused across operations so the hot path does not allocate.

/// Named field values of one record. `clear` keeps every allocation, so a worker that reuses
/// one `Record` stops allocating after its first few operations.
///
/// A record may instead only count what is pushed into it ([`Record::counting`]): a read whose
/// result nobody inspects (no `dataintegrity`) then does not copy every value into per-worker
/// buffers, which at 1024 workers are cold in cache and cost more than the decoding itself.
///
/// A value may also be deferred ([`Record::push_deferred`]): only its length and how to write
/// it are kept until [`Record::materialize`], as YCSB's `RandomByteIterator` writes its bytes
/// only when read. A binding that never reads the values it is given (the no-op `basic`) is
/// then spared writing them; reading a record with values still deferred is a bug, and panics.
#[derive(Debug, Default, Clone)]
pub struct Record {
    slots: Vec<(String, Vec<u8>)>,
    /// Per slot, the value still to write (slots past `len` are stale).
    deferred: Vec<Option<Deferred>>,
    /// Slots whose value is deferred.
    pending: usize,
    len: usize,
    counting: bool,
    value_bytes: usize,
    /// Where `push_with` writes when counting.
    scratch: Vec<u8>,
}

/// A value written only when needed: `len` bytes that `fill` appends to a buffer from `state`
/// (a generator's saved state), the same bytes whenever it is written.
#[derive(Debug, Clone, Copy)]
pub struct Deferred {
    /// What `fill` starts from.
    pub state: [u64; 4],
    /// The value's length in bytes.
    pub len: usize,
    /// Appends exactly `len` bytes, a function of `state` and `len` only.
    pub fill: fn(&[u64; 4], usize, &mut Vec<u8>),
}

impl Record {
    /// An empty record that keeps the names and values pushed into it.
    pub fn new() -> Self {
        Self::default()
    }

    /// A record that counts fields and value bytes but keeps no names or values: `iter` and
    /// `get` see nothing, `len` and `value_bytes` count what was pushed.
    pub fn counting() -> Self {
        Self {
            counting: true,
            ..Self::default()
        }
    }

    /// True for a [`Record::counting`] record.
    pub fn is_counting(&self) -> bool {
        self.counting
    }

    /// Removes all fields, keeping their buffers for reuse.
    pub fn clear(&mut self) {
        self.len = 0;
        self.value_bytes = 0;
        if self.pending > 0 {
            // Never written, and the slots may be reused for values pushed whole.
            self.deferred.iter_mut().for_each(|d| *d = None);
            self.pending = 0;
        }
    }

    /// Appends a field whose value is written only by [`Record::materialize`].
    pub fn push_deferred(&mut self, name: &str, value: Deferred) {
        self.value_bytes += value.len;
        if self.counting {
            self.len += 1;
            return;
        }
        self.push_with(name, |_| {});
        let i = self.len - 1;
        if self.deferred.len() < self.len {
            self.deferred.resize(self.len, None);
        }
        self.deferred[i] = Some(value);
        self.pending += 1;
    }

    /// Writes every deferred value, so the record can be read.
    pub fn materialize(&mut self) {
        if self.pending == 0 {
            return;
        }
        for (slot, deferred) in self.slots[..self.len].iter_mut().zip(&mut self.deferred) {
            if let Some(d) = deferred.take() {
                slot.1.clear();
                (d.fill)(&d.state, d.len, &mut slot.1);
            }
        }
        self.pending = 0;
    }

    /// True while some value is deferred (not yet written by [`Record::materialize`]).
    pub fn has_deferred(&self) -> bool {
        self.pending > 0
    }

    /// Fields pushed since the last `clear`.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Total length of the values pushed since the last `clear`.
    pub fn value_bytes(&self) -> usize {
        self.value_bytes
    }

    /// True when no field was pushed since the last `clear` (counting records too).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a field, copying name and value into reused buffers.
    pub fn push(&mut self, name: &str, value: &[u8]) {
        if self.counting {
            self.len += 1;
            self.value_bytes += value.len();
            return;
        }
        self.push_with(name, |buf| buf.extend_from_slice(value));
    }

    /// Appends a field whose value `fill` writes into an empty, reused buffer.
    pub fn push_with(&mut self, name: &str, fill: impl FnOnce(&mut Vec<u8>)) {
        if self.counting {
            self.scratch.clear();
            fill(&mut self.scratch);
            self.len += 1;
            self.value_bytes += self.scratch.len();
            return;
        }
        if self.len == self.slots.len() {
            self.slots.push((String::new(), Vec::new()));
        }
        let (slot_name, slot_value) = &mut self.slots[self.len];
        if slot_name != name {
            slot_name.clear();
            slot_name.push_str(name);
        }
        slot_value.clear();
        fill(slot_value);
        self.value_bytes += slot_value.len();
        self.len += 1;
    }

    /// The fields in insertion order (none for a counting record).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &[u8])> + '_ {
        assert!(
            self.pending == 0,
            "a record with deferred values was read before Record::materialize"
        );
        let kept = if self.counting { 0 } else { self.len };
        self.slots[..kept]
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
    }

    /// The value of a field, if present.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

impl PartialEq for Record {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self.value_bytes == other.value_bytes
            && self.counting == other.counting
            && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuse_keeps_values_independent() {
        let mut r = Record::new();
        r.push("field0", b"abc");
        r.push("field1", b"de");
        r.clear();
        r.push("field1", b"x");
        assert_eq!(r.len(), 1);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![("field1", &b"x"[..])]);
        assert_eq!(r.get("field0"), None);
        assert_eq!(r.value_bytes(), 1);
    }

    /// Appends `len` bytes counting up from `state[0]`.
    fn count_up(state: &[u64; 4], len: usize, out: &mut Vec<u8>) {
        out.extend((0..len).map(|i| (state[0] as usize + i) as u8));
    }

    #[test]
    fn deferred_values_are_written_in_place_when_materialized() {
        let deferred = |from: u64, len| Deferred {
            state: [from, 0, 0, 0],
            len,
            fill: count_up,
        };
        let mut r = Record::new();
        r.push("field0", b"abc");
        r.push_deferred("field1", deferred(10, 4));
        assert!(r.has_deferred());
        assert_eq!((r.len(), r.value_bytes()), (2, 7));
        r.materialize();
        assert!(!r.has_deferred());
        assert_eq!(
            r.iter().collect::<Vec<_>>(),
            vec![("field0", &b"abc"[..]), ("field1", &[10, 11, 12, 13][..])]
        );
        // Cleared unwritten, the slot then takes a whole value: nothing stale is written.
        r.clear();
        r.push_deferred("field0", deferred(1, 2));
        r.clear();
        r.push("field0", b"x");
        r.push_deferred("field1", deferred(5, 1));
        r.materialize();
        assert_eq!(
            r.iter().collect::<Vec<_>>(),
            vec![("field0", &b"x"[..]), ("field1", &[5][..])]
        );
        let mut c = Record::counting();
        c.push_deferred("field0", deferred(0, 9));
        assert_eq!((c.len(), c.value_bytes(), c.has_deferred()), (1, 9, false));
    }

    #[test]
    #[should_panic(expected = "deferred values")]
    fn reading_deferred_values_is_a_bug() {
        let mut r = Record::new();
        r.push_deferred(
            "field0",
            Deferred {
                state: [0; 4],
                len: 1,
                fill: count_up,
            },
        );
        let _ = r.iter().count();
    }

    #[test]
    fn counting_records_count_fields_and_bytes_but_keep_nothing() {
        let mut r = Record::counting();
        r.push("field0", b"abc");
        r.push_with("field1", |b| b.extend_from_slice(b"de"));
        assert_eq!((r.len(), r.value_bytes()), (2, 5));
        assert_eq!(r.iter().count(), 0);
        assert_eq!(r.get("field0"), None);
        assert!(!r.is_empty());
        r.clear();
        assert!(r.is_empty());
        assert_eq!(r.value_bytes(), 0);
    }
}
