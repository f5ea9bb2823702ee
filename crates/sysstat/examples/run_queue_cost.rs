//! What reading a process's run-queue wait costs the sampler: `run_queue_cost PID [READINGS]`
//! reads every thread's schedstat of PID that many times (the sampler does it once a second)
//! and prints the CPU each reading took, for scripts/bench-runqueue.sh.

fn cpu_ns() -> u128 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the rusage it is given; the zeroed value is a valid rusage.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let ns = |t: libc::timeval| t.tv_sec as u128 * 1_000_000_000 + t.tv_usec as u128 * 1000;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let pid: u32 = args
        .next()
        .and_then(|p| p.parse().ok())
        .expect("usage: run_queue_cost PID [READINGS]");
    let readings: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let first = iodig_sysstat::read_run_delays(pid).expect("the process's schedstat is readable");
    let start = cpu_ns();
    let mut threads = 0;
    for _ in 0..readings {
        threads = iodig_sysstat::read_run_delays(pid).map_or(0, |d| d.len());
    }
    let per = (cpu_ns() - start) / u128::from(readings.max(1));
    println!(
        "{{\"threads\": {threads}, \"first_threads\": {}, \"readings\": {readings}, \"cpu_ns_per_reading\": {per}}}",
        first.len()
    );
}
