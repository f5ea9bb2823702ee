//! A file system on a loop device, set up and torn down by a test (root only).

/// An ext4 file system on a loop device over a file, mounted under a temporary directory;
/// unmounted and detached when dropped.
pub struct LoopFs {
    pub dev: String,
    pub mnt: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl LoopFs {
    /// With the image in `dir`: on the VM's disk the image's pages are what the loop device
    /// reads and writes; in a tmpfs the loop device runs at memory speed, so the only
    /// waits its requests meet are the requests ahead of them in the loop's own worker.
    pub fn new(dir: &std::path::Path, size: &str) -> LoopFs {
        LoopFs::with(dir, size, false)
    }

    /// On the VM's disk, the loop device writing straight to its image (direct IO), as a drive
    /// of its own would: a buffered loop device's writes land in the host's page cache and
    /// meet the disk seconds later, when the host writes them back, so another process's
    /// flood would slow the node's requests only after it has ended.
    pub fn direct(dir: &std::path::Path, size: &str) -> LoopFs {
        LoopFs::with(dir, size, true)
    }

    fn with(dir: &std::path::Path, size: &str, direct_io: bool) -> LoopFs {
        let sh = |cmd: &mut std::process::Command| {
            let out = cmd.output().expect("util-linux and e2fsprogs run");
            assert!(out.status.success(), "{cmd:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        let dir = tempfile::tempdir_in(dir).unwrap();
        let img = dir.path().join("disk.img");
        sh(std::process::Command::new("truncate")
            .args(["-s", size])
            .arg(&img));
        let dev = sh(std::process::Command::new("losetup")
            .args(["--find", "--show"])
            .arg(if direct_io {
                "--direct-io=on"
            } else {
                "--direct-io=off"
            })
            .arg(&img));
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let fs = LoopFs {
            dev,
            mnt,
            _dir: dir,
        };
        // losetup falls back to buffered IO where the image's file system refuses O_DIRECT:
        // a drive of its own was asked for, so say so rather than measure something else.
        let dio = std::fs::read_to_string(format!("/sys/block/{}/loop/dio", fs.name()))
            .unwrap_or_default();
        assert!(
            !direct_io || dio.trim() == "1",
            "{} over {} does not do direct IO (loop/dio {dio:?}): put the image on a file system that supports O_DIRECT",
            fs.dev,
            img.display()
        );
        sh(std::process::Command::new("mkfs.ext4").args(["-q", &fs.dev]));
        sh(std::process::Command::new("mount")
            .arg(&fs.dev)
            .arg(&fs.mnt));
        fs
    }

    /// `loop3` for `/dev/loop3`, as the trace names devices.
    pub fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.mnt).status();
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.dev])
            .status();
    }
}
