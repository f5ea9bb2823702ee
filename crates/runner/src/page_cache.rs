//! `--drop-caches`: the page cache emptied before each run step, here and on every observed
//! host, so each step starts as cold as the briefs' steps did after their restore from backup
//! (a step that reads data the one before left cached measures memory, not the drive).

/// The page cache's size before and after a drop, bytes, or why it could not be dropped.
pub type Dropped = Result<(u64, u64), String>;

/// `Cached` of /proc/meminfo, bytes.
fn cached_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("Cached:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// Writes dirty pages back, then drops the clean page cache, dentries and inodes
/// (`vm.drop_caches = 3`). Returns the page cache before and after, or why it could not.
pub fn drop_page_cache() -> Dropped {
    let before = cached_bytes().unwrap_or(0);
    // SAFETY: sync has no preconditions and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| format!("cannot write /proc/sys/vm/drop_caches ({e}); it needs root"))?;
    Ok((before, cached_bytes().unwrap_or(0)))
}

/// "page cache 3.4 GB → 0.2 GB", as the notes say it.
pub fn words(before: u64, after: u64) -> String {
    format!(
        "page cache {:.2} GB → {:.2} GB",
        before as f64 / 1e9,
        after as f64 / 1e9
    )
}

/// Whether this process may drop the page cache (root, or write access to the knob): asked
/// before anything starts, so `--drop-caches` without it is refused at once.
pub fn can_drop() -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/vm/drop_caches")
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_give_both_sizes() {
        assert_eq!(
            words(3_400_000_000, 200_000_000),
            "page cache 3.40 GB → 0.20 GB"
        );
    }

    #[test]
    fn dropping_empties_the_cache_of_a_file_just_read() {
        if !can_drop() {
            // Not root: the refusal is what there is to test.
            assert!(drop_page_cache().unwrap_err().contains("needs root"));
            return;
        }
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let f = dir.path().join("data");
        std::fs::write(&f, vec![7u8; 64 << 20]).unwrap();
        let _ = std::fs::read(&f).unwrap();
        let (before, after) = drop_page_cache().unwrap();
        assert!(
            before >= after + (32 << 20),
            "the 64 MiB just written and read left the cache: {before} → {after}"
        );
    }
}
