//! The eBPF tracing session: a thread that owns the loaded skeleton, drains the kernel's
//! aggregates while tracing, writes the optional event stream, and on stop detaches and
//! returns everything read. Owning the skeleton in one thread keeps libbpf objects off other
//! threads and makes "stop" and "drop" the same path: join the thread, links close.

mod collect;
mod load;

#[allow(clippy::all, dead_code, unsafe_op_in_unsafe_fn, non_camel_case_types)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/iotrace.skel.rs"));
}

use crate::devices::Disk;
use crate::diskstats::{self, Stat};
use anyhow::{anyhow, Context, Result};
pub use collect::{AttrRaw, DevRaw};
use iodig_model::trace::ProgStat;
pub use load::{has_io_start, ATTR_KEYS};
use std::collections::HashMap;
use std::io::Write;
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the drain loop wakes: well inside the kernel's 64-slot and 8-second rings.
const TICK: Duration = Duration::from_millis(100);

pub struct Config {
    pub disks: Vec<Disk>,
    pub slot_ns: u64,
    pub events_file: Option<PathBuf>,
    pub attribution: bool,
}

/// Everything the session read, ready to become a TraceDoc.
pub struct Raw {
    pub attach: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub devs: Vec<DevRaw>,
    pub counters: [u64; collect::NCOUNTERS],
    pub progs: Vec<ProgStat>,
    pub ds_start: HashMap<String, Stat>,
    pub ds_end: HashMap<String, Stat>,
    /// Attribution rows by index; rows below `attr_reserved` are unknown/capped per device × op.
    pub attr: std::collections::BTreeMap<u32, AttrRaw>,
    pub attr_reserved: u32,
    pub attribution: bool,
}

pub struct Session {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<Result<Raw>>>,
}

/// Unix time in ns.
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC: turns bpf_ktime_get_ns() stamps into unix time.
fn unix_offset_ns() -> u64 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    };
    let mono = read(libc::CLOCK_MONOTONIC);
    read(libc::CLOCK_REALTIME).saturating_sub(mono)
}

/// Loads, attaches and starts draining; returns once the probes are live (or failed to load).
pub fn start(cfg: Config) -> Result<Session> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("iodig-iotrace".into())
        .spawn(move || run(cfg, ready_tx, stop_rx))
        .context("cannot spawn the tracer thread")?;
    match ready_rx.recv() {
        Ok(Ok(_attach)) => Ok(Session {
            stop: Some(stop_tx),
            handle: Some(handle),
        }),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
        }
        Err(_) => Err(match handle.join() {
            Ok(Err(e)) => e,
            _ => anyhow!("the tracer thread died while loading"),
        }),
    }
}

impl Session {
    /// Stops tracing, detaches the probes and returns what was collected.
    pub fn stop(mut self) -> Result<Raw> {
        self.stop.take();
        let h = self.handle.take().context("tracer already stopped")?;
        h.join()
            .map_err(|_| anyhow!("the tracer thread panicked"))?
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Dropping the sender wakes the thread; joining it drops the links (detach).
        self.stop.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn run(cfg: Config, ready: Sender<Result<String>>, stop: Receiver<()>) -> Result<Raw> {
    let mut objs = [MaybeUninit::uninit(), MaybeUninit::uninit()];
    let lc = load::LoadConfig {
        disks: &cfg.disks,
        slot_ns: cfg.slot_ns,
        unix_offset_ns: unix_offset_ns(),
        events: cfg.events_file.is_some(),
        attribution: cfg.attribution,
    };
    let (skel, links, flavour) = match load::load_and_attach(&mut objs, &lc) {
        Ok(v) => v,
        Err(e) => {
            let _ = ready.send(Err(e));
            return Err(anyhow!("load failed"));
        }
    };
    let ds_start = diskstats::read(&cfg.disks);
    let start_ns = unix_now_ns();
    let _ = ready.send(Ok(flavour.name().to_string()));
    let reserved = load::attr_reserved(cfg.disks.len());
    let mut st = Drain::new(cfg.disks.len(), start_ns, cfg.slot_ns, reserved);
    let wait = events_loop(&skel, &cfg, &stop, &mut st, lc.unix_offset_ns);
    let ds_end = diskstats::read(&cfg.disks);
    let end_ns = unix_now_ns();
    drop(links); // detach before the final read: nothing changes under it any more
    st.finish(&skel, end_ns);
    collect::read_totals(&skel, &mut st.devs);
    let n = collect::attr_rows_used(&skel, reserved, st.rows);
    collect::read_attr(&skel, &mut st.attr, n);
    let counters = collect::read_counters(&skel);
    let progs = prog_stats(&skel, flavour, cfg.attribution);
    wait?;
    Ok(Raw {
        attach: flavour.name().into(),
        start_ns,
        end_ns,
        devs: st.devs,
        counters,
        progs,
        ds_start,
        ds_end,
        attr: st.attr,
        attr_reserved: reserved,
        attribution: cfg.attribution,
    })
}

/// Incremental draining state: the next slot id and second not yet read.
struct Drain {
    devs: Vec<DevRaw>,
    attr: std::collections::BTreeMap<u32, AttrRaw>,
    reserved: u32,
    rows: u32,
    next_slot: u64,
    next_sec: u64,
    slot_ns: u64,
}

impl Drain {
    fn new(n: usize, start_ns: u64, slot_ns: u64, reserved: u32) -> Self {
        Drain {
            devs: (0..n).map(|_| DevRaw::default()).collect(),
            attr: Default::default(),
            reserved,
            rows: reserved + load::ATTR_KEYS,
            next_slot: start_ns / slot_ns,
            next_sec: start_ns / 1_000_000_000,
            slot_ns,
        }
    }

    fn drain_slots(&mut self, skel: &skel::IotraceSkel<'_>, to: u64) {
        collect::drain_slots(skel, &mut self.devs, self.next_slot, to);
        let n = collect::attr_rows_used(skel, self.reserved, self.rows);
        collect::drain_attr_slots(skel, &mut self.attr, n, self.next_slot, to);
        self.next_slot = to;
    }

    /// Reads slots and seconds that are at least two behind now: the kernel no longer writes them.
    fn tick(&mut self, skel: &skel::IotraceSkel<'_>) {
        let now = unix_now_ns();
        let (cur_slot, cur_sec) = (now / self.slot_ns, now / 1_000_000_000);
        if cur_slot >= self.next_slot + 2 {
            self.drain_slots(skel, cur_slot - 1);
        }
        if cur_sec >= self.next_sec + 2 {
            collect::drain_seconds(skel, &mut self.devs, self.next_sec, cur_sec - 1);
            self.next_sec = cur_sec - 1;
        }
    }

    fn finish(&mut self, skel: &skel::IotraceSkel<'_>, end_ns: u64) {
        self.drain_slots(skel, end_ns / self.slot_ns + 1);
        collect::drain_seconds(
            skel,
            &mut self.devs,
            self.next_sec,
            end_ns / 1_000_000_000 + 1,
        );
    }
}

/// The drain loop; with an event file it also consumes the ring buffer into CSV.
fn events_loop(
    skel: &skel::IotraceSkel<'_>,
    cfg: &Config,
    stop: &Receiver<()>,
    st: &mut Drain,
    offset: u64,
) -> Result<()> {
    let Some(path) = &cfg.events_file else {
        while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(TICK) {
            st.tick(skel);
        }
        return Ok(());
    };
    let file = std::fs::File::create(path)
        .with_context(|| format!("cannot create the --events file {}", path.display()))?;
    let out = std::cell::RefCell::new(std::io::BufWriter::with_capacity(1 << 20, file));
    writeln!(
        out.borrow_mut(),
        "unix_ns,device,op,cmd_flags,sector,bytes,device_ns,qd"
    )?;
    let names: HashMap<u32, String> = cfg
        .disks
        .iter()
        .map(|d| (d.kernel_dev(), d.name.clone()))
        .collect();
    let mut b = libbpf_rs::RingBufferBuilder::new();
    b.add(&skel.maps.events, |data: &[u8]| {
        write_event(&out, &names, data, offset)
    })?;
    let rb = b.build()?;
    loop {
        rb.poll(TICK)?;
        st.tick(skel);
        if !matches!(stop.try_recv(), Err(mpsc::TryRecvError::Empty)) {
            break;
        }
    }
    rb.consume()?;
    drop(rb);
    let flushed = out.borrow_mut().flush();
    flushed.with_context(|| format!("cannot write {}", path.display()))
}

fn write_event(
    out: &std::cell::RefCell<impl Write>,
    names: &HashMap<u32, String>,
    data: &[u8],
    offset: u64,
) -> i32 {
    let Some(e) = collect::parse_event(data) else {
        return 0;
    };
    let dev = names.get(&e.dev).map_or("?", String::as_str);
    let op = crate::ops::op_name(e.cmd_flags);
    let line = writeln!(
        out.borrow_mut(),
        "{},{dev},{op},{:#x},{},{},{},{}",
        e.ts_ns + offset,
        e.cmd_flags,
        e.sector,
        e.bytes,
        e.dev_ns,
        e.qd
    );
    // A negative return stops ring-buffer consumption; keep going and let flush report errors.
    if line.is_err() {
        -1
    } else {
        0
    }
}

/// Run count, run time (BPF stats on) and recursion misses of our programs, from prog info.
fn prog_stats(
    skel: &skel::IotraceSkel<'_>,
    flavour: load::Flavour,
    attribution: bool,
) -> Vec<ProgStat> {
    let ids = load::prog_ids(skel, flavour, attribution);
    libbpf_rs::query::ProgInfoIter::default()
        .filter_map(|info| {
            let (name, _) = ids.iter().find(|(_, id)| *id == info.id)?;
            Some(ProgStat {
                name: name.clone(),
                run_cnt: info.run_cnt,
                run_time_ns: info.run_time_ns,
                recursion_misses: info.recursion_misses,
            })
        })
        .collect()
}
