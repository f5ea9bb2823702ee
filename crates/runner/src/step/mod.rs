//! One step: N workers run a phase of the workload against a binding, each recording into its
//! own recorder, while one collector swaps the recordings out every second and merges them into
//! per-second samples, whole-step histograms and the HDR interval logs.

mod collector;

use crate::pacer::{Pacer, ThreadPacer, TokioPacer};
use crate::progress::Progress;
use crate::step_plan::{Phase, StepPlan};
use crate::timed::clock::Clock;
use crate::timed::Timed;
use anyhow::{anyhow, Context, Result};
use collector::{to_second_boundary, Collector};
use iodig_db::{Db, DbFactory, Execution};
use iodig_model::Sample;
use iodig_stats::{NodeLatencies, SeriesSet, WorkerRecorder};
use iodig_workload::{ops_for_thread, CoreWorkload, Worker};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

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
    /// What moves `hlog` to the log by start: the operations that started in another
    /// interval than they ended in (`iodig_stats::for_each_start_interval`).
    pub shift_hlog: Vec<u8>,
    /// Ctrl-C, SIGTERM or a worker failure ended the step early.
    pub interrupted: bool,
    /// First worker failure, if any.
    pub error: Option<String>,
    /// Why the step ended before its time because the database became unusable.
    pub ended_early: Option<String>,
    /// CPU time this process used in the measured window (workers, driver, collector, samplers).
    pub client_cpu: Duration,
    /// The client's latency per coordinator node, op and second (`client-by-node.json`);
    /// empty for a binding that names no node.
    pub by_node: Vec<iodig_model::by_node::NodeSecondRow>,
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
    /// The client's latency per coordinator node, for bindings that name one.
    by_node: Arc<NodeLatencies>,
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
    /// The clock the worker times operations with, taken before the start's instants.
    clock: Clock,
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
            clock,
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
        let mut timed = Timed::new(
            db,
            Arc::clone(&shared.recorders[index]),
            &clock,
            start.measure_from,
            start.first_boundary,
            pacer,
        )
        .with_node_latencies(Arc::clone(&shared.by_node));
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
                timed.set_intended_start(Some(deadline));
            }
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
            if timed.finish_operation() {
                measured += 1;
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
    // Calibrated (once per process) before the gate's instants are taken, which it converts.
    let clock = Clock::global();
    let shared = Arc::new(Shared {
        recorders: (0..threads)
            .map(|_| Arc::new(WorkerRecorder::new(plan.interval_mode)))
            .collect(),
        by_node: Arc::new(NodeLatencies::new()),
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
            clock,
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
#[cfg(test)]
mod tests {
    use super::collector::unusable;
    use super::*;
    use iodig_db::{BasicFactory, Properties};
    use iodig_model::SeriesSummary;
    use iodig_stats::IntervalMode;
    use iodig_workload::WorkloadSpec;
    use std::collections::BTreeMap;

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
            let mut by_start = BTreeMap::<String, u64>::new();
            iodig_stats::for_each_start_interval(
                &r.hlog,
                &r.shift_hlog,
                |_| true,
                |_, _, tag, h| *by_start.entry(tag.to_string()).or_default() += h.len(),
            )
            .unwrap();
            assert_eq!(by_start, totals);
            // Only operations that crossed an interval's end are in the shift: at most one
            // per worker and interval of 8 workers, in both series when it measures both.
            let moved: u64 = hlog_counts(&r.shift_hlog).values().sum();
            let crossings = 8 * 2 * 2 * r.samples.len() as u64;
            assert!(moved <= crossings, "{moved} moved of {}", r.operations);
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
