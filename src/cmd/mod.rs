//! One module per subcommand: each turns its flags into a library call and returns its own
//! typed error ([`iodig_runner::RunError`], [`iodig_report::ReportError`]), which becomes a
//! [`Failure`] here: the message for stderr and the exit code the kind calls for.

pub mod agent;
pub mod bench;
pub mod cassandra;
pub mod compare;
pub mod merge;
pub mod report;
pub mod trace;
pub mod verify;

/// A subcommand's failure as the process shows it.
pub struct Failure {
    /// The whole chain of context, one line.
    pub message: String,
    /// 1 failure, 2 usage or input, 3 missing privilege.
    pub exit_code: u8,
}

impl From<iodig_runner::RunError> for Failure {
    fn from(e: iodig_runner::RunError) -> Self {
        Self {
            message: e.to_string(),
            exit_code: e.exit_code(),
        }
    }
}

impl From<iodig_report::ReportError> for Failure {
    fn from(e: iodig_report::ReportError) -> Self {
        Self {
            message: e.to_string(),
            exit_code: e.exit_code(),
        }
    }
}
