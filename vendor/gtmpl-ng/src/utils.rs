use gtmpl_value_ng::Value;
use std::char;

pub fn unquote_char(s: &str, quote: char) -> Option<char> {
    if s.len() < 2 || !s.starts_with(quote) || !s.ends_with(quote) {
        return None;
    }
    let raw = &s[1..s.len() - 1];
    match unqote(raw) {
        Some((c, l)) => {
            if l == raw.len() {
                c.chars().next()
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A string token's value as Go's `strconv.Unquote` reads it.
///
/// gpu-labeler: a raw string (`` `...` ``) is taken literally, less carriage returns (upstream
/// read escapes in it, so `` `a\b` `` became a backspace); an interpreted string knows
/// Go's escapes (`\a`, `\v`, octal `\101`, `\x`, `\u`, `\U` anywhere in the string) and
/// refuses `\'`, as Go does. Bytes that are not UTF-8 (`"\xff"`) become U+FFFD.
pub fn unquote_str(s: &str) -> Option<String> {
    if let Some(raw) = s.strip_prefix('`') {
        let raw = raw.strip_suffix('`')?;
        return Some(raw.replace('\r', ""));
    }
    let raw = s.strip_prefix('"')?.strip_suffix('"')?;
    let bytes = raw.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'"' || b == b'\n' {
            return None;
        }
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let esc = *bytes.get(i + 1)?;
        i += 2;
        let simple = match esc {
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(0x0b),
            b'\\' => Some(b'\\'),
            b'"' => Some(b'"'),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            continue;
        }
        match esc {
            b'0'..=b'7' => {
                let digits = raw.get(i - 1..i + 2)?;
                let v = u32::from_str_radix(digits, 8).ok()?;
                out.push(u8::try_from(v).ok()?);
                i += 2;
            }
            b'x' => {
                let digits = raw.get(i..i + 2)?;
                if !digits.bytes().all(|d| d.is_ascii_hexdigit()) {
                    return None;
                }
                let v = u8::from_str_radix(digits, 16).ok()?;
                out.push(v);
                i += 2;
            }
            b'u' | b'U' => {
                let n = if esc == b'u' { 4 } else { 8 };
                let digits = raw.get(i..i + n)?;
                if !digits.bytes().all(|d| d.is_ascii_hexdigit()) {
                    return None;
                }
                let c = char::from_u32(u32::from_str_radix(digits, 16).ok()?)?;
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                i += n;
            }
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

fn unqote(raw: &str) -> Option<(String, usize)> {
    if raw.starts_with('\\') {
        // All recognised escape sequences have an ASCII character after the
        // backslash, so byte index 2 must exist and be a char boundary.
        // Without these guards `&raw[..2]` would panic on inputs like
        // `\…` (backslash followed by a multibyte char) or a trailing `\`.
        if raw.len() < 2 || !raw.is_char_boundary(2) {
            return None;
        }
        match &raw[..2] {
            r"\x" => extract_bytes_x(raw),
            r"\U" => extract_bytes_u32(raw),
            r"\u" => extract_bytes_u16(raw),
            r"\b" => Some(('\u{0008}'.to_string(), 2)),
            r"\f" => Some(('\u{000C}'.to_string(), 2)),
            r"\n" => Some(('\n'.to_string(), 2)),
            r"\r" => Some(('\r'.to_string(), 2)),
            r"\t" => Some(('\t'.to_string(), 2)),
            r"\'" => Some(('\''.to_string(), 2)),
            r#"\""# => Some(('\"'.to_string(), 2)),
            r#"\\"# => Some(('\\'.to_string(), 2)),
            _ => None,
        }
    } else {
        get_char(raw)
    }
}

fn get_char(s: &str) -> Option<(String, usize)> {
    s.char_indices()
        .next()
        .map(|(i, c)| (c.to_string(), i + c.len_utf8()))
}

fn extract_bytes_u32(s: &str) -> Option<(String, usize)> {
    if s.len() != 10 {
        return None;
    }
    u32::from_str_radix(&s[2..10], 16)
        .ok()
        .and_then(char::from_u32)
        .map(|c| (c.to_string(), 10))
}

fn extract_bytes_u16(s: &str) -> Option<(String, usize)> {
    let mut bytes = vec![];
    let mut i = 0;
    while s.len() > i && s.starts_with(r"\u") && s[i..].len() >= 6 {
        match u16::from_str_radix(&s[(i + 2)..(i + 6)], 16) {
            Ok(x) => bytes.push(x),
            _ => {
                return None;
            }
        };
        i += 6;
    }
    String::from_utf16(&bytes).ok().map(|s| (s, i))
}

fn extract_bytes_x(s: &str) -> Option<(String, usize)> {
    let mut bytes = vec![];
    let mut i = 0;
    while s.len() > i && s.starts_with(r"\x") && s[i..].len() >= 4 {
        match u8::from_str_radix(&s[(i + 2)..(i + 4)], 16) {
            Ok(x) => bytes.push(x),
            _ => {
                return None;
            }
        };
        i += 4;
    }
    String::from_utf8(bytes).ok().map(|s| (s, i))
}

/// Whether `val` is *absent*: a lookup that found nothing, which Go represents as an
/// invalid value and renders as `<no value>`.
///
/// Absent is not the same as nil, and the difference is load-bearing. A field access
/// on an absent receiver yields another absent value, however deep the chain, while a
/// field access on nil is an error -- Go draws the same line between an invalid
/// `reflect.Value` and a nil interface. Anything deciding emptiness or truthiness,
/// on the other hand, treats the two alike; use [`is_absent_or_nil`] there.
pub fn is_absent(val: &Value) -> bool {
    matches!(val, Value::NoValue)
}

/// Whether `val` carries no data, either because a lookup found nothing or because it
/// is explicitly nil. This is the right test for emptiness and truthiness; see
/// [`is_absent`] for the cases that have to tell the two apart.
pub fn is_absent_or_nil(val: &Value) -> bool {
    matches!(val, Value::NoValue | Value::Nil)
}

pub fn is_true(val: &Value) -> bool {
    match *val {
        Value::Bool(ref b) => *b,
        Value::String(ref s) => !s.is_empty(),
        Value::Array(ref a) => !a.is_empty(),
        Value::Object(ref o) => !o.is_empty(),
        Value::Map(ref m) => !m.is_empty(),
        Value::Function(_) => true,
        Value::NoValue | Value::Nil => false,
        // gpu-labeler: Go's `truth` is "non-zero" for every number kind; a float 0 (or -0)
        // is false. Upstream read only the unsigned view, so every float was true.
        Value::Number(ref n) => match n.kind() {
            gtmpl_value_ng::NumberKind::Unsigned(u) => u != 0,
            gtmpl_value_ng::NumberKind::Signed(i) => i != 0,
            gtmpl_value_ng::NumberKind::Float(f) => f != 0.0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_unquote_char() {
        let s = "'→'";
        let c = unquote_char(s, '\'');
        assert_eq!(c, Some('→'));
        let s = "'→←'";
        let c = unquote_char(s, '\'');
        assert_eq!(c, None);
        let s = r"'\xf0\x9f\x92\xa9'";
        let c = unquote_char(s, '\'');
        assert_eq!(c, Some('💩'));
        let s = r"'\xf0\x9f\x92\xa'";
        let c = unquote_char(s, '\'');
        assert_eq!(c, None);
        let s = r"'\xf0\x9f\x92\xa99'";
        let c = unquote_char(s, '\'');
        assert_eq!(c, None);
        let s = r"'\u263a'";
        let c = unquote_char(s, '\'');
        assert_eq!(c, Some('☺'));
        let s = r"'\uD83D\uDCA9'";
        let c = unquote_char(s, '\'');
        assert_eq!(c, Some('💩'));
        let s = r"'\uD83\uDCA9'";
        let c = unquote_char(s, '\'');
        assert_eq!(c, None);
        let s = r"'\uD83D\uDCA9B'";
        let c = unquote_char(s, '\'');
        assert_eq!(c, None);
        let s = r"'\U0001F4A9'";
        let c = unquote_char(s, '\'');
        assert_eq!(c, Some('💩'));
        let s = r"'\U0001F4A'";
        let c = unquote_char(s, '\'');
        assert_eq!(c, None);
        let s = r"'\U0001F4A99'";
        let c = unquote_char(s, '\'');
        assert_eq!(c, None);
    }

    #[test]
    fn test_unquote_str() {
        let s = r#""Fran & Freddie's Diner""#;
        let u = unquote_str(s);
        assert_eq!(u, Some("Fran & Freddie's Diner".to_owned()));
        let s = r#""Fran & Freddie's Diner\t\u263a""#;
        let u = unquote_str(s);
        assert_eq!(u, Some("Fran & Freddie's Diner\t☺".to_owned()));
    }

    #[test]
    fn test_is_true() {
        let t = Value::from(1i8);
        assert!(is_true(&t));
        let t = Value::from(0u32);
        assert!(!is_true(&t));
        assert!(!is_true(&Value::Number(gtmpl_value_ng::Number::float(0.0))));
        assert!(!is_true(&Value::Number(gtmpl_value_ng::Number::float(-0.0))));
        assert!(is_true(&Value::Number(gtmpl_value_ng::Number::float(0.5))));
        assert!(is_true(&Value::from(-1i64)));
    }
}
