//! The faulty disk on the real kernel (root, loop, FUSE; device-mapper where the kernel has
//! it): what it injects is what a process on its file system meets, and nothing of it is left
//! behind.

use iodig_faultdisk::{Direction, FaultyDisk, Mechanism};
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

const SIZE: u64 = 256 << 20;

fn scratch() -> tempfile::TempDir {
    // Beside the other scratch data: tmpfs under /tmp would do too, but /var/tmp is a disk here.
    tempfile::Builder::new()
        .prefix("iodig-faultdisk-test")
        .tempdir_in("/var/tmp")
        .expect("a scratch directory")
}

fn mounted_on(dir: &Path) -> Option<String> {
    let canon = std::fs::canonicalize(dir).ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        let sep = f.iter().position(|x| *x == "-")?;
        (f[4] == canon.display().to_string()).then(|| format!("{} {}", f[sep + 1], f[sep + 2]))
    })
}

/// A synced 4 KiB write: it reaches the device, so it meets whatever the device does.
fn synced_write(path: &Path) -> std::io::Result<Duration> {
    let t = Instant::now();
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(&[7u8; 4096])?;
    f.sync_all()?;
    Ok(t.elapsed())
}

/// Reads a file past the page cache.
fn direct_read(path: &Path) -> std::io::Result<usize> {
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    let layout = std::alloc::Layout::from_size_align(4096, 4096).expect("a layout");
    // SAFETY: the layout has a non-zero size; the memory is freed below.
    let ptr = unsafe { std::alloc::alloc(layout) };
    // SAFETY: ptr points to 4096 writable bytes that nothing else uses.
    let buf = unsafe { std::slice::from_raw_parts_mut(ptr, 4096) };
    let r = f.read(buf);
    // SAFETY: allocated above with this layout.
    unsafe { std::alloc::dealloc(ptr, layout) };
    r
}

#[test]
fn delays_fails_fills_and_heals_then_leaves_nothing() {
    delays_fails_fills_and_heals_on(Mechanism::Fuse);
}

/// Device-mapper where this kernel has it (the same checks as FUSE); where it has not, asking
/// for it is refused with the reason and the way out.
#[test]
fn device_mapper_does_the_same_where_the_kernel_has_it() {
    match Mechanism::DeviceMapper.resolve() {
        Ok(_) => delays_fails_fills_and_heals_on(Mechanism::DeviceMapper),
        Err(e) => {
            assert!(
                !Path::new("/dev/mapper/control").exists() || e.contains("target"),
                "{e}"
            );
            assert!(e.contains("faultdisk.mechanism=fuse"), "{e}");
            assert_eq!(
                Mechanism::Auto.resolve(),
                Ok(Mechanism::Fuse),
                "auto falls back to FUSE"
            );
        }
    }
}

fn delays_fails_fills_and_heals_on(mechanism: Mechanism) {
    let tmp = scratch();
    let data = tmp.path().join("data");
    let disk = FaultyDisk::create(&data, SIZE, mechanism).expect("a faulty disk (root, loop)");
    let dev = disk.device_name().to_string();
    let mount = mounted_on(&data).expect("the data directory is a mount");
    let source = mount.strip_prefix("ext4 ").expect("ext4");
    assert_eq!(
        std::fs::canonicalize(source).unwrap(),
        Path::new("/dev").join(&dev),
        "mounted from {source}"
    );
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), 0, "starts empty");

    let file = data.join("f");
    let healthy = synced_write(&file).expect("a healthy write");

    let said = disk
        .slow(Duration::from_millis(80), Direction::Writes)
        .expect("slowed");
    assert!(said.contains(disk.mechanism()), "{said}");
    let slow = synced_write(&file).expect("a slow write still succeeds");
    assert!(
        slow >= Duration::from_millis(80),
        "a synced write took {slow:?} with 80 ms added to writes (healthy: {healthy:?})"
    );
    disk.heal();

    disk.fail(Direction::Reads).expect("failing");
    let err = direct_read(&file).expect_err("reads fail");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    let healed = disk.heal();
    assert!(healed.contains("healed"), "{healed}");
    if mechanism == Mechanism::Fuse {
        assert!(
            healed.contains("1 failed") || healed.contains(" failed so far"),
            "{healed}"
        );
    }
    assert_eq!(direct_read(&file).expect("a healed read"), 4096);

    let said = disk.fill().expect("a fill");
    assert!(said.contains("filled"), "{said}");
    let err = synced_write(&data.join("g")).expect_err("a full file system refuses");
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    disk.heal();
    synced_write(&data.join("g")).expect("room again after the fill is removed");

    drop(disk);
    assert_eq!(mounted_on(&data), None, "the data directory is unmounted");
    let backing = format!("/sys/block/{dev}/loop/backing_file");
    let still = std::fs::read_to_string(&backing).unwrap_or_default();
    assert!(
        !still.contains("iodig-faultdisk"),
        "{dev} still backed by {still}"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("data")], "{left:?}");
}

#[test]
fn a_disk_left_by_a_killed_run_is_removed_by_the_next() {
    let tmp = scratch();
    let data = tmp.path().join("data");
    let first = FaultyDisk::create(&data, SIZE, Mechanism::Auto).expect("a faulty disk");
    let dev = first.device_name().to_string();
    // As if the process died: nothing of its drop runs.
    std::mem::forget(first);
    assert!(mounted_on(&data).is_some());

    let second = FaultyDisk::create(&data, SIZE, Mechanism::Auto)
        .expect("the leftover is cleaned and replaced");
    let backing = std::fs::read_to_string(format!("/sys/block/{dev}/loop/backing_file"));
    // The old loop device is detached (or reused by the new disk, which is fine).
    assert!(
        backing.is_err() || second.device_name() == dev,
        "{dev} still attached: {backing:?}"
    );
    synced_write(&data.join("f")).expect("the new disk works");
    drop(second);
    assert_eq!(mounted_on(&data), None);
}
