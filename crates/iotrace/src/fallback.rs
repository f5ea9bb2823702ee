//! The diskstats fallback: a thread sampling /proc/diskstats at every slot boundary of the
//! unix clock, so per-second figures line up with eBPF mode and with the other samplers.

use crate::devices::Disk;
use crate::diskstats::{self, Stat};
use crate::live::DiskstatsLive;
use std::collections::HashMap;
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
