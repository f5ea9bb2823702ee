//! The per-worker random source: a seeded PRNG, so that the same seed and thread count repeat
//! the same operation and key sequence (YCSB has no seed; it uses `ThreadLocalRandom`).

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

/// A fast non-cryptographic PRNG (xoshiro256++ via `SmallRng`).
#[derive(Debug, Clone)]
pub struct Rng(SmallRng);

impl Rng {
    /// The stream of worker `stream` under `seed`; streams are independent.
    pub fn seeded(seed: u64, stream: u64) -> Self {
        // SplitMix64 of (seed, stream) spreads nearby seeds and streams across the state space.
        let mut x = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut state = [0u8; 32];
        for chunk in state.chunks_mut(8) {
            chunk.copy_from_slice(&next().to_le_bytes());
        }
        Self(SmallRng::from_seed(state))
    }

    /// 64 uniformly random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// 32 uniformly random bits (Java's `nextInt`, for values).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
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
