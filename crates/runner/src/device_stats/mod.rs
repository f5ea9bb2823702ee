//! The traced disks' own statistics around a step: each disk's NVMe controller found in sysfs
//! (`sysfs`), its SMART / Health log and OCP latency monitor read through the admin passthrough
//! ioctl (`admin`) and decoded (`log_pages`) when measurement starts and when it ends. A disk
//! without them (not NVMe, no permission, a page the drive does not implement) gets the reason
//! instead of figures.

mod admin;
mod log_pages;
mod sysfs;

use iodig_model::device_stats::{DeviceSnapshot, DeviceStats, DeviceStatsDoc};
use log_pages::{LID_LATENCY_MONITOR, LID_SMART, LOG_PAGE_LEN};
use std::fs::File;
use std::path::Path;

pub use sysfs::NOT_NVME;

/// An NVMe controller opened for reading its logs.
struct Controller {
    name: String,
    file: File,
    /// The index of the OCP UUID in its UUID list, 0 when it has none (OCP 1.0 drives).
    ocp_uuid_index: u8,
}

impl Controller {
    fn open(name: &str) -> Result<Controller, String> {
        let path = Path::new("/dev").join(name);
        let file = File::open(&path).map_err(|e| {
            let why = if admin::is_permission(&e) {
                " (reading the drive's logs needs root or CAP_SYS_ADMIN)"
            } else if e.kind() == std::io::ErrorKind::NotFound {
                " (no device node for the controller here: a container without it?)"
            } else {
                ""
            };
            format!("cannot open {}: {e}{why}", path.display())
        })?;
        let ocp_uuid_index = admin::identify_uuid_list(&file)
            .ok()
            .and_then(|page| log_pages::ocp_uuid_index(&page.0))
            .unwrap_or(0);
        Ok(Controller {
            name: name.to_string(),
            file,
            ocp_uuid_index,
        })
    }

    fn log_page(&self, lid: u8, uuid_index: u8) -> Result<[u8; LOG_PAGE_LEN], admin::AdminError> {
        let mut page = Box::new(admin::Page([0; 4096]));
        admin::get_log_page(&self.file, lid, uuid_index, &mut page.0[..LOG_PAGE_LEN])?;
        let mut out = [0u8; LOG_PAGE_LEN];
        out.copy_from_slice(&page.0[..LOG_PAGE_LEN]);
        Ok(out)
    }

    fn smart(&self) -> Result<iodig_model::device_stats::SmartLog, String> {
        self.log_page(LID_SMART, 0)
            .map(|b| log_pages::parse_smart(&b))
            .map_err(|e| format!("cannot read the SMART / Health log of {}: {e}", self.name))
    }

    fn latency_monitor(&self) -> Result<iodig_model::device_stats::LatencyMonitorLog, String> {
        match self.log_page(LID_LATENCY_MONITOR, self.ocp_uuid_index) {
            Ok(b) => log_pages::parse_latency_monitor(&b),
            Err(admin::AdminError::Status(s)) => Err(format!(
                "{} (it rejected log page C3h: NVMe status {s:#x})",
                log_pages::NOT_IMPLEMENTED
            )),
            Err(e) => Err(format!("cannot read log page C3h: {e}")),
        }
    }
}

/// One traced disk: what is known of it so far, and its controller while it can be read.
struct Entry {
    stats: DeviceStats,
    controller: Option<Controller>,
}

/// The traced disks' statistics over one step: located and opened before the step,
/// [`read_before`](Self::read_before) when measurement starts,
/// [`read_after`](Self::read_after) when it ends.
pub struct DeviceStatsProbe {
    entries: Vec<Entry>,
}

impl DeviceStatsProbe {
    /// Finds the controller of each whole disk in `devices` (each NVMe member of an md/dm
    /// device) and opens it; a disk without one is kept with the reason.
    pub fn locate(devices: &[String]) -> DeviceStatsProbe {
        Self::locate_in(Path::new("/sys/block"), devices)
    }

    /// [`locate`](Self::locate) under another /sys/block.
    fn locate_in(sys_block: &Path, devices: &[String]) -> DeviceStatsProbe {
        let mut entries = Vec::new();
        for device in devices {
            for located in sysfs::locate(sys_block, device) {
                let mut stats = DeviceStats {
                    device: device.clone(),
                    member: located.member,
                    ..Default::default()
                };
                let controller = match located.controller {
                    Ok(name) => {
                        stats.controller = Some(name.clone());
                        Controller::open(&name)
                            .map_err(|e| stats.unavailable = Some(e))
                            .ok()
                    }
                    Err(reason) => {
                        stats.unavailable = Some(reason);
                        None
                    }
                };
                entries.push(Entry { stats, controller });
            }
        }
        DeviceStatsProbe { entries }
    }

    /// Reads every controller's logs as measurement starts. A controller whose SMART log
    /// cannot be read is given up with the reason; one without a latency monitor is read
    /// without it from now on.
    pub fn read_before(&mut self) {
        for e in &mut self.entries {
            let Some(c) = &e.controller else { continue };
            let smart = match c.smart() {
                Ok(s) => s,
                Err(reason) => {
                    e.stats.unavailable = Some(reason);
                    e.controller = None;
                    continue;
                }
            };
            let latency_monitor = match c.latency_monitor() {
                Ok(l) if l.enabled => Some(l),
                Ok(_) => {
                    e.stats.latency_monitor_unavailable = Some(
                        "implemented but not enabled on this device (OCP Latency Monitor \
                         feature C5h)"
                            .into(),
                    );
                    None
                }
                Err(reason) => {
                    e.stats.latency_monitor_unavailable = Some(reason);
                    None
                }
            };
            e.stats.before = Some(DeviceSnapshot {
                unix_ms: now_unix_ms(),
                smart: Some(smart),
                latency_monitor,
            });
        }
    }

    /// Reads them again as measurement ends; a read that fails now is a note.
    pub fn read_after(&mut self) {
        for e in &mut self.entries {
            let (Some(c), Some(before)) = (&e.controller, &e.stats.before) else {
                continue;
            };
            let smart = c.smart().map_err(|r| e.stats.notes.push(r)).ok();
            let latency_monitor = if before.latency_monitor.is_some() {
                c.latency_monitor()
                    .map_err(|r| e.stats.notes.push(format!("after the step: {r}")))
                    .ok()
            } else {
                None
            };
            e.stats.after = Some(DeviceSnapshot {
                unix_ms: now_unix_ms(),
                smart,
                latency_monitor,
            });
        }
    }

    /// The step's record: the disks whose device is in `traced` (the disks the trace kept;
    /// every disk when there is no trace), each with its change or why it has none.
    pub fn into_doc(self, traced: Option<&[String]>) -> DeviceStatsDoc {
        DeviceStatsDoc {
            devices: self
                .entries
                .into_iter()
                .filter(|e| traced.is_none_or(|t| t.contains(&e.stats.device)))
                .map(|e| {
                    let mut s = e.stats;
                    s.settle();
                    s
                })
                .collect(),
        }
    }

    /// Whether each disk reports statistics of its own, in one sentence for run.json's
    /// environment (after [`read_before`](Self::read_before)).
    pub fn availability(&self) -> String {
        let stats: Vec<&DeviceStats> = self.entries.iter().map(|e| &e.stats).collect();
        availability_words(&stats)
    }
}

/// How a disk is named in sentences: `nvme0n1`, or `md0 member nvme0n1`.
pub fn label(s: &DeviceStats) -> String {
    match &s.member {
        Some(m) => format!("{} member {m}", s.device),
        None => s.device.clone(),
    }
}

/// "not available: vda: not an NVMe device — …", or what is read from each NVMe disk.
fn availability_words(stats: &[&DeviceStats]) -> String {
    stats
        .iter()
        .map(|s| {
            let name = label(s);
            let controller = s.controller.as_deref().unwrap_or("?");
            if let Some(why) = &s.unavailable {
                return format!("not available: {name}: {why}");
            }
            let read = "read before and after each step";
            match &s.latency_monitor_unavailable {
                Some(why) => format!(
                    "{name} (NVMe controller {controller}): SMART / Health log {read}; OCP \
                     latency monitor: {why}"
                ),
                None => format!(
                    "{name} (NVMe controller {controller}): SMART / Health log and OCP latency \
                     monitor {read}"
                ),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The whole disks whose own statistics are read around a step: those traced, or, when the
/// tracer picks the disks itself, every disk it may pick (the step keeps those it kept).
pub fn stat_devices(opts: &iodig_iotrace::TraceOptions) -> Vec<String> {
    if opts.devices.is_empty() {
        return iodig_iotrace::devices::candidates(usize::MAX)
            .into_iter()
            .map(|d| d.name)
            .collect();
    }
    let mut disks = Vec::new();
    for name in &opts.devices {
        if let Some(d) = iodig_iotrace::devices::resolve_name(name) {
            if !disks.contains(&d.name) {
                disks.push(d.name);
            }
        }
    }
    disks
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A /sys/block holding loop disks: no `device` link, as on a real machine.
    fn loops(names: &[&str]) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for n in names {
            std::fs::create_dir_all(t.path().join(n)).unwrap();
        }
        t
    }

    #[test]
    fn a_disk_that_is_not_nvme_is_kept_with_the_reason_and_no_figures() {
        let sys = loops(&["loop0"]);
        let mut probe = DeviceStatsProbe::locate_in(sys.path(), &["loop0".to_string()]);
        probe.read_before();
        probe.read_after();
        assert_eq!(
            probe.availability(),
            format!("not available: loop0: {NOT_NVME}")
        );
        let doc = probe.into_doc(None);
        let s = &doc.devices[0];
        assert_eq!(s.unavailable.as_deref(), Some(NOT_NVME));
        assert_eq!((&s.before, &s.after, &s.change), (&None, &None, &None));
    }

    #[test]
    fn only_the_disks_the_trace_kept_are_recorded() {
        let sys = loops(&["loop0", "loop1"]);
        let names = ["loop0".to_string(), "loop1".to_string()];
        let doc = DeviceStatsProbe::locate_in(sys.path(), &names).into_doc(Some(&names[1..]));
        let kept: Vec<&str> = doc.devices.iter().map(|d| d.device.as_str()).collect();
        assert_eq!(kept, ["loop1"]);
    }

    #[test]
    fn availability_names_what_is_read_and_what_is_not() {
        let nvme = DeviceStats {
            device: "md0".into(),
            member: Some("nvme0n1".into()),
            controller: Some("nvme0".into()),
            latency_monitor_unavailable: Some("not implemented by this device".into()),
            ..Default::default()
        };
        let denied = DeviceStats {
            device: "md0".into(),
            member: Some("nvme1n1".into()),
            controller: Some("nvme1".into()),
            unavailable: Some("cannot open /dev/nvme1: Permission denied".into()),
            ..Default::default()
        };
        assert_eq!(
            availability_words(&[&nvme, &denied]),
            "md0 member nvme0n1 (NVMe controller nvme0): SMART / Health log read before and \
             after each step; OCP latency monitor: not implemented by this device; not \
             available: md0 member nvme1n1: cannot open /dev/nvme1: Permission denied"
        );
    }
}
