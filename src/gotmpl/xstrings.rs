//! Sprig's `snakecase`, `kebabcase` and `camelcase`: huandu/xstrings v1.5.0's `ToSnakeCase`,
//! `ToKebabCase` and `ToPascalCase` (Sprig v3.3.0 maps `camelcase` to `ToPascalCase` to keep
//! its old meaning when xstrings' `ToCamelCase` became lower camel case). Words are split
//! as xstrings splits them: a run of capitals before a capitalised word is one word
//! (`HTTPServer` is `http_server`), digits after letters start a word unless letters follow
//! them (`http2xx` is `http_2xx`, `Bld4Floor` is `bld4_floor`). Character classes are Go's
//! `unicode` package: general categories, not Rust's derived properties.

use unicode_general_category::{GeneralCategory as G, get_general_category};

fn is_upper(c: char) -> bool {
    get_general_category(c) == G::UppercaseLetter
}

fn is_letter(c: char) -> bool {
    matches!(
        get_general_category(c),
        G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter
    )
}

fn is_number(c: char) -> bool {
    matches!(
        get_general_category(c),
        G::DecimalNumber | G::LetterNumber | G::OtherNumber
    )
}

fn is_punct(c: char) -> bool {
    matches!(
        get_general_category(c),
        G::ConnectorPunctuation
            | G::DashPunctuation
            | G::OpenPunctuation
            | G::ClosePunctuation
            | G::InitialPunctuation
            | G::FinalPunctuation
            | G::OtherPunctuation
    )
}

/// Go's `unicode.IsSpace` is the White_Space property, as Rust's `is_whitespace`.
fn is_connector(c: char) -> bool {
    c == '-' || c == '_' || c.is_whitespace()
}

/// A letter that is not CJK (xstrings' `isAlphabet`).
fn is_alphabet(c: char) -> bool {
    if !is_letter(c) {
        return false;
    }
    !matches!(c, '\u{4E00}'..='\u{9FCC}' | '\u{3400}'..='\u{4D85}' | '\u{20000}'..='\u{2B81D}')
}

/// Go's `unicode.ToUpper`: the simple mapping (one character to one). Where Rust's full
/// mapping gives several characters, the simple one is the character itself, but for the
/// Greek letters with ypogegrammeni, whose simple capital is the title-case letter.
pub fn to_upper(c: char) -> char {
    let mut up = c.to_uppercase();
    match (up.next(), up.next()) {
        (Some(u), None) => u,
        _ => match c {
            '\u{1F80}'..='\u{1F87}' | '\u{1F90}'..='\u{1F97}' | '\u{1FA0}'..='\u{1FA7}' => {
                char::from_u32(c as u32 + 8).unwrap_or(c)
            }
            '\u{1FB3}' | '\u{1FC3}' | '\u{1FF3}' => char::from_u32(c as u32 + 9).unwrap_or(c),
            _ => c,
        },
    }
}

/// Go's `unicode.ToTitle`: as `to_upper`, but the Latin digraphs have their own title-case
/// letters (`ǆ` is `ǅ`) and Georgian letters stay as they are.
pub fn to_title(c: char) -> char {
    match c {
        '\u{1C4}'..='\u{1C6}' => '\u{1C5}',
        '\u{1C7}'..='\u{1C9}' => '\u{1C8}',
        '\u{1CA}'..='\u{1CC}' => '\u{1CB}',
        '\u{1F1}'..='\u{1F3}' => '\u{1F2}',
        '\u{10D0}'..='\u{10FA}' | '\u{10FD}'..='\u{10FF}' => c,
        '\u{1F88}'..='\u{1F8F}' | '\u{1F98}'..='\u{1F9F}' | '\u{1FA8}'..='\u{1FAF}' => c,
        '\u{1FBC}' | '\u{1FCC}' | '\u{1FFC}' => c,
        _ => to_upper(c),
    }
}

/// Go's `unicode.ToLower`: the simple mapping (`İ` is `i`).
pub fn to_lower(c: char) -> char {
    let mut low = c.to_lowercase();
    match (low.next(), low.next()) {
        (Some(l), None) => l,
        _ if c == '\u{130}' => 'i',
        _ => c,
    }
}

/// Go decodes U+FFFD as `utf8.RuneError`, which xstrings skips as invalid.
const RUNE_ERROR: char = '\u{FFFD}';

#[derive(Clone, Copy, PartialEq, Eq)]
enum Word {
    Invalid,
    Number,
    UpperCase,
    Alphabet,
    Connector,
    Punct,
    Other,
}

/// The first rune of `s` that is not U+FFFD and the bytes up to and with it (`nextValidRune`).
fn next_valid(s: &str, prev: char) -> (char, usize) {
    let mut size = 0;
    for c in s.chars() {
        size += c.len_utf8();
        if c != RUNE_ERROR {
            return (c, size);
        }
    }
    (prev, size)
}

/// xstrings' `nextWord`: the kind of the word at the start of `s`, the word, and the rest.
fn next_word(s: &str) -> (Word, &str, &str) {
    if s.is_empty() {
        return (Word::Invalid, "", "");
    }
    let (mut r, size) = next_valid(s, RUNE_ERROR);
    let mut offset = size;
    if r == RUNE_ERROR {
        return (Word::Invalid, &s[..offset], &s[offset..]);
    }
    let mut remaining = &s[size..];
    // Takes runes while `keep` holds, as xstrings' loops do.
    let take_while =
        |r: &mut char, offset: &mut usize, remaining: &mut &str, keep: &dyn Fn(char) -> bool| {
            while !remaining.is_empty() {
                let (c, size) = next_valid(remaining, *r);
                *r = c;
                if !keep(c) {
                    break;
                }
                *offset += size;
                *remaining = &remaining[size..];
            }
        };
    let wt = if is_connector(r) {
        take_while(&mut r, &mut offset, &mut remaining, &is_connector);
        Word::Connector
    } else if is_punct(r) {
        take_while(&mut r, &mut offset, &mut remaining, &is_punct);
        Word::Punct
    } else if is_upper(r) {
        if !remaining.is_empty() {
            let (c, size) = next_valid(remaining, r);
            r = c;
            if is_upper(c) {
                let mut prev_size = size;
                offset += size;
                remaining = &remaining[size..];
                while !remaining.is_empty() {
                    let (c, size) = next_valid(remaining, r);
                    r = c;
                    if !is_upper(c) {
                        break;
                    }
                    prev_size = size;
                    offset += size;
                    remaining = &remaining[size..];
                }
                // "HTTPStatus": the S belongs to the next word.
                if !remaining.is_empty() && is_alphabet(r) {
                    offset -= prev_size;
                    remaining = &s[offset..];
                }
            } else if is_alphabet(c) {
                offset += size;
                remaining = &remaining[size..];
                take_while(&mut r, &mut offset, &mut remaining, &|c| {
                    is_alphabet(c) && !is_upper(c)
                });
            }
        }
        Word::UpperCase
    } else if is_alphabet(r) {
        take_while(&mut r, &mut offset, &mut remaining, &|c| {
            is_alphabet(c) && !is_upper(c)
        });
        Word::Alphabet
    } else if is_number(r) {
        take_while(&mut r, &mut offset, &mut remaining, &is_number);
        Word::Number
    } else {
        take_while(&mut r, &mut offset, &mut remaining, &|c| {
            !(is_connector(c) || is_alphabet(c) || is_number(c) || is_punct(c))
        });
        Word::Other
    };
    (wt, &s[..offset], remaining)
}

/// xstrings' `toLower`: capitals and connectors of capital and connector words are mapped.
fn push_lower(buf: &mut String, wt: Word, word: &str, connector: char) {
    if wt != Word::UpperCase && wt != Word::Connector {
        buf.push_str(word);
        return;
    }
    for c in word.chars() {
        if is_connector(c) {
            buf.push(connector);
        } else if is_upper(c) {
            buf.push(to_lower(c));
        } else {
            buf.push(c);
        }
    }
}

/// xstrings' `camelCaseToLowerCase`.
fn lower_case_words(s: &str, connector: char) -> String {
    let mut buf = String::with_capacity(s.len() + 4);
    let (mut wt, mut word, mut remaining) = next_word(s);
    let is_sep = |w: Word| matches!(w, Word::Invalid | Word::Punct | Word::Connector);
    while !remaining.is_empty() {
        if wt != Word::Connector {
            push_lower(&mut buf, wt, word, connector);
        }
        let (prev, last) = (wt, word);
        (wt, word, remaining) = next_word(remaining);
        match prev {
            Word::Number => {
                while matches!(wt, Word::Alphabet | Word::Number) {
                    push_lower(&mut buf, wt, word, connector);
                    (wt, word, remaining) = next_word(remaining);
                }
                if !is_sep(wt) {
                    buf.push(connector);
                }
            }
            Word::Connector => push_lower(&mut buf, prev, last, connector),
            Word::Punct => {}
            _ => {
                if wt != Word::Number {
                    if wt != Word::Connector && wt != Word::Punct {
                        buf.push(connector);
                    }
                    continue;
                }
                if remaining.is_empty() {
                    continue;
                }
                let last = word;
                (wt, word, remaining) = next_word(remaining);
                // A number is part of the word before it ("Bld4Floor" is bld4_floor)...
                if wt != Word::Alphabet {
                    push_lower(&mut buf, Word::Number, last, connector);
                    if wt != Word::Connector && wt != Word::Punct {
                        buf.push(connector);
                    }
                    continue;
                }
                // ...unless small letters follow it ("HTTP2xx" is http_2xx).
                buf.push(connector);
                push_lower(&mut buf, Word::Number, last, connector);
                while matches!(wt, Word::Alphabet | Word::Number) {
                    push_lower(&mut buf, wt, word, connector);
                    (wt, word, remaining) = next_word(remaining);
                }
                if !is_sep(wt) {
                    buf.push(connector);
                }
            }
        }
    }
    push_lower(&mut buf, wt, word, connector);
    buf
}

pub fn snake_case(s: &str) -> String {
    lower_case_words(s, '_')
}

pub fn kebab_case(s: &str) -> String {
    lower_case_words(s, '-')
}

/// xstrings' `ToPascalCase` (`toCamelCase(str, true)`), its quirks included: a string of
/// connectors only gets its last one twice, as Go's loop writes it.
pub fn pascal_case(s: &str) -> String {
    if s.is_empty() {
        return String::new();
    }
    let mut buf = String::with_capacity(s.len());
    let mut chars = s.chars();
    let mut first_upper = false;
    let mut r0 = '\0';
    let mut read_any = false;
    for c in chars.by_ref() {
        read_any = true;
        r0 = c;
        if !is_connector(c) {
            first_upper = is_upper(c);
            r0 = to_upper(c);
            break;
        }
        buf.push(c);
    }
    let rest = chars.as_str();
    if rest.is_empty() {
        if read_any {
            buf.push(r0);
        }
        return buf;
    }
    for c in rest.chars() {
        let r1 = r0;
        r0 = c;
        if is_connector(r0) && is_connector(r1) {
            buf.push(r1);
            continue;
        }
        if is_connector(r1) {
            first_upper = is_upper(r0);
            r0 = to_upper(r0);
        } else {
            if first_upper {
                if is_upper(r0) {
                    r0 = to_lower(r0);
                } else {
                    first_upper = false;
                }
            }
            buf.push(r1);
        }
    }
    buf.push(r0);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xstrings v1.5.0's documented samples (convert.go) and its tests' cases.
    #[test]
    fn splits_words_as_xstrings_does() {
        let snake = [
            ("", ""),
            ("FirstName", "first_name"),
            ("HTTPServer", "http_server"),
            ("NoHTTPS", "no_https"),
            ("GO_PATH", "go_path"),
            ("GO PATH", "go_path"),
            ("GO-PATH", "go_path"),
            ("http2xx", "http_2xx"),
            ("HTTP20xOK", "http_20x_ok"),
            ("Duration2m3s", "duration_2m3s"),
            ("Bld4Floor3rd", "bld4_floor_3rd"),
            ("a1B2", "a1_b2"),
        ];
        for (input, want) in snake {
            assert_eq!(snake_case(input), want, "{input}");
            assert_eq!(kebab_case(input), want.replace('_', "-"), "{input}");
        }
        let pascal = [
            ("", ""),
            ("some_words", "SomeWords"),
            ("http_server", "HttpServer"),
            ("no_https", "NoHttps"),
            ("_complex__case_", "_Complex_Case_"),
            ("some words", "SomeWords"),
            ("GOLANG_IS_GREAT", "GolangIsGreat"),
            ("a", "A"),
            ("__", "___"),
        ];
        for (input, want) in pascal {
            assert_eq!(pascal_case(input), want, "{input}");
        }
    }
}
