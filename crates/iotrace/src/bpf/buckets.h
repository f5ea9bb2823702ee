/* buckets.h: the tracer's bucket and period math (iotrace.h has the layouts), pure integer
 * code with no kernel type, so that src/hist.rs's test compiles this very file natively and
 * checks it against the Rust mirror value by value. Needs __u32/__u64 and __always_inline. */
#ifndef BUCKETS_H
#define BUCKETS_H

#include "iotrace.h"

/* floor(log2(v)) for v < 2^63 (0 for 0), without branches: `(c - v) >> 63` is 1 exactly when
 * v > c. The branchy form mispredicted on every latency that moved to another power of two, and
 * the completion program takes four of these per IO. */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u64 r, s;

	r = ((0xffffffffULL - v) >> 63) << 5;
	v >>= r;
	s = ((0xffffULL - v) >> 63) << 4;
	v >>= s;
	r |= s;
	s = ((0xffULL - v) >> 63) << 3;
	v >>= s;
	r |= s;
	s = ((0xfULL - v) >> 63) << 2;
	v >>= s;
	r |= s;
	s = ((0x3ULL - v) >> 63) << 1;
	v >>= s;
	r |= s;
	return r | ((0x1ULL - v) >> 63);
}

/* See iotrace.h for the bucket layout; src/hist.rs has the same function and its bounds. */
static __always_inline __u32 size_idx(__u32 bytes)
{
	__u32 p;

	if (bytes == 0)
		return 0;
	if (bytes <= (2u << 20))
		return (bytes + 4095) >> 12;
	p = log2_u64(bytes - 1);
	return SIZE_LIN_BUCKETS + ((p - SIZE_LOG_FIRST_POW) << SIZE_SUB_BITS) +
	       (((bytes - 1) >> (p - SIZE_SUB_BITS)) & ((1 << SIZE_SUB_BITS) - 1));
}

/* Bucket of `ns` (at most LAT_CLAMP) with g sub-bucket bits, given p = floor(log2(ns)). See
 * iotrace.h for the layout; src/hist.rs has lat_idx and its bounds. */
static __always_inline __u32 lat_idx_of(__u64 ns, __u32 p, __u32 g)
{
	if (ns < (1ULL << g))
		return ns;
	return ((p - g + 1) << g) | ((ns >> (p - g)) & ((1 << g) - 1));
}

static __always_inline __u32 lat_idx(__u64 ns, __u32 g)
{
	if (ns > LAT_CLAMP)
		ns = LAT_CLAMP;
	return lat_idx_of(ns, log2_u64(ns), g);
}

/* One latency's bucket in both resolutions, from one log2: `fine` (g = 3) for the run's
 * histograms, `coarse` (g = 2) for the per-second, attribution and split ones. */
struct lat_ix {
	__u32 fine;
	__u32 coarse;
};

static __always_inline struct lat_ix lat_ix(__u64 ns)
{
	struct lat_ix x;
	__u32 p;

	if (ns > LAT_CLAMP)
		ns = LAT_CLAMP;
	p = log2_u64(ns);
	x.fine = lat_idx_of(ns, p, LAT_SUB_BITS);
	x.coarse = lat_idx_of(ns, p, SEC_SUB_BITS);
	return x;
}

/* ns / 1000: a multiply and a shift for values under 2^32 ns (4.3 s; exact there), a division
 * above. */
static __always_inline __u64 ns_to_us(__u64 ns)
{
	return ns < (1ULL << 32) ? (ns * 274877907ULL) >> 38 : ns / 1000;
}

/* unix_ns / len, checking the hinted period first. BPF has no multiply-high, so clang divides
 * even by a constant: a 64-bit division per slot and per second on every IO's path. The hint is
 * the last answer any CPU got, so id * len cannot overflow; the check makes the result exact
 * (a stale hint, or a CPU that raced across the boundary, just divides and moves the hint). */
static __always_inline __u64 period_of(__u64 unix_ns, __u64 len, __u64 *hint)
{
	__u64 id = *(volatile __u64 *)hint;

	if (unix_ns - id * len >= len) {
		id = unix_ns / len;
		*(volatile __u64 *)hint = id;
	}
	return id;
}

#endif
