//! gpu-labeler: discover a node's GPUs and accelerators, turn them into NFD-style features,
//! evaluate NodeFeatureRules over them and publish the labels.
//!
//! Data flows one way: `discover` -> `FeatureSet` -> `rules` + built-in labels -> `NodeOutput`
//! -> `publish`. Everything between discovery and publishing is pure.

pub mod cli;
pub mod config;
pub mod daemon;
pub mod default_rules;
pub mod discover;
pub mod features;
#[doc(hidden)]
pub mod fuzzing;
pub mod labels;
pub mod metrics;
pub mod pciids;
pub mod publish;
pub mod rules;
pub mod sysfs;
pub mod yaml;

/// Process exit codes (SPEC §2).
pub mod exit {
    pub const OK: u8 = 0;
    /// Invalid input: rules, config, snapshot.
    pub const INVALID_INPUT: u8 = 1;
    /// Usage error (clap's own code).
    pub const USAGE: u8 = 2;
    /// A runtime failure that could not be retried.
    pub const RUNTIME: u8 = 3;
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
    #[error("{0}")]
    Runtime(String),
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Config(_) | Error::Snapshot(_) | Error::InvalidInput(_) => exit::INVALID_INPUT,
            Error::Runtime(_) => exit::RUNTIME,
        }
    }
}
