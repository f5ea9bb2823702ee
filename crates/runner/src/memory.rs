//! Giving a step's memory back between steps. The binary's allocator (mimalloc) keeps freed
//! pages for reuse, so each step's high water (its series, histograms, the tracer's BTF) stayed
//! in RSS and a run of many steps climbed step by step; the binary registers how to release it
//! and the sweep asks after every step, when no operation is timed.

use std::sync::OnceLock;

static RELEASE: OnceLock<fn()> = OnceLock::new();

/// Sets what [`release`] does (once; later calls are ignored).
pub fn set_release(f: fn()) {
    let _ = RELEASE.set(f);
}

/// Returns freed memory to the system, if the binary said how.
pub fn release() {
    if let Some(f) = RELEASE.get() {
        f();
    }
}
