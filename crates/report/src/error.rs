//! Why `iodig report` or `iodig compare` wrote nothing. Every kind is something the user named
//! (a run directory, its label, an operation, the output folder), so every kind is an input error.

/// How writing a report or a comparison failed; the message names the path or flag and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A run directory cannot be read as a run: missing, not a run, killed before its first
    /// run.json, or a schema this iodig does not read.
    #[error("{0:#}")]
    RunDir(anyhow::Error),
    /// `--op` names an operation the runs did not all measure, or the runs share none; the
    /// message lists what each run measured.
    #[error("{0}")]
    Op(String),
    /// A run's name in `iodig compare` cannot be used: a label that is empty or holds control
    /// characters, or two runs under one label; the message names the argument.
    #[error("{0}")]
    Label(String),
    /// `iodig compare` got fewer than two runs, or a baseline without run steps.
    #[error("{0}")]
    Runs(String),
    /// A report file, or the folder for them, could not be written.
    #[error("{0:#}")]
    Output(anyhow::Error),
}

impl ReportError {
    /// The process exit code: 2 for every kind, since each is the user's input or output path.
    pub fn exit_code(&self) -> u8 {
        2
    }
}
