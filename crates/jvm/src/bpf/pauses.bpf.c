// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* pauses.bpf.c: stop-the-world pauses of JVMs, from HotSpot's own USDT probes.
 *
 * HotSpot marks every safepoint (hs_private:safepoint__begin/end: all Java threads stopped) and
 * every collection (hotspot:gc__begin/end, gc__begin's argument true for a full GC) with a
 * probe in libjvm.so: a nop the kernel turns into a uprobe here, so no JVM flag or restart is
 * needed and a JVM that is not traced pays nothing. Each pause is sent once, when it ends:
 * a handful a second at most, never one per operation. Userspace attaches these programs at
 * the probes' file offsets (read from libjvm.so's .note.stapsdt), one JVM process each. */

/* The few uapi types bpf_helpers.h names, declared by hand (no kernel headers needed). */
typedef unsigned char __u8;
typedef short int __s16;
typedef short unsigned int __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long int __s64;
typedef long long unsigned int __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;

/* uapi/linux/bpf.h values used here (ABI, never renumbered). */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_RINGBUF = 27,
};
enum { BPF_ANY = 0 };

#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define KIND_SAFEPOINT 0
#define KIND_GC 1

/* What userspace reads: one ended pause. */
struct pause {
	__u32 tgid;
	__u32 kind;
	__u64 begin_ns; /* bpf_ktime_get_ns() */
	__u64 end_ns;
	__u32 full;     /* gc: the collection was a full one; 2 = not known */
	__u32 pad;
};

struct open_pause {
	__u64 begin_ns;
	__u32 full;
	__u32 pad;
};

/* An open pause per (tgid, kind): key tgid << 1 | kind. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct open_pause);
} open SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} pauses SEC(".maps");

/* Set by userspace before load: the byte offset of the first argument register (rdi) in the
 * uprobe's pt_regs on x86-64, or -1 where the full-GC flag is not read. */
const volatile int arg0_offset = -1;

static __always_inline int begin(__u32 kind, __u32 full)
{
	__u64 key = (bpf_get_current_pid_tgid() >> 32) << 1 | kind;
	struct open_pause p = { .begin_ns = bpf_ktime_get_ns(), .full = full };
	bpf_map_update_elem(&open, &key, &p, BPF_ANY);
	return 0;
}

static __always_inline int end(__u32 kind)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 key = (__u64)tgid << 1 | kind;
	struct open_pause *o = bpf_map_lookup_elem(&open, &key);
	if (!o)
		return 0; /* begun before the probe was attached */
	struct pause *e = bpf_ringbuf_reserve(&pauses, sizeof(*e), 0);
	if (e) {
		e->tgid = tgid;
		e->kind = kind;
		e->begin_ns = o->begin_ns;
		e->end_ns = bpf_ktime_get_ns();
		e->full = o->full;
		e->pad = 0;
		bpf_ringbuf_submit(e, 0);
	}
	bpf_map_delete_elem(&open, &key);
	return 0;
}

SEC("uprobe")
int safepoint_begin(void *ctx)
{
	return begin(KIND_SAFEPOINT, 2);
}

SEC("uprobe")
int safepoint_end(void *ctx)
{
	return end(KIND_SAFEPOINT);
}

SEC("uprobe")
int gc_begin(void *ctx)
{
	__u32 full = 2;
	if (arg0_offset >= 0) {
		__u64 arg = 0;
		/* The probe's argument is a bool in the low byte of the first argument register. */
		if (bpf_probe_read_kernel(&arg, sizeof(arg), (char *)ctx + arg0_offset) == 0)
			full = (arg & 0xff) != 0;
	}
	return begin(KIND_GC, full);
}

SEC("uprobe")
int gc_end(void *ctx)
{
	return end(KIND_GC);
}
