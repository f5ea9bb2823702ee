// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* iotrace.bpf.c: kernel side of iodig's block-IO tracer.
 *
 * Hooks block_rq_{issue,complete,requeue} (and block_io_start for attribution) and aggregates
 * in the kernel, per CPU, per traced whole disk x op: IO and byte totals, size and latency
 * histograms, unix-aligned time slots (IOs, bytes, max latency, queue-depth max and integral),
 * per-second latency histograms.
 * Nothing is streamed per IO unless the optional event ring buffer is enabled, because per-event
 * streaming is what loses data and costs most at NVMe rates (reference/block-tracing.md §3.1).
 *
 * Every handler exists twice: a tp_btf program (typed args, direct loads) and a raw_tp twin
 * (probe reads) for kernels where tp_btf does not load. handlers.bpf.h is included once per
 * flavour with a different field-read macro, so the logic is written once. */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "iotrace.h"
#include "buckets.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by userspace between open and load, so the verifier sees constants. */
const volatile __u32 ndevs = 0;
const volatile __u32 devs[MAX_DEVS] = {};  /* kernel dev_t: major << 20 | minor */
/* true when btf_trace_block_rq_issue has one argument (rq), false for the pre-5.11 (q, rq)
 * layout; detected from BTF in userspace (func-proto vlen), never from the kernel version,
 * because 5.10.137+ backported the one-argument form (bcc PR#4748, #5244). */
const volatile bool single_arg = true;
const volatile __u64 slot_ns = 100000000;
const volatile __u64 unix_offset_ns = 0; /* CLOCK_REALTIME - CLOCK_MONOTONIC at load */
const volatile bool emit_events = false;
/* Attribution (see iotrace.h): the thread-name table built in Rust (src/attr.rs), the classes
 * used when no rule matches, and the row layout: rows [0, reserved/2) are "unknown submitter"
 * per device x op, [reserved/2, reserved) the cap's overflow per device x op, then one row per
 * key with a process up to attr_rows - ATTR_SPARE, then one per key without one (tgid 0) up to
 * attr_rows. */
const volatile bool attribution = false;
const volatile __u32 nrules = 0;
const volatile struct class_rule rules[MAX_RULES] = {};
const volatile __u32 class_swap = 0;
const volatile __u32 class_kthread = 0;
const volatile __u32 class_other = 0;
/* --cgroup targets of the v2 tree where IO is not charged to them (the v2 tree of a hybrid
 * host, a cgroup without io): their ids and levels, to key each IO by which of them the
 * submitting task is inside (attr_key.in_watched). The kernel decides membership through the
 * task's ancestor at each target's level, so cgroups made under a target during the trace count
 * too. None (the usual case): the verifier drops the check from the program. */
const volatile __u32 nwatch_cg = 0;
const volatile __u64 watch_cg_id[MAX_WATCH_CG] = {};
const volatile __u32 watch_cg_level[MAX_WATCH_CG] = {};
const volatile __u32 attr_reserved = 0;
const volatile __u32 attr_rows = 0;
/* Bit c set: class c is background IO (memtable flush, compaction), whose presence in the
 * block layer splits every other IO's queue and device time (struct split). */
const volatile __u32 bg_classes = 0;
/* Tests only (IODIG_TRACER_DROP_EVERY): skip every Nth final completion, as the kernel skips
 * batches of them on 6.18, so the tests can check what the tracer gives back. 0 = never: the
 * verifier then drops the check from the program. */
const volatile __u32 drop_every = 0;
__u32 drop_seq = 0;

/* Requests issued after attach that are in flight, per device. Global on purpose: the exact
 * depth needs one counter; atomic fetch-add returns the new value without a second read.
 * Cache-line aligned, and so are the background counters below: issue and completion move
 * this line between CPUs on every IO, and the mostly-read background counters would travel
 * with it. */
__s64 inflight[MAX_DEVS] __attribute__((aligned(64))) = {};
/* Attribution rows handed out after the reserved ones to keys with a process, and from
 * attr_rows - ATTR_SPARE to keys without one (either may run past its end). */
__u32 attr_used = 0;
__u32 attr_spare_used = 0;
/* Background requests between block_io_start and final completion, and how many ever
 * started, per device. An IO overlapped background IO iff one was in flight at its start or
 * one started before it completed (bg_started moved): exact, with two counters and no
 * per-IO history. */
__s64 bg_inflight[MAX_DEVS] __attribute__((aligned(64))) = {};
__u64 bg_started[MAX_DEVS] = {};
/* The last slot and second any CPU computed, as hints (see period_of): written once per period,
 * so every CPU reads them from its own cache. A cache line of their own. */
struct period_hints {
	__u64 slot;
	__u64 sec;
	__u64 pad[6];
} hints __attribute__((aligned(64))) = {};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLOT_RING); /* resized to SLOT_RING * ndevs */
	__type(key, __u32);
	__type(value, struct slot);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SEC_RING * NOPS); /* resized to SEC_RING * ndevs * NOPS */
	__type(key, __u32);
	__type(value, struct sec_lat);
} seclat SEC(".maps");

/* The same IOs' OS time (request allocation -> issue), keyed as seclat. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SEC_RING * NOPS); /* resized to SEC_RING * ndevs * NOPS */
	__type(key, __u32);
	__type(value, struct sec_lat);
} seclatq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NOPS * NKINDS); /* resized to ndevs * NOPS * NKINDS */
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NOPS); /* resized to ndevs * NOPS */
	__type(key, __u32);
	__type(value, struct op_total);
} totals SEC(".maps");

/* Per-request state indexed by (device, hw queue, tag) instead of a hash keyed by the
 * request pointer: a hash was the dominant per-IO cost in rezolus#1148 (-12.7% IOPS). A live
 * tag is unique per hw queue, so the index is exact for tags < 1024 and hw queues < 8; beyond
 * that two live requests can meet, which is detected (rq pointer check) and counted.
 * block_rq_insert is not hooked: the OS time (allocation -> issue) comes from
 * rq->start_time_ns at completion, and a fourth program on every IO's path through a scheduler
 * cost IOPS (docs/benchmarks.md).
 * An entry is written at start and issue on the submitting CPU and at completion, often on
 * another, so its cache line travels with the IO: one line per entry, page-aligned (an mmapable
 * array's values start on a page; a plain array's need not start on a line), so that no entry
 * spans two lines and no two tags in flight on different CPUs share one. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STATE_PER_DEV); /* resized to ndevs * STATE_PER_DEV */
	__type(key, __u32);
	__type(value, struct rq_state);
} rqstate SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Attribution key -> row. Looked up once per request at block_io_start; inserted once per key. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * ATTR_KEYS);
	__type(key, struct attr_key);
	__type(value, __u32);
} attr_ids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ATTR_KEYS); /* resized to attr_rows */
	__type(key, __u32);
	__type(value, struct attr_info);
} attr_info SEC(".maps");

/* Saves the rule scan and the key hash per IO: a thread keeps submitting as the same key.
 * A per-CPU array (lookups are inlined) instead of task storage (a helper call per IO). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SUB_WAYS);
	__type(key, __u32);
	__type(value, struct sub_cache);
} subs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SPLIT_OPS * MAX_CLASSES * 2); /* resized to ndevs times that */
	__type(key, __u32);
	__type(value, struct split);
} splits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ATTR_KEYS); /* resized to attr_rows */
	__type(key, __u32);
	__type(value, struct attr_val);
} attr_vals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* resized when the event stream is on */
} events SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &which);

	if (v)
		*v += 1;
}

#define OPV(N)                                                          \
	(bpf_core_enum_value_exists(enum req_op, REQ_OP_##N)            \
		 ? bpf_core_enum_value(enum req_op, REQ_OP_##N)         \
		 : bpf_core_enum_value(enum req_opf, REQ_OP_##N##___opf))

/* Op from cmd_flags & REQ_OP_MASK, never from rwbs (its letters and length changed). Secure
 * erase, write-zeroes and zone ops are "other". */
static __always_inline __u32 op_class(__u32 cmd_flags)
{
	__u32 op = cmd_flags & REQ_OP_MASK;

	if (op == OPV(READ))
		return OP_READ;
	if (op == OPV(WRITE))
		return OP_WRITE;
	if (op == OPV(DISCARD))
		return OP_DISCARD;
	if (op == OPV(FLUSH))
		return OP_FLUSH;
	return OP_OTHER;
}

static __always_inline void hist_add(__u32 d, __u32 op, __u32 kind, __u32 idx, __u64 v)
{
	__u32 key = (d * NOPS + op) * NKINDS + kind;
	struct hist *h = bpf_map_lookup_elem(&hists, &key);

	if (h && idx < SIZE_BUCKETS)
		h->b[idx] += v;
}

/* The slot a time falls in, from the shared hint; the one place that turns a time into a slot. */
static __always_inline __u64 slot_id(__u64 unix_ns)
{
	return period_of(unix_ns, slot_ns, &hints.slot);
}

/* The current slot entry of device d on this CPU, reset when it still holds an older slot. */
static __always_inline struct slot *slot_get(__u32 d, __u64 unix_ns, __u64 *off)
{
	__u64 id = slot_id(unix_ns);
	__u32 key = (__u32)(id % SLOT_RING) * ndevs + d;
	struct slot *s = bpf_map_lookup_elem(&slots, &key);

	if (!s)
		return 0;
	if (s->id != id) {
		__builtin_memset(s, 0, sizeof(*s));
		s->id = id;
	}
	*off = unix_ns - id * slot_ns;
	return s;
}

/* `dev_i`, `q_i`: the device and OS time's (allocation -> issue) g = 2 buckets, q_i ~0 when the
 * allocation time is unknown. The run's OS-time histogram is these seconds summed in
 * userspace: one more histogram line per IO here cost ~30 ns per IO. */
static __always_inline void sec_lat_add(__u32 d, __u32 op, __u64 unix_ns, __u32 dev_i, __u32 q_i)
{
	__u64 sec = period_of(unix_ns, 1000000000ULL, &hints.sec);
	__u32 key = ((__u32)(sec % SEC_RING) * ndevs + d) * NOPS + op;
	struct sec_lat *s = bpf_map_lookup_elem(&seclat, &key);

	if (!s)
		return;
	if (s->id != sec) {
		__builtin_memset(s, 0, sizeof(*s));
		s->id = sec;
	}
	if (dev_i < SEC_BUCKETS)
		s->hist[dev_i] += 1;
	if (q_i == ~0u)
		return;
	s = bpf_map_lookup_elem(&seclatq, &key);
	if (!s)
		return;
	if (s->id != sec) {
		__builtin_memset(s, 0, sizeof(*s));
		s->id = sec;
	}
	if (q_i < SEC_BUCKETS)
		s->hist[q_i] += 1;
}

/* Index of kernel dev_t `dev` in the traced list, or -1. A global function on purpose: the
 * verifier checks it once, and to its callers the index is any number. Inlined, it handed
 * each caller a known constant per traced device, so every program was verified once per
 * device, and two devices already took the programs past the kernel's limit (E2BIG). */
__noinline int dev_slot(__u32 dev)
{
	for (int i = 0; i < MAX_DEVS; i++) {
		if (i >= ndevs)
			break;
		if (devs[i] == dev)
			return i;
	}
	return -1;
}

static __always_inline struct rq_state *state_of(__u32 d, __u32 hwq, int tag)
{
	__u32 idx = d * STATE_PER_DEV + (((hwq << 10) | (tag & 1023)) & (STATE_PER_DEV - 1));

	return bpf_map_lookup_elem(&rqstate, &idx);
}

static __always_inline void emit(__u32 d, struct request *rq, __u64 now, __u64 sector,
				 __u32 flags, __u32 bytes, __u64 dev_ns, __s64 qd)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(C_LOST_EVENTS);
		return;
	}
	e->ts_ns = now;
	e->sector = sector;
	e->dev_ns = dev_ns;
	e->queue_ns = 0;
	e->dev = devs[d & (MAX_DEVS - 1)];
	e->cmd_flags = flags;
	e->bytes = bytes;
	e->qd = qd < 0 ? 0 : qd;
	bpf_ringbuf_submit(e, 0);
}

/* The class of an IO from its submitting thread's name (two u64 words of comm) and op, by the
 * first matching rule; CLASS_NONE when none matches (the caller then checks for a kthread). */
static __always_inline bool is_swap(__u32 flags)
{
	return bpf_core_enum_value_exists(enum req_flag_bits, __REQ_SWAP) &&
	       (flags & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_SWAP)));
}

static __always_inline __u32 classify(const __u64 *comm, __u32 op, __u32 flags)
{
	if (is_swap(flags))
		return class_swap;
	for (int i = 0; i < MAX_RULES; i++) {
		if (i >= nrules)
			break;
		if ((comm[0] & rules[i].mask[0]) == rules[i].val[0] &&
		    (comm[1] & rules[i].mask[1]) == rules[i].val[1] && (rules[i].ops & (1u << op)))
			return rules[i].class_id;
	}
	return CLASS_NONE;
}

/* Bit i set: the current task's v2 cgroup is watch_cg_id[i] or under it. */
static __always_inline __u64 in_watched_cgroups(void)
{
	__u64 m = 0;

	for (int i = 0; i < MAX_WATCH_CG; i++) {
		if (i >= nwatch_cg)
			break;
		if (bpf_get_current_ancestor_cgroup_id(watch_cg_level[i]) == watch_cg_id[i])
			m |= 1ULL << i;
	}
	return m;
}

static __always_inline __u32 overflow_row(__u32 dev, __u32 op)
{
	return attr_reserved / 2 + dev * NOPS + op;
}

/* Row idx for key k: info first, then the key (a racing CPU that loses the insert uses the
 * winner's row; its own stays empty and is skipped by userspace). Names only when `named`
 * (a row without a process has none); process == 0: read it from the current task. */
static __always_inline __u32 attr_fill(__u32 idx, struct attr_key *k, bool named,
				       const char *thread, const char *process)
{
	struct attr_info *info = bpf_map_lookup_elem(&attr_info, &idx);
	__u32 *p;

	if (info) {
		info->key = *k;
		if (named) {
			bpf_probe_read_kernel(info->thread, sizeof(info->thread), thread);
			if (process) {
				bpf_probe_read_kernel(info->process, sizeof(info->process), process);
			} else {
				struct task_struct *t = (struct task_struct *)bpf_get_current_task();

				BPF_CORE_READ_INTO(&info->process, t, group_leader, comm);
			}
		}
	}
	if (bpf_map_update_elem(&attr_ids, k, &idx, BPF_NOEXIST)) {
		p = bpf_map_lookup_elem(&attr_ids, k);
		if (p)
			return *p;
		count(C_ATTR_CAP);
		return overflow_row(k->dev, k->op);
	}
	return idx;
}

/* A new row for key k. Once the rows for keys with a process run out (short-lived processes
 * each take one), a new process's IO keeps its class and cgroup in their row without a process,
 * so the classes stay exact however many processes come; only when those run out too is it
 * `capped`. Off the per-IO path: runs once per key. */
static __noinline __u32 attr_new(struct attr_key *k, const char *thread, const char *process)
{
	struct attr_key merged;
	bool named = true;
	__u32 idx, *p;

	if (!k || !thread) {
		count(C_ATTR_CAP);
		return k ? overflow_row(k->dev, k->op) : 0;
	}
	if (k->tgid) {
		idx = attr_reserved + __sync_fetch_and_add(&attr_used, 1);
		if (idx < attr_rows - ATTR_SPARE)
			return attr_fill(idx, k, true, thread, process);
		merged = *k;
		merged.tgid = 0;
		p = bpf_map_lookup_elem(&attr_ids, &merged);
		if (p)
			return *p;
		k = &merged;
		named = false;
	}
	idx = attr_rows - ATTR_SPARE + __sync_fetch_and_add(&attr_spare_used, 1);
	if (idx >= attr_rows) {
		count(C_ATTR_CAP);
		return overflow_row(k->dev, k->op);
	}
	return attr_fill(idx, k, named, thread, process);
}

static __always_inline __u32 attr_row(struct attr_key *k, const char *thread, const char *process)
{
	__u32 *p = bpf_map_lookup_elem(&attr_ids, k);

	if (p)
		return *p;
	return attr_new(k, thread, process);
}

/* The row of a completing request. A flush request created by blk-flush never passes
 * block_io_start, but it borrows the tag of the first PREFLUSH request waiting for it, whose
 * attribution is in the same state entry: the flush is charged to that submitter. Everything
 * else not seen at submission (in flight at attach, passthrough) is "unknown". */
static __always_inline __u32 attr_of(struct rq_state *st, __u64 rq, __u32 d, __u32 op)
{
	if (attribution && st) {
		__u64 owner = st->attr_rq;

		if (owner == rq)
			return st->attr;
		if (owner && op == OP_FLUSH) {
			__u32 from = st->attr;
			struct attr_info *info = bpf_map_lookup_elem(&attr_info, &from);
			struct attr_key k;

			if (info) {
				k = info->key;
				k.op = OP_FLUSH;
				k.dev = d;
				return attr_row(&k, info->thread, info->process);
			}
		}
	}
	return d * NOPS + op;
}

static __always_inline struct attr_slot *attr_slot_get(struct attr_val *a, __u64 id)
{
	struct attr_slot *sl = &a->slot[id % SLOT_RING];

	if (sl->id != id) {
		sl->id = id;
		sl->ios = 0;
		sl->life_us = 0;
		sl->bytes = 0;
	}
	return sl;
}

/* Adds a completed, attributed read or write to its class's split: queue and device time
 * (q_i, dev_i: their g = 2 buckets; q_i ~0 when the request's allocation time is unknown), on
 * the side of whether background IO overlapped it. */
static __always_inline void split_add(__u32 d, __u32 op, struct rq_state *st, __u64 queue_ns,
				      __u64 dev_ns, __u32 q_i, __u32 dev_i)
{
	__u32 ov = (st->flags & RQ_BG_AT_START) ||
		   (__u32)bg_started[d & (MAX_DEVS - 1)] != st->bg_seq;
	__u32 key = ((d * SPLIT_OPS + op) * MAX_CLASSES + (st->cls & (MAX_CLASSES - 1))) * 2 + ov;
	struct split *sp = bpf_map_lookup_elem(&splits, &key);

	if (!sp)
		return;
	sp->ios += 1;
	sp->dev_ns += dev_ns;
	if (dev_i < SEC_BUCKETS)
		sp->dev[dev_i] += 1;
	if (q_i != ~0u) {
		sp->queue_ns += queue_ns;
		if (q_i < SEC_BUCKETS)
			sp->queue[q_i] += 1;
	}
}

/* Flavour 1: tp_btf, typed pointers, direct loads (the verifier turns them into faulting
 * loads), CO-RE offsets from preserve_access_index. */
#define RD(p, f) ((p)->f)
#define RD2(p, f, g) ((p)->f->g)
#define CGID(blkg) ((blkg)->blkcg->css.cgroup->kn->id)
#define KTHREAD() (bpf_get_current_task_btf()->flags & PF_KTHREAD)
/* Two direct loads instead of the bpf_get_current_comm() helper. */
#define COMM(c)                                                   \
	do {                                                      \
		struct task_struct *t_ = bpf_get_current_task_btf(); \
		(c)[0] = *(__u64 *)&t_->comm[0];                  \
		(c)[1] = *(__u64 *)&t_->comm[8];                  \
	} while (0)
#define SFX btf
#include "handlers.bpf.h"
#undef RD
#undef RD2
#undef CGID
#undef KTHREAD
#undef COMM
#undef SFX

/* Flavour 2: raw_tp, untyped u64 args, every load through bpf_probe_read_kernel. */
#define RD(p, f) BPF_CORE_READ(p, f)
#define RD2(p, f, g) BPF_CORE_READ(p, f, g)
#define CGID(blkg) BPF_CORE_READ(blkg, blkcg, css.cgroup, kn, id)
#define KTHREAD() \
	(BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), flags) & PF_KTHREAD)
#define COMM(c) bpf_get_current_comm((c), 16)
#define SFX raw
#include "handlers.bpf.h"
#undef RD
#undef RD2
#undef CGID
#undef KTHREAD
#undef COMM
#undef SFX

static __always_inline struct request *rq_arg(__u64 *args)
{
	return (struct request *)(single_arg ? args[0] : args[1]);
}

SEC("tp_btf/block_rq_issue")
int rq_issue_btf(__u64 *ctx)
{
	on_issue_btf(rq_arg(ctx));
	return 0;
}

SEC("tp_btf/block_rq_complete")
int rq_complete_btf(__u64 *ctx)
{
	/* (rq, error, nr_bytes) on every kernel with tp_btf; only error changed type. */
	on_complete_btf((struct request *)ctx[0], (__u32)ctx[2]);
	return 0;
}

SEC("tp_btf/block_rq_requeue")
int rq_requeue_btf(__u64 *ctx)
{
	on_requeue_btf(rq_arg(ctx));
	return 0;
}

/* block_io_start (6.5+): blk_account_io_start(), in the submitting task's context. */
SEC("tp_btf/block_io_start")
int rq_start_btf(__u64 *ctx)
{
	on_start_btf((struct request *)ctx[0]);
	return 0;
}

SEC("raw_tp/block_io_start")
int rq_start_raw(struct bpf_raw_tracepoint_args *ctx)
{
	on_start_raw((struct request *)ctx->args[0]);
	return 0;
}

SEC("raw_tp/block_rq_issue")
int rq_issue_raw(struct bpf_raw_tracepoint_args *ctx)
{
	on_issue_raw(rq_arg(ctx->args));
	return 0;
}

SEC("raw_tp/block_rq_complete")
int rq_complete_raw(struct bpf_raw_tracepoint_args *ctx)
{
	on_complete_raw((struct request *)ctx->args[0], (__u32)ctx->args[2]);
	return 0;
}

SEC("raw_tp/block_rq_requeue")
int rq_requeue_raw(struct bpf_raw_tracepoint_args *ctx)
{
	on_requeue_raw(rq_arg(ctx->args));
	return 0;
}
