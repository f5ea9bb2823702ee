//! The sampling loop: wakes on whole multiples of the interval of the wall clock, turns each pair
//! of readings into a sample, and on stop takes a last partial sample and hands back the document.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use iodig_model::sys::{ProcRestart, ProcSample, ProcState, SysDoc, SysSample};

use crate::delta;
use crate::read::{self, ProcGone, SysCounters, Tracked};

/// A final sample shorter than this is dropped: it spans less than one CPU tick at the usual
/// 100 Hz, so its percentages would be 0 or 100 and its rates noise.
pub const MIN_FINAL_SECS: f64 = 0.010;

/// The first multiple of `interval_ms` (counted from the Unix epoch) that is at least `gap_ms`
/// after `now_ms`. Multiples of the epoch make every 1 s sampler in every process wake on the
/// same whole seconds, so series join exactly.
pub fn next_boundary(now_ms: u64, interval_ms: u64, gap_ms: u64) -> u64 {
    let interval_ms = interval_ms.max(1);
    (now_ms + gap_ms).div_ceil(interval_ms) * interval_ms
}

/// Everything the loop carries between samples.
pub struct State {
    pub doc: SysDoc,
    pub per_cpu: bool,
    pub follow_restarts: bool,
    pub prev: SysCounters,
    pub procs: Vec<Tracked>,
    /// Each sample as it is taken, for a live view; a receiver gone stops only the sending.
    pub live: Option<Sender<SysSample>>,
    /// Per pid, a probe's running total of the JVM's stop-the-world µs and the total at the
    /// last sample.
    pub pauses: HashMap<u32, (Arc<AtomicU64>, u64)>,
}

impl State {
    fn note(&mut self, msg: String) {
        if !self.doc.notes.contains(&msg) {
            self.doc.notes.push(msg);
        }
    }

    /// Reads /proc and appends the sample for the interval since the previous reading. `last`
    /// marks the stop-time partial sample.
    pub fn sample(&mut self, last: bool) {
        let cur = match read::read_sys(self.per_cpu) {
            Ok(c) => c,
            Err(e) => {
                // The next good reading covers the gap; its `secs` shows how long it was.
                self.note(format!("sample skipped: {e:#}"));
                return;
            }
        };
        let secs = cur
            .mono
            .saturating_duration_since(self.prev.mono)
            .as_secs_f64();
        if last && secs < MIN_FINAL_SECS {
            return;
        }
        let hz = self.doc.host.clock_ticks_per_s;
        let mut procs = Vec::with_capacity(self.procs.len());
        for (t, info) in self.procs.iter_mut().zip(self.doc.processes.iter_mut()) {
            let (state, stats) = match t.read() {
                Ok(c) => {
                    let prev = t.last.replace(c).unwrap_or(c);
                    let mut stats = delta::proc_stats(&prev, &c, secs, hz);
                    let delays = read::read_run_delays(t.pid);
                    stats.run_queue = match (&t.last_run_delays, &delays) {
                        (Some(a), Some(b)) => Some(delta::run_queue_wait(a, b)),
                        _ => None,
                    };
                    t.last_run_delays = delays;
                    if let Some((total, seen)) = self.pauses.get_mut(&t.pid) {
                        let now = total.load(Ordering::Relaxed);
                        stats.jvm_pause_ms = Some(now.saturating_sub(*seen) as f64 / 1000.0);
                        *seen = now;
                    }
                    (ProcState::Running, Some(stats))
                }
                Err(ProcGone::Exited) => {
                    if info.state == ProcState::Running {
                        info.state = ProcState::Exited;
                        info.exited_unix_ms.get_or_insert(cur.unix_ms);
                    }
                    match self.follow_restarts.then(|| restarted(t)).flatten() {
                        // Its counters start from the new process's own: this interval has
                        // none (the old process's last ones and the new one's first do not
                        // make a difference).
                        Some(again) => {
                            *t = again;
                            info.state = ProcState::Running;
                            info.restarts.push(ProcRestart {
                                unix_ms: cur.unix_ms,
                                pid: t.pid,
                            });
                            (ProcState::Running, None)
                        }
                        None => (ProcState::Exited, None),
                    }
                }
                Err(ProcGone::Missing) => (ProcState::Missing, None),
            };
            procs.push(ProcSample {
                label: t.label.clone(),
                pid: t.pid,
                state,
                stats,
            });
        }
        self.doc.samples.push(SysSample {
            unix_ms: cur.unix_ms,
            secs,
            cpu: delta::cpu_pct(&self.prev.cpu, &cur.cpu),
            per_cpu: delta::per_cpu_pct(&self.prev.per_cpu, &cur.per_cpu),
            // Summarised when written (`iodig_model::series`), where the CPU count is known.
            cpu_spread: None,
            mem: cur.mem,
            net: delta::net_rates(&self.prev.net, &cur.net, secs),
            procs,
            pressure: match (&self.prev.pressure, &cur.pressure) {
                (Some(a), Some(b)) => Some(delta::pressure(a, b)),
                _ => None,
            },
        });
        if let Some(live) = &self.live {
            if let Some(s) = self.doc.samples.last() {
                if live.send(s.clone()).is_err() {
                    self.live = None;
                }
            }
        }
        if self.per_cpu && self.prev.per_cpu.len() != cur.per_cpu.len() {
            self.note("per-CPU figures left out where the set of online CPUs changed".into());
        }
        self.doc.ended_unix_ms = cur.unix_ms;
        self.prev = cur;
    }
}

/// The program `t` was, opened under the pid it runs as now, when it runs again.
fn restarted(t: &Tracked) -> Option<Tracked> {
    let pid = read::find_by_command_line(&t.cmdline, t.pid)?;
    let (again, _) = Tracked::open(t.label.clone(), pid);
    // Found, then gone before it could be opened: looked for again at the next sample.
    (again.is_open() && again.cmdline == t.cmdline).then_some(again)
}

fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Runs until a message arrives or the sender is dropped, then takes the final sample.
pub fn run(mut st: State, interval: Duration, stop: Receiver<()>) -> SysDoc {
    let iv = (interval.as_millis() as u64).max(1);
    // At least half an interval before the first boundary: a first sample of a few ms would be
    // all rounding error in tick counts.
    let mut boundary = next_boundary(read::unix_ms_now(), iv, iv / 2);
    loop {
        let now = since_epoch();
        let target = Duration::from_millis(boundary);
        if now < target {
            let wait = target - now;
            if wait > interval * 2 {
                // The wall clock stepped back: re-anchor rather than sleep through the gap.
                boundary = next_boundary(read::unix_ms_now(), iv, iv / 2);
                continue;
            }
            match stop.recv_timeout(wait) {
                // The timeout runs on the monotonic clock, which may drift from the wall clock
                // by NTP slewing; go round and re-check the wall clock before sampling.
                Err(RecvTimeoutError::Timeout) => continue,
                Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        st.sample(false);
        boundary += iv;
        let now_ms = read::unix_ms_now();
        if boundary <= now_ms {
            // Reading /proc overran the interval (or the clock stepped forward): skip to the next
            // boundary instead of firing a burst of catch-up samples; `secs` shows the longer gap.
            boundary = next_boundary(now_ms, iv, 1);
        }
    }
    st.sample(true);
    st.doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_is_next_whole_interval_after_the_gap() {
        assert_eq!(next_boundary(10_200, 1000, 500), 11_000);
        // 10_600 + 500 passes 11_000: the first sample would be too short, take the one after.
        assert_eq!(next_boundary(10_600, 1000, 500), 12_000);
        assert_eq!(next_boundary(10_000, 1000, 0), 10_000);
        assert_eq!(next_boundary(10_001, 1000, 1), 11_000);
        assert_eq!(next_boundary(10_001, 250, 1), 10_250);
    }
}
