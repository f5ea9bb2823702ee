//! Test fixtures on the real kernel: loop devices over sparse files (removed on drop, even when
//! a test fails), O_DIRECT IO with aligned buffers, BLKDISCARD, and libaio batches.
#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::Command;

/// Serialises tests that load BPF or count programs, so one test's programs never show in
/// another's "nothing left attached" check.
pub static KERNEL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn lock() -> std::sync::MutexGuard<'static, ()> {
    KERNEL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub struct LoopDev {
    pub path: String,
    pub name: String,
    _dir: tempfile::TempDir,
}

impl LoopDev {
    /// A loop device over a sparse file of `size` bytes; `fill` bytes at the start are written
    /// with data first (reads of holes finish without touching the backing disk).
    pub fn new(size: u64, fill: u64, direct_io: bool) -> LoopDev {
        // /var/tmp is on the VM's real disk, unlike a tmpfs /tmp.
        let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir in /var/tmp");
        let img: PathBuf = dir.path().join("disk.img");
        let f = File::create(&img).unwrap();
        f.set_len(size).unwrap();
        if fill > 0 {
            use std::io::Write;
            let mut w = std::io::BufWriter::new(&f);
            let chunk = vec![0x5au8; 1 << 20];
            for _ in 0..fill.div_ceil(1 << 20) {
                w.write_all(&chunk).unwrap();
            }
            w.flush().unwrap();
            f.sync_all().unwrap();
        }
        let dio = if direct_io {
            "--direct-io=on"
        } else {
            "--direct-io=off"
        };
        let out = Command::new("losetup")
            .args(["-f", "--show", dio])
            .arg(&img)
            .output()
            .expect("losetup (util-linux) runs");
        assert!(
            out.status.success(),
            "losetup failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let path = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let name = path.trim_start_matches("/dev/").to_string();
        std::thread::sleep(std::time::Duration::from_millis(300)); // let any udev probe finish
        LoopDev {
            path,
            name,
            _dir: dir,
        }
    }

    pub fn open_direct(&self) -> File {
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&self.path)
            .unwrap()
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
    }
}

/// A 4 KiB-aligned buffer for O_DIRECT.
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

impl AlignedBuf {
    pub fn new(len: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
        // SAFETY: layout has a non-zero size (callers pass len > 0) and a valid alignment.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        AlignedBuf { ptr, len }
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr came from alloc with exactly this layout and is freed once.
        unsafe {
            std::alloc::dealloc(
                self.ptr,
                std::alloc::Layout::from_size_align(self.len, 4096).unwrap(),
            );
        }
    }
}

pub fn pread_direct(f: &File, buf: &AlignedBuf, len: usize, off: u64) {
    // SAFETY: buf holds at least len bytes and outlives the call; fd is open.
    let n = unsafe { libc::pread(f.as_raw_fd(), buf.ptr().cast(), len, off as i64) };
    assert_eq!(
        n,
        len as isize,
        "O_DIRECT pread of {len} at {off}: {}",
        std::io::Error::last_os_error()
    );
}

pub fn pwrite_direct(f: &File, buf: &AlignedBuf, len: usize, off: u64) {
    // SAFETY: buf holds at least len bytes and outlives the call; fd is open.
    let n = unsafe { libc::pwrite(f.as_raw_fd(), buf.ptr().cast(), len, off as i64) };
    assert_eq!(
        n,
        len as isize,
        "O_DIRECT pwrite of {len} at {off}: {}",
        std::io::Error::last_os_error()
    );
}

/// BLKDISCARD = _IO(0x12, 119): discard [off, off+len) of the block device.
pub fn discard(f: &File, off: u64, len: u64) {
    let range = [off, len];
    // SAFETY: BLKDISCARD reads a [u64; 2] from the pointer, which is valid for the call.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), 0x1277, range.as_ptr()) };
    assert_eq!(rc, 0, "BLKDISCARD: {}", std::io::Error::last_os_error());
}

/// struct iocb of linux/aio_abi.h (little-endian layout).
#[repr(C)]
#[derive(Default)]
struct Iocb {
    data: u64,
    key: u32,
    rw_flags: u32,
    opcode: u16,
    reqprio: i16,
    fildes: u32,
    buf: u64,
    nbytes: u64,
    offset: i64,
    reserved2: u64,
    flags: u32,
    resfd: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

/// Submits `n` O_DIRECT 4 KiB reads in one io_submit (one plug: all are issued before the
/// first can complete), waits for all, `rounds` times. Returns the reads completed.
pub fn aio_read_batches(f: &File, n: usize, rounds: usize, span: u64) -> usize {
    let mut ctx: libc::c_ulong = 0;
    // SAFETY: io_setup writes the context id into ctx.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_io_setup,
            n as libc::c_long,
            &mut ctx as *mut libc::c_ulong,
        )
    };
    assert_eq!(rc, 0, "io_setup: {}", std::io::Error::last_os_error());
    let bufs: Vec<AlignedBuf> = (0..n).map(|_| AlignedBuf::new(4096)).collect();
    let mut done = 0;
    for r in 0..rounds {
        let mut iocbs: Vec<Iocb> = (0..n)
            .map(|i| Iocb {
                fildes: f.as_raw_fd() as u32,
                buf: bufs[i].ptr() as u64,
                nbytes: 4096,
                offset: ((((r * n + i) as u64) * 7919 * 4096) % span) as i64,
                ..Default::default()
            })
            .collect();
        let mut ptrs: Vec<*mut Iocb> = iocbs.iter_mut().map(|c| c as *mut Iocb).collect();
        // SAFETY: ptrs points at n live iocbs whose buffers outlive the wait below.
        let sub = unsafe {
            libc::syscall(
                libc::SYS_io_submit,
                ctx,
                n as libc::c_long,
                ptrs.as_mut_ptr(),
            )
        };
        assert_eq!(
            sub,
            n as i64,
            "io_submit: {}",
            std::io::Error::last_os_error()
        );
        let mut evs = vec![IoEvent::default(); n];
        let mut got = 0;
        while got < n {
            // SAFETY: evs has room for n - got events from index got on.
            let k = unsafe {
                libc::syscall(
                    libc::SYS_io_getevents,
                    ctx,
                    1 as libc::c_long,
                    (n - got) as libc::c_long,
                    evs[got..].as_mut_ptr(),
                    std::ptr::null_mut::<libc::timespec>(),
                )
            };
            assert!(k > 0, "io_getevents: {}", std::io::Error::last_os_error());
            got += k as usize;
        }
        assert!(
            evs.iter().all(|e| e.res == 4096),
            "a read failed: {:?}",
            evs.iter().map(|e| e.res).collect::<Vec<_>>()
        );
        done += got;
    }
    // SAFETY: ctx came from io_setup and is destroyed once.
    unsafe { libc::syscall(libc::SYS_io_destroy, ctx) };
    done
}

/// Names of loaded BPF programs and the program ids of live links, system-wide.
pub fn bpf_objects() -> (Vec<String>, Vec<u32>) {
    let progs = libbpf_rs::query::ProgInfoIter::default()
        .map(|p| p.name.to_string_lossy().into_owned())
        .collect();
    let links = libbpf_rs::query::LinkInfoIter::default()
        .map(|l| l.prog_id)
        .collect();
    (progs, links)
}

pub fn our_progs() -> Vec<String> {
    bpf_objects()
        .0
        .into_iter()
        .filter(|n| n.starts_with("rq_") && (n.ends_with("_btf") || n.ends_with("_raw")))
        .collect()
}

/// Our programs still loaded after waiting up to 5 s: the kernel frees programs and links after
/// the last fd closes, asynchronously (RCU), so "gone" needs a short wait.
pub fn our_progs_after_release() -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !our_progs().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    our_progs()
}
