//! Field values and field order as YCSB builds them: `RandomByteIterator` characters,
//! `dataintegrity` deterministic values, and Java `HashMap` iteration order of field names
//! (the order YCSB's BasicDB prints and bindings receive).

use crate::rng::Rng;

/// What `RandomByteIterator.fillBytesImpl` (YCSB 0.17) keeps of the 5-bit window at each of
/// the six positions: ASCII 32–63, 32–95, 32–127 in turn. The masks decide how well a value
/// compresses (LZ4 in RocksDB and Cassandra), so they are YCSB's to the bit.
const RANDOM_BYTE_MASKS: [u32; 6] = [31, 63, 95, 31, 63, 95];

/// Fills `out` with `len` random printable bytes the way `RandomByteIterator` does: six
/// characters from each 32-bit random int, character `k` from bits `5k…` under
/// [`RANDOM_BYTE_MASKS`], offset from `' '`.
pub fn fill_random(rng: &mut Rng, len: usize, out: &mut Vec<u8>) {
    // Sized once and written in place: a push per byte (a capacity check each) was a seventh of
    // a no-op binding's CPU per update.
    let start = out.len();
    out.resize(start + len, 0);
    for chunk in out[start..].chunks_mut(6) {
        let bits = rng.next_u32();
        for (k, (b, mask)) in chunk.iter_mut().zip(RANDOM_BYTE_MASKS).enumerate() {
            *b = (((bits >> (5 * k)) & mask) as u8) + b' ';
        }
    }
}

/// The state a random value is written from ([`fill_random_seeded`]): one draw of the
/// worker's generator, the seed of the value's own. One draw whatever the value's length, so
/// a value no binding reads costs one step, not one per six bytes (skipping those was a
/// twentieth of a no-op binding's CPU per operation), and every later choice is the same
/// whether a binding reads values or not.
#[inline]
pub fn random_value_state(rng: &mut Rng) -> [u64; 4] {
    [rng.next_u64(), 0, 0, 0]
}

/// Writes a random value of `len` bytes from its state ([`random_value_state`]): a deferred
/// value (`iodig_db::Deferred`) written when a binding reads it.
pub fn fill_random_seeded(state: &[u64; 4], len: usize, out: &mut Vec<u8>) {
    fill_random(&mut Rng::seeded(state[0], VALUE_STREAM), len, out);
}

/// The stream index of values' own generators ([`Rng::seeded`]), apart from workers' streams
/// (their indices are worker numbers).
const VALUE_STREAM: u64 = u64::MAX;

/// Java's `String.hashCode` (UTF-16 code units; field and key names are ASCII).
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// YCSB's `buildDeterministicValue(key, field)`: `key:field` then `:hashCode` of the text so far
/// until `size` characters, cut to `size`.
pub fn deterministic_value(key: &str, field: &str, size: usize, out: &mut Vec<u8>) {
    let mut s = String::with_capacity(size + 16);
    s.push_str(key);
    s.push(':');
    s.push_str(field);
    while s.len() < size {
        let h = java_string_hash(&s);
        s.push(':');
        s.push_str(itoa::Buffer::new().format(h));
    }
    s.truncate(size);
    out.extend_from_slice(s.as_bytes());
}

/// Indices of `names` in the order a `java.util.HashMap` filled with them in index order
/// iterates: by bucket `(h ^ h>>>16) & (capacity-1)`, then insertion order.
pub fn java_hashmap_order(names: &[String]) -> Vec<usize> {
    // Default capacity 16, doubled while size exceeds the 0.75 load factor.
    let mut capacity = 16usize;
    while names.len() * 4 > capacity * 3 {
        capacity *= 2;
    }
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by_key(|&i| {
        let h = java_string_hash(&names[i]) as u32;
        (((h ^ (h >> 16)) as usize) & (capacity - 1), i)
    });
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_known_values() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("field0"), -1_274_708_362);
    }

    #[test]
    fn hashmap_order_of_ten_fields_matches_java() {
        // The order YCSB's BasicDB prints `INSERT usertable user… [ field1=… field0=… … ]` in.
        let names: Vec<String> = (0..10).map(|i| format!("field{i}")).collect();
        assert_eq!(
            java_hashmap_order(&names),
            vec![1, 0, 7, 6, 9, 8, 3, 2, 5, 4]
        );
    }

    #[test]
    fn random_values_have_length_and_alphabet() {
        let mut rng = Rng::seeded(1, 1);
        let mut v = Vec::new();
        fill_random(&mut rng, 6000, &mut v);
        assert_eq!(v.len(), 6000);
        // YCSB's ranges by position in each group of six: ' '..'?', ' '..'_', ' '..DEL.
        let highest = [b'?', b'_', 0x7f, b'?', b'_', 0x7f];
        for (i, b) in v.iter().enumerate() {
            assert!((b' '..=highest[i % 6]).contains(b), "byte {i}: {b}");
        }
        // And the upper halves of those ranges are reached, as in YCSB (not 5 bits each).
        assert!(v.iter().skip(2).step_by(6).any(|&b| b > b'_'));
        assert!(v.iter().skip(1).step_by(6).any(|&b| b > b'?'));
    }

    #[test]
    fn random_values_are_the_byte_by_byte_ones_appended() {
        // The reference: one push per byte, as YCSB's loop reads.
        fn by_push(rng: &mut Rng, len: usize, out: &mut Vec<u8>) {
            let mut left = len;
            while left > 0 {
                let bits = rng.next_u32();
                for (k, mask) in RANDOM_BYTE_MASKS.iter().enumerate().take(left) {
                    out.push((((bits >> (5 * k)) & mask) as u8) + b' ');
                }
                left -= left.min(6);
            }
        }
        for len in [0, 1, 5, 6, 7, 100, 1000, 1001] {
            let (mut a, mut b) = (Rng::seeded(7, 3), Rng::seeded(7, 3));
            let (mut va, mut vb) = (b"prefix".to_vec(), b"prefix".to_vec());
            fill_random(&mut a, len, &mut va);
            by_push(&mut b, len, &mut vb);
            assert_eq!(va, vb, "len {len}");
            assert_eq!(a.next_u32(), b.next_u32(), "same draws used, len {len}");
        }
    }

    #[test]
    fn a_random_value_takes_one_draw_and_is_written_the_same_from_its_state() {
        for len in [0, 1, 5, 6, 7, 100, 1000, 1001] {
            let mut worker = Rng::seeded(11, 2);
            let mut untouched = worker.clone();
            let state = random_value_state(&mut worker);
            untouched.next_u64();
            assert_eq!(
                worker.state(),
                untouched.state(),
                "len {len}: one draw, whatever the length"
            );
            let (mut a, mut b) = (Vec::new(), b"prefix".to_vec());
            fill_random_seeded(&state, len, &mut a);
            fill_random_seeded(&state, len, &mut b);
            assert_eq!(a.len(), len);
            assert_eq!(&b[6..], &a[..], "len {len}: the same bytes, appended");
            let mut other = Vec::new();
            fill_random_seeded(&random_value_state(&mut worker), len, &mut other);
            if len >= 6 {
                assert_ne!(a, other, "len {len}: the next value is another");
            }
        }
    }

    #[test]
    fn deterministic_values_are_stable_and_sized() {
        let mut a = Vec::new();
        deterministic_value("user1", "field0", 100, &mut a);
        assert_eq!(a.len(), 100);
        assert!(a.starts_with(b"user1:field0:"));
        let mut b = Vec::new();
        deterministic_value("user1", "field0", 100, &mut b);
        assert_eq!(a, b);
    }
}
