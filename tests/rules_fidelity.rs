//! NFD's rule files, unchanged, give NFD's labels where Go's template and regexp engines and
//! Sprig (spf13/cast) decide (issue 21): each label below is what nfd-master publishes for the
//! same rule over the same features, the Go behaviour written down from Go's and Sprig's
//! documented semantics (strconv's base-0 parsing, `Atoi`'s clamping, RE2's `\Q...\E` and
//! repeat limit, Sprig's examples). Through the real binary, whole label maps.

use std::process::Command;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");

/// `labels -o json` of the Dell 8x H100's features with one rule file.
fn labels(rules: &str) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yaml");
    std::fs::write(&file, rules).unwrap();
    let out = Command::new(BIN)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["labels", "-o", "json", "--no-default-rules", "--features"])
        .arg("tests/fixtures/golden/dell-xe9680-8xh100.features.json")
        .arg("--rules")
        .arg(&file)
        .env_remove("GPU_LABELER_CONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr)
        .unwrap()
        .replace(&file.display().to_string(), "rules.yaml");
    (serde_json::from_slice(&out.stdout).unwrap(), stderr)
}

fn rule(name: &str, template: &str, expressions: &str) -> String {
    format!(
        "    - name: {name}\n      labelsTemplate: |\n        {template}\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n{expressions}\n"
    )
}

const NVIDIA: &str = "            vendor: {op: In, value: [\"10de\"]}\n            class: {op: In, value: [\"0302\"]}";

#[test]
fn templates_convert_and_compute_as_go_and_sprig_do() {
    let rules = [
        // spf13/cast parses base 0: a class code with a leading 0 is octal.
        rule(
            "class",
            "class-int={{ (index .pci.device 0).class | int }}",
            NVIDIA,
        ),
        rule(
            "hex",
            "hex={{ printf \"0x%s\" (index .pci.device 0).device | int }}",
            NVIDIA,
        ),
        rule("fraction", "fraction={{ \"12.4\" | int }}", NVIDIA),
        rule("atoi", "atoi={{ atoi \"99999999999999999999\" }}", NVIDIA),
        // Integer arguments of the float functions are numbers, not 0.
        rule("divf", "gib={{ divf 81920 1024 }}", NVIDIA),
        rule("addf", "sum={{ addf 1 2 }}", NVIDIA),
        // A number is truthy unless 0.
        rule(
            "empty",
            "nonzero={{ if empty 5 }}no{{ else }}yes{{ end }}",
            NVIDIA,
        ),
        // Functions that were missing.
        rule("seq", "seq={{ seq 3 | replace \" \" \"-\" }}", NVIDIA),
        rule("sha1", "sha1={{ sha1sum \"abc\" | trunc 12 }}", NVIDIA),
        rule(
            "b32",
            "b32={{ b32enc \"foo\" | trimSuffix \"===\" }}",
            NVIDIA,
        ),
        rule("toDecimal", "perm={{ toDecimal \"0755\" }}", NVIDIA),
        // `index` of a key a matched element lacks is its zero value, "".
        rule(
            "index",
            "missing=x{{ index (index .pci.device 0) \"nosuch\" }}y",
            NVIDIA,
        ),
    ]
    .concat();
    let (out, stderr) = labels(&format!(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: fidelity\nspec:\n  rules:\n{rules}"
    ));
    assert_eq!(stderr, "");
    let p = |k: &str| format!("feature.node.kubernetes.io/{k}");
    assert_eq!(
        out,
        json!({"labels": {
            p("class-int"): "194",
            p("hex"): "9008",
            p("fraction"): "0",
            p("atoi"): "9223372036854775807",
            p("gib"): "80",
            p("sum"): "3",
            p("nonzero"): "yes",
            p("seq"): "1-2-3",
            p("sha1"): "a9993e364706",
            p("b32"): "MZXW6",
            p("perm"): "493",
            p("missing"): "xy",
            p("pci-0300_102b.present"): "true",
            p("pci-0302_10de.present"): "true",
            p("pci-0302_10de.sriov.capable"): "true",
        }})
    );
}

#[test]
fn regexes_are_re2_as_go_compiles_them() {
    let rules = [
        // `\Q...\E` quotes a literal.
        rule(
            "quoted",
            "quoted=true",
            "            vendor: {op: InRegexp, value: [\"^\\\\Q10de\\\\E$\"]}",
        ),
        // `\w` is ASCII; `{` not starting a repeat is a literal.
        rule(
            "ascii",
            "ascii=true",
            "            device_name: {op: InRegexp, value: [\"^\\\\w+ \\\\[H100\"]}",
        ),
        // A repeat count over 1000 is an error: the rule fails, reported; the others apply.
        rule(
            "repeat",
            "repeat=true",
            "            vendor: {op: InRegexp, value: [\"^x{1001}$\"]}",
        ),
    ]
    .concat();
    let (out, stderr) = labels(&format!(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: re2\nspec:\n  rules:\n{rules}"
    ));
    assert_eq!(
        out,
        json!({"labels": {
            "feature.node.kubernetes.io/quoted": "true",
            "feature.node.kubernetes.io/ascii": "true",
            "feature.node.kubernetes.io/pci-0300_102b.present": "true",
            "feature.node.kubernetes.io/pci-0302_10de.present": "true",
            "feature.node.kubernetes.io/pci-0302_10de.sriov.capable": "true",
        }})
    );
    assert_eq!(
        stderr,
        "warning: rule \"repeat\" (NodeFeatureRule \"re2\", rules.yaml:21:7) failed: invalid regexp \"^x{1001}$\": invalid repeat count: `{1001}`\n"
    );
}

/// Printing, truth, arithmetic, JSON, argument kinds, comparisons, word splitting and string
/// literals as Go's text/template and Sprig v3.3.0 give them (issue 21): each label is what
/// nfd-master publishes for the rule; the two rules Go fails produce nothing and are reported.
#[test]
fn templates_print_compare_and_type_check_as_go_does() {
    let rules = [
        // A float 0 is false (gtmpl took every float as true).
        rule(
            "zero",
            r#"zero={{ if subf 1 1 }}true{{ else }}false{{ end }}"#,
            NVIDIA,
        ),
        // A float constant stays a float64 and prints as %v does: 1e+06.
        rule(
            "mega",
            r#"mega={{ 1e6 | toString | replace "+" "p" }}"#,
            NVIDIA,
        ),
        // shopspring decimals: 0.3 and 16 places, not float64 arithmetic.
        rule("sum", r#"sum={{ addf 0.1 0.2 }}"#, NVIDIA),
        rule(
            "third",
            r#"third={{ divf 2 3 | toString | replace "." "_" }}"#,
            NVIDIA,
        ),
        // json.Marshal escapes HTML characters.
        rule(
            "json",
            r#"json={{ toJson "<b>" | replace "\\" "x" | trimAll "\"" }}"#,
            NVIDIA,
        ),
        // A *semver.Version prints as its String().
        rule("ver", r#"ver={{ semver "v1.2.3" }}"#, NVIDIA),
        // Go's argument kinds and comparison kinds: both rules fail.
        rule("upper", r#"upper={{ true | upper }}"#, NVIDIA),
        rule("mixed", r#"mixed={{ eq 1 1.0 }}"#, NVIDIA),
        // xstrings v1.5.0's words; camelcase is ToPascalCase in Sprig v3.3.0.
        rule("snake", r#"snake={{ snakecase "HTTPServer" }}"#, NVIDIA),
        rule(
            "camel",
            r#"camel={{ camelcase "GOLANG_IS_GREAT" }}"#,
            NVIDIA,
        ),
        // strings.Title: an apostrophe separates words.
        rule(
            "title",
            r#"title={{ title "don't" | replace "'" "-" }}"#,
            NVIDIA,
        ),
        // An escaped backslash ends a string; a raw string keeps its backslash.
        rule(
            "escape",
            r#"escape={{ "a\\" | replace "\\" "-" }}{{ `b\c` | replace "\\" "-" }}"#,
            NVIDIA,
        ),
    ]
    .concat();
    let (out, stderr) = labels(&format!(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: go\nspec:\n  rules:\n{rules}"
    ));
    let p = |k: &str| format!("feature.node.kubernetes.io/{k}");
    assert_eq!(
        out,
        json!({"labels": {
            p("zero"): "false",
            p("mega"): "1ep06",
            p("sum"): "0.3",
            p("third"): "0_6666666666666667",
            p("json"): "xu003cbxu003e",
            p("ver"): "1.2.3",
            p("snake"): "http_server",
            p("camel"): "GolangIsGreat",
            p("title"): "Don-T",
            p("escape"): "a-b-c",
            p("pci-0300_102b.present"): "true",
            p("pci-0302_10de.present"): "true",
            p("pci-0302_10de.sriov.capable"): "true",
        }})
    );
    assert_eq!(
        stderr,
        "warning: rule \"upper\" (NodeFeatureRule \"go\", rules.yaml:55:7) failed: failed to expand template at line 57, column 18: wrong type for value; expected string; got bool\n\
         warning: rule \"mixed\" (NodeFeatureRule \"go\", rules.yaml:63:7) failed: failed to expand template at line 65, column 18: incompatible types for comparison\n"
    );
}

/// Issue 39, classes 1 to 3: a pattern Go's `regexp.Compile` refuses fails its rule (reported,
/// the other rules apply), one Go accepts matches as Go matches it. Go's decisions from
/// `regexp/syntax/parse.go` (Go 1.25): stacked repetition operators, flags other than `imsU`
/// and unknown escapes are errors; braced and one-letter Unicode classes, `\x{...}` and octal
/// escapes are accepted; `[` inside a class is a literal. The errors are Go's texts.
#[test]
fn regexes_go_refuses_fail_and_those_it_accepts_match() {
    let on = |key: &str, pattern: &str| {
        format!("            {key}: {{op: InRegexp, value: [{pattern:?}]}}")
    };
    let rules = [
        // Class 1: Go refuses these.
        rule("stars", "stars=true", &on("vendor", "10de**")),
        rule("pluses", "pluses=true", &on("vendor", "10de++")),
        rule("starplus", "starplus=true", &on("vendor", "x*+")),
        rule("counted", "counted=true", &on("vendor", "e{1}*")),
        rule("extended", "extended=true", &on("vendor", "(?x)10de")),
        rule("unicode-escape", "uescape=true", &on("vendor", "\\u0031")),
        // Class 2: Go accepts these; each matches the H100's attributes as Go matches them.
        rule(
            "letters",
            "letters=true",
            &on("device_name", "^\\p{L}+\\d+ \\["),
        ),
        rule(
            "one-letter",
            "oneletter=true",
            &on("device_name", "^\\pL\\pL"),
        ),
        rule("greek", "greek=true", &on("device_name", "\\p{Greek}")),
        rule(
            "not-greek",
            "notgreek=true",
            &on("device_name", "^\\P{Greek}+$"),
        ),
        rule("han", "han=true", &on("device_name", "\\p{Han}")),
        rule("hex", "hex=true", &on("vendor_name", "^\\x{4e}VIDIA")),
        rule("octal", "octal=true", &on("vendor", "^\\061\\060de$")),
        rule("nul", "nul=true", &on("vendor", "\\0")),
        // Class 3: `[` in a class is a literal: `[[e]` is `[` or `e`.
        rule("bracket", "bracket=true", &on("vendor", "^10d[[e]$")),
        rule(
            "collating",
            "collating=true",
            &on("device_name", "[[.H.]]100"),
        ),
        rule(
            "equivalence",
            "equivalence=true",
            &on("device_name", "[[=a=]]"),
        ),
    ]
    .concat();
    let (out, stderr) = labels(&format!(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: re2\nspec:\n  rules:\n{rules}"
    ));
    let p = |k: &str| format!("feature.node.kubernetes.io/{k}");
    assert_eq!(
        out,
        json!({"labels": {
            p("letters"): "true",
            p("oneletter"): "true",
            p("notgreek"): "true",
            p("hex"): "true",
            p("octal"): "true",
            // `[[.H.]]100`: one of `[`, `.`, `H`, then `]100`: "GH100 [H100 ..." has no `]100`.
            // `[[=a=]]`: one of `[`, `=`, `a`, then `]`: "... 80GB]" ends `B]`, no match.
            p("bracket"): "true",
            p("pci-0300_102b.present"): "true",
            p("pci-0302_10de.present"): "true",
            p("pci-0302_10de.sriov.capable"): "true",
        }})
    );
    let failed = |name: &str, line: u32, what: &str| {
        format!(
            "warning: rule \"{name}\" (NodeFeatureRule \"re2\", rules.yaml:{line}:7) failed: {what}\n"
        )
    };
    assert_eq!(
        stderr,
        [
            failed(
                "stars",
                7,
                "invalid regexp \"10de**\": invalid nested repetition operator: `**`"
            ),
            failed(
                "pluses",
                14,
                "invalid regexp \"10de++\": invalid nested repetition operator: `++`"
            ),
            failed(
                "starplus",
                21,
                "invalid regexp \"x*+\": invalid nested repetition operator: `*+`"
            ),
            failed(
                "counted",
                28,
                "invalid regexp \"e{1}*\": invalid nested repetition operator: `{1}*`"
            ),
            failed(
                "extended",
                35,
                "invalid regexp \"(?x)10de\": invalid or unsupported Perl syntax: `(?x`"
            ),
            failed(
                "unicode-escape",
                42,
                "invalid regexp \"\\\\u0031\": invalid escape sequence: `\\u`"
            ),
        ]
        .concat()
    );
}

/// Issue 39, class 4: NFD's template data is typed (`map[string]map[string][]MatchedElement`),
/// so `index` of a domain or feature the data lacks (a `matchAny` element that did not match,
/// a feature no term named) is the zero value of its type, a nil map or a nil list, whose
/// `len` is 0 (text/template's `index` on a map: `reflect.Zero` of the element type for a
/// missing key). A missing key of an element is "" (`MatchedElement` is `map[string]string`).
#[test]
fn index_of_what_the_template_data_lacks_is_go_s_zero_value() {
    let rules = "    - name: zero\n      labelsTemplate: |\n        modules={{ len (index . \"kernel\" \"loadedmodule\") }}\n        domain={{ len (index . \"cpu\") }}\n        feature={{ len (index .pci \"nosuch\") }}\n        devices={{ len (index . \"pci\" \"device\") }}\n        attr=x{{ index (index .pci.device 0) \"nosuch\" }}\n      matchAny:\n        - matchFeatures:\n            - feature: kernel.loadedmodule\n              matchExpressions:\n                nosuchmodule: {op: Exists}\n        - matchFeatures:\n            - feature: pci.device\n              matchExpressions:\n                vendor: {op: In, value: [\"10de\"]}\n                class: {op: In, value: [\"0302\"]}\n";
    let (out, stderr) = labels(&format!(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: zero\nspec:\n  rules:\n{rules}"
    ));
    assert_eq!(stderr, "");
    let p = |k: &str| format!("feature.node.kubernetes.io/{k}");
    assert_eq!(
        out,
        json!({"labels": {
            p("modules"): "0",
            p("domain"): "0",
            p("feature"): "0",
            p("devices"): "8",
            p("attr"): "x",
            p("pci-0300_102b.present"): "true",
            p("pci-0302_10de.present"): "true",
            p("pci-0302_10de.sriov.capable"): "true",
        }})
    );
}

/// Issue 39, classes 5 and 6: `{{ else with }}` (Go 1.23's text/template, which NFD v0.19 is
/// built with) parses as `{{ else }}{{ with }}...{{ end }}`; a call with a wrong argument count
/// fails the template when it runs, as text/template's `evalCall` checks the count against the
/// function's Go signature (`toJson(v interface{})`, `hello()`).
#[test]
fn else_with_parses_and_wrong_argument_counts_fail() {
    let rules = [
        rule(
            "elsewith",
            r#"elsewith={{ with index .pci "nosuch" }}a{{ else with (index .pci.device 0).vendor }}{{ . }}{{ else }}c{{ end }}"#,
            NVIDIA,
        ),
        rule("tojson", "tojson={{ toJson }}", NVIDIA),
        rule("hello", "hello={{ hello 1 }}", NVIDIA),
        rule("piped", r#"piped={{ "x" | upper "y" }}"#, NVIDIA),
        rule("counted", "counted={{ len .pci.device | toJson }}", NVIDIA),
    ]
    .concat();
    let (out, stderr) = labels(&format!(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: calls\nspec:\n  rules:\n{rules}"
    ));
    let p = |k: &str| format!("feature.node.kubernetes.io/{k}");
    assert_eq!(
        out,
        json!({"labels": {
            p("counted"): "8",
            p("elsewith"): "10de",
            p("pci-0300_102b.present"): "true",
            p("pci-0302_10de.present"): "true",
            p("pci-0302_10de.sriov.capable"): "true",
        }})
    );
    assert_eq!(
        stderr,
        "warning: rule \"tojson\" (NodeFeatureRule \"calls\", rules.yaml:15:7) failed: failed to expand template at line 17, column 19: wrong number of args for toJson: want 1 got 0\n\
         warning: rule \"hello\" (NodeFeatureRule \"calls\", rules.yaml:23:7) failed: failed to expand template at line 25, column 18: wrong number of args for hello: want 0 got 1\n\
         warning: rule \"piped\" (NodeFeatureRule \"calls\", rules.yaml:31:7) failed: failed to expand template at line 33, column 18: wrong number of args for upper: want 1 got 2\n"
    );
}

/// Issue 39, classes 7 to 10, through whole rules: what Go's text/template and Sprig v3.3.0
/// give (the sources of each are in `tests/fixtures/sprig/cases.tsv`, where every case of
/// these classes has a row): mergo's treatment of nil, `deepCopy nil` failing, the decoders'
/// error text, amd64's float-to-int conversion, strconv.ParseFloat's syntax, regexp.Split,
/// Go's wrapping int in `seq`, encoding/json's nil for a number it cannot hold, `urlquery`'s
/// `<no value>`, `%#v`.
#[test]
fn sprig_edges_give_go_s_labels() {
    let rules = [
        rule(
            "merge",
            r#"merge={{ (merge (dict "a" "1") nil).a }}"#,
            NVIDIA,
        ),
        rule(
            "sort",
            r#"sort={{ sortAlpha (list "b" nil "a") | join "-" }}"#,
            NVIDIA,
        ),
        rule("deepcopy", "deepcopy={{ deepCopy nil }}", NVIDIA),
        rule(
            "b64",
            r#"b64={{ b64dec "Zm9v!" | replace " " "-" }}"#,
            NVIDIA,
        ),
        rule(
            "b32",
            r#"b32={{ b32dec "MZXW6==x" | replace " " "-" }}"#,
            NVIDIA,
        ),
        rule(
            "int",
            r#"int={{ int64 1e21 | toString | replace "-" "minus" }}"#,
            NVIDIA,
        ),
        rule("max", "max={{ max 1 1e21 }}", NVIDIA),
        rule(
            "underscore",
            r#"underscore={{ float64 "1_000.5" }}"#,
            NVIDIA,
        ),
        rule("hexfloat", r#"hexfloat={{ float64 "0x1p-2" }}"#, NVIDIA),
        rule("range", r#"range={{ float64 "1e400" }}"#, NVIDIA),
        rule(
            "split",
            r#"split={{ regexSplit "" "abc" -1 | join "-" }}"#,
            NVIDIA,
        ),
        rule("seq", "seq=x{{ seq 9223372036854775807 }}", NVIDIA),
        rule("json", r#"json={{ len (fromJson "[1, 1e400]") }}"#, NVIDIA),
        rule(
            "query",
            r#"query={{ urlquery nil | replace "%" "x" | replace "+" "-" }}"#,
            NVIDIA,
        ),
        rule("gosyntax", r#"gosyntax={{ printf "%#v" 5 }}"#, NVIDIA),
    ]
    .concat();
    let (out, stderr) = labels(&format!(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: edges\nspec:\n  rules:\n{rules}"
    ));
    let p = |k: &str| format!("feature.node.kubernetes.io/{k}");
    assert_eq!(
        out,
        json!({"labels": {
            p("merge"): "1",
            p("sort"): "a-b",
            p("b64"): "illegal-base64-data-at-input-byte-4",
            p("b32"): "illegal-base32-data-at-input-byte-6",
            p("int"): "minus9223372036854775808",
            p("max"): "1",
            p("underscore"): "1000.5",
            p("hexfloat"): "0.25",
            p("range"): "0",
            p("split"): "a-b-c",
            p("seq"): "x",
            p("json"): "2",
            p("query"): "x3Cno-valuex3E",
            p("gosyntax"): "5",
            p("pci-0300_102b.present"): "true",
            p("pci-0302_10de.present"): "true",
            p("pci-0302_10de.sriov.capable"): "true",
        }})
    );
    assert_eq!(
        stderr,
        "warning: rule \"deepcopy\" (NodeFeatureRule \"edges\", rules.yaml:23:7) failed: failed to expand template at line 25, column 21: deepCopy: reflect: call of reflect.Value.Type on zero Value\n"
    );
}
