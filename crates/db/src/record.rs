//! A record's fields, reused across operations so the hot path does not allocate.

/// Named field values of one record. `clear` keeps every allocation, so a worker that reuses
/// one `Record` stops allocating after its first few operations.
#[derive(Debug, Default, Clone)]
pub struct Record {
    slots: Vec<(String, Vec<u8>)>,
    len: usize,
}

impl Record {
    pub fn new() -> Self {
        Self::default()
    }

    /// Removes all fields, keeping their buffers for reuse.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a field, copying name and value into reused buffers.
    pub fn push(&mut self, name: &str, value: &[u8]) {
        self.push_with(name, |buf| buf.extend_from_slice(value));
    }

    /// Appends a field whose value `fill` writes into an empty, reused buffer.
    pub fn push_with(&mut self, name: &str, fill: impl FnOnce(&mut Vec<u8>)) {
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
        self.len += 1;
    }

    /// The fields in insertion order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &[u8])> + '_ {
        self.slots[..self.len]
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
        self.len == other.len && self.iter().zip(other.iter()).all(|(a, b)| a == b)
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
    }
}
