//! Masterminds semver's lenient versions, as NFD's `VersionGt`/`VersionLt`/`VersionGtLt` and
//! Sprig's `semver` read them.

/// A version as NFD compares them: Masterminds' lenient semver (`v` prefix, missing minor or
/// patch are 0), the pre-release and build metadata dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

/// Masterminds semver's `NewVersion` (coercing mode), with the pre-release dropped as NFD does.
pub fn parse_version(s: &str) -> Result<Version, String> {
    let rest = s.strip_prefix('v').unwrap_or(s);
    let (core, meta) = match rest.split_once('+') {
        Some((c, m)) => (c, Some(m)),
        None => (rest, None),
    };
    let (nums, pre) = match core.split_once('-') {
        Some((n, p)) => (n, Some(p)),
        None => (core, None),
    };
    let parts: Vec<&str> = nums.split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err("invalid semantic version".to_string());
    }
    let mut n = [0u64; 3];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err("invalid semantic version".to_string());
        }
        n[i] = p
            .parse::<u64>()
            .map_err(|e| format!("error parsing version segment: {e}"))?;
    }
    let ident_ok =
        |seg: &str| !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if let Some(pre) = pre {
        for seg in pre.split('.') {
            if !ident_ok(seg) {
                return Err("invalid semantic version".to_string());
            }
            if seg.len() > 1 && seg.starts_with('0') && seg.bytes().all(|b| b.is_ascii_digit()) {
                return Err("version segment starts with 0".to_string());
            }
        }
    }
    if let Some(meta) = meta
        && !meta.split('.').all(ident_ok)
    {
        return Err("invalid semantic version".to_string());
    }
    Ok(Version {
        major: n[0],
        minor: n[1],
        patch: n[2],
    })
}
