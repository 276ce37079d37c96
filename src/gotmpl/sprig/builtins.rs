//! text/template's own `index`, `eq`, `ne`, `lt`, `le`, `gt`, `ge`, with Go's kinds and Go's
//! errors.

use std::collections::HashMap;

use gtmpl_ng::{FuncError, Value};

use super::args::{R, fail, number_f64, type_name, want};

/// A member of a map or list of the template data (any one: they share a type).
pub(super) fn member(v: &Value) -> Option<Value> {
    match v {
        Value::Object(m) | Value::Map(m) => m.values().next().cloned(),
        Value::Array(items) => items.first().cloned(),
        _ => None,
    }
}

/// The zero value of `v`'s type, as the template data's types are: a map is an empty map, a
/// list an empty list, a string "".
pub(super) fn zero_like(v: &Value) -> Value {
    match v {
        Value::Object(_) => Value::Object(HashMap::new()),
        Value::Map(_) => Value::Map(HashMap::new()),
        Value::Array(_) => Value::Array(Vec::new()),
        Value::String(_) => Value::from(""),
        _ => Value::NoValue,
    }
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
