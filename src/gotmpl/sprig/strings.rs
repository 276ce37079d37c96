//! Sprig's string functions and string slices (`split`, `join`, `sortAlpha`...), with Go's
//! `strings` semantics.

use gtmpl_ng::{FuncError, Value};

use crate::gotmpl::limits::MAX_FUNCTION_OUTPUT;

use super::{
    args::{R, fail, i, s, want},
    types::strval,
};

pub(super) fn hello(_: &[Value]) -> R {
    Ok("Hello!".into())
}

/// `text[lo..hi]` by bytes, as Go slices: a cut inside a character shows U+FFFD.
fn bytes_of(text: &str, lo: usize, hi: usize) -> String {
    String::from_utf8_lossy(&text.as_bytes()[lo..hi]).into_owned()
}

/// goutils' `AbbreviateFull`, by bytes as Go's; its errors (widths under 4, or under 7 with
/// an offset) are "" as Sprig drops them.
fn abbreviate_full(text: &str, offset: i64, width: i64) -> String {
    const MARKER: &str = "...";
    let len = text.len() as i64;
    if text.is_empty() || width < 4 {
        return String::new();
    }
    if len <= width {
        return text.to_string();
    }
    let mut offset = offset.min(len);
    if len - offset < width - 3 {
        offset = len - (width - 3);
    }
    if offset <= 4 {
        return format!("{}{MARKER}", bytes_of(text, 0, (width - 3) as usize));
    }
    if width < 7 {
        return String::new();
    }
    if offset + width - 3 < len {
        let rest = String::from_utf8_lossy(&text.as_bytes()[offset as usize..]).into_owned();
        return format!("{MARKER}{}", abbreviate_full(&rest, 0, width - 3));
    }
    format!(
        "{MARKER}{}",
        bytes_of(text, (len - (width - 3)) as usize, text.len())
    )
}

pub(super) fn abbrev(a: &[Value]) -> R {
    want(a, "abbrev", 2)?;
    let (width, text) = (i(&a[0]), s(&a[1]));
    if width < 4 {
        return Ok(text.into());
    }
    Ok(abbreviate_full(&text, 0, width).into())
}

pub(super) fn abbrevboth(a: &[Value]) -> R {
    want(a, "abbrevboth", 3)?;
    let (left, right, text) = (i(&a[0]), i(&a[1]), s(&a[2]));
    if right < 4 || left > 0 && right < 7 {
        return Ok(text.into());
    }
    Ok(abbreviate_full(&text, left, right).into())
}

/// Go's string slicing, by bytes: a cut inside a character leaves an invalid byte, shown as
/// U+FFFD (no valid label either way); bounds Go would panic on are an error.
fn byte_slice(text: &str, lo: i64, hi: i64, name: &str) -> R {
    let len = text.len() as i64;
    if lo < 0 || hi > len || lo > hi {
        return Err(fail(format!(
            "{name}: slice bounds out of range [{lo}:{hi}] with length {len}"
        )));
    }
    Ok(
        String::from_utf8_lossy(&text.as_bytes()[lo as usize..hi as usize])
            .into_owned()
            .into(),
    )
}

/// Sprig's `trunc`: the first `n` bytes, or the last `-n`.
pub(super) fn trunc(a: &[Value]) -> R {
    want(a, "trunc", 2)?;
    let n = i(&a[0]);
    let text = s(&a[1]);
    let len = text.len() as i64;
    if n >= 0 && len > n {
        byte_slice(&text, 0, n, "trunc")
    } else if n < 0 && len + n > 0 {
        byte_slice(&text, len + n, len, "trunc")
    } else {
        Ok(text.into())
    }
}

pub(super) fn trim(a: &[Value]) -> R {
    want(a, "trim", 1)?;
    Ok(s(&a[0]).trim().into())
}

/// Go's `unicode.ToUpper` per character (simple case mapping): a character whose uppercase is
/// several (`ß`) stays as it is.
pub(super) fn upper(a: &[Value]) -> R {
    want(a, "upper", 1)?;
    Ok(s(&a[0])
        .chars()
        .map(crate::gotmpl::xstrings::to_upper)
        .collect::<String>()
        .into())
}

/// Go's `unicode.ToLower` per character: `İ` is `i` (Rust's full mapping adds a dot above).
pub(super) fn lower(a: &[Value]) -> R {
    want(a, "lower", 1)?;
    Ok(s(&a[0])
        .chars()
        .map(crate::gotmpl::xstrings::to_lower)
        .collect::<String>()
        .into())
}

/// Go's `strings.Title`: the first character after a separator in title case. A separator
/// is any ASCII character but a letter, digit or `_` (so `don't` is `Don'T`, as in Go), or a
/// non-ASCII space.
pub(super) fn title(a: &[Value]) -> R {
    want(a, "title", 1)?;
    let separator = |c: char| {
        if c.is_ascii() {
            !(c.is_ascii_alphanumeric() || c == '_')
        } else {
            c.is_whitespace()
        }
    };
    let mut prev = ' ';
    Ok(s(&a[0])
        .chars()
        .map(|c| {
            let out = if separator(prev) {
                crate::gotmpl::xstrings::to_title(c)
            } else {
                c
            };
            prev = c;
            out
        })
        .collect::<String>()
        .into())
}

/// goutils' `Uncapitalize`: the first character of each whitespace-separated word in lower
/// case.
pub(super) fn untitle(a: &[Value]) -> R {
    want(a, "untitle", 1)?;
    let mut next = true;
    Ok(s(&a[0])
        .chars()
        .map(|c| {
            if c.is_whitespace() {
                next = true;
                c
            } else if next {
                next = false;
                crate::gotmpl::xstrings::to_lower(c)
            } else {
                c
            }
        })
        .collect::<String>()
        .into())
}

/// Sprig's `substr`, by bytes as Go slices: `start < 0` is `s[:end]`, an `end` past the string
/// `s[start:]`.
pub(super) fn substr(a: &[Value]) -> R {
    want(a, "substr", 3)?;
    let (start, end, text) = (i(&a[0]), i(&a[1]), s(&a[2]));
    let len = text.len() as i64;
    if start < 0 {
        byte_slice(&text, 0, end, "substr")
    } else if end < 0 || end > len {
        byte_slice(&text, start, len, "substr")
    } else {
        byte_slice(&text, start, end, "substr")
    }
}

pub(super) fn repeat(a: &[Value]) -> R {
    want(a, "repeat", 2)?;
    // strings.Repeat panics on a negative count.
    let n = usize::try_from(i(&a[0])).map_err(|_| fail("strings: negative Repeat count"))?;
    let text = s(&a[1]);
    if n.saturating_mul(text.len()) > MAX_FUNCTION_OUTPUT {
        return Err(fail(format!(
            "repeat: the result would be longer than {} bytes",
            MAX_FUNCTION_OUTPUT
        )));
    }
    Ok(text.repeat(n).into())
}

pub(super) fn trim_all(a: &[Value]) -> R {
    want(a, "trimAll", 2)?;
    let cut: Vec<char> = s(&a[0]).chars().collect();
    Ok(s(&a[1]).trim_matches(|c| cut.contains(&c)).into())
}

pub(super) fn trim_suffix(a: &[Value]) -> R {
    want(a, "trimSuffix", 2)?;
    let (suffix, text) = (s(&a[0]), s(&a[1]));
    Ok(text
        .strip_suffix(suffix.as_str())
        .unwrap_or(&text)
        .to_string()
        .into())
}

pub(super) fn trim_prefix(a: &[Value]) -> R {
    want(a, "trimPrefix", 2)?;
    let (prefix, text) = (s(&a[0]), s(&a[1]));
    Ok(text
        .strip_prefix(prefix.as_str())
        .unwrap_or(&text)
        .to_string()
        .into())
}

/// goutils' `DeleteWhiteSpace`: byte by byte, each byte read as a Latin-1 character, so a
/// string that loses a space has its other non-ASCII characters written as Go writes them
/// (`héllo wörld` is `hÃ©llowÃ¶rld`); one without white space is returned as it is.
pub(super) fn nospace(a: &[Value]) -> R {
    want(a, "nospace", 1)?;
    let text = s(&a[0]);
    let kept: String = text
        .bytes()
        .map(char::from)
        .filter(|c| !c.is_whitespace())
        .collect();
    if kept.chars().count() == text.len() {
        return Ok(text.into());
    }
    Ok(kept.into())
}

/// goutils' `Initials`: byte by byte, each byte read as a Latin-1 character, so a word that
/// starts with `é` gives `Ã` (and bytes 0x85, 0xA0 are spaces), as Go writes it.
pub(super) fn initials(a: &[Value]) -> R {
    want(a, "initials", 1)?;
    let mut out = String::new();
    let mut gap = true;
    for b in s(&a[0]).bytes() {
        let c = char::from(b);
        if c.is_whitespace() {
            gap = true;
        } else if gap {
            out.push(c);
            gap = false;
        }
    }
    Ok(out.into())
}

/// goutils' `SwapCase`: capitals and title-case letters to lower case, small letters to upper
/// case, one character to one.
pub(super) fn swapcase(a: &[Value]) -> R {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    want(a, "swapcase", 1)?;
    Ok(s(&a[0])
        .chars()
        .map(|c| match get_general_category(c) {
            G::UppercaseLetter | G::TitlecaseLetter => crate::gotmpl::xstrings::to_lower(c),
            G::LowercaseLetter => crate::gotmpl::xstrings::to_upper(c),
            _ => c,
        })
        .collect::<String>()
        .into())
}

pub(super) fn snakecase(a: &[Value]) -> R {
    want(a, "snakecase", 1)?;
    Ok(crate::gotmpl::xstrings::snake_case(&s(&a[0])).into())
}

pub(super) fn kebabcase(a: &[Value]) -> R {
    want(a, "kebabcase", 1)?;
    Ok(crate::gotmpl::xstrings::kebab_case(&s(&a[0])).into())
}

/// Sprig v3.3.0's `camelcase` is xstrings' `ToPascalCase`.
pub(super) fn camelcase(a: &[Value]) -> R {
    want(a, "camelcase", 1)?;
    Ok(crate::gotmpl::xstrings::pascal_case(&s(&a[0])).into())
}

pub(super) fn contains(a: &[Value]) -> R {
    want(a, "contains", 2)?;
    Ok(s(&a[1]).contains(s(&a[0]).as_str()).into())
}

pub(super) fn has_prefix(a: &[Value]) -> R {
    want(a, "hasPrefix", 2)?;
    Ok(s(&a[1]).starts_with(s(&a[0]).as_str()).into())
}

pub(super) fn has_suffix(a: &[Value]) -> R {
    want(a, "hasSuffix", 2)?;
    Ok(s(&a[1]).ends_with(s(&a[0]).as_str()).into())
}

pub(super) fn quote(a: &[Value]) -> R {
    Ok(a.iter()
        .filter(|v| !matches!(v, Value::Nil | Value::NoValue))
        .map(|v| format!("{:?}", s(v)))
        .collect::<Vec<_>>()
        .join(" ")
        .into())
}

pub(super) fn squote(a: &[Value]) -> R {
    Ok(a.iter()
        .filter(|v| !matches!(v, Value::Nil | Value::NoValue))
        .map(|v| format!("'{}'", s(v)))
        .collect::<Vec<_>>()
        .join(" ")
        .into())
}

pub(super) fn cat(a: &[Value]) -> R {
    Ok(a.iter()
        .filter(|v| !matches!(v, Value::Nil | Value::NoValue))
        .map(s)
        .collect::<Vec<_>>()
        .join(" ")
        .into())
}

fn indent_by(n: i64, text: &str) -> Result<String, FuncError> {
    // Sprig pads with strings.Repeat, which panics on a negative count.
    let width = usize::try_from(n).map_err(|_| fail("strings: negative Repeat count"))?;
    let lines = text.matches('\n').count() + 1;
    if width.saturating_mul(lines).saturating_add(text.len()) > 1_000_000 {
        return Err(fail(
            "indent: the result would be longer than 1000000 bytes",
        ));
    }
    let pad = " ".repeat(width);
    Ok(format!("{pad}{}", text.replace('\n', &format!("\n{pad}"))))
}

pub(super) fn indent(a: &[Value]) -> R {
    want(a, "indent", 2)?;
    Ok(indent_by(i(&a[0]), &s(&a[1]))?.into())
}

pub(super) fn nindent(a: &[Value]) -> R {
    want(a, "nindent", 2)?;
    Ok(format!("\n{}", indent_by(i(&a[0]), &s(&a[1]))?).into())
}

pub(super) fn replace(a: &[Value]) -> R {
    want(a, "replace", 3)?;
    Ok(s(&a[2]).replace(s(&a[0]).as_str(), &s(&a[1])).into())
}

pub(super) fn plural(a: &[Value]) -> R {
    want(a, "plural", 3)?;
    Ok(if i(&a[2]) == 1 {
        a[0].clone()
    } else {
        a[1].clone()
    })
}

/// goutils' `WrapCustom` (Apache commons' WordUtils.wrap), on bytes as Go slices strings: wraps at
/// the last space within `length`, a longer word kept whole (`wrap`) or cut (`wrapWith`).
fn wrap_custom(text: &str, length: i64, newline: &str, long_words: bool) -> String {
    if text.is_empty() {
        return String::new();
    }
    let newline = if newline.is_empty() { "\n" } else { newline };
    let length = usize::try_from(length.max(1)).unwrap_or(usize::MAX);
    let b = text.as_bytes();
    let mut out: Vec<u8> = Vec::new();
    let mut offset = 0usize;
    while b.len() - offset > length {
        if b[offset] == b' ' {
            offset += 1;
            continue;
        }
        let end = (length + offset + 1).min(b.len());
        match b[offset..end].iter().rposition(|c| *c == b' ') {
            Some(at) => {
                out.extend_from_slice(&b[offset..offset + at]);
                out.extend_from_slice(newline.as_bytes());
                offset += at + 1;
            }
            None if long_words => {
                out.extend_from_slice(&b[offset..offset + length]);
                out.extend_from_slice(newline.as_bytes());
                offset += length;
            }
            None => {
                let end = offset + length;
                match b[end..].iter().position(|c| *c == b' ') {
                    None => {
                        out.extend_from_slice(&b[offset..]);
                        offset = b.len();
                    }
                    Some(i) => {
                        out.extend_from_slice(&b[offset..end + i]);
                        out.extend_from_slice(newline.as_bytes());
                        offset = end + i + 1;
                    }
                }
            }
        }
    }
    out.extend_from_slice(&b[offset..]);
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn wrap(a: &[Value]) -> R {
    want(a, "wrap", 2)?;
    Ok(wrap_custom(&s(&a[1]), i(&a[0]), "", false).into())
}

pub(super) fn wrap_with(a: &[Value]) -> R {
    want(a, "wrapWith", 3)?;
    Ok(wrap_custom(&s(&a[2]), i(&a[0]), &s(&a[1]), true).into())
}

/// Sprig's `split`/`splitn` result: a `map[string]string` of `_0`, `_1`, ...
fn parts_dict(parts: Vec<&str>) -> Value {
    Value::Object(
        parts
            .into_iter()
            .enumerate()
            .map(|(n, p)| (format!("_{n}"), Value::from(p)))
            .collect(),
    )
}

pub(super) fn split(a: &[Value]) -> R {
    want(a, "split", 2)?;
    let (sep, text) = (s(&a[0]), s(&a[1]));
    Ok(parts_dict(go_split(&text, &sep, -1)))
}

pub(super) fn splitn(a: &[Value]) -> R {
    want(a, "splitn", 3)?;
    let (sep, n, text) = (s(&a[0]), i(&a[1]), s(&a[2]));
    Ok(parts_dict(go_split(&text, &sep, n)))
}

/// Go's `strings.SplitN` (an empty separator splits into characters).
fn go_split<'a>(text: &'a str, sep: &str, n: i64) -> Vec<&'a str> {
    if n == 0 {
        return Vec::new();
    }
    if sep.is_empty() {
        let mut out: Vec<&str> = Vec::new();
        let mut idx: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        idx.push(text.len());
        for w in idx.windows(2) {
            out.push(&text[w[0]..w[1]]);
        }
        if n > 0 && out.len() > n as usize {
            let cut = idx[n as usize - 1];
            out.truncate(n as usize - 1);
            out.push(&text[cut..]);
        }
        return out;
    }
    if n < 0 {
        text.split(sep).collect()
    } else {
        text.splitn(n as usize, sep).collect()
    }
}

pub(super) fn split_list(a: &[Value]) -> R {
    want(a, "splitList", 2)?;
    let (sep, text) = (s(&a[0]), s(&a[1]));
    Ok(Value::Array(
        go_split(&text, &sep, -1)
            .into_iter()
            .map(Value::from)
            .collect(),
    ))
}

pub(super) fn join(a: &[Value]) -> R {
    want(a, "join", 2)?;
    let sep = s(&a[0]);
    let items: Vec<String> = match &a[1] {
        Value::Array(v) => v
            .iter()
            .filter(|x| !matches!(x, Value::Nil | Value::NoValue))
            .map(s)
            .collect(),
        Value::Nil | Value::NoValue => Vec::new(),
        other => vec![s(other)],
    };
    Ok(items.join(&sep).into())
}

pub(super) fn sort_alpha(a: &[Value]) -> R {
    want(a, "sortAlpha", 1)?;
    let mut items: Vec<String> = match &a[0] {
        // Sprig's strslice drops the nils of a []interface{}.
        Value::Array(v) => v
            .iter()
            .filter(|x| !matches!(x, Value::Nil | Value::NoValue))
            .map(strval)
            .collect(),
        other => vec![strval(other)],
    };
    items.sort();
    Ok(Value::Array(items.into_iter().map(Value::from).collect()))
}
