//! YCSB's core workload, faithful to YCSB where YCSB is deterministic (key names, load order,
//! generator formulas) and 64-bit throughout: property parsing ([`spec`]), generators
//! ([`generators`]), key names ([`keys`]), values ([`values`]) and the workload itself ([`core`]).

pub mod core;
pub mod generators;
pub mod integrity;
pub mod keys;
pub mod rng;
pub mod spec;
pub mod values;

pub use crate::core::{ops_for_thread, CoreWorkload, MeasuredDb, TxOp, Worker, WorkloadError};
pub use crate::spec::{WorkloadSpec, CORE_PROPERTIES, REQUEST_DISTRIBUTIONS};

/// YCSB's workload files a–f, shipped in `workloads/` and compiled in for `iodig run` without `-P`.
pub const BUILTIN_WORKLOADS: &[(&str, &str)] = &[
    ("workloada", include_str!("../../../workloads/workloada")),
    ("workloadb", include_str!("../../../workloads/workloadb")),
    ("workloadc", include_str!("../../../workloads/workloadc")),
    ("workloadd", include_str!("../../../workloads/workloadd")),
    ("workloade", include_str!("../../../workloads/workloade")),
    ("workloadf", include_str!("../../../workloads/workloadf")),
];
