//! A record's fields, reused across operations so the hot path does not allocate.

/// Named field values of one record. `clear` keeps every allocation, so a worker that reuses
/// one `Record` stops allocating after its first few operations.
///
/// A record may instead only count what is pushed into it ([`Record::counting`]): a read whose
/// result nobody inspects (no `dataintegrity`) then does not copy every value into per-worker
/// buffers, which at 1024 workers are cold in cache and cost more than the decoding itself.
#[derive(Debug, Default, Clone)]
pub struct Record {
    slots: Vec<(String, Vec<u8>)>,
    len: usize,
    counting: bool,
    value_bytes: usize,
    /// Where `push_with` writes when counting.
    scratch: Vec<u8>,
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
