//! `--restore-each-step` on RocksDB's files: which files of a data directory are the
//! database's state, and putting a checkpoint's state back in place of the directory's while
//! the database is closed, leaving its LOG, its lock and iodig's dataset marker alone.

use std::path::Path;

/// Whether a file of a data directory is the database's own state (what a checkpoint holds and
/// a restore replaces), not its LOG, its lock or iodig's dataset marker.
pub(crate) fn is_db_state(name: &str) -> bool {
    name.ends_with(".sst")
        || name.ends_with(".blob")
        || name.ends_with(".log")
        || name.starts_with("MANIFEST-")
        || name.starts_with("OPTIONS-")
        || name == "CURRENT"
        || name == "IDENTITY"
}

/// Replaces `dir`'s database state with `from`'s (a checkpoint): table files are hard links
/// (they never change once written), the manifest and the rest copies, so the checkpoint stays
/// as it was for the next restore.
pub(crate) fn replace_state(dir: &Path, from: &Path) -> std::io::Result<()> {
    let names = |dir: &Path| -> std::io::Result<Vec<String>> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(dir)? {
            v.push(e?.file_name().to_string_lossy().into_owned());
        }
        Ok(v)
    };
    for name in names(dir)? {
        if is_db_state(&name) {
            std::fs::remove_file(dir.join(&name))?;
        }
    }
    for name in names(from)? {
        if !is_db_state(&name) {
            continue;
        }
        let (src, dst) = (from.join(&name), dir.join(&name));
        let linked = (name.ends_with(".sst") || name.ends_with(".blob"))
            && std::fs::hard_link(&src, &dst).is_ok();
        if !linked {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}
