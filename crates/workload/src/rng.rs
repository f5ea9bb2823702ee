//! The per-worker random source: a seeded PRNG, so that the same seed and thread count repeat
//! the same operation and key sequence (YCSB has no seed; it uses `ThreadLocalRandom`).

/// xoshiro256++, the generator behind `rand`'s `SmallRng` on 64-bit targets, written out here
/// so its state can be saved and stepped without output. A random value is written by a
/// generator of its own, seeded by one draw of the worker's (`values::fill_random_seeded`), so
/// a value that no binding reads is left unwritten at the cost of that one draw.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// The stream of worker `stream` under `seed`; streams are independent.
    pub fn seeded(seed: u64, stream: u64) -> Self {
        // SplitMix64 of (seed, stream) spreads nearby seeds and streams across the state space.
        let mut x = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut s = [0u64; 4];
        for word in &mut s {
            *word = splitmix64(&mut x);
        }
        Self::from_state(s)
    }

    /// The generator in state `s` (as [`Rng::state`] gave it).
    pub fn from_state(s: [u64; 4]) -> Self {
        if s == [0; 4] {
            // The one state xoshiro cannot leave; mapped as `SmallRng::from_seed` maps it.
            let mut x = 0;
            let mut s = [0u64; 4];
            for word in &mut s {
                *word = splitmix64(&mut x);
            }
            return Self { s };
        }
        Self { s }
    }

    /// The whole state, to replay the draws from here later.
    #[inline]
    pub fn state(&self) -> [u64; 4] {
        self.s
    }

    /// The state transition alone.
    #[inline(always)]
    fn step(&mut self) {
        let s = &mut self.s;
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
    }

    /// 64 uniformly random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &self.s;
        let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        self.step();
        out
    }

    /// 32 uniformly random bits (Java's `nextInt`, for values): the upper half of a draw, as
    /// `SmallRng` gives them.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in [0, 1), 53 bits like Java's `nextDouble`.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in (0, 1]: safe to take the logarithm of.
    #[inline]
    pub fn next_f64_open(&mut self) -> f64 {
        1.0 - self.next_f64()
    }
}

/// One SplitMix64 output, advancing `x`.
fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngCore, SeedableRng};

    /// The streams are those of the `SmallRng` this replaced, seeded the same way: the same
    /// seed gives the same keys and operations as before.
    #[test]
    fn streams_are_small_rngs_draw_for_draw() {
        for (seed, stream) in [(0, 0), (1, 0), (1, 1), (42, 7), (u64::MAX, 1023)] {
            let mut x = seed ^ u64::wrapping_mul(stream, 0x9E37_79B9_7F4A_7C15);
            let mut bytes = [0u8; 32];
            for chunk in bytes.chunks_mut(8) {
                chunk.copy_from_slice(&splitmix64(&mut x).to_le_bytes());
            }
            let mut theirs = SmallRng::from_seed(bytes);
            let mut ours = Rng::seeded(seed, stream);
            for i in 0..1000 {
                if i % 3 == 0 {
                    assert_eq!(ours.next_u32(), theirs.next_u32(), "{seed}/{stream} #{i}");
                } else {
                    assert_eq!(ours.next_u64(), theirs.next_u64(), "{seed}/{stream} #{i}");
                }
            }
        }
        let mut zero = Rng::from_state([0; 4]);
        let mut theirs = SmallRng::from_seed([0; 32]);
        assert_eq!(zero.next_u64(), theirs.next_u64());
    }
}
