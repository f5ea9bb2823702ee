//! The diskstats fallback: a thread sampling /proc/diskstats at every slot boundary of the
//! unix clock, so per-second figures line up with eBPF mode and with the other samplers.

use crate::devices::Disk;
use crate::diskstats::{self, Stat};
use crate::live::{active, send, LiveFeed};
use crate::series;
use iodig_model::trace::{LiveDevice, LiveSecond};
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

pub type Samples = Vec<(u64, HashMap<String, Stat>)>;

pub struct Sampler {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<Samples>>,
}

impl Sampler {
    pub fn start(disks: Vec<Disk>, slot_ns: u64, mut live: Option<DiskstatsLive>) -> Sampler {
        let (tx, rx) = mpsc::channel::<()>();
        let first = (crate::ebpf::unix_now_ns(), diskstats::read(&disks));
        let handle = std::thread::Builder::new()
            .name("iodig-diskstats".into())
            .spawn(move || {
                let mut samples = vec![first];
                loop {
                    let now = crate::ebpf::unix_now_ns();
                    let wait = slot_ns - now % slot_ns;
                    match rx.recv_timeout(Duration::from_nanos(wait)) {
                        Err(RecvTimeoutError::Timeout) => {
                            samples.push((crate::ebpf::unix_now_ns(), diskstats::read(&disks)));
                            if let Some(l) = &mut live {
                                l.send_complete(&samples, false);
                            }
                        }
                        _ => break,
                    }
                }
                samples.push((crate::ebpf::unix_now_ns(), diskstats::read(&disks)));
                if let Some(l) = &mut live {
                    l.send_complete(&samples, true);
                }
                samples
            })
            .ok();
        Sampler {
            stop: Some(tx),
            handle,
        }
    }

    pub fn stop(mut self) -> Samples {
        self.stop.take();
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

const NS: u64 = 1_000_000_000;

/// The feed of a diskstats session: each second once a sample past its end exists.
pub(crate) struct DiskstatsLive {
    feed: Option<LiveFeed>,
    names: Vec<String>,
    only_active: bool,
    next_sec: Option<u64>,
}

impl DiskstatsLive {
    pub(crate) fn new(feed: LiveFeed, disks: &[Disk], only_active: bool) -> Self {
        DiskstatsLive {
            feed: Some(feed),
            names: disks.iter().map(|d| d.name.clone()).collect(),
            only_active,
            next_sec: None,
        }
    }

    /// Sends the seconds the samples now close; `last` is true at the end of the window (its
    /// last second is then as whole as it will get).
    pub(crate) fn send_complete(&mut self, samples: &[(u64, HashMap<String, Stat>)], last: bool) {
        let (Some(first), Some(newest)) = (samples.first(), samples.last()) else {
            return;
        };
        let mut sec = self.next_sec.unwrap_or(first.0 / NS);
        while self.feed.is_some() && (newest.0 >= (sec + 1) * NS || (last && newest.0 > sec * NS)) {
            // The pairs whose first sample falls in the second: from the first such sample
            // through the one after the last.
            let from = samples.partition_point(|s| s.0 < sec * NS);
            let to = (samples.partition_point(|s| s.0 < (sec + 1) * NS) + 1).min(samples.len());
            let window = &samples[from.min(to)..to];
            let devices = self
                .names
                .iter()
                .filter_map(|name| {
                    let per: Vec<(u64, Stat)> = window
                        .iter()
                        .filter_map(|(t, m)| m.get(name).map(|s| (*t, *s)))
                        .collect();
                    let second = series::from_diskstats(&per)
                        .into_iter()
                        .find(|s| s.unix_ms == sec * 1000)?;
                    (!self.only_active || active(&second)).then(|| LiveDevice {
                        name: name.clone(),
                        second,
                        classes: BTreeMap::new(),
                    })
                })
                .collect();
            // No histograms in diskstats mode, so none so far either.
            let second = LiveSecond {
                unix_ms: sec * 1000,
                devices,
                so_far: None,
            };
            send(&mut self.feed, second);
            sec += 1;
        }
        self.next_sec = Some(sec);
    }
}
