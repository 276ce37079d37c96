//! Sprig's type conversion (`atoi`, `int`, `float64`, `toDecimal`, `toString`, `toStrings`) and
//! reflection (`typeOf`, `kindOf`, `deepEqual`...).

use gtmpl_ng::Value;

use super::{
    args::{R, f, i, kind, num_f, s, type_name, want},
    json::to_serde,
};

/// `strconv.ParseInt(fmt.Sprint(v), 8, 64)`, 0 on error: `"0777"` is 511.
pub(super) fn to_decimal(a: &[Value]) -> R {
    want(a, "toDecimal", 1)?;
    let text = s(&a[0]);
    let (neg, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text.strip_prefix('+').unwrap_or(&text)),
    };
    let v = if digits.is_empty() || !digits.bytes().all(|c| (b'0'..=b'7').contains(&c)) {
        0
    } else {
        i64::from_str_radix(digits, 8).map_or(0, |v| if neg { -v } else { v })
    };
    Ok(v.into())
}

pub(super) fn type_is_like(a: &[Value]) -> R {
    want(a, "typeIsLike", 2)?;
    let (want_type, have) = (s(&a[0]), type_name(&a[1]));
    Ok((want_type == have || format!("*{want_type}") == have).into())
}

/// Sprig's `strval`: as `s`, but nil is `<nil>` (`fmt.Sprintf("%v", nil)`).
pub(super) fn strval(v: &Value) -> String {
    match v {
        Value::Nil | Value::NoValue => "<nil>".to_string(),
        other => s(other),
    }
}

pub(super) fn to_string(a: &[Value]) -> R {
    want(a, "toString", 1)?;
    Ok(strval(&a[0]).into())
}

/// Go's `strconv.Atoi`, whose error Sprig drops: decimal only, and a value out of range is
/// clamped (the value `Atoi` returns with its range error).
pub(super) fn atoi(a: &[Value]) -> R {
    want(a, "atoi", 1)?;
    let text = s(&a[0]);
    let digits = text.strip_prefix(['+', '-']).unwrap_or(&text);
    let v = match text.parse::<i64>() {
        Ok(v) => v,
        Err(_) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            if text.starts_with('-') {
                i64::MIN
            } else {
                i64::MAX
            }
        }
        Err(_) => 0,
    };
    Ok(v.into())
}

pub(super) fn int(a: &[Value]) -> R {
    want(a, "int", 1)?;
    Ok(i(&a[0]).into())
}

pub(super) fn float64(a: &[Value]) -> R {
    want(a, "float64", 1)?;
    Ok(num_f(f(&a[0])))
}

pub(super) fn to_strings(a: &[Value]) -> R {
    want(a, "toStrings", 1)?;
    let items = match &a[0] {
        // Sprig's strslice leaves nil elements out.
        Value::Array(v) => v
            .iter()
            .filter(|x| !matches!(x, Value::Nil | Value::NoValue))
            .map(|x| Value::from(s(x)))
            .collect(),
        Value::Nil | Value::NoValue => Vec::new(),
        other => vec![Value::from(s(other))],
    };
    Ok(Value::Array(items))
}

pub(super) fn type_of(a: &[Value]) -> R {
    want(a, "typeOf", 1)?;
    Ok(type_name(&a[0]).into())
}

pub(super) fn type_is(a: &[Value]) -> R {
    want(a, "typeIs", 2)?;
    Ok((s(&a[0]) == type_name(&a[1])).into())
}

pub(super) fn kind_of(a: &[Value]) -> R {
    want(a, "kindOf", 1)?;
    Ok(kind(&a[0]).into())
}

pub(super) fn kind_is(a: &[Value]) -> R {
    want(a, "kindIs", 2)?;
    Ok((s(&a[0]) == kind(&a[1])).into())
}

pub(super) fn deep_equal(a: &[Value]) -> R {
    want(a, "deepEqual", 2)?;
    Ok((to_serde(&a[0]) == to_serde(&a[1])).into())
}
