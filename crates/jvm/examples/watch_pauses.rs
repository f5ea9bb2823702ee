//! Watches one JVM's pauses for a while with iodig's probe and prints what it saw as JSON: the
//! pauses, their stop-the-world time, and the probe's own BPF cost from the kernel's statistics
//! (`kernel.bpf_stats_enabled=1` first). For scripts/bench-jvm-probe.sh.
//!
//! Usage: watch_pauses PID SECONDS

use iodig_jvm::PauseProbe;
use std::time::Duration;

/// The probe's programs, by the names pauses.bpf.c gives them.
const PROGRAMS: [&str; 4] = ["safepoint_begin", "safepoint_end", "gc_begin", "gc_end"];

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [pid, secs] = &args[..] else {
        anyhow::bail!("usage: watch_pauses PID SECONDS");
    };
    let pid: u32 = pid.parse()?;
    let secs: f64 = secs.parse()?;
    let probe = PauseProbe::start("bench", pid)
        .map_err(|refused| anyhow::anyhow!("cannot probe {pid}: {}", refused.source))?;
    std::thread::sleep(Duration::from_secs_f64(secs));
    // Read while attached: the programs go with the probe.
    let (mut run_cnt, mut run_time_ns) = (0u64, 0u64);
    for info in libbpf_rs::query::ProgInfoIter::default() {
        if PROGRAMS.contains(&info.name.to_string_lossy().as_ref()) {
            run_cnt += info.run_cnt;
            run_time_ns += info.run_time_ns;
        }
    }
    let doc = probe.stop();
    let safepoints: Vec<_> = doc
        .pauses
        .iter()
        .filter(|p| p.kind == "safepoint")
        .collect();
    let gcs = doc.pauses.iter().filter(|p| p.kind == "gc").count();
    let stopped_us: u64 = safepoints.iter().map(|p| p.duration_us).sum();
    println!(
        "{{\"secs\": {secs}, \"safepoints\": {}, \"gcs\": {gcs}, \"stopped_ms\": {:.1}, \"bpf_run_cnt\": {run_cnt}, \"bpf_run_time_ns\": {run_time_ns}}}",
        safepoints.len(),
        stopped_us as f64 / 1000.0
    );
    Ok(())
}
