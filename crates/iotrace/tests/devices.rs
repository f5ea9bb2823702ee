//! Where a data directory's block device is found, on file systems the kernel really mounts
//! (root required, as in CI): btrfs's anonymous device numbers, mount points with spaces, and
//! tmpfs refused.

mod common;

use common::*;
use iodig_iotrace::devices::resolve_path;
use std::process::Command;

/// Unmounts on drop, so a failed assertion leaves no mount behind.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("the command runs");
    assert!(out.status.success(), "{cmd:?}: {out:?}");
}

#[test]
fn a_directory_on_btrfs_resolves_to_the_device_it_was_mounted_from() {
    let _kernel = lock();
    let dev = LoopDev::new(256 << 20, 0, false);
    run(Command::new("mkfs.btrfs").args(["-q", &dev.path]));
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    // A space in the mount point: mountinfo writes it as \040.
    let mnt = dir.path().join("mount point");
    std::fs::create_dir(&mnt).unwrap();
    run(Command::new("mount").arg(&dev.path).arg(&mnt));
    let _mounted = Mounted(mnt.clone());
    let data = mnt.join("data");
    std::fs::create_dir(&data).unwrap();

    // btrfs gives its files an anonymous device number (major 0), not the loop device's.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(libc::major(std::fs::metadata(&data).unwrap().dev()), 0);

    let info = resolve_path(&data).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(info.name, dev.name);
    assert_eq!(info.fs_type.as_deref(), Some("btrfs"));
    assert_eq!(
        info.mount_point.as_deref(),
        Some(mnt.canonicalize().unwrap().to_str().unwrap())
    );
}

#[test]
fn a_directory_on_tmpfs_is_refused_with_the_fix() {
    let e = resolve_path(std::path::Path::new("/dev/shm")).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("virtual file system"), "{msg}");
    assert!(msg.contains("--device"), "{msg}");
}
