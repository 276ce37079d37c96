//! The Sprig template functions NFD rule authors use, for `labelsTemplate` and `varsTemplate`.
//!
//! NFD parses its templates with Sprig's text function map. The string, list, dictionary,
//! math, regular-expression, conversion, default/flow, path, encoding, JSON and semver
//! functions are implemented here with Sprig's argument order (the piped value last). The
//! functions that make no sense for node labels (dates, randomness, passwords, keys, certificates,
//! encryption, URLs) are registered so that templates using them parse, and fail when executed
//! with a message naming the function; `rules check` warns about them.

use std::collections::HashMap;

use gtmpl_ng::{Func, FuncError, Number, Value};

use super::decimal::Decimal;
use super::gojson::{self, Style};

type R = Result<Value, FuncError>;

fn fail(msg: impl Into<String>) -> FuncError {
    FuncError::Generic(msg.into())
}

macro_rules! unsupported {
    ($($f:ident => $name:literal),* $(,)?) => {
        $(
            fn $f(_: &[Value]) -> R {
                Err(fail(concat!("template function \"", $name, "\" is not supported by gpu-labeler")))
            }
        )*
        /// Sprig functions that are registered but fail when called.
        pub const UNSUPPORTED: &[&str] = &[$($name),*];
        const UNSUPPORTED_FUNCS: &[(&str, Func)] = &[$(($name, $f as Func)),*];
    };
}

unsupported! {
    u_ago => "ago", u_date => "date", u_date_in_zone => "date_in_zone", u_date_modify => "date_modify",
    u_date_in_zone2 => "dateInZone", u_date_modify2 => "dateModify", u_duration => "duration",
    u_duration_round => "durationRound", u_html_date => "htmlDate", u_html_date_in_zone => "htmlDateInZone",
    u_must_date_modify => "must_date_modify", u_must_date_modify2 => "mustDateModify",
    u_must_to_date => "mustToDate", u_now => "now", u_to_date => "toDate", u_unix_epoch => "unixEpoch",
    u_rand_alpha_num => "randAlphaNum", u_rand_alpha => "randAlpha", u_rand_ascii => "randAscii",
    u_rand_numeric => "randNumeric", u_rand_seeded => "randSeededNumeric", u_rand_int => "randInt",
    u_rand_bytes => "randBytes", u_shuffle => "shuffle", u_uuidv4 => "uuidv4",
    u_bcrypt => "bcrypt", u_htpasswd => "htpasswd", u_gen_private_key => "genPrivateKey",
    u_derive_password => "derivePassword", u_build_custom_cert => "buildCustomCert", u_gen_ca => "genCA",
    u_gen_ca_with_key => "genCAWithKey", u_gen_self_signed => "genSelfSignedCert",
    u_gen_self_signed_key => "genSelfSignedCertWithKey", u_gen_signed => "genSignedCert",
    u_gen_signed_key => "genSignedCertWithKey", u_encrypt_aes => "encryptAES", u_decrypt_aes => "decryptAES",
    u_url_parse => "urlParse", u_url_join => "urlJoin",

}

/// Go's parameter kinds, as text/template checks an argument before it calls a function.
#[derive(Clone, Copy)]
enum Go {
    /// `string`
    S,
    /// `int` (any integer; a float only when integral, as an untyped constant `3.0` may be)
    I,
    /// `bool`
    B,
    /// `map[string]interface{}` (also an element's map, which Go types `map[string]string`)
    M,
    /// `interface{}`
    A,
}

impl Go {
    fn name(self) -> &'static str {
        match self {
            Go::S => "string",
            Go::I => "int",
            Go::B => "bool",
            Go::M => "map[string]interface {}",
            Go::A => "interface {}",
        }
    }

    fn accepts(self, v: &Value) -> bool {
        match self {
            Go::A => true,
            Go::S => matches!(v, Value::String(_)),
            Go::B => matches!(v, Value::Bool(_)),
            // A map parameter can be nil (text/template: reflect.Zero of the map type).
            Go::M => matches!(
                v,
                Value::Map(_) | Value::Object(_) | Value::Nil | Value::NoValue
            ),
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
fn check_args(a: &[Value], fixed: &[Go], rest: Option<Go>) -> Result<(), FuncError> {
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

/// The functions whose Go parameters are not all `interface{}`, each wrapped in Go's
/// argument check: `t_upper = upper(S)` is `upper` after a check of one string.
macro_rules! go_typed {
    ($($w:ident = $f:ident($($p:ident),*) $(..$r:ident)?;)*) => {$(
        fn $w(a: &[Value]) -> R {
            check_args(a, &[$(Go::$p),*], go_typed!(@rest $($r)?))?;
            $f(a)
        }
    )*};
    (@rest) => { None };
    (@rest $r:ident) => { Some(Go::$r) };
}

go_typed! {
    t_abbrev = abbrev(I, S);
    t_abbrevboth = abbrevboth(I, I, S);
    t_trunc = trunc(I, S);
    t_trim = trim(S);
    t_upper = upper(S);
    t_lower = lower(S);
    t_title = title(S);
    t_untitle = untitle(S);
    t_substr = substr(I, I, S);
    t_repeat = repeat(I, S);
    t_trim_all = trim_all(S, S);
    t_trim_suffix = trim_suffix(S, S);
    t_trim_prefix = trim_prefix(S, S);
    t_nospace = nospace(S);
    t_initials = initials(S);
    t_swapcase = swapcase(S);
    t_snakecase = snakecase(S);
    t_camelcase = camelcase(S);
    t_kebabcase = kebabcase(S);
    t_contains = contains(S, S);
    t_has_prefix = has_prefix(S, S);
    t_has_suffix = has_suffix(S, S);
    t_indent = indent(I, S);
    t_nindent = nindent(I, S);
    t_replace = replace(S, S, S);
    t_plural = plural(S, S, I);
    t_sha256sum = sha256sum(S);
    t_sha1sum = sha1sum(S);
    t_sha512sum = sha512sum(S);
    t_adler32sum = adler32sum(S);
    t_b32enc = b32enc(S);
    t_b32dec = b32dec(S);
    t_wrap = wrap(I, S);
    t_wrap_with = wrap_with(I, S, S);
    t_seq = seq() ..I;
    t_atoi = atoi(S);
    t_split = split(S, S);
    t_split_list = split_list(S, S);
    t_splitn = splitn(S, I, S);
    t_until = until(I);
    t_until_step = until_step(I, I, I);
    t_join = join(S, A);
    t_round = round(A, I);
    t_ternary = ternary(A, A, B);
    t_fail_fn = fail_fn(S);
    t_from_json = from_json(S);
    t_must_from_json = must_from_json(S);
    t_type_is = type_is(S, A);
    t_type_is_like = type_is_like(S, A);
    t_kind_is = kind_is(S, A);
    t_base = base(S);
    t_dir = dir(S);
    t_clean = clean(S);
    t_ext = ext(S);
    t_is_abs = is_abs(S);
    t_b64enc = b64enc(S);
    t_b64dec = b64dec(S);
    t_get = get(M, S);
    t_set = set(M, S, A);
    t_unset = unset(M, S);
    t_has_key = has_key(M, S);
    t_pluck = pluck(S) ..M;
    t_keys = keys() ..M;
    t_pick = pick(M) ..S;
    t_omit = omit(M) ..S;
    t_values = values(M);
    t_merge = merge(M) ..M;
    t_merge_overwrite = merge_overwrite(M) ..M;
    t_chunk = chunk(I, A);
    t_semver = semver(S);
    t_semver_compare = semver_compare(S, S);
    t_regex_match = regex_match(S, S);
    t_must_regex_match = must_regex_match(S, S);
    t_regex_find_all = regex_find_all(S, S, I);
    t_regex_find = regex_find(S, S);
    t_regex_replace_all = regex_replace_all(S, S, S);
    t_regex_replace_all_literal = regex_replace_all_literal(S, S, S);
    t_regex_split = regex_split(S, S, I);
    t_regex_quote_meta = regex_quote_meta(S);
}

/// Every function this module registers: implemented and unsupported.
pub static FUNCTIONS: &[(&str, Func)] = &[
    ("hello", hello),
    // text/template's own, with Go's answer for a missing map key
    ("index", go_index),
    ("eq", go_eq),
    ("ne", go_ne),
    ("lt", go_lt),
    ("le", go_le),
    ("gt", go_gt),
    ("ge", go_ge),
    // strings
    ("abbrev", t_abbrev),
    ("abbrevboth", t_abbrevboth),
    ("trunc", t_trunc),
    ("trim", t_trim),
    ("upper", t_upper),
    ("lower", t_lower),
    ("title", t_title),
    ("untitle", t_untitle),
    ("substr", t_substr),
    ("repeat", t_repeat),
    ("trimall", t_trim_all),
    ("trimAll", t_trim_all),
    ("trimSuffix", t_trim_suffix),
    ("trimPrefix", t_trim_prefix),
    ("nospace", t_nospace),
    ("initials", t_initials),
    ("swapcase", t_swapcase),
    ("snakecase", t_snakecase),
    ("camelcase", t_camelcase),
    ("kebabcase", t_kebabcase),
    ("contains", t_contains),
    ("hasPrefix", t_has_prefix),
    ("hasSuffix", t_has_suffix),
    ("quote", quote),
    ("squote", squote),
    ("cat", cat),
    ("indent", t_indent),
    ("nindent", t_nindent),
    ("replace", t_replace),
    ("plural", t_plural),
    ("sha256sum", t_sha256sum),
    ("sha1sum", t_sha1sum),
    ("sha512sum", t_sha512sum),
    ("adler32sum", t_adler32sum),
    ("b32enc", t_b32enc),
    ("b32dec", t_b32dec),
    ("wrap", t_wrap),
    ("wrapWith", t_wrap_with),
    ("toDecimal", to_decimal),
    ("seq", t_seq),
    ("deepCopy", deep_copy),
    ("mustDeepCopy", deep_copy),
    ("merge", t_merge),
    ("mustMerge", t_merge),
    ("mergeOverwrite", t_merge_overwrite),
    ("mustMergeOverwrite", t_merge_overwrite),
    ("typeIsLike", t_type_is_like),
    ("toString", to_string),
    // conversion
    ("atoi", t_atoi),
    ("int64", int),
    ("int", int),
    ("float64", float64),
    ("split", t_split),
    ("splitList", t_split_list),
    ("splitn", t_splitn),
    ("toStrings", to_strings),
    ("until", t_until),
    ("untilStep", t_until_step),
    // math
    ("add1", add1),
    ("add", add),
    ("sub", sub),
    ("div", div),
    ("mod", modulo),
    ("mul", mul),
    ("add1f", add1f),
    ("addf", addf),
    ("subf", subf),
    ("divf", divf),
    ("mulf", mulf),
    ("biggest", max),
    ("max", max),
    ("min", min),
    ("maxf", maxf),
    ("minf", minf),
    ("ceil", ceil),
    ("floor", floor),
    ("round", t_round),
    // string slices
    ("join", t_join),
    ("sortAlpha", sort_alpha),
    // defaults and flow
    ("default", default),
    ("empty", empty),
    ("coalesce", coalesce),
    ("all", all_fn),
    ("any", any),
    ("compact", compact),
    ("mustCompact", compact),
    ("ternary", t_ternary),
    ("fail", t_fail_fn),
    ("fromJson", t_from_json),
    ("mustFromJson", t_must_from_json),
    ("toJson", to_json),
    ("mustToJson", must_to_json),
    ("toRawJson", to_raw_json),
    ("mustToRawJson", to_raw_json),
    ("toPrettyJson", to_pretty_json),
    ("mustToPrettyJson", must_to_pretty_json),
    // reflection
    ("typeOf", type_of),
    ("typeIs", t_type_is),
    ("kindOf", kind_of),
    ("kindIs", t_kind_is),
    ("deepEqual", deep_equal),
    // paths
    ("base", t_base),
    ("dir", t_dir),
    ("clean", t_clean),
    ("ext", t_ext),
    ("isAbs", t_is_abs),
    ("osBase", t_base),
    ("osClean", t_clean),
    ("osDir", t_dir),
    ("osExt", t_ext),
    ("osIsAbs", t_is_abs),
    // encoding
    ("b64enc", t_b64enc),
    ("b64dec", t_b64dec),
    // data structures
    ("tuple", list),
    ("list", list),
    ("dict", dict),
    ("get", t_get),
    ("set", t_set),
    ("unset", t_unset),
    ("hasKey", t_has_key),
    ("pluck", t_pluck),
    ("keys", t_keys),
    ("pick", t_pick),
    ("omit", t_omit),
    ("values", t_values),
    ("dig", dig),
    ("append", push),
    ("push", push),
    ("mustAppend", push),
    ("mustPush", push),
    ("prepend", prepend),
    ("mustPrepend", prepend),
    ("first", first),
    ("mustFirst", first),
    ("rest", rest),
    ("mustRest", rest),
    ("last", last),
    ("mustLast", last),
    ("initial", initial),
    ("mustInitial", initial),
    ("reverse", reverse),
    ("mustReverse", reverse),
    ("uniq", uniq),
    ("mustUniq", uniq),
    ("without", without),
    ("mustWithout", without),
    ("has", has),
    ("mustHas", has),
    ("slice", slice),
    ("mustSlice", slice),
    ("concat", concat),
    ("chunk", t_chunk),
    ("mustChunk", t_chunk),
    // semver
    ("semver", t_semver),
    ("semverCompare", t_semver_compare),
    // regex
    ("regexMatch", t_regex_match),
    ("mustRegexMatch", t_must_regex_match),
    ("regexFindAll", t_regex_find_all),
    ("mustRegexFindAll", t_regex_find_all),
    ("regexFind", t_regex_find),
    ("mustRegexFind", t_regex_find),
    ("regexReplaceAll", t_regex_replace_all),
    ("mustRegexReplaceAll", t_regex_replace_all),
    ("regexReplaceAllLiteral", t_regex_replace_all_literal),
    ("mustRegexReplaceAllLiteral", t_regex_replace_all_literal),
    ("regexSplit", t_regex_split),
    ("mustRegexSplit", t_regex_split),
    ("regexQuoteMeta", t_regex_quote_meta),
];

/// The Go signature's parameter count of each function (Sprig v3.3.0's and text/template's
/// own): fixed parameters, and whether a variadic one follows. text/template fails a call with
/// another count before it runs (`{{ toJson }}`: "wrong number of args for toJson: want 1 got
/// 0"; `{{ hello 1 }}`: "want 0 got 1").
pub static ARITIES: &[(&str, usize, bool)] = &[
    ("hello", 0, false),
    // text/template's builtins (funcs.go)
    ("index", 1, true),
    ("call", 1, true),
    ("eq", 1, true),
    ("ne", 2, false),
    ("lt", 2, false),
    ("le", 2, false),
    ("gt", 2, false),
    ("ge", 2, false),
    ("len", 1, false),
    ("not", 1, false),
    ("and", 1, true),
    ("or", 1, true),
    ("print", 0, true),
    ("println", 0, true),
    ("printf", 1, true),
    ("html", 0, true),
    ("js", 0, true),
    ("urlquery", 0, true),
    // strings.go, functions.go
    ("abbrev", 2, false),
    ("abbrevboth", 3, false),
    ("trunc", 2, false),
    ("trim", 1, false),
    ("upper", 1, false),
    ("lower", 1, false),
    ("title", 1, false),
    ("untitle", 1, false),
    ("substr", 3, false),
    ("repeat", 2, false),
    ("trimall", 2, false),
    ("trimAll", 2, false),
    ("trimSuffix", 2, false),
    ("trimPrefix", 2, false),
    ("nospace", 1, false),
    ("initials", 1, false),
    ("swapcase", 1, false),
    ("snakecase", 1, false),
    ("camelcase", 1, false),
    ("kebabcase", 1, false),
    ("contains", 2, false),
    ("hasPrefix", 2, false),
    ("hasSuffix", 2, false),
    ("quote", 0, true),
    ("squote", 0, true),
    ("cat", 0, true),
    ("indent", 2, false),
    ("nindent", 2, false),
    ("replace", 3, false),
    ("plural", 3, false),
    ("sha256sum", 1, false),
    ("sha1sum", 1, false),
    ("sha512sum", 1, false),
    ("adler32sum", 1, false),
    ("b32enc", 1, false),
    ("b32dec", 1, false),
    ("wrap", 2, false),
    ("wrapWith", 3, false),
    ("toDecimal", 1, false),
    ("seq", 0, true),
    ("deepCopy", 1, false),
    ("mustDeepCopy", 1, false),
    ("merge", 1, true),
    ("mustMerge", 1, true),
    ("mergeOverwrite", 1, true),
    ("mustMergeOverwrite", 1, true),
    ("typeIsLike", 2, false),
    ("toString", 1, false),
    // conversion
    ("atoi", 1, false),
    ("int64", 1, false),
    ("int", 1, false),
    ("float64", 1, false),
    ("split", 2, false),
    ("splitList", 2, false),
    ("splitn", 3, false),
    ("toStrings", 1, false),
    ("until", 1, false),
    ("untilStep", 3, false),
    // numeric.go
    ("add1", 1, false),
    ("add", 0, true),
    ("sub", 2, false),
    ("div", 2, false),
    ("mod", 2, false),
    ("mul", 1, true),
    ("add1f", 1, false),
    ("addf", 0, true),
    ("subf", 1, true),
    ("divf", 1, true),
    ("mulf", 1, true),
    ("biggest", 1, true),
    ("max", 1, true),
    ("min", 1, true),
    ("maxf", 1, true),
    ("minf", 1, true),
    ("ceil", 1, false),
    ("floor", 1, false),
    ("round", 2, true),
    ("join", 2, false),
    ("sortAlpha", 1, false),
    // defaults.go
    ("default", 1, true),
    ("empty", 1, false),
    ("coalesce", 0, true),
    ("all", 0, true),
    ("any", 0, true),
    ("compact", 1, false),
    ("mustCompact", 1, false),
    ("ternary", 3, false),
    ("fail", 1, false),
    ("fromJson", 1, false),
    ("mustFromJson", 1, false),
    ("toJson", 1, false),
    ("mustToJson", 1, false),
    ("toRawJson", 1, false),
    ("mustToRawJson", 1, false),
    ("toPrettyJson", 1, false),
    ("mustToPrettyJson", 1, false),
    // reflect.go
    ("typeOf", 1, false),
    ("typeIs", 2, false),
    ("kindOf", 1, false),
    ("kindIs", 2, false),
    ("deepEqual", 2, false),
    // paths
    ("base", 1, false),
    ("dir", 1, false),
    ("clean", 1, false),
    ("ext", 1, false),
    ("isAbs", 1, false),
    ("osBase", 1, false),
    ("osClean", 1, false),
    ("osDir", 1, false),
    ("osExt", 1, false),
    ("osIsAbs", 1, false),
    ("b64enc", 1, false),
    ("b64dec", 1, false),
    // dict.go, list.go
    ("tuple", 0, true),
    ("list", 0, true),
    ("dict", 0, true),
    ("get", 2, false),
    ("set", 3, false),
    ("unset", 2, false),
    ("hasKey", 2, false),
    ("pluck", 1, true),
    ("keys", 0, true),
    ("pick", 1, true),
    ("omit", 1, true),
    ("values", 1, false),
    ("dig", 0, true),
    ("append", 2, false),
    ("push", 2, false),
    ("mustAppend", 2, false),
    ("mustPush", 2, false),
    ("prepend", 2, false),
    ("mustPrepend", 2, false),
    ("first", 1, false),
    ("mustFirst", 1, false),
    ("rest", 1, false),
    ("mustRest", 1, false),
    ("last", 1, false),
    ("mustLast", 1, false),
    ("initial", 1, false),
    ("mustInitial", 1, false),
    ("reverse", 1, false),
    ("mustReverse", 1, false),
    ("uniq", 1, false),
    ("mustUniq", 1, false),
    ("without", 1, true),
    ("mustWithout", 1, true),
    ("has", 2, false),
    ("mustHas", 2, false),
    ("slice", 1, true),
    ("mustSlice", 1, true),
    ("concat", 0, true),
    ("chunk", 2, false),
    ("mustChunk", 2, false),
    // semver.go, regex.go
    ("semver", 1, false),
    ("semverCompare", 2, false),
    ("regexMatch", 2, false),
    ("mustRegexMatch", 2, false),
    ("regexFindAll", 3, false),
    ("mustRegexFindAll", 3, false),
    ("regexFind", 2, false),
    ("mustRegexFind", 2, false),
    ("regexReplaceAll", 3, false),
    ("mustRegexReplaceAll", 3, false),
    ("regexReplaceAllLiteral", 3, false),
    ("mustRegexReplaceAllLiteral", 3, false),
    ("regexSplit", 3, false),
    ("mustRegexSplit", 3, false),
    ("regexQuoteMeta", 1, false),
];

/// [`ARITIES`] by name, built once for every template.
pub fn arities() -> &'static HashMap<&'static str, (usize, bool)> {
    static TABLE: std::sync::OnceLock<HashMap<&'static str, (usize, bool)>> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(|| ARITIES.iter().map(|&(n, f, v)| (n, (f, v))).collect())
}

/// The functions to register: the implemented ones and the unsupported stubs.
pub fn registry() -> impl Iterator<Item = (&'static str, Func)> {
    FUNCTIONS
        .iter()
        .copied()
        .chain(UNSUPPORTED_FUNCS.iter().copied())
}

// ---- argument helpers ----

fn want(args: &[Value], name: &str, n: usize) -> Result<(), FuncError> {
    if args.len() == n {
        Ok(())
    } else {
        Err(FuncError::ExactlyXArgs(name.to_string(), n))
    }
}

fn want_min(args: &[Value], name: &str, n: usize) -> Result<(), FuncError> {
    if args.len() >= n {
        Ok(())
    } else {
        Err(FuncError::AtLeastXArgs(name.to_string(), n))
    }
}

/// Sprig's `strval`: strings as they are, everything else as Go's `%v`.
fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Nil | Value::NoValue => String::new(),
        other => other.to_string(),
    }
}

/// A number's value as a float, whatever its kind.
fn number_f64(n: &Number) -> f64 {
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
fn i(v: &Value) -> i64 {
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
fn f(v: &Value) -> f64 {
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

fn num_f(x: f64) -> Value {
    Value::Number(Number::float(x))
}

fn list_of<'a>(v: &'a Value, name: &str) -> Result<&'a [Value], FuncError> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(fail(format!(
            "{name}: cannot find a list in {} ({})",
            other,
            kind(other)
        ))),
    }
}

fn map_of<'a>(v: &'a Value, name: &str) -> Result<&'a HashMap<String, Value>, FuncError> {
    match v {
        Value::Map(m) | Value::Object(m) => Ok(m),
        other => Err(fail(format!("{name}: {other} is not a dict"))),
    }
}

/// Go template truth (what `empty`, `default` and `if` use).
fn truthy(v: &Value) -> bool {
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

fn kind(v: &Value) -> &'static str {
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

fn re(pattern: &Value) -> Result<regex::Regex, FuncError> {
    super::expression::compile_go_regex(&s(pattern))
        .map_err(|e| fail(format!("invalid regexp: {e}")))
}

// ---- strings ----

fn hello(_: &[Value]) -> R {
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

fn abbrev(a: &[Value]) -> R {
    want(a, "abbrev", 2)?;
    let (width, text) = (i(&a[0]), s(&a[1]));
    if width < 4 {
        return Ok(text.into());
    }
    Ok(abbreviate_full(&text, 0, width).into())
}

fn abbrevboth(a: &[Value]) -> R {
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
fn trunc(a: &[Value]) -> R {
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

fn trim(a: &[Value]) -> R {
    want(a, "trim", 1)?;
    Ok(s(&a[0]).trim().into())
}

/// Go's `unicode.ToUpper` per character (simple case mapping): a character whose uppercase is
/// several (`ß`) stays as it is.
fn upper(a: &[Value]) -> R {
    want(a, "upper", 1)?;
    Ok(s(&a[0])
        .chars()
        .map(super::xstrings::to_upper)
        .collect::<String>()
        .into())
}

/// Go's `unicode.ToLower` per character: `İ` is `i` (Rust's full mapping adds a dot above).
fn lower(a: &[Value]) -> R {
    want(a, "lower", 1)?;
    Ok(s(&a[0])
        .chars()
        .map(super::xstrings::to_lower)
        .collect::<String>()
        .into())
}

/// Go's `strings.Title`: the first character after a separator in title case. A separator
/// is any ASCII character but a letter, digit or `_` (so `don't` is `Don'T`, as in Go), or a
/// non-ASCII space.
fn title(a: &[Value]) -> R {
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
                super::xstrings::to_title(c)
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
fn untitle(a: &[Value]) -> R {
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
                super::xstrings::to_lower(c)
            } else {
                c
            }
        })
        .collect::<String>()
        .into())
}

/// Sprig's `substr`, by bytes as Go slices: `start < 0` is `s[:end]`, an `end` past the string
/// `s[start:]`.
fn substr(a: &[Value]) -> R {
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

fn repeat(a: &[Value]) -> R {
    want(a, "repeat", 2)?;
    // strings.Repeat panics on a negative count.
    let n = usize::try_from(i(&a[0])).map_err(|_| fail("strings: negative Repeat count"))?;
    let text = s(&a[1]);
    if n.saturating_mul(text.len()) > super::template::MAX_FUNCTION_OUTPUT {
        return Err(fail(format!(
            "repeat: the result would be longer than {} bytes",
            super::template::MAX_FUNCTION_OUTPUT
        )));
    }
    Ok(text.repeat(n).into())
}

fn trim_all(a: &[Value]) -> R {
    want(a, "trimAll", 2)?;
    let cut: Vec<char> = s(&a[0]).chars().collect();
    Ok(s(&a[1]).trim_matches(|c| cut.contains(&c)).into())
}

fn trim_suffix(a: &[Value]) -> R {
    want(a, "trimSuffix", 2)?;
    let (suffix, text) = (s(&a[0]), s(&a[1]));
    Ok(text
        .strip_suffix(suffix.as_str())
        .unwrap_or(&text)
        .to_string()
        .into())
}

fn trim_prefix(a: &[Value]) -> R {
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
fn nospace(a: &[Value]) -> R {
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
fn initials(a: &[Value]) -> R {
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
fn swapcase(a: &[Value]) -> R {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    want(a, "swapcase", 1)?;
    Ok(s(&a[0])
        .chars()
        .map(|c| match get_general_category(c) {
            G::UppercaseLetter | G::TitlecaseLetter => super::xstrings::to_lower(c),
            G::LowercaseLetter => super::xstrings::to_upper(c),
            _ => c,
        })
        .collect::<String>()
        .into())
}

fn snakecase(a: &[Value]) -> R {
    want(a, "snakecase", 1)?;
    Ok(super::xstrings::snake_case(&s(&a[0])).into())
}

fn kebabcase(a: &[Value]) -> R {
    want(a, "kebabcase", 1)?;
    Ok(super::xstrings::kebab_case(&s(&a[0])).into())
}

/// Sprig v3.3.0's `camelcase` is xstrings' `ToPascalCase`.
fn camelcase(a: &[Value]) -> R {
    want(a, "camelcase", 1)?;
    Ok(super::xstrings::pascal_case(&s(&a[0])).into())
}

fn contains(a: &[Value]) -> R {
    want(a, "contains", 2)?;
    Ok(s(&a[1]).contains(s(&a[0]).as_str()).into())
}

fn has_prefix(a: &[Value]) -> R {
    want(a, "hasPrefix", 2)?;
    Ok(s(&a[1]).starts_with(s(&a[0]).as_str()).into())
}

fn has_suffix(a: &[Value]) -> R {
    want(a, "hasSuffix", 2)?;
    Ok(s(&a[1]).ends_with(s(&a[0]).as_str()).into())
}

fn quote(a: &[Value]) -> R {
    Ok(a.iter()
        .filter(|v| !matches!(v, Value::Nil | Value::NoValue))
        .map(|v| format!("{:?}", s(v)))
        .collect::<Vec<_>>()
        .join(" ")
        .into())
}

fn squote(a: &[Value]) -> R {
    Ok(a.iter()
        .filter(|v| !matches!(v, Value::Nil | Value::NoValue))
        .map(|v| format!("'{}'", s(v)))
        .collect::<Vec<_>>()
        .join(" ")
        .into())
}

fn cat(a: &[Value]) -> R {
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

fn indent(a: &[Value]) -> R {
    want(a, "indent", 2)?;
    Ok(indent_by(i(&a[0]), &s(&a[1]))?.into())
}

fn nindent(a: &[Value]) -> R {
    want(a, "nindent", 2)?;
    Ok(format!("\n{}", indent_by(i(&a[0]), &s(&a[1]))?).into())
}

fn replace(a: &[Value]) -> R {
    want(a, "replace", 3)?;
    Ok(s(&a[2]).replace(s(&a[0]).as_str(), &s(&a[1])).into())
}

fn plural(a: &[Value]) -> R {
    want(a, "plural", 3)?;
    Ok(if i(&a[2]) == 1 {
        a[0].clone()
    } else {
        a[1].clone()
    })
}

fn sha256sum(a: &[Value]) -> R {
    use sha2::{Digest, Sha256};
    want(a, "sha256sum", 1)?;
    Ok(hex(&Sha256::digest(s(&a[0]).as_bytes())).into())
}

/// text/template's `index`, but a key a map lacks gives the map's zero value, as in Go, instead
/// of an error: `""` in NFD's matched elements (string maps), no value in the others.
fn go_index(a: &[Value]) -> R {
    if let [Value::Nil | Value::NoValue, ..] = a {
        return Err(fail("index of untyped nil"));
    }
    if let [col, keys @ ..] = a
        && !keys.is_empty()
    {
        let mut cur = col.clone();
        // When `cur` is a zero value standing for a missing key of the template data, a value
        // of its type that the data has, whose members give the type of `cur`'s members.
        let mut like: Option<Value> = None;
        for (n, k) in keys.iter().enumerate() {
            let (Value::Map(m) | Value::Object(m), Value::String(key)) = (&cur, k) else {
                // Arrays, strings, numbers: text/template's own rules.
                let mut rest = vec![cur.clone()];
                rest.extend_from_slice(&keys[n..]);
                return gtmpl_ng::funcs::index(&rest);
            };
            if let Some(v) = m.get(key) {
                cur = v.clone();
                like = None;
                continue;
            }
            // A missing key gives the zero value of the map's element type. The template
            // data (objects) is typed as NFD's: domains map to features, features to lists of
            // elements, elements to strings; so a domain or feature the rule did not match is
            // an empty map or list (`len` 0), as in Go.
            let sample = match &cur {
                Value::Object(_) => m
                    .values()
                    .next()
                    .cloned()
                    .or_else(|| like.as_ref().and_then(member)),
                _ => None,
            };
            match sample {
                Some(sample) => {
                    cur = zero_like(&sample);
                    like = Some(sample);
                }
                None if n + 1 == keys.len() => {
                    let strings = m.values().all(|v| matches!(v, Value::String(_)));
                    return Ok(if strings {
                        Value::from("")
                    } else {
                        Value::NoValue
                    });
                }
                None => {
                    return Err(fail(format!(
                        "index of untyped nil: {key} is not in the map"
                    )));
                }
            }
        }
        return Ok(cur);
    }
    gtmpl_ng::funcs::index(a)
}

/// A member of a map or list of the template data (any one: they share a type).
fn member(v: &Value) -> Option<Value> {
    match v {
        Value::Object(m) | Value::Map(m) => m.values().next().cloned(),
        Value::Array(items) => items.first().cloned(),
        _ => None,
    }
}

/// The zero value of `v`'s type, as the template data's types are: a map is an empty map, a
/// list an empty list, a string "".
fn zero_like(v: &Value) -> Value {
    match v {
        Value::Object(_) => Value::Object(HashMap::new()),
        Value::Map(_) => Value::Map(HashMap::new()),
        Value::Array(_) => Value::Array(Vec::new()),
        Value::String(_) => Value::from(""),
        _ => Value::NoValue,
    }
}

// ---- text/template's comparisons, with Go's kinds ----

/// Go's `basicKind` of a value, for the comparison functions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Int,
    Float,
    String,
    Invalid,
    Other,
}

fn basic_kind(v: &Value) -> Kind {
    match v {
        Value::Bool(_) => Kind::Bool,
        Value::String(_) => Kind::String,
        Value::Number(n) => match n.kind() {
            gtmpl_ng::NumberKind::Float(_) => Kind::Float,
            _ => Kind::Int,
        },
        Value::Nil | Value::NoValue => Kind::Invalid,
        _ => Kind::Other,
    }
}

/// An integer of either sign as one type (Go compares int and uint by value).
fn int_value(v: &Value) -> i128 {
    match v {
        Value::Number(n) => match n.kind() {
            gtmpl_ng::NumberKind::Signed(x) => i128::from(x),
            gtmpl_ng::NumberKind::Unsigned(x) => i128::from(x),
            gtmpl_ng::NumberKind::Float(x) => x as i128,
        },
        _ => 0,
    }
}

fn float_value(v: &Value) -> f64 {
    match v {
        Value::Number(n) => number_f64(n),
        _ => 0.0,
    }
}

const BAD_COMPARISON: &str = "incompatible types for comparison";
const BAD_COMPARISON_TYPE: &str = "invalid type for comparison";

/// Go's `eq` of two values: kinds must agree (ints of either sign do); a missing value
/// equals nothing; lists and maps cannot be compared.
fn eq_one(x: &Value, y: &Value) -> Result<bool, FuncError> {
    let (kx, ky) = (basic_kind(x), basic_kind(y));
    if kx != ky {
        if kx == Kind::Invalid || ky == Kind::Invalid {
            return Ok(false);
        }
        return Err(fail(BAD_COMPARISON));
    }
    Ok(match kx {
        Kind::Bool => matches!((x, y), (Value::Bool(a), Value::Bool(b)) if a == b),
        Kind::Int => int_value(x) == int_value(y),
        Kind::Float => float_value(x) == float_value(y),
        Kind::String => matches!((x, y), (Value::String(a), Value::String(b)) if a == b),
        Kind::Invalid => true,
        Kind::Other => {
            // A Stringer (semver) is a pointer in Go: two of them are never the same.
            let stringer = |v: &Value| matches!(v, Value::Object(m) | Value::Map(m) if m.contains_key(gtmpl_ng::STRINGER_KEY));
            if stringer(x) && stringer(y) {
                false
            } else {
                return Err(fail(format!("non-comparable type {x}: {}", type_name(x))));
            }
        }
    })
}

fn go_eq(a: &[Value]) -> R {
    let Some((first, rest)) = a.split_first() else {
        return Err(FuncError::AtLeastXArgs("eq".into(), 1));
    };
    if rest.is_empty() {
        return Err(fail("missing argument for comparison"));
    }
    for y in rest {
        if eq_one(first, y)? {
            return Ok(true.into());
        }
    }
    Ok(false.into())
}

fn go_ne(a: &[Value]) -> R {
    want(a, "ne", 2)?;
    Ok((!eq_one(&a[0], &a[1])?).into())
}

/// Go's `lt`: numbers and strings of one kind; bools, lists, maps and nil cannot be ordered.
fn lt_one(x: &Value, y: &Value) -> Result<bool, FuncError> {
    let (kx, ky) = (basic_kind(x), basic_kind(y));
    for k in [kx, ky] {
        if matches!(k, Kind::Invalid | Kind::Other) {
            return Err(fail(BAD_COMPARISON_TYPE));
        }
    }
    if kx != ky {
        return Err(fail(BAD_COMPARISON));
    }
    match kx {
        Kind::Int => Ok(int_value(x) < int_value(y)),
        Kind::Float => Ok(float_value(x) < float_value(y)),
        Kind::String => Ok(matches!((x, y), (Value::String(a), Value::String(b)) if a < b)),
        _ => Err(fail(BAD_COMPARISON_TYPE)),
    }
}

fn go_lt(a: &[Value]) -> R {
    want(a, "lt", 2)?;
    Ok(lt_one(&a[0], &a[1])?.into())
}

fn go_le(a: &[Value]) -> R {
    want(a, "le", 2)?;
    Ok((lt_one(&a[0], &a[1])? || eq_one(&a[0], &a[1])?).into())
}

fn go_gt(a: &[Value]) -> R {
    want(a, "gt", 2)?;
    Ok((!(lt_one(&a[0], &a[1])? || eq_one(&a[0], &a[1])?)).into())
}

fn go_ge(a: &[Value]) -> R {
    want(a, "ge", 2)?;
    Ok((!lt_one(&a[0], &a[1])?).into())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha1sum(a: &[Value]) -> R {
    want(a, "sha1sum", 1)?;
    Ok(sha1_smol::Sha1::from(s(&a[0]).as_bytes())
        .digest()
        .to_string()
        .into())
}

fn sha512sum(a: &[Value]) -> R {
    use sha2::{Digest, Sha512};
    want(a, "sha512sum", 1)?;
    Ok(hex(&Sha512::digest(s(&a[0]).as_bytes())).into())
}

/// Go's `hash/adler32`, printed in decimal as Sprig prints it.
fn adler32sum(a: &[Value]) -> R {
    want(a, "adler32sum", 1)?;
    let (mut x, mut y) = (1u32, 0u32);
    for b in s(&a[0]).bytes() {
        x = (x + u32::from(b)) % 65521;
        y = (y + x) % 65521;
    }
    Ok(((y << 16) | x).to_string().into())
}

const B32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// `base32.StdEncoding` (RFC 4648, padded).
fn b32enc(a: &[Value]) -> R {
    want(a, "b32enc", 1)?;
    let data = s(&a[0]).into_bytes();
    let mut out = String::new();
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let bits = buf.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for k in 0..8 {
            if k < chars {
                out.push(B32[((bits >> (35 - 5 * k)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    Ok(out.into())
}

/// The inverse; invalid input gives Go's error text, as Sprig returns it (encoding/base32's
/// `DecodeString`: newlines dropped, then `decode`, whose offsets are those of its
/// `CorruptInputError`s; anything after the padding is not read).
fn b32dec(a: &[Value]) -> R {
    want(a, "b32dec", 1)?;
    let text = s(&a[0]);
    let src: Vec<u8> = text
        .bytes()
        .filter(|c| !matches!(c, b'\r' | b'\n'))
        .collect();
    Ok(match go_b32_decode(&src) {
        Ok(out) => String::from_utf8_lossy(&out).into_owned(),
        Err(at) => format!("illegal base32 data at input byte {at}"),
    }
    .into())
}

fn go_b32_decode(mut src: &[u8]) -> Result<Vec<u8>, usize> {
    let olen = src.len();
    let mut out = Vec::new();
    let mut end = false;
    while !src.is_empty() && !end {
        let mut dbuf = [0u8; 8];
        let mut dlen = 8;
        let mut j = 0;
        while j < 8 {
            let Some((&c, rest)) = src.split_first() else {
                return Err(olen - j);
            };
            src = rest;
            if c == b'=' && j >= 2 && src.len() < 8 {
                if src.len() + j < 7 {
                    return Err(olen);
                }
                for k in 0..7 - j {
                    if src.len() > k && src[k] != b'=' {
                        return Err(olen - src.len() + k - 1);
                    }
                }
                dlen = j;
                end = true;
                if matches!(dlen, 1 | 3 | 6) {
                    return Err(olen - src.len() - 1);
                }
                break;
            }
            let Some(v) = B32.iter().position(|x| *x == c) else {
                return Err(olen - src.len() - 1);
            };
            dbuf[j] = v as u8;
            j += 1;
        }
        let d = dbuf;
        let bytes = [
            d[0] << 3 | d[1] >> 2,
            d[1] << 6 | d[2] << 1 | d[3] >> 4,
            d[3] << 4 | d[4] >> 1,
            d[4] << 7 | d[5] << 2 | d[6] >> 3,
            d[6] << 5 | d[7],
        ];
        let n = match dlen {
            8 => 5,
            7 => 4,
            5 => 3,
            4 => 2,
            2 => 1,
            _ => 0,
        };
        out.extend_from_slice(&bytes[..n]);
    }
    Ok(out)
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

fn wrap(a: &[Value]) -> R {
    want(a, "wrap", 2)?;
    Ok(wrap_custom(&s(&a[1]), i(&a[0]), "", false).into())
}

fn wrap_with(a: &[Value]) -> R {
    want(a, "wrapWith", 3)?;
    Ok(wrap_custom(&s(&a[2]), i(&a[0]), &s(&a[1]), true).into())
}

/// `strconv.ParseInt(fmt.Sprint(v), 8, 64)`, 0 on error: `"0777"` is 511.
fn to_decimal(a: &[Value]) -> R {
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

/// Sprig's `seq`, like the shell's: `seq 3` is `1 2 3`, `seq 2 4`, `seq 0 2 6`, counting down
/// when the end is below the start; one string of space-separated numbers.
fn seq(a: &[Value]) -> R {
    let p: Vec<i64> = a.iter().map(i).collect();
    let (start, stop, step) = match p.as_slice() {
        [] => return Ok("".into()),
        [end] => {
            // Go's int addition wraps: past MaxInt64 the range is empty.
            let inc = if *end < 1 { -1 } else { 1 };
            (1, end.wrapping_add(inc), inc)
        }
        [start, end] => {
            let inc = if end < start { -1 } else { 1 };
            (*start, end.wrapping_add(inc), inc)
        }
        [start, step, end] => {
            if end < start && *step > 0 {
                return Ok("".into());
            }
            let inc = if end < start { -1 } else { 1 };
            (*start, end.wrapping_add(inc), *step)
        }
        _ => return Ok("".into()),
    };
    let list = until_step(&[Value::from(start), Value::from(stop), Value::from(step)])?;
    let Value::Array(items) = list else {
        return Ok("".into());
    };
    Ok(items
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(" ")
        .into())
}

fn deep_copy(a: &[Value]) -> R {
    want(a, "deepCopy", 1)?;
    match &a[0] {
        // copystructure.Copy(nil) asks reflect.ValueOf(nil).Type(): a panic, which
        // text/template returns as the call's error.
        Value::Nil | Value::NoValue => Err(fail(
            "deepCopy: reflect: call of reflect.Value.Type on zero Value",
        )),
        v => Ok(v.clone()),
    }
}

/// mergo's Merge: every key of each source that the destination lacks (or holds as an empty
/// value), nested maps merged the same way; with `overwrite`, each source's non-empty values win.
fn merge_into(dst: &mut HashMap<String, Value>, src: &HashMap<String, Value>, overwrite: bool) {
    for (k, v) in src {
        match (dst.get_mut(k), v) {
            // mergo's deepMerge: a nil value of a source map is set only with overwrite.
            (_, Value::Nil | Value::NoValue) => {
                if overwrite {
                    dst.insert(k.clone(), Value::Nil);
                }
            }
            (Some(Value::Map(d) | Value::Object(d)), Value::Map(sm) | Value::Object(sm)) => {
                merge_into(d, sm, overwrite)
            }
            // mergo: an empty dst value takes src's; with WithOverride every src value wins,
            // empty ones too (`key: false` overwrites `key: true`).
            (Some(d), v) if !truthy(d) || overwrite => *d = v.clone(),
            (Some(_), _) => {}
            (None, v) => {
                dst.insert(k.clone(), v.clone());
            }
        }
    }
}

fn merge_with(a: &[Value], name: &str, overwrite: bool) -> R {
    want_min(a, name, 1)?;
    // A nil argument is a nil map (text/template gives a nillable parameter its zero value),
    // which mergo merges as an empty one.
    let map = |v: &Value| -> Result<HashMap<String, Value>, FuncError> {
        match v {
            Value::Nil | Value::NoValue => Ok(HashMap::new()),
            other => map_of(other, name).cloned(),
        }
    };
    let mut dst = map(&a[0])?;
    for src in &a[1..] {
        merge_into(&mut dst, &map(src)?, overwrite);
    }
    Ok(Value::Map(dst))
}

fn merge(a: &[Value]) -> R {
    merge_with(a, "merge", false)
}

fn merge_overwrite(a: &[Value]) -> R {
    merge_with(a, "mergeOverwrite", true)
}

fn type_is_like(a: &[Value]) -> R {
    want(a, "typeIsLike", 2)?;
    let (want_type, have) = (s(&a[0]), type_name(&a[1]));
    Ok((want_type == have || format!("*{want_type}") == have).into())
}

/// Sprig's `strval`: as `s`, but nil is `<nil>` (`fmt.Sprintf("%v", nil)`).
fn strval(v: &Value) -> String {
    match v {
        Value::Nil | Value::NoValue => "<nil>".to_string(),
        other => s(other),
    }
}

fn to_string(a: &[Value]) -> R {
    want(a, "toString", 1)?;
    Ok(strval(&a[0]).into())
}

// ---- conversion ----

/// Go's `strconv.Atoi`, whose error Sprig drops: decimal only, and a value out of range is
/// clamped (the value `Atoi` returns with its range error).
fn atoi(a: &[Value]) -> R {
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

fn int(a: &[Value]) -> R {
    want(a, "int", 1)?;
    Ok(i(&a[0]).into())
}

fn float64(a: &[Value]) -> R {
    want(a, "float64", 1)?;
    Ok(num_f(f(&a[0])))
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

fn split(a: &[Value]) -> R {
    want(a, "split", 2)?;
    let (sep, text) = (s(&a[0]), s(&a[1]));
    Ok(parts_dict(go_split(&text, &sep, -1)))
}

fn splitn(a: &[Value]) -> R {
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

fn split_list(a: &[Value]) -> R {
    want(a, "splitList", 2)?;
    let (sep, text) = (s(&a[0]), s(&a[1]));
    Ok(Value::Array(
        go_split(&text, &sep, -1)
            .into_iter()
            .map(Value::from)
            .collect(),
    ))
}

fn to_strings(a: &[Value]) -> R {
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

const MAX_LIST: i64 = 10_000;

fn until(a: &[Value]) -> R {
    want(a, "until", 1)?;
    let n = i(&a[0]);
    until_step(&[
        Value::from(0i64),
        Value::from(n),
        Value::from(if n < 0 { -1i64 } else { 1 }),
    ])
}

fn until_step(a: &[Value]) -> R {
    want(a, "untilStep", 3)?;
    let (start, stop, step) = (i(&a[0]), i(&a[1]), i(&a[2]));
    let mut out = Vec::new();
    if step == 0 || (step > 0 && start >= stop) || (step < 0 && start <= stop) {
        return Ok(Value::Array(out));
    }
    let mut x = start;
    while (step > 0 && x < stop) || (step < 0 && x > stop) {
        if out.len() as i64 >= MAX_LIST {
            return Err(fail(format!("untilStep: more than {MAX_LIST} elements")));
        }
        out.push(Value::from(x));
        x = x.saturating_add(step);
    }
    Ok(Value::Array(out))
}

// ---- math ----

fn add1(a: &[Value]) -> R {
    want(a, "add1", 1)?;
    Ok(i(&a[0]).wrapping_add(1).into())
}

fn add(a: &[Value]) -> R {
    Ok(a.iter().fold(0i64, |acc, v| acc.wrapping_add(i(v))).into())
}

fn sub(a: &[Value]) -> R {
    want(a, "sub", 2)?;
    Ok(i(&a[0]).wrapping_sub(i(&a[1])).into())
}

fn div(a: &[Value]) -> R {
    want(a, "div", 2)?;
    i(&a[0])
        .checked_div(i(&a[1]))
        .map(Value::from)
        .ok_or_else(|| fail("div: integer divide by zero"))
}

fn modulo(a: &[Value]) -> R {
    want(a, "mod", 2)?;
    i(&a[0])
        .checked_rem(i(&a[1]))
        .map(Value::from)
        .ok_or_else(|| fail("mod: integer divide by zero"))
}

fn mul(a: &[Value]) -> R {
    want_min(a, "mul", 1)?;
    Ok(a[1..]
        .iter()
        .fold(i(&a[0]), |acc, v| acc.wrapping_mul(i(v)))
        .into())
}

/// Sprig's `execDecimalOp`: `first`, then `op` with each of `rest`, in shopspring's decimals.
fn decimal_op(
    name: &str,
    first: f64,
    rest: impl Iterator<Item = f64>,
    op: fn(&Decimal, &Decimal) -> Option<Decimal>,
) -> R {
    let dec = |x: f64| {
        Decimal::from_f64(x)
            .ok_or_else(|| fail(format!("{name}: cannot create a Decimal from {x}")))
    };
    let mut acc = dec(first)?;
    for x in rest {
        acc =
            op(&acc, &dec(x)?).ok_or_else(|| fail(format!("{name}: decimal division by zero")))?;
    }
    Ok(num_f(acc.to_f64()))
}

fn dec_add(a: &Decimal, b: &Decimal) -> Option<Decimal> {
    Some(a.add(b))
}

fn dec_sub(a: &Decimal, b: &Decimal) -> Option<Decimal> {
    Some(a.sub(b))
}

fn dec_mul(a: &Decimal, b: &Decimal) -> Option<Decimal> {
    Some(a.mul(b))
}

fn add1f(a: &[Value]) -> R {
    want(a, "add1f", 1)?;
    decimal_op("add1f", f(&a[0]), std::iter::once(1.0), dec_add)
}

fn addf(a: &[Value]) -> R {
    decimal_op("addf", 0.0, a.iter().map(f), dec_add)
}

fn subf(a: &[Value]) -> R {
    want_min(a, "subf", 1)?;
    decimal_op("subf", f(&a[0]), a[1..].iter().map(f), dec_sub)
}

fn mulf(a: &[Value]) -> R {
    want_min(a, "mulf", 1)?;
    decimal_op("mulf", f(&a[0]), a[1..].iter().map(f), dec_mul)
}

fn divf(a: &[Value]) -> R {
    want_min(a, "divf", 1)?;
    decimal_op("divf", f(&a[0]), a[1..].iter().map(f), Decimal::div)
}

fn max(a: &[Value]) -> R {
    want_min(a, "max", 1)?;
    Ok(a.iter().map(i).max().unwrap_or(0).into())
}

fn min(a: &[Value]) -> R {
    want_min(a, "min", 1)?;
    Ok(a.iter().map(i).min().unwrap_or(0).into())
}

/// Go's `math.Max`: NaN wins, +0 is above -0.
fn go_max(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == 0.0 && y == 0.0 {
        if x.is_sign_negative() { y } else { x }
    } else {
        x.max(y)
    }
}

/// Go's `math.Min`: NaN wins, -0 is below +0.
fn go_min(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == 0.0 && y == 0.0 {
        if x.is_sign_negative() { x } else { y }
    } else {
        x.min(y)
    }
}

fn maxf(a: &[Value]) -> R {
    want_min(a, "maxf", 1)?;
    Ok(num_f(a[1..].iter().map(f).fold(f(&a[0]), go_max)))
}

fn minf(a: &[Value]) -> R {
    want_min(a, "minf", 1)?;
    Ok(num_f(a[1..].iter().map(f).fold(f(&a[0]), go_min)))
}

fn ceil(a: &[Value]) -> R {
    want(a, "ceil", 1)?;
    Ok(num_f(f(&a[0]).ceil()))
}

fn floor(a: &[Value]) -> R {
    want(a, "floor", 1)?;
    Ok(num_f(f(&a[0]).floor()))
}

/// Sprig's `round`: `Ceil` when the fraction of `x × 10^places` (signed, as `math.Modf` gives
/// it) reaches `roundOn` (0.5), else `Floor`, so -1.4 rounds to -2, as in Sprig.
fn round(a: &[Value]) -> R {
    want_min(a, "round", 2)?;
    let x = f(&a[0]);
    let pow = 10f64.powf(i(&a[1]) as f64);
    let round_on = a.get(2).map(f).unwrap_or(0.5);
    let digit = pow * x;
    let r = if digit.fract() >= round_on {
        digit.ceil()
    } else {
        digit.floor()
    };
    Ok(num_f(r / pow))
}

// ---- string slices ----

fn join(a: &[Value]) -> R {
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

fn sort_alpha(a: &[Value]) -> R {
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

// ---- defaults and flow ----

fn default(a: &[Value]) -> R {
    want_min(a, "default", 1)?;
    Ok(match a.get(1) {
        Some(g) if truthy(g) => g.clone(),
        _ => a[0].clone(),
    })
}

fn empty(a: &[Value]) -> R {
    want(a, "empty", 1)?;
    Ok((!truthy(&a[0])).into())
}

fn coalesce(a: &[Value]) -> R {
    Ok(a.iter().find(|v| truthy(v)).cloned().unwrap_or(Value::Nil))
}

fn all_fn(a: &[Value]) -> R {
    Ok(a.iter().all(truthy).into())
}

fn any(a: &[Value]) -> R {
    Ok(a.iter().any(truthy).into())
}

fn compact(a: &[Value]) -> R {
    want(a, "compact", 1)?;
    Ok(Value::Array(
        list_of(&a[0], "compact")?
            .iter()
            .filter(|v| truthy(v))
            .cloned()
            .collect(),
    ))
}

fn ternary(a: &[Value]) -> R {
    want(a, "ternary", 3)?;
    Ok(if truthy(&a[2]) {
        a[0].clone()
    } else {
        a[1].clone()
    })
}

fn fail_fn(a: &[Value]) -> R {
    want(a, "fail", 1)?;
    Err(fail(s(&a[0])))
}

fn to_serde(v: &Value) -> serde_json::Value {
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
fn to_json(a: &[Value]) -> R {
    Ok(json_of(a, "toJson", MARSHAL).unwrap_or_else(|_| Value::from("")))
}

fn must_to_json(a: &[Value]) -> R {
    json_of(a, "mustToJson", MARSHAL)
}

/// Sprig's `toRawJson` panics on an error (the template fails), as `mustToRawJson` reports it.
fn to_raw_json(a: &[Value]) -> R {
    json_of(a, "toRawJson", RAW)
}

fn to_pretty_json(a: &[Value]) -> R {
    Ok(json_of(a, "toPrettyJson", PRETTY).unwrap_or_else(|_| Value::from("")))
}

fn must_to_pretty_json(a: &[Value]) -> R {
    json_of(a, "mustToPrettyJson", PRETTY)
}

/// encoding/json's `Unmarshal` into an `interface{}`: the value, and the error it returns with
/// it. A syntax error gives no value; a number beyond float64 is nil where it stands and the
/// decoding goes on (`saveError`), its error returned at the end.
fn go_unmarshal(text: &str) -> (Value, Option<String>) {
    let (text, out_of_range) = nulls_for_huge_numbers(text);
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

fn must_from_json(a: &[Value]) -> R {
    want(a, "mustFromJson", 1)?;
    match go_unmarshal(&s(&a[0])) {
        (v, None) => Ok(v),
        (_, Some(e)) => Err(fail(format!("mustFromJson: {e}"))),
    }
}

/// Sprig drops the error: invalid JSON is no value, a number out of range nil in its place.
fn from_json(a: &[Value]) -> R {
    want(a, "fromJson", 1)?;
    Ok(go_unmarshal(&s(&a[0])).0)
}

// ---- reflection ----

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(m) if m.contains_key(gtmpl_ng::STRINGER_KEY) => "*semver.Version",
        // A matched element: NFD hands the template its attributes as a map[string]string.
        Value::Object(m) if m.values().all(|v| matches!(v, Value::String(_))) => {
            "map[string]string"
        }
        Value::Object(_) | Value::Map(_) => "map[string]interface {}",
        Value::Function(_) => "func",
        Value::NoValue | Value::Nil => "<nil>",
        Value::Number(n) => match n.kind() {
            gtmpl_ng::NumberKind::Float(_) => "float64",
            _ => "int",
        },
    }
}

fn type_of(a: &[Value]) -> R {
    want(a, "typeOf", 1)?;
    Ok(type_name(&a[0]).into())
}

fn type_is(a: &[Value]) -> R {
    want(a, "typeIs", 2)?;
    Ok((s(&a[0]) == type_name(&a[1])).into())
}

fn kind_of(a: &[Value]) -> R {
    want(a, "kindOf", 1)?;
    Ok(kind(&a[0]).into())
}

fn kind_is(a: &[Value]) -> R {
    want(a, "kindIs", 2)?;
    Ok((s(&a[0]) == kind(&a[1])).into())
}

fn deep_equal(a: &[Value]) -> R {
    want(a, "deepEqual", 2)?;
    Ok((to_serde(&a[0]) == to_serde(&a[1])).into())
}

// ---- paths (Go's `path` package) ----

fn go_clean(p: &str) -> String {
    if p.is_empty() {
        return ".".to_string();
    }
    let rooted = p.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|l| *l != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    let joined = out.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

fn base(a: &[Value]) -> R {
    want(a, "base", 1)?;
    let p = s(&a[0]);
    if p.is_empty() {
        return Ok(".".into());
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return Ok("/".into());
    }
    Ok(t.rsplit('/').next().unwrap_or(t).into())
}

fn dir(a: &[Value]) -> R {
    want(a, "dir", 1)?;
    let p = s(&a[0]);
    let d = match p.rfind('/') {
        Some(idx) => &p[..=idx],
        None => "",
    };
    Ok(go_clean(d).into())
}

fn clean(a: &[Value]) -> R {
    want(a, "clean", 1)?;
    Ok(go_clean(&s(&a[0])).into())
}

fn ext(a: &[Value]) -> R {
    want(a, "ext", 1)?;
    let p = s(&a[0]);
    let last = p.rsplit('/').next().unwrap_or("");
    Ok(last.rfind('.').map(|i| &last[i..]).unwrap_or("").into())
}

fn is_abs(a: &[Value]) -> R {
    want(a, "isAbs", 1)?;
    Ok(s(&a[0]).starts_with('/').into())
}

// ---- encoding ----

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn b64enc(a: &[Value]) -> R {
    want(a, "b64enc", 1)?;
    let data = s(&a[0]).into_bytes();
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    Ok(out.into())
}

/// encoding/base64's `StdEncoding.DecodeString`, as Sprig returns it: the bytes, or the
/// error's text with Go's offset (`decodeQuantum`: `\r` and `\n` skipped, padding checked,
/// trailing data after it an error).
fn b64dec(a: &[Value]) -> R {
    want(a, "b64dec", 1)?;
    let text = s(&a[0]);
    Ok(match go_b64_decode(text.as_bytes()) {
        Ok(out) => String::from_utf8_lossy(&out).into_owned(),
        Err(at) => format!("illegal base64 data at input byte {at}"),
    }
    .into())
}

fn go_b64_decode(src: &[u8]) -> Result<Vec<u8>, usize> {
    let newline = |c: u8| c == b'\n' || c == b'\r';
    let mut out = Vec::new();
    let mut si = 0;
    while si < src.len() {
        let mut dbuf = [0u8; 4];
        let mut dlen = 4;
        let mut trailing = None;
        let mut j = 0;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                // Padded: a quantum cut short is an error.
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if let Some(v) = B64.iter().position(|x| *x == c) {
                dbuf[j] = v as u8;
                j += 1;
                continue;
            }
            if newline(c) {
                continue;
            }
            if c != b'=' || j < 2 {
                return Err(si - 1);
            }
            if j == 2 {
                while si < src.len() && newline(src[si]) {
                    si += 1;
                }
                if si == src.len() {
                    return Err(src.len());
                }
                if src[si] != b'=' {
                    return Err(si - 1);
                }
                si += 1;
            }
            while si < src.len() && newline(src[si]) {
                si += 1;
            }
            if si < src.len() {
                trailing = Some(si);
            }
            dlen = j;
            break;
        }
        let val = u32::from(dbuf[0]) << 18
            | u32::from(dbuf[1]) << 12
            | u32::from(dbuf[2]) << 6
            | u32::from(dbuf[3]);
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        out.extend_from_slice(&bytes[..dlen - 1]);
        if let Some(at) = trailing {
            return Err(at);
        }
    }
    Ok(out)
}

// ---- data structures ----

fn list(a: &[Value]) -> R {
    Ok(Value::Array(a.to_vec()))
}

fn dict(a: &[Value]) -> R {
    let mut m = HashMap::new();
    for pair in a.chunks(2) {
        m.insert(
            strval(&pair[0]),
            pair.get(1).cloned().unwrap_or(Value::from("")),
        );
    }
    Ok(Value::Map(m))
}

fn get(a: &[Value]) -> R {
    want(a, "get", 2)?;
    Ok(map_of(&a[0], "get")?
        .get(&s(&a[1]))
        .cloned()
        .unwrap_or_else(|| Value::from("")))
}

fn set(a: &[Value]) -> R {
    want(a, "set", 3)?;
    let mut m = map_of(&a[0], "set")?.clone();
    m.insert(s(&a[1]), a[2].clone());
    Ok(Value::Map(m))
}

fn unset(a: &[Value]) -> R {
    want(a, "unset", 2)?;
    let mut m = map_of(&a[0], "unset")?.clone();
    m.remove(&s(&a[1]));
    Ok(Value::Map(m))
}

fn has_key(a: &[Value]) -> R {
    want(a, "hasKey", 2)?;
    Ok(map_of(&a[0], "hasKey")?.contains_key(&s(&a[1])).into())
}

fn pluck(a: &[Value]) -> R {
    want_min(a, "pluck", 1)?;
    let key = s(&a[0]);
    let mut out = Vec::new();
    for d in &a[1..] {
        if let Some(v) = map_of(d, "pluck")?.get(&key) {
            out.push(v.clone());
        }
    }
    Ok(Value::Array(out))
}

fn keys(a: &[Value]) -> R {
    let mut out = Vec::new();
    for d in a {
        out.extend(map_of(d, "keys")?.keys().cloned());
    }
    out.sort();
    Ok(Value::Array(out.into_iter().map(Value::from).collect()))
}

fn pick(a: &[Value]) -> R {
    want_min(a, "pick", 1)?;
    let m = map_of(&a[0], "pick")?;
    let wanted: Vec<String> = a[1..].iter().map(s).collect();
    Ok(Value::Map(
        m.iter()
            .filter(|(k, _)| wanted.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    ))
}

fn omit(a: &[Value]) -> R {
    want_min(a, "omit", 1)?;
    let m = map_of(&a[0], "omit")?;
    let unwanted: Vec<String> = a[1..].iter().map(s).collect();
    Ok(Value::Map(
        m.iter()
            .filter(|(k, _)| !unwanted.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    ))
}

fn values(a: &[Value]) -> R {
    want(a, "values", 1)?;
    let m = map_of(&a[0], "values")?;
    let mut pairs: Vec<_> = m.iter().collect();
    pairs.sort_by(|x, y| x.0.cmp(y.0));
    Ok(Value::Array(
        pairs.into_iter().map(|(_, v)| v.clone()).collect(),
    ))
}

fn dig(a: &[Value]) -> R {
    want_min(a, "dig", 3)?;
    let (path, rest) = a.split_at(a.len() - 2);
    let (default, mut cur) = (&rest[0], &rest[1]);
    for key in path {
        // Sprig asserts each key to a string: anything else panics.
        let Value::String(key) = key else {
            return Err(fail(format!("dig: key {key} is not a string")));
        };
        match map_of(cur, "dig")?.get(key) {
            Some(v) => cur = v,
            None => return Ok(default.clone()),
        }
    }
    Ok(cur.clone())
}

fn push(a: &[Value]) -> R {
    want(a, "append", 2)?;
    let mut l = list_of(&a[0], "append")?.to_vec();
    l.push(a[1].clone());
    Ok(Value::Array(l))
}

fn prepend(a: &[Value]) -> R {
    want(a, "prepend", 2)?;
    let mut l = vec![a[1].clone()];
    l.extend(list_of(&a[0], "prepend")?.iter().cloned());
    Ok(Value::Array(l))
}

fn first(a: &[Value]) -> R {
    want(a, "first", 1)?;
    Ok(list_of(&a[0], "first")?
        .first()
        .cloned()
        .unwrap_or(Value::Nil))
}

fn last(a: &[Value]) -> R {
    want(a, "last", 1)?;
    Ok(list_of(&a[0], "last")?
        .last()
        .cloned()
        .unwrap_or(Value::Nil))
}

fn rest(a: &[Value]) -> R {
    want(a, "rest", 1)?;
    let l = list_of(&a[0], "rest")?;
    Ok(Value::Array(l.iter().skip(1).cloned().collect()))
}

fn initial(a: &[Value]) -> R {
    want(a, "initial", 1)?;
    let l = list_of(&a[0], "initial")?;
    Ok(Value::Array(l[..l.len().saturating_sub(1)].to_vec()))
}

fn reverse(a: &[Value]) -> R {
    want(a, "reverse", 1)?;
    Ok(Value::Array(
        list_of(&a[0], "reverse")?.iter().rev().cloned().collect(),
    ))
}

/// Go's `reflect.DeepEqual` over template values: an int is never equal to a float.
fn go_deep_equal(x: &Value, y: &Value) -> bool {
    match (x, y) {
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Number(_), Value::Number(_)) => match (basic_kind(x), basic_kind(y)) {
            (Kind::Int, Kind::Int) => int_value(x) == int_value(y),
            (Kind::Float, Kind::Float) => float_value(x) == float_value(y),
            _ => false,
        },
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(p, q)| go_deep_equal(p, q))
        }
        (Value::Map(a) | Value::Object(a), Value::Map(b) | Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|w| go_deep_equal(v, w)))
        }
        (Value::Nil | Value::NoValue, Value::Nil | Value::NoValue) => true,
        _ => false,
    }
}

fn uniq(a: &[Value]) -> R {
    want(a, "uniq", 1)?;
    let mut out: Vec<Value> = Vec::new();
    for v in list_of(&a[0], "uniq")? {
        if !out.iter().any(|o| go_deep_equal(o, v)) {
            out.push(v.clone());
        }
    }
    Ok(Value::Array(out))
}

fn without(a: &[Value]) -> R {
    want_min(a, "without", 1)?;
    let drop = &a[1..];
    Ok(Value::Array(
        list_of(&a[0], "without")?
            .iter()
            .filter(|v| !drop.iter().any(|d| go_deep_equal(d, v)))
            .cloned()
            .collect(),
    ))
}

/// Sprig's `mustHas` (and `has`, which panics on its error): nil holds nothing; a haystack
/// that is not a list is an error.
fn has(a: &[Value]) -> R {
    want(a, "has", 2)?;
    match &a[1] {
        Value::Array(l) => Ok(l.iter().any(|v| go_deep_equal(&a[0], v)).into()),
        Value::Nil | Value::NoValue => Ok(false.into()),
        other => Err(fail(format!("Cannot find has on type {}", kind(other)))),
    }
}

fn slice(a: &[Value]) -> R {
    want_min(a, "slice", 1)?;
    let l = list_of(&a[0], "slice")?;
    let len = l.len();
    // Sprig returns nil (no value) for an empty list, whatever the indices.
    if len == 0 {
        return Ok(Value::NoValue);
    }
    let idx = |v: Option<&Value>, def: usize| -> Result<usize, FuncError> {
        match v {
            None => Ok(def),
            Some(v) => usize::try_from(i(v))
                .ok()
                .filter(|x| *x <= len)
                .ok_or_else(|| fail(format!("slice: index {} out of range", s(v)))),
        }
    };
    let start = idx(a.get(1), 0)?;
    let end = idx(a.get(2), len)?;
    if start > end {
        return Err(fail(format!("slice: invalid indices {start} > {end}")));
    }
    Ok(Value::Array(l[start..end].to_vec()))
}

fn concat(a: &[Value]) -> R {
    let mut out = Vec::new();
    for l in a {
        out.extend(list_of(l, "concat")?.iter().cloned());
    }
    Ok(Value::Array(out))
}

fn chunk(a: &[Value]) -> R {
    want(a, "chunk", 2)?;
    let size = usize::try_from(i(&a[0])).unwrap_or(0);
    if size == 0 {
        return Err(fail("chunk: size must be positive"));
    }
    Ok(Value::Array(
        list_of(&a[1], "chunk")?
            .chunks(size)
            .map(|c| Value::Array(c.to_vec()))
            .collect(),
    ))
}

// ---- semver ----

/// A full semantic version, for Sprig's `semver` and `semverCompare`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SemVer {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
    meta: String,
}

fn parse_semver(text: &str) -> Result<SemVer, String> {
    let base = super::expression::parse_version(text)?;
    let rest = text.strip_prefix('v').unwrap_or(text);
    let (core, meta) = rest.split_once('+').unwrap_or((rest, ""));
    let pre = core.split_once('-').map(|(_, p)| p).unwrap_or("");
    Ok(SemVer {
        major: base.major,
        minor: base.minor,
        patch: base.patch,
        pre: pre.to_string(),
        meta: meta.to_string(),
    })
}

fn cmp_pre(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Equal,
        (true, false) => return Greater,
        (false, true) => return Less,
        _ => {}
    }
    let (mut x, mut y) = (a.split('.'), b.split('.'));
    loop {
        match (x.next(), y.next()) {
            (None, None) => return Equal,
            (None, Some(_)) => return Less,
            (Some(_), None) => return Greater,
            (Some(p), Some(q)) => {
                let o = match (p.parse::<u64>(), q.parse::<u64>()) {
                    (Ok(m), Ok(n)) => m.cmp(&n),
                    (Ok(_), Err(_)) => Less,
                    (Err(_), Ok(_)) => Greater,
                    _ => p.cmp(q),
                };
                if o != Equal {
                    return o;
                }
            }
        }
    }
}

fn cmp_semver(a: &SemVer, b: &SemVer) -> std::cmp::Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| cmp_pre(&a.pre, &b.pre))
}

fn semver(a: &[Value]) -> R {
    want(a, "semver", 1)?;
    let text = s(&a[0]);
    let v = parse_semver(&text).map_err(|e| fail(format!("semver: {e}")))?;
    let mut m = HashMap::new();
    m.insert("Major".to_string(), Value::from(v.major));
    m.insert("Minor".to_string(), Value::from(v.minor));
    m.insert("Patch".to_string(), Value::from(v.patch));
    m.insert("Prerelease".to_string(), Value::from(v.pre.as_str()));
    m.insert("Metadata".to_string(), Value::from(v.meta.as_str()));
    m.insert("Original".to_string(), Value::from(text));
    // Go prints a *semver.Version (and marshals it) as its String().
    let mut shown = format!("{}.{}.{}", v.major, v.minor, v.patch);
    if !v.pre.is_empty() {
        shown = format!("{shown}-{}", v.pre);
    }
    if !v.meta.is_empty() {
        shown = format!("{shown}+{}", v.meta);
    }
    m.insert(gtmpl_ng::STRINGER_KEY.to_string(), Value::from(shown));
    Ok(Value::Object(m))
}

/// One comparison of a constraint, with `x`/`*` wildcards expanded into a range.
fn constraint_holds(c: &str, v: &SemVer) -> Result<bool, String> {
    use std::cmp::Ordering::*;
    let c = c.trim();
    let (op, rest) = [
        "!=", ">=", "<=", "=>", "=<", "==", ">", "<", "=", "~>", "~", "^",
    ]
    .iter()
    .find_map(|op| c.strip_prefix(op).map(|r| (*op, r.trim())))
    .unwrap_or(("", c));
    let rest = rest.strip_prefix('v').unwrap_or(rest);
    let nums: Vec<&str> = rest
        .split(['-', '+'])
        .next()
        .unwrap_or("")
        .split('.')
        .collect();
    let wild = |p: Option<&&str>| p.is_none_or(|p| matches!(*p, "x" | "X" | "*" | ""));
    let n = |p: Option<&&str>| -> Result<u64, String> {
        match p {
            Some(p) if !wild(Some(p)) => p.parse().map_err(|_| format!("improper constraint: {c}")),
            _ => Ok(0),
        }
    };
    let (maj, min, pat) = (n(nums.first())?, n(nums.get(1))?, n(nums.get(2))?);
    let pre = rest
        .split_once('-')
        .map(|(_, p)| p.split('+').next().unwrap_or(""))
        .unwrap_or("")
        .to_string();
    let wild_major = wild(nums.first());
    let wild_minor = wild(nums.get(1));
    let wild_patch = wild(nums.get(2));
    let base = SemVer {
        major: maj,
        minor: min,
        patch: pat,
        pre,
        meta: String::new(),
    };
    // Masterminds: a version with a pre-release only satisfies constraints that have one.
    if !v.pre.is_empty() && base.pre.is_empty() {
        return Ok(false);
    }
    let upper = |level: u8| -> SemVer {
        match level {
            0 => SemVer {
                major: maj.saturating_add(1),
                minor: 0,
                patch: 0,
                pre: String::new(),
                meta: String::new(),
            },
            _ => SemVer {
                major: maj,
                minor: min.saturating_add(1),
                patch: 0,
                pre: String::new(),
                meta: String::new(),
            },
        }
    };
    let in_range =
        |lo: &SemVer, hi: &SemVer| cmp_semver(v, lo) != Less && cmp_semver(v, hi) == Less;
    let o = cmp_semver(v, &base);
    Ok(match op {
        "" | "=" | "==" => {
            if wild_major {
                true
            } else if wild_minor {
                in_range(&base, &upper(0))
            } else if wild_patch {
                in_range(&base, &upper(1))
            } else {
                o == Equal
            }
        }
        "!=" => {
            if wild_major {
                false
            } else if wild_minor {
                !in_range(&base, &upper(0))
            } else if wild_patch {
                !in_range(&base, &upper(1))
            } else {
                o != Equal
            }
        }
        ">" => {
            if wild_major {
                false
            } else if wild_minor {
                cmp_semver(v, &upper(0)) != Less
            } else if wild_patch {
                cmp_semver(v, &upper(1)) != Less
            } else {
                o == Greater
            }
        }
        ">=" | "=>" => wild_major || o != Less,
        "<" => !wild_major && o == Less,
        "<=" | "=<" => {
            if wild_major {
                true
            } else if wild_minor {
                cmp_semver(v, &upper(0)) == Less
            } else if wild_patch {
                cmp_semver(v, &upper(1)) == Less
            } else {
                o != Greater
            }
        }
        "~" | "~>" => {
            if wild_major {
                true
            } else if wild_minor || nums.len() < 2 {
                in_range(&base, &upper(0))
            } else {
                in_range(&base, &upper(1))
            }
        }
        "^" => {
            if wild_major {
                true
            } else if maj > 0 || wild_minor || nums.len() < 2 {
                in_range(&base, &upper(0))
            } else if min > 0 || wild_patch || nums.len() < 3 {
                in_range(&base, &upper(1))
            } else {
                o == Equal
            }
        }
        _ => return Err(format!("improper constraint: {c}")),
    })
}

/// Masterminds constraints: `||` alternatives of comma- or space-separated comparisons,
/// hyphen ranges, `x` wildcards, `~` and `^`.
fn satisfies(constraint: &str, v: &SemVer) -> Result<bool, String> {
    for alt in constraint.split("||") {
        let alt = alt.trim();
        if alt.is_empty() {
            return Err(format!("improper constraint: {constraint}"));
        }
        let mut ok = true;
        let tokens: Vec<&str> = alt
            .split([',', ' '])
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        let mut idx = 0;
        let mut joined: Vec<String> = Vec::new();
        while idx < tokens.len() {
            let t = tokens[idx];
            if tokens.get(idx + 1) == Some(&"-") && idx + 2 < tokens.len() {
                joined.push(format!(">={t}"));
                joined.push(format!("<={}", tokens[idx + 2]));
                idx += 3;
            } else if matches!(t, ">" | "<" | ">=" | "<=" | "=" | "!=" | "~" | "^")
                && idx + 1 < tokens.len()
            {
                joined.push(format!("{t}{}", tokens[idx + 1]));
                idx += 2;
            } else {
                joined.push(t.to_string());
                idx += 1;
            }
        }
        for c in &joined {
            if !constraint_holds(c, v)? {
                ok = false;
            }
        }
        if ok {
            return Ok(true);
        }
    }
    Ok(false)
}

fn semver_compare(a: &[Value]) -> R {
    want(a, "semverCompare", 2)?;
    let v = parse_semver(&s(&a[1])).map_err(|e| fail(format!("semverCompare: {e}")))?;
    satisfies(&s(&a[0]), &v)
        .map(Value::from)
        .map_err(|e| fail(format!("semverCompare: {e}")))
}

// ---- regex ----

fn must_regex_match(a: &[Value]) -> R {
    want(a, "mustRegexMatch", 2)?;
    Ok(re(&a[0])?.is_match(&s(&a[1])).into())
}

/// Sprig drops the error: an invalid pattern matches nothing.
fn regex_match(a: &[Value]) -> R {
    want(a, "regexMatch", 2)?;
    Ok(must_regex_match(a).unwrap_or(Value::Bool(false)))
}

fn regex_find(a: &[Value]) -> R {
    want(a, "regexFind", 2)?;
    let text = s(&a[1]);
    Ok(re(&a[0])?
        .find(&text)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default()
        .into())
}

fn regex_find_all(a: &[Value]) -> R {
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

fn regex_replace_all(a: &[Value]) -> R {
    want(a, "regexReplaceAll", 3)?;
    let text = s(&a[1]);
    Ok(re(&a[0])?
        .replace_all(&text, s(&a[2]).as_str())
        .into_owned()
        .into())
}

fn regex_replace_all_literal(a: &[Value]) -> R {
    want(a, "regexReplaceAllLiteral", 3)?;
    let text = s(&a[1]);
    let repl = s(&a[2]);
    Ok(re(&a[0])?
        .replace_all(&text, regex::NoExpand(&repl))
        .into_owned()
        .into())
}

fn regex_split(a: &[Value]) -> R {
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
fn regex_quote_meta(a: &[Value]) -> R {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every function a template can call has its Go parameter count, once.
    #[test]
    fn every_function_has_its_go_arity() {
        let mut names: Vec<&str> = ARITIES.iter().map(|a| a.0).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a function has two arities");
        let mut callable: Vec<&str> = FUNCTIONS
            .iter()
            .map(|f| f.0)
            .chain(gtmpl_ng::funcs::BUILTINS.iter().map(|f| f.0))
            .collect();
        callable.sort_unstable();
        callable.dedup();
        assert_eq!(names, callable);
    }

    /// docs/sprig.md lists every function a template can name, each once, with the status the
    /// code gives it: refused ones are the unsupported stubs, absent ones are not registered,
    /// the rest are implemented here or are text/template's own.
    #[test]
    fn the_function_table_is_complete_and_true() {
        let doc = include_str!("../../docs/sprig.md");
        let mut rows: Vec<(&str, &str)> = Vec::new();
        for line in doc.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = line.split(" | ").collect();
            let name = cells[0].trim_start_matches("| `").trim_end_matches('`');
            rows.push((name, cells[1]));
        }
        let mut names: Vec<&str> = rows.iter().map(|r| r.0).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a function is listed twice");
        let builtins: Vec<&str> = gtmpl_ng::funcs::BUILTINS.iter().map(|b| b.0).collect();
        for (name, status) in &rows {
            let implemented = FUNCTIONS.iter().any(|f| f.0 == *name);
            let refused = UNSUPPORTED.contains(name);
            let ok = match *status {
                "refused" => refused && !implemented,
                "absent" => !refused && !implemented && !builtins.contains(name),
                _ => (implemented || builtins.contains(name)) && !refused,
            };
            assert!(ok, "{name}: {status}");
        }
        for (name, _) in registry() {
            assert!(
                names.contains(&name),
                "{name} is registered but not in docs/sprig.md"
            );
        }
        for name in builtins {
            assert!(
                names.contains(&name),
                "{name} (text/template) is not in docs/sprig.md"
            );
        }
    }

    fn call(f: Func, args: &[Value]) -> String {
        match f(args) {
            Ok(v) => v.to_string(),
            Err(e) => format!("error: {e}"),
        }
    }

    fn v(s: &str) -> Value {
        Value::from(s)
    }

    /// spf13/cast and strconv as Go runs them: base-0 parsing after trimZeroDecimal for `int`
    /// and `int64`, `Atoi`'s clamping, floats of integers (NFD's templates divide MiB by 1024).
    #[test]
    fn conversions_are_go_s() {
        let cases: Vec<(Func, Vec<Value>, &str)> = vec![
            (int, vec![v("0300")], "192"),
            (int, vec![v("0x10")], "16"),
            (int, vec![v("0X1f")], "31"),
            (int, vec![v("0b101")], "5"),
            (int, vec![v("0o17")], "15"),
            (int, vec![v("1_000")], "1000"),
            (int, vec![v("0x_1F")], "31"),
            (int, vec![v("1__0")], "0"),
            (int, vec![v("1_")], "0"),
            (int, vec![v("08")], "0"),
            (int, vec![v("-0x10")], "-16"),
            (int, vec![v("+7")], "7"),
            (int, vec![v("12.4")], "0"),
            (int, vec![v("12.0")], "12"),
            (int, vec![v("12.00")], "12"),
            (int, vec![v("12.")], "0"),
            (int, vec![v(" 12")], "0"),
            (int, vec![v("9223372036854775808")], "0"),
            (int, vec![v("-9223372036854775808")], "-9223372036854775808"),
            (int, vec![num_f(12.9)], "12"),
            (int, vec![Value::Bool(true)], "1"),
            (int, vec![v("-0_17")], "-15"),
            (atoi, vec![v("0300")], "300"),
            (atoi, vec![v("99999999999999999999")], "9223372036854775807"),
            (
                atoi,
                vec![v("-99999999999999999999")],
                "-9223372036854775808",
            ),
            (atoi, vec![v("0x10")], "0"),
            (atoi, vec![v(" 1")], "0"),
            (atoi, vec![v("+5")], "5"),
            (float64, vec![v("1e3")], "1000"),
            (float64, vec![Value::from(81920)], "81920"),
            (divf, vec![Value::from(81920), Value::from(1024)], "80"),
            (addf, vec![Value::from(1), v("1.5")], "2.5"),
            (mulf, vec![Value::from(3), Value::from(2)], "6"),
            (subf, vec![Value::from(10), Value::from(4)], "6"),
            (
                maxf,
                vec![Value::from(1), num_f(2.5), Value::from(2)],
                "2.5",
            ),
            (minf, vec![Value::from(3), Value::from(2)], "2"),
        ];
        for (f, args, want) in cases {
            assert_eq!(call(f, &args), want, "{args:?}");
        }
        assert!(truthy(&Value::from(5)));
        assert!(!truthy(&Value::from(0)));
        assert!(!truthy(&num_f(0.0)));
    }

    /// The functions Sprig has that were missing, with the outputs Go gives (RFC 4648's vectors
    /// for base32, the known digests, Sprig's documented examples for `seq` and `wrapWith`).
    #[test]
    fn the_rest_of_sprig() {
        let m = |pairs: &[(&str, Value)]| {
            Value::Map(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            )
        };
        let cases: Vec<(Func, Vec<Value>, &str)> = vec![
            (
                sha1sum,
                vec![v("abc")],
                "a9993e364706816aba3e25717850c26c9cd0d89d",
            ),
            (
                sha512sum,
                vec![v("abc")],
                "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
            ),
            (adler32sum, vec![v("Wikipedia")], "300286872"),
            (b32enc, vec![v("f")], "MY======"),
            (b32enc, vec![v("fo")], "MZXQ===="),
            (b32enc, vec![v("foo")], "MZXW6==="),
            (b32enc, vec![v("foob")], "MZXW6YQ="),
            (b32enc, vec![v("fooba")], "MZXW6YTB"),
            (b32enc, vec![v("foobar")], "MZXW6YTBOI======"),
            (b32dec, vec![v("MZXW6YTBOI======")], "foobar"),
            (b32dec, vec![v("MZXW6YQ=")], "foob"),
            (
                b32dec,
                vec![v("MZ!W6YTB")],
                "illegal base32 data at input byte 2",
            ),
            (wrap, vec![Value::from(5), v("Hello World")], "Hello\nWorld"),
            (wrap, vec![Value::from(3), v("abcdef gh")], "abcdef\ngh"),
            (
                wrap_with,
                vec![Value::from(5), v("\t"), v("Hello World")],
                "Hello\tWorld",
            ),
            (
                wrap_with,
                vec![Value::from(3), v("-"), v("abcdefgh")],
                "abc-def-gh",
            ),
            (to_decimal, vec![v("0777")], "511"),
            (to_decimal, vec![v("777")], "511"),
            (to_decimal, vec![v("8")], "0"),
            (seq, vec![Value::from(5)], "1 2 3 4 5"),
            (seq, vec![Value::from(-3)], "1 0 -1 -2 -3"),
            (seq, vec![Value::from(0), Value::from(2)], "0 1 2"),
            (seq, vec![Value::from(2), Value::from(-2)], "2 1 0 -1 -2"),
            (
                seq,
                vec![Value::from(0), Value::from(2), Value::from(10)],
                "0 2 4 6 8 10",
            ),
            (
                seq,
                vec![Value::from(0), Value::from(-2), Value::from(-5)],
                "0 -2 -4",
            ),
            (
                seq,
                vec![Value::from(5), Value::from(1), Value::from(1)],
                "",
            ),
            (type_is_like, vec![v("string"), v("x")], "true"),
            (type_is_like, vec![v("int"), v("x")], "false"),
            (regex_quote_meta, vec![v("1.0-a[b]")], "1\\.0-a\\[b\\]"),
            (regex_match, vec![v("a("), v("a(")], "false"),
            (
                must_regex_match,
                vec![v("a("), v("a(")],
                "error: invalid regexp: missing closing ): `a(`",
            ),
            (from_json, vec![v("{")], "<no value>"),
            (
                go_index,
                vec![m(&[("class", v("0302"))]), v("class")],
                "0302",
            ),
            (go_index, vec![m(&[("class", v("0302"))]), v("missing")], ""),
            (
                go_index,
                vec![m(&[("pci", m(&[("device", v("x"))]))]), v("cpu")],
                "<no value>",
            ),
            (
                go_index,
                vec![Value::Array(vec![v("a"), v("b")]), Value::from(1)],
                "b",
            ),
            (go_index, vec![v("abc"), Value::from(1)], "98"),
            (upper, vec![v("straße")], "STRAßE"),
            (lower, vec![v("İSTANBUL")], "istanbul"),
            (trunc, vec![Value::from(2), v("héllo")], "h\u{fffd}"),
            (trunc, vec![Value::from(3), v("héllo")], "hé"),
            (
                substr,
                vec![Value::from(1), Value::from(3), v("héllo")],
                "é",
            ),
            (
                substr,
                vec![Value::from(4), Value::from(2), v("abcdef")],
                "error: substr: slice bounds out of range [4:2] with length 6",
            ),
            (
                substr,
                vec![Value::from(-1), Value::from(9), v("abc")],
                "error: substr: slice bounds out of range [0:9] with length 3",
            ),
            (
                compact,
                vec![Value::Array(vec![
                    Value::from(1),
                    Value::from(0),
                    v(""),
                    v("a"),
                ])],
                "[1 a]",
            ),
        ];
        for (f, args, want) in cases {
            assert_eq!(call(f, &args), want, "{args:?}");
        }
        let dst = m(&[
            ("a", Value::from(1)),
            ("e", v("")),
            ("n", m(&[("x", Value::from(1))])),
        ]);
        let src = m(&[
            ("a", Value::from(2)),
            ("b", Value::from(3)),
            ("e", v("filled")),
            ("n", m(&[("x", Value::from(9)), ("y", Value::from(2))])),
        ]);
        let want = |pairs: &[(&str, Value)]| m(pairs).to_string();
        assert_eq!(
            call(merge, &[dst.clone(), src.clone()]),
            want(&[
                ("a", Value::from(1)),
                ("b", Value::from(3)),
                ("e", v("filled")),
                ("n", m(&[("x", Value::from(1)), ("y", Value::from(2))])),
            ])
        );
        assert_eq!(
            call(merge_overwrite, &[dst.clone(), src]),
            want(&[
                ("a", Value::from(2)),
                ("b", Value::from(3)),
                ("e", v("filled")),
                ("n", m(&[("x", Value::from(9)), ("y", Value::from(2))])),
            ])
        );
        assert_eq!(call(deep_copy, std::slice::from_ref(&dst)), dst.to_string());
    }

    #[test]
    fn string_functions() {
        let cases: Vec<(Func, Vec<Value>, &str)> = vec![
            (trim, vec![v("  a b ")], "a b"),
            (trim_all, vec![v("$"), v("$$5$")], "5"),
            (trim_prefix, vec![v("NVIDIA "), v("NVIDIA A100")], "A100"),
            (trim_suffix, vec![v("-SXM4"), v("A100-SXM4")], "A100"),
            (upper, vec![v("a1")], "A1"),
            (lower, vec![v("A1")], "a1"),
            (title, vec![v("hello world")], "Hello World"),
            (untitle, vec![v("Hello World")], "hello world"),
            (
                substr,
                vec![Value::from(1), Value::from(3), v("abcdef")],
                "bc",
            ),
            (
                substr,
                vec![Value::from(2), Value::from(-1), v("abcdef")],
                "cdef",
            ),
            (trunc, vec![Value::from(3), v("abcdef")], "abc"),
            (trunc, vec![Value::from(-2), v("abcdef")], "ef"),
            (trunc, vec![Value::from(10), v("abc")], "abc"),
            (abbrev, vec![Value::from(5), v("hello world")], "he..."),
            (repeat, vec![Value::from(3), v("ab")], "ababab"),
            (nospace, vec![v(" a b\tc ")], "abc"),
            (initials, vec![v("First Try")], "FT"),
            (swapcase, vec![v("aB")], "Ab"),
            (snakecase, vec![v("FirstName")], "first_name"),
            (kebabcase, vec![v("FirstName")], "first-name"),
            (camelcase, vec![v("http_server")], "HttpServer"),
            (contains, vec![v("cat"), v("catch")], "true"),
            (has_prefix, vec![v("10"), v("10de")], "true"),
            (has_suffix, vec![v("de"), v("10de")], "true"),
            (quote, vec![v("a"), v("b\"")], "\"a\" \"b\\\"\""),
            (squote, vec![v("a")], "'a'"),
            (
                cat,
                vec![v("a"), Value::from(1), Value::Nil, v("b")],
                "a 1 b",
            ),
            (indent, vec![Value::from(2), v("a\nb")], "  a\n  b"),
            (nindent, vec![Value::from(1), v("a")], "\n a"),
            (replace, vec![v(" "), v("-"), v("a b c")], "a-b-c"),
            (plural, vec![v("gpu"), v("gpus"), Value::from(1)], "gpu"),
            (plural, vec![v("gpu"), v("gpus"), Value::from(2)], "gpus"),
            (
                sha256sum,
                vec![v("abc")],
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (to_string, vec![Value::from(42)], "42"),
            (b64enc, vec![v("hello")], "aGVsbG8="),
            (b64dec, vec![v("aGVsbG8=")], "hello"),
            (hello, vec![], "Hello!"),
        ];
        for (f, args, want) in cases {
            assert_eq!(call(f, &args), want, "{args:?}");
        }
    }

    #[test]
    fn conversion_math_and_lists() {
        let l = |items: &[&str]| Value::Array(items.iter().map(|s| v(s)).collect());
        let cases: Vec<(Func, Vec<Value>, &str)> = vec![
            (atoi, vec![v("42")], "42"),
            (atoi, vec![v("x")], "0"),
            (int, vec![v("7")], "7"),
            (float64, vec![v("1.5")], "1.5"),
            (split_list, vec![v("."), v("550.54.15")], "[550 54 15]"),
            (split, vec![v("/"), v("a/b")], "map[_0:a _1:b]"),
            (
                splitn,
                vec![v("/"), Value::from(2), v("a/b/c")],
                "map[_0:a _1:b/c]",
            ),
            (join, vec![v(","), l(&["a", "b"])], "a,b"),
            (sort_alpha, vec![l(&["b", "a"])], "[a b]"),
            (until, vec![Value::from(3)], "[0 1 2]"),
            (
                until_step,
                vec![Value::from(0), Value::from(6), Value::from(2)],
                "[0 2 4]",
            ),
            (add, vec![Value::from(1), v("2"), Value::from(3)], "6"),
            (add1, vec![Value::from(1)], "2"),
            (sub, vec![Value::from(5), Value::from(2)], "3"),
            (
                mul,
                vec![Value::from(2), Value::from(3), Value::from(4)],
                "24",
            ),
            (div, vec![Value::from(7), Value::from(2)], "3"),
            (
                div,
                vec![Value::from(7), Value::from(0)],
                "error: div: integer divide by zero",
            ),
            (modulo, vec![Value::from(7), Value::from(2)], "1"),
            (
                max,
                vec![Value::from(1), Value::from(9), Value::from(3)],
                "9",
            ),
            (min, vec![Value::from(4), Value::from(2)], "2"),
            (floor, vec![v("1.7")], "1"),
            (ceil, vec![v("1.2")], "2"),
            (round, vec![v("3.14159"), Value::from(2)], "3.14"),
            (first, vec![l(&["a", "b"])], "a"),
            (last, vec![l(&["a", "b"])], "b"),
            (rest, vec![l(&["a", "b", "c"])], "[b c]"),
            (initial, vec![l(&["a", "b", "c"])], "[a b]"),
            (push, vec![l(&["a"]), v("b")], "[a b]"),
            (prepend, vec![l(&["a"]), v("b")], "[b a]"),
            (concat, vec![l(&["a"]), l(&["b", "c"])], "[a b c]"),
            (reverse, vec![l(&["a", "b"])], "[b a]"),
            (uniq, vec![l(&["a", "b", "a"])], "[a b]"),
            (without, vec![l(&["a", "b", "c"]), v("b")], "[a c]"),
            (has, vec![v("b"), l(&["a", "b"])], "true"),
            (
                slice,
                vec![l(&["a", "b", "c"]), Value::from(1), Value::from(2)],
                "[b]",
            ),
            (
                chunk,
                vec![Value::from(2), l(&["a", "b", "c"])],
                "[[a b] [c]]",
            ),
            (compact, vec![l(&["a", "", "b"])], "[a b]"),
            (default, vec![v("d"), v("")], "d"),
            (default, vec![v("d"), v("x")], "x"),
            (default, vec![v("d")], "d"),
            (empty, vec![v("")], "true"),
            (coalesce, vec![v(""), v("b")], "b"),
            (ternary, vec![v("y"), v("n"), Value::Bool(false)], "n"),
            (all_fn, vec![v("a"), v("")], "false"),
            (any, vec![v(""), v("b")], "true"),
            (fail_fn, vec![v("boom")], "error: boom"),
            (to_json, vec![l(&["a"])], "[\"a\"]"),
            (kind_of, vec![v("x")], "string"),
            (kind_is, vec![v("slice"), l(&[])], "true"),
            (type_of, vec![Value::from(1)], "int"),
            (deep_equal, vec![l(&["a"]), l(&["a"])], "true"),
            (base, vec![v("/a/b.txt")], "b.txt"),
            (dir, vec![v("/a/b.txt")], "/a"),
            (clean, vec![v("a//b/../c/")], "a/c"),
            (ext, vec![v("/a/b.txt")], ".txt"),
            (is_abs, vec![v("/a")], "true"),
        ];
        for (f, args, want) in cases {
            assert_eq!(call(f, &args), want, "{args:?}");
        }
        let d = dict(&[v("a"), v("1"), v("b"), v("2")]).unwrap();
        assert_eq!(call(get, &[d.clone(), v("a")]), "1");
        assert_eq!(call(get, &[d.clone(), v("z")]), "");
        assert_eq!(call(has_key, &[d.clone(), v("b")]), "true");
        assert_eq!(call(keys, std::slice::from_ref(&d)), "[a b]");
        assert_eq!(call(values, std::slice::from_ref(&d)), "[1 2]");
        assert_eq!(call(pick, &[d.clone(), v("a")]), "map[a:1]");
        assert_eq!(call(omit, &[d.clone(), v("a")]), "map[b:2]");
        assert_eq!(call(set, &[d.clone(), v("c"), v("3")]), "map[a:1 b:2 c:3]");
        assert_eq!(call(unset, &[d.clone(), v("a")]), "map[b:2]");
        assert_eq!(call(pluck, &[v("a"), d.clone(), d.clone()]), "[1 1]");
        let nested = dict(&[v("x"), d.clone()]).unwrap();
        assert_eq!(call(dig, &[v("x"), v("b"), v("def"), nested.clone()]), "2");
        assert_eq!(call(dig, &[v("x"), v("q"), v("def"), nested]), "def");
        assert_eq!(call(from_json, &[v("{\"a\": [1, \"b\"]}")]), "map[a:[1 b]]");
    }

    #[test]
    fn regex_functions() {
        assert_eq!(call(regex_match, &[v("^[0-9]+$"), v("123")]), "true");
        assert_eq!(call(regex_find, &[v("[0-9]+"), v("ab12cd34")]), "12");
        assert_eq!(
            call(
                regex_find_all,
                &[v("[0-9]+"), v("ab12cd34"), Value::from(-1)]
            ),
            "[12 34]"
        );
        assert_eq!(
            call(
                regex_replace_all,
                &[v("a(x*)b"), v("-ab-axxb-"), v("${1}W")]
            ),
            "-W-xxW-"
        );
        assert_eq!(
            call(
                regex_replace_all_literal,
                &[v("a(x*)b"), v("-ab-"), v("$1")]
            ),
            "-$1-"
        );
        assert_eq!(
            call(regex_split, &[v("z+"), v("pizza"), Value::from(-1)]),
            "[pi a]"
        );
        assert_eq!(call(regex_quote_meta, &[v("1.2")]), "1\\.2");
        // Sprig's regexMatch drops the error (an invalid pattern matches nothing); the must
        // form reports it.
        assert_eq!(call(regex_match, &[v("("), v("x")]), "false");
        assert_eq!(
            call(must_regex_match, &[v("("), v("x")]),
            "error: invalid regexp: missing closing ): `(`"
        );
    }

    #[test]
    fn semver_functions() {
        let cases = [
            (">=535", "550.54.15", true),
            (">=535", "470.82.01", false),
            ("<12.4", "12.2", true),
            (">= 12.0, < 13", "12.4", true),
            ("~1.2.3", "1.2.9", true),
            ("~1.2.3", "1.3.0", false),
            ("^1.2", "1.9.0", true),
            ("^1.2", "2.0.0", false),
            ("^0.2.3", "0.2.9", true),
            ("^0.2.3", "0.3.0", false),
            ("1.2.x", "1.2.7", true),
            ("1.2.x", "1.3.0", false),
            ("!=1.2.3", "1.2.3", false),
            ("1.0 - 2.0", "1.5.0", true),
            ("1.0 - 2.0", "2.1.0", false),
            ("<1.0 || >=3", "3.1", true),
            (">1.0", "1.1.0-beta", false),
            ("*", "9.9.9", true),
        ];
        for (c, ver, want) in cases {
            assert_eq!(
                call(semver_compare, &[v(c), v(ver)]),
                want.to_string(),
                "{c} {ver}"
            );
        }
        assert!(call(semver_compare, &[v(">=1"), v("not")]).starts_with("error: "));
        let sv = semver(&[v("v1.2.3-rc.1+b5")]).unwrap();
        let Value::Object(m) = sv else { panic!() };
        assert_eq!(m["Major"].to_string(), "1");
        assert_eq!(m["Prerelease"].to_string(), "rc.1");
        assert_eq!(m["Metadata"].to_string(), "b5");
    }

    #[test]
    fn every_function_is_registered_once() {
        let mut names: Vec<&str> = registry().map(|(n, _)| n).collect();
        let total = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), total);
        for removed in ["env", "expandenv", "getHostByName"] {
            assert!(!names.contains(&removed));
        }
    }
}
