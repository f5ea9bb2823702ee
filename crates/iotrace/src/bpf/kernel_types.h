/* kernel_types.h: the few kernel types iotrace reads, declared by hand.
 *
 * Why not a vendored vmlinux.h: it is ~3 MB per architecture and pins one kernel's layout,
 * while CO-RE only needs the fields we touch. Every struct here carries
 * preserve_access_index, so clang emits relocations and libbpf fixes the offsets against the
 * running kernel's BTF at load time; a field that does not exist is tested with
 * bpf_core_field_exists() before use. The uapi constants below are stable kernel ABI. */
#ifndef KERNEL_TYPES_H
#define KERNEL_TYPES_H

typedef unsigned char __u8;
typedef short int __s16;
typedef short unsigned int __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long int __s64;
typedef long long unsigned int __u64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __s32 s32;
typedef __u64 u64;
typedef __s64 s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

/* uapi/linux/bpf.h values used here (ABI, never renumbered). */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};
#define BPF_F_NO_PREALLOC 1
#define BPF_F_MMAPABLE (1U << 10)
#define BPF_LOCAL_STORAGE_GET_F_CREATE 1
enum { BPF_ANY = 0, BPF_NOEXIST = 1, BPF_EXIST = 2 };

struct bpf_raw_tracepoint_args {
	__u64 args[0];
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct gendisk {
	int major;
	int first_minor;
};

struct request_queue {
	struct gendisk *disk;
};

struct blk_mq_hw_ctx {
	unsigned int queue_num;
};

struct request {
	struct request_queue *q;
	struct blk_mq_hw_ctx *mq_hctx;
	unsigned int cmd_flags; /* blk_opf_t since 6.0, unsigned int before: both 32 bits */
	int tag;
	int internal_tag;
	unsigned int __data_len;
	unsigned long long __sector;
	unsigned long long start_time_ns;
	struct bio *bio;
};

struct kernfs_node {
	u64 id; /* 64-bit ino of the cgroup directory (5.5+) */
};

struct cgroup {
	struct kernfs_node *kn;
};

struct cgroup_subsys_state {
	struct cgroup *cgroup;
};

struct blkcg {
	struct cgroup_subsys_state css;
};

struct blkcg_gq {
	struct blkcg *blkcg;
};

struct bio {
	struct blkcg_gq *bi_blkg; /* CONFIG_BLK_CGROUP only: tested with bpf_core_field_exists */
};

struct task_struct {
	unsigned int flags;
	struct task_struct *group_leader;
	char comm[16];
};

/* Before 5.17 (f3fa33acca9f) the disk hung off the request itself. */
struct request___old {
	struct gendisk *rq_disk;
};

#pragma clang attribute pop

/* REQ_OP_* values, resolved with CO-RE enum relocations: the enum is `req_op` on 6.x and
 * `req_opf` before; the values we classify (READ 0, WRITE 1, FLUSH 2, DISCARD 3) have not moved,
 * but relocating keeps us honest if they do. */
enum req_op {
	REQ_OP_READ = 0,
	REQ_OP_WRITE = 1,
	REQ_OP_FLUSH = 2,
	REQ_OP_DISCARD = 3,
};
enum req_opf {
	REQ_OP_READ___opf = 0,
	REQ_OP_WRITE___opf = 1,
	REQ_OP_FLUSH___opf = 2,
	REQ_OP_DISCARD___opf = 3,
};
/* Request flag bits; __REQ_SWAP moved between releases, so it is relocated, never hard-coded. */
enum req_flag_bits {
	__REQ_SWAP = 24,
};
#define PF_KTHREAD 0x00200000 /* include/linux/sched.h, unchanged since 2.6 */

#define REQ_OP_BITS 8 /* a #define in blk_types.h, so not in BTF; 8 since 4.10 */
#define REQ_OP_MASK ((1u << REQ_OP_BITS) - 1)

#endif
