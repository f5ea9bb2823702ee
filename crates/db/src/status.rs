//! YCSB's `Status`: the outcome of one operation, counted per op type instead of raised.

use std::fmt;

/// Outcome of one database operation, with YCSB's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// `OK`: the operation succeeded.
    Ok,
    /// `ERROR`: the operation failed: the database's error, or no answer in time.
    Error,
    /// `NOT_FOUND`: no record under the key.
    NotFound,
    /// `NOT_IMPLEMENTED`: the binding does not support the operation (none here returns it).
    NotImplemented,
    /// `UNEXPECTED_STATE`: the operation ran but what came back is wrong (a value that does not
    /// decode, or fails verification).
    UnexpectedState,
    /// `BAD_REQUEST`: the request itself is invalid: another table than the binding's, no field
    /// to write, a value CQL text cannot hold.
    BadRequest,
    /// `FORBIDDEN`: the database refused it (YCSB's; no binding here returns it).
    Forbidden,
    /// `SERVICE_UNAVAILABLE`: a service the binding depends on is down (YCSB's; no binding here
    /// returns it).
    ServiceUnavailable,
    /// `BATCHED_OK`: accepted into a batch to run later; counted as success (no binding here
    /// batches).
    BatchedOk,
}

impl Status {
    /// Every status in [`index`](Self::index) order, so `ALL[s.index()] == s`.
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

    /// The status's position in [`ALL`](Self::ALL) (0–8), the number a worker's log stores.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
