//! Sinks: where labels go. `stdout` prints them in the formats of SPEC §2.

pub mod stdout;
