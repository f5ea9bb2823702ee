//! Turns two readings of cumulative counters into the percentages and per-second rates of the
//! interval between them. Pure functions, so the arithmetic is tested on fixed inputs.

use std::collections::HashMap;

use iodig_model::sys::{CpuPct, NetRates, NetSample, Pressure, ProcIo, ProcStats, RunQueueWait};

use crate::read::{CpuTicks, NetCounters, PressureTotals, ProcCounters};

/// Rounds to 0.001: finer digits are below what tick and byte counters can resolve, and
/// numbers this short read back from JSON bit for bit (serde_json's fast exact path).
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The interface that carries a local database's client traffic, kept apart from the rest.
pub const LOOPBACK: &str = "lo";

/// CPU shares of the interval, as mpstat computes them: each state's tick delta over the sum of
/// all deltas. Dividing by the ticks actually counted, rather than by interval × HZ × CPUs, keeps
/// the shares summing to 100 even when the interval is not an exact number of ticks.
pub fn cpu_pct(prev: &CpuTicks, cur: &CpuTicks) -> CpuPct {
    // saturating: the kernel documents that iowait can go backwards on a CPU.
    let d = |a: u64, b: u64| b.saturating_sub(a) as f64;
    let parts = [
        d(prev.user, cur.user),
        d(prev.nice, cur.nice),
        d(prev.system, cur.system),
        d(prev.iowait, cur.iowait),
        d(prev.irq, cur.irq),
        d(prev.softirq, cur.softirq),
        d(prev.steal, cur.steal),
        d(prev.idle, cur.idle),
    ];
    let total: f64 = parts.iter().sum();
    if total == 0.0 {
        // No tick elapsed (an interval shorter than 1/HZ): nothing is known, say nothing.
        return CpuPct::default();
    }
    let p = |x: f64| round3(x * 100.0 / total);
    CpuPct {
        user: p(parts[0]),
        nice: p(parts[1]),
        system: p(parts[2]),
        iowait: p(parts[3]),
        irq: p(parts[4]),
        softirq: p(parts[5]),
        steal: p(parts[6]),
        idle: p(parts[7]),
    }
}

/// Stall time of the interval per resource, in ms (rounded to 0.001); a total that went
/// backwards (it cannot, but a counter read across a PSI reset would) counts as 0.
pub fn pressure(prev: &PressureTotals, cur: &PressureTotals) -> Pressure {
    let ms = |a: u64, b: u64| round3(b.saturating_sub(a) as f64 / 1000.0);
    Pressure {
        cpu_some_ms: ms(prev.cpu_some_us, cur.cpu_some_us),
        io_some_ms: ms(prev.io_some_us, cur.io_some_us),
        io_full_ms: ms(prev.io_full_us, cur.io_full_us),
        memory_some_ms: ms(prev.memory_some_us, cur.memory_some_us),
    }
}

/// A process's run-queue wait over the interval from its threads' run delays (ns) at both
/// ends. A thread new since the last reading was born inside the interval, so all of its run
/// delay belongs to it; a thread gone by now is not counted (its last wait is lost with it).
pub fn run_queue_wait(prev: &HashMap<u32, u64>, cur: &HashMap<u32, u64>) -> RunQueueWait {
    let mut out = RunQueueWait::default();
    for (tid, now) in cur {
        let waited = now.saturating_sub(prev.get(tid).copied().unwrap_or(0));
        if waited > 0 {
            let ms = waited as f64 / 1e6;
            out.wait_ms += ms;
            out.max_thread_ms = out.max_thread_ms.max(ms);
            out.threads_waiting += 1;
        }
    }
    out.wait_ms = round3(out.wait_ms);
    out.max_thread_ms = round3(out.max_thread_ms);
    out
}

/// Per-CPU shares; empty when the CPU set changed (hotplug), since positions would then pair
/// different CPUs.
pub fn per_cpu_pct(prev: &[CpuTicks], cur: &[CpuTicks]) -> Vec<CpuPct> {
    if prev.len() != cur.len() {
        return Vec::new();
    }
    prev.iter().zip(cur).map(|(a, b)| cpu_pct(a, b)).collect()
}

fn add_rates(acc: &mut NetRates, prev: &NetCounters, cur: &NetCounters, secs: f64) {
    let r = |a: u64, b: u64| b.saturating_sub(a) as f64 / secs;
    acc.rx_bytes_per_s += r(prev.rx_bytes, cur.rx_bytes);
    acc.tx_bytes_per_s += r(prev.tx_bytes, cur.tx_bytes);
    acc.rx_packets_per_s += r(prev.rx_packets, cur.rx_packets);
    acc.tx_packets_per_s += r(prev.tx_packets, cur.tx_packets);
}

/// Network rates: loopback alone, every other interface summed. Interfaces that appear or vanish
/// during the interval (containers starting) are left out of it, since they have no baseline;
/// a counter that went backwards (driver reset) counts as zero rather than as 2^64 bytes.
pub fn net_rates(
    prev: &HashMap<String, NetCounters>,
    cur: &HashMap<String, NetCounters>,
    secs: f64,
) -> NetSample {
    let mut out = NetSample::default();
    if secs <= 0.0 {
        return out;
    }
    for (name, c) in cur {
        let Some(p) = prev.get(name) else { continue };
        let acc = if name == LOOPBACK {
            &mut out.lo
        } else {
            &mut out.ext
        };
        add_rates(acc, p, c, secs);
    }
    for r in [&mut out.ext, &mut out.lo] {
        for v in [
            &mut r.rx_bytes_per_s,
            &mut r.tx_bytes_per_s,
            &mut r.rx_packets_per_s,
            &mut r.tx_packets_per_s,
        ] {
            *v = round3(*v);
        }
    }
    out
}

/// A process's figures over the interval. CPU is in percent of one CPU, from ticks of `hz`.
pub fn proc_stats(prev: &ProcCounters, cur: &ProcCounters, secs: f64, hz: u64) -> ProcStats {
    let (secs, hz) = (secs.max(f64::MIN_POSITIVE), hz.max(1) as f64);
    let pct = |a: u64, b: u64| round3(b.saturating_sub(a) as f64 / hz / secs * 100.0);
    let rate = |a: u64, b: u64| round3(b.saturating_sub(a) as f64 / secs);
    ProcStats {
        cpu_user_pct: pct(prev.utime, cur.utime),
        cpu_system_pct: pct(prev.stime, cur.stime),
        rss_bytes: cur.rss_bytes,
        threads: cur.threads,
        io: match (prev.io, cur.io) {
            (Some(a), Some(b)) => Some(ProcIo {
                read_bytes_per_s: rate(a.read_bytes, b.read_bytes),
                write_bytes_per_s: rate(a.write_bytes, b.write_bytes),
                rchar_per_s: rate(a.rchar, b.rchar),
                wchar_per_s: rate(a.wchar, b.wchar),
            }),
            _ => None,
        },
        // Read from the threads' own files by the sampler, beside these counters.
        run_queue: None,
        jvm_pause_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::IoCounters;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn cpu_shares_are_deltas_over_total_ticks() {
        let prev = CpuTicks {
            user: 1000,
            system: 500,
            idle: 9000,
            iowait: 100,
            ..Default::default()
        };
        // +60 user, +20 system, +10 iowait, +5 softirq, +5 steal, +100 idle = 200 ticks
        let cur = CpuTicks {
            user: 1060,
            system: 520,
            idle: 9100,
            iowait: 110,
            softirq: 5,
            steal: 5,
            ..Default::default()
        };
        let p = cpu_pct(&prev, &cur);
        assert!(close(p.user, 30.0), "{p:?}");
        assert!(close(p.system, 10.0));
        assert!(close(p.iowait, 5.0));
        assert!(close(p.softirq, 2.5));
        assert!(close(p.steal, 2.5));
        assert!(close(p.idle, 50.0));
        assert!(close(p.nice + p.irq, 0.0));
        let sum = p.user + p.nice + p.system + p.iowait + p.irq + p.softirq + p.steal + p.idle;
        assert!(close(sum, 100.0));
        assert!(close(p.busy(), 45.0));
    }

    #[test]
    fn shares_are_rounded_to_a_thousandth() {
        // 1 of 3 ticks: 33.333… must come out as 33.333 so it reads back from JSON exactly.
        let prev = CpuTicks::default();
        let cur = CpuTicks {
            user: 1,
            idle: 2,
            ..Default::default()
        };
        let p = cpu_pct(&prev, &cur);
        assert_eq!(p.user, 33.333);
        assert_eq!(p.idle, 66.667);
        let back: f64 = serde_json::from_str(&serde_json::to_string(&p.idle).unwrap()).unwrap();
        assert_eq!(back, p.idle);
    }

    #[test]
    fn cpu_iowait_going_backwards_does_not_wrap() {
        let prev = CpuTicks {
            user: 10,
            idle: 10,
            iowait: 50,
            ..Default::default()
        };
        let cur = CpuTicks {
            user: 20,
            idle: 20,
            iowait: 40,
            ..Default::default()
        };
        let p = cpu_pct(&prev, &cur);
        assert!(close(p.iowait, 0.0));
        assert!(close(p.user, 50.0) && close(p.idle, 50.0), "{p:?}");
    }

    #[test]
    fn cpu_without_elapsed_ticks_is_all_zero_not_nan() {
        let t = CpuTicks {
            user: 5,
            idle: 5,
            ..Default::default()
        };
        let p = cpu_pct(&t, &t);
        assert_eq!(p, CpuPct::default());
    }

    #[test]
    fn per_cpu_pairs_by_position_and_drops_on_hotplug() {
        let a = vec![CpuTicks::default(); 2];
        let b = vec![
            CpuTicks {
                user: 100,
                ..Default::default()
            },
            CpuTicks {
                idle: 100,
                ..Default::default()
            },
        ];
        let p = per_cpu_pct(&a, &b);
        assert_eq!(p.len(), 2);
        assert!(close(p[0].user, 100.0) && close(p[1].idle, 100.0));
        assert!(per_cpu_pct(&a[..1], &b).is_empty());
    }

    fn net(entries: &[(&str, u64, u64)]) -> HashMap<String, NetCounters> {
        entries
            .iter()
            .map(|&(n, bytes, pkts)| {
                let c = NetCounters {
                    rx_bytes: bytes,
                    tx_bytes: bytes * 2,
                    rx_packets: pkts,
                    tx_packets: pkts * 2,
                };
                (n.to_string(), c)
            })
            .collect()
    }

    #[test]
    fn net_sums_external_interfaces_and_keeps_loopback_apart() {
        let prev = net(&[
            ("lo", 1000, 10),
            ("eth0", 0, 0),
            ("eth1", 500, 5),
            ("gone0", 7, 7),
        ]);
        let cur = net(&[
            ("lo", 3000, 30),
            ("eth0", 1000, 4),
            ("eth1", 1500, 9),
            ("new0", 9999, 99),
        ]);
        let r = net_rates(&prev, &cur, 2.0);
        assert!(close(r.lo.rx_bytes_per_s, 1000.0));
        assert!(close(r.lo.tx_bytes_per_s, 2000.0));
        assert!(close(r.lo.rx_packets_per_s, 10.0));
        // eth0 +1000, eth1 +1000 over 2 s; new0 has no baseline and is left out.
        assert!(close(r.ext.rx_bytes_per_s, 1000.0), "{r:?}");
        assert!(close(r.ext.tx_bytes_per_s, 2000.0));
        assert!(close(r.ext.rx_packets_per_s, 4.0));
        assert!(close(r.ext.tx_packets_per_s, 8.0));
    }

    #[test]
    fn net_counter_reset_counts_as_zero() {
        let prev = net(&[("eth0", 1 << 40, 1 << 20)]);
        let cur = net(&[("eth0", 10, 1)]);
        let r = net_rates(&prev, &cur, 1.0);
        assert_eq!(r.ext, NetRates::default());
    }

    #[test]
    fn proc_cpu_is_percent_of_one_cpu_and_io_is_per_second() {
        let prev = ProcCounters {
            utime: 100,
            stime: 50,
            rss_bytes: 1,
            threads: 1,
            io: Some(IoCounters {
                read_bytes: 0,
                write_bytes: 4096,
                rchar: 10,
                wchar: 20,
            }),
        };
        // 150 user ticks and 25 system ticks at 100 Hz over 0.5 s: 1.5 CPU-s and 0.25 CPU-s.
        let cur = ProcCounters {
            utime: 250,
            stime: 75,
            rss_bytes: 8 << 20,
            threads: 12,
            io: Some(IoCounters {
                read_bytes: 1 << 20,
                write_bytes: 4096 * 3,
                rchar: 110,
                wchar: 20,
            }),
        };
        let s = proc_stats(&prev, &cur, 0.5, 100);
        assert!(close(s.cpu_user_pct, 300.0), "{s:?}");
        assert!(close(s.cpu_system_pct, 50.0));
        assert!(close(s.cpu_pct(), 350.0));
        assert_eq!(s.rss_bytes, 8 << 20);
        assert_eq!(s.threads, 12);
        let io = s.io.expect("io on both ends");
        assert!(close(io.read_bytes_per_s, 2.0 * f64::from(1 << 20)));
        assert!(close(io.write_bytes_per_s, 4096.0 * 4.0));
        assert!(close(io.rchar_per_s, 200.0));
        assert!(close(io.wchar_per_s, 0.0));
    }

    #[test]
    fn proc_io_absent_when_either_end_is_unreadable() {
        let a = ProcCounters {
            io: None,
            ..Default::default()
        };
        let b = ProcCounters {
            io: Some(IoCounters::default()),
            ..Default::default()
        };
        assert!(proc_stats(&a, &b, 1.0, 100).io.is_none());
        assert!(proc_stats(&b, &a, 1.0, 100).io.is_none());
    }

    #[test]
    fn run_queue_wait_sums_each_threads_growth_and_counts_new_threads_whole() {
        let prev: HashMap<u32, u64> = [(1, 5_000_000), (2, 1_000_000), (3, 9_000_000)].into();
        // Thread 1 waited 30 ms more, 2 not at all, 3 exited, 4 was born and waited 2.5 ms.
        let cur: HashMap<u32, u64> = [(1, 35_000_000), (2, 1_000_000), (4, 2_500_000)].into();
        let w = run_queue_wait(&prev, &cur);
        assert!(close(w.wait_ms, 32.5), "{w:?}");
        assert!(close(w.max_thread_ms, 30.0), "{w:?}");
        assert_eq!(w.threads_waiting, 2);
        // A reused thread id whose count is lower than the old thread's does not wrap.
        let reused: HashMap<u32, u64> = [(1, 10)].into();
        assert_eq!(run_queue_wait(&prev, &reused).wait_ms, 0.0);
    }

    #[test]
    fn pressure_is_the_stall_time_of_the_interval_in_ms() {
        let a = PressureTotals {
            cpu_some_us: 1_000,
            io_some_us: 10_000,
            io_full_us: 4_000,
            memory_some_us: 7,
        };
        let b = PressureTotals {
            cpu_some_us: 251_000,
            io_some_us: 10_500,
            io_full_us: 4_000,
            memory_some_us: 5,
        };
        let p = pressure(&a, &b);
        assert!(
            close(p.cpu_some_ms, 250.0) && close(p.io_some_ms, 0.5),
            "{p:?}"
        );
        assert!(
            close(p.io_full_ms, 0.0) && close(p.memory_some_ms, 0.0),
            "{p:?}"
        );
    }
}
