//! The recorded template cases against Go itself: every row of `tests/fixtures/sprig/cases.tsv`
//! and `tests/fixtures/sprig/classes.tsv` (whose expected outputs the engine's unit tests hold
//! gpu-labeler to) is run through Go's text/template with Sprig's function map, as NFD runs a
//! rule's template, and its recorded answer must be what Go writes. The oracle
//! (tests/sprig-oracle: main.go and NFD's template data types) is built from Debian's Go toolchain
//! and Sprig packages, fetched and built once under `target/sprig-oracle/` as the test API server
//! is (nothing installed, no module proxy).

use std::path::PathBuf;

mod common;
mod go_build;

use common::Draw;

/// The oracle's sources (tests/sprig-oracle) and cache (target/sprig-oracle).
const ORACLE: go_build::GoProgram = go_build::GoProgram {
    name: "sprig-oracle",
    what: "the Go template oracle",
    build_inputs: &["build.sh", "main.go", "nodefeaturerule.go"],
    binary: "bin/oracle",
};

/// The oracle, fetched and built on first use and when its sources change.
fn oracle() -> PathBuf {
    ORACLE.build()
}

/// The tables' escapes: `\n` newline, `\t` tab, `\` before any other character keeps it.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// One recorded case: where, the data, the template, and what the table says Go writes
/// (`None`: Go fails, message not recorded).
struct Case {
    at: String,
    data: &'static str,
    source: String,
    go: Option<String>,
}

/// cases.tsv: function, template as written, expected (escaped; `ERROR`: Go fails).
fn cases_tsv() -> Vec<Case> {
    let table = include_str!("fixtures/sprig/cases.tsv");
    let mut out = Vec::new();
    for (n, line) in table.lines().enumerate() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 3, "cases.tsv:{}", n + 1);
        out.push(Case {
            at: format!("cases.tsv:{}", n + 1),
            data: "nil",
            source: cols[1].to_string(),
            go: (cols[2] != "ERROR").then(|| unescape(cols[2])),
        });
    }
    out
}

/// classes.tsv: class, data, template (escaped), expected (escaped): the output, `ERROR: m`,
/// `ERROR (Go: m)`, or `DEVIATION: here` with Go's answer in the `# Go: ... (docs/...)` line
/// above it.
fn classes_tsv() -> Vec<Case> {
    let table = include_str!("fixtures/sprig/classes.tsv");
    let mut out = Vec::new();
    let mut go_comment: Option<String> = None;
    for (n, line) in table.lines().enumerate() {
        if let Some(c) = line.strip_prefix("# Go: ") {
            let (answer, _) = c.rsplit_once(" (docs/").expect("# Go: answer (docs/...)");
            go_comment = Some(unescape(answer));
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 4, "classes.tsv:{}", n + 1);
        let want = unescape(cols[3]);
        let go = if want.starts_with("DEVIATION: ") {
            go_comment
                .take()
                .unwrap_or_else(|| panic!("classes.tsv:{}: no # Go: line above", n + 1))
        } else if let Some(m) = want.strip_prefix("ERROR (Go: ") {
            format!("ERROR: {}", m.strip_suffix(')').expect("ERROR (Go: ...)"))
        } else {
            want
        };
        out.push(Case {
            at: format!("classes.tsv:{}", n + 1),
            data: if cols[1] == "nfd" { "nfd" } else { "nil" },
            source: unescape(cols[2]),
            go: Some(go),
        });
    }
    out
}

/// Where Debian's packages are not NFD v0.19's pins, Go built from them answers otherwise than
/// NFD; the tables hold NFD's answer: the template, and why.
const NOT_NFD_S_VERSIONS: &[(&str, &str)] = &[
    (
        r#"{{ sha512sum "" }}"#,
        "Sprig 3.3.0 added sha512sum; Debian has 3.2.3",
    ),
    (
        r#"{{ sha512sum "abc" }}"#,
        "Sprig 3.3.0 added sha512sum; Debian has 3.2.3",
    ),
    (
        r#"{{ sha512sum "héllo" }}"#,
        "Sprig 3.3.0 added sha512sum; Debian has 3.2.3",
    ),
    (
        r#"{{ int64 "3.5" }}"#,
        "spf13/cast 1.7.1 (NFD's) gives 0 for a string with a fraction; Debian's 1.10.0 gives 3",
    ),
    (
        r#"{{ int "4.9" }}"#,
        "spf13/cast 1.7.1 (NFD's) gives 0 for a string with a fraction; Debian's 1.10.0 gives 4",
    ),
];

#[test]
fn every_recorded_template_case_is_what_go_writes() {
    let binary = oracle();
    let cases: Vec<Case> = cases_tsv().into_iter().chain(classes_tsv()).collect();
    assert!(cases.len() > 1400, "{} cases", cases.len());
    let input = cases
        .iter()
        .map(|c| serde_json::to_string(&[c.data, c.source.as_str()]).unwrap())
        .collect();
    let answers: Vec<String> = go_build::answers(&binary, input);
    assert_eq!(answers.len(), cases.len());
    let mut differ = Vec::new();
    let mut versions = 0;
    for (c, go) in cases.iter().zip(&answers) {
        let agrees = match &c.go {
            Some(want) => want == go,
            None => go.starts_with("ERROR: "),
        };
        if agrees {
            continue;
        }
        if NOT_NFD_S_VERSIONS.iter().any(|(t, _)| *t == c.source) {
            versions += 1;
            continue;
        }
        differ.push(format!(
            "{}: {}\n  recorded: {:?}\n        Go: {go:?}",
            c.at, c.source, c.go
        ));
    }
    assert!(
        differ.is_empty(),
        "{} recorded answers are not Go's:\n{}",
        differ.len(),
        differ.join("\n")
    );
    // Each version difference is still one: when Debian catches up, its entry goes.
    assert_eq!(versions, NOT_NFD_S_VERSIONS.len());
}

/// A small deterministic generator (xorshift64*): the same templates every run.
struct Gen(u64);

impl common::Draw for Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
}

const FLOATS: &[&str] = &[
    "0.0",
    "1.0",
    "1.5",
    "-0.1",
    "3.14159",
    "1e6",
    "1e-7",
    "123456789.0",
    "0.000001",
    "2.5",
    "-2.5",
    "1e300",
    "5e-324",
    "100000.0",
    "1e21",
    "0.1",
    "7.0",
];
const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "-7",
    "9223372036854775807",
    "-9223372036854775808",
    "10",
    "16",
    "23",
    "91",
    "300",
    "-3",
];

/// One template of the classes of issue #50, with its data (`nil` or `nfd`).
fn generated(g: &mut Gen) -> (&'static str, String) {
    let t = match g.below(12) {
        0..=2 => {
            let flags: String = (0..g.below(3))
                .map(|_| g.pick(&["#", "+", " ", "-", "0"]))
                .collect();
            let width = g.pick(&["", "", "5", "12"]);
            let prec = g.pick(&["", "", ".0", ".1", ".3", ".10"]);
            let verb = g.pick(&["x", "X", "b", "g", "G", "e", "E", "f", "v"]);
            let x = g.pick(FLOATS);
            format!("{{{{ printf \"%{flags}{width}{prec}{verb}|\" {x} }}}}")
        }
        3 | 4 => {
            let x = g.pick(&[FLOATS, &INTS[..8]].concat());
            let places = g.pick(&[
                "0", "1", "2", "3", "8", "15", "16", "17", "22", "23", "30", "91", "-1", "-3",
                "-22", "300", "308", "309",
            ]);
            let on = g.pick(&["", "", " 0.3", " 0.9", " 1", " 0"]);
            format!("{{{{ round {x} {places}{on} }}}}")
        }
        5 => {
            let items: Vec<String> = (0..g.below(7)).map(|k| k.to_string()).collect();
            let size = g.pick(&["-5", "-3", "-2", "-1", "0", "1", "2", "3", "7"]);
            format!("{{{{ chunk {size} (list {}) }}}}", items.join(" "))
        }
        6 => {
            // Counts that stay small in Go (a wrapped loop that does not end would not).
            let (a, b, step) = *[
                ("3", "5", "9223372036854775807"),
                ("-3", "-5", "-9223372036854775807"),
                ("9223372036854775806", "9223372036854775807", "1"),
                ("0", "10", "4611686018427387904"),
                ("1", "9223372036854775807", "3074457345618258602"),
                ("-9223372036854775808", "-9223372036854775806", "1"),
            ]
            .get(g.below(6))
            .unwrap();
            match g.below(3) {
                0 => format!("{{{{ untilStep {a} {b} {step} }}}}"),
                1 => format!("{{{{ seq {a} {step} {b} }}}}"),
                _ => format!("{{{{ untilStep {a} {b} {step} | len }}}}"),
            }
        }
        7 => {
            let f = g.pick(&["div", "mod", "mul", "add", "sub"]);
            format!("{{{{ {f} {} {} }}}}", g.pick(INTS), g.pick(INTS))
        }
        8 => {
            let on = g.pick(&[
                ".",
                ".pci",
                ".pci.device",
                "(index .pci.device 0)",
                "(dict \"a\" 1)",
                "(list 1 2)",
                "\"abc\"",
                "(split \",\" \"a,b\")",
                "(index . \"nosuch\")",
            ]);
            let keys: Vec<&str> = (0..1 + g.below(3))
                .map(|_| {
                    g.pick(&[
                        "0",
                        "1",
                        "2",
                        "-1",
                        "\"device\"",
                        "\"pci\"",
                        "\"nosuch\"",
                        "\"vendor\"",
                        "1.0",
                        "nil",
                        "true",
                        "\"a\"",
                        "\"_1\"",
                    ])
                })
                .collect();
            format!("{{{{ index {on} {} }}}}", keys.join(" "))
        }
        9 => {
            let repl: String = (0..1 + g.below(4))
                .map(|_| {
                    g.pick(&[
                        "$1", "$2", "$0", "${1}", "$$", "$", "$01", "${}", "$x", "${n}", "$n", "-",
                        "a", "{", "}", "$1x", "$_", "${1", "$é",
                    ])
                })
                .collect();
            format!("{{{{ regexReplaceAll \"(?P<n>a)(b)?\" \"xaby ab\" \"{repl}\" }}}}")
        }
        10 => {
            // One key a dict at most: Go's `keys` and `values` list a map in random order.
            let arg = g.pick(&[
                ".",
                ".pci",
                "nil",
                "(dict \"a\" 1)",
                "(split \",\" \"a\")",
                "(semver \"1.2.3\")",
                "(index . \"nosuch\")",
                "(list)",
                "(dict \"a\" nil)",
                "(dict \"b\" (list nil))",
            ]);
            let call = g.pick(&[
                "hasKey {} \"a\"",
                "keys {}",
                "values {}",
                "get {} \"a\"",
                "pick {} \"a\"",
                "omit {} \"a\"",
                "pluck \"a\" {}",
                "unset {} \"a\"",
                "set {} \"a\" 1",
                "merge (dict) {}",
                "dig \"a\" 1 {}",
                "len {}",
                "typeOf {}",
                "kindOf {}",
                "html {}",
                "js {}",
                "urlquery {}",
                "printf \"%v|%d|%s\" {} {} {}",
            ]);
            format!("{{{{ {} }}}}", call.replace("{}", arg))
        }
        _ => {
            let v = g.pick(&[
                "(list nil 1)",
                "(dict \"a\" nil)",
                "(semver \"1.2.3\")",
                "(list (semver \"1.2\"))",
                "nil",
                "(index .pci.device 0)",
                ".kernel",
                "(list 1.5 nil)",
                "9223372036854775808",
                "(fromJson \"\\\"\\\\ud800x\\\"\")",
            ]);
            // A version inside a list prints its address for the other verbs: not generated.
            let verbs: &[&str] = if v.starts_with("(list (semver") {
                &["%v", "%s", "%q", "%x"]
            } else {
                &[
                    "%v", "%s", "%d", "%q", "%x", "%+v", "%#v", "%T", "%5v", "%-6s", "%.2s",
                ]
            };
            format!("{{{{ printf \"{}\" {v} }}}}", g.pick(verbs))
        }
    };
    // NFD runs a template on its matched features only: a field of them needs them here too.
    let data =
        if t.contains(".pci") || t.contains(".kernel") || (t.contains('.') && g.below(2) == 0) {
            "nfd"
        } else {
            "nil"
        };
    (data, t)
}

/// NFD's template data as the rules engine builds it (`rules::eval`): objects, the elements'
/// attributes strings; the same as tests/sprig-oracle/nodefeaturerule.go's `Data`.
fn nfd_data() -> gtmpl_ng::Value {
    use gtmpl_ng::Value;
    let obj = |pairs: &[(&str, Value)]| {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    };
    let element = |pairs: &[(&str, &str)]| {
        let pairs: Vec<(&str, Value)> = pairs.iter().map(|(k, v)| (*k, Value::from(*v))).collect();
        obj(&pairs)
    };
    obj(&[
        (
            "pci",
            obj(&[(
                "device",
                Value::Array(vec![
                    element(&[("class", "0300"), ("vendor", "8086"), ("device", "9a49")]),
                    element(&[("class", "0380"), ("vendor", "8086"), ("device", "56c0")]),
                ]),
            )]),
        ),
        (
            "kernel",
            obj(&[(
                "version",
                Value::Array(vec![element(&[("Name", "major"), ("Value", "6")])]),
            )]),
        ),
    ])
}

/// What this engine writes, in the oracle's form.
fn here(data: &str, source: &str) -> String {
    use gpu_labeler::gotmpl::engine;
    let data = if data == "nfd" {
        nfd_data()
    } else {
        gtmpl_ng::Value::Nil
    };
    match engine::parse(source) {
        Err(f) => format!("ERROR: {}", f.message),
        Ok(t) => match t.render(&gtmpl_ng::Context::from(data)) {
            Ok(out) => out,
            Err(e) => format!("ERROR: {}", engine::exec_message(&e).1),
        },
    }
}

/// Where this engine answers otherwise on purpose (docs/rules.md, deviation 5): Go's answer and
/// this one, for a generated template.
fn documented(go: &str, ours: &str) -> bool {
    // A matched element taken where Go wants map[string]interface {} ("accepts more (map)").
    go.ends_with("expected map[string]interface {}; got nodefeaturerule.MatchedElement")
        || go.ends_with("interface {} is nodefeaturerule.MatchedElement, not map[string]interface {}")
        // A nil map or list is an empty one.
        || go.replace("null", "{}") == ours
        || go.replace("null", "[]") == ours
        // int and int64 are one kind.
        || go.replace("int64", "int") == ours
}

/// Templates of every class issue #50 names, generated over the arguments each class turns on
/// (float verbs, flags, widths and precisions; round's places and threshold; chunk sizes; wrapping
/// ranges; MinInt64 arithmetic; index paths and keys on the typed data; replacement templates;
/// map functions on typed, nil and version arguments; printf of nils, versions, elements), render
/// here exactly as in Go, error messages included, but for the documented deviations.
#[test]
fn generated_templates_render_as_go_renders_them() {
    let binary = oracle();
    let mut g = Gen(0x9E3779B97F4A7C15);
    let cases: Vec<(&str, String)> = (0..4000).map(|_| generated(&mut g)).collect();
    let input = cases
        .iter()
        .map(|(data, source)| serde_json::to_string(&[*data, source.as_str()]).unwrap())
        .collect();
    let answers: Vec<String> = go_build::answers(&binary, input);
    assert_eq!(answers.len(), cases.len());
    let mut differ = Vec::new();
    let mut deviations = 0;
    for ((data, source), go) in cases.iter().zip(&answers) {
        let ours = here(data, source);
        // Go's "error calling NAME: " before a function's own message is not written here.
        let go = match go.strip_prefix("ERROR: error calling ") {
            Some(rest) => format!("ERROR: {}", rest.split_once(": ").map_or(rest, |r| r.1)),
            None => go.clone(),
        };
        if ours == go {
            continue;
        }
        if documented(&go, &ours) {
            deviations += 1;
            continue;
        }
        differ.push(format!(
            "[{data}] {source}\n    Go: {go:?}\n  here: {ours:?}"
        ));
    }
    assert!(
        differ.is_empty(),
        "{} of {} generated templates differ:\n{}",
        differ.len(),
        cases.len(),
        differ.join("\n")
    );
    // The deviations are a few of the cases, not where the generator spends its time.
    assert!(deviations < cases.len() / 20, "{deviations} deviations");
}
