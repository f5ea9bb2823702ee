//! The run directory, the product: `run.json` rewritten atomically after every step, and one
//! directory of files per step beside it.

use crate::step::unix_ms;
use anyhow::{Context, Result};
use iodig_model::fsio::{write_atomic, write_json_atomic};
use iodig_model::{files, RunDoc, StepSummary};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A run directory being written.
pub struct RunDir {
    pub path: PathBuf,
    pub doc: RunDoc,
}

/// `YYYYMMDD-HHMMSS` in UTC, for directory names that sort by time.
pub fn timestamp_utc(t: SystemTime) -> String {
    let secs = unix_ms(t) / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

impl RunDir {
    /// Creates `<out>/<timestamp>-<label>` (with a suffix if taken) and writes the first run.json.
    pub fn create(out: &Path, label: &str, doc: RunDoc) -> Result<Self> {
        std::fs::create_dir_all(out).with_context(|| {
            format!("--out {}: cannot create the output directory; choose a writable directory with --out DIR", out.display())
        })?;
        let base = format!("{}-{label}", timestamp_utc(SystemTime::now()));
        let mut path = out.join(&base);
        let mut n = 2;
        while path.exists() {
            path = out.join(format!("{base}-{n}"));
            n += 1;
        }
        std::fs::create_dir(&path).with_context(|| {
            format!("--out {}: cannot create a run directory there; choose a writable directory with --out DIR", out.display())
        })?;
        let dir = Self { path, doc };
        dir.save()?;
        Ok(dir)
    }

    /// Rewrites run.json atomically.
    pub fn save(&self) -> Result<()> {
        write_json_atomic(&self.path.join(files::RUN), &self.doc)
    }

    /// Directory of step `index` named `label`, created on first use.
    pub fn step_dir(&self, index: usize, label: &str) -> Result<(PathBuf, String)> {
        let rel = format!("steps/{index:02}-{label}");
        let path = self.path.join(&rel);
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok((path, rel))
    }

    pub fn write_json<T: Serialize + ?Sized>(
        &self,
        step_dir: &Path,
        name: &str,
        value: &T,
    ) -> Result<()> {
        write_json_atomic(&step_dir.join(name), value)
    }

    pub fn write_bytes(&self, step_dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
        write_atomic(&step_dir.join(name), bytes)
    }

    /// Appends a finished step's summary and saves run.json.
    pub fn push_step(&mut self, step: StepSummary) -> Result<()> {
        self.doc.steps.push(step);
        self.doc.updated_unix_ms = unix_ms(SystemTime::now());
        self.save()
    }

    /// Marks the run's final status and saves run.json.
    pub fn finish(&mut self, status: &str) -> Result<()> {
        self.doc.status = status.to_string();
        self.doc.updated_unix_ms = unix_ms(SystemTime::now());
        self.save()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(timestamp_utc(UNIX_EPOCH), "19700101-000000");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_363_200 + 3723); // 2026-11-22 17:02:03 UTC
        assert_eq!(timestamp_utc(t), "20261122-170203");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29 00:00:00 UTC
        assert_eq!(timestamp_utc(leap), "20000229-000000");
    }
}
