//! Little-endian integers at byte offsets of a buffer already checked to hold them: what the
//! ELF reader (`remote::floor`) and the NVMe log pages (`device_stats::log_pages`) both parse.

/// The `u16` at `at`.
pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// The `u32` at `at`.
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The `u64` at `at`.
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
