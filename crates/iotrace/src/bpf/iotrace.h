/* iotrace.h: constants and records shared by the BPF side (iotrace.bpf.c) and the Rust side
 * (src/ebpf/layout.rs mirrors every struct here field by field; keep them in step). */
#ifndef IOTRACE_H
#define IOTRACE_H

#define MAX_DEVS 16          /* whole disks traced at once (rodata list, linear search) */
#define NOPS 5               /* read, write, discard, flush, other */
#define OP_READ 0
#define OP_WRITE 1
#define OP_DISCARD 2
#define OP_FLUSH 3
#define OP_OTHER 4

/* Size histogram: bucket 0 = 0 bytes (flushes); 1..512 = (4 KiB*(i-1), 4 KiB*i] up to 2 MiB;
 * then 16 log-linear sub-buckets per power of two from (2 MiB, 4 MiB] to (2 GiB, 4 GiB]. */
#define SIZE_LIN_BUCKETS 513
#define SIZE_LOG_FIRST_POW 21
#define SIZE_SUB_BITS 4
#define SIZE_BUCKETS (SIZE_LIN_BUCKETS + 11 * (1 << SIZE_SUB_BITS)) /* 689 */

/* Latency histograms (ns): exact below 2^g, then 2^g sub-buckets per power of two, values
 * clamped below 2^40 ns (18 min). g = 3 (±6%) for run totals, g = 2 (±12%) per second. */
#define LAT_SUB_BITS 3
#define LAT_BUCKETS ((40 - LAT_SUB_BITS + 1) << LAT_SUB_BITS) /* 304 */
#define SEC_SUB_BITS 2
#define SEC_BUCKETS ((40 - SEC_SUB_BITS + 1) << SEC_SUB_BITS) /* 156 */
#define LAT_CLAMP ((1ULL << 40) - 1)

/* Histogram kinds per device x op in the `hists` map. */
#define H_SIZE_COUNT 0
#define H_SIZE_BYTES 1
#define H_LAT_DEVICE 2 /* issue -> final completion */
#define H_LAT_TOTAL 3  /* request allocation (rq->start_time_ns) -> final completion */
#define NKINDS 4       /* OS time (allocation -> issue) for the run: the seclatq seconds summed */

#define SLOT_RING 64   /* slots kept in the kernel; userspace drains well within 64 slots */
#define SEC_RING 8     /* seconds of per-second latency histograms kept */
#define STATE_PER_DEV 8192 /* per-request state entries per device, indexed by hctx/tag */

/* Self-check counters (index into `counters`). */
#define C_LOST_EVENTS 0      /* ring buffer full: raw event dropped */
#define C_STATE_COLLISION 1  /* issue found its state slot held by another live request */
#define C_NO_ISSUE 2         /* final completion of a request not seen at issue */
#define C_UNSEEN 3           /* a request used again while its last use was still held in flight:
                              * the kernel did not run the completion program for it; counted then */
#define C_REQUEUES 4
#define C_PARTIAL 5          /* partial completions (not counted as IOs) */
#define C_BAD_TAG 6          /* issue with no driver tag: not tracked */
#define C_ATTR_CAP 7         /* attribution key cap hit: IO counted in its (device, op) overflow row */
#define C_ATTR_STALE 8       /* block_io_start found its state entry's attribution still held */
#define NCOUNTERS 10

/* Attribution ("who issued each IO"): classified at block_io_start from the submitting thread,
 * aggregated at completion per attribution key = (device, op, class, cgroup id, tgid, and the
 * watched v2 cgroups the submitting task was in). */
#define MAX_RULES 64         /* thread-name rules (rodata, first match wins) */
#define ATTR_KEYS 512        /* distinct keys beyond the reserved rows; resized in userspace */
#define ATTR_SPARE 128       /* and beyond them, rows for keys without a process (tgid 0): IO
			      * started with none, or of processes after the ATTR_KEYS ran out */
#define ATTR_SIZE_BUCKETS (SEC_BUCKETS + 1) /* 0 bytes, then lat_idx(bytes - 1, 2) + 1 */
#define CLASS_NONE 0xffff
#define MAX_CLASSES 32       /* class ids < 32: the background set is a 32-bit mask */
#define SPLIT_OPS 2          /* read and write are split by background IO; other ops are not */
#define SUB_WAYS 8           /* per-CPU submitter cache entries, indexed by pid */
#define MAX_WATCH_CG 16      /* --cgroup targets of the v2 tree matched by the submitting task */

/* rq_state.flags */
#define RQ_BG 1              /* this request is background IO (its class is in bg_classes) */
#define RQ_BG_AT_START 2     /* background IO was in the block layer at its block_io_start */

struct slot_op {
	__u32 ios;
	__u32 _pad;
	__u64 bytes;
	__u64 lat_max_ns;
};

/* One device in one time slot, per CPU. `id` = unix-aligned slot number; an entry whose id is
 * not the wanted one is stale and reads as zero. Queue-depth integral: see docs/tracing.md. */
struct slot {
	__u64 id;
	struct slot_op op[NOPS];
	__u32 qd_max;
	__u32 n_issue;
	__u32 n_done;
	__u32 _pad;
	__u64 sum_issue_off; /* sum over tracked issues of (t - slot start), ns */
	__u64 sum_done_off;  /* sum over tracked completions/requeues of (t - slot start), ns */
};

struct sec_lat {
	__u64 id; /* unix second */
	__u32 hist[SEC_BUCKETS]; /* one device, one op, one second */
};

struct hist {
	__u64 b[SIZE_BUCKETS];
};

struct op_total {
	__u64 ios;
	__u64 bytes; /* sum of completed bytes, partial completions included */
	__u64 lat_max_ns;
};

struct rq_state {
	__u64 rq;       /* struct request * of the live request holding this entry, 0 = free */
	__u64 issue_ns;
	__u32 bytes;
	__u32 attr;     /* attribution row of attr_rq, set at block_io_start */
	__u64 attr_rq;  /* request the attribution belongs to; cleared at its final completion */
	__u32 bg_seq;   /* low 32 bits of bg_started[dev] at block_io_start */
	__u8 cls;       /* class of attr_rq */
	__u8 flags;     /* RQ_BG, RQ_BG_AT_START */
	__u8 op;        /* OP_* of the issued request (rq) */
	__u8 _pad;
	__u64 alloc_ns; /* rq->start_time_ns of the use holding the entry (0: unknown) */
	__u64 _line[2]; /* to 64 bytes: one cache line per entry (see rqstate) */
};

/* A thread-name rule: comm (16 bytes as two u64) & mask == val, and the op's bit in ops. */
struct class_rule {
	__u64 val[2];
	__u64 mask[2];
	__u32 ops;
	__u32 class_id;
};

struct attr_key {
	__u64 cgid;     /* kernfs id of the blkcg's cgroup (rq->bio->bi_blkg); 0 = none */
	__u32 tgid;
	__u16 class_id;
	__u8 dev;
	__u8 op;
	__u64 in_watched; /* bit i: the submitting task was inside the i-th watched cgroup of the v2
			   * tree (watch_cg_id), checked by ancestor id at block_io_start; only
			   * while such --cgroup targets are watched, else 0 */
};

/* Written once when a key gets its row: who it is, for userspace to name. */
struct attr_info {
	struct attr_key key;
	char thread[16];  /* first submitting thread seen */
	char process[16]; /* its thread-group leader's comm */
};

struct attr_slot {
	__u64 id;
	__u64 bytes;
	__u32 ios;
	__u32 life_us;  /* sum of (completion - request allocation) of the IOs completed, us */
};

/* Per-CPU cache of the rows a submitter last used, SUB_WAYS entries indexed by pid. Exact:
 * an entry is used only when pid_tgid, thread name, cgroup (and the watched v2 cgroups the
 * task is in, while some are watched) and device all equal the current ones, and those
 * determine the attribution key (class from name and op, cgroup, tgid, in_watched). */
struct sub_cache {
	__u64 pid_tgid;
	__u64 comm[2];
	__u64 cgid;
	__u64 in_watched;
	__u32 dev;
	__u32 row[8]; /* by op (8: masked with 7 for the verifier): row | class << 24; ~0 = none */
};

/* Per device x op (read, write) x class x (0 = no background IO during the IO's life,
 * 1 = background IO in flight at some point of it): OS queue time (request allocation ->
 * issue) and device time (issue -> completion), per CPU. */
struct split {
	__u64 ios;
	__u64 queue_ns;
	__u64 dev_ns;
	__u32 queue[SEC_BUCKETS];
	__u32 dev[SEC_BUCKETS];
};

/* One attribution row, per CPU. */
struct attr_val {
	__u64 ios;
	__u64 bytes;
	__u64 lat_max_ns;
	__u32 size[ATTR_SIZE_BUCKETS];
	__u32 lat[SEC_BUCKETS]; /* device latency, g = 2 */
	struct attr_slot slot[SLOT_RING];
};

/* Raw per-IO record of the optional event stream, written at final completion. */
struct event {
	__u64 ts_ns;     /* completion, CLOCK_MONOTONIC */
	__u64 sector;
	__u64 dev_ns;    /* issue -> completion; 0 if issue not seen */
	__u64 queue_ns;  /* insert -> issue; 0 if no insert seen */
	__u32 dev;       /* kernel dev_t (major << 20 | minor) */
	__u32 cmd_flags;
	__u32 bytes;
	__u32 qd;        /* in-flight depth of the device after this completion */
};

#endif
