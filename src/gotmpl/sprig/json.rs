//! Sprig's JSON functions, with Go's `encoding/json` output (`gojson`) and its reading of numbers.

use gtmpl_ng::Value;

use crate::gotmpl::gojson::{self, Style};

use super::args::{R, fail, num_f, s, want};

pub(super) fn to_serde(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::NoValue | Value::Nil | Value::Function(_) => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::String(s) => J::String(s.clone()),
        Value::Number(n) => match n.kind() {
            gtmpl_ng::NumberKind::Signed(x) => J::from(x),
            gtmpl_ng::NumberKind::Unsigned(x) => J::from(x),
            gtmpl_ng::NumberKind::Float(x) => serde_json::Number::from_f64(x)
                .map(J::Number)
                .unwrap_or(J::Null),
        },
        Value::Array(a) => J::Array(a.iter().map(to_serde).collect()),
        Value::Object(m) | Value::Map(m) => {
            let sorted: std::collections::BTreeMap<_, _> = m.iter().collect();
            J::Object(
                sorted
                    .into_iter()
                    .map(|(k, v)| (k.clone(), to_serde(v)))
                    .collect(),
            )
        }
    }
}

fn from_serde(v: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match v {
        J::Null => Value::Nil,
        J::Bool(b) => Value::Bool(*b),
        // encoding/json decodes every number into interface{} as a float64.
        J::Number(n) => num_f(n.as_f64().unwrap_or(0.0)),
        J::String(s) => Value::from(s.as_str()),
        J::Array(a) => Value::Array(a.iter().map(from_serde).collect()),
        J::Object(m) => Value::Map(m.iter().map(|(k, v)| (k.clone(), from_serde(v))).collect()),
    }
}

const MARSHAL: Style = Style {
    escape_html: true,
    indent: false,
};

const RAW: Style = Style {
    escape_html: false,
    indent: false,
};

const PRETTY: Style = Style {
    escape_html: true,
    indent: true,
};

fn json_of(a: &[Value], name: &str, style: Style) -> R {
    want(a, name, 1)?;
    gojson::encode(&a[0], style)
        .map(Value::from)
        .map_err(|e| fail(format!("{name}: {e}")))
}

/// `json.Marshal`, its error dropped (Sprig): a value JSON cannot hold gives "".
pub(super) fn to_json(a: &[Value]) -> R {
    Ok(json_of(a, "toJson", MARSHAL).unwrap_or_else(|_| Value::from("")))
}

pub(super) fn must_to_json(a: &[Value]) -> R {
    json_of(a, "mustToJson", MARSHAL)
}

/// Sprig's `toRawJson` panics on an error (the template fails), as `mustToRawJson` reports it.
pub(super) fn to_raw_json(a: &[Value]) -> R {
    json_of(a, "toRawJson", RAW)
}

pub(super) fn to_pretty_json(a: &[Value]) -> R {
    Ok(json_of(a, "toPrettyJson", PRETTY).unwrap_or_else(|_| Value::from("")))
}

pub(super) fn must_to_pretty_json(a: &[Value]) -> R {
    json_of(a, "mustToPrettyJson", PRETTY)
}

/// encoding/json's `Unmarshal` into an `interface{}`: the value, and the error it returns with
/// it. A syntax error gives no value; a number beyond float64 is nil where it stands and the
/// decoding goes on (`saveError`), its error returned at the end.
fn go_unmarshal(text: &str) -> (Value, Option<String>) {
    let text = replace_lone_surrogates(text);
    let (text, out_of_range) = nulls_for_huge_numbers(&text);
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) => (
            from_serde(&v),
            out_of_range.map(|n| {
                format!("json: cannot unmarshal number {n} into Go value of type float64")
            }),
        ),
        Err(e) => (Value::NoValue, Some(e.to_string())),
    }
}

/// `text` with each `\uXXXX` escape of a surrogate that is not the first half of a pair
/// followed by its second written `\ufffd`: encoding/json's `unquote` decodes such a one as
/// U+FFFD (`"\ud800"` is "\u{fffd}", `"\ud800\u0041"` is "\u{fffd}A"), where serde_json
/// refuses the document. A backslash outside a string is a syntax error either way.
fn replace_lone_surrogates(text: &str) -> std::borrow::Cow<'_, str> {
    let b = text.as_bytes();
    let unit = |at: usize| -> Option<u16> {
        let hex = b.get(at..at + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    };
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        match unit(i) {
            Some(0xd800..=0xdbff) if matches!(unit(i + 6), Some(0xdc00..=0xdfff)) => i += 12,
            Some(0xd800..=0xdfff) => {
                let o = out.get_or_insert_with(String::new);
                o.push_str(&text[copied..i]);
                o.push_str("\\ufffd");
                i += 6;
                copied = i;
            }
            // Any other escape: the backslash and the character it escapes.
            _ => i += 2,
        }
    }
    match out {
        Some(mut o) => {
            o.push_str(&text[copied..]);
            std::borrow::Cow::Owned(o)
        }
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// `text` with each number literal that float64 cannot hold (`1e400`) written `null`, and the
/// first such literal.
fn nulls_for_huge_numbers(text: &str) -> (std::borrow::Cow<'_, str>, Option<String>) {
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let mut first = None;
    let (mut i, mut copied) = (0, 0);
    let mut in_string = false;
    while i < b.len() {
        let c = b[i];
        if in_string {
            match c {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if c == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if c == b'-' || c.is_ascii_digit() {
            let start = i;
            i += 1;
            while i < b.len()
                && (b[i].is_ascii_digit() || matches!(b[i], b'.' | b'e' | b'E' | b'+' | b'-'))
            {
                i += 1;
            }
            let literal = &text[start..i];
            if literal.parse::<f64>().is_ok_and(f64::is_infinite) {
                let o = out.get_or_insert_with(String::new);
                o.push_str(&text[copied..start]);
                o.push_str("null");
                copied = i;
                first.get_or_insert_with(|| literal.to_string());
            }
            continue;
        }
        i += 1;
    }
    match out {
        Some(mut o) => {
            o.push_str(&text[copied..]);
            (std::borrow::Cow::Owned(o), first)
        }
        None => (std::borrow::Cow::Borrowed(text), None),
    }
}

pub(super) fn must_from_json(a: &[Value]) -> R {
    want(a, "mustFromJson", 1)?;
    match go_unmarshal(&s(&a[0])) {
        (v, None) => Ok(v),
        (_, Some(e)) => Err(fail(format!("mustFromJson: {e}"))),
    }
}

/// Sprig drops the error: invalid JSON is no value, a number out of range nil in its place.
pub(super) fn from_json(a: &[Value]) -> R {
    want(a, "fromJson", 1)?;
    Ok(go_unmarshal(&s(&a[0])).0)
}
