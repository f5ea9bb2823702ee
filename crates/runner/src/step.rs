//! One step: N workers run a phase of the workload against a binding, each recording into its
//! own recorder, while one collector swaps the recordings out every second and merges them into
//! per-second samples, whole-step histograms and the HDR interval logs.

use crate::pacer::{Pacer, ThreadPacer, TokioPacer};
use crate::progress::Progress;
use crate::timed::Timed;
use anyhow::{anyhow, Context, Result};
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use iodig_db::{Db, DbFactory, Execution};
use iodig_model::Sample;
use iodig_stats::{series_name, IntervalMode, Recording, SeriesSet, WorkerRecorder};
use iodig_workload::{ops_for_thread, CoreWorkload, Worker};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Which phase a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// YCSB's load: insert the dataset (`iodig load`, or before `iodig run` when needed).
    Load,
    /// YCSB's transactions: the workload's operation mix.
    Run,
}

impl Phase {
    /// `load` or `run`, as run.json's steps and the progress lines name it.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Load => "load",
            Phase::Run => "run",
        }
    }
}

/// What one step does.
#[derive(Debug, Clone)]
pub struct StepPlan {
    /// Load (inserts) or run (the operation mix).
    pub phase: Phase,
    /// Workers (YCSB threads): OS threads or async tasks, as the binding runs.
    pub threads: u64,
    /// Whole-client target rate (YCSB's `-target`).
    pub target_ops_per_sec: Option<f64>,
    /// Total operations over all workers; 0 = until the time limit.
    pub operation_count: u64,
    /// Measured duration limit (YCSB's `maxexecutiontime`).
    pub max_execution: Option<Duration>,
    /// Unmeasured time before the window: operations whose intended start falls in it are
    /// neither counted nor logged, and do not use up `operation_count`.
    pub warmup: Duration,
    /// How latency is recorded: service time (`op`), time from the intended start
    /// (`intended`), or both, the latter as `Intended-<OP>` (YCSB's `measurement.interval`).
    pub interval_mode: IntervalMode,
    /// End the step when every operation of this many whole seconds in a row failed (the
    /// database became unusable); `None` never does.
    pub unusable_after: Option<u64>,
}

/// Called by the collector at the edges of the measured window.
pub trait StepObserver {
    /// Warm-up is over: start tracers and samplers now, on the measured window's clock.
    fn measurement_started(&mut self) {}
}

impl StepObserver for () {}

/// What a step measured.
pub struct StepResult {
    /// Start of the measured window (after warm-up), Unix ms.
    pub started_unix_ms: u64,
    /// Length of the measured window, up to the last worker's end.
    pub runtime: Duration,
    /// Operations measured (started after warm-up), over all workers.
    pub operations: u64,
    /// Whole-step histograms and return codes per series (`histograms.json`, the summary).
    pub totals: SeriesSet,
    /// One sample per wall-clock second of the window (`timeseries.json`).
    pub samples: Vec<Sample>,
    /// HDR interval log (one tagged histogram per series per second).
    pub hlog: Vec<u8>,
    /// The same, by the unix second each operation started in.
    pub start_hlog: Vec<u8>,
    /// Ctrl-C, SIGTERM or a worker failure ended the step early.
    pub interrupted: bool,
    /// First worker failure, if any.
    pub error: Option<String>,
    /// Why the step ended before its time because the database became unusable.
    pub ended_early: Option<String>,
    /// CPU time this process used in the measured window (workers, driver, collector, samplers).
    pub client_cpu: Duration,
}

/// User plus system CPU time of this whole process so far.
pub fn process_cpu() -> Duration {
    // SAFETY: rusage is a plain C struct for which all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own; RUSAGE_SELF is always valid.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// When measurement starts: the end of the warm-up, on both clocks from one reading.
#[derive(Debug, Clone, Copy)]
struct Start {
    /// Operations whose intended start is before this are warm-up.
    measure_from: Instant,
    /// The same instant on the wall clock: workers place operations in the unix seconds they
    /// started in from it, and the collector's window starts there.
    measure_from_wall: SystemTime,
    /// The end of the collector's first interval: the first whole wall-clock second at least
    /// half a second after `measure_from`; the others follow a second apart. Workers place
    /// each operation in the interval its end falls in.
    first_boundary: Instant,
}

/// State shared by the workers and the collector.
struct Shared {
    recorders: Vec<Arc<WorkerRecorder>>,
    /// Workers initialised and waiting for the start.
    ready: AtomicUsize,
    /// The start, sent by the collector once every worker is ready. Workers wait for it
    /// without spinning: 1024 threads started one by one while the first ones already ran
    /// operations took the spawning thread 15 s of a 3 s step on two cores.
    start: tokio::sync::watch::Sender<Option<Start>>,
    finished: AtomicUsize,
    /// Set by the collector at the time limit, or on interruption.
    halt: AtomicBool,
    error: Mutex<Option<String>>,
}

impl Shared {
    /// Lets the workers go, measuring from `warmup` from now; a second call changes nothing.
    fn open_gate(&self, warmup: Duration) -> Start {
        let mut opened = None;
        self.start.send_if_modified(|s| {
            let start = *s.get_or_insert_with(|| {
                let measure_from = Instant::now() + warmup;
                let measure_from_wall = SystemTime::now() + warmup;
                Start {
                    measure_from,
                    measure_from_wall,
                    first_boundary: measure_from
                        + to_second_boundary(measure_from_wall, Duration::from_millis(500)),
                }
            });
            opened = Some(start);
            true
        });
        opened.expect("send_if_modified runs its closure")
    }

    fn fail(&self, msg: String) {
        let mut e = self
            .error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        e.get_or_insert(msg);
        self.halt.store(true, Ordering::Release);
    }
}

/// Everything a worker needs, owned so it can move into a thread or a task.
struct WorkerJob<D: Db> {
    index: usize,
    db: D,
    worker: Worker,
    phase: Phase,
    /// Measured operations this worker does; `None`: until the step ends. Warm-up operations
    /// are extra, so a warm-up never eats the operation count.
    op_limit: Option<u64>,
    /// Interval between this worker's scheduled starts under a target rate.
    tick: Option<Duration>,
    shared: Arc<Shared>,
}

impl<D: Db> WorkerJob<D> {
    async fn run<P: Pacer>(self, pacer: P) {
        let WorkerJob {
            index,
            mut db,
            mut worker,
            phase,
            op_limit,
            tick,
            shared,
        } = self;
        if let Err(e) = db.init().await {
            shared.fail(format!("worker {index}: init failed: {e}"));
            shared.finished.fetch_add(1, Ordering::AcqRel);
            return;
        }
        let mut gate = shared.start.subscribe();
        shared.ready.fetch_add(1, Ordering::AcqRel);
        // The sender lives in `shared`, which this worker holds: the wait ends with a start.
        let Ok(start) = gate
            .wait_for(Option::is_some)
            .await
            .map(|s| s.expect("is_some"))
        else {
            shared.finished.fetch_add(1, Ordering::AcqRel);
            return;
        };
        let measure_from = start.measure_from;
        let mut timed = Timed::new(
            db,
            Arc::clone(&shared.recorders[index]),
            measure_from,
            unix_ms(start.measure_from_wall),
            start.first_boundary,
            pacer,
        );
        // YCSB spreads slow per-thread schedules with a random first delay below one tick.
        if let Some(t) = tick.filter(|t| *t >= Duration::from_millis(1)) {
            let frac = (index as f64 * 0.618_033_988_75).fract();
            timed
                .pacer
                .sleep_until(Instant::now() + t.mul_f64(frac))
                .await;
        }
        let start = Instant::now();
        let mut issued: u64 = 0;
        let mut measured: u64 = 0;
        while op_limit.is_none_or(|n| measured < n) && !shared.halt.load(Ordering::Relaxed) {
            if let Some(t) = tick {
                let deadline = start + t.mul_f64(issued as f64);
                timed.pacer.sleep_until(deadline).await;
                timed.intended_start = deadline;
            } else {
                timed.intended_start = Instant::now();
            }
            let op_start = timed.intended_start;
            match phase {
                Phase::Load => {
                    worker.do_insert(&mut timed).await;
                }
                Phase::Run => {
                    if let Err(e) = worker.do_transaction(&mut timed).await {
                        shared.fail(e.to_string());
                        break;
                    }
                }
            }
            issued += 1;
            if op_start >= measure_from {
                measured += 1;
                timed.count_operation();
            }
        }
        if let Err(e) = timed.cleanup().await {
            shared.fail(format!("worker {index}: cleanup failed: {e}"));
        }
        shared.finished.fetch_add(1, Ordering::AcqRel);
    }
}

/// Threads of the async runtime; 0 = the default (cores, at most 4).
static IO_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets the async runtime's thread count (`--io-threads`); call before the first step.
pub fn set_io_threads(n: usize) {
    IO_THREADS.store(n, Ordering::Relaxed);
}

/// The process's one async runtime for network bindings: the driver's connections and the
/// workers' tasks share its threads, so a request does not hop between runtimes.
pub fn async_runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let cores = std::thread::available_parallelism()
        .map(std::num::NonZero::get)
        .unwrap_or(2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(match IO_THREADS.load(Ordering::Relaxed) {
            0 => cores.clamp(1, 4),
            n => n,
        })
        .thread_name("iodig-io")
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// Milliseconds since the Unix epoch; 0 for a time before it.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Runs one step to its end (op count, time limit, `stop`, or a worker failure).
pub fn run_step<F: DbFactory>(
    factory: &F,
    workload: &Arc<CoreWorkload>,
    plan: &StepPlan,
    stop: &AtomicBool,
    progress: &mut Progress,
    observer: &mut dyn StepObserver,
) -> Result<StepResult> {
    if plan.threads == 0 {
        return Err(anyhow!("--threads must be at least 1"));
    }
    let threads = plan.threads as usize;
    let shared = Arc::new(Shared {
        recorders: (0..threads)
            .map(|_| Arc::new(WorkerRecorder::new(plan.interval_mode)))
            .collect(),
        ready: AtomicUsize::new(0),
        start: tokio::sync::watch::Sender::new(None),
        finished: AtomicUsize::new(0),
        halt: AtomicBool::new(false),
        error: Mutex::new(None),
    });
    let tick = plan
        .target_ops_per_sec
        .filter(|t| *t > 0.0)
        .map(|t| Duration::from_secs_f64(plan.threads as f64 / t));
    let mut jobs = Vec::with_capacity(threads);
    for index in 0..threads {
        let db = factory
            .worker()
            .with_context(|| format!("binding {}: cannot create worker {index}", F::NAME))?;
        jobs.push(WorkerJob {
            index,
            db,
            worker: workload.worker(index as u64),
            phase: plan.phase,
            // A run's operationcount=0 means "until the time limit"; a load always has a count.
            op_limit: (plan.phase == Phase::Load || plan.operation_count > 0)
                .then(|| ops_for_thread(plan.operation_count, plan.threads, index as u64)),
            tick,
            shared: Arc::clone(&shared),
        });
    }
    let collector = Collector::new(plan, Arc::clone(&shared), stop);
    match F::EXECUTION {
        Execution::Threads => std::thread::scope(|s| {
            for job in jobs {
                std::thread::Builder::new()
                    .name(format!("iodig-worker-{}", job.index))
                    .stack_size(512 << 10)
                    .spawn_scoped(s, move || {
                        futures_lite::future::block_on(job.run(ThreadPacer));
                    })
                    .inspect_err(|_| {
                        // The scope waits for the workers already started; a time-bound step
                        // gives them no end of their own, so they are told to halt, and let
                        // through the start to see it.
                        shared.halt.store(true, Ordering::Release);
                        shared.open_gate(Duration::ZERO);
                    })
                    .context("cannot start a worker thread")?;
            }
            collector.run(progress, observer)
        }),
        Execution::Tasks => {
            let rt = async_runtime()?;
            let handles: Vec<_> = jobs
                .into_iter()
                .map(|job| rt.spawn(job.run(TokioPacer)))
                .collect();
            let result = collector.run(progress, observer);
            rt.block_on(async {
                for h in handles {
                    let _ = h.await;
                }
            });
            result
        }
    }
}

/// The collecting side of a step: runs on the calling thread while workers run.
struct Collector<'a> {
    plan: &'a StepPlan,
    shared: Arc<Shared>,
    stop: &'a AtomicBool,
}

impl<'a> Collector<'a> {
    fn new(plan: &'a StepPlan, shared: Arc<Shared>, stop: &'a AtomicBool) -> Self {
        Self { plan, shared, stop }
    }

    fn all_finished(&self) -> bool {
        self.shared.finished.load(Ordering::Acquire) >= self.shared.recorders.len()
    }

    fn should_end(&self) -> bool {
        self.all_finished()
            || self.stop.load(Ordering::Relaxed)
            || self.shared.halt.load(Ordering::Relaxed)
    }

    /// Sleeps until `until`, waking early when the step should end.
    fn wait_until(&self, until: Instant) {
        while !self.should_end() {
            let now = Instant::now();
            if now >= until {
                return;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(20)));
        }
    }

    fn run(self, progress: &mut Progress, observer: &mut dyn StepObserver) -> Result<StepResult> {
        let priority = CollectorPriority::raise();
        progress.phase_started(self.plan);
        // The warm-up and the window start once every worker is ready (its binding's init
        // done, waiting at the gate), not while threads are still being started.
        while self.shared.ready.load(Ordering::Acquire)
            + self.shared.finished.load(Ordering::Acquire)
            < self.shared.recorders.len()
            && !self.stop.load(Ordering::Relaxed)
            && !self.shared.halt.load(Ordering::Relaxed)
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        let Start {
            measure_from,
            measure_from_wall,
            first_boundary,
        } = self.shared.open_gate(self.plan.warmup);
        self.wait_until(measure_from);
        // Workers count operations from `measure_from`, so the window starts there too, not
        // after the tracer has attached (that takes a few hundred ms, and a short load can be
        // over by then). Client CPU is taken before the attach: a bit more, never less.
        let cpu_at_start = process_cpu();
        let now = Instant::now();
        let started = measure_from.min(now);
        // Earlier than `measure_from` only when every worker ended during the warm-up.
        let started_wall = measure_from_wall - (measure_from - started);
        // Threads inherit their creator's nice value: the tracers and samplers started here
        // run at the process's own.
        priority.lowered(|| observer.measurement_started());
        let deadline = self.plan.max_execution.map(|d| started + d);
        let mut state = CollectState::new(started_wall);
        let mut ended_early = None;
        // Interval k ends at `first_boundary` + k s, whenever the collector gets to it: the
        // workers place each operation by its end, so a late collector (starved of CPU by 1024
        // busy workers, say) still gives each second what ended in it. An interval is complete
        // once every worker's part is taken; a worker descheduled while recording holds its
        // part until its next turn, and meanwhile the collector keeps watching the clock.
        let boundary = |k: u32| first_boundary + Duration::from_secs(u64::from(k));
        let mut k = 0u32;
        loop {
            let next = boundary(k);
            let until = if state.taking() {
                Instant::now() + Duration::from_millis(1)
            } else {
                next
            };
            self.wait_until(deadline.map_or(until, |d| d.min(until)));
            let time_up = deadline.is_some_and(|d| Instant::now() >= d);
            if self.should_end() || time_up {
                break;
            }
            if Instant::now() < next || !state.take(&self.shared, k) {
                continue;
            }
            state.emit(next - started)?;
            k += 1;
            if let Some(reason) = self
                .plan
                .unusable_after
                .and_then(|n| unusable(&state.samples, n))
            {
                iodig_model::eprintln_lossy!("warning: ending the step: {reason}");
                ended_early = Some(reason);
                break;
            }
            progress.tick(
                self.plan,
                &state.totals,
                state.operations,
                started.elapsed(),
                state.samples.last(),
            );
        }
        // Let workers finish the operation in hand, then take what they recorded.
        let halted = Instant::now();
        self.shared.halt.store(true, Ordering::Release);
        while !self.all_finished() {
            std::thread::sleep(Duration::from_millis(2));
        }
        let runtime = started.elapsed();
        let client_cpu = process_cpu().saturating_sub(cpu_at_start);
        // Whole seconds that ended before the halt but were not complete yet, each on its own
        // (no worker holds its lock now); then the last interval takes everything left:
        // operations that ended after the last whole second, the ones in hand at the halt,
        // and the workers' cleanup.
        while ended_early.is_none() && boundary(k) <= halted {
            state.take_all(&self.shared, k);
            state.emit(boundary(k) - started)?;
            k += 1;
        }
        state.take_all(&self.shared, u32::MAX);
        state.emit(runtime.max(state.last_t))?;
        state.write_start_seconds(u64::MAX)?;
        progress.finished();
        let error = self
            .shared
            .error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let interrupted = self.stop.load(Ordering::Relaxed) || error.is_some();
        Ok(StepResult {
            started_unix_ms: unix_ms(started_wall),
            runtime,
            operations: state.operations,
            totals: state.totals,
            samples: state.samples,
            hlog: state.hlog,
            start_hlog: state.start_hlog,
            interrupted,
            error,
            ended_early,
            client_cpu,
        })
    }
}

/// The collector's thread at a higher scheduling priority for the step, when the process may
/// raise it (root, CAP_SYS_NICE); the old one is restored on drop. A thread that sleeps gets no
/// head start over busy ones under the kernel's EEVDF scheduler: with 1024 CPU-bound workers on
/// two CPUs it waited seconds for each turn, so the step's seconds and its end came late. At
/// nice −10 it runs within milliseconds of waking; it uses ~1 % of a CPU.
struct CollectorPriority {
    tid: libc::id_t,
    old: Option<libc::c_int>,
}

impl CollectorPriority {
    const NICE: libc::c_int = -10;

    fn raise() -> Self {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as libc::id_t;
        // SAFETY: getpriority and setpriority only read and set this thread's nice value;
        // errno is cleared first because -1 is a valid nice value.
        let old = unsafe {
            *libc::__errno_location() = 0;
            let old = libc::getpriority(libc::PRIO_PROCESS, tid);
            (*libc::__errno_location() == 0
                && old > Self::NICE
                && libc::setpriority(libc::PRIO_PROCESS, tid, Self::NICE) == 0)
                .then_some(old)
        };
        Self { tid, old }
    }
}

impl CollectorPriority {
    /// Runs `f` at the thread's old priority (for threads it starts, which inherit it).
    fn lowered<T>(&self, f: impl FnOnce() -> T) -> T {
        let Some(old) = self.old else {
            return f();
        };
        // SAFETY: as in `raise`; lowering a priority is always allowed, and raising it back
        // was allowed in `raise`.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, self.tid, old) };
        let out = f();
        // SAFETY: as above.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, self.tid, Self::NICE) };
        out
    }
}

impl Drop for CollectorPriority {
    fn drop(&mut self) {
        if let Some(old) = self.old {
            // SAFETY: as in `raise`; lowering a priority back is always allowed.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, self.tid, old);
            }
        }
    }
}

/// Why the database is unusable, when every operation of the last `seconds` whole seconds
/// failed (and some were tried in each): "database unusable: every operation failed for 10 s
/// (UPDATE-FAILED 52,114)".
fn unusable(samples: &[Sample], seconds: u64) -> Option<String> {
    let n = usize::try_from(seconds).ok().filter(|n| *n > 0)?;
    // Called every second: only the last `n` whole seconds are looked at, not the whole step.
    let last: Vec<&Sample> = samples
        .iter()
        .rev()
        .filter(|s| s.secs >= 0.999)
        .take(n)
        .collect();
    if last.len() < n {
        return None;
    }
    let mut failed = BTreeMap::<&str, u64>::new();
    for s in &last {
        let mut ok = 0;
        let mut bad = 0;
        for (name, v) in &s.series {
            if name.starts_with("Intended-") || name == "CLEANUP" {
                continue;
            }
            if name.ends_with("-FAILED") {
                bad += v.count;
                *failed.entry(name.as_str()).or_default() += v.count;
            } else {
                ok += v.count;
            }
        }
        if ok > 0 || bad == 0 {
            return None;
        }
    }
    let counts: Vec<String> = failed
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    Some(format!(
        "database unusable: every operation failed for {seconds} s ({}); -p unusableafter=0 keeps such steps to their end",
        counts.join(", ")
    ))
}

/// How long from `wall` to the next whole wall-clock second at least `min` away, so client
/// samples share their boundaries with the tracer's and the system sampler's.
fn to_second_boundary(wall: SystemTime, min: Duration) -> Duration {
    let since_epoch = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut to_next =
        Duration::from_secs(1) - Duration::from_nanos(u64::from(since_epoch.subsec_nanos()));
    while to_next < min {
        to_next += Duration::from_secs(1);
    }
    to_next
}

/// Accumulated results of the collector.
struct CollectState {
    started_wall: SystemTime,
    interval: SeriesSet,
    totals: SeriesSet,
    samples: Vec<Sample>,
    operations: u64,
    last_t: Duration,
    /// Empty recordings to hand to workers: the ones taken come back here once merged, so a
    /// step holds a few recordings per worker, not one per second.
    spares: Vec<Recording>,
    /// Recordings taken from a worker, being merged.
    taken: Vec<Recording>,
    /// Workers whose recordings are still to be taken this interval.
    pending: Vec<usize>,
    /// Workload operations of the interval being taken.
    interval_ops: u64,
    hlog: Vec<u8>,
    /// Histograms by the unix second (ms) operations started in, until written out.
    by_start: BTreeMap<u64, SeriesSet>,
    start_hlog: Vec<u8>,
}

/// Start seconds stay open this long after they end: an operation still running then (a
/// stall longer than this) lands in a second histogram of its start second, which readers
/// merge with the first.
const START_SECOND_OPEN_MS: u64 = 5_000;

/// An empty interval log whose times are on the wall clock from `started_wall`.
fn hlog_header(started_wall: SystemTime, comment: &str) -> Vec<u8> {
    let mut hlog = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    // Header only: StartTime and BaseTime make the log readable by HdrHistogram's Java tools.
    let _ = IntervalLogWriterBuilder::new()
        .add_comment(comment)
        .with_start_time(started_wall)
        .with_base_time(started_wall)
        .begin_log_with(&mut hlog, &mut ser);
    hlog.extend_from_slice(b"\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n");
    hlog
}

impl CollectState {
    fn new(started_wall: SystemTime) -> Self {
        let hlog = hlog_header(
            started_wall,
            "iodig latency log: one tagged histogram per series per second, values in microseconds",
        );
        let start_hlog = hlog_header(
            started_wall,
            "iodig latency log by start: one tagged histogram per series per unix second the operations started in, values in microseconds",
        );
        Self {
            started_wall,
            interval: SeriesSet::new(),
            totals: SeriesSet::new(),
            samples: Vec::new(),
            operations: 0,
            last_t: Duration::ZERO,
            spares: Vec::new(),
            taken: Vec::new(),
            pending: Vec::new(),
            interval_ops: 0,
            hlog,
            by_start: BTreeMap::new(),
            start_hlog,
        }
    }

    /// Whether an interval is being taken (some workers' parts are still to come).
    fn taking(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Takes the workers' recordings of intervals up to `through` into the interval being
    /// built (an operation counts in the interval it ended in) and into the histograms of the
    /// seconds its operations started in; `true` once every worker's part is in. Workers whose
    /// lock is held are left for the next call.
    fn take(&mut self, shared: &Shared, through: u32) -> bool {
        if self.pending.is_empty() {
            self.pending.extend(0..shared.recorders.len());
        }
        let Self {
            pending,
            taken,
            spares,
            interval,
            interval_ops,
            by_start,
            ..
        } = self;
        pending.retain(|&w| {
            if !shared.recorders[w].try_take(through, taken, spares) {
                return true;
            }
            for mut r in taken.drain(..) {
                *interval_ops += r.drain_into(interval, by_start);
                spares.push(r);
            }
            false
        });
        // Spares beyond a few per worker would only be memory kept.
        spares.truncate(2 * shared.recorders.len());
        pending.is_empty()
    }

    /// [`CollectState::take`] until every part is in: for when the workers have finished, so
    /// no lock is held for long.
    fn take_all(&mut self, shared: &Shared, through: u32) {
        while !self.take(shared, through) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Ends the interval taken: one sample ending at `t` from the start of the window, its
    /// interval log lines, and the start seconds that can no longer change.
    fn emit(&mut self, t: Duration) -> Result<()> {
        let secs = (t - self.last_t).as_secs_f64();
        let wall_ms = unix_ms(self.started_wall);
        let operations = std::mem::take(&mut self.interval_ops);
        self.operations += operations;
        self.totals.merge(&self.interval);
        self.write_hlog(t, secs)?;
        self.write_start_seconds(
            (wall_ms + t.as_millis() as u64).saturating_sub(START_SECOND_OPEN_MS),
        )?;
        self.samples.push(Sample {
            t: t.as_secs_f64(),
            unix_ms: unix_ms(self.started_wall + t),
            secs,
            operations,
            ops_per_sec: if secs > 0.0 {
                operations as f64 / secs
            } else {
                0.0
            },
            series: self.interval.summaries(),
        });
        self.last_t = t;
        self.interval.clear();
        Ok(())
    }

    /// Writes out the start seconds that ended before `before_unix_ms`, each as one interval
    /// of that second (from the start of measurement for the first, partial one).
    fn write_start_seconds(&mut self, before_unix_ms: u64) -> Result<()> {
        let wall_ms = unix_ms(self.started_wall);
        let mut ser = V2DeflateSerializer::new();
        let mut writer = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.start_hlog, &mut ser)
            .context("cannot write the HDR interval log by start")?;
        while let Some(entry) = self.by_start.first_entry() {
            let second = *entry.key();
            if second + 1000 > before_unix_ms {
                break;
            }
            let set = entry.remove();
            let from = second.max(wall_ms);
            for (id, h) in set.histograms() {
                writer
                    .write_histogram(
                        h,
                        Duration::from_millis(from - wall_ms),
                        Duration::from_millis(second + 1000 - from),
                        Tag::new(&series_name(id)),
                    )
                    .map_err(|e| anyhow!("cannot write the HDR interval log by start: {e:?}"))?;
            }
        }
        Ok(())
    }

    fn write_hlog(&mut self, t: Duration, secs: f64) -> Result<()> {
        let mut ser = V2DeflateSerializer::new();
        let mut writer = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.hlog, &mut ser)
            .context("cannot write the HDR interval log")?;
        for (id, h) in self.interval.histograms() {
            let name = series_name(id);
            writer
                .write_histogram(
                    h,
                    t.saturating_sub(Duration::from_secs_f64(secs)),
                    Duration::from_secs_f64(secs),
                    Tag::new(&name),
                )
                .map_err(|e| anyhow!("cannot write the HDR interval log: {e:?}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodig_db::{BasicFactory, Properties};
    use iodig_model::SeriesSummary;
    use iodig_workload::WorkloadSpec;

    /// Counts per series name of an interval log.
    fn hlog_counts(log: &[u8]) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        iodig_stats::for_each_interval(
            log,
            |_| true,
            |_, _, tag, h| *counts.entry(tag.to_string()).or_default() += h.len(),
        )
        .unwrap();
        counts
    }

    /// A time-bound step of the no-op binding: every operation the workers counted is in the
    /// whole-step histograms, in exactly one second's sample, and once in each interval log,
    /// and the step ends close to its duration.
    #[test]
    fn every_operation_is_in_every_view_once_and_the_step_ends_on_time() {
        for target in [None, Some(2000.0)] {
            let mut props = Properties::new();
            props.set("recordcount", "1000");
            let factory = BasicFactory::open(&props).unwrap();
            let workload = CoreWorkload::new(WorkloadSpec::from_properties(&props).unwrap(), 1);
            let plan = StepPlan {
                phase: Phase::Run,
                threads: 8,
                target_ops_per_sec: target,
                operation_count: 0,
                max_execution: Some(Duration::from_millis(2500)),
                warmup: Duration::from_millis(300),
                interval_mode: if target.is_some() {
                    IntervalMode::Both
                } else {
                    IntervalMode::Op
                },
                unusable_after: None,
            };
            let stop = AtomicBool::new(false);
            let mut progress = Progress::new(crate::progress::ProgressMode::Quiet);
            let r = run_step(&factory, &workload, &plan, &stop, &mut progress, &mut ()).unwrap();
            assert!(r.error.is_none() && !r.interrupted, "{:?}", r.error);
            assert!(
                r.runtime >= Duration::from_millis(2500) && r.runtime < Duration::from_millis(3500),
                "{:?}",
                r.runtime
            );
            let totals: BTreeMap<String, u64> = r
                .totals
                .summaries()
                .into_iter()
                .map(|(name, s)| (name, s.count))
                .collect();
            let workload_ops: u64 = ["READ", "UPDATE"]
                .iter()
                .map(|n| totals.get(*n).copied().unwrap_or(0))
                .sum();
            assert!(r.operations > 0);
            assert_eq!(workload_ops, r.operations, "{totals:?}");
            assert_eq!(totals["CLEANUP"], 8);
            if target.is_some() {
                assert_eq!(totals["Intended-READ"], totals["READ"]);
            } else {
                assert!(!totals.contains_key("Intended-READ"));
            }
            let mut by_second = BTreeMap::<String, u64>::new();
            for s in &r.samples {
                for (name, v) in &s.series {
                    *by_second.entry(name.clone()).or_default() += v.count;
                }
            }
            assert_eq!(by_second, totals);
            let sampled_ops: u64 = r.samples.iter().map(|s| s.operations).sum();
            assert_eq!(sampled_ops, r.operations);
            // Whole seconds, each with what ended in it, and the partial ones at the edges.
            assert!(r.samples.len() >= 3, "{}", r.samples.len());
            for s in &r.samples[1..r.samples.len() - 1] {
                assert_eq!(s.unix_ms % 1000, 0);
                assert!((s.secs - 1.0).abs() < 1e-9, "{}", s.secs);
            }
            assert_eq!(hlog_counts(&r.hlog), totals);
            assert_eq!(hlog_counts(&r.start_hlog), totals);
        }
    }

    fn second(secs: f64, series: &[(&str, u64)]) -> Sample {
        Sample {
            secs,
            series: series
                .iter()
                .map(|(n, c)| {
                    (
                        (*n).to_string(),
                        SeriesSummary {
                            count: *c,
                            ..Default::default()
                        },
                    )
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_database_is_unusable_when_every_op_of_n_whole_seconds_failed() {
        let ok = second(1.0, &[("READ", 10), ("READ-FAILED", 3)]);
        let bad = second(
            1.0,
            &[("UPDATE-FAILED", 50), ("Intended-UPDATE-FAILED", 50)],
        );
        let idle = second(1.0, &[]);
        let partial = second(0.4, &[("UPDATE-FAILED", 20)]);
        let samples = vec![ok, bad.clone(), partial, bad.clone(), bad.clone()];
        let why = unusable(&samples, 3).expect("three whole failing seconds");
        assert!(
            why.contains("every operation failed for 3 s (UPDATE-FAILED 150)"),
            "{why}"
        );
        assert!(
            unusable(&samples, 4).is_none(),
            "the fourth second back had successes"
        );
        assert!(
            unusable(&[bad.clone(), idle, bad.clone()], 2).is_none(),
            "nothing tried"
        );
        assert!(
            unusable(std::slice::from_ref(&bad), 0).is_none(),
            "0 never ends a step"
        );
        assert!(unusable(&[bad], 2).is_none(), "not yet two seconds");
    }
}
