//! The Sprig functions against Go's output, and the tables against docs/sprig.md.

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
    let doc = include_str!("../../../docs/sprig.md");
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
        // A dict is a map[string]interface{} whatever it holds: a missing key is nil.
        (
            go_index,
            vec![m(&[("class", v("0302"))]), v("missing")],
            "<no value>",
        ),
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
            "error: runtime error: integer divide by zero",
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
