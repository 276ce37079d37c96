//! The bounds of one template: what it may be, what it may write, what one function call may
//! return. The engine (`engine`) sets them and the multiplying functions (`sprig`) check them.

/// NFD's bound on template size.
pub const MAX_TEMPLATE_SIZE: usize = 64 * 1024;
/// What one template may write: far more than the labels of a node can carry (a line is at
/// most ~380 bytes: a 316-byte key, `=`, a 63-byte value), far less than the engine's 64 MiB.
pub const MAX_TEMPLATE_OUTPUT: usize = 1 << 20;
/// What one function call may return (`repeat`, `indent`, ...): an annotation value is at most
/// 1024 bytes; a megabyte per call made a loop churn hundreds of megabytes a cycle.
pub const MAX_FUNCTION_OUTPUT: usize = 64 * 1024;
