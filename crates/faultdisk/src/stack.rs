//! Setting up and tearing down the faulty disk: a sparse image beside the data directory, the
//! FUSE file over it and a loop device on that file (or, with device-mapper, a loop device on
//! the image and two mapped devices on that: `dm`), ext4 on top, mounted on the data
//! directory. Each layer is undone in reverse order on drop; a killed run's layers are found by
//! their state directory (`.iodig-faultdisk-<name>` beside the data directory) and undone by the
//! next run that wants the same place.

use crate::dm;
use crate::fuse::{Server, DISK_NAME};
use crate::{Direction, Injection, Mechanism};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The state directory's name before the data directory's own.
const LEFTOVER_PREFIX: &str = ".iodig-faultdisk-";

/// A mounted faulty disk; dropping it unmounts and removes every layer.
pub struct FaultyDisk {
    data_dir: PathBuf,
    state: PathBuf,
    /// `/dev/loopN`, empty until attached.
    loop_dev: String,
    mounted: bool,
    layer: Layer,
    fills: Mutex<Vec<PathBuf>>,
}

/// What stands between the loop device and the faults.
enum Layer {
    /// This process serves the loop device's file through FUSE and misbehaves in it.
    Fuse {
        injection: Arc<Injection>,
        server: Option<Server>,
    },
    /// Two mapped devices over the loop device; None until both are made.
    DeviceMapper(Mutex<Option<dm::Pair>>),
}

/// The file in the state directory naming the mapped devices' tag, for a later run's cleanup.
const DM_TAG_FILE: &str = "dm-tag";

impl FaultyDisk {
    /// Makes a `size`-byte disk and mounts it on `data_dir`, which must be empty or absent.
    /// Needs root (mount, loop devices), and `/dev/fuse` or device-mapper as `mechanism` says.
    pub fn create(data_dir: &Path, size: u64, mechanism: Mechanism) -> Result<FaultyDisk, String> {
        let mechanism = mechanism.resolve()?;
        let state = state_dir(data_dir)?;
        let parent = data_dir.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        if state.exists() {
            clean_leftover(&state, data_dir)?;
            iodig_model::eprintln_lossy!(
                "note: removed the faulty disk a killed iodig left at {}",
                data_dir.display()
            );
        }
        let non_empty = std::fs::read_dir(data_dir).is_ok_and(|mut d| d.next().is_some());
        if non_empty {
            return Err(format!(
                "{} is not empty; the device faults mount a disk of their own there: give an empty or new -p rocksdb.dir",
                data_dir.display()
            ));
        }
        let fuse_dir = state.join("fuse");
        for dir in [&fuse_dir, &data_dir.to_path_buf()] {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(state.join("owner"), std::process::id().to_string())
            .map_err(|e| format!("cannot write in {}: {e}", state.display()))?;
        let image_path = state.join("image");
        let image = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&image_path)
            .and_then(|f| f.set_len(size).map(|()| f))
            .map_err(|e| format!("cannot make the image {}: {e}", image_path.display()))?;
        if mechanism == Mechanism::DeviceMapper {
            drop(image);
            return Self::create_mapped(data_dir, state, &image_path, size);
        }
        let injection = Arc::new(Injection::default());
        let server = Server::mount(&fuse_dir, image, size, injection.clone()).map_err(|e| {
            let _ = std::fs::remove_dir_all(&state);
            format!(
                "cannot mount the FUSE layer at {} ({e}); the device faults need root and /dev/fuse",
                fuse_dir.display()
            )
        })?;
        // From here on, dropping the disk undoes whatever was made.
        let mut disk = FaultyDisk {
            data_dir: data_dir.to_path_buf(),
            state,
            loop_dev: String::new(),
            mounted: false,
            layer: Layer::Fuse {
                injection,
                server: Some(server),
            },
            fills: Mutex::default(),
        };
        disk.loop_dev = attach_loop(&fuse_dir.join(DISK_NAME))?;
        let device = disk.loop_dev.clone();
        disk.make_file_system(&device)?;
        Ok(disk)
    }

    /// Whether a disk made on `data_dir` left its state directory beside it: one mounted now,
    /// or one a killed run left.
    pub fn left_at(data_dir: &Path) -> bool {
        state_dir(data_dir).is_ok_and(|s| s.exists())
    }

    /// Undoes a disk a killed run left mounted on `data_dir` (found by its state directory
    /// beside it); true when there was one. Refused while the process that made it still runs.
    pub fn remove_leftover(data_dir: &Path) -> Result<bool, String> {
        let state = state_dir(data_dir)?;
        if !state.exists() {
            return Ok(false);
        }
        clean_leftover(&state, data_dir).map(|()| true)
    }

    /// The device-mapper stack: loop device on the image, two mapped devices, ext4.
    fn create_mapped(
        data_dir: &Path,
        state: PathBuf,
        image: &Path,
        size: u64,
    ) -> Result<FaultyDisk, String> {
        let tag = format!("{}-{}", std::process::id(), dm_safe(data_dir));
        std::fs::write(state.join(DM_TAG_FILE), &tag)
            .map_err(|e| format!("cannot write in {}: {e}", state.display()))?;
        let mut disk = FaultyDisk {
            data_dir: data_dir.to_path_buf(),
            state,
            loop_dev: String::new(),
            mounted: false,
            layer: Layer::DeviceMapper(Mutex::new(None)),
            fills: Mutex::default(),
        };
        disk.loop_dev = attach_loop(image)?;
        let pair = dm::Pair::create(&disk.loop_dev, size / 512, &tag)?;
        let device = pair.device();
        if let Layer::DeviceMapper(p) = &disk.layer {
            *lock(p) = Some(pair);
        }
        disk.make_file_system(&device)?;
        Ok(disk)
    }

    /// ext4 on `device`, mounted on the data directory, left empty.
    fn make_file_system(&mut self, device: &str) -> Result<(), String> {
        run(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-E",
                "nodiscard,lazy_itable_init=0,lazy_journal_init=0",
                device,
            ],
        )?;
        let target = self.data_dir.display().to_string();
        run("mount", &["-t", "ext4", "-o", "noatime", device, &target])?;
        self.mounted = true;
        // An empty directory, as the database and the dataset marker expect of a fresh one.
        let _ = std::fs::remove_dir(self.data_dir.join("lost+found"));
        Ok(())
    }

    /// The device the file system is on, as the tracer and caps see it: `loopN`, or `dm-N`
    /// with device-mapper.
    pub fn device_name(&self) -> String {
        match &self.layer {
            Layer::Fuse { .. } => self.loop_dev.trim_start_matches("/dev/").to_string(),
            Layer::DeviceMapper(p) => lock(p)
                .as_ref()
                .map_or_else(String::new, dm::Pair::kernel_name),
        }
    }

    /// How the faults are made, for the events that record them.
    pub fn mechanism(&self) -> &'static str {
        match self.layer {
            Layer::Fuse { .. } => Mechanism::Fuse.describe(),
            Layer::DeviceMapper(_) => Mechanism::DeviceMapper.describe(),
        }
    }

    /// Adds `delay` to every IO of the direction from now on (zero lifts it).
    pub fn slow(&self, delay: Duration, which: Direction) -> Result<String, String> {
        match &self.layer {
            Layer::Fuse { injection, .. } => {
                let us = delay.as_micros() as u64;
                if which.reads() {
                    injection.read_delay_us.store(us, Ordering::Relaxed);
                }
                if which.writes() {
                    injection.write_delay_us.store(us, Ordering::Relaxed);
                }
            }
            Layer::DeviceMapper(p) => with_pair(p, |pair| {
                let next = dm::slowed(pair.state(), delay, which);
                pair.set(next)
            })?,
        }
        Ok(format!(
            "{} of {} take {} ms longer ({})",
            which.describe(),
            self.device_name(),
            delay.as_secs_f64() * 1e3,
            self.mechanism()
        ))
    }

    /// Fails every IO of the direction with EIO from now on.
    pub fn fail(&self, which: Direction) -> Result<String, String> {
        match &self.layer {
            Layer::Fuse { injection, .. } => {
                if which.reads() {
                    injection.fail_reads.store(true, Ordering::Relaxed);
                }
                if which.writes() {
                    injection.fail_writes.store(true, Ordering::Relaxed);
                }
            }
            Layer::DeviceMapper(p) => with_pair(p, |pair| {
                let next = dm::failed(pair.state(), which);
                pair.set(next)
            })?,
        }
        Ok(format!(
            "{} of {} fail with EIO ({})",
            which.describe(),
            self.device_name(),
            self.mechanism()
        ))
    }

    /// Fills the file system to its last block (root's reserve included) with preallocated files.
    pub fn fill(&self) -> Result<String, String> {
        let mut fills = lock(&self.fills);
        let mut filled = 0u64;
        for _ in 0..16 {
            let free = free_bytes(&self.data_dir)?;
            if free < 64 * 1024 {
                break;
            }
            let path = self.data_dir.join(format!(".iodig-fill-{}", fills.len()));
            let file = std::fs::File::create(&path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            fills.push(path);
            // Extents need metadata blocks too, so the whole free space rarely fits in one go.
            let mut len = free & !4095;
            while len >= 4096 {
                if allocate(&file, len).is_ok() {
                    filled += len;
                    break;
                }
                len = (len / 2) & !4095;
            }
        }
        let left = free_bytes(&self.data_dir)?;
        Ok(format!(
            "file system on {} filled: {:.1} MB taken, {} KB left ({})",
            self.device_name(),
            filled as f64 / 1e6,
            left / 1024,
            self.mechanism()
        ))
    }

    /// Lifts every delay, failure and fill; says what the faults did meanwhile.
    pub fn heal(&self) -> String {
        let fills = std::mem::take(&mut *lock(&self.fills));
        for f in &fills {
            let _ = std::fs::remove_file(f);
        }
        let fill = if fills.is_empty() {
            ""
        } else {
            ", fill removed"
        };
        match &self.layer {
            Layer::Fuse { injection: i, .. } => {
                i.read_delay_us.store(0, Ordering::Relaxed);
                i.write_delay_us.store(0, Ordering::Relaxed);
                i.fail_reads.store(false, Ordering::Relaxed);
                i.fail_writes.store(false, Ordering::Relaxed);
                format!(
                    "{} healed: {} IOs delayed and {} failed so far{fill}",
                    self.device_name(),
                    i.delayed.load(Ordering::Relaxed),
                    i.failed.load(Ordering::Relaxed),
                )
            }
            Layer::DeviceMapper(p) => match with_pair(p, |pair| pair.set(dm::State::default())) {
                Ok(()) => format!("{} healed (linear tables again){fill}", self.device_name()),
                Err(e) => format!("{} could not be healed: {e}{fill}", self.device_name()),
            },
        }
    }

    /// Whether any delay, failure or fill is in force.
    pub fn faulted(&self) -> bool {
        let layer = match &self.layer {
            Layer::Fuse { injection: i, .. } => {
                i.read_delay_us.load(Ordering::Relaxed) > 0
                    || i.write_delay_us.load(Ordering::Relaxed) > 0
                    || i.fail_reads.load(Ordering::Relaxed)
                    || i.fail_writes.load(Ordering::Relaxed)
            }
            Layer::DeviceMapper(p) => lock(p)
                .as_ref()
                .is_some_and(|pair| pair.state() != dm::State::default()),
        };
        layer || !lock(&self.fills).is_empty()
    }
}

impl Drop for FaultyDisk {
    fn drop(&mut self) {
        self.heal();
        if self.mounted {
            unmount(&self.data_dir);
        }
        if let Layer::DeviceMapper(p) = &self.layer {
            if let Some(pair) = lock(p).as_mut() {
                pair.remove();
            }
        }
        if !self.loop_dev.is_empty() {
            detach(&self.loop_dev);
        }
        if let Layer::Fuse { server, .. } = &mut self.layer {
            let clean = unmount(&self.state.join("fuse"));
            if let Some(server) = server.take() {
                // Its threads end when the connection does, which a lazy unmount may postpone.
                if clean {
                    server.join();
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs `f` on the mapped devices, which exist once the disk does.
fn with_pair(
    p: &Mutex<Option<dm::Pair>>,
    f: impl FnOnce(&mut dm::Pair) -> Result<(), String>,
) -> Result<(), String> {
    match lock(p).as_mut() {
        Some(pair) => f(pair),
        None => Err("the mapped devices are gone".into()),
    }
}

/// A loop device on `file`, `/dev/loopN`.
fn attach_loop(file: &Path) -> Result<String, String> {
    Ok(run(
        "losetup",
        &["--find", "--show", &file.display().to_string()],
    )?
    .trim()
    .to_string())
}

/// The data directory's name with only what device-mapper names keep well.
fn dm_safe(data_dir: &Path) -> String {
    data_dir
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// Unmounts, lazily when still busy after a few tries; true when a plain unmount worked.
fn unmount(path: &Path) -> bool {
    let p = path.display().to_string();
    for _ in 0..20 {
        if run("umount", &[&p]).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = run("umount", &["-l", &p]);
    false
}

/// Detaches a loop device and waits until it is gone: while anything still holds it open (a
/// probe of another process, say) the kernel only marks it for clearing at the last close, and
/// its backing file stays busy until then.
fn detach(dev: &str) {
    let _ = run("losetup", &["-d", dev]);
    let backing = format!(
        "/sys/block/{}/loop/backing_file",
        dev.trim_start_matches("/dev/")
    );
    for _ in 0..100 {
        if !Path::new(&backing).exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The state directory of the disk mounted on `data_dir`: `.iodig-faultdisk-<name>` beside it.
fn state_dir(data_dir: &Path) -> Result<PathBuf, String> {
    let name = data_dir
        .file_name()
        .ok_or_else(|| format!("{} has no last component", data_dir.display()))?;
    let mut state_name = std::ffi::OsString::from(LEFTOVER_PREFIX);
    state_name.push(name);
    Ok(data_dir.parent().unwrap_or(Path::new(".")).join(state_name))
}

/// Undoes the layers a killed run left at `state`, unless their owner still lives.
fn clean_leftover(state: &Path, data_dir: &Path) -> Result<(), String> {
    let owner: Option<i32> = std::fs::read_to_string(state.join("owner"))
        .ok()
        .and_then(|s| s.trim().parse().ok());
    if let Some(pid) = owner.filter(|p| *p != std::process::id() as i32) {
        if Path::new(&format!("/proc/{pid}")).exists() {
            return Err(format!(
                "{} is in use by a faulty disk of process {pid}; wait for it to finish, or give this run another place (-p rocksdb.dir, or --out for managed nodes)",
                data_dir.display()
            ));
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mounted = |dir: &Path| {
        let canon = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        mounts
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(&*canon.display().to_string()))
    };
    if mounted(data_dir) {
        unmount(data_dir);
    }
    if let Ok(tag) = std::fs::read_to_string(state.join(DM_TAG_FILE)) {
        for name in dm::leftovers(tag.trim()) {
            dm::remove(&name);
        }
    }
    for file in [state.join("fuse").join(DISK_NAME), state.join("image")] {
        for dev in loops_backed_by(&file) {
            detach(&dev);
        }
    }
    let fuse_dir = state.join("fuse");
    if mounted(&fuse_dir) {
        unmount(&fuse_dir);
    }
    std::fs::remove_dir_all(state).map_err(|e| {
        format!(
            "cannot remove the faulty disk a killed run left at {}: {e}",
            state.display()
        )
    })
}

/// Loop devices whose backing file is `file`, by the kernel's own record (the file itself may
/// be unreachable once its FUSE server died).
fn loops_backed_by(file: &Path) -> Vec<String> {
    let want = file.display().to_string();
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let backing = std::fs::read_to_string(e.path().join("loop/backing_file")).ok()?;
            (backing.trim() == want).then(|| format!("/dev/{name}"))
        })
        .collect()
}

fn free_bytes(dir: &Path) -> Result<u64, String> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{} has a NUL byte", dir.display()))?;
    // SAFETY: statvfs is plain data; zeroed is a valid value for it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid C string and st a valid out pointer for the call.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(format!(
            "cannot stat the file system at {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(st.f_bfree as u64 * st.f_frsize as u64)
}

fn allocate(file: &std::fs::File, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate on a descriptor we own; the kernel validates the length.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Runs a system tool; its stderr becomes the error.
pub(crate) fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_say_what_they_touch() {
        assert!(Direction::Both.reads() && Direction::Both.writes());
        assert!(!Direction::Reads.writes() && !Direction::Writes.reads());
        assert_eq!(Direction::Writes.describe(), "writes");
    }
}
