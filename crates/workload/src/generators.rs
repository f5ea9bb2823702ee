//! YCSB's number generators (`site.ycsb.generator`), 64-bit throughout. Each one matches YCSB's
//! formula; only the random source differs (a seeded per-worker PRNG instead of
//! `ThreadLocalRandom`), so run-phase sequences match YCSB statistically and repeat exactly for
//! the same seed.

use crate::keys::{fnvhash64_within, significant_bytes};
use crate::rng::Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// θ of YCSB's zipfian distributions.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// Item count of the scrambled zipfian base distribution.
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// ζ(10^10, 0.99), precomputed by YCSB.
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// `Math.abs(rnd.nextLong()) % n` without Java's `abs(MIN_VALUE)` edge: a uniform 63-bit draw.
#[inline]
pub fn uniform_below(rng: &mut Rng, n: u64) -> u64 {
    (rng.next_u64() >> 1) % n
}

/// `UniformLongGenerator(lb, ub)`: inclusive bounds.
#[derive(Debug, Clone)]
pub struct Uniform {
    lb: u64,
    interval: u64,
}

impl Uniform {
    /// Draws from `lb..=ub`; a `ub` below `lb` always gives `lb`.
    pub fn new(lb: u64, ub: u64) -> Self {
        Self {
            lb,
            interval: ub.saturating_sub(lb) + 1,
        }
    }

    /// The next draw, uniform over the bounds.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        self.lb + uniform_below(rng, self.interval)
    }
}

/// ζ(st..n) continued from `initial`: Σ_{i=st}^{n-1} 1/(i+1)^θ.
fn zeta(st: u64, n: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// `ZipfianGenerator` (Gray et al., SIGMOD'94). Popular items are the low numbers.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
    half_pow_theta: f64,
}

impl Zipfian {
    /// Items `min..=max`; ζ is computed here, O(n) as in YCSB.
    pub fn new(min: u64, max: u64) -> Self {
        let items = max - min + 1;
        Self::with_zetan(
            min,
            max,
            ZIPFIAN_CONSTANT,
            zeta(0, items, ZIPFIAN_CONSTANT, 0.0),
        )
    }

    /// Items `min..=max` with a precomputed ζ(n).
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Self {
        let items = max - min + 1;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        Self {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: eta(items, theta, zeta2theta, zetan),
            count_for_zeta: items,
            half_pow_theta: 0.5f64.powf(theta),
        }
    }

    /// A draw from the first `itemcount` items. A larger count than before extends ζ
    /// incrementally; η is then recomputed with the constructor's item count, as YCSB does.
    /// A smaller count is ignored for ζ (YCSB's `allowitemcountdecrease=false`).
    #[inline]
    pub fn next_long(&mut self, itemcount: u64, rng: &mut Rng) -> u64 {
        if itemcount > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, itemcount, self.theta, self.zetan);
            self.count_for_zeta = itemcount;
            self.eta = eta(self.items, self.theta, self.zeta2theta, self.zetan);
        }
        self.draw(itemcount, rng.next_f64())
    }

    /// A draw over the constructor's item count (YCSB's `nextValue`).
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        self.draw(self.items, rng.next_f64())
    }

    #[inline]
    fn draw(&self, itemcount: u64, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + self.half_pow_theta {
            return self.base + 1;
        }
        self.base + (itemcount as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }
}

fn eta(items: u64, theta: f64, zeta2theta: f64, zetan: f64) -> f64 {
    (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan)
}

/// The bytes a draw of the scrambled base (at most 10^10) fits in.
const SCRAMBLED_ITEM_BYTES: u32 = significant_bytes(SCRAMBLED_ITEM_COUNT);

/// `ScrambledZipfianGenerator(min, max)`: zipfian popularity spread over the key space by
/// hashing, with YCSB's fixed 10^10-item base distribution.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    min: u64,
    itemcount: u64,
    /// `% itemcount` by multiplication.
    modulo: FastMod,
    base: Zipfian,
}

/// `a % d` for a fixed `d` by two wide multiplications (Lemire, Kaser and Kurz, "Faster
/// Remainder by Direct Computation", 2019: a 128-bit reciprocal is exact for every 64-bit
/// `a`), where a 64-bit division takes a few dozen cycles: a scrambled zipfian draw is one.
#[derive(Debug, Clone, Copy)]
struct FastMod {
    d: u64,
    /// ⌈2^128 / d⌉; 0 for `d` = 1 (every remainder is 0).
    reciprocal: u128,
}

impl FastMod {
    fn new(d: u64) -> Self {
        assert!(d > 0, "a remainder by zero");
        let reciprocal = if d == 1 {
            0
        } else {
            u128::MAX / u128::from(d) + 1
        };
        Self { d, reciprocal }
    }

    #[inline]
    fn rem(&self, a: u64) -> u64 {
        let low = self.reciprocal.wrapping_mul(u128::from(a));
        // The high 64 bits of the 192-bit product low · d.
        let d = u128::from(self.d);
        let bottom = (u128::from(low as u64) * d) >> 64;
        let top = (low >> 64) * d;
        ((bottom + top) >> 64) as u64
    }
}

impl ScrambledZipfian {
    /// Draws from `min..=max`, most often a few scattered hot items; ζ is YCSB's precomputed one,
    /// so this is O(1) whatever the range.
    pub fn new(min: u64, max: u64) -> Self {
        Self {
            min,
            itemcount: max - min + 1,
            modulo: FastMod::new(max - min + 1),
            // YCSB passes max = ITEM_COUNT, so the base has 10^10 + 1 items while ζ is for 10^10
            // (YCSB#1305); kept for identical popularity.
            base: Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
        }
    }

    /// The next draw: a zipfian item of the 10^10-item base, hashed into `min..=max`.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let z = self.base.next(rng);
        let h = fnvhash64_within(z, SCRAMBLED_ITEM_BYTES);
        // Java's `%` keeps the dividend's sign; fnvhash64 is non-negative except for i64::MIN.
        let r = match u64::try_from(h) {
            Ok(h) => self.modulo.rem(h) as i64,
            Err(_) => h % self.itemcount as i64,
        };
        (self.min as i64).wrapping_add(r) as u64
    }
}

/// `HotspotIntegerGenerator`: a fraction of operations goes to the lowest fraction of items.
#[derive(Debug, Clone)]
pub struct Hotspot {
    lb: u64,
    hot_interval: u64,
    cold_interval: u64,
    hot_opn_fraction: f64,
}

impl Hotspot {
    /// Items `lb..=ub`; a `hot_opn_fraction` of draws go to the lowest `hot_set_fraction` of them
    /// (both fractions in 0..=1).
    pub fn new(lb: u64, ub: u64, hot_set_fraction: f64, hot_opn_fraction: f64) -> Self {
        let interval = ub - lb + 1;
        let hot_interval = (interval as f64 * hot_set_fraction) as u64;
        Self {
            lb,
            hot_interval,
            cold_interval: interval - hot_interval,
            hot_opn_fraction,
        }
    }

    /// The next draw: uniform in the hot set with probability `hot_opn_fraction`, else uniform in
    /// the rest.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        if rng.next_f64() < self.hot_opn_fraction && self.hot_interval > 0 {
            self.lb + uniform_below(rng, self.hot_interval)
        } else if self.cold_interval > 0 {
            self.lb + self.hot_interval + uniform_below(rng, self.cold_interval)
        } else {
            self.lb + uniform_below(rng, self.hot_interval)
        }
    }
}

/// `ExponentialGenerator(percentile, range)`: `percentile`% of draws fall below `range`.
#[derive(Debug, Clone)]
pub struct Exponential {
    gamma: f64,
}

impl Exponential {
    /// `percentile`% (0–100) of draws fall below `range` (YCSB: `recordcount` ×
    /// `exponential.frac`).
    pub fn new(percentile: f64, range: f64) -> Self {
        Self {
            gamma: -(1.0 - percentile / 100.0).ln() / range,
        }
    }

    /// The next draw, an offset from 0 (the workload counts it back from the newest acknowledged
    /// key).
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        (-rng.next_f64_open().ln() / self.gamma) as u64
    }
}

/// `SequentialGenerator(countstart, countend)`: shared across workers, wraps around.
#[derive(Debug)]
pub struct Sequential {
    start: u64,
    interval: u64,
    counter: AtomicU64,
}

impl Sequential {
    /// Cycles through `start..=end`, `start` first.
    pub fn new(start: u64, end: u64) -> Self {
        Self {
            start,
            interval: end - start + 1,
            counter: AtomicU64::new(0),
        }
    }

    /// The next number of the shared cycle, back to `start` after `end`.
    #[inline]
    pub fn next(&self) -> u64 {
        self.start + self.counter.fetch_add(1, Ordering::Relaxed) % self.interval
    }
}

/// `CounterGenerator`: hands out consecutive numbers to all workers (the load phase's keys).
#[derive(Debug)]
pub struct Counter {
    next: AtomicU64,
}

impl Counter {
    /// Counts from `start` (`insertstart` in the load phase).
    pub fn new(start: u64) -> Self {
        Self {
            next: AtomicU64::new(start),
        }
    }

    /// The next number; each is handed out once, whichever worker asks.
    #[inline]
    pub fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

/// Acknowledgement window of [`AcknowledgedCounter`], as in YCSB: 2^20 slots.
const WINDOW_SIZE: u64 = 1 << 20;
const WINDOW_MASK: u64 = WINDOW_SIZE - 1;

/// `AcknowledgedCounterGenerator`: run-phase insert keys. Readers never target a key whose
/// insert has not been acknowledged: `last_value` only advances over a contiguous run of
/// acknowledged inserts.
#[derive(Debug)]
pub struct AcknowledgedCounter {
    next: AtomicU64,
    /// Highest key below which every insert was acknowledged; `u64::MAX` stands for −1.
    limit: AtomicU64,
    window: Box<[AtomicBool]>,
    advance: Mutex<()>,
}

/// More than 2^20 inserts outstanding: YCSB's "Too many unacknowledged insertion keys."
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManyUnacknowledged;

impl AcknowledgedCounter {
    /// Hands out key numbers from `start` (`recordcount`), with every key below it counted as
    /// acknowledged.
    pub fn new(start: u64) -> Self {
        Self {
            next: AtomicU64::new(start),
            limit: AtomicU64::new(start.wrapping_sub(1)),
            window: (0..WINDOW_SIZE).map(|_| AtomicBool::new(false)).collect(),
            advance: Mutex::new(()),
        }
    }

    /// The key number of the next insert; pass it to [`AcknowledgedCounter::acknowledge`] when the
    /// insert ends.
    #[inline]
    pub fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// The highest acknowledged key number (YCSB's `lastValue`). Wraps to `u64::MAX` when
    /// nothing is acknowledged yet (an empty table).
    #[inline]
    pub fn last_value(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Marks `value` done, whether or not its insert succeeded (YCSB acknowledges in `finally`).
    pub fn acknowledge(&self, value: u64) -> Result<(), TooManyUnacknowledged> {
        let slot = &self.window[(value & WINDOW_MASK) as usize];
        if slot.swap(true, Ordering::AcqRel) {
            return Err(TooManyUnacknowledged);
        }
        // Like YCSB's tryLock: whoever holds the lock advances for everyone; others move on.
        if let Ok(_guard) = self.advance.try_lock() {
            let limit = self.limit.load(Ordering::Acquire);
            let before_first = limit & WINDOW_MASK;
            let mut index = limit.wrapping_add(1);
            while index & WINDOW_MASK != before_first {
                let s = &self.window[(index & WINDOW_MASK) as usize];
                if !s.load(Ordering::Acquire) {
                    break;
                }
                s.store(false, Ordering::Release);
                index = index.wrapping_add(1);
            }
            self.limit.store(index.wrapping_sub(1), Ordering::Release);
        }
        Ok(())
    }
}

/// `DiscreteGenerator`: picks a value with probability proportional to its weight.
#[derive(Debug, Clone)]
pub struct Discrete<T: Copy> {
    /// (value, weight / Σweights), in insertion order.
    choices: Vec<(T, f64)>,
}

impl<T: Copy> Discrete<T> {
    /// Weights ≤ 0 are left out, as YCSB adds only positive proportions.
    pub fn new(weighted: &[(T, f64)]) -> Self {
        let kept: Vec<(T, f64)> = weighted.iter().copied().filter(|(_, w)| *w > 0.0).collect();
        let sum: f64 = kept.iter().map(|(_, w)| w).sum();
        Self {
            choices: kept.into_iter().map(|(v, w)| (v, w / sum)).collect(),
        }
    }

    /// Whether no weight was positive: [`Discrete::next`] would panic.
    pub fn is_empty(&self) -> bool {
        self.choices.is_empty()
    }

    /// The next value, drawn with its normalised weight's probability.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> T {
        let mut chooser = rng.next_f64();
        for (value, p) in &self.choices {
            if chooser < *p {
                return *value;
            }
            chooser -= p;
        }
        // Rounding can leave a sliver after the last choice; YCSB would assert here.
        self.choices.last().expect("at least one positive weight").0
    }
}

/// `SkewedLatestGenerator`: zipfian over recency, skewed toward the newest acknowledged insert.
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipf: Zipfian,
}

impl SkewedLatest {
    /// `last` is the acknowledged counter's last value at construction.
    pub fn new(last: u64) -> Self {
        Self {
            zipf: Zipfian::new(0, last.max(1) - 1),
        }
    }

    /// A key number at most `last` (the newest acknowledged key), `last` itself the most likely;
    /// ζ is extended as `last` grows.
    #[inline]
    pub fn next(&mut self, last: u64, rng: &mut Rng) -> u64 {
        last - self.zipf.next_long(last, rng).min(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng() -> Rng {
        Rng::seeded(42, 0)
    }

    #[test]
    fn uniform_stays_in_bounds_and_covers() {
        let g = Uniform::new(10, 19);
        let mut r = rng();
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let v = g.next(&mut r);
            assert!((10..=19).contains(&v));
            seen[(v - 10) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800 && c < 1200), "{seen:?}");
    }

    #[test]
    fn zipfian_head_probability_matches_formula() {
        // P(item 0) = 1/ζ(n); for n=1000, θ=0.99 that is 1/ζ ≈ 0.1330.
        let n = 1000;
        let g = Zipfian::new(0, n - 1);
        let p0 = 1.0 / zeta(0, n, ZIPFIAN_CONSTANT, 0.0);
        let mut r = rng();
        let draws = 200_000;
        let hits = (0..draws).filter(|_| g.next(&mut r) == 0).count() as f64 / f64::from(draws);
        assert!((hits - p0).abs() < 0.005, "p0 {p0} observed {hits}");
    }

    #[test]
    fn scrambled_zipfian_stays_in_range() {
        let g = ScrambledZipfian::new(100, 1099);
        let mut r = rng();
        for _ in 0..10_000 {
            let v = g.next(&mut r);
            assert!((100..=1099).contains(&v), "{v}");
        }
    }

    #[test]
    fn hotspot_sends_hot_fraction_to_low_items() {
        let g = Hotspot::new(0, 999, 0.2, 0.8);
        let mut r = rng();
        let hot = (0..50_000).filter(|_| g.next(&mut r) < 200).count() as f64 / 50_000.0;
        assert!((hot - 0.8).abs() < 0.01, "{hot}");
    }

    #[test]
    fn exponential_percentile_holds() {
        // 95% of draws below recordcount·frac.
        let g = Exponential::new(95.0, 1000.0 * 0.857_142_857_1);
        let mut r = rng();
        let below = (0..50_000).filter(|_| g.next(&mut r) < 857).count() as f64 / 50_000.0;
        assert!((below - 0.95).abs() < 0.01, "{below}");
    }

    #[test]
    fn acknowledged_counter_advances_only_over_contiguous_acks() {
        let c = AcknowledgedCounter::new(100);
        assert_eq!(c.last_value(), 99);
        let (a, b) = (c.next(), c.next());
        assert_eq!((a, b), (100, 101));
        c.acknowledge(b).unwrap();
        assert_eq!(
            c.last_value(),
            99,
            "101 acknowledged but 100 still outstanding"
        );
        c.acknowledge(a).unwrap();
        // The advance happens on the next acknowledgement that gets the lock, or this one.
        assert_eq!(c.last_value(), 101);
    }

    #[test]
    fn acknowledged_counter_reports_window_overflow() {
        let c = AcknowledgedCounter::new(0);
        c.acknowledge(5).unwrap();
        assert_eq!(c.acknowledge(5 + WINDOW_SIZE), Err(TooManyUnacknowledged));
    }

    #[test]
    fn discrete_normalises_weights() {
        let g = Discrete::new(&[('r', 2.0), ('u', 0.0), ('i', 2.0)]);
        let mut r = rng();
        let reads = (0..20_000).filter(|_| g.next(&mut r) == 'r').count() as f64 / 20_000.0;
        assert!((reads - 0.5).abs() < 0.02);
    }

    #[test]
    fn skewed_latest_prefers_newest() {
        let mut g = SkewedLatest::new(999);
        let mut r = rng();
        let newest = (0..20_000).filter(|_| g.next(999, &mut r) >= 990).count() as f64 / 20_000.0;
        assert!(newest > 0.3, "{newest}");
        assert!((0..1000).all(|_| g.next(999, &mut r) <= 999));
    }

    #[test]
    fn the_remainder_by_multiplication_is_the_remainder() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut divisors: Vec<u64> = (1..300).collect();
        divisors.extend([
            1000,
            1 << 20,
            (1 << 32) - 1,
            1 << 32,
            1_000_000_007,
            10_000_000_000,
        ]);
        divisors.extend([
            u64::MAX,
            u64::MAX - 1,
            1 << 63,
            (1 << 63) + 1,
            i64::MAX as u64,
        ]);
        divisors.extend((0..200).map(|_| next() >> (next() % 64)).filter(|d| *d > 0));
        for d in divisors {
            let m = FastMod::new(d);
            let mut values = vec![0, 1, d - 1, d, d.wrapping_add(1), u64::MAX, i64::MAX as u64];
            values.extend((0..2000).map(|_| next() >> (next() % 64)));
            for a in values {
                assert_eq!(m.rem(a), a % d, "{a} % {d}");
            }
        }
    }
}
