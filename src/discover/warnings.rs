//! What every source reports besides its features: the problems it worked around.

/// Human-readable problems found while discovering, each naming the path it came from.
pub type Warnings = Vec<String>;
