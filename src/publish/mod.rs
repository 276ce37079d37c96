//! Sinks: where labels go. `stdout` prints them in the formats of docs/catalog.md#output.

pub mod client;
pub mod device_taints;
pub mod diff;
pub mod error;
pub mod features_file;
pub mod node;
pub mod nodefeature;
pub mod outcome;
pub mod prune;
pub mod sink;
pub mod slices;
pub mod stdout;
pub mod taints;
