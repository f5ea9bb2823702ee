/* handlers.bpf.h: the tracer's logic, included by iotrace.bpf.c once per program flavour with
 * RD(p, f) = how to read field f of kernel pointer p and SFX = the name suffix. No include
 * guard on purpose. */
#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)
#define FN(name) CAT(name, SFX)

/* Index of the request's whole disk in the traced list, or -1. */
static __always_inline int FN(dev_index)(struct request *rq)
{
	struct gendisk *disk;
	__u32 dev;

	if (bpf_core_field_exists(((struct request___old *)rq)->rq_disk))
		disk = RD((struct request___old *)rq, rq_disk);
	else
		disk = RD2(rq, q, disk);
	if (!disk)
		return -1;
	dev = ((__u32)RD(disk, major) << 20) | (__u32)RD(disk, first_minor);
	/* One traced disk, the usual case: compared inline, without dev_slot's call and return
	 * on every request of every disk. The verifier then sees the index as the constant 0,
	 * which is only a problem from two devices on. */
	if (ndevs == 1)
		return devs[0] == dev ? 0 : -1;
	return dev_slot(dev);
}

/* The request's state entry. The tag used is the one that lives as long as the request: the
 * scheduler tag when an elevator is attached (the driver tag is put back *before*
 * block_rq_requeue fires, so rq->tag is -1 there), else the driver tag. */
static __always_inline struct rq_state *FN(state)(__u32 d, struct request *rq)
{
	int tag = RD(rq, internal_tag);

	if (tag < 0)
		tag = RD(rq, tag);

	if (tag < 0)
		return 0;
	return state_of(d, RD2(rq, mq_hctx, queue_num), tag);
}

/* A tracked request leaves the device (final completion or requeue): depth -1. */
static __always_inline __s64 FN(leave)(__u32 d, struct rq_state *st, struct slot *s, __u64 off)
{
	st->rq = 0;
	if (s) {
		s->n_done += 1;
		s->sum_done_off += off;
	}
	return __sync_fetch_and_add(&inflight[d & (MAX_DEVS - 1)], -1) - 1;
}

/* A request struct belongs to its tag (blk-mq preallocates one per tag), so a new use of a
 * request whose last use still holds the state entry means that last use ended unseen: on
 * 6.18 the kernel skips the completion program for whole batches of completions (perf counts
 * them, every BPF program on the tracepoint misses them, with no recursion miss counted).
 * block_io_start runs once per use, so there a held entry is always a last use; at issue
 * (the only place without attribution) a new use is told from a re-issue after a requeue by
 * its allocation time. A last use that was issued is counted now, as its completion would
 * have counted it (the IO, its bytes and size, in this slot and in its attribution row, no
 * latency: when it completed is unknown), and gives back its place in the queue depth; with
 * `attr`, its background-IO mark too, which would otherwise file every later IO on the
 * device as overlapping background IO. A last use that was never issued was merged into
 * another request: it only gives back its mark. */
static __always_inline void FN(release_last_use)(__u32 d, struct rq_state *st, __u64 rq,
						  bool attr)
{
	__u32 op = st->op < NOPS ? st->op : OP_OTHER;
	__u32 tk = d * NOPS + op, row = d * NOPS + op, bytes = st->bytes;
	struct op_total *t;
	struct attr_val *a;
	struct slot *s;
	__u64 now, off = 0;

	if (attr && st->attr_rq == rq) {
		row = st->attr;
		if (st->flags & RQ_BG)
			__sync_fetch_and_add(&bg_inflight[d & (MAX_DEVS - 1)], -1);
		st->attr_rq = 0;
	}
	if (st->rq != rq)
		return;
	count(C_UNSEEN);
	now = bpf_ktime_get_ns();
	s = slot_get(d, now + unix_offset_ns, &off);
	t = bpf_map_lookup_elem(&totals, &tk);
	if (t) {
		t->ios += 1;
		t->bytes += bytes;
	}
	if (s) {
		s->op[op].ios += 1;
		s->op[op].bytes += bytes;
	}
	a = bpf_map_lookup_elem(&attr_vals, &row);
	if (a) {
		struct attr_slot *asl = attr_slot_get(a, s ? s->id : slot_id(now + unix_offset_ns));
		__u32 si = bytes ? 1 + lat_idx(bytes - 1, SEC_SUB_BITS) : 0;

		a->ios += 1;
		a->bytes += bytes;
		if (si < ATTR_SIZE_BUCKETS)
			a->size[si] += 1;
		asl->ios += 1;
		asl->bytes += bytes;
	}
	hist_add(d, op, H_SIZE_COUNT, size_idx(bytes), 1);
	hist_add(d, op, H_SIZE_BYTES, size_idx(bytes), bytes);
	FN(leave)(d, st, s, off);
}

static __always_inline void FN(on_issue)(struct request *rq)
{
	int d = FN(dev_index)(rq);
	struct rq_state *st;
	struct slot *s;
	__u64 now, off, alloc;
	__s64 qd;

	if (d < 0)
		return;
	now = bpf_ktime_get_ns();
	st = FN(state)(d, rq);
	if (!st) {
		count(C_BAD_TAG);
		return;
	}
	alloc = RD(rq, start_time_ns);
	/* With attribution, block_io_start has already given back a last use's entry, and the
	 * attribution held now is this use's own. */
	if (st->rq == (__u64)rq && alloc && alloc != st->alloc_ns)
		FN(release_last_use)(d, st, (__u64)rq, false);
	if (st->rq == (__u64)rq) {
		/* Re-issue (after a requeue) without a completion in between: keep it counted
		 * once in flight. */
		st->issue_ns = now;
		return;
	}
	if (st->rq) {
		count(C_STATE_COLLISION);
		return;
	}
	st->rq = (__u64)rq;
	st->issue_ns = now;
	st->alloc_ns = alloc;
	st->op = op_class(RD(rq, cmd_flags));
	st->bytes = RD(rq, __data_len);
	qd = __sync_fetch_and_add(&inflight[d & (MAX_DEVS - 1)], 1) + 1;
	s = slot_get(d, now + unix_offset_ns, &off);
	if (!s)
		return;
	s->n_issue += 1;
	s->sum_issue_off += off;
	if (qd > s->qd_max)
		s->qd_max = qd;
}

/* The cgroup the request's first bio is charged to: bio->bi_blkg->blkcg's cgroup, as its
 * kernfs id (the cgroup directory's inode number). 0 when there is no bio, no blkg, or the
 * kernel has no CONFIG_BLK_CGROUP. */
static __always_inline __u64 FN(cgroup_of)(struct request *rq)
{
	struct bio *bio;
	struct blkcg_gq *blkg;

	if (!bpf_core_field_exists(((struct bio *)0)->bi_blkg))
		return 0;
	bio = RD(rq, bio);
	if (!bio)
		return 0;
	blkg = RD(bio, bi_blkg);
	if (!blkg)
		return 0;
	return CGID(blkg);
}

/* block_io_start: the submitter is `current`. Classifies it and stores the attribution row
 * and class in the request's state entry (the request already holds its tag here), with what
 * it needs to know at completion whether background IO overlapped it. */
static __always_inline void FN(on_start)(struct request *rq)
{
	__u64 comm[2] = {}, id;
	struct attr_key k = {};
	struct sub_cache *c;
	struct rq_state *st;
	__u32 flags, cls, row, v, w;
	__u32 dm;
	int d;

	if (!attribution)
		return;
	d = FN(dev_index)(rq);
	if (d < 0)
		return;
	st = FN(state)(d, rq);
	if (!st)
		return;
	dm = d & (MAX_DEVS - 1);
	flags = RD(rq, cmd_flags);
	k.op = op_class(flags);
	k.dev = d;
	COMM(comm);
	k.cgid = FN(cgroup_of)(rq);
	if (nwatch_cg)
		k.in_watched = in_watched_cgroups();
	id = bpf_get_current_pid_tgid();
	w = id & (SUB_WAYS - 1);
	c = bpf_map_lookup_elem(&subs, &w);
	if (c && (c->pid_tgid != id || c->comm[0] != comm[0] || c->comm[1] != comm[1] ||
		  c->cgid != k.cgid || (nwatch_cg && c->in_watched != k.in_watched) || c->dev != d)) {
		c->pid_tgid = id;
		c->comm[0] = comm[0];
		c->comm[1] = comm[1];
		c->cgid = k.cgid;
		c->in_watched = k.in_watched;
		c->dev = d;
		for (int i = 0; i < 8; i++)
			c->row[i] = ~0u;
	}
	if (st->attr_rq == (__u64)rq)
		FN(release_last_use)(d, st, (__u64)rq, true);
	if (st->attr_rq && st->attr_rq != (__u64)rq) {
		/* Its request went away without a completion (merged into another): it is no
		 * longer in flight. */
		count(C_ATTR_STALE);
		if (st->flags & RQ_BG)
			__sync_fetch_and_add(&bg_inflight[dm], -1);
	}
	v = c && !is_swap(flags) ? c->row[k.op & 7] : ~0u;
	if (v != ~0u) {
		row = v & 0xffffff;
		cls = v >> 24;
	} else {
		cls = classify(comm, k.op, flags);
		if (cls == CLASS_NONE)
			cls = KTHREAD() ? class_kthread : class_other;
		k.class_id = cls;
		k.tgid = id >> 32;
		row = attr_row(&k, (const char *)comm, 0);
		/* Swap IO is classified by its flag, not the thread: never cached. */
		if (c && !is_swap(flags))
			c->row[k.op & 7] = row | (cls << 24);
	}
	st->attr = row;
	st->cls = cls;
	/* In flight first, then started: a reader that sees the new started count also sees
	 * the in-flight one (see bg_inflight). */
	if (bg_classes & (1u << (cls & (MAX_CLASSES - 1)))) {
		st->flags = RQ_BG |
			    (__sync_fetch_and_add(&bg_inflight[dm], 1) > 0 ? RQ_BG_AT_START : 0);
		st->bg_seq = __sync_fetch_and_add(&bg_started[dm], 1) + 1;
	} else {
		st->bg_seq = bg_started[dm];
		st->flags = bg_inflight[dm] > 0 ? RQ_BG_AT_START : 0;
	}
	st->attr_rq = (__u64)rq;
}

static __always_inline void FN(on_final)(struct request *rq, __u32 d, __u32 op, __u32 flags,
					 __u32 nr_bytes, __u64 now, struct slot *s, __u64 off,
					 struct rq_state *st, struct op_total *t, struct attr_val *a,
					 struct attr_slot *asl)
{
	__u64 dev_ns = 0, start = RD(rq, start_time_ns), issue = 0;
	__u32 size = nr_bytes, q_i = ~0u;
	struct lat_ix dev_i = {};
	__s64 qd = 0;
	bool timed = false;

	if (st && st->rq == (__u64)rq) {
		issue = st->issue_ns;
		dev_ns = now - issue;
		size = st->bytes;
		timed = true;
		qd = FN(leave)(d, st, s, off);
		/* Each time's bucket once, for every histogram that takes it. */
		dev_i = lat_ix(dev_ns);
		if (start && start <= issue)
			q_i = lat_idx(issue - start, SEC_SUB_BITS);
		hist_add(d, op, H_LAT_DEVICE, dev_i.fine, 1);
		sec_lat_add(d, op, now + unix_offset_ns, dev_i.coarse, q_i);
		if (s && dev_ns > s->op[op].lat_max_ns)
			s->op[op].lat_max_ns = dev_ns;
		if (t && dev_ns > t->lat_max_ns)
			t->lat_max_ns = dev_ns;
	} else {
		count(C_NO_ISSUE);
	}
	if (st && st->attr_rq == (__u64)rq) {
		if (timed && op < SPLIT_OPS)
			split_add(d, op, st, issue - start, dev_ns, q_i, dev_i.coarse);
		if (st->flags & RQ_BG)
			__sync_fetch_and_add(&bg_inflight[d & (MAX_DEVS - 1)], -1);
		st->attr_rq = 0;
	}
	if (t)
		t->ios += 1;
	if (s)
		s->op[op].ios += 1;
	if (a) {
		__u32 si = size ? 1 + lat_idx(size - 1, SEC_SUB_BITS) : 0;

		a->ios += 1;
		if (si < ATTR_SIZE_BUCKETS)
			a->size[si] += 1;
		if (timed) {
			if (dev_i.coarse < SEC_BUCKETS)
				a->lat[dev_i.coarse] += 1;
			if (dev_ns > a->lat_max_ns)
				a->lat_max_ns = dev_ns;
		}
		if (asl) {
			asl->ios += 1;
			if (start && start < now)
				asl->life_us += ns_to_us(now - start);
		}
	}
	hist_add(d, op, H_SIZE_COUNT, size_idx(size), 1);
	hist_add(d, op, H_SIZE_BYTES, size_idx(size), size);
	if (start && start < now)
		hist_add(d, op, H_LAT_TOTAL, lat_idx(now - start, LAT_SUB_BITS), 1);
	if (emit_events)
		emit(d, rq, now, RD(rq, __sector), flags, size, dev_ns, qd);
}

/* block_rq_complete fires once per completed chunk; __data_len still holds the bytes left
 * including this chunk, so the final chunk is nr_bytes >= __data_len. Bytes are added per
 * chunk (as diskstats does), the IO is counted once, at its final completion. The attribution
 * row gets exactly the same additions, so classes sum to the device totals. */
static __always_inline void FN(on_complete)(struct request *rq, __u32 nr_bytes)
{
	int d = FN(dev_index)(rq);
	__u32 flags, op, tk, row;
	struct op_total *t;
	struct rq_state *st;
	struct attr_val *a;
	struct attr_slot *asl = 0;
	struct slot *s;
	__u64 now, off = 0;

	if (d < 0)
		return;
	if (drop_every && nr_bytes >= RD(rq, __data_len) &&
	    __sync_fetch_and_add(&drop_seq, 1) % drop_every == drop_every - 1)
		return;
	now = bpf_ktime_get_ns();
	flags = RD(rq, cmd_flags);
	op = op_class(flags);
	tk = d * NOPS + op;
	t = bpf_map_lookup_elem(&totals, &tk);
	if (t)
		t->bytes += nr_bytes;
	s = slot_get(d, now + unix_offset_ns, &off);
	if (s && op < NOPS)
		s->op[op].bytes += nr_bytes;
	st = FN(state)(d, rq);
	row = attr_of(st, (__u64)rq, d, op);
	a = bpf_map_lookup_elem(&attr_vals, &row);
	if (a) {
		a->bytes += nr_bytes;
		asl = attr_slot_get(a, s ? s->id : slot_id(now + unix_offset_ns));
		asl->bytes += nr_bytes;
	}
	if (nr_bytes < RD(rq, __data_len)) {
		count(C_PARTIAL);
		return;
	}
	if (op < NOPS)
		FN(on_final)(rq, d, op, flags, nr_bytes, now, s, off, st, t, a, asl);
}

static __always_inline void FN(on_requeue)(struct request *rq)
{
	int d = FN(dev_index)(rq);
	struct rq_state *st;
	struct slot *s;
	__u64 off = 0;

	if (d < 0)
		return;
	count(C_REQUEUES);
	st = FN(state)(d, rq);
	if (!st || st->rq != (__u64)rq)
		return;
	s = slot_get(d, bpf_ktime_get_ns() + unix_offset_ns, &off);
	FN(leave)(d, st, s, off);
}

#undef FN
#undef CAT
#undef CAT2
