//! Sprig's defaults and flow control: `default`, `empty`, `coalesce`, `all`, `any`, `compact`,
//! `ternary`, `fail`.

use gtmpl_ng::Value;

use super::args::{R, fail, list_of, s, truthy, want, want_min};

pub(super) fn default(a: &[Value]) -> R {
    want_min(a, "default", 1)?;
    Ok(match a.get(1) {
        Some(g) if truthy(g) => g.clone(),
        _ => a[0].clone(),
    })
}

pub(super) fn empty(a: &[Value]) -> R {
    want(a, "empty", 1)?;
    Ok((!truthy(&a[0])).into())
}

pub(super) fn coalesce(a: &[Value]) -> R {
    Ok(a.iter().find(|v| truthy(v)).cloned().unwrap_or(Value::Nil))
}

pub(super) fn all_fn(a: &[Value]) -> R {
    Ok(a.iter().all(truthy).into())
}

pub(super) fn any(a: &[Value]) -> R {
    Ok(a.iter().any(truthy).into())
}

pub(super) fn compact(a: &[Value]) -> R {
    want(a, "compact", 1)?;
    Ok(Value::Array(
        list_of(&a[0], "compact")?
            .iter()
            .filter(|v| truthy(v))
            .cloned()
            .collect(),
    ))
}

pub(super) fn ternary(a: &[Value]) -> R {
    want(a, "ternary", 3)?;
    Ok(if truthy(&a[2]) {
        a[0].clone()
    } else {
        a[1].clone()
    })
}

pub(super) fn fail_fn(a: &[Value]) -> R {
    want(a, "fail", 1)?;
    Err(fail(s(&a[0])))
}
