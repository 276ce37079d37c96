//! Go's `encoding/json` output for template values: what Sprig's `toJson` (`json.Marshal`),
//! `toRawJson` (an encoder without HTML escaping) and `toPrettyJson` (`json.MarshalIndent`
//! with two spaces) write. As Go: `<`, `>` and `&` are `\u003c`, `\u003e`, `\u0026` unless
//! raw; U+2028 and U+2029 are always escaped; control characters are `\b \f \n \r \t` or
//! `\u00XX`; floats are written in the shortest form, with an exponent only below 1e-6 and
//! from 1e21 (`1e-7`, `1e+21`); map keys are sorted; NaN and the infinities are errors.

use gtmpl_ng::{NumberKind, STRINGER_KEY, Value};

#[derive(Clone, Copy)]
pub struct Style {
    pub escape_html: bool,
    pub indent: bool,
}

/// The JSON text of `v`, or Go's error for a value JSON cannot hold.
pub fn encode(v: &Value, style: Style) -> Result<String, String> {
    let mut out = String::new();
    write_value(&mut out, v, style, 0)?;
    Ok(out)
}

fn newline(out: &mut String, style: Style, depth: usize) {
    if style.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    }
}

fn write_value(out: &mut String, v: &Value, style: Style, depth: usize) -> Result<(), String> {
    match v {
        Value::NoValue | Value::Nil | Value::Function(_) => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::String(s) => write_string(out, s, style.escape_html),
        Value::Number(n) => match n.kind() {
            NumberKind::Signed(x) => out.push_str(&x.to_string()),
            NumberKind::Unsigned(x) => out.push_str(&x.to_string()),
            NumberKind::Float(x) => out.push_str(&float(x)?),
        },
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, style, depth + 1);
                write_value(out, item, style, depth + 1)?;
            }
            newline(out, style, depth);
            out.push(']');
        }
        Value::Object(m) | Value::Map(m) => {
            // A Stringer (Sprig's semver) marshals as its text (semver's MarshalJSON).
            if let Some(Value::String(text)) = m.get(STRINGER_KEY) {
                write_string(out, text, style.escape_html);
                return Ok(());
            }
            if m.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, style, depth + 1);
                write_string(out, key, style.escape_html);
                out.push(':');
                if style.indent {
                    out.push(' ');
                }
                write_value(out, &m[key], style, depth + 1)?;
            }
            newline(out, style, depth);
            out.push('}');
        }
    }
    Ok(())
}

/// Go's `floatEncoder` for float64.
fn float(x: f64) -> Result<String, String> {
    if !x.is_finite() {
        return Err(format!("json: unsupported value: {}", go_special(x)));
    }
    let abs = x.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = format!("{x:e}");
        let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
        return Ok(if exp.starts_with('-') {
            format!("{mantissa}e{exp}")
        } else {
            format!("{mantissa}e+{exp}")
        });
    }
    Ok(format!("{x}"))
}

fn go_special(x: f64) -> &'static str {
    if x.is_nan() {
        "NaN"
    } else if x > 0.0 {
        "+Inf"
    } else {
        "-Inf"
    }
}

fn write_string(out: &mut String, s: &str, escape_html: bool) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' if escape_html => {
                out.push_str("\\u00");
                out.push(HEX[(c as usize) >> 4] as char);
                out.push(HEX[(c as usize) & 0xf] as char);
            }
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => {
                out.push_str("\\u00");
                out.push(HEX[(c as usize) >> 4] as char);
                out.push(HEX[(c as usize) & 0xf] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use gtmpl_ng::Number;
    use std::collections::HashMap;

    const MARSHAL: Style = Style {
        escape_html: true,
        indent: false,
    };

    /// What Go's json.Marshal writes for each value.
    #[test]
    fn writes_what_json_marshal_writes() {
        let f = |x: f64| Value::Number(Number::float(x));
        let cases = [
            (Value::from("<a&b>"), r#""\u003ca\u0026b\u003e""#),
            (Value::from("tab\there\u{1}\u{7f}"), r#""tab\there\u0001""#),
            (Value::from("\u{2028}é"), r#""\u2028é""#),
            (f(0.0), "0"),
            (f(-0.0), "-0"),
            (f(1.5), "1.5"),
            (f(1e20), "100000000000000000000"),
            (f(1e21), "1e+21"),
            (f(1.5e-7), "1.5e-7"),
            (f(0.000001), "0.000001"),
            (Value::from(-3i64), "-3"),
            (Value::Nil, "null"),
            (Value::Array(vec![]), "[]"),
            (Value::Map(HashMap::new()), "{}"),
        ];
        for (v, want) in cases {
            let got = encode(&v, MARSHAL).unwrap();
            // DEL (0x7f) is written as it is.
            assert_eq!(got.replace('\u{7f}', ""), want, "{v:?}");
        }
        assert_eq!(
            encode(&f(f64::NAN), MARSHAL),
            Err("json: unsupported value: NaN".into())
        );
        let m = Value::Map(HashMap::from([
            (
                "b".to_string(),
                Value::Array(vec![Value::from(1i64), f(2.5)]),
            ),
            ("a".to_string(), Value::Map(HashMap::new())),
        ]));
        assert_eq!(encode(&m, MARSHAL).unwrap(), r#"{"a":{},"b":[1,2.5]}"#);
        let pretty = Style {
            escape_html: true,
            indent: true,
        };
        assert_eq!(
            encode(&m, pretty).unwrap(),
            "{\n  \"a\": {},\n  \"b\": [\n    1,\n    2.5\n  ]\n}"
        );
        let raw = Style {
            escape_html: false,
            indent: false,
        };
        assert_eq!(encode(&Value::from("<a&b>"), raw).unwrap(), r#""<a&b>""#);
    }
}
