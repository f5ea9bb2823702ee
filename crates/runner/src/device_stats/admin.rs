//! NVMe admin commands through the kernel's passthrough ioctl on a controller's character
//! device (`NVME_IOCTL_ADMIN_CMD`, linux/nvme_ioctl.h): Get Log Page and Identify, nothing that
//! changes the drive. The kernel allows them to CAP_SYS_ADMIN only.

use std::fs::File;
use std::os::fd::AsRawFd;

/// `struct nvme_passthru_cmd` (linux/nvme_ioctl.h), 72 bytes.
#[repr(C)]
#[derive(Default)]
struct PassthruCmd {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}

const _: () = assert!(size_of::<PassthruCmd>() == 72);

/// `_IOWR('N', 0x41, struct nvme_passthru_cmd)`: direction read|write (3) in bits 31–30, the
/// argument's size in 29–16, the type 'N' in 15–8, the number in 7–0.
const NVME_IOCTL_ADMIN_CMD: libc::Ioctl = (3 << 30)
    | ((size_of::<PassthruCmd>() as libc::Ioctl) << 16)
    | ((b'N' as libc::Ioctl) << 8)
    | 0x41;

const OPCODE_GET_LOG_PAGE: u8 = 0x02;
const OPCODE_IDENTIFY: u8 = 0x06;
/// Every namespace: the controller's own log.
const NSID_ALL: u32 = 0xFFFF_FFFF;
/// Identify CNS 17h: the UUID list.
const CNS_UUID_LIST: u32 = 0x17;
/// Get Log Page's Retain Asynchronous Event bit: reading the SMART log with it clear would
/// clear a pending SMART event that the kernel or the operator's tools are waiting to see.
const RETAIN_ASYNC_EVENT: u32 = 1 << 15;

/// A 4 KiB buffer, page aligned so the kernel maps it without a bounce copy.
#[repr(C, align(4096))]
pub struct Page(pub [u8; 4096]);

/// Why an admin command gave no data.
#[derive(Debug)]
pub enum AdminError {
    /// The ioctl itself failed (no permission, not an NVMe controller).
    Os(std::io::Error),
    /// The controller completed it with this NVMe status (an unsupported log page, …).
    Status(i32),
}

impl std::fmt::Display for AdminError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdminError::Os(e) if is_permission(e) => write!(
                f,
                "the NVMe admin passthrough needs CAP_SYS_ADMIN (run iodig as root): {e}"
            ),
            AdminError::Os(e) => write!(f, "the NVMe admin passthrough failed: {e}"),
            AdminError::Status(s) => write!(f, "the controller answered NVMe status {s:#x}"),
        }
    }
}

/// EPERM or EACCES.
pub fn is_permission(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::PermissionDenied
}

fn submit(dev: &File, cmd: &mut PassthruCmd) -> Result<(), AdminError> {
    // SAFETY: the fd is an open file for the whole call; `cmd` is a valid, exclusively borrowed
    // `nvme_passthru_cmd` of the size the request number encodes, and its `addr`/`data_len`
    // describe a live buffer the caller borrows mutably for the same duration.
    let rc = unsafe { libc::ioctl(dev.as_raw_fd(), NVME_IOCTL_ADMIN_CMD, cmd) };
    match rc {
        0 => Ok(()),
        rc if rc < 0 => Err(AdminError::Os(std::io::Error::last_os_error())),
        status => Err(AdminError::Status(status)),
    }
}

/// Get Log Page `lid` of the whole controller into `buf` (a multiple of 4 bytes), under UUID
/// index `uuid_index` (0: none).
pub fn get_log_page(dev: &File, lid: u8, uuid_index: u8, buf: &mut [u8]) -> Result<(), AdminError> {
    let dwords = u32::try_from(buf.len() / 4).expect("a log page buffer of a few KiB");
    let mut cmd = PassthruCmd {
        opcode: OPCODE_GET_LOG_PAGE,
        nsid: NSID_ALL,
        addr: buf.as_mut_ptr() as u64,
        data_len: dwords * 4,
        // NUMDL (dwords − 1, low 16 bits) in 31–16, RAE in 15, the log identifier in 7–0.
        cdw10: (((dwords - 1) & 0xffff) << 16) | RETAIN_ASYNC_EVENT | u32::from(lid),
        // NUMDU: the high 16 bits of dwords − 1.
        cdw11: (dwords - 1) >> 16,
        cdw14: u32::from(uuid_index & 0x7f),
        // 0: the kernel's admin timeout. A shorter one would make a slow answer reset the
        // controller under the benchmark.
        timeout_ms: 0,
        ..Default::default()
    };
    submit(dev, &mut cmd)
}

/// Identify the controller's UUID list (CNS 17h); controllers without one answer an error.
pub fn identify_uuid_list(dev: &File) -> Result<Box<Page>, AdminError> {
    let mut page = Box::new(Page([0; 4096]));
    let mut cmd = PassthruCmd {
        opcode: OPCODE_IDENTIFY,
        addr: page.0.as_mut_ptr() as u64,
        data_len: 4096,
        cdw10: CNS_UUID_LIST,
        ..Default::default()
    };
    submit(dev, &mut cmd)?;
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_number_is_the_kernels() {
        // NVME_IOCTL_ADMIN_CMD as compiled from linux/nvme_ioctl.h.
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xC048_4E41);
    }

    #[test]
    fn a_file_that_is_no_controller_refuses_the_ioctl() {
        let f = File::open("/dev/null").unwrap();
        let mut buf = [0u8; 512];
        let e = get_log_page(&f, 0x02, 0, &mut buf).unwrap_err();
        assert!(matches!(e, AdminError::Os(_)), "{e}");
    }
}
