//! Runs YCSB phases against a binding: workers on threads or async tasks, a target rate with
//! intended start times, warm-up, per-second collection, observation of the storage underneath,
//! and the run directory written step by step.
//!
//! The rooms: `request` (what the command asked) → `plan` (resolved once) → `deployment` (where
//! the database runs: the only binding-specific room) → `experiment` (the generic sweep) →
//! `step` (workers and collector) with `timed` and `pacer`, `observe` (tracer, samplers and the
//! drives' own statistics in `device_stats`), `recording` (the step's files) into `rundir`;
//! `remote` observes nodes on other hosts over SSH (and is the agent iodig runs there) and
//! starts clients on other hosts (`--clients`); `start_at` lines up the steps of clients on
//! several machines; `resume` takes over a killed or interrupted run (`run --resume`); `verify` keeps the ledger of versioned writes and reads them back.

pub mod dataset;
pub mod deployment;
pub mod device_stats;
pub mod environment;
pub mod errors;
pub mod experiment;
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
pub mod stop_rule;
pub mod timed;
pub mod verify;

pub use errors::{PrivilegeError, RunError, UsageError};
pub use experiment::execute;
pub use request::{LoadPolicy, RunOutcome, RunRequest, WorkloadRun};
pub use signals::install_stop_handler;
pub use step::Phase;
pub use stop_rule::StopRule;
