//! text/template's own `index`, `eq`, `ne`, `lt`, `le`, `gt`, `ge`, with Go's kinds and Go's
//! errors.

use std::collections::HashMap;

use gtmpl_ng::{FuncError, Value};

use super::args::{R, fail, number_f64, type_name, want};

/// text/template's `index` (funcs.go `index`, `indexArg`, `prepareArg`): each key in turn, a
/// list or string by an integer, a map by a string. A key a map lacks gives the zero value of
/// the map's element type, as Go's `MapIndex` misses do: `""` in NFD's matched elements, an
/// empty map or list for a domain or feature the rule did not match, no value in a dict.
pub(super) fn go_index(a: &[Value]) -> R {
    let Some((first, keys)) = a.split_first() else {
        return Err(FuncError::AtLeastXArgs("index".into(), 1));
    };
    if matches!(first, Value::Nil | Value::NoValue) {
        return Err(fail("index of untyped nil"));
    }
    let mut cur = first.clone();
    let mut byte = false;
    for key in keys {
        cur = match &cur {
            // A version is a pointer to a struct in Go: no index.
            Value::Object(m) if m.contains_key(gtmpl_ng::STRINGER_KEY) => {
                return Err(fail("can't index item of type semver.Version"));
            }
            Value::Map(m) | Value::Object(m) => {
                let key = match key {
                    Value::String(k) => k,
                    Value::Nil | Value::NoValue => {
                        return Err(fail("value is nil; should be of type string"));
                    }
                    other => {
                        return Err(fail(format!(
                            "value has type {}; should be string",
                            type_name(other)
                        )));
                    }
                };
                match (m.get(key), &cur) {
                    (Some(v), _) => v.clone(),
                    // A dict's element type is interface{}: its zero value is nil.
                    (None, Value::Map(_)) => Value::NoValue,
                    // The template data's maps are typed as NFD's (`object_type`): domains map
                    // to features, features to lists of elements, elements to strings.
                    (None, _) => match gtmpl_ng::object_type(m) {
                        "nodefeaturerule.matchedFeatures" => Value::Object(HashMap::new()),
                        "nodefeaturerule.domainMatchedFeatures" => Value::Array(Vec::new()),
                        _ => Value::from(""),
                    },
                }
            }
            Value::Array(items) => {
                let n = index_arg(key, items.len())?;
                items
                    .get(n)
                    .cloned()
                    .ok_or_else(|| fail("reflect: slice index out of range"))?
            }
            Value::String(text) => {
                let n = index_arg(key, text.len())?;
                byte = true;
                // A byte of a string is a uint8, which prints as a number.
                let byte = text
                    .as_bytes()
                    .get(n)
                    .ok_or_else(|| fail("reflect: string index out of range"))?;
                Value::from(u64::from(*byte))
            }
            // A dict's missing key is a nil interface; Go's `indirect` finds nothing there.
            Value::Nil | Value::NoValue => return Err(fail("index of nil pointer")),
            other => {
                // The byte of a string is Go's uint8.
                let name = if byte { "uint8" } else { type_name(other) };
                return Err(fail(format!("can't index item of type {name}")));
            }
        };
    }
    Ok(cur)
}

/// Go's `indexArg`: an integer key within `0..=len` (`len` itself fails afterwards, in
/// `reflect.Value.Index`, as Go's does).
fn index_arg(key: &Value, len: usize) -> Result<usize, FuncError> {
    let x = match key {
        Value::Number(n) => match n.kind() {
            gtmpl_ng::NumberKind::Signed(x) => i128::from(x),
            gtmpl_ng::NumberKind::Unsigned(x) => i128::from(x),
            gtmpl_ng::NumberKind::Float(_) => {
                return Err(fail("cannot index slice/array with type float64"));
            }
        },
        Value::Nil | Value::NoValue => return Err(fail("cannot index slice/array with nil")),
        other => {
            return Err(fail(format!(
                "cannot index slice/array with type {}",
                type_name(other)
            )));
        }
    };
    if x < 0 || x > len as i128 {
        return Err(fail(format!("index out of range: {x}")));
    }
    Ok(x as usize)
}

/// Go's `basicKind` of a value, for the comparison functions.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Bool,
    Int,
    Float,
    String,
    Invalid,
    Other,
}

pub(super) fn basic_kind(v: &Value) -> Kind {
    match v {
        Value::Bool(_) => Kind::Bool,
        Value::String(_) => Kind::String,
        Value::Number(n) => match n.kind() {
            gtmpl_ng::NumberKind::Float(_) => Kind::Float,
            _ => Kind::Int,
        },
        Value::Nil | Value::NoValue => Kind::Invalid,
        _ => Kind::Other,
    }
}

/// An integer of either sign as one type (Go compares int and uint by value).
pub(super) fn int_value(v: &Value) -> i128 {
    match v {
        Value::Number(n) => match n.kind() {
            gtmpl_ng::NumberKind::Signed(x) => i128::from(x),
            gtmpl_ng::NumberKind::Unsigned(x) => i128::from(x),
            gtmpl_ng::NumberKind::Float(x) => x as i128,
        },
        _ => 0,
    }
}

pub(super) fn float_value(v: &Value) -> f64 {
    match v {
        Value::Number(n) => number_f64(n),
        _ => 0.0,
    }
}

const BAD_COMPARISON: &str = "incompatible types for comparison";

const BAD_COMPARISON_TYPE: &str = "invalid type for comparison";

/// Go's `eq` of two values: kinds must agree (ints of either sign do); a missing value
/// equals nothing; lists and maps cannot be compared.
fn eq_one(x: &Value, y: &Value) -> Result<bool, FuncError> {
    let (kx, ky) = (basic_kind(x), basic_kind(y));
    if kx != ky {
        if kx == Kind::Invalid || ky == Kind::Invalid {
            return Ok(false);
        }
        return Err(fail(BAD_COMPARISON));
    }
    Ok(match kx {
        Kind::Bool => matches!((x, y), (Value::Bool(a), Value::Bool(b)) if a == b),
        Kind::Int => int_value(x) == int_value(y),
        Kind::Float => float_value(x) == float_value(y),
        Kind::String => matches!((x, y), (Value::String(a), Value::String(b)) if a == b),
        Kind::Invalid => true,
        Kind::Other => {
            // A Stringer (semver) is a pointer in Go: two of them are never the same.
            let stringer = |v: &Value| matches!(v, Value::Object(m) | Value::Map(m) if m.contains_key(gtmpl_ng::STRINGER_KEY));
            if stringer(x) && stringer(y) {
                false
            } else {
                return Err(fail(format!("non-comparable type {x}: {}", type_name(x))));
            }
        }
    })
}

pub(super) fn go_eq(a: &[Value]) -> R {
    let Some((first, rest)) = a.split_first() else {
        return Err(FuncError::AtLeastXArgs("eq".into(), 1));
    };
    if rest.is_empty() {
        return Err(fail("missing argument for comparison"));
    }
    for y in rest {
        if eq_one(first, y)? {
            return Ok(true.into());
        }
    }
    Ok(false.into())
}

pub(super) fn go_ne(a: &[Value]) -> R {
    want(a, "ne", 2)?;
    Ok((!eq_one(&a[0], &a[1])?).into())
}

/// Go's `lt`: numbers and strings of one kind; bools, lists, maps and nil cannot be ordered.
fn lt_one(x: &Value, y: &Value) -> Result<bool, FuncError> {
    let (kx, ky) = (basic_kind(x), basic_kind(y));
    for k in [kx, ky] {
        if matches!(k, Kind::Invalid | Kind::Other) {
            return Err(fail(BAD_COMPARISON_TYPE));
        }
    }
    if kx != ky {
        return Err(fail(BAD_COMPARISON));
    }
    match kx {
        Kind::Int => Ok(int_value(x) < int_value(y)),
        Kind::Float => Ok(float_value(x) < float_value(y)),
        Kind::String => Ok(matches!((x, y), (Value::String(a), Value::String(b)) if a < b)),
        _ => Err(fail(BAD_COMPARISON_TYPE)),
    }
}

pub(super) fn go_lt(a: &[Value]) -> R {
    want(a, "lt", 2)?;
    Ok(lt_one(&a[0], &a[1])?.into())
}

pub(super) fn go_le(a: &[Value]) -> R {
    want(a, "le", 2)?;
    Ok((lt_one(&a[0], &a[1])? || eq_one(&a[0], &a[1])?).into())
}

pub(super) fn go_gt(a: &[Value]) -> R {
    want(a, "gt", 2)?;
    Ok((!(lt_one(&a[0], &a[1])? || eq_one(&a[0], &a[1])?)).into())
}

pub(super) fn go_ge(a: &[Value]) -> R {
    want(a, "ge", 2)?;
    Ok((!lt_one(&a[0], &a[1])?).into())
}
