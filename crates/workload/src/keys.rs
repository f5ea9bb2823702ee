//! YCSB key names: `"user"` + the decimal of `fnvhash64(keynum)` (or of keynum itself with
//! `insertorder=ordered`), left-padded with zeros to `zeropadding` digits. Bit-identical to YCSB's
//! `CoreWorkload.buildKeyName` and `Utils.fnvhash64` (not to go-ycsb, which hashes big-endian).

const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 bytes of `val`, least significant first, then
/// `Math.abs` of the signed result (which leaves `i64::MIN` negative, as Java does).
#[inline]
pub fn fnvhash64(val: u64) -> i64 {
    let mut h = FNV_OFFSET_BASIS_64;
    let mut v = val;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(FNV_PRIME_64);
        v >>= 8;
    }
    (h as i64).wrapping_abs()
}

/// Builds key names into a reused buffer.
#[derive(Debug, Clone, Copy)]
pub struct KeyNamer {
    /// `insertorder=ordered`: the key number itself, unhashed, so keys sort in insert order.
    pub ordered: bool,
    /// `zeropadding`: the least number of digits after `user`, left-padded with `0`.
    pub zero_padding: usize,
}

impl KeyNamer {
    /// Writes the key of `keynum` into `out` (cleared first).
    #[inline]
    pub fn build(&self, keynum: u64, out: &mut String) {
        out.clear();
        out.push_str("user");
        let mut buf = itoa::Buffer::new();
        let digits = if self.ordered {
            buf.format(keynum)
        } else {
            buf.format(fnvhash64(keynum))
        };
        for _ in digits.len()..self.zero_padding {
            out.push('0');
        }
        out.push_str(digits);
    }

    /// The key of `keynum` in a new string, e.g. `user6284781860667377211` for 0, hashed.
    pub fn key(&self, keynum: u64) -> String {
        let mut s = String::with_capacity(24);
        self.build(keynum, &mut s);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASHED: KeyNamer = KeyNamer {
        ordered: false,
        zero_padding: 1,
    };

    #[test]
    fn keys_match_ycsb_test_vectors() {
        assert_eq!(HASHED.key(0), "user6284781860667377211");
        assert_eq!(HASHED.key(1), "user8517097267634966620");
        assert_eq!(HASHED.key(2), "user1820151046732198393");
        assert_eq!(HASHED.key(3), "user4052466453699787802");
        assert_eq!(HASHED.key(999), "user2071219101098386137");
    }

    #[test]
    fn ordered_keys_are_padded_keynums() {
        let k = KeyNamer {
            ordered: true,
            zero_padding: 8,
        };
        assert_eq!(k.key(42), "user00000042");
        assert_eq!(
            KeyNamer {
                ordered: true,
                zero_padding: 1
            }
            .key(42),
            "user42"
        );
    }

    #[test]
    fn keys_beyond_32_bits_hash_all_eight_bytes() {
        // Keynums above 2^31 (YCSB's int limit) still hash over all 8 bytes.
        assert_ne!(HASHED.key(1 << 33), HASHED.key(0));
        assert_ne!(
            fnvhash64(10_000_000_000),
            fnvhash64(10_000_000_000 & 0xffff_ffff)
        );
    }
}
