//! Waiting for the next scheduled operation: a blocking sleep on worker threads, a timer on
//! async tasks. The runner is generic over it so one worker loop serves both execution models.

use std::future::Future;
use std::time::{Duration, Instant};

/// Sleeps until a deadline in the way the worker's execution model allows.
pub trait Pacer: Send + 'static {
    /// Returns at `deadline`, at once when it has passed.
    fn sleep_until(&mut self, deadline: Instant) -> impl Future<Output = ()> + Send;
}

/// For one OS thread per worker: `thread::sleep`, which parks only this worker.
pub struct ThreadPacer;

impl Pacer for ThreadPacer {
    async fn sleep_until(&mut self, deadline: Instant) {
        let now = Instant::now();
        if deadline > now {
            std::thread::sleep(deadline - now);
        }
    }
}

/// For async tasks: a tokio timer, so other tasks on the thread keep running.
pub struct TokioPacer;

impl Pacer for TokioPacer {
    async fn sleep_until(&mut self, deadline: Instant) {
        tokio::time::sleep_until(deadline.into()).await;
    }
}

/// Saturating µs of a duration, as YCSB's `(int)((end - start) / 1000)`.
#[inline]
pub fn micros_u32(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}
