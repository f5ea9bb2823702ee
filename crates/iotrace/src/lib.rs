//! Block-IO tracing under the database: eBPF CO-RE tracer with a /proc/diskstats fallback.
//!
//! [`start`] picks the mode (eBPF when permitted and supported, else diskstats, saying why),
//! [`TraceSession::stop`] returns the [`TraceDoc`]. Dropping a session detaches its probes.

pub mod attr;
pub mod cgroups;
pub mod devices;
pub mod diskstats;
mod doc;
mod ebpf;
mod fallback;
pub mod hist;
mod live;
pub mod ops;
pub mod render;
pub mod series;

use devices::Disk;
pub use ebpf::ATTR_KEYS;
pub use iodig_model::trace::TraceDoc;
pub use live::LiveFeed;
use std::path::PathBuf;
use std::str::FromStr;

/// Whole disks traced at once (MAX_DEVS in iotrace.h).
pub const MAX_DEVS: usize = 16;

/// Which tracer to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TraceMode {
    /// eBPF when possible, else diskstats with the reason in the result.
    #[default]
    Auto,
    /// eBPF or fail with [`TraceError::Privilege`].
    Ebpf,
    /// /proc/diskstats sampling: iostat's figures per second, no histograms or attribution.
    Diskstats,
    /// No tracing: a document with mode `off`, the window's times and no device.
    Off,
}

impl FromStr for TraceMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(TraceMode::Auto),
            "ebpf" => Ok(TraceMode::Ebpf),
            "diskstats" => Ok(TraceMode::Diskstats),
            "off" => Ok(TraceMode::Off),
            _ => Err(format!(
                "unknown trace mode {s:?}: use auto, ebpf, diskstats or off"
            )),
        }
    }
}

/// What to trace and how finely (`iodig trace`, `run --trace`).
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// Which tracer; [`TraceMode::Auto`] by default.
    pub mode: TraceMode,
    /// "vda", "/dev/vda" or partition names (traced as their whole disk); empty = every whole
    /// disk, keeping those with activity in the result.
    pub devices: Vec<String>,
    /// Slot width in ms; must divide 1000 so slots align with unix seconds.
    pub slot_ms: u32,
    /// Raw per-IO events as CSV (eBPF mode only).
    pub events_file: Option<PathBuf>,
    /// Each second of the trace, sent about one to two seconds after it ends (the last one at
    /// stop), in eBPF and diskstats modes: what a live view shows while `trace.json` waits for
    /// the end.
    pub live: Option<LiveFeed>,
    /// With `live`, in eBPF mode: every [`LIVE_HISTOGRAMS_EVERY`], the second sent carries the
    /// whole trace's size and latency histograms so far ([`LiveSecond::so_far`]), so a
    /// receiver that loses the session keeps them (an agent's stream asks for them).
    ///
    /// [`LiveSecond::so_far`]: iodig_model::trace::LiveSecond::so_far
    pub live_histograms: bool,
}

/// How often the live feed carries the histograms so far, when asked for (reading them takes a
/// copy of every CPU's counters, 689 of them per device, op and kind).
pub const LIVE_HISTOGRAMS_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            mode: TraceMode::Auto,
            devices: Vec::new(),
            slot_ms: 100,
            events_file: None,
            live: None,
            live_histograms: false,
        }
    }
}

/// Processes, services or containers to watch and name in the result (`--cgroup`, `--pid`).
/// Kept apart from [`TraceOptions`] so existing struct literals of it stay valid.
#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    /// Cgroup directories: absolute (`/sys/fs/cgroup/blkio/x`) or relative to the IO
    /// hierarchy's root (`system.slice/cassandra.service`).
    pub cgroups: Vec<PathBuf>,
    /// Processes by pid.
    pub pids: Vec<u32>,
    /// Leave attribution off (one program less per IO; for overhead comparisons).
    pub no_attribution: bool,
}

/// A `--cgroup` or `--pid` that does not exist (the CLI exits 2); the message names the flag
/// and the fix. Carried in [`TraceError::Other`] (find it with `downcast_ref`), so matches on
/// [`TraceError`] elsewhere stay exhaustive.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadTarget(pub String);

/// Why a trace could not start.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// eBPF was asked for explicitly but is not permitted or not supported (exit 3).
    #[error("eBPF tracing unavailable: {reason}")]
    Privilege {
        /// What is missing (kernel BTF, the capabilities) or the load or attach error.
        reason: String,
    },
    /// A device name that is not a block device here (exit 2).
    #[error("unknown block device {name:?}; block devices present: {}", present.join(", "))]
    UnknownDevice {
        /// The name as given.
        name: String,
        /// The whole disks under /sys/block, sorted, for the message.
        present: Vec<String>,
    },
    /// Anything else: a bad slot width, more than [`MAX_DEVS`] devices, a [`BadTarget`].
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

enum Inner {
    Ebpf(ebpf::Session),
    Diskstats(fallback::Sampler),
    Off,
}

/// A running trace. Dropping it detaches the probes; [`TraceSession::stop`] also returns results.
pub struct TraceSession {
    inner: Inner,
    mode: &'static str,
    note: Option<String>,
    disks: Vec<Disk>,
    auto_devices: bool,
    slot_ms: u32,
    start_unix_ms: u64,
    events_file: Option<PathBuf>,
    watch: cgroups::Watch,
    attr_notes: Vec<String>,
    hierarchy: Option<cgroups::Hierarchy>,
    cgroups_at_start: std::collections::HashMap<u64, String>,
    live: Option<LiveFeed>,
}

impl TraceSession {
    /// `ebpf`, `diskstats` or `off`: the mode that actually runs.
    pub fn mode(&self) -> &str {
        self.mode
    }

    /// Why the session runs in a mode other than the one asked for.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Stops tracing (probes detached first) and builds the result document.
    pub fn stop(self) -> anyhow::Result<TraceDoc> {
        let ctx = doc::Ctx {
            disks: self.disks,
            auto_devices: self.auto_devices,
            slot_ms: self.slot_ms,
            note: self.note,
            start_unix_ms: self.start_unix_ms,
            events_file: self.events_file,
            watch: self.watch,
            attr_notes: self.attr_notes,
            hierarchy: self.hierarchy,
            cgroups_at_start: self.cgroups_at_start,
        };
        match self.inner {
            Inner::Ebpf(s) => Ok(doc::from_ebpf(&ctx, s.stop()?)),
            Inner::Diskstats(s) => Ok(doc::from_diskstats(&ctx, s.stop())),
            Inner::Off => Ok(doc::off(&ctx)),
        }
    }
}

/// Resolves the requested devices to whole disks (deduplicated, in order).
fn resolve_devices(names: &[String]) -> Result<(Vec<Disk>, bool), TraceError> {
    if names.is_empty() {
        return Ok((devices::candidates(MAX_DEVS), true));
    }
    let mut disks: Vec<Disk> = Vec::new();
    for n in names {
        let d = devices::resolve_name(n).ok_or_else(|| TraceError::UnknownDevice {
            name: n.clone(),
            present: devices::list(),
        })?;
        if !disks.contains(&d) {
            disks.push(d);
        }
    }
    if disks.len() > MAX_DEVS {
        return Err(anyhow::anyhow!(
            "{} devices given with --device; the tracer takes at most {MAX_DEVS}",
            disks.len()
        )
        .into());
    }
    Ok((disks, false))
}

/// Why eBPF cannot run here, checked before trying to load (the load itself is the last word).
fn ebpf_precheck() -> Option<String> {
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Some(
            "no kernel BTF (/sys/kernel/btf/vmlinux is missing; needs CONFIG_DEBUG_INFO_BTF=y)"
                .into(),
        );
    }
    if !has_bpf_caps() {
        return Some("not root and no CAP_BPF + CAP_PERFMON (run as root, or setcap cap_bpf,cap_perfmon+ep on iodig)".into());
    }
    None
}

/// Effective capabilities allow loading tracing programs: CAP_SYS_ADMIN, or CAP_BPF + CAP_PERFMON.
fn has_bpf_caps() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |bit: u32| eff & (1u64 << bit) != 0;
    has(21) || (has(38) && has(39))
}

/// Checks a slot width: slots must tile unix seconds, and below 10 ms the per-slot maps grow
/// faster than they tell anything.
pub fn check_slot_ms(ms: u32) -> Result<u32, String> {
    if ms < 10 || 1000 % ms != 0 {
        return Err(format!(
            "--slot-ms {ms} must divide 1000 and be at least 10 (e.g. 10, 50, 100, 250, 1000)"
        ));
    }
    Ok(ms)
}

/// Starts tracing the requested devices in the requested mode.
pub fn start(opts: &TraceOptions) -> Result<TraceSession, TraceError> {
    start_watching(opts, &WatchOptions::default())
}

/// True when this kernel can attribute IO to its submitter (`block_io_start`, Linux 6.5+).
pub fn attribution_available() -> bool {
    ebpf::has_io_start()
}

/// Whether this kernel's `struct bio` has `bi_blkg` (CONFIG_BLK_CGROUP): read from BTF.
fn kernel_has_bio_blkg() -> bool {
    use libbpf_rs::btf::types::Struct;
    let Ok(btf) = libbpf_rs::Btf::from_vmlinux() else {
        return false;
    };
    btf.type_by_name::<Struct<'_>>("bio")
        .is_some_and(|s| s.iter().any(|m| m.name.is_some_and(|n| n == "bi_blkg")))
}

/// [`start`], also attributing IO to the `--cgroup` / `--pid` targets in `watch` and naming
/// them in the result. A target that does not exist is a [`BadTarget`] in [`TraceError::Other`].
pub fn start_watching(
    opts: &TraceOptions,
    watch: &WatchOptions,
) -> Result<TraceSession, TraceError> {
    prepare_watching(opts, watch)?.start()
}

/// A trace made ready but not running: the eBPF programs loaded and verified (the slow part:
/// a few hundred ms idle, seconds on a busy machine) and not attached yet, so a step's trace
/// can start the moment its measurement does.
pub struct PreparedTrace {
    session: TraceSession,
    pending: Pending,
}

enum Pending {
    Off,
    /// With the reason when diskstats replaces eBPF.
    Diskstats(Option<String>),
    /// Attaching can still fail: `auto` then falls back to diskstats, `ebpf` fails.
    Ebpf(ebpf::Prepared, TraceMode),
}

/// [`start_watching`] up to the attach: everything that can be done before the window opens.
pub fn prepare_watching(
    opts: &TraceOptions,
    watch: &WatchOptions,
) -> Result<PreparedTrace, TraceError> {
    check_slot_ms(opts.slot_ms).map_err(|e| anyhow::anyhow!(e))?;
    let (disks, auto_devices) = resolve_devices(&opts.devices)?;
    let resolved = cgroups::resolve(&watch.cgroups, &watch.pids)
        .map_err(|m| TraceError::Other(anyhow::Error::new(BadTarget(m))))?;
    let hierarchy = cgroups::io_hierarchy();
    let cgroups_at_start = hierarchy
        .as_ref()
        .map(cgroups::cgroup_paths)
        .unwrap_or_default();
    let mut s = TraceSession {
        watch: resolved,
        attr_notes: Vec::new(),
        hierarchy,
        cgroups_at_start,
        inner: Inner::Off,
        mode: "off",
        note: None,
        disks,
        auto_devices,
        slot_ms: opts.slot_ms,
        start_unix_ms: 0,
        events_file: opts.events_file.clone(),
        live: opts.live.clone(),
    };
    let ready = |session, pending| Ok(PreparedTrace { session, pending });
    match opts.mode {
        TraceMode::Off => return ready(s, Pending::Off),
        TraceMode::Diskstats => return ready(s, Pending::Diskstats(None)),
        TraceMode::Ebpf | TraceMode::Auto => {}
    }
    let attribution = ebpf::has_io_start() && !watch.no_attribution;
    if watch.no_attribution {
        s.attr_notes
            .push("attribution off (--no-attribution): every row is `unknown`".into());
    } else if !attribution {
        s.attr_notes.push(
            "kernel has no block_io_start tracepoint (needs Linux 6.5+): IO is not attributed, every row is `unknown`".into(),
        );
    } else if !kernel_has_bio_blkg() {
        s.attr_notes.push(
            "kernel has no bio->bi_blkg (CONFIG_BLK_CGROUP off): no cgroup per IO, attributed by process and thread name only".into(),
        );
    }
    let tried = match ebpf_precheck() {
        Some(reason) => Err(reason),
        None => prepare_ebpf(
            &s.disks,
            opts,
            attribution,
            s.watch.task_cgroups(),
            auto_devices,
        )
        .map_err(|e| format!("eBPF load failed: {e:#}")),
    };
    match (tried, opts.mode) {
        (Ok(p), mode) => ready(s, Pending::Ebpf(p, mode)),
        (Err(reason), TraceMode::Ebpf) => Err(TraceError::Privilege { reason }),
        (Err(reason), _) => ready(
            s,
            Pending::Diskstats(Some(format!("diskstats fallback: {reason}"))),
        ),
    }
}

impl PreparedTrace {
    /// Opens the window: attaches the loaded programs (or starts the diskstats sampler).
    pub fn start(self) -> Result<TraceSession, TraceError> {
        let mut s = self.session;
        s.start_unix_ms = ebpf::unix_now_ns() / 1_000_000;
        match self.pending {
            Pending::Off => Ok(s),
            Pending::Diskstats(note) => Ok(s.with_diskstats(note)),
            Pending::Ebpf(p, mode) => match p.start() {
                Ok(sess) => {
                    s.inner = Inner::Ebpf(sess);
                    s.mode = "ebpf";
                    // The tracer thread holds its own sender: the feed ends when it does.
                    s.live = None;
                    Ok(s)
                }
                Err(e) if mode == TraceMode::Ebpf => Err(TraceError::Privilege {
                    reason: format!("eBPF attach failed: {e:#}"),
                }),
                Err(e) => Ok(s.with_diskstats(Some(format!(
                    "diskstats fallback: eBPF attach failed: {e:#}"
                )))),
            },
        }
    }
}

fn prepare_ebpf(
    disks: &[Disk],
    opts: &TraceOptions,
    attribution: bool,
    watch_cgroups: Vec<(u32, u64)>,
    auto_devices: bool,
) -> anyhow::Result<ebpf::Prepared> {
    anyhow::ensure!(!disks.is_empty(), "no block device to trace");
    ebpf::prepare(ebpf::Config {
        disks: disks.to_vec(),
        slot_ns: u64::from(opts.slot_ms) * 1_000_000,
        events_file: opts.events_file.clone(),
        attribution,
        watch_cgroups,
        live: opts.live.clone().map(|feed| ebpf::LiveConfig {
            feed,
            only_active: auto_devices,
            histograms_every: opts.live_histograms.then_some(LIVE_HISTOGRAMS_EVERY),
        }),
    })
}

impl TraceSession {
    fn with_diskstats(mut self, note: Option<String>) -> Self {
        let live = self
            .live
            .take()
            .map(|feed| fallback::DiskstatsLive::new(feed, &self.disks, self.auto_devices));
        self.inner = Inner::Diskstats(fallback::Sampler::start(
            self.disks.clone(),
            u64::from(self.slot_ms) * 1_000_000,
            live,
        ));
        self.mode = "diskstats";
        self.note = note;
        if self.events_file.is_some() {
            let n = self.note.take().map_or(String::new(), |n| format!("{n}; "));
            self.note = Some(format!(
                "{n}--events ignored: the raw event stream needs eBPF"
            ));
        }
        if !self.watch.targets.is_empty() {
            let n = self.note.take().map_or(String::new(), |n| format!("{n}; "));
            self.note = Some(format!(
                "{n}--cgroup/--pid not attributed: attribution needs eBPF"
            ));
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_parsing() {
        assert_eq!("auto".parse::<TraceMode>(), Ok(TraceMode::Auto));
        assert_eq!("diskstats".parse::<TraceMode>(), Ok(TraceMode::Diskstats));
        assert!("bpf"
            .parse::<TraceMode>()
            .unwrap_err()
            .contains("auto, ebpf"));
    }

    #[test]
    fn unknown_device_lists_present_ones() {
        let opts = TraceOptions {
            devices: vec!["nope0".into()],
            ..Default::default()
        };
        match start(&opts) {
            Err(TraceError::UnknownDevice { name, present }) => {
                assert_eq!(name, "nope0");
                assert!(!present.is_empty());
            }
            other => panic!("expected UnknownDevice, got {:?}", other.err()),
        }
    }

    #[test]
    fn bad_slot_width_is_rejected() {
        let opts = TraceOptions {
            slot_ms: 30,
            ..Default::default()
        };
        assert!(start(&opts)
            .err()
            .unwrap()
            .to_string()
            .contains("--slot-ms 30"));
    }
}
