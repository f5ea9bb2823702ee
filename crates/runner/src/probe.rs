//! Whether the database holds the dataset: a few of its keys read back before a run.
//!
//! A data directory iodig made carries a dataset marker; a server it did not start has none,
//! so `run` asks the database itself before deciding to load.

use crate::step::async_runtime;
use anyhow::{anyhow, Result};
use iodig_db::{Db, DbFactory, Execution, Record, Status};
use iodig_workload::WorkloadSpec;

/// Keys probed: the first and last of the insert range and three between.
const PROBES: u64 = 5;

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// Every one of the `probed` keys is there.
    Loaded {
        /// Keys read (0 for an empty insert range).
        probed: usize,
    },
    /// None is.
    Empty {
        /// Keys read.
        probed: usize,
    },
    /// Some are: a partial load, or another dataset.
    Partial {
        /// Keys that are there.
        found: usize,
        /// Keys read.
        probed: usize,
        /// The first probed key that is not there, for the message.
        missing: String,
    },
}

/// The key numbers probed for an insert range: spread evenly, first and last included.
fn probe_keynums(insert_start: u64, insert_count: u64) -> Vec<u64> {
    if insert_count == 0 {
        return Vec::new();
    }
    let last = insert_count - 1;
    let mut nums: Vec<u64> = (0..PROBES)
        .map(|i| insert_start + (u128::from(last) * u128::from(i) / u128::from(PROBES - 1)) as u64)
        .collect();
    nums.dedup();
    nums
}

/// Classifies the probe's answers: `found[i]` for the i-th probed key.
fn presence(keys: &[String], found: &[bool]) -> Presence {
    let n = found.iter().filter(|f| **f).count();
    match n {
        0 => Presence::Empty {
            probed: found.len(),
        },
        n if n == found.len() => Presence::Loaded { probed: n },
        n => Presence::Partial {
            found: n,
            probed: found.len(),
            missing: keys
                .iter()
                .zip(found)
                .find(|(_, f)| !**f)
                .map(|(k, _)| k.clone())
                .unwrap_or_default(),
        },
    }
}

/// Reads the probe keys of `spec`'s dataset through one worker of `factory`.
pub fn probe_dataset<F: DbFactory>(factory: &F, spec: &WorkloadSpec) -> Result<Presence> {
    let namer = spec.key_namer();
    let keys: Vec<String> = probe_keynums(spec.insert_start, spec.insert_count)
        .into_iter()
        .map(|n| namer.key(n))
        .collect();
    if keys.is_empty() {
        return Ok(Presence::Loaded { probed: 0 });
    }
    let mut db = factory
        .worker()
        .map_err(|e| anyhow!("cannot open a {} worker to probe the dataset: {e}", F::NAME))?;
    let table = spec.table.clone();
    let probe = async {
        let mut out = Record::counting();
        let mut found = Vec::with_capacity(keys.len());
        for key in &keys {
            match db.read(&table, key, None, &mut out).await {
                s if s.is_ok() => found.push(true),
                Status::NotFound => found.push(false),
                s => {
                    return Err(anyhow!(
                        "probing whether {} holds the dataset: reading key {key} returned {}",
                        F::NAME,
                        s.name()
                    ))
                }
            }
        }
        let _ = db.cleanup().await;
        Ok(found)
    };
    let found = match F::EXECUTION {
        Execution::Tasks => async_runtime()?.block_on(probe)?,
        Execution::Threads => futures_lite::future::block_on(probe)?,
    };
    Ok(presence(&keys, &found))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_span_the_insert_range() {
        assert_eq!(probe_keynums(0, 2000), vec![0, 499, 999, 1499, 1999]);
        assert_eq!(probe_keynums(100, 5), vec![100, 101, 102, 103, 104]);
        assert_eq!(probe_keynums(7, 1), vec![7]);
        assert_eq!(probe_keynums(0, 3), vec![0, 1, 2]);
        assert!(probe_keynums(0, 0).is_empty());
    }

    #[test]
    fn presence_says_which_key_is_missing() {
        let keys: Vec<String> = ["a", "b", "c"].iter().map(ToString::to_string).collect();
        assert_eq!(
            presence(&keys, &[true, true, true]),
            Presence::Loaded { probed: 3 }
        );
        assert_eq!(
            presence(&keys, &[false, false, false]),
            Presence::Empty { probed: 3 }
        );
        assert_eq!(
            presence(&keys, &[true, false, true]),
            Presence::Partial {
                found: 2,
                probed: 3,
                missing: "b".into()
            }
        );
    }
}
