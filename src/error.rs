//! How a command ends: the process exit codes (docs/catalog.md#exit-codes) and the errors that map to them.

use crate::{config, features};

/// Process exit codes (docs/catalog.md#exit-codes).
pub mod exit {
    pub const OK: u8 = 0;
    /// Invalid input: rules, config, snapshot.
    pub const INVALID_INPUT: u8 = 1;
    /// Usage error (clap's own code).
    pub const USAGE: u8 = 2;
    /// A runtime failure that could not be retried.
    pub const RUNTIME: u8 = 3;
    /// `match`: no node fits a workload (1, as grep says "no line matched").
    pub const NO_FIT: u8 = 1;
    /// `diff`: the Node differs from what would be published (4: 1-3 are taken, and a script
    /// must tell "differs" from "failed").
    pub const DIFFERS: u8 = 4;
}

/// Writes `error: {message}` to stderr. A reader that went away (`2>&1 | head`) is not worth a
/// panic: the line is dropped, as Unix tools do.
pub fn print_error(message: &dyn std::fmt::Display) {
    use std::io::Write;
    // A message of several problems (a config file's) is one `error:` line each.
    let text = message.to_string();
    let mut err = std::io::stderr().lock();
    for line in text.split('\n') {
        let _ = writeln!(err, "error: {line}");
    }
}

/// Errors that end a command, with the exit code each maps to.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Snapshot(#[from] features::SnapshotError),
    #[error("{0}")]
    InvalidInput(String),
    /// How the command was invoked: something it needs was not given at all (a node name for
    /// the node sinks, any Kubernetes client configuration).
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Runtime(String),
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Config(_) | Error::Snapshot(_) | Error::InvalidInput(_) => exit::INVALID_INPUT,
            Error::Usage(_) => exit::USAGE,
            Error::Runtime(_) => exit::RUNTIME,
        }
    }
}
