//! Secrets typed on the command line (`-p cassandra.password=…`) are overwritten in this
//! process's own argument memory once the arguments are parsed, so `ps` and /proc/PID/cmdline
//! stop showing them, as database clients do with their `-p` password. Until then (a few
//! milliseconds after exec) they are visible: `cassandra.password.file` or the environment keep
//! a password off the command line entirely.

use iodig_model::secret::{redact_arg, REDACTED};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// The argument area `[start, end)` of this process: `/proc/self/stat` fields 48 and 49.
fn arg_area() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ')' come fields 3 onwards: arg_start (48) and arg_end (49) are the 46th and 47th.
    let mut fields = rest.split_whitespace().skip(45);
    let start: usize = fields.next()?.parse().ok()?;
    let end: usize = fields.next()?.parse().ok()?;
    (start > 0 && end > start && end - start <= 1 << 20).then_some((start, end))
}

/// Byte ranges (offset, length) within `args` (NUL-separated) to overwrite with `*`: the value
/// of every argument the secret rule redacts.
fn secret_ranges(area: &[u8]) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut offset = 0;
    for arg in area.split(|b| *b == 0) {
        if let Ok(text) = std::str::from_utf8(arg) {
            let redacted = redact_arg(text);
            if redacted != text {
                // `redact_arg` keeps `…NAME=` and replaces what follows; a value that is key
                // material goes whole.
                let keep = redacted.strip_suffix(REDACTED).map_or(0, str::len);
                ranges.push((offset + keep, arg.len() - keep));
            }
        }
        offset += arg.len() + 1;
    }
    ranges
}

/// Overwrites the secret values among this process's arguments with `*`. Does nothing unless
/// the memory the kernel names holds exactly the arguments std reports, so a kernel or runtime
/// that lays them out differently is left alone.
pub fn hide_secret_args() {
    let Some((start, end)) = arg_area() else {
        return;
    };
    let len = end - start;
    let base: *mut u8 = std::ptr::with_exposed_provenance_mut(start);
    let mut area = vec![0u8; len];
    // SAFETY: [start, end) is this process's argument area as the kernel reports it: mapped and
    // readable (the initial stack) for the whole life of the process.
    unsafe { std::ptr::copy_nonoverlapping(base, area.as_mut_ptr(), len) };
    let mut seen: Vec<OsString> = area
        .split(|b| *b == 0)
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect();
    if area.last() == Some(&0) {
        seen.pop(); // the terminating NUL of the last argument
    }
    if seen != std::env::args_os().collect::<Vec<_>>() {
        return;
    }
    for (offset, n) in secret_ranges(&area) {
        // SAFETY: within the area checked above, which is writable (the initial stack); std
        // reads it only in `std::env::args`, and nothing runs concurrently at this point of
        // `main` (before any thread is started).
        unsafe { std::ptr::write_bytes(base.add(offset), b'*', n) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_secret_values_are_covered() {
        let area = b"iodig\0run\0-p\0cassandra.password=S3cr3t\0-p\0recordcount=5\0";
        let r = secret_ranges(area);
        assert_eq!(r.len(), 1);
        let (o, n) = r[0];
        assert_eq!(&area[o..o + n], b"S3cr3t");
    }

    #[test]
    fn this_process_arguments_are_found() {
        let (start, end) = arg_area().unwrap();
        assert!(end > start);
        // Nothing secret among a test binary's arguments: nothing is written.
        hide_secret_args();
    }
}
