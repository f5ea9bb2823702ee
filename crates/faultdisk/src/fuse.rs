//! A one-file FUSE file system spoken directly over `/dev/fuse` (no libfuse, no fusermount):
//! `disk`, a pass-through to the image file, whose reads and writes the shared `Injection` can
//! delay or fail. The loop device sits on `disk`; `FOPEN_DIRECT_IO` keeps the page cache of the
//! FUSE file out of the way, so every IO the loop device issues reaches this server.
//!
//! Structure layouts are those of `<linux/fuse.h>` (protocol 7.38); only what a loop device
//! asks of a regular file is served, anything else gets ENOSYS, which the kernel remembers.

use crate::Injection;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const FUSE_LOOKUP: u32 = 1;
const FUSE_FORGET: u32 = 2;
const FUSE_GETATTR: u32 = 3;
const FUSE_SETATTR: u32 = 4;
const FUSE_OPEN: u32 = 14;
const FUSE_READ: u32 = 15;
const FUSE_WRITE: u32 = 16;
const FUSE_STATFS: u32 = 17;
const FUSE_RELEASE: u32 = 18;
const FUSE_FSYNC: u32 = 20;
const FUSE_FLUSH: u32 = 25;
const FUSE_INIT: u32 = 26;
const FUSE_OPENDIR: u32 = 27;
const FUSE_READDIR: u32 = 28;
const FUSE_RELEASEDIR: u32 = 29;
const FUSE_INTERRUPT: u32 = 36;
const FUSE_DESTROY: u32 = 38;
const FUSE_BATCH_FORGET: u32 = 42;
const FUSE_FALLOCATE: u32 = 43;

const FUSE_ASYNC_READ: u32 = 1 << 0;
const FUSE_BIG_WRITES: u32 = 1 << 5;
const FUSE_MAX_PAGES: u32 = 1 << 22;
const FOPEN_DIRECT_IO: u32 = 1 << 0;

const ROOT_ID: u64 = 1;
const DISK_ID: u64 = 2;
/// The file's name inside the mount.
pub const DISK_NAME: &str = "disk";

/// Largest write the kernel may send (256 pages); the read buffer holds it plus headers.
const MAX_WRITE: u32 = 1 << 20;
const BUFFER: usize = MAX_WRITE as usize + 64 * 1024;
const IN_HEADER: usize = 40;
/// Threads reading requests; the loop device hands over one IO at a time per cgroup, so a few
/// suffice to keep several cgroups' IO (iodig's, the kernel flusher's) from waiting on each other.
const THREADS: usize = 4;

/// A mounted server; unmounting (by the owner) ends its threads.
pub struct Server {
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Mounts the file system at `mountpoint` and serves `image` (of `size` bytes) as `disk`.
    pub fn mount(
        mountpoint: &Path,
        image: File,
        size: u64,
        injection: Arc<Injection>,
    ) -> io::Result<Server> {
        // SAFETY: the path is a valid C string; open has no other preconditions.
        let raw = unsafe { libc::open(c"/dev/fuse".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open returned a fresh descriptor that nothing else owns.
        let dev = unsafe { OwnedFd::from_raw_fd(raw) };
        let target = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in mount point"))?;
        let data = std::ffi::CString::new(format!(
            "fd={raw},rootmode=40000,user_id=0,group_id=0,allow_other,max_read={MAX_WRITE}"
        ))
        .expect("no NUL");
        // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
        let rc = unsafe {
            libc::mount(
                c"iodig-faultdisk".as_ptr(),
                target.as_ptr(),
                c"fuse".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                data.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let dev = Arc::new(dev);
        let image = Arc::new(image);
        let threads = (0..THREADS)
            .map(|i| {
                let (dev, image, injection) = (dev.clone(), image.clone(), injection.clone());
                std::thread::Builder::new()
                    .name(format!("iodig-fuse{i}"))
                    .spawn(move || serve(&dev, &image, size, &injection))
                    .expect("a thread starts")
            })
            .collect();
        Ok(Server { threads })
    }

    /// Waits for the threads, which end once the file system is unmounted.
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Reads requests until the connection goes away (ENODEV after unmount or abort).
fn serve(dev: &OwnedFd, image: &File, size: u64, injection: &Injection) {
    let mut buf = vec![0u8; BUFFER];
    loop {
        // SAFETY: buf is a valid writable buffer of its length for the duration of the call.
        let n = unsafe { libc::read(dev.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            match io::Error::last_os_error().raw_os_error() {
                // Interrupted, or a request the kernel withdrew before we read it.
                Some(libc::EINTR | libc::ENOENT | libc::EAGAIN) => continue,
                _ => return,
            }
        }
        let req = &buf[..n as usize];
        if req.len() < IN_HEADER {
            continue;
        }
        let opcode = u32_at(req, 4);
        let unique = u64_at(req, 8);
        let node = u64_at(req, 16);
        let body = &req[IN_HEADER..];
        let reply = match opcode {
            FUSE_FORGET | FUSE_BATCH_FORGET | FUSE_INTERRUPT => continue,
            FUSE_INIT => Ok(init_reply(body)),
            FUSE_LOOKUP => lookup(body, size),
            FUSE_GETATTR | FUSE_SETATTR => attr(node, size).map(|a| attr_out(&a)),
            FUSE_OPEN => Ok(open_out(FOPEN_DIRECT_IO)),
            FUSE_OPENDIR => Ok(open_out(0)),
            FUSE_READDIR | FUSE_RELEASE | FUSE_RELEASEDIR | FUSE_FLUSH | FUSE_DESTROY => {
                Ok(Vec::new())
            }
            FUSE_READ => read(body, image, injection),
            FUSE_WRITE => write(body, image, injection),
            FUSE_FSYNC => fsync(image, injection),
            FUSE_FALLOCATE => fallocate(body, image),
            FUSE_STATFS => Ok(statfs_out(size)),
            _ => Err(libc::ENOSYS),
        };
        let sent = match reply {
            Ok(payload) => send(dev, unique, 0, &payload),
            Err(errno) => send(dev, unique, -errno, &[]),
        };
        // ENOENT: the request was interrupted and is gone; anything else ends the connection.
        if let Err(e) = sent {
            if e.raw_os_error() != Some(libc::ENOENT) {
                return;
            }
        }
    }
}

fn send(dev: &OwnedFd, unique: u64, error: i32, payload: &[u8]) -> io::Result<()> {
    let mut out = Vec::with_capacity(16 + payload.len());
    out.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
    out.extend_from_slice(&error.to_ne_bytes());
    out.extend_from_slice(&unique.to_ne_bytes());
    out.extend_from_slice(payload);
    // SAFETY: out is a valid readable buffer of its length for the duration of the call.
    let n = unsafe { libc::write(dev.as_raw_fd(), out.as_ptr().cast(), out.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// `fuse_init_out` for protocol 7.38: big writes of up to 1 MiB, asynchronous reads.
fn init_reply(body: &[u8]) -> Vec<u8> {
    let (max_readahead, kernel_flags) = if body.len() >= 16 {
        (u32_at(body, 8), u32_at(body, 12))
    } else {
        (128 * 1024, 0)
    };
    let mut o = Vec::with_capacity(64);
    o.extend_from_slice(&7u32.to_ne_bytes());
    o.extend_from_slice(&38u32.to_ne_bytes());
    o.extend_from_slice(&max_readahead.to_ne_bytes());
    let flags = kernel_flags & (FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_MAX_PAGES);
    o.extend_from_slice(&flags.to_ne_bytes());
    o.extend_from_slice(&16u16.to_ne_bytes()); // max_background
    o.extend_from_slice(&12u16.to_ne_bytes()); // congestion_threshold
    o.extend_from_slice(&MAX_WRITE.to_ne_bytes());
    o.extend_from_slice(&1u32.to_ne_bytes()); // time_gran
    o.extend_from_slice(&((MAX_WRITE / 4096) as u16).to_ne_bytes()); // max_pages
    o.extend_from_slice(&0u16.to_ne_bytes()); // map_alignment
    o.extend_from_slice(&0u32.to_ne_bytes()); // flags2
    o.resize(64, 0); // max_stack_depth and the unused words
    o
}

/// `struct fuse_attr` of the root directory or the disk file.
fn attr(node: u64, size: u64) -> Result<Vec<u8>, i32> {
    let (mode, nlink, size) = match node {
        ROOT_ID => (libc::S_IFDIR | 0o755, 2u32, 0),
        DISK_ID => (libc::S_IFREG | 0o600, 1u32, size),
        _ => return Err(libc::ENOENT),
    };
    let mut a = Vec::with_capacity(88);
    a.extend_from_slice(&node.to_ne_bytes());
    a.extend_from_slice(&size.to_ne_bytes());
    a.extend_from_slice(&size.div_ceil(512).to_ne_bytes());
    a.extend_from_slice(&[0u8; 3 * 8 + 3 * 4]); // times
    a.extend_from_slice(&mode.to_ne_bytes());
    a.extend_from_slice(&nlink.to_ne_bytes());
    a.extend_from_slice(&[0u8; 3 * 4]); // uid, gid, rdev
    a.extend_from_slice(&4096u32.to_ne_bytes()); // blksize
    a.extend_from_slice(&0u32.to_ne_bytes()); // flags
    Ok(a)
}

/// Attributes never change behind the kernel's back, so they may be cached for long.
const VALID_SECS: u64 = 3600;

fn attr_out(a: &[u8]) -> Vec<u8> {
    let mut o = Vec::with_capacity(104);
    o.extend_from_slice(&VALID_SECS.to_ne_bytes());
    o.extend_from_slice(&[0u8; 8]);
    o.extend_from_slice(a);
    o
}

fn lookup(body: &[u8], size: u64) -> Result<Vec<u8>, i32> {
    let name = body.split(|b| *b == 0).next().unwrap_or_default();
    if name != DISK_NAME.as_bytes() {
        return Err(libc::ENOENT);
    }
    let mut o = Vec::with_capacity(128);
    o.extend_from_slice(&DISK_ID.to_ne_bytes());
    o.extend_from_slice(&0u64.to_ne_bytes()); // generation
    o.extend_from_slice(&VALID_SECS.to_ne_bytes());
    o.extend_from_slice(&VALID_SECS.to_ne_bytes());
    o.extend_from_slice(&[0u8; 8]);
    o.extend_from_slice(&attr(DISK_ID, size)?);
    Ok(o)
}

fn open_out(flags: u32) -> Vec<u8> {
    let mut o = vec![0u8; 8];
    o.extend_from_slice(&flags.to_ne_bytes());
    o.extend_from_slice(&[0u8; 4]);
    o
}

fn statfs_out(size: u64) -> Vec<u8> {
    let mut o = Vec::with_capacity(80);
    o.extend_from_slice(&(size / 4096).to_ne_bytes()); // blocks
    o.extend_from_slice(&[0u8; 4 * 8]); // bfree, bavail, files, ffree
    o.extend_from_slice(&4096u32.to_ne_bytes()); // bsize
    o.extend_from_slice(&255u32.to_ne_bytes()); // namelen
    o.extend_from_slice(&4096u32.to_ne_bytes()); // frsize
    o.resize(80, 0);
    o
}

fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Waits out an injected delay, after the IO itself: the delay is added to what the image took.
fn delay(micros: u64) {
    if micros > 0 {
        std::thread::sleep(Duration::from_micros(micros));
    }
}

fn read(body: &[u8], image: &File, injection: &Injection) -> Result<Vec<u8>, i32> {
    let (offset, size) = (u64_at(body, 8), u32_at(body, 16) as usize);
    if injection.fail_reads.load(Ordering::Relaxed) {
        injection.failed.fetch_add(1, Ordering::Relaxed);
        return Err(libc::EIO);
    }
    let mut data = vec![0u8; size];
    let mut got = 0;
    while got < size {
        match image.read_at(&mut data[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(errno_of(&e)),
        }
    }
    data.truncate(got);
    let wait = injection.read_delay_us.load(Ordering::Relaxed);
    if wait > 0 {
        injection.delayed.fetch_add(1, Ordering::Relaxed);
        delay(wait);
    }
    Ok(data)
}

fn write(body: &[u8], image: &File, injection: &Injection) -> Result<Vec<u8>, i32> {
    const WRITE_IN: usize = 40;
    if body.len() < WRITE_IN {
        return Err(libc::EINVAL);
    }
    let (offset, size) = (u64_at(body, 8), u32_at(body, 16) as usize);
    if injection.fail_writes.load(Ordering::Relaxed) {
        injection.failed.fetch_add(1, Ordering::Relaxed);
        return Err(libc::EIO);
    }
    let data = body.get(WRITE_IN..WRITE_IN + size).ok_or(libc::EINVAL)?;
    image.write_all_at(data, offset).map_err(|e| errno_of(&e))?;
    let wait = injection.write_delay_us.load(Ordering::Relaxed);
    if wait > 0 {
        injection.delayed.fetch_add(1, Ordering::Relaxed);
        delay(wait);
    }
    let mut o = (size as u32).to_ne_bytes().to_vec();
    o.extend_from_slice(&[0u8; 4]);
    Ok(o)
}

/// A cache flush of the loop device: durable on the image, and failing while writes fail.
fn fsync(image: &File, injection: &Injection) -> Result<Vec<u8>, i32> {
    if injection.fail_writes.load(Ordering::Relaxed) {
        injection.failed.fetch_add(1, Ordering::Relaxed);
        return Err(libc::EIO);
    }
    image.sync_data().map_err(|e| errno_of(&e))?;
    Ok(Vec::new())
}

/// Discards and write-zeroes of the loop device arrive as fallocate on the file.
fn fallocate(body: &[u8], image: &File) -> Result<Vec<u8>, i32> {
    if body.len() < 28 {
        return Err(libc::EINVAL);
    }
    let (offset, length, mode) = (u64_at(body, 8), u64_at(body, 16), u32_at(body, 24));
    // SAFETY: fallocate on a descriptor we own; the kernel validates the range and mode.
    let rc = unsafe {
        libc::fallocate(
            image.as_raw_fd(),
            mode as i32,
            offset as libc::off_t,
            length as libc::off_t,
        )
    };
    if rc != 0 {
        return Err(errno_of(&io::Error::last_os_error()));
    }
    Ok(Vec::new())
}
