//! Atomic file writes: a result file is either the old complete version or the new complete
//! version, never a torn one, so a crash or Ctrl-C keeps everything that finished.

use anyhow::{Context, Result};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Whether a file name is one of [`write_atomic`]'s temporary files (`.NAME.PID.tmp`): what a
/// killed writer can leave behind, and the only thing a clean-up may delete.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// Writes `bytes` to `path` through a temporary sibling file, fsync and rename. The temporary
/// file carries the pid, so two processes writing the same file never share one; it is removed
/// when the write fails (a full disk keeps no half file).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// The temporary file an atomic write of `path` goes through: `.NAME.PID.tmp` beside it (the
/// pid, so two processes writing the same file never share one).
fn temp_sibling(path: &Path) -> Result<std::path::PathBuf> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .context("atomic write target has no file name")?;
    Ok(dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// [`write_atomic`] for content written as it is produced (through a 1 MiB buffer), so a large
/// file is never held in memory whole.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let tmp = temp_sibling(path)?;
    let write = || -> std::io::Result<()> {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
        fill(&mut out)?;
        let f = out
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::Error::new(write_error(path, e))
    })
}

/// A file written piece by piece (a report's per-second CSV, one step at a time) under
/// [`write_atomic`]'s temporary name, and renamed into place by [`AtomicFile::commit`]; dropped
/// uncommitted (an error on the way), the temporary file is removed and the old file stays.
pub struct AtomicFile {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    out: Option<std::io::BufWriter<std::fs::File>>,
}

impl AtomicFile {
    /// Creates the temporary file beside `path`.
    pub fn create(path: &Path) -> Result<AtomicFile> {
        let tmp = temp_sibling(path)?;
        let file = std::fs::File::create(&tmp).map_err(|e| write_error(path, e))?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            tmp,
            out: Some(std::io::BufWriter::with_capacity(1 << 20, file)),
        })
    }

    /// Appends `bytes`.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        let out = self.out.as_mut().expect("written before commit");
        out.write_all(bytes)
            .map_err(|e| anyhow::Error::new(write_error(&self.path, e)))
    }

    /// Flushes, syncs and renames the file into place; returns its path.
    pub fn commit(mut self) -> Result<std::path::PathBuf> {
        let out = self.out.take().expect("committed once");
        let done = out
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)
            .and_then(|f| f.sync_all())
            .and_then(|()| std::fs::rename(&self.tmp, &self.path));
        if let Err(e) = done {
            // A full disk keeps no half file, as in `write_atomic`.
            let _ = std::fs::remove_file(&self.tmp);
            return Err(anyhow::Error::new(write_error(&self.path, e)));
        }
        Ok(std::mem::take(&mut self.path))
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.out.is_some() {
            self.out = None;
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The error of a failed write, naming the path; a full file system or quota says so and how
/// to go on, since "os error 28" alone does not.
fn write_error(path: &Path, e: std::io::Error) -> std::io::Error {
    // ENOSPC 28, EDQUOT 122 on Linux.
    let full = matches!(e.raw_os_error(), Some(28 | 122));
    let msg = if full {
        format!(
            "cannot write {}: the file system is full ({e}); free space there, or write the results to another file system",
            path.display()
        )
    } else {
        format!("cannot write {}: {e}", path.display())
    };
    std::io::Error::new(e.kind(), msg)
}

/// Whether an error chain holds a full file system (ENOSPC, EDQUOT).
pub fn is_disk_full(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(io.raw_os_error(), Some(28 | 122))
                || io.to_string().contains("the file system is full")
        })
    })
}

/// Serialises `value` as pretty JSON and writes it atomically.
pub fn write_json_atomic<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Reads a JSON file, naming the path in the error.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a valid iodig file", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_names_the_path_and_keeps_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("iodig-fsio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("a.json");
        write_atomic(&target, b"1").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"1");
        // A directory in the way of the rename: the write fails, the old file stays.
        let blocked = dir.join("sub");
        std::fs::create_dir_all(blocked.join("x")).unwrap();
        let e = format!("{:#}", write_atomic(&blocked, b"2").unwrap_err());
        assert!(e.contains(&blocked.display().to_string()), "{e}");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| is_temp_name(n)), "{names:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_written_in_pieces_appears_whole_on_commit_and_not_at_all_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("report-io.csv");
        write_atomic(&target, b"old\n").unwrap();
        let names = || -> Vec<String> {
            std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        let mut f = AtomicFile::create(&target).unwrap();
        f.write(b"a,").unwrap();
        f.write(b"b\n").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"old\n", "not yet");
        assert!(names().iter().any(|n| is_temp_name(n)), "{:?}", names());
        assert_eq!(f.commit().unwrap(), target);
        assert_eq!(std::fs::read(&target).unwrap(), b"a,b\n");
        let mut f = AtomicFile::create(&target).unwrap();
        f.write(b"torn").unwrap();
        drop(f);
        assert_eq!(
            std::fs::read(&target).unwrap(),
            b"a,b\n",
            "the old file stays"
        );
        assert_eq!(names(), ["report-io.csv"]);
    }

    #[test]
    fn a_full_disk_says_so() {
        let e = write_error(
            Path::new("/r/run.json"),
            std::io::Error::from_raw_os_error(28),
        );
        assert!(
            e.to_string()
                .contains("/r/run.json: the file system is full"),
            "{e}"
        );
        assert!(is_disk_full(&anyhow::Error::new(e)));
    }
}
