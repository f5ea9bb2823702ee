//! One module per subcommand: each turns its flags into a library call.

pub mod agent;
pub mod bench;
pub mod cassandra;
pub mod compare;
pub mod merge;
pub mod report;
pub mod trace;
pub mod verify;
