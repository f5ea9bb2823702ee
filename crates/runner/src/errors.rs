//! Why `run`, `load`, `verify`, `merge`, `cassandra` or `agent` failed, typed by kind: the kind
//! decides the exit code (1 failure, 2 usage or input, 3 missing privilege).
//!
//! Deep in the runner, code raises a [`UsageError`] or [`PrivilegeError`] and callers add
//! context with `anyhow` as it travels up; at the library's edge ([`crate::execute`],
//! [`crate::merge::merge_runs`], [`crate::verify`]) the chain becomes a [`RunError`], so a
//! command's caller matches on a type instead of searching messages.

use iodig_db::DbError;
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

/// How a runner command failed. Each variant keeps the whole chain of context for its message.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A flag, property, path or combination of them is wrong; the message names it and the
    /// fix. Nothing was measured (exit code 2).
    #[error("{0:#}")]
    Usage(anyhow::Error),
    /// A privilege or kernel feature the user asked for by name is missing, e.g. `--trace ebpf`
    /// without CAP_BPF (exit code 3).
    #[error("{0:#}")]
    Privilege(anyhow::Error),
    /// The database, a host, a device or the machine failed under the run (exit code 1).
    #[error("{0:#}")]
    Failed(anyhow::Error),
}

impl RunError {
    /// The process exit code for this kind: 2 usage, 3 privilege, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Privilege(_) => 3,
            Self::Failed(_) => 1,
        }
    }
}

/// The kind is the first [`UsageError`] or [`PrivilegeError`] in the chain: context added on the
/// way up does not change what went wrong.
impl From<anyhow::Error> for RunError {
    fn from(e: anyhow::Error) -> Self {
        for cause in e.chain() {
            // A RunError from a library edge that an inner caller passed on with `?`.
            if let Some(kind) = cause.downcast_ref::<RunError>() {
                return match kind {
                    Self::Usage(_) => Self::Usage(e),
                    Self::Privilege(_) => Self::Privilege(e),
                    Self::Failed(_) => Self::Failed(e),
                };
            }
            if cause.is::<UsageError>() {
                return Self::Usage(e);
            }
            if cause.is::<PrivilegeError>() {
                return Self::Privilege(e);
            }
        }
        Self::Failed(e)
    }
}

impl From<UsageError> for RunError {
    fn from(e: UsageError) -> Self {
        Self::Usage(e.into())
    }
}

impl From<PrivilegeError> for RunError {
    fn from(e: PrivilegeError) -> Self {
        Self::Privilege(e.into())
    }
}

/// A binding's configuration error is a usage error (exit 2); anything else is a failure.
pub fn db_error(e: DbError) -> anyhow::Error {
    match e {
        DbError::Config(m) => UsageError(m).into(),
        DbError::Unavailable(m) => anyhow::anyhow!(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn context_keeps_the_kind_and_the_message() {
        let deep: anyhow::Result<()> =
            Err(UsageError("--threads 0: give at least 1".into()).into());
        let e = RunError::from(deep.context("step 1").unwrap_err());
        assert_eq!(e.exit_code(), 2);
        assert_eq!(e.to_string(), "step 1: --threads 0: give at least 1");

        let e = RunError::from(anyhow::Error::from(PrivilegeError("no CAP_BPF".into())));
        assert_eq!(e.exit_code(), 3);
        let e = RunError::from(anyhow::anyhow!("node 2 died"));
        assert_eq!(e.exit_code(), 1);
        assert!(matches!(e, RunError::Failed(_)));

        let edge: RunError = UsageError("--out x: not writable".into()).into();
        let passed_on = anyhow::Error::from(edge).context("client 2");
        assert_eq!(RunError::from(passed_on).exit_code(), 2);
    }
}
