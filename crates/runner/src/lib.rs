//! Runs YCSB phases against a binding: workers on threads or async tasks, a target rate with
//! intended start times, warm-up, per-second collection, observation of the storage underneath,
//! and the run directory written step by step.
//!
//! The rooms, in the direction the imports run: `execute` (one run end to end) → `sweep` (the
//! generic sweep, handed to the deployment as a [`deployment::Sweeper`]) → `deployment` (where
//! the database runs: the only binding-specific room) → `plan` (the `request` resolved once,
//! with its steps' names and `--resume`'s check) → `step` (workers and collector, with `timed`
//! and `pacer`, doing what a `step_plan` says), `observe` (tracer, samplers and the drives' own
//! statistics in `device_stats`), `recording` (the step's files) into `rundir`; `remote`
//! observes nodes on other hosts over SSH (and is the agent iodig runs there) and starts
//! clients on other hosts (`--clients`); `start_at` lines up the steps of clients on several
//! machines; `resume` reads back a killed or interrupted run (`run --resume`); `verify` keeps
//! the ledger of versioned writes and reads them back; `live` is the run as it happens.

pub mod dataset;
pub mod deployment;
pub mod device_stats;
pub mod environment;
pub mod errors;
pub mod execute;
pub mod experiment_file;
pub mod fault;
mod le;
pub mod live;
pub mod memory;
pub mod merge;
pub mod observe;
pub mod pacer;
pub mod page_cache;
pub mod plan;
pub mod probe;
pub mod progress;
pub mod recording;
pub mod remote;
pub mod request;
pub mod resume;
pub mod rundir;
pub mod signals;
pub mod start_at;
pub mod step;
pub mod step_plan;
pub mod stop_rule;
pub mod sweep;
pub mod timed;
pub mod utc;
pub mod verify;

pub use errors::{PrivilegeError, RunError, UsageError};
pub use execute::execute;
pub use request::{LoadPolicy, RunOutcome, RunRequest, WorkloadRun};
pub use signals::install_stop_handler;
pub use step_plan::Phase;
pub use stop_rule::StopRule;
