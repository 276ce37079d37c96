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
/// How deep parenthesized pipelines may nest in one action: `{{ not (not (not .x)) }}` is 3.
/// The parser and the executor recurse once per level, at about 18 KiB of stack a level in an
/// unoptimised build; 32 keeps the worst case (32 levels inside `MAX_CONTROL_DEPTH` nested
/// controls) inside a 2 MiB thread, the smallest that evaluates rules (the test harness's; the
/// daemon and the command line evaluate on the main thread, 8 MiB), where 55 levels were the
/// most measured to fit. Go's parser allows 10,000 (`maxStackDepth`: its stacks grow); rules
/// nest a handful.
pub const MAX_EXPRESSION_DEPTH: usize = 32;
/// How deep `if`, `range`, `with`, `define` and `block` may nest, each `else if` / `else with`
/// of a chain counting one more level: the parser recurses once per link of a chain as it does
/// per nested body, and counts only the bodies itself (63 below its own cap of 64 lists, which
/// a chain bypassed: 190 links overflowed a 2 MiB thread). Go's parser has no such bound.
pub const MAX_CONTROL_DEPTH: usize = 63;
