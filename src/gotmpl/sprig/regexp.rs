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
    let template = s(&a[2]);
    let r = re(&a[0])?;
    Ok(r.replace_all(&text, |caps: &regex::Captures<'_>| {
        go_expand(&template, caps, &r)
    })
    .into_owned()
    .into())
}

/// Go's `Regexp.Expand` of a replacement template: `$$` is `$`; `$name` and `${name}` take
/// the longest run of letters, digits (Unicode's, as Go's `unicode.IsLetter`/`IsDigit`) and
/// `_` as the name, a group number when it is all ASCII digits without a leading zero and
/// below 10^8, a group name otherwise (`$01`, `$1x` name groups that are not there: nothing);
/// a `$` that no name follows (`${}`, `${1`, `$-`) is written as it is.
fn go_expand(template: &str, caps: &regex::Captures<'_>, r: &regex::Regex) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some((before, after)) = rest.split_once('$') {
        out.push_str(before);
        rest = after;
        if let Some(after) = rest.strip_prefix('$') {
            out.push('$');
            rest = after;
            continue;
        }
        let Some((name, after)) = expand_name(rest) else {
            out.push('$');
            continue;
        };
        rest = after;
        let digits = name.bytes().all(|b| b.is_ascii_digit());
        let number = (digits && !(name.starts_with('0') && name.len() > 1))
            .then(|| name.parse::<usize>().ok().filter(|&n| n < 100_000_000))
            .flatten();
        let group = match number {
            Some(n) => caps.get(n),
            None => r
                .capture_names()
                .position(|g| g == Some(name))
                .and_then(|i| caps.get(i)),
        };
        if let Some(m) = group {
            out.push_str(m.as_str());
        }
    }
    out.push_str(rest);
    out
}

/// Go's `extract`: the name after a `$` (bare or in braces) and the text after it.
fn expand_name(text: &str) -> Option<(&str, &str)> {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    let (braced, body) = match text.strip_prefix('{') {
        Some(body) => (true, body),
        None => (false, text),
    };
    let end = body
        .char_indices()
        .find(|&(_, c)| {
            let letter_or_digit = matches!(
                get_general_category(c),
                G::UppercaseLetter
                    | G::LowercaseLetter
                    | G::TitlecaseLetter
                    | G::ModifierLetter
                    | G::OtherLetter
                    | G::DecimalNumber
            );
            !letter_or_digit && c != '_'
        })
        .map_or(body.len(), |(i, _)| i);
    if end == 0 {
        return None;
    }
    let name = &body[..end];
    if braced {
        let after = body[end..].strip_prefix('}')?;
        return Some((name, after));
    }
    Some((name, &body[end..]))
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
