//! gpu-labeler: discover a node's GPUs and accelerators, turn them into NFD-style features,
//! evaluate NodeFeatureRules over them and publish the labels.
//!
//! Data flows one way: `discover` -> `FeatureSet` -> `rules` + built-in labels -> `NodeOutput`
//! -> `publish`. Everything between discovery and publishing is pure. The modules stand in
//! floors in that order, each importing only the floors below it (docs/architecture.md;
//! `tests/architecture.rs` checks it, and that no files of a folder import each other in a
//! cycle):
//!
//! 0. [`sysfs`], [`pciids`], [`yaml`], [`gotmpl`], [`catalogue`], [`config`], [`features`],
//!    [`output`], [`validate`], [`error`]: the readers, Go's text/template and Sprig with Go's
//!    semantics, and the shared vocabulary
//! 1. [`discover`]: one file per source
//! 2. [`rules`], [`default_rules`]: NodeFeatureRule parsing and evaluation
//! 3. [`labels`], [`pipeline`]: label assembly, and the inputs every command loads
//! 4. [`publish`], [`metrics`], [`scheduling`], [`nodetemplate`], [`watch`]: the sinks, the
//!    health/metrics server, `match`/`inventory`, scale-from-zero templates, and what wakes the
//!    daemon early
//! 5. [`daemon`]: the `run` loop
//! 6. [`fuzzing`], [`cli`]: entry points

// Floor 0
pub mod catalogue;
pub mod config;
pub mod dra;
pub mod error;
pub mod features;
pub mod gotmpl;
pub mod kobject;
pub mod names;
pub mod output;
pub mod pciids;
pub mod said;
pub mod sysfs;
pub mod validate;
pub mod yaml;
// Floor 1
pub mod discover;
// Floor 2
pub mod default_rules;
pub mod rules;
// Floor 3
pub mod labels;
pub mod pipeline;
// Floor 4
pub mod metrics;
pub mod nodetemplate;
pub mod publish;
pub mod scheduling;
pub mod watch;
// Floor 5
pub mod daemon;
// Floor 6
pub mod cli;
#[doc(hidden)]
pub mod fuzzing;

pub use error::{Error, exit};
