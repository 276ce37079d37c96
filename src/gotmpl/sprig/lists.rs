//! Sprig's list functions and integer ranges (`seq`, `until`, `untilStep`), bounded in length.

use gtmpl_ng::{FuncError, Value};

use super::{
    args::{R, fail, i, kind, list_of, s, want, want_min},
    builtins::{Kind, basic_kind, float_value, int_value},
};

/// Sprig's `seq`, like the shell's: `seq 3` is `1 2 3`, `seq 2 4`, `seq 0 2 6`, counting down
/// when the end is below the start; one string of space-separated numbers.
pub(super) fn seq(a: &[Value]) -> R {
    let p: Vec<i64> = a.iter().map(i).collect();
    let (start, stop, step) = match p.as_slice() {
        [] => return Ok("".into()),
        [end] => {
            // Go's int addition wraps: past MaxInt64 the range is empty.
            let inc = if *end < 1 { -1 } else { 1 };
            (1, end.wrapping_add(inc), inc)
        }
        [start, end] => {
            let inc = if end < start { -1 } else { 1 };
            (*start, end.wrapping_add(inc), inc)
        }
        [start, step, end] => {
            if end < start && *step > 0 {
                return Ok("".into());
            }
            let inc = if end < start { -1 } else { 1 };
            (*start, end.wrapping_add(inc), *step)
        }
        _ => return Ok("".into()),
    };
    let list = until_step(&[Value::from(start), Value::from(stop), Value::from(step)])?;
    let Value::Array(items) = list else {
        return Ok("".into());
    };
    Ok(items
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(" ")
        .into())
}

const MAX_LIST: i64 = 10_000;

pub(super) fn until(a: &[Value]) -> R {
    want(a, "until", 1)?;
    let n = i(&a[0]);
    until_step(&[
        Value::from(0i64),
        Value::from(n),
        Value::from(if n < 0 { -1i64 } else { 1 }),
    ])
}

pub(super) fn until_step(a: &[Value]) -> R {
    want(a, "untilStep", 3)?;
    let (start, stop, step) = (i(&a[0]), i(&a[1]), i(&a[2]));
    let mut out = Vec::new();
    if step == 0 || (step > 0 && start >= stop) || (step < 0 && start <= stop) {
        return Ok(Value::Array(out));
    }
    let mut x = start;
    while (step > 0 && x < stop) || (step < 0 && x > stop) {
        if out.len() as i64 >= MAX_LIST {
            return Err(fail(format!("untilStep: more than {MAX_LIST} elements")));
        }
        out.push(Value::from(x));
        // Go's int addition wraps: past MaxInt64 the count goes on from MinInt64.
        x = x.wrapping_add(step);
    }
    Ok(Value::Array(out))
}

pub(super) fn list(a: &[Value]) -> R {
    Ok(Value::Array(a.to_vec()))
}

pub(super) fn push(a: &[Value]) -> R {
    want(a, "append", 2)?;
    let mut l = list_of(&a[0], "append")?.to_vec();
    l.push(a[1].clone());
    Ok(Value::Array(l))
}

pub(super) fn prepend(a: &[Value]) -> R {
    want(a, "prepend", 2)?;
    let mut l = vec![a[1].clone()];
    l.extend(list_of(&a[0], "prepend")?.iter().cloned());
    Ok(Value::Array(l))
}

pub(super) fn first(a: &[Value]) -> R {
    want(a, "first", 1)?;
    Ok(list_of(&a[0], "first")?
        .first()
        .cloned()
        .unwrap_or(Value::Nil))
}

pub(super) fn last(a: &[Value]) -> R {
    want(a, "last", 1)?;
    Ok(list_of(&a[0], "last")?
        .last()
        .cloned()
        .unwrap_or(Value::Nil))
}

pub(super) fn rest(a: &[Value]) -> R {
    want(a, "rest", 1)?;
    let l = list_of(&a[0], "rest")?;
    Ok(Value::Array(l.iter().skip(1).cloned().collect()))
}

pub(super) fn initial(a: &[Value]) -> R {
    want(a, "initial", 1)?;
    let l = list_of(&a[0], "initial")?;
    Ok(Value::Array(l[..l.len().saturating_sub(1)].to_vec()))
}

pub(super) fn reverse(a: &[Value]) -> R {
    want(a, "reverse", 1)?;
    Ok(Value::Array(
        list_of(&a[0], "reverse")?.iter().rev().cloned().collect(),
    ))
}

/// Go's `reflect.DeepEqual` over template values: an int is never equal to a float.
fn go_deep_equal(x: &Value, y: &Value) -> bool {
    match (x, y) {
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Number(_), Value::Number(_)) => match (basic_kind(x), basic_kind(y)) {
            (Kind::Int, Kind::Int) => int_value(x) == int_value(y),
            (Kind::Float, Kind::Float) => float_value(x) == float_value(y),
            _ => false,
        },
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(p, q)| go_deep_equal(p, q))
        }
        (Value::Map(a) | Value::Object(a), Value::Map(b) | Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|w| go_deep_equal(v, w)))
        }
        (Value::Nil | Value::NoValue, Value::Nil | Value::NoValue) => true,
        _ => false,
    }
}

pub(super) fn uniq(a: &[Value]) -> R {
    want(a, "uniq", 1)?;
    let mut out: Vec<Value> = Vec::new();
    for v in list_of(&a[0], "uniq")? {
        if !out.iter().any(|o| go_deep_equal(o, v)) {
            out.push(v.clone());
        }
    }
    Ok(Value::Array(out))
}

pub(super) fn without(a: &[Value]) -> R {
    want_min(a, "without", 1)?;
    let drop = &a[1..];
    Ok(Value::Array(
        list_of(&a[0], "without")?
            .iter()
            .filter(|v| !drop.iter().any(|d| go_deep_equal(d, v)))
            .cloned()
            .collect(),
    ))
}

/// Sprig's `mustHas` (and `has`, which panics on its error): nil holds nothing; a haystack
/// that is not a list is an error.
pub(super) fn has(a: &[Value]) -> R {
    want(a, "has", 2)?;
    match &a[1] {
        Value::Array(l) => Ok(l.iter().any(|v| go_deep_equal(&a[0], v)).into()),
        Value::Nil | Value::NoValue => Ok(false.into()),
        other => Err(fail(format!("Cannot find has on type {}", kind(other)))),
    }
}

pub(super) fn slice(a: &[Value]) -> R {
    want_min(a, "slice", 1)?;
    let l = list_of(&a[0], "slice")?;
    let len = l.len();
    // Sprig returns nil (no value) for an empty list, whatever the indices.
    if len == 0 {
        return Ok(Value::NoValue);
    }
    let idx = |v: Option<&Value>, def: usize| -> Result<usize, FuncError> {
        match v {
            None => Ok(def),
            Some(v) => usize::try_from(i(v))
                .ok()
                .filter(|x| *x <= len)
                .ok_or_else(|| fail(format!("slice: index {} out of range", s(v)))),
        }
    };
    let start = idx(a.get(1), 0)?;
    let end = idx(a.get(2), len)?;
    if start > end {
        return Err(fail(format!("slice: invalid indices {start} > {end}")));
    }
    Ok(Value::Array(l[start..end].to_vec()))
}

pub(super) fn concat(a: &[Value]) -> R {
    let mut out = Vec::new();
    for l in a {
        out.extend(list_of(l, "concat")?.iter().cloned());
    }
    Ok(Value::Array(out))
}

/// Sprig's `mustChunk`, step by step: `cs = floor((len-1)/size) + 1` chunks in float64, the
/// last `floor(mod(len, size))` long (or `size` when that is 0). A size of 0 or below makes a
/// negative length for most lists, which Go's `make` panics on and text/template returns as
/// the call's error; for a few it gives no chunk (`chunk -1 (list 1 2)` is `[]`) or one
/// (`chunk -3 (list 1)` is `[[1]]`), as Go's arithmetic does.
pub(super) fn chunk(a: &[Value]) -> R {
    want(a, "chunk", 2)?;
    let items = list_of(&a[1], "chunk")?;
    let size = i(&a[0]);
    let len = items.len() as i64;
    let negative = || fail("runtime error: makeslice: len out of range");
    // Go's int() of a float64 on amd64: out of range or NaN (a size of 0) is MinInt64.
    let go_int = |x: f64| -> i64 {
        if x.is_nan() || x.abs() >= 9_223_372_036_854_775_808.0 {
            i64::MIN
        } else {
            x as i64
        }
    };
    let cs = go_int(((len - 1) as f64 / size as f64).floor()).wrapping_add(1);
    if cs < 0 {
        return Err(negative());
    }
    let mut out = Vec::new();
    for c in 0..cs {
        let mut clen = size;
        if c == cs - 1 {
            clen = go_int((len as f64 % size as f64).floor());
            if clen == 0 {
                clen = size;
            }
        }
        if clen < 0 {
            return Err(negative());
        }
        let mut part = Vec::new();
        for j in 0..clen {
            let ix = c.wrapping_mul(size).wrapping_add(j);
            let item = usize::try_from(ix)
                .ok()
                .and_then(|ix| items.get(ix))
                .ok_or_else(|| fail("reflect: slice index out of range"))?;
            part.push(item.clone());
        }
        out.push(Value::Array(part));
    }
    Ok(Value::Array(out))
}
