//! YCSB key names: `"user"` + the decimal of `fnvhash64(keynum)` (or of keynum itself with
//! `insertorder=ordered`), left-padded with zeros to `zeropadding` digits. Bit-identical to YCSB's
//! `CoreWorkload.buildKeyName` and `Utils.fnvhash64` (not to go-ycsb, which hashes big-endian).

const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 bytes of `val`, least significant first, then
/// `Math.abs` of the signed result (which leaves `i64::MIN` negative, as Java does).
#[inline]
pub fn fnvhash64(val: u64) -> i64 {
    (fnv_low::<8>(val) as i64).wrapping_abs()
}

/// [`fnvhash64`], faster where `val` fits in its low `bytes` bytes (the caller's whole range
/// does, so the branch is always predicted): a zero byte's step only multiplies by the prime,
/// so the high zero bytes' steps are one multiplication by a power of it. The hash is a chain
/// of eight dependent multiply-xor steps (32 cycles), a tenth of a no-op binding's operation
/// for each of its two hashes; a 1000-key name takes 2 of them, a 10^10-item zipfian draw 5.
#[inline]
pub fn fnvhash64_within(val: u64, bytes: u32) -> i64 {
    let fits = |n: u32| val >> (8 * n) == 0;
    let h = match bytes {
        1 if fits(1) => fnv_low::<1>(val),
        2 if fits(2) => fnv_low::<2>(val),
        3 if fits(3) => fnv_low::<3>(val),
        4 if fits(4) => fnv_low::<4>(val),
        5 if fits(5) => fnv_low::<5>(val),
        6 if fits(6) => fnv_low::<6>(val),
        7 if fits(7) => fnv_low::<7>(val),
        _ => fnv_low::<8>(val),
    };
    (h as i64).wrapping_abs()
}

/// The bytes `max` needs, for [`fnvhash64_within`] of values up to it.
pub const fn significant_bytes(max: u64) -> u32 {
    let bytes = (64 - max.leading_zeros()).div_ceil(8);
    if bytes == 0 {
        1
    } else {
        bytes
    }
}

/// FNV_PRIME_64^i, for the zero bytes' steps at once.
const PRIME_POWERS: [u64; 9] = {
    let mut p = [1u64; 9];
    let mut i = 1;
    while i < 9 {
        p[i] = p[i - 1].wrapping_mul(FNV_PRIME_64);
        i += 1;
    }
    p
};

/// FNV-1a's eight steps over `val`, of which only the low `N` bytes may be non-zero.
#[inline(always)]
fn fnv_low<const N: usize>(val: u64) -> u64 {
    let mut h = FNV_OFFSET_BASIS_64;
    let mut v = val;
    for _ in 0..N {
        h ^= v & 0xff;
        h = h.wrapping_mul(FNV_PRIME_64);
        v >>= 8;
    }
    h.wrapping_mul(PRIME_POWERS[8 - N])
}

/// Builds key names into a reused buffer.
#[derive(Debug, Clone, Copy)]
pub struct KeyNamer {
    /// `insertorder=ordered`: the key number itself, unhashed, so keys sort in insert order.
    pub ordered: bool,
    /// `zeropadding`: the least number of digits after `user`, left-padded with `0`.
    pub zero_padding: usize,
    /// The bytes the key numbers of this workload fit in, as a rule
    /// ([`significant_bytes`] of the largest expected; a larger one is hashed all the same).
    pub keynum_bytes: u32,
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
            buf.format(fnvhash64_within(keynum, self.keynum_bytes))
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
        keynum_bytes: 8,
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
            keynum_bytes: 8,
        };
        assert_eq!(k.key(42), "user00000042");
        assert_eq!(
            KeyNamer {
                ordered: true,
                zero_padding: 1,
                keynum_bytes: 1,
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

    #[test]
    fn the_short_hash_is_the_hash() {
        let mut values: Vec<u64> = (0..70_000).collect();
        for shift in 0..64 {
            for d in [0u64, 1, 2] {
                values.push((1u64 << shift).wrapping_sub(d));
                values.push((1u64 << shift) + d);
            }
        }
        values.extend([u64::MAX, 10_000_000_000, 999_999_999_999]);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (x % 64));
        }
        for v in values {
            for bytes in 0..=9 {
                assert_eq!(
                    fnvhash64_within(v, bytes),
                    fnvhash64(v),
                    "{v} in {bytes} bytes"
                );
            }
        }
        assert_eq!(significant_bytes(0), 1);
        assert_eq!(significant_bytes(255), 1);
        assert_eq!(significant_bytes(256), 2);
        assert_eq!(significant_bytes(10_000_000_000), 5);
        assert_eq!(significant_bytes(u64::MAX), 8);
        // A name of a key beyond the expected range is still YCSB's.
        let small = KeyNamer {
            keynum_bytes: 2,
            ..HASHED
        };
        assert_eq!(small.key(1 << 33), HASHED.key(1 << 33));
        assert_eq!(small.key(999), "user2071219101098386137");
    }
}
