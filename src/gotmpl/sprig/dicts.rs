//! Sprig's dictionary functions, `deepCopy` and `merge`.

use std::collections::HashMap;

use gtmpl_ng::{FuncError, Value};

use super::{
    args::{R, fail, map_of, s, truthy, type_name, want, want_min},
    types::strval,
};

pub(super) fn deep_copy(a: &[Value]) -> R {
    want(a, "deepCopy", 1)?;
    match &a[0] {
        // copystructure.Copy(nil) asks reflect.ValueOf(nil).Type(): a panic, which
        // text/template returns as the call's error.
        Value::Nil | Value::NoValue => Err(fail(
            "deepCopy: reflect: call of reflect.Value.Type on zero Value",
        )),
        v => Ok(v.clone()),
    }
}

/// mergo's Merge: every key of each source that the destination lacks (or holds as an empty
/// value), nested maps merged the same way; with `overwrite`, each source's non-empty values win.
fn merge_into(dst: &mut HashMap<String, Value>, src: &HashMap<String, Value>, overwrite: bool) {
    for (k, v) in src {
        match (dst.get_mut(k), v) {
            // mergo's deepMerge: a nil value of a source map is set only with overwrite.
            (_, Value::Nil | Value::NoValue) => {
                if overwrite {
                    dst.insert(k.clone(), Value::Nil);
                }
            }
            (Some(Value::Map(d) | Value::Object(d)), Value::Map(sm) | Value::Object(sm)) => {
                merge_into(d, sm, overwrite)
            }
            // mergo: an empty dst value takes src's; with WithOverride every src value wins,
            // empty ones too (`key: false` overwrites `key: true`).
            (Some(d), v) if !truthy(d) || overwrite => *d = v.clone(),
            (Some(_), _) => {}
            (None, v) => {
                dst.insert(k.clone(), v.clone());
            }
        }
    }
}

fn merge_with(a: &[Value], name: &str, overwrite: bool) -> R {
    want_min(a, name, 1)?;
    // A nil argument is a nil map (text/template gives a nillable parameter its zero value),
    // which mergo merges as an empty one.
    let map = |v: &Value| -> Result<HashMap<String, Value>, FuncError> {
        match v {
            Value::Nil | Value::NoValue => Ok(HashMap::new()),
            other => map_of(other, name).cloned(),
        }
    };
    let mut dst = map(&a[0])?;
    for src in &a[1..] {
        merge_into(&mut dst, &map(src)?, overwrite);
    }
    Ok(Value::Map(dst))
}

pub(super) fn merge(a: &[Value]) -> R {
    merge_with(a, "merge", false)
}

pub(super) fn merge_overwrite(a: &[Value]) -> R {
    merge_with(a, "mergeOverwrite", true)
}

pub(super) fn dict(a: &[Value]) -> R {
    let mut m = HashMap::new();
    for pair in a.chunks(2) {
        m.insert(
            strval(&pair[0]),
            pair.get(1).cloned().unwrap_or(Value::from("")),
        );
    }
    Ok(Value::Map(m))
}

pub(super) fn get(a: &[Value]) -> R {
    want(a, "get", 2)?;
    Ok(map_of(&a[0], "get")?
        .get(&s(&a[1]))
        .cloned()
        .unwrap_or_else(|| Value::from("")))
}

pub(super) fn set(a: &[Value]) -> R {
    want(a, "set", 3)?;
    if let Value::Nil | Value::NoValue = a[0] {
        return Err(fail("assignment to entry in nil map"));
    }
    let mut m = map_of(&a[0], "set")?.clone();
    m.insert(s(&a[1]), a[2].clone());
    Ok(Value::Map(m))
}

pub(super) fn unset(a: &[Value]) -> R {
    want(a, "unset", 2)?;
    let mut m = map_of(&a[0], "unset")?.clone();
    m.remove(&s(&a[1]));
    Ok(Value::Map(m))
}

pub(super) fn has_key(a: &[Value]) -> R {
    want(a, "hasKey", 2)?;
    Ok(map_of(&a[0], "hasKey")?.contains_key(&s(&a[1])).into())
}

pub(super) fn pluck(a: &[Value]) -> R {
    want_min(a, "pluck", 1)?;
    let key = s(&a[0]);
    let mut out = Vec::new();
    for d in &a[1..] {
        if let Some(v) = map_of(d, "pluck")?.get(&key) {
            out.push(v.clone());
        }
    }
    Ok(Value::Array(out))
}

/// Sprig's `keys`: each dict's keys in turn, in Go's map order, which is random; here each
/// dict's are sorted, one of the orders Go can give, the dicts staying in argument order
/// (`keys (dict "b" 1) (dict "a" 2)` is `[b a]`, as in Go) and a key of two dicts listed twice.
pub(super) fn keys(a: &[Value]) -> R {
    let mut out = Vec::new();
    for d in a {
        let mut these: Vec<&String> = map_of(d, "keys")?.keys().collect();
        these.sort();
        out.extend(these.into_iter().map(|k| Value::from(k.as_str())));
    }
    Ok(Value::Array(out))
}

pub(super) fn pick(a: &[Value]) -> R {
    want_min(a, "pick", 1)?;
    let m = map_of(&a[0], "pick")?;
    let wanted: Vec<String> = a[1..].iter().map(s).collect();
    Ok(Value::Map(
        m.iter()
            .filter(|(k, _)| wanted.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    ))
}

pub(super) fn omit(a: &[Value]) -> R {
    want_min(a, "omit", 1)?;
    let m = map_of(&a[0], "omit")?;
    let unwanted: Vec<String> = a[1..].iter().map(s).collect();
    Ok(Value::Map(
        m.iter()
            .filter(|(k, _)| !unwanted.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    ))
}

pub(super) fn values(a: &[Value]) -> R {
    want(a, "values", 1)?;
    let m = map_of(&a[0], "values")?;
    let mut pairs: Vec<_> = m.iter().collect();
    pairs.sort_by(|x, y| x.0.cmp(y.0));
    Ok(Value::Array(
        pairs.into_iter().map(|(_, v)| v.clone()).collect(),
    ))
}

/// Sprig's `dig`: its keys and each map on the way are type-asserted (`ps[i].(string)`,
/// `.(map[string]interface{})`), so anything else, a nil map or a typed map of the template
/// data included, panics there, which text/template returns as the call's error.
pub(super) fn dig(a: &[Value]) -> R {
    want_min(a, "dig", 3)?;
    let (path, rest) = a.split_at(a.len() - 2);
    let (default, mut cur) = (&rest[0], &rest[1]);
    let assertion = |v: &Value, want: &str| {
        let have = match v {
            Value::Nil | Value::NoValue => "nil",
            other => type_name(other),
        };
        fail(format!(
            "interface conversion: interface {{}} is {have}, not {want}"
        ))
    };
    if !matches!(cur, Value::Map(_)) {
        return Err(assertion(cur, "map[string]interface {}"));
    }
    let mut keys = Vec::with_capacity(path.len());
    for key in path {
        match key {
            Value::String(key) => keys.push(key),
            other => return Err(assertion(other, "string")),
        }
    }
    for key in keys {
        let Value::Map(m) = cur else {
            return Err(assertion(cur, "map[string]interface {}"));
        };
        match m.get(key) {
            Some(v) => cur = v,
            None => return Ok(default.clone()),
        }
    }
    Ok(cur.clone())
}
