//! Sprig's regular-expression functions, with Go's `regexp` semantics (patterns in Go's syntax,
//! Go's `Split` and `FindAll`).

use gtmpl_ng::{FuncError, Value};

use super::args::{R, fail, i, s, want};

fn re(pattern: &Value) -> Result<regex::Regex, FuncError> {
    crate::gotmpl::regexp::compile_go_regex(&s(pattern))
        .map_err(|e| fail(format!("invalid regexp: {e}")))
}

pub(super) fn must_regex_match(a: &[Value]) -> R {
    want(a, "mustRegexMatch", 2)?;
    Ok(re(&a[0])?.is_match(&s(&a[1])).into())
}

/// Sprig drops the error: an invalid pattern matches nothing.
pub(super) fn regex_match(a: &[Value]) -> R {
    want(a, "regexMatch", 2)?;
    Ok(must_regex_match(a).unwrap_or(Value::Bool(false)))
}

pub(super) fn regex_find(a: &[Value]) -> R {
    want(a, "regexFind", 2)?;
    let text = s(&a[1]);
    Ok(re(&a[0])?
        .find(&text)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default()
        .into())
}

pub(super) fn regex_find_all(a: &[Value]) -> R {
    want(a, "regexFindAll", 3)?;
    let text = s(&a[1]);
    let n = i(&a[2]);
    let r = re(&a[0])?;
    let it = r.find_iter(&text).map(|m| Value::from(m.as_str()));
    Ok(Value::Array(if n < 0 {
        it.collect()
    } else {
        it.take(n as usize).collect()
    }))
}

pub(super) fn regex_replace_all(a: &[Value]) -> R {
    want(a, "regexReplaceAll", 3)?;
    let text = s(&a[1]);
    Ok(re(&a[0])?
        .replace_all(&text, s(&a[2]).as_str())
        .into_owned()
        .into())
}

pub(super) fn regex_replace_all_literal(a: &[Value]) -> R {
    want(a, "regexReplaceAllLiteral", 3)?;
    let text = s(&a[1]);
    let repl = s(&a[2]);
    Ok(re(&a[0])?
        .replace_all(&text, regex::NoExpand(&repl))
        .into_owned()
        .into())
}

pub(super) fn regex_split(a: &[Value]) -> R {
    want(a, "regexSplit", 3)?;
    let text = s(&a[1]);
    let n = i(&a[2]);
    let r = re(&a[0])?;
    Ok(Value::Array(
        go_regex_split(&r, &a[0], &text, n)
            .into_iter()
            .map(Value::from)
            .collect(),
    ))
}

/// Go's `regexp.Split(s, n)`: the texts between the matches, where an empty match right at
/// the start of the text adds no empty first piece (`regexSplit "" "abc" -1` is `[a b c]`), and
/// an empty text splits into `[""]` unless the pattern is empty.
fn go_regex_split<'t>(r: &regex::Regex, pattern: &Value, text: &'t str, n: i64) -> Vec<&'t str> {
    if n == 0 {
        return Vec::new();
    }
    if !s(pattern).is_empty() && text.is_empty() {
        return vec![""];
    }
    let mut out = Vec::new();
    let (mut beg, mut end) = (0, 0);
    for m in go_find_all(r, text) {
        if n > 0 && out.len() as i64 == n - 1 {
            break;
        }
        end = m.0;
        if m.1 != 0 {
            out.push(&text[beg..end]);
        }
        beg = m.1;
    }
    if end != text.len() {
        out.push(&text[beg..]);
    }
    out
}

/// Go's `FindAllStringIndex(s, -1)`: leftmost-first matches, where an empty match right after
/// the previous match is not one, and the search moves on by one character after an empty one.
fn go_find_all(r: &regex::Regex, text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut prev_end: Option<usize> = None;
    while pos <= text.len() {
        let Some(m) = r.find_at(text, pos) else {
            break;
        };
        let (a, b) = (m.start(), m.end());
        let accept = !(b == a && prev_end == Some(a));
        if b == a {
            // Move past one character (Go advances by the rune's width).
            pos = text[b..]
                .chars()
                .next()
                .map_or(text.len() + 1, |c| b + c.len_utf8());
        } else {
            pos = b;
        }
        if accept {
            out.push((a, b));
            prev_end = Some(b);
        }
    }
    out
}

/// Go's `regexp.QuoteMeta`: a backslash before each of `\.+*?()|[]{}^$`, nothing else.
pub(super) fn regex_quote_meta(a: &[Value]) -> R {
    want(a, "regexQuoteMeta", 1)?;
    let mut out = String::new();
    for c in s(&a[0]).chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    Ok(out.into())
}
