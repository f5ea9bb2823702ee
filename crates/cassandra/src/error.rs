//! The node manager's errors: every message names the path, port or tool and the fix.

use std::path::{Path, PathBuf};

/// A failure of the node manager; every message names the path, port or tool and the fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A required program is missing: names the Debian package that provides it.
    #[error("`{tool}` not found on PATH; install it with `apt-get install {package}`{extra}")]
    MissingTool {
        /// The program looked for on PATH (`java`, `mvn`, …).
        tool: String,
        /// The Debian package to install for it.
        package: String,
        /// Appended to the message as is: another way out, with its leading space (may be
        /// empty).
        extra: String,
    },
    /// A port a node needs is taken.
    #[error("{0}")]
    PortInUse(String),
    /// A node did not come up.
    #[error("{0}")]
    NotReady(String),
    /// File-system trouble, with the path.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// Anything else, said plainly.
    #[error("{0}")]
    Other(String),
}

/// The node manager's result: every failure is an [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}
