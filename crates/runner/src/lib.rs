//! Runs YCSB phases against a binding: workers on threads or async tasks, a target rate with
//! intended start times, warm-up, per-second collection, observation of the storage underneath,
//! and the run directory written step by step.

pub mod dataset;
pub mod environment;
pub mod errors;
pub mod experiment;
pub mod experiment_file;
pub mod merge;
pub mod pacer;
pub mod probe;
pub mod progress;
pub mod rundir;
pub mod step;
pub mod timed;

pub use errors::{exit_code_of, PrivilegeError, UsageError};
pub use experiment::{
    execute, install_stop_handler, LoadPolicy, RunOutcome, RunRequest, WorkloadRun,
};
pub use step::Phase;
