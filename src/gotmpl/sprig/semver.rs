//! Sprig's `semver` and `semverCompare`: Masterminds semver's versions and constraints.

use std::collections::HashMap;

use gtmpl_ng::Value;

use super::args::{R, fail, s, want};

/// A full semantic version, for Sprig's `semver` and `semverCompare`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SemVer {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
    meta: String,
}

fn parse_semver(text: &str) -> Result<SemVer, String> {
    let base = crate::gotmpl::version::parse_version(text)?;
    let rest = text.strip_prefix('v').unwrap_or(text);
    let (core, meta) = rest.split_once('+').unwrap_or((rest, ""));
    let pre = core.split_once('-').map(|(_, p)| p).unwrap_or("");
    Ok(SemVer {
        major: base.major,
        minor: base.minor,
        patch: base.patch,
        pre: pre.to_string(),
        meta: meta.to_string(),
    })
}

fn cmp_pre(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Equal,
        (true, false) => return Greater,
        (false, true) => return Less,
        _ => {}
    }
    let (mut x, mut y) = (a.split('.'), b.split('.'));
    loop {
        match (x.next(), y.next()) {
            (None, None) => return Equal,
            (None, Some(_)) => return Less,
            (Some(_), None) => return Greater,
            (Some(p), Some(q)) => {
                let o = match (p.parse::<u64>(), q.parse::<u64>()) {
                    (Ok(m), Ok(n)) => m.cmp(&n),
                    (Ok(_), Err(_)) => Less,
                    (Err(_), Ok(_)) => Greater,
                    _ => p.cmp(q),
                };
                if o != Equal {
                    return o;
                }
            }
        }
    }
}

fn cmp_semver(a: &SemVer, b: &SemVer) -> std::cmp::Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| cmp_pre(&a.pre, &b.pre))
}

pub(super) fn semver(a: &[Value]) -> R {
    want(a, "semver", 1)?;
    let text = s(&a[0]);
    let v = parse_semver(&text).map_err(|e| fail(format!("semver: {e}")))?;
    let mut m = HashMap::new();
    m.insert("Major".to_string(), Value::from(v.major));
    m.insert("Minor".to_string(), Value::from(v.minor));
    m.insert("Patch".to_string(), Value::from(v.patch));
    m.insert("Prerelease".to_string(), Value::from(v.pre.as_str()));
    m.insert("Metadata".to_string(), Value::from(v.meta.as_str()));
    m.insert("Original".to_string(), Value::from(text));
    // Go prints a *semver.Version (and marshals it) as its String().
    let mut shown = format!("{}.{}.{}", v.major, v.minor, v.patch);
    if !v.pre.is_empty() {
        shown = format!("{shown}-{}", v.pre);
    }
    if !v.meta.is_empty() {
        shown = format!("{shown}+{}", v.meta);
    }
    m.insert(gtmpl_ng::STRINGER_KEY.to_string(), Value::from(shown));
    Ok(Value::Object(m))
}

/// One comparison of a constraint, with `x`/`*` wildcards expanded into a range.
fn constraint_holds(c: &str, v: &SemVer) -> Result<bool, String> {
    use std::cmp::Ordering::*;
    let c = c.trim();
    let (op, rest) = [
        "!=", ">=", "<=", "=>", "=<", "==", ">", "<", "=", "~>", "~", "^",
    ]
    .iter()
    .find_map(|op| c.strip_prefix(op).map(|r| (*op, r.trim())))
    .unwrap_or(("", c));
    let rest = rest.strip_prefix('v').unwrap_or(rest);
    let nums: Vec<&str> = rest
        .split(['-', '+'])
        .next()
        .unwrap_or("")
        .split('.')
        .collect();
    let wild = |p: Option<&&str>| p.is_none_or(|p| matches!(*p, "x" | "X" | "*" | ""));
    let n = |p: Option<&&str>| -> Result<u64, String> {
        match p {
            Some(p) if !wild(Some(p)) => p.parse().map_err(|_| format!("improper constraint: {c}")),
            _ => Ok(0),
        }
    };
    let (maj, min, pat) = (n(nums.first())?, n(nums.get(1))?, n(nums.get(2))?);
    let pre = rest
        .split_once('-')
        .map(|(_, p)| p.split('+').next().unwrap_or(""))
        .unwrap_or("")
        .to_string();
    let wild_major = wild(nums.first());
    let wild_minor = wild(nums.get(1));
    let wild_patch = wild(nums.get(2));
    let base = SemVer {
        major: maj,
        minor: min,
        patch: pat,
        pre,
        meta: String::new(),
    };
    // Masterminds: a version with a pre-release only satisfies constraints that have one.
    if !v.pre.is_empty() && base.pre.is_empty() {
        return Ok(false);
    }
    let upper = |level: u8| -> SemVer {
        match level {
            0 => SemVer {
                major: maj.saturating_add(1),
                minor: 0,
                patch: 0,
                pre: String::new(),
                meta: String::new(),
            },
            _ => SemVer {
                major: maj,
                minor: min.saturating_add(1),
                patch: 0,
                pre: String::new(),
                meta: String::new(),
            },
        }
    };
    let in_range =
        |lo: &SemVer, hi: &SemVer| cmp_semver(v, lo) != Less && cmp_semver(v, hi) == Less;
    let o = cmp_semver(v, &base);
    Ok(match op {
        "" | "=" | "==" => {
            if wild_major {
                true
            } else if wild_minor {
                in_range(&base, &upper(0))
            } else if wild_patch {
                in_range(&base, &upper(1))
            } else {
                o == Equal
            }
        }
        "!=" => {
            if wild_major {
                false
            } else if wild_minor {
                !in_range(&base, &upper(0))
            } else if wild_patch {
                !in_range(&base, &upper(1))
            } else {
                o != Equal
            }
        }
        ">" => {
            if wild_major {
                false
            } else if wild_minor {
                cmp_semver(v, &upper(0)) != Less
            } else if wild_patch {
                cmp_semver(v, &upper(1)) != Less
            } else {
                o == Greater
            }
        }
        ">=" | "=>" => wild_major || o != Less,
        "<" => !wild_major && o == Less,
        "<=" | "=<" => {
            if wild_major {
                true
            } else if wild_minor {
                cmp_semver(v, &upper(0)) == Less
            } else if wild_patch {
                cmp_semver(v, &upper(1)) == Less
            } else {
                o != Greater
            }
        }
        "~" | "~>" => {
            if wild_major {
                true
            } else if wild_minor || nums.len() < 2 {
                in_range(&base, &upper(0))
            } else {
                in_range(&base, &upper(1))
            }
        }
        "^" => {
            if wild_major {
                true
            } else if maj > 0 || wild_minor || nums.len() < 2 {
                in_range(&base, &upper(0))
            } else if min > 0 || wild_patch || nums.len() < 3 {
                in_range(&base, &upper(1))
            } else {
                o == Equal
            }
        }
        _ => return Err(format!("improper constraint: {c}")),
    })
}

/// Masterminds constraints: `||` alternatives of comma- or space-separated comparisons,
/// hyphen ranges, `x` wildcards, `~` and `^`.
fn satisfies(constraint: &str, v: &SemVer) -> Result<bool, String> {
    for alt in constraint.split("||") {
        let alt = alt.trim();
        if alt.is_empty() {
            return Err(format!("improper constraint: {constraint}"));
        }
        let mut ok = true;
        let tokens: Vec<&str> = alt
            .split([',', ' '])
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        let mut idx = 0;
        let mut joined: Vec<String> = Vec::new();
        while idx < tokens.len() {
            let t = tokens[idx];
            if tokens.get(idx + 1) == Some(&"-") && idx + 2 < tokens.len() {
                joined.push(format!(">={t}"));
                joined.push(format!("<={}", tokens[idx + 2]));
                idx += 3;
            } else if matches!(t, ">" | "<" | ">=" | "<=" | "=" | "!=" | "~" | "^")
                && idx + 1 < tokens.len()
            {
                joined.push(format!("{t}{}", tokens[idx + 1]));
                idx += 2;
            } else {
                joined.push(t.to_string());
                idx += 1;
            }
        }
        for c in &joined {
            if !constraint_holds(c, v)? {
                ok = false;
            }
        }
        if ok {
            return Ok(true);
        }
    }
    Ok(false)
}

pub(super) fn semver_compare(a: &[Value]) -> R {
    want(a, "semverCompare", 2)?;
    let v = parse_semver(&s(&a[1])).map_err(|e| fail(format!("semverCompare: {e}")))?;
    satisfies(&s(&a[0]), &v)
        .map(Value::from)
        .map_err(|e| fail(format!("semverCompare: {e}")))
}
