//! Error kinds that decide the exit code: usage errors (2) and missing privileges (3). Anything
//! else that reaches `main` is a failure (1).

use std::fmt;

/// Bad input: a flag, property or path, named in the message with the fix (exit code 2).
#[derive(Debug)]
pub struct UsageError(pub String);

/// A privilege or kernel feature the user explicitly asked for is missing (exit code 3).
#[derive(Debug)]
pub struct PrivilegeError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for PrivilegeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}
impl std::error::Error for PrivilegeError {}

/// The exit code for an error chain: 2 for usage, 3 for privilege, 1 otherwise.
pub fn exit_code_of(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if cause.is::<UsageError>() {
            return 2;
        }
        if cause.is::<PrivilegeError>() {
            return 3;
        }
    }
    1
}
