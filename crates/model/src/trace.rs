//! Block-IO trace results stored with each step; produced by crates/iotrace.
