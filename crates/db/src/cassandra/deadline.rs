//! Request timeouts for a thousand requests in flight without a timer each: every worker owns a
//! [`Slot`] that says when its request started, and one watchdog task per session sweeps the
//! slots and gives up requests older than `cassandra.readtimeoutmillis`.
//!
//! Why not the driver's own timeout: it arms and disarms a tokio timer per request (an insert
//! and a remove in the timer wheel under the time driver's lock), 3–5 % of the client's CPU per
//! operation at 1024 in flight (docs/benchmarks.md). A slot costs a store when a request starts
//! and one when it ends; the sweep costs microseconds per tick. The price is resolution: a
//! request is given up no earlier than the timeout and at most two ticks after it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A slot's `started` when no request is in flight.
const IDLE: u64 = 0;
/// A slot's `started` once the watchdog has given its request up.
const EXPIRED: u64 = u64::MAX;

/// The clock requests read and the slots the watchdog sweeps, one per session.
pub(crate) struct Deadlines {
    timeout: Duration,
    tick: Duration,
    /// Whole ticks a request may run: started at tick `s`, it is given up at tick `s + limit + 1`
    /// or later, when at least `limit` whole ticks have surely passed.
    limit: u64,
    epoch: Instant,
    /// Ticks since `epoch`, advanced by the watchdog; requests read this instead of the clock.
    now: AtomicU64,
    slots: Mutex<Vec<Weak<Slot>>>,
}

impl Deadlines {
    /// Starts the watchdog on the current tokio runtime; it ends once the returned value and
    /// every slot made from it are dropped.
    pub(crate) fn start(timeout: Duration) -> Arc<Self> {
        // Twenty ticks per timeout keep the resolution at 5 %; 100 ms is plenty for YCSB's 12 s,
        // and 1 ms keeps short test timeouts meaningful.
        let tick = (timeout / 20).clamp(Duration::from_millis(1), Duration::from_millis(100));
        let deadlines = Arc::new(Self {
            timeout,
            tick,
            limit: timeout.as_nanos().div_ceil(tick.as_nanos()) as u64,
            epoch: Instant::now(),
            now: AtomicU64::new(0),
            slots: Mutex::new(Vec::new()),
        });
        let watched = Arc::downgrade(&deadlines);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(tick);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                ticks.tick().await;
                match watched.upgrade() {
                    Some(d) => d.sweep(),
                    None => return,
                }
            }
        });
        deadlines
    }

    /// A slot for one worker, swept until the worker drops it.
    pub(crate) fn slot(self: &Arc<Self>) -> Arc<Slot> {
        let slot = Arc::new(Slot {
            started: AtomicU64::new(IDLE),
            waker: Mutex::new(None),
            deadlines: Arc::clone(self),
        });
        lock(&self.slots).push(Arc::downgrade(&slot));
        slot
    }

    /// Advances the clock and gives up every request that has run out of time.
    fn sweep(&self) {
        let now = (self.epoch.elapsed().as_nanos() / self.tick.as_nanos()) as u64;
        self.now.store(now, Ordering::Relaxed);
        lock(&self.slots).retain(|weak| match weak.upgrade() {
            Some(slot) => {
                slot.expire_if_started_before(now.saturating_sub(self.limit));
                true
            }
            None => false,
        });
    }
}

/// One worker's request in flight, as the watchdog sees it.
pub(crate) struct Slot {
    /// The clock's tick when the current request started, plus one; IDLE or EXPIRED.
    started: AtomicU64,
    /// The task to wake when its request is given up.
    waker: Mutex<Option<Waker>>,
    deadlines: Arc<Deadlines>,
}

/// Runs `request` until it finishes or the watchdog gives it up; without a slot, until it
/// finishes. A plain future, not an `async fn`, so the driver's request future (kilobytes) is
/// not moved once more per operation.
pub(crate) fn within<F: Future>(slot: Option<&Slot>, request: F) -> Within<'_, F> {
    if let Some(slot) = slot {
        let now = slot.deadlines.now.load(Ordering::Relaxed);
        slot.started.store(now + 1, Ordering::Release);
    }
    Within { request, slot }
}

impl Slot {
    fn expire_if_started_before(&self, tick: u64) {
        let started = self.started.load(Ordering::Acquire);
        // `started` is the start tick plus one: `started > tick` started at `tick` or later.
        if started == IDLE || started == EXPIRED || started > tick {
            return;
        }
        // Compare-and-swap, so a request that ended and a new one that started meanwhile (with
        // a later tick) is never the one given up.
        if self
            .started
            .compare_exchange(started, EXPIRED, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            if let Some(w) = lock(&self.waker).as_ref() {
                w.wake_by_ref();
            }
        }
    }

    fn timed_out(&self) -> TimedOut {
        TimedOut(self.deadlines.timeout)
    }

    fn expired(&self) -> bool {
        self.started.load(Ordering::Acquire) == EXPIRED
    }

    fn remember(&self, waker: &Waker) {
        let mut kept = lock(&self.waker);
        if !kept.as_ref().is_some_and(|k| k.will_wake(waker)) {
            *kept = Some(waker.clone());
        }
    }
}

/// The watchdog gave the request up after this long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimedOut(pub Duration);

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no response within {} ms (cassandra.readtimeoutmillis)",
            self.0.as_millis()
        )
    }
}

impl std::error::Error for TimedOut {}

/// A request raced against its slot's deadline; see [`within`].
pub(crate) struct Within<'a, F> {
    request: F,
    slot: Option<&'a Slot>,
}

impl<F: Future> Future for Within<'_, F> {
    type Output = Result<F::Output, TimedOut>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `request` is structurally pinned: it is never moved out of `self`, and
        // `Within` has no Drop impl and is not Unpin unless `F` is.
        let (request, slot) = unsafe {
            let this = self.get_unchecked_mut();
            (Pin::new_unchecked(&mut this.request), this.slot)
        };
        let Some(slot) = slot else {
            return request.poll(cx).map(Ok);
        };
        if slot.expired() {
            return Poll::Ready(Err(slot.timed_out()));
        }
        if let Poll::Ready(out) = request.poll(cx) {
            slot.started.store(IDLE, Ordering::Release);
            return Poll::Ready(Ok(out));
        }
        slot.remember(cx.waker());
        // The watchdog may have fired before the waker was there to be woken.
        if slot.expired() {
            return Poll::Ready(Err(slot.timed_out()));
        }
        Poll::Pending
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn a_request_that_never_answers_is_given_up_after_the_timeout_not_before() {
        runtime().block_on(async {
            let deadlines = Deadlines::start(Duration::from_millis(60));
            let slot = deadlines.slot();
            let start = Instant::now();
            let out = within(Some(&slot), std::future::pending::<()>()).await;
            let waited = start.elapsed();
            assert_eq!(out, Err(TimedOut(Duration::from_millis(60))));
            assert!(
                waited >= Duration::from_millis(60),
                "gave up after {waited:?}"
            );
            // Two ticks of 3 ms late at most, plus the scheduler's slack on a busy machine.
            assert!(
                waited < Duration::from_millis(500),
                "gave up after {waited:?}"
            );
        });
    }

    #[test]
    fn answered_requests_pass_and_a_new_request_is_not_given_up_for_an_old_one() {
        runtime().block_on(async {
            let deadlines = Deadlines::start(Duration::from_millis(40));
            let slot = deadlines.slot();
            assert_eq!(within(Some(&slot), async { 7 }).await, Ok(7));
            // Idle past the timeout: the finished request must not count against the next.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let short = within(Some(&slot), tokio::time::sleep(Duration::from_millis(10)));
            assert_eq!(short.await, Ok(()));
            // A slow answer within the timeout passes too.
            let slow = within(Some(&slot), tokio::time::sleep(Duration::from_millis(25)));
            assert_eq!(slow.await, Ok(()));
        });
    }

    #[test]
    fn dropped_slots_leave_the_sweep_and_the_watchdog_does_not_keep_the_session_alive() {
        runtime().block_on(async {
            let deadlines = Deadlines::start(Duration::from_millis(20));
            let kept = deadlines.slot();
            drop(deadlines.slot());
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert_eq!(lock(&kept.deadlines.slots).len(), 1);
            let watched = Arc::downgrade(&kept.deadlines);
            drop(deadlines);
            drop(kept);
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert!(watched.upgrade().is_none());
        });
    }
}
