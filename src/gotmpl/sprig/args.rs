//! What every family shares: arguments as text/template checks them before a call (Go's
//! parameter kinds), a value as text the way Sprig's `strval` writes it (Go's `%v`), spf13/cast's
//! and strconv's numbers, lists, maps and Go's truth.

use std::collections::HashMap;

use gtmpl_ng::{FuncError, Number, Value};

pub(super) type R = Result<Value, FuncError>;

pub(super) fn fail(msg: impl Into<String>) -> FuncError {
    FuncError::Generic(msg.into())
}

/// Go's parameter kinds, as text/template checks an argument before it calls a function.
#[derive(Clone, Copy)]
pub(super) enum Go {
    /// `string`
    S,
    /// `int` (any integer; a float only when integral, as an untyped constant `3.0` may be)
    I,
    /// `bool`
    B,
    /// `map[string]interface{}`: a dict, nil (a nil map), and also a matched element, which Go
    /// types `nodefeaturerule.MatchedElement` and refuses (docs/sprig.md: "accepts more (map)").
    /// The template data's other maps and `split`'s `map[string]string` are refused, as in Go.
    M,
    /// `interface{}`
    A,
    /// `float64`: a number of any kind (Go takes an integer constant there, and an int64
    /// result is one kind with it here: docs/sprig.md, "accepts more (int)")
    F,
}

impl Go {
    fn name(self) -> &'static str {
        match self {
            Go::S => "string",
            Go::I => "int",
            Go::B => "bool",
            Go::M => "map[string]interface {}",
            Go::A => "interface {}",
            Go::F => "float64",
        }
    }

    fn accepts(self, v: &Value) -> bool {
        match self {
            Go::A => true,
            Go::S => matches!(v, Value::String(_)),
            Go::B => matches!(v, Value::Bool(_)),
            Go::F => matches!(v, Value::Number(_)),
            // A map parameter can be nil (text/template: reflect.Zero of the map type).
            Go::M => match v {
                Value::Map(_) | Value::Nil | Value::NoValue => true,
                Value::Object(m) => gtmpl_ng::object_type(m) == gtmpl_ng::ELEMENT_TYPE,
                _ => false,
            },
            Go::I => match v {
                Value::Number(n) => match n.kind() {
                    gtmpl_ng::NumberKind::Float(x) => x.is_finite() && x.fract() == 0.0,
                    _ => true,
                },
                _ => false,
            },
        }
    }
}

/// text/template's argument check: `{{ true | upper }}` fails with
/// "wrong type for value; expected string; got bool" before `upper` runs.
pub(super) fn check_args(a: &[Value], fixed: &[Go], rest: Option<Go>) -> Result<(), FuncError> {
    for (k, v) in a.iter().enumerate() {
        let Some(want) = fixed.get(k).copied().or(rest) else {
            break;
        };
        if !want.accepts(v) {
            return Err(fail(match v {
                Value::Nil | Value::NoValue => format!("invalid value; expected {}", want.name()),
                other => format!(
                    "wrong type for value; expected {}; got {}",
                    want.name(),
                    type_name(other)
                ),
            }));
        }
    }
    Ok(())
}

pub(super) fn want(args: &[Value], name: &str, n: usize) -> Result<(), FuncError> {
    if args.len() == n {
        Ok(())
    } else {
        Err(FuncError::ExactlyXArgs(name.to_string(), n))
    }
}

pub(super) fn want_min(args: &[Value], name: &str, n: usize) -> Result<(), FuncError> {
    if args.len() >= n {
        Ok(())
    } else {
        Err(FuncError::AtLeastXArgs(name.to_string(), n))
    }
}

/// Sprig's `strval`: strings as they are, everything else as Go's `%v`.
pub(super) fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Nil | Value::NoValue => String::new(),
        other => other.to_string(),
    }
}

/// A number's value as a float, whatever its kind.
pub(super) fn number_f64(n: &Number) -> f64 {
    n.as_f64()
        .or_else(|| n.as_i64().map(|x| x as f64))
        .or_else(|| n.as_u64().map(|x| x as f64))
        .unwrap_or(0.0)
}

/// spf13/cast's `trimZeroDecimal`: `12.0` and `12.00` are `12`; anything else as it is.
fn trim_zero_decimal(s: &str) -> &str {
    let mut found_zero = false;
    for (i, c) in s.char_indices().rev() {
        match c {
            '.' if found_zero => return &s[..i],
            '.' => {}
            '0' => found_zero = true,
            _ => return s,
        }
    }
    s
}

/// Go's `strconv.ParseInt(s, 0, 64)`: an optional sign, then `0x`/`0o`/`0b` or a leading `0`
/// (octal) or decimal digits, `_` between digits allowed; no spaces; out of range is an error.
fn go_parse_int0(s: &str) -> Option<i64> {
    let (neg, rest) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let b = rest.as_bytes();
    let prefixed = |c: u8| b.len() >= 2 && b[0] == b'0' && b[1].eq_ignore_ascii_case(&c);
    let (base, digits, prefix) = if prefixed(b'x') {
        (16, &rest[2..], true)
    } else if prefixed(b'o') {
        (8, &rest[2..], true)
    } else if prefixed(b'b') {
        (2, &rest[2..], true)
    } else if b.len() > 1 && b[0] == b'0' {
        (8, &rest[1..], false)
    } else {
        (10, rest, false)
    };
    // underscoreOK: each `_` between digits (a base prefix counts as one), none at the end.
    let bytes = digits.as_bytes();
    // Octal written `0...`: its 0 is already a digit.
    let leading_zero = base == 8 && !prefix;
    let mut prev_digit = prefix || leading_zero;
    let mut any = false;
    let mut v: u64 = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            if !prev_digit || i + 1 == bytes.len() {
                return None;
            }
            prev_digit = false;
            continue;
        }
        let d = (b as char).to_digit(base)?;
        v = v.checked_mul(u64::from(base))?.checked_add(u64::from(d))?;
        prev_digit = true;
        any = true;
    }
    if !any && !leading_zero {
        return None;
    }
    if neg {
        if v <= 1 << 63 {
            Some((v as i64).wrapping_neg())
        } else {
            None
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// Sprig's `toInt64` (spf13/cast): numbers (floats truncated), strings as Go's
/// `strconv.ParseInt(trimZeroDecimal(s), 0, 64)` (`"0300"` is octal 192, `"0x10"` 16,
/// `"12.4"` and `" 12"` are 0), booleans; anything else is 0.
pub(super) fn i(v: &Value) -> i64 {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(go_f64_to_i64))
            .or_else(|| n.as_u64().map(|u| u as i64))
            .unwrap_or(0),
        Value::String(s) => go_parse_int0(trim_zero_decimal(s)).unwrap_or(0),
        Value::Bool(b) => i64::from(*b),
        _ => 0,
    }
}

/// Go's `int64(x)` of a float64 on amd64 (CVTTSD2SI): truncated toward zero, and a value out
/// of range (or NaN) is MinInt64 (`int64 1e21` is -9223372036854775808).
fn go_f64_to_i64(x: f64) -> i64 {
    // 2^63: the first float above int64's range.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if x.is_nan() || !(-LIMIT..LIMIT).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// Sprig's `toFloat64` (spf13/cast): numbers of any kind, strings as `strconv.ParseFloat`
/// (no spaces), booleans; anything else is 0.
pub(super) fn f(v: &Value) -> f64 {
    match v {
        Value::Number(n) => number_f64(n),
        Value::String(s) => go_parse_float(s).unwrap_or(0.0),
        Value::Bool(b) => f64::from(u8::from(*b)),
        _ => 0.0,
    }
}

/// Go's `strconv.ParseFloat(s, 64)` without its error: `None` for a syntax error or a value
/// out of range (cast then gives 0). The syntax is Go's (atof.go `special`, `readFloat`,
/// `underscoreOK`): `inf`, `infinity`, `nan` in any case (a sign only before the infinities),
/// decimal mantissas with an optional exponent, hexadecimal ones (`0x1.8p1`) whose `p`
/// exponent is required, and `_` only between digits (or after a base prefix).
fn go_parse_float(s: &str) -> Option<f64> {
    let (sign, body) = match s.as_bytes().first()? {
        b'+' => (1.0, &s[1..]),
        b'-' => (-1.0, &s[1..]),
        _ => (1.0, s),
    };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(sign * f64::INFINITY);
    }
    if lower == "nan" && body.len() == s.len() {
        return Some(f64::NAN);
    }
    let b = lower.as_bytes();
    let hex = b.len() > 2 && b[0] == b'0' && b[1] == b'x';
    let mut i = if hex { 2 } else { 0 };
    let is_digit = |c: u8| c.is_ascii_digit() || hex && (b'a'..=b'f').contains(&c);
    let (mut mantissa, mut dot, mut digits, mut underscores) = (String::new(), false, 0, false);
    while i < b.len() {
        match b[i] {
            b'_' => underscores = true,
            b'.' if !dot => {
                dot = true;
                mantissa.push('.');
            }
            c if is_digit(c) => {
                digits += 1;
                mantissa.push(c as char);
            }
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    let exp_char = if hex { b'p' } else { b'e' };
    let mut exp: Option<i64> = None;
    if i < b.len() && b[i] == exp_char {
        i += 1;
        let neg = match b.get(i) {
            Some(b'+') => {
                i += 1;
                false
            }
            Some(b'-') => {
                i += 1;
                true
            }
            _ => false,
        };
        if !b.get(i).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        let mut e: i64 = 0;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            if b[i] == b'_' {
                underscores = true;
            } else if e < 10_000 {
                e = e * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        exp = Some(if neg { -e } else { e });
    } else if hex {
        return None;
    }
    if i != b.len() || underscores && !underscore_ok(&lower) {
        return None;
    }
    let v = if hex {
        // The mantissa's hex digits as an integer scaled by 2^(exp - 4 * fraction digits);
        // digits past the 30th only round (sticky), as Go's atofHex keeps them.
        let (int, frac) = mantissa.split_once('.').unwrap_or((&mantissa, ""));
        let all = format!("{int}{frac}");
        let mut m: u128 = 0;
        let mut scale = exp.unwrap_or(0) - 4 * frac.len() as i64;
        for (k, c) in all.chars().enumerate() {
            let d = u128::from(c.to_digit(16).unwrap_or(0));
            if k < 30 {
                m = m * 16 + d;
            } else {
                scale += 4;
                if d != 0 {
                    m |= 1;
                }
            }
        }
        let mut v = m as f64;
        // Scaled in steps, so that no step overflows or underflows before the last.
        while scale > 0 {
            let step = scale.min(1000);
            v *= 2f64.powi(step as i32);
            scale -= step;
        }
        while scale < 0 {
            let step = scale.max(-1000);
            v *= 2f64.powi(step as i32);
            scale -= step;
        }
        v
    } else {
        let text = match exp {
            Some(e) => format!("{mantissa}e{e}"),
            None => mantissa,
        };
        text.parse::<f64>().ok()?
    };
    // Out of range is an error (ParseFloat returns ±Inf with ErrRange).
    v.is_finite().then_some(sign * v)
}

/// strconv's `underscoreOK`: each `_` between two digits, or after a base prefix and before a
/// digit (`s` lower case, its sign still on).
fn underscore_ok(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let b = s.as_bytes();
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' && matches!(b[1], b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = b[1] == b'x';
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || hex && (b'a'..=b'f').contains(&c) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
        i += 1;
    }
    saw != b'_'
}

pub(super) fn num_f(x: f64) -> Value {
    Value::Number(Number::float(x))
}

pub(super) fn list_of<'a>(v: &'a Value, name: &str) -> Result<&'a [Value], FuncError> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(fail(format!(
            "{name}: cannot find a list in {} ({})",
            other,
            kind(other)
        ))),
    }
}

/// A map argument's entries. Nil is a nil map (text/template passes a nil argument to a map
/// parameter as the map type's zero value): it has no keys.
pub(super) fn map_of<'a>(
    v: &'a Value,
    name: &str,
) -> Result<&'a HashMap<String, Value>, FuncError> {
    static NIL: std::sync::LazyLock<HashMap<String, Value>> =
        std::sync::LazyLock::new(HashMap::new);
    match v {
        Value::Map(m) | Value::Object(m) => Ok(m),
        Value::Nil | Value::NoValue => Ok(&NIL),
        other => Err(fail(format!("{name}: {other} is not a dict"))),
    }
}

/// Go template truth (what `empty`, `default` and `if` use).
pub(super) fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) | Value::Map(m) => !m.is_empty(),
        Value::Function(_) => true,
        Value::NoValue | Value::Nil => false,
        Value::Number(n) => number_f64(n) != 0.0,
    }
}

pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(m) if m.contains_key(gtmpl_ng::STRINGER_KEY) => "ptr",
        Value::Object(_) | Value::Map(_) => "map",
        Value::Function(_) => "func",
        Value::NoValue | Value::Nil => "invalid",
        Value::Number(n) => match n.kind() {
            gtmpl_ng::NumberKind::Float(_) => "float64",
            _ => "int",
        },
    }
}

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(m) => gtmpl_ng::object_type(m),
        Value::Map(_) => "map[string]interface {}",
        Value::Function(_) => "func",
        Value::NoValue | Value::Nil => "<nil>",
        Value::Number(n) => match n.kind() {
            gtmpl_ng::NumberKind::Float(_) => "float64",
            _ => "int",
        },
    }
}
