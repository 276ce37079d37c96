//! The Sprig template functions NFD rule authors use, for `labelsTemplate` and `varsTemplate`.
//!
//! NFD parses its templates with Sprig's text function map. The string, list, dictionary,
//! math, regular-expression, conversion, default/flow, path, encoding, JSON and semver
//! functions are implemented here with Sprig's argument order (the piped value last). The
//! functions that make no sense for node labels (dates, randomness, passwords, keys, certificates,
//! encryption, URLs) are registered so that templates using them parse, and fail when executed
//! with a message naming the function; `rules check` warns about them.
//!
//! One file per family: `strings`, `lists`, `dicts`, `math`, `types` (conversion and
//! reflection), `flow` (defaults), `json`, `encoding`, `paths`, `regexp`, `semver`, and
//! `builtins` (text/template's own `index` and comparisons); `args` is what they share. This
//! file registers them: the table of functions, Go's parameter kinds and counts, the refused ones.

mod args;
mod builtins;
mod dicts;
mod encoding;
mod flow;
mod json;
mod lists;
mod math;
mod paths;
mod regexp;
mod semver;
mod strings;
#[cfg(test)]
mod tests;
mod types;

use std::collections::HashMap;

use gtmpl_ng::{Func, Value};

use self::{
    args::*, builtins::*, dicts::*, encoding::*, flow::*, json::*, lists::*, math::*, paths::*,
    regexp::*, semver::*, strings::*, types::*,
};

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
    t_round = round(A, I) ..F;
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

/// The functions with a `float64` parameter, and where the first is: Sprig's `round(a
/// interface{}, p int, rOpt ...float64)`. An integer constant past int64 is a float there.
pub static FLOAT_PARAMS: &[(&str, usize)] = &[("round", 2)];

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
