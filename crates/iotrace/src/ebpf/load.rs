//! Opening, configuring, loading and attaching the BPF skeleton: rodata knobs, map sizes, the
//! tracepoint argument layout read from BTF, and the tp_btf → raw_tp fallback.

use super::skel::{IotraceSkel, IotraceSkelBuilder, OpenIotraceSkel};
use crate::devices::Disk;
use anyhow::{Context, Result};
use libbpf_rs::btf::types::{FuncProto, Typedef};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Btf, Link, OpenObject, ReferencesType};
use std::mem::MaybeUninit;

const MAX_DEVS: usize = 16;
const SLOT_RING: u32 = 64;
const SEC_RING: u32 = 8;
const NOPS: u32 = 5;
const NKINDS: u32 = 4;
const STATE_PER_DEV: u32 = 8192;
/// Attribution keys beyond the reserved rows (ATTR_KEYS in iotrace.h); the hash holds twice
/// as many, so the row cap is what is hit first, and counted.
pub const ATTR_KEYS: u32 = 512;
/// Rows beyond those for keys without a process (ATTR_SPARE in iotrace.h): IO started with
/// none, and the IO of processes that came after the ATTR_KEYS ran out, by class and cgroup.
pub const ATTR_SPARE: u32 = 128;
/// Entries of the `splits` map per device: SPLIT_OPS × MAX_CLASSES × (without, with background).
pub const SPLITS_PER_DEV: u32 = 2 * crate::attr::MAX_CLASSES as u32 * 2;
/// Ring buffer for the raw event stream: 32 MiB holds ~700k events, seconds of NVMe traffic.
const EVENTS_RING_BYTES: u32 = 32 << 20;
/// uapi/linux/bpf.h: an array whose values can be mmapped, and so start on a page.
const BPF_F_MMAPABLE: u32 = 1 << 10;

/// Which program twins to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    TpBtf,
    RawTp,
}

impl Flavour {
    pub fn name(self) -> &'static str {
        match self {
            Flavour::TpBtf => "tp_btf",
            Flavour::RawTp => "raw_tp",
        }
    }
}

/// What the kernel side needs to know before load.
pub struct LoadConfig<'a> {
    pub disks: &'a [Disk],
    pub slot_ns: u64,
    pub unix_offset_ns: u64,
    pub events: bool,
    /// Attribute IO to submitters (needs block_io_start, kernel 6.5+).
    pub attribution: bool,
    /// Cgroups of the v2 tree to key attribution rows by (level, id): whether the submitting task
    /// is inside each (`--cgroup` targets there that IO is not charged to); at most
    /// [`crate::cgroups::MAX_WATCH_CG`].
    pub watch_cgroups: &'a [(u32, u64)],
}

/// Rows reserved for `unknown` and `capped`, one of each per device × op.
pub fn attr_reserved(ndevs: usize) -> u32 {
    2 * ndevs as u32 * NOPS
}

/// True when the kernel has the `block_io_start` tracepoint (6.5+), read from BTF.
pub fn has_io_start() -> bool {
    Btf::from_vmlinux().ok().is_some_and(|b| {
        b.type_by_name::<Typedef<'_>>("btf_trace_block_io_start")
            .is_some()
    })
}

/// True when `btf_trace_block_rq_issue` takes (ctx, rq): the ≥5.11 layout, also backported to
/// 5.10.137. Read from the kernel's BTF, never guessed from its version (bcc PR#4748).
pub fn single_arg_layout() -> Result<bool> {
    let btf = Btf::from_vmlinux().context("cannot read kernel BTF from /sys/kernel/btf/vmlinux")?;
    let td = btf
        .type_by_name::<Typedef<'_>>("btf_trace_block_rq_issue")
        .context("kernel BTF has no btf_trace_block_rq_issue: block tracepoints missing")?;
    let proto = td
        .referenced_type()
        .next_type()
        .and_then(|t| FuncProto::try_from(t.skip_mods_and_typedefs()).ok())
        .context("btf_trace_block_rq_issue is not a pointer to a function prototype")?;
    Ok(proto.len() == 2)
}

/// `IODIG_TRACER_DROP_EVERY=N`: the completion program ignores every Nth final completion, as
/// the kernel itself sometimes does not run it. For tests of how the tracer recovers those IOs
/// (`completions_unseen`); unset or unparsable, nothing is dropped.
fn drop_every() -> u32 {
    std::env::var("IODIG_TRACER_DROP_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `IODIG_TRACER_FLAVOUR=raw_tp`: load the raw_tp twins even where tp_btf works, so that the
/// fallback for older kernels is tested on this one. Any other value: the usual order.
fn raw_tp_forced() -> bool {
    std::env::var("IODIG_TRACER_FLAVOUR").is_ok_and(|v| v == "raw_tp")
}

fn configure(
    open: &mut OpenIotraceSkel<'_>,
    cfg: &LoadConfig<'_>,
    single_arg: bool,
    flavour: Flavour,
) -> Result<()> {
    let n = cfg.disks.len() as u32;
    let ro = open
        .maps
        .rodata_data
        .as_deref_mut()
        .context("skeleton has no .rodata")?;
    ro.ndevs = n;
    for (i, d) in cfg.disks.iter().take(MAX_DEVS).enumerate() {
        ro.devs[i] = d.kernel_dev();
    }
    ro.single_arg = single_arg;
    ro.slot_ns = cfg.slot_ns;
    ro.unix_offset_ns = cfg.unix_offset_ns;
    ro.emit_events = cfg.events;
    ro.attribution = cfg.attribution;
    if cfg.attribution {
        anyhow::ensure!(
            cfg.watch_cgroups.len() <= crate::cgroups::MAX_WATCH_CG,
            "at most {} cgroups of the v2 tree can be watched by their tasks, not {}",
            crate::cgroups::MAX_WATCH_CG,
            cfg.watch_cgroups.len()
        );
        ro.nwatch_cg = cfg.watch_cgroups.len() as u32;
        for (i, &(level, id)) in cfg.watch_cgroups.iter().enumerate() {
            ro.watch_cg_level[i] = level;
            ro.watch_cg_id[i] = id;
        }
    }
    ro.drop_every = drop_every();
    let rules = crate::attr::rules();
    ro.nrules = rules.len() as u32;
    for (slot, r) in ro.rules.iter_mut().zip(rules.iter()) {
        slot.val = r.val;
        slot.mask = r.mask;
        slot.ops = r.ops;
        slot.class_id = r.class;
    }
    ro.class_swap = crate::attr::SWAP as u32;
    ro.class_kthread = crate::attr::KERNEL_OTHER as u32;
    ro.class_other = crate::attr::OTHER_USER as u32;
    let reserved = attr_reserved(cfg.disks.len());
    ro.attr_reserved = reserved;
    ro.attr_rows = reserved + ATTR_KEYS + ATTR_SPARE;
    ro.bg_classes = crate::attr::background_mask();
    let m = &mut open.maps;
    m.slots.set_max_entries(SLOT_RING * n)?;
    m.seclat.set_max_entries(SEC_RING * n * NOPS)?;
    m.seclatq.set_max_entries(SEC_RING * n * NOPS)?;
    m.hists.set_max_entries(n * NOPS * NKINDS)?;
    m.totals.set_max_entries(n * NOPS)?;
    m.rqstate.set_max_entries(n * STATE_PER_DEV)?;
    m.attr_info
        .set_max_entries(reserved + ATTR_KEYS + ATTR_SPARE)?;
    m.attr_vals
        .set_max_entries(reserved + ATTR_KEYS + ATTR_SPARE)?;
    m.splits.set_max_entries(n * SPLITS_PER_DEV)?;
    if cfg.events {
        m.events.set_max_entries(EVENTS_RING_BYTES)?;
    }
    let btf = flavour == Flavour::TpBtf;
    if !btf {
        // The raw_tp twin is for kernels before tp_btf (5.5), which is also when arrays became
        // mmapable; the state entries then only lose their page alignment. (libbpf drops the
        // flag itself only from its own .bss/.data maps.)
        m.rqstate
            .set_map_flags(m.rqstate.map_flags() & !BPF_F_MMAPABLE)?;
    }
    let p = &mut open.progs;
    for prog in [
        &mut p.rq_issue_btf,
        &mut p.rq_complete_btf,
        &mut p.rq_requeue_btf,
    ] {
        prog.set_autoload(btf);
    }
    p.rq_start_btf.set_autoload(btf && cfg.attribution);
    p.rq_start_raw.set_autoload(!btf && cfg.attribution);
    for prog in [
        &mut p.rq_issue_raw,
        &mut p.rq_complete_raw,
        &mut p.rq_requeue_raw,
    ] {
        prog.set_autoload(!btf);
    }
    Ok(())
}

/// Opens and loads one flavour of the programs.
pub fn load<'o>(
    obj: &'o mut MaybeUninit<OpenObject>,
    cfg: &LoadConfig<'_>,
    flavour: Flavour,
) -> Result<IotraceSkel<'o>> {
    let single = single_arg_layout()?;
    let mut open = IotraceSkelBuilder::default()
        .open(obj)
        .context("cannot open the BPF object")?;
    configure(&mut open, cfg, single, flavour)?;
    open.load().with_context(|| {
        format!(
            "kernel refused the {} programs (verifier or missing feature)",
            flavour.name()
        )
    })
}

/// The programs of one flavour (issue, complete, requeue, and io_start when
/// attribution is on).
fn programs<'a, 'o>(
    skel: &'a IotraceSkel<'o>,
    flavour: Flavour,
    attribution: bool,
) -> Vec<&'a libbpf_rs::ProgramMut<'o>> {
    let p = &skel.progs;
    let mut v = match flavour {
        Flavour::TpBtf => vec![&p.rq_issue_btf, &p.rq_complete_btf, &p.rq_requeue_btf],
        Flavour::RawTp => vec![&p.rq_issue_raw, &p.rq_complete_raw, &p.rq_requeue_raw],
    };
    if attribution {
        v.push(match flavour {
            Flavour::TpBtf => &p.rq_start_btf,
            Flavour::RawTp => &p.rq_start_raw,
        });
    }
    v
}

/// Attaches the loaded flavour. Links are owned by this process and never pinned, so they go
/// away with it, however it exits (even kill -9: the kernel drops them with the last fd).
pub fn attach(skel: &IotraceSkel<'_>, flavour: Flavour, attribution: bool) -> Result<Vec<Link>> {
    let progs = programs(skel, flavour, attribution);
    progs
        .into_iter()
        .map(|prog| {
            prog.attach()
                .with_context(|| format!("cannot attach {:?}", prog.name()))
        })
        .collect()
}

/// Loads, then attaches, preferring tp_btf and falling back to raw_tp twins (kernels where
/// tracing programs do not load or attach), in two calls so that the slow part (loading, the
/// verifier) can run before a step and attaching at its start.
pub struct Loaded<'o> {
    /// The raw_tp slot, while unused.
    spare: Option<&'o mut MaybeUninit<OpenObject>>,
    first: Option<&'o mut MaybeUninit<OpenObject>>,
    skel: Option<(IotraceSkel<'o>, Flavour)>,
    /// Why tp_btf was given up, for the error when raw_tp fails too.
    btf_error: Option<anyhow::Error>,
}

impl<'o> Loaded<'o> {
    /// `objs` provides one OpenObject slot per attempt.
    pub fn new(objs: &'o mut [MaybeUninit<OpenObject>; 2]) -> Self {
        let [a, b] = objs;
        Loaded {
            spare: Some(b),
            first: Some(a),
            skel: None,
            btf_error: None,
        }
    }

    pub fn load(&mut self, cfg: &LoadConfig<'_>) -> Result<()> {
        let a = self.first.take().context("programs already loaded")?;
        if raw_tp_forced() {
            self.btf_error = Some(anyhow::anyhow!(
                "tp_btf skipped: IODIG_TRACER_FLAVOUR=raw_tp"
            ));
            return self.load_raw(cfg);
        }
        match load(a, cfg, Flavour::TpBtf) {
            Ok(s) => self.skel = Some((s, Flavour::TpBtf)),
            Err(e) => {
                self.btf_error = Some(e);
                self.load_raw(cfg)?;
            }
        }
        Ok(())
    }

    fn load_raw(&mut self, cfg: &LoadConfig<'_>) -> Result<()> {
        let b = self.spare.take().context("raw_tp fallback already used")?;
        let s = load(b, cfg, Flavour::RawTp).with_context(|| self.btf_failed())?;
        self.skel = Some((s, Flavour::RawTp));
        Ok(())
    }

    fn btf_failed(&self) -> String {
        match &self.btf_error {
            Some(e) => format!("tp_btf failed first ({e:#}); raw_tp fallback failed too"),
            None => "raw_tp programs failed".into(),
        }
    }

    /// Attaches what was loaded (loading raw_tp when tp_btf does not attach).
    pub fn attach(mut self, cfg: &LoadConfig<'_>) -> Result<(IotraceSkel<'o>, Vec<Link>, Flavour)> {
        let (skel, flavour) = self.skel.take().context("programs not loaded")?;
        match attach(&skel, flavour, cfg.attribution) {
            Ok(links) => Ok((skel, links, flavour)),
            Err(e) if flavour == Flavour::TpBtf => {
                drop(skel);
                self.btf_error = Some(e);
                self.load_raw(cfg)?;
                let (skel, flavour) = self.skel.take().context("raw_tp not loaded")?;
                let links =
                    attach(&skel, flavour, cfg.attribution).with_context(|| self.btf_failed())?;
                Ok((skel, links, flavour))
            }
            Err(e) => Err(e),
        }
    }
}

/// Programs of the loaded flavour with their names, for prog-info statistics.
pub fn prog_ids(skel: &IotraceSkel<'_>, flavour: Flavour, attribution: bool) -> Vec<(String, u32)> {
    use std::os::fd::AsFd;
    let progs = programs(skel, flavour, attribution);
    progs
        .into_iter()
        .filter_map(|prog| {
            let id = libbpf_rs::Program::id_from_fd(prog.as_fd()).ok()?;
            Some((prog.name().to_string_lossy().into_owned(), id))
        })
        .collect()
}
