//! Go's regular expression syntax (`regexp/syntax` with `regexp.Compile`'s Perl flags, Go 1.25)
//! read as Go's parser reads it, and written out in the syntax of Rust's `regex` crate.
//!
//! The two dialects are both RE2, but each accepts what the other refuses: Go refuses stacked
//! repetition operators (`a**`, `a{2}*`), flags other than `imsU` (`(?x)`), and escapes it does
//! not know (`\u0041`); Go accepts octal escapes (`\101`), a literal `[` inside a class
//! (`[[.a.]]`), duplicate and digit-first capture names, repeated flags (`(?ii)`) and empty
//! flag groups (`(?)`). So the pattern is parsed here exactly as `regexp/syntax/parse.go`
//! parses it (same accept and refuse decisions, same error texts), and every piece is written
//! in a form that means the same thing to Rust: literals escaped, classes spelled as ranges,
//! Perl classes and `\b` ASCII-only as in Go, Unicode classes by their Go names.

/// Go's parse error codes (`regexp/syntax.ErrorCode`), with the offending text as Go quotes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    InvalidCharRange,
    InvalidEscape,
    InvalidNamedCapture,
    InvalidPerlOp,
    InvalidRepeatOp,
    InvalidRepeatSize,
    MissingBracket,
    MissingParen,
    MissingRepeatArgument,
    TrailingBackslash,
    UnexpectedParen,
}

impl Code {
    fn text(self) -> &'static str {
        match self {
            Code::InvalidCharRange => "invalid character class range",
            Code::InvalidEscape => "invalid escape sequence",
            Code::InvalidNamedCapture => "invalid named capture",
            Code::InvalidPerlOp => "invalid or unsupported Perl syntax",
            Code::InvalidRepeatOp => "invalid nested repetition operator",
            Code::InvalidRepeatSize => "invalid repeat count",
            Code::MissingBracket => "missing closing ]",
            Code::MissingParen => "missing closing )",
            Code::MissingRepeatArgument => "missing argument to repetition operator",
            Code::TrailingBackslash => "trailing backslash at end of expression",
            Code::UnexpectedParen => "unexpected )",
        }
    }
}

fn err(code: Code, expr: &str) -> String {
    format!("{}: `{expr}`", code.text())
}

/// `regexp/syntax`'s `maxRepeat`: the most any one count, or the product of nested counts.
const MAX_REPEAT: u64 = 1000;

/// The flags a pattern can change (`FoldCase`, `OneLine` inverted, `DotNL`, `NonGreedy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Flags {
    i: bool,
    m: bool,
    s: bool,
    u: bool,
}

impl Flags {
    /// Rust's spelling of the whole state: every flag on or off.
    fn spell(self) -> String {
        let (mut on, mut off) = (String::new(), String::new());
        for (set, c) in [(self.i, 'i'), (self.m, 'm'), (self.s, 's'), (self.u, 'U')] {
            if set { &mut on } else { &mut off }.push(c);
        }
        if off.is_empty() {
            on
        } else {
            format!("{on}-{off}")
        }
    }
}

/// Something a repetition operator can apply to: where it stands in the output, and the
/// least `n` for which Go's `repeatIsValid(re, n)` holds.
#[derive(Debug, Clone, Copy)]
struct Atom {
    start: usize,
    end: usize,
    /// Whether the atom is itself a repetition (a second one must group it for Rust).
    repeated: bool,
    need: u64,
}

/// An open group: the flags to restore at its `)`, and the largest `need` inside it.
#[derive(Debug)]
struct Group {
    flags: Flags,
    start: usize,
    need: u64,
}

/// Go's pattern `pattern` in Rust's syntax, or Go's parse error (`code: \`expr\``).
pub(crate) fn translate(pattern: &str) -> Result<String, String> {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut flags = Flags::default();
    let mut groups: Vec<Group> = Vec::new();
    // The need of everything in the current group so far (closed alternatives included).
    let mut need_here: u64 = 0;
    let mut last: Option<Atom> = None;
    // Where the previous token's repetition operator started, when the previous token was one.
    let mut last_repeat: Option<usize> = None;
    let mut names = std::collections::HashSet::new();
    let mut i = 0;
    while i < pattern.len() {
        let rest = &pattern[i..];
        let c = rest.chars().next().unwrap_or_default();
        let mut repeat_at = None;
        match c {
            '(' if rest.starts_with("(?") => {
                let (len, open) = perl_flags(rest, &mut flags, &mut names)?;
                match open {
                    Open::Flags(old) => {
                        if flags != old {
                            out.push_str(&format!("(?{})", flags.spell()));
                        }
                    }
                    Open::Group(old) => {
                        groups.push(Group {
                            flags: old,
                            start: out.len(),
                            need: need_here,
                        });
                        need_here = 0;
                        if flags == old {
                            out.push_str("(?:");
                        } else {
                            out.push_str(&format!("(?{}:", flags.spell()));
                        }
                        last = None;
                    }
                    Open::Capture(name) => {
                        groups.push(Group {
                            flags,
                            start: out.len(),
                            need: need_here,
                        });
                        need_here = 0;
                        match name {
                            Some(n) => out.push_str(&format!("(?P<{n}>")),
                            None => out.push('('),
                        }
                        last = None;
                    }
                }
                i += len;
            }
            '(' => {
                groups.push(Group {
                    flags,
                    start: out.len(),
                    need: need_here,
                });
                need_here = 0;
                out.push('(');
                last = None;
                i += 1;
            }
            '|' => {
                out.push('|');
                last = None;
                i += 1;
            }
            ')' => {
                let Some(g) = groups.pop() else {
                    return Err(err(Code::UnexpectedParen, pattern));
                };
                out.push(')');
                flags = g.flags;
                let inner = need_here;
                need_here = g.need.max(inner);
                last = Some(Atom {
                    start: g.start,
                    end: out.len(),
                    repeated: false,
                    need: inner,
                });
                i += 1;
            }
            '^' | '$' | '.' => {
                last = Some(push(&mut out, &c.to_string()));
                i += 1;
            }
            '[' => {
                let (len, class) = class(rest)?;
                last = Some(push(&mut out, &class));
                i += len;
            }
            '*' | '+' | '?' | '{' => {
                let (min, max, mut len) = if c == '{' {
                    match parse_repeat(rest) {
                        None => {
                            // Not a repeat: `{` is a literal.
                            last = Some(push(&mut out, "\\{"));
                            i += 1;
                            last_repeat = None;
                            continue;
                        }
                        Some((min, max, len)) => {
                            if min < 0
                                || min > MAX_REPEAT as i64
                                || max > MAX_REPEAT as i64
                                || max >= 0 && min > max
                            {
                                return Err(err(Code::InvalidRepeatSize, &rest[..len]));
                            }
                            (min, max, len)
                        }
                    }
                } else {
                    (0, 0, 1)
                };
                if rest[len..].starts_with('?') {
                    len += 1;
                }
                let after = i + len;
                if let Some(at) = last_repeat {
                    return Err(err(Code::InvalidRepeatOp, &pattern[at..after]));
                }
                let Some(atom) = last else {
                    return Err(err(Code::MissingRepeatArgument, &pattern[i..after]));
                };
                let mut need = atom.need;
                if c == '{' {
                    let m = if max < 0 { min as u64 } else { max as u64 };
                    need = match (max, m) {
                        (0, _) => 0,
                        (_, 0) => atom.need,
                        _ => m.saturating_mul(atom.need.max(1)),
                    };
                    if (min >= 2 || max >= 2) && need > MAX_REPEAT {
                        return Err(err(Code::InvalidRepeatSize, &rest[..len]));
                    }
                }
                let op = &rest[..len];
                // Flag groups written after the atom (`a(?i)*`) change nothing in it: the
                // operator goes right after the atom, as Go applies it to the atom.
                let start = atom.start;
                let mut end = atom.end;
                if atom.repeated {
                    out.insert(end, ')');
                    out.insert_str(start, "(?:");
                    end += 4;
                }
                out.insert_str(end, op);
                end += op.len();
                need_here = need_here.max(need);
                last = Some(Atom {
                    start,
                    end,
                    repeated: true,
                    need,
                });
                repeat_at = Some(i);
                i = after;
            }
            '\\' => {
                let next = rest[1..].chars().next();
                let (len, piece) = match next {
                    Some('A') => (2, Some("\\A".to_string())),
                    Some('z') => (2, Some("\\z".to_string())),
                    Some('b') => (2, Some("(?-u:\\b)".to_string())),
                    Some('B') => (2, Some("(?-u:\\B)".to_string())),
                    Some('C') => return Err(err(Code::InvalidEscape, "\\C")),
                    Some('Q') => {
                        let body = &rest[2..];
                        let (lit, len) = match body.find("\\E") {
                            Some(end) => (&body[..end], 2 + end + 2),
                            None => (body, rest.len()),
                        };
                        for ch in lit.chars() {
                            last = Some(push(&mut out, &literal(ch)));
                        }
                        i += len;
                        last_repeat = None;
                        continue;
                    }
                    _ => (0, None),
                };
                if let Some(p) = piece {
                    last = Some(push(&mut out, &p));
                    i += len;
                } else if let Some((len, class)) = unicode_class(rest)? {
                    last = Some(push(&mut out, &format!("[{class}]")));
                    i += len;
                } else if let Some(class) = perl_class(rest) {
                    last = Some(push(&mut out, &format!("[{class}]")));
                    i += 2;
                } else {
                    let (r, len) = escape(rest)?;
                    last = Some(push(&mut out, &literal_rune(r)));
                    i += len;
                }
            }
            _ => {
                last = Some(push(&mut out, &literal(c)));
                i += c.len_utf8();
            }
        }
        if let Some(a) = last
            && !a.repeated
        {
            need_here = need_here.max(a.need);
        }
        last_repeat = repeat_at;
    }
    if !groups.is_empty() {
        return Err(err(Code::MissingParen, pattern));
    }
    Ok(out)
}

fn push(out: &mut String, piece: &str) -> Atom {
    let start = out.len();
    out.push_str(piece);
    Atom {
        start,
        end: out.len(),
        repeated: false,
        need: 0,
    }
}

enum Open {
    /// `(?flags)`: the flags before.
    Flags(Flags),
    /// `(?flags:`: the flags before (restored at the `)`).
    Group(Flags),
    /// `(?P<name>` / `(?<name>`: the name, when Rust can carry it (Go allows a name to repeat
    /// and to start with a digit; Rust does not, so such a group is an unnamed capture).
    Capture(Option<String>),
}

/// Go's `parsePerlFlags` on `s` (which starts with `(?`): the length taken and what opened.
fn perl_flags(
    s: &str,
    flags: &mut Flags,
    names: &mut std::collections::HashSet<String>,
) -> Result<(usize, Open), String> {
    let b = s.as_bytes();
    let starts_with_p = b.len() > 4 && b[2] == b'P' && b[3] == b'<';
    let starts_with_name = b.len() > 3 && b[2] == b'<';
    if starts_with_p || starts_with_name {
        let expr_start = if starts_with_p { 4 } else { 3 };
        let Some(end) = s.find('>') else {
            return Err(err(Code::InvalidNamedCapture, s));
        };
        let name = &s[expr_start..end];
        if name.is_empty() || !name.bytes().all(|c| c == b'_' || c.is_ascii_alphanumeric()) {
            return Err(err(Code::InvalidNamedCapture, &s[..end + 1]));
        }
        let rust_ok = !name.as_bytes()[0].is_ascii_digit() && names.insert(name.to_string());
        return Ok((end + 1, Open::Capture(rust_ok.then(|| name.to_string()))));
    }
    let old = *flags;
    let mut f = old;
    let mut negate = false;
    let mut saw_flag = false;
    let mut at = 2;
    for c in s[2..].chars() {
        at += c.len_utf8();
        let set = !negate;
        match c {
            'i' => f.i = set,
            'm' => f.m = set,
            's' => f.s = set,
            'U' => f.u = set,
            '-' if !negate => {
                negate = true;
                saw_flag = false;
                continue;
            }
            ':' | ')' if !negate || saw_flag => {
                *flags = f;
                let open = if c == ':' {
                    Open::Group(old)
                } else {
                    Open::Flags(old)
                };
                return Ok((at, open));
            }
            _ => break,
        }
        saw_flag = true;
    }
    Err(err(Code::InvalidPerlOp, &s[..at]))
}

/// Go's `parseRepeat` on `s` (which starts with `{`): `(min, max, length)`, `max` -1 for no
/// upper bound, `min` -1 for a number too big; `None` when it is not a repeat (`{` literal).
fn parse_repeat(s: &str) -> Option<(i64, i64, usize)> {
    let b = s.as_bytes();
    let mut at = 1;
    let (min, len) = parse_int(&b[at..])?;
    at += len;
    let max;
    let mut min = min;
    match b.get(at)? {
        b',' => {
            at += 1;
            match b.get(at)? {
                b'}' => max = -1,
                _ => {
                    let (m, len) = parse_int(&b[at..])?;
                    at += len;
                    max = m;
                    if m < 0 {
                        min = -1;
                    }
                }
            }
        }
        _ => max = min,
    }
    (b.get(at)? == &b'}').then_some((min, max, at + 1))
}

/// Go's `parseInt`: decimal digits without a leading zero; -1 when 1e8 or more.
fn parse_int(b: &[u8]) -> Option<(i64, usize)> {
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits >= 2 && b[0] == b'0' {
        return None;
    }
    let mut n: i64 = 0;
    for &d in &b[..digits] {
        if n >= 100_000_000 {
            n = -1;
            break;
        }
        n = n * 10 + i64::from(d - b'0');
    }
    Some((n, digits))
}

/// Go's `parseEscape` on `s` (which starts with `\`): the rune and the length taken.
fn escape(s: &str) -> Result<(u32, usize), String> {
    let mut chars = s[1..].chars();
    let Some(c) = chars.next() else {
        return Err(err(Code::TrailingBackslash, ""));
    };
    let t = &s[1 + c.len_utf8()..];
    let tb = t.as_bytes();
    let octal = |b: Option<&u8>| b.is_some_and(|b| (b'0'..=b'7').contains(b));
    let bad = |taken: usize| Err(err(Code::InvalidEscape, &s[..taken]));
    let taken = 1 + c.len_utf8();
    match c {
        '1'..='7' | '0' if c == '0' || octal(tb.first()) => {
            let mut r = c as u32 - '0' as u32;
            let mut n = 0;
            while n < 2 && octal(tb.get(n)) {
                r = r * 8 + u32::from(tb[n] - b'0');
                n += 1;
            }
            Ok((r, taken + n))
        }
        'x' => {
            let Some(first) = t.chars().next() else {
                return bad(taken);
            };
            if first == '{' {
                let mut r: u32 = 0;
                for (k, h) in t[1..].char_indices() {
                    if h == '}' {
                        // At least one digit (every other character returned).
                        if k == 0 {
                            return bad(taken + 1 + k + 1);
                        }
                        return Ok((r, taken + 1 + k + 1));
                    }
                    let Some(v) = h.to_digit(16) else {
                        return bad(taken + 1 + k + h.len_utf8());
                    };
                    r = r * 16 + v;
                    if r > 0x10FFFF {
                        return bad(taken + 1 + k + h.len_utf8());
                    }
                }
                return bad(s.len());
            }
            let x = first.to_digit(16);
            let second = t[first.len_utf8()..].chars().next();
            let used = taken + first.len_utf8() + second.map_or(0, char::len_utf8);
            match (x, second.and_then(|c| c.to_digit(16))) {
                (Some(x), Some(y)) => Ok((x * 16 + y, used)),
                _ => bad(used),
            }
        }
        'a' => Ok((7, taken)),
        'f' => Ok((12, taken)),
        'n' => Ok((10, taken)),
        'r' => Ok((13, taken)),
        't' => Ok((9, taken)),
        'v' => Ok((11, taken)),
        c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((c as u32, taken)),
        _ => bad(taken),
    }
}

/// A literal rune in Rust's syntax, safe both outside and inside a class.
fn literal(c: char) -> String {
    if c.is_ascii_alphanumeric() || (c > '\u{7f}' && !c.is_whitespace() && !c.is_control()) {
        return c.to_string();
    }
    if c.is_ascii_graphic() {
        let escaped = regex::escape(&c.to_string());
        return escaped;
    }
    format!("\\x{{{:X}}}", c as u32)
}

/// A rune from an escape: a surrogate (which Go's parser takes, and no text can hold)
/// matches nothing.
fn literal_rune(r: u32) -> String {
    match char::from_u32(r) {
        Some(c) => literal(c),
        None => NOTHING.to_string(),
    }
}

/// A class that matches no character.
const NOTHING: &str = "[^\\x00-\\x{10FFFF}]";

/// Go's Perl classes (`perl_groups.go`), ASCII-only: the class body, without brackets.
fn perl_class(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() < 2 || b[0] != b'\\' {
        return None;
    }
    let (body, negated) = match b[1] {
        b'd' => ("0-9", false),
        b'D' => ("0-9", true),
        b's' => ("\\t\\n\\x0C\\r ", false),
        b'S' => ("\\t\\n\\x0C\\r ", true),
        b'w' => ("0-9A-Za-z_", false),
        b'W' => ("0-9A-Za-z_", true),
        _ => return None,
    };
    Some(if negated {
        format!("[^{body}]")
    } else {
        body.to_string()
    })
}

/// Go's POSIX classes (`[:alpha:]`, `[:^alpha:]`; `perl_groups.go`), as a class item.
fn posix_class(name: &str) -> Option<String> {
    let (negated, name) = match name.strip_prefix('^') {
        Some(n) => (true, n),
        None => (false, name),
    };
    let body = match name {
        "alnum" => "0-9A-Za-z",
        "alpha" => "A-Za-z",
        "ascii" => "\\x00-\\x7F",
        "blank" => "\\t ",
        "cntrl" => "\\x00-\\x1F\\x7F",
        "digit" => "0-9",
        "graph" => "!-~",
        "lower" => "a-z",
        "print" => " -~",
        "punct" => "!-/:-@\\[-`\\{-~",
        "space" => "\\t-\\r ",
        "upper" => "A-Z",
        "word" => "0-9A-Za-z_",
        "xdigit" => "0-9A-Fa-f",
        _ => return None,
    };
    Some(if negated {
        format!("[^{body}]")
    } else {
        body.to_string()
    })
}

/// Go 1.25's `unicodeTable` names: general categories, their aliases and scripts of Unicode
/// 15.0.0 (package unicode), looked up after `canonicalName` (first letter upper, the rest
/// lower, `_`, `-` and spaces dropped), which is why a script of several words
/// (`Old_Italic`) is not found, in Go as here.
fn unicode_name(name: &str) -> Option<String> {
    let mut canon = String::new();
    for c in name.chars() {
        if matches!(c, '_' | '-' | ' ') {
            continue;
        }
        if canon.is_empty() {
            canon.push(c.to_ascii_uppercase());
        } else {
            canon.push(c.to_ascii_lowercase());
        }
    }
    let class = match canon.as_str() {
        "Any" => "\\x00-\\x{10FFFF}".to_string(),
        "Assigned" => "\\P{gc=Cn}".to_string(),
        "Ascii" => "\\x00-\\x7F".to_string(),
        "Lc" => "\\p{gc=LC}".to_string(),
        _ => {
            if let Some(gc) = CATEGORIES.iter().find(|g| **g == canon) {
                format!("\\p{{gc={gc}}}")
            } else if let Some(sc) = SCRIPTS.iter().find(|s| **s == canon) {
                format!("\\p{{sc={sc}}}")
            } else if let Some((_, gc)) = CATEGORY_ALIASES.iter().find(|(a, _)| {
                let mut k = a.replace(['_', '-', ' '], "").to_ascii_lowercase();
                k[..1].make_ascii_uppercase();
                k == canon
            }) {
                format!("\\p{{gc={gc}}}")
            } else {
                return None;
            }
        }
    };
    Some(class)
}

/// `unicode.Categories` keys of Go 1.25 in canonical form (`LC` is handled as `Lc`).
const CATEGORIES: &[&str] = &[
    "C", "Cc", "Cf", "Cn", "Co", "Cs", "L", "Ll", "Lm", "Lo", "Lt", "Lu", "M", "Mc", "Me", "Mn",
    "N", "Nd", "Nl", "No", "P", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "S", "Sc", "Sk", "Sm",
    "So", "Z", "Zl", "Zp", "Zs",
];

/// `unicode.CategoryAliases` (Unicode's PropertyValueAliases.txt, `gc` rows).
const CATEGORY_ALIASES: &[(&str, &str)] = &[
    ("Cased_Letter", "LC"),
    ("Close_Punctuation", "Pe"),
    ("Combining_Mark", "M"),
    ("Connector_Punctuation", "Pc"),
    ("Control", "Cc"),
    ("Currency_Symbol", "Sc"),
    ("Dash_Punctuation", "Pd"),
    ("Decimal_Number", "Nd"),
    ("Enclosing_Mark", "Me"),
    ("Final_Punctuation", "Pf"),
    ("Format", "Cf"),
    ("Initial_Punctuation", "Pi"),
    ("Letter", "L"),
    ("Letter_Number", "Nl"),
    ("Line_Separator", "Zl"),
    ("Lowercase_Letter", "Ll"),
    ("Mark", "M"),
    ("Math_Symbol", "Sm"),
    ("Modifier_Letter", "Lm"),
    ("Modifier_Symbol", "Sk"),
    ("Nonspacing_Mark", "Mn"),
    ("Number", "N"),
    ("Open_Punctuation", "Ps"),
    ("Other", "C"),
    ("Other_Letter", "Lo"),
    ("Other_Number", "No"),
    ("Other_Punctuation", "Po"),
    ("Other_Symbol", "So"),
    ("Paragraph_Separator", "Zp"),
    ("Private_Use", "Co"),
    ("Punctuation", "P"),
    ("Separator", "Z"),
    ("Space_Separator", "Zs"),
    ("Spacing_Mark", "Mc"),
    ("Surrogate", "Cs"),
    ("Symbol", "S"),
    ("Titlecase_Letter", "Lt"),
    ("Unassigned", "Cn"),
    ("Uppercase_Letter", "Lu"),
    ("cntrl", "Cc"),
    ("digit", "Nd"),
    ("punct", "P"),
];

/// The `unicode.Scripts` keys (Unicode 15.0.0) that are their own canonical form: one word,
/// first letter upper case. The others (`Old_Italic`, `SignWriting`) cannot be found.
const SCRIPTS: &[&str] = &[
    "Adlam",
    "Ahom",
    "Arabic",
    "Armenian",
    "Avestan",
    "Balinese",
    "Bamum",
    "Batak",
    "Bengali",
    "Bhaiksuki",
    "Bopomofo",
    "Brahmi",
    "Braille",
    "Buginese",
    "Buhid",
    "Carian",
    "Chakma",
    "Cham",
    "Cherokee",
    "Chorasmian",
    "Common",
    "Coptic",
    "Cuneiform",
    "Cypriot",
    "Cyrillic",
    "Deseret",
    "Devanagari",
    "Dogra",
    "Duployan",
    "Elbasan",
    "Elymaic",
    "Ethiopic",
    "Georgian",
    "Glagolitic",
    "Gothic",
    "Grantha",
    "Greek",
    "Gujarati",
    "Gurmukhi",
    "Han",
    "Hangul",
    "Hanunoo",
    "Hatran",
    "Hebrew",
    "Hiragana",
    "Inherited",
    "Javanese",
    "Kaithi",
    "Kannada",
    "Katakana",
    "Kawi",
    "Kharoshthi",
    "Khmer",
    "Khojki",
    "Khudawadi",
    "Lao",
    "Latin",
    "Lepcha",
    "Limbu",
    "Lisu",
    "Lycian",
    "Lydian",
    "Mahajani",
    "Makasar",
    "Malayalam",
    "Mandaic",
    "Manichaean",
    "Marchen",
    "Medefaidrin",
    "Miao",
    "Modi",
    "Mongolian",
    "Mro",
    "Multani",
    "Myanmar",
    "Nabataean",
    "Nandinagari",
    "Newa",
    "Nko",
    "Nushu",
    "Ogham",
    "Oriya",
    "Osage",
    "Osmanya",
    "Palmyrene",
    "Phoenician",
    "Rejang",
    "Runic",
    "Samaritan",
    "Saurashtra",
    "Sharada",
    "Shavian",
    "Siddham",
    "Sinhala",
    "Sogdian",
    "Soyombo",
    "Sundanese",
    "Syriac",
    "Tagalog",
    "Tagbanwa",
    "Takri",
    "Tamil",
    "Tangsa",
    "Tangut",
    "Telugu",
    "Thaana",
    "Thai",
    "Tibetan",
    "Tifinagh",
    "Tirhuta",
    "Toto",
    "Ugaritic",
    "Vai",
    "Vithkuqi",
    "Wancho",
    "Yezidi",
    "Yi",
];

/// Go's `parseUnicodeClass` on `s` (which starts with `\`): `None` when it is not `\p`/`\P`,
/// else the length taken and the class body (without brackets).
fn unicode_class(s: &str) -> Result<Option<(usize, String)>, String> {
    let b = s.as_bytes();
    if b.len() < 2 || b[0] != b'\\' || (b[1] != b'p' && b[1] != b'P') {
        return Ok(None);
    }
    let mut negated = b[1] == b'P';
    let Some(c) = s[2..].chars().next() else {
        // Go's nextRune on "" gives RuneError, a one-letter name that is no table.
        return Err(err(Code::InvalidCharRange, s));
    };
    let (seq_len, name) = if c != '{' {
        (2 + c.len_utf8(), &s[2..2 + c.len_utf8()])
    } else {
        let Some(end) = s.find('}') else {
            return Err(err(Code::InvalidCharRange, s));
        };
        (end + 1, &s[3..end])
    };
    let mut name = name;
    if let Some(n) = name.strip_prefix('^') {
        negated = !negated;
        name = n;
    }
    let Some(class) = unicode_name(name) else {
        return Err(err(Code::InvalidCharRange, &s[..seq_len]));
    };
    Ok(Some((
        seq_len,
        if negated {
            format!("[^{class}]")
        } else {
            class
        },
    )))
}

/// Go's `parseClass` on `s` (which starts with `[`): the length taken and the Rust class.
fn class(s: &str) -> Result<(usize, String), String> {
    let mut out = String::from("[");
    let mut t = 1;
    if s[t..].starts_with('^') {
        out.push('^');
        t += 1;
    }
    let mut items = 0;
    let mut first = true;
    loop {
        let rest = &s[t..];
        if rest.starts_with(']') && !first {
            t += 1;
            break;
        }
        first = false;
        // POSIX `[:alnum:]`.
        if rest.len() > 2
            && rest.starts_with("[:")
            && let Some(end) = rest[2..].find(":]")
        {
            let name = &rest[..end + 4];
            let Some(body) = posix_class(&name[2..name.len() - 2]) else {
                return Err(err(Code::InvalidCharRange, name));
            };
            out.push_str(&body);
            items += 1;
            t += name.len();
            continue;
        }
        if let Some((len, body)) = unicode_class(rest)? {
            out.push_str(&body);
            items += 1;
            t += len;
            continue;
        }
        if let Some(body) = perl_class(rest) {
            out.push_str(&body);
            items += 1;
            t += 2;
            continue;
        }
        let (lo, lo_len) = class_char(rest, s)?;
        t += lo_len;
        let mut hi = lo;
        let after = &s[t..];
        if after.len() >= 2 && after.starts_with('-') && !after[1..].starts_with(']') {
            let (h, len) = class_char(&after[1..], s)?;
            if h < lo {
                return Err(err(Code::InvalidCharRange, &rest[..lo_len + 1 + len]));
            }
            hi = h;
            t += 1 + len;
        }
        // Surrogates (from `\x{D800}`) are in no text: the range loses them.
        let (lo, hi) = (
            if (0xD800..0xE000).contains(&lo) {
                0xE000
            } else {
                lo
            },
            if (0xD800..0xE000).contains(&hi) {
                0xD7FF
            } else {
                hi
            },
        );
        if lo > hi {
            continue;
        }
        out.push_str(&literal_rune(lo));
        if hi != lo {
            out.push('-');
            out.push_str(&literal_rune(hi));
        }
        items += 1;
    }
    if items == 0 {
        // Only surrogates: Go's class matches nothing (or, negated, everything).
        let negated = out.starts_with("[^");
        return Ok((
            t,
            if negated {
                "[\\x00-\\x{10FFFF}]"
            } else {
                NOTHING
            }
            .to_string(),
        ));
    }
    out.push(']');
    Ok((t, out))
}

/// Go's `parseClassChar`: one character or escape in a class, and the length taken.
fn class_char(s: &str, whole: &str) -> Result<(u32, usize), String> {
    match s.chars().next() {
        None => Err(err(Code::MissingBracket, whole)),
        Some('\\') => escape(s),
        Some(c) => Ok((c as u32, c.len_utf8())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, text: &str) -> Result<bool, String> {
        let t = translate(pattern)?;
        regex::Regex::new(&t)
            .map(|r| r.is_match(text))
            .map_err(|e| format!("Rust refused {t:?} (from {pattern:?}): {e}"))
    }

    /// RE2's syntax as Go's `regexp.Compile` accepts it (github.com/google/re2/wiki/Syntax and
    /// `regexp/syntax/parse.go`, Go 1.25): each pattern, a text, and whether Go matches it.
    #[test]
    fn go_accepts_and_matches() {
        let cases: &[(&str, &str, bool)] = &[
            // Repetition; `*?` is non-greedy, `{` that starts no repeat is a literal.
            ("^a*?b$", "aab", true),
            ("^a{2}$", "aa", true),
            ("^a{2,}$", "aaaa", true),
            ("^a{1,2}$", "aaa", false),
            ("^a{,3}$", "a{,3}", true),
            ("^a{01}$", "a{01}", true), // a leading zero is no count
            ("^a{1$", "a{1", true),
            ("^x{1000}$", &"x".repeat(1000), true),
            ("^(a*)*$", "aaa", true),
            ("^(a{10}){100}$", &"a".repeat(1000), true),
            ("^^*a", "a", true),  // an anchor can be repeated
            ("a(?i)*", "", true), // the `*` applies to `a`
            ("^a*\\Q\\E*$", "aa", true),
            // Escapes: octal, hex, braced hex, C escapes, punctuation.
            ("^\\101$", "A", true),
            ("^\\0$", "\0", true),
            ("^\\08$", "\x008", true),
            ("^\\141\\1411$", "aa1", true),
            ("^\\x41$", "A", true),
            ("^\\x{65e5}$", "日", true),
            ("^\\x{10FFFF}$", "\u{10FFFF}", true),
            ("^\\a\\f\\t\\n\\r\\v$", "\x07\x0c\t\n\r\x0b", true),
            ("^\\_\\-\\<\\>$", "_-<>", true),
            ("^\\Qa.b*\\E$", "a.b*", true),
            ("^\\Qa.b*\\E$", "axbbb", false),
            ("^\\Qa.b", "a.b", true),
            ("\\\\Q", "\\Q", true),
            ("\\x{D800}", "\u{FFFD}", false), // a surrogate is in no text
            // Perl classes and `\b` are ASCII; `\pN` and `\p{...}` are Unicode.
            ("^\\w+$", "abc_1", true),
            ("^\\w+$", "é", false),
            ("^\\d$", "\u{663}", false),
            ("^\\s$", "\u{a0}", false),
            ("^\\s$", "\x0b", false),
            ("\\bé", "xé", true),
            ("^\\pL+$", "Δx", true),
            ("^\\p{L}+$", "Δx", true),
            ("^\\PL$", "1", true),
            ("^\\p{^L}$", "1", true),
            ("^\\P{^L}$", "x", true),
            ("^\\p{Greek}+$", "αβγ", true),
            ("^\\p{Greek}$", "a", false),
            ("^\\P{Greek}$", "a", true),
            ("^\\p{Han}$", "日", true),
            ("^\\p{Lu}$", "A", true),
            ("^\\p{lu}$", "A", true), // Go 1.25: names match case-insensitively
            ("^\\p{Letter}$", "A", true),
            ("^\\p{Uppercase_Letter}$", "a", false),
            ("^\\p{LC}$", "a", true),
            ("^\\p{Any}$", "\n", true),
            ("^\\p{ASCII}$", "é", false),
            ("^\\p{Assigned}$", "a", true),
            ("^\\p{Cn}$", "\u{378}", true),
            ("(?i)^\\p{Lu}$", "a", true),
            // Classes: `[` is a literal inside one; `]` first is a literal; POSIX names.
            ("^[[.a.]]$", "a]", true),
            ("^[[.a.]]$", ".]", true),
            ("^[[=a=]]$", "=]", true),
            ("^[[a]$", "[", true),
            ("^[]a]+$", "]a", true),
            ("^[^]a]$", "b", true),
            ("^[a-]$", "-", true),
            ("^[\\d-z]+$", "1-z", true),
            ("^[[:alpha:]]+$", "abC", true),
            ("^[[:^alpha:]]$", "1", true),
            ("^[[:word:][:punct:]]+$", "a_!", true),
            ("^[\\p{Greek}\\d]+$", "α1", true),
            ("^[^\\P{Greek}]$", "α", true),
            ("^[\\x{65e5}-\\x{65e6}]$", "日", true),
            ("^[\\101-\\132]+$", "AZ", true),
            ("^[&&~~-]+$", "&~-", true),
            ("^[^a]$", "\n", true),
            // Groups, names, flags.
            ("^(?P<x>a)(?<y>b)$", "ab", true),
            ("^(?P<x>a)(?P<x>b)$", "ab", true), // a name may repeat
            ("^(?P<1x>a)$", "a", true),
            ("^(?i)ab$", "AB", true),
            ("^(?i:a)b$", "Ab", true),
            ("^(?i:a)b$", "AB", false),
            ("^(?ii)a$", "A", true),
            ("^(?i-i)a$", "A", false),
            ("(?)a", "a", true),
            ("(?s).", "\n", true),
            ("(?m)^b", "a\nb", true),
            ("^b", "a\nb", false),
            ("a$", "a\n", false),
            ("(?U)^a+", "aa", true),
            ("^()$", "", true),
            ("^(|a)$", "a", true),
            ("\\Aa\\z", "a", true),
            ("]}", "]}", true),
        ];
        let mut failures = Vec::new();
        for (pattern, text, want) in cases {
            let got = matches(pattern, text);
            if got != Ok(*want) {
                failures.push(format!("{pattern:?} on {text:?}: Go {want}, here {got:?}"));
            }
        }
        assert_eq!(failures, Vec::<String>::new());
    }

    /// What Go's `regexp.Compile` refuses, with its error (`regexp/syntax` `Error.Error()`
    /// less its "error parsing regexp: " prefix): code and offending text as Go quotes them.
    #[test]
    fn go_refuses() {
        let cases: &[(&str, &str)] = &[
            ("a**", "invalid nested repetition operator: `**`"),
            ("a++", "invalid nested repetition operator: `++`"),
            ("x*+", "invalid nested repetition operator: `*+`"),
            ("a*??", "invalid nested repetition operator: `*??`"),
            ("a{2}*", "invalid nested repetition operator: `{2}*`"),
            ("a{2}{3}", "invalid nested repetition operator: `{2}{3}`"),
            ("*", "missing argument to repetition operator: `*`"),
            ("a|*", "missing argument to repetition operator: `*`"),
            ("(*)", "missing argument to repetition operator: `*`"),
            ("(?i)+?", "missing argument to repetition operator: `+?`"),
            ("{2}", "missing argument to repetition operator: `{2}`"),
            ("x{1001}", "invalid repeat count: `{1001}`"),
            ("x{2,1001}", "invalid repeat count: `{2,1001}`"),
            ("x{3,2}", "invalid repeat count: `{3,2}`"),
            ("x{100000000}", "invalid repeat count: `{100000000}`"),
            ("(a{10}){101}", "invalid repeat count: `{101}`"),
            ("((a{10}){10}){11}", "invalid repeat count: `{11}`"),
            ("(?x)a", "invalid or unsupported Perl syntax: `(?x`"),
            ("(?u)a", "invalid or unsupported Perl syntax: `(?u`"),
            ("(?=a)", "invalid or unsupported Perl syntax: `(?=`"),
            ("(?!a)", "invalid or unsupported Perl syntax: `(?!`"),
            ("(?#c)", "invalid or unsupported Perl syntax: `(?#`"),
            ("(?-)a", "invalid or unsupported Perl syntax: `(?-)`"),
            ("(?i-)a", "invalid or unsupported Perl syntax: `(?i-)`"),
            ("(?i--m)a", "invalid or unsupported Perl syntax: `(?i--`"),
            ("(?P=x)", "invalid or unsupported Perl syntax: `(?P`"),
            ("(?i", "invalid or unsupported Perl syntax: `(?i`"),
            ("(?P<x", "invalid named capture: `(?P<x`"),
            ("(?P<>a)", "invalid named capture: `(?P<>`"),
            ("(?<a-b>x)", "invalid named capture: `(?<a-b>`"),
            ("\\u0041", "invalid escape sequence: `\\u`"),
            ("\\Z", "invalid escape sequence: `\\Z`"),
            ("\\C", "invalid escape sequence: `\\C`"),
            ("\\1", "invalid escape sequence: `\\1`"),
            ("\\8", "invalid escape sequence: `\\8`"),
            ("\\é", "invalid escape sequence: `\\é`"),
            ("\\x", "invalid escape sequence: `\\x`"),
            ("\\xg1", "invalid escape sequence: `\\xg1`"),
            ("\\x{}", "invalid escape sequence: `\\x{}`"),
            ("\\x{110000}", "invalid escape sequence: `\\x{110000`"),
            ("\\x{65e5", "invalid escape sequence: `\\x{65e5`"),
            ("[\\b]", "invalid escape sequence: `\\b`"),
            ("[\\Qa\\E]", "invalid escape sequence: `\\Q`"),
            ("a\\", "trailing backslash at end of expression: ``"),
            ("\\p{Foo}", "invalid character class range: `\\p{Foo}`"),
            (
                "\\p{Old_Italic}",
                "invalid character class range: `\\p{Old_Italic}`",
            ),
            ("\\pX", "invalid character class range: `\\pX`"),
            ("\\p{L", "invalid character class range: `\\p{L`"),
            ("\\p", "invalid character class range: `\\p`"),
            ("[\\p{Foo}]", "invalid character class range: `\\p{Foo}`"),
            ("[[:foo:]]", "invalid character class range: `[:foo:]`"),
            ("[z-a]", "invalid character class range: `z-a`"),
            ("[&&~~--]", "invalid character class range: `~--`"),
            ("[a", "missing closing ]: `[a`"),
            ("[]", "missing closing ]: `[]`"),
            ("x[^]", "missing closing ]: `[^]`"),
            ("[a-\\d]", "invalid escape sequence: `\\d`"),
            ("(a", "missing closing ): `(a`"),
            ("a)", "unexpected ): `a)`"),
            ("(a))", "unexpected ): `(a))`"),
        ];
        let mut failures = Vec::new();
        for (pattern, want) in cases {
            let got = translate(pattern);
            if got != Err(want.to_string()) {
                failures.push(format!("{pattern:?}: Go {want:?}, here {got:?}"));
            }
        }
        assert_eq!(failures, Vec::<String>::new());
    }
}
