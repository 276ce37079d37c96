//! Sprig's path functions, as Go's `path` package computes them.

use gtmpl_ng::Value;

use super::args::{R, s, want};

fn go_clean(p: &str) -> String {
    if p.is_empty() {
        return ".".to_string();
    }
    let rooted = p.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|l| *l != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    let joined = out.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

pub(super) fn base(a: &[Value]) -> R {
    want(a, "base", 1)?;
    let p = s(&a[0]);
    if p.is_empty() {
        return Ok(".".into());
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return Ok("/".into());
    }
    Ok(t.rsplit('/').next().unwrap_or(t).into())
}

pub(super) fn dir(a: &[Value]) -> R {
    want(a, "dir", 1)?;
    let p = s(&a[0]);
    let d = match p.rfind('/') {
        Some(idx) => &p[..=idx],
        None => "",
    };
    Ok(go_clean(d).into())
}

pub(super) fn clean(a: &[Value]) -> R {
    want(a, "clean", 1)?;
    Ok(go_clean(&s(&a[0])).into())
}

pub(super) fn ext(a: &[Value]) -> R {
    want(a, "ext", 1)?;
    let p = s(&a[0]);
    let last = p.rsplit('/').next().unwrap_or("");
    Ok(last.rfind('.').map(|i| &last[i..]).unwrap_or("").into())
}

pub(super) fn is_abs(a: &[Value]) -> R {
    want(a, "isAbs", 1)?;
    Ok(s(&a[0]).starts_with('/').into())
}
