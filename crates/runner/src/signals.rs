//! Ctrl-C and SIGTERM: the first ends the current step cleanly, a later one quits at once.

use anyhow::{Context, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Installs Ctrl-C / SIGTERM handling: the first signal ends the current step cleanly (the run
/// directory says `interrupted` and the report is written); another one at least a second later
/// exits at once. Signals within that second are the same request delivered twice — a terminal's
/// Ctrl-C or `timeout` reach both iodig and its process group — and must not cut the clean stop
/// short.
pub fn install_stop_handler() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .context("cannot install the Ctrl-C handler")?;
    let stop = Arc::clone(&flag);
    std::thread::Builder::new()
        .name("iodig-signals".into())
        .spawn(move || {
            let mut first: Option<std::time::Instant> = None;
            for _ in signals.forever() {
                match first {
                    None => {
                        first = Some(std::time::Instant::now());
                        stop.store(true, Ordering::SeqCst);
                        iodig_model::eprintln_lossy!("iodig: stopping after the current step's clean-up (again in a second or more to quit at once)");
                    }
                    Some(t) if t.elapsed() >= Duration::from_secs(1) => std::process::exit(130),
                    Some(_) => {}
                }
            }
        })
        .context("cannot start the signal thread")?;
    Ok(flag)
}
