//! The rules shipped in `rules/`, embedded at build time and on by default.

use crate::rules::RuleSource;

/// `(name, text)` of each shipped rule file.
pub const FILES: &[(&str, &str)] = &[
    ("builtin:rules/gpu.yaml", include_str!("../rules/gpu.yaml")),
    (
        "builtin:rules/accel.yaml",
        include_str!("../rules/accel.yaml"),
    ),
];

pub fn sources() -> Vec<RuleSource> {
    FILES
        .iter()
        .map(|(name, text)| RuleSource {
            name: name.to_string(),
            text: text.to_string(),
        })
        .collect()
}
