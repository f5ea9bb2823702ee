//! One `iodig run`, `load` or `verify`, end to end: the request resolved into a plan (checked
//! against the run it resumes), the metrics server bound, then the deployment opens the
//! database and the generic sweep ([`crate::sweep`]) runs over it.

use crate::deployment;
use crate::errors::RunError;
use crate::plan::Plan;
use crate::request::{RunOutcome, RunRequest};
use crate::sweep::GenericSweep;
use anyhow::Result;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Runs the request end to end.
pub fn execute(req: &RunRequest, stop: &AtomicBool) -> Result<RunOutcome, RunError> {
    let plan = Plan::resolve(req).map_err(|e| match &req.resume {
        // A property file or default that changed since is named, and so is why it matters.
        Some(from) => e.context(format!(
            "--resume {}: its recorded configuration no longer resolves",
            from.dir.display()
        )),
        None => e,
    })?;
    if let Some(from) = &plan.req.resume {
        // Refused before a database opens or a node starts.
        plan.check_resume(from)?;
    }
    // Bound before a node starts or a load begins: a port in use is said now (exit 2).
    let metrics = match &plan.req.metrics {
        Some(addr) => Some(crate::live::MetricsServer::start(
            addr,
            Arc::clone(&plan.live),
        )?),
        None => None,
    };
    let linger = plan.metrics_linger;
    let outcome = deployment::run(plan, &GenericSweep, stop);
    if let Some(server) = metrics {
        // Also after a failed run: what was measured up to the failure is worth a last scrape.
        server.stop(linger);
    }
    Ok(outcome?)
}
