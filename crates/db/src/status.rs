//! YCSB's `Status`: the outcome of one operation, counted per op type instead of raised.

use std::fmt;

/// Outcome of one database operation, with YCSB's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    Ok,
    Error,
    NotFound,
    NotImplemented,
    UnexpectedState,
    BadRequest,
    Forbidden,
    ServiceUnavailable,
    BatchedOk,
}

impl Status {
    pub const ALL: [Status; 9] = [
        Status::Ok,
        Status::Error,
        Status::NotFound,
        Status::NotImplemented,
        Status::UnexpectedState,
        Status::BadRequest,
        Status::Forbidden,
        Status::ServiceUnavailable,
        Status::BatchedOk,
    ];

    /// YCSB's name, as printed in `Return=<NAME>`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Error => "ERROR",
            Status::NotFound => "NOT_FOUND",
            Status::NotImplemented => "NOT_IMPLEMENTED",
            Status::UnexpectedState => "UNEXPECTED_STATE",
            Status::BadRequest => "BAD_REQUEST",
            Status::Forbidden => "FORBIDDEN",
            Status::ServiceUnavailable => "SERVICE_UNAVAILABLE",
            Status::BatchedOk => "BATCHED_OK",
        }
    }

    /// YCSB counts OK and BATCHED_OK as success; everything else goes to `<OP>-FAILED`.
    pub fn is_ok(self) -> bool {
        matches!(self, Status::Ok | Status::BatchedOk)
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
