//! Sinks: where labels go. `stdout` prints them in the formats of docs/catalog.md#output.

pub mod client;
pub mod device_taints;
pub mod diff;
pub mod features_file;
pub mod node;
pub mod nodefeature;
pub mod prune;
pub mod slices;
pub mod stdout;
pub mod taints;
