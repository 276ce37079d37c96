//! The published JSON schema of rule files (schema/nodefeaturerule.schema.json) against the code
//! that reads them, so that the two cannot drift: every rule file the project ships or keeps as a
//! fixture is valid exactly when the loader takes it; each document of a table that the loader
//! (or `rules check`) refuses is refused by the schema too, and the other way round; the
//! schema's operators are the loader's, its value counts and integer and version patterns are
//! those of `rules check`, its feature names are the catalog's.
//!
//! The YAML is read by the project's own reader and turned into JSON node for node, so the schema
//! sees the same types as the loader (YAML 1.1 booleans: an unquoted `yes` is a boolean).

use std::path::{Path, PathBuf};

use gpu_labeler::features::CATALOG;
use gpu_labeler::rules::{RuleSet, RuleSource, check};
use gpu_labeler::yaml::document::{Node, Val, parse_documents};
use serde_json::Value;

const SCHEMA_PATH: &str = "schema/nodefeaturerule.schema.json";

fn schema() -> Value {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(SCHEMA_PATH))
        .expect("the schema file");
    serde_json::from_str(&text).expect("the schema is JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft7::new(&schema()).expect("the schema compiles")
}

/// A node as JSON: map keys as Kubernetes reads them (scalars as text), numbers as numbers.
fn to_json(node: &Node) -> Value {
    match &node.val {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(s) => serde_json::from_str(s)
            .unwrap_or_else(|_| panic!("{}: the number {s} has no JSON form", node.pos)),
        Val::Str(s) => Value::String(s.clone()),
        Val::Seq(items) => Value::Array(items.iter().map(to_json).collect()),
        Val::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| {
                    let key = k
                        .key_text()
                        .unwrap_or_else(|| panic!("{}: a key that is not a scalar", k.pos));
                    (key, to_json(v))
                })
                .collect(),
        ),
    }
}

/// The documents of a rule file, as JSON.
fn documents(text: &str) -> Vec<Value> {
    let (docs, errors) = parse_documents(text);
    assert_eq!(errors, vec![], "syntax errors");
    docs.iter().map(to_json).collect()
}

/// The rule documents of a file: its documents, with a ConfigMap replaced by the documents of
/// those of its `data` entries that hold a NodeFeatureRule (as the loader reads it).
fn rule_documents(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for doc in documents(text) {
        if doc["kind"] != "ConfigMap" {
            out.push(doc);
            continue;
        }
        let Some(data) = doc["data"].as_object() else {
            continue;
        };
        for entry in data.values().filter_map(Value::as_str) {
            let docs = documents(entry);
            if docs.iter().any(|d| d["kind"] == "NodeFeatureRule") {
                out.extend(docs);
            }
        }
    }
    out
}

/// Where the schema refuses the documents of `text`: `document index: JSON pointer`, sorted.
fn schema_errors(v: &jsonschema::Validator, text: &str) -> Vec<String> {
    let mut out: Vec<String> = rule_documents(text)
        .iter()
        .enumerate()
        .flat_map(|(i, doc)| {
            v.iter_errors(doc)
                .map(move |e| format!("{i}: {}", e.instance_path()))
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

fn catalog_names() -> Vec<&'static str> {
    CATALOG.iter().map(|(name, _)| *name).collect()
}

/// The messages of the loader's errors (what makes it leave an object out) and of `rules
/// check`'s errors (those, then what would fail or never match at evaluation, and the labels it
/// warns are rejected).
fn loader_errors(text: &str) -> (Vec<String>, Vec<String>) {
    let sources = vec![RuleSource {
        name: "case.yaml".into(),
        text: text.into(),
    }];
    let (_, load) = RuleSet::load(sources.clone());
    let report = check(&sources, &catalog_names());
    let messages = |e: &[gpu_labeler::rules::RuleLoadError]| -> Vec<String> {
        e.iter().map(|e| e.message.clone()).collect()
    };
    // A label that is not a valid label is a warning of `rules check` (NFD's CRD admits the
    // rule; the label is rejected when it matches, as `labels` says), and one the schema
    // refuses all the same: counted with the errors here, its last words left out.
    let rejected = report.warnings.iter().filter_map(|w| {
        w.message
            .strip_suffix(gpu_labeler::rules::LABEL_REJECTED)
            .map(str::to_string)
    });
    (
        messages(&load),
        messages(&report.errors)
            .into_iter()
            .chain(rejected)
            .collect(),
    )
}

/// Every file under `dir` named *.yaml, *.yml or *.json, in path order.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else if matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("yaml" | "yml" | "json")
            ) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

#[test]
fn the_schema_is_a_valid_draft_07_schema() {
    let s = schema();
    assert_eq!(s["$schema"], "http://json-schema.org/draft-07/schema#");
    jsonschema::draft7::meta::validate(&s).expect("valid against draft-07's meta-schema");
}

/// What the project ships: the built-in rules (rules/, as embedded and as files) and the example
/// rules in deploy/'s ConfigMap.
#[test]
fn every_shipped_rule_file_is_valid() {
    let v = validator();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped: Vec<(String, String)> = gpu_labeler::default_rules::FILES
        .iter()
        .map(|(name, text)| (name.to_string(), text.to_string()))
        .chain(files_under(&root.join("rules")).into_iter().map(|p| {
            let name = p.strip_prefix(root).unwrap().display().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        }))
        .chain(["deploy/base/configmap.yaml"].map(|p| (p.to_string(), read(p))))
        .collect();
    let mut documents = 0;
    let mut results = Vec::new();
    for (name, text) in &shipped {
        documents += rule_documents(text).len();
        let (load, check) = loader_errors(text);
        results.push((name.clone(), load, check, schema_errors(&v, text)));
    }
    let clean: Vec<_> = shipped
        .iter()
        .map(|(name, _)| (name.clone(), vec![], vec![], vec![]))
        .collect();
    assert_eq!(results, clean);
    // Not vacuous: both shipped files, twice, and the ConfigMap's rules.
    assert_eq!((shipped.len(), documents), (5, 5));
}

/// Every rule fixture (NFD's and Intel's rule files, the typo files, the fuzzing corpus): the
/// schema accepts a file exactly when both the loader and `rules check` find no error.
#[test]
fn every_rule_fixture_is_valid_exactly_when_the_loader_takes_it() {
    let v = validator();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files: Vec<PathBuf> = ["tests/fixtures/rules", "fuzz/corpus/rules"]
        .iter()
        .flat_map(|d| files_under(&root.join(d)))
        .filter(|p| !p.to_string_lossy().ends_with(".features.json"))
        .collect();
    let mut by_loader = Vec::new();
    let mut by_schema = Vec::new();
    for path in &files {
        let name = path.strip_prefix(root).unwrap().display().to_string();
        let text = std::fs::read_to_string(path).unwrap();
        let (load, check) = loader_errors(&text);
        by_loader.push((name.clone(), load.is_empty() && check.is_empty()));
        by_schema.push((name, schema_errors(&v, &text).is_empty()));
    }
    assert_eq!(by_schema, by_loader);
    let refused: Vec<&str> = by_loader
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(
        refused,
        [
            // NFD's tests of the namespaces it refuses (extended resources, annotations).
            "tests/fixtures/rules/nfd/e2e-nodefeaturerule-4.yaml",
            "tests/fixtures/rules/nfd/e2e-nodefeaturerule-5.yaml",
            "tests/fixtures/rules/typos/other-words.yaml",
            "tests/fixtures/rules/typos/typos.yaml",
            "fuzz/corpus/rules/nfd-e2e-nodefeaturerule-4.yaml",
            "fuzz/corpus/rules/nfd-e2e-nodefeaturerule-5.yaml",
            "fuzz/corpus/rules/typos-typos.yaml",
        ]
    );
    // Not vacuous (43 files when this was written; more may come).
    assert!(files.len() >= 43, "{} rule fixtures", files.len());
}

const HEAD: &str = "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: case}\nspec:\n  rules:\n";

/// A document with one rule, written as a flow mapping.
fn rule(fields: &str) -> String {
    format!("{HEAD}    - {fields}\n")
}

/// A document whose one rule has one term on pci.device with the expression `class: <e>`.
fn expr(e: &str) -> String {
    rule(&format!(
        "{{name: r, labels: {{a: b}}, matchFeatures: [{{feature: pci.device, matchExpressions: {{class: {e}}}}}]}}"
    ))
}

/// A document whose one rule has the term `<t>`.
fn term(t: &str) -> String {
    rule(&format!(
        "{{name: r, labels: {{a: b}}, matchFeatures: [{t}]}}"
    ))
}

struct Case {
    name: &'static str,
    text: String,
    /// The loader's errors: non-empty when it leaves the object out.
    load: &'static [&'static str],
    /// The errors `rules check` reports besides the loader's.
    check: &'static [&'static str],
    /// Where the schema refuses it.
    schema: &'static [&'static str],
}

const EXPR: &str = "0: /spec/rules/0/matchFeatures/0/matchExpressions/class";

fn invalid_cases() -> Vec<Case> {
    let c = |name, text: String, load, check, schema| Case {
        name,
        text,
        load,
        check,
        schema,
    };
    vec![
        // Refused by the loader (the CRD's structural schema, strict field validation).
        c(
            "unknown operator",
            expr("{op: Equals, value: [a]}"),
            &[
                "matchFeatures[0].matchExpressions.class.op: unknown operator \"Equals\" (did you mean \"In\"?); supported: In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge, Lt, Le, GtLt, GeLe, IsTrue, IsFalse",
            ],
            &[],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/op"],
        ),
        c(
            "operator in the wrong case",
            expr("{op: in, value: [a]}"),
            &[
                "matchFeatures[0].matchExpressions.class.op: unknown operator \"in\" (did you mean \"In\"?); supported: In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge, Lt, Le, GtLt, GeLe, IsTrue, IsFalse",
            ],
            &[],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/op"],
        ),
        c(
            "no operator",
            expr("{value: [a]}"),
            &["matchFeatures[0].matchExpressions.class.op is required"],
            &[],
            &[EXPR],
        ),
        c(
            "a null expression",
            expr("null"),
            &["matchFeatures[0].matchExpressions.class: an expression needs at least an op"],
            &[],
            &[EXPR],
        ),
        c(
            "value not a list",
            expr("{op: In, value: a}"),
            &[
                "matchFeatures[0].matchExpressions.class.value must be a list of strings, got string (write value: [\"a\"])",
            ],
            &[],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/value"],
        ),
        c(
            "a number among the values",
            expr("{op: In, value: [10]}"),
            &[
                "matchFeatures[0].matchExpressions.class.value[0] must be a string, got number 10 (quote it: \"10\")",
            ],
            &[],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/value/0"],
        ),
        c(
            "a YAML 1.1 boolean among the values",
            expr("{op: In, value: [yes]}"),
            &[
                "matchFeatures[0].matchExpressions.class.value[0] must be a string, got boolean true (quote the value: YAML reads unquoted true/false, yes/no, on/off, y/n as booleans)",
            ],
            &[],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/value/0"],
        ),
        c(
            "an unknown field in an expression",
            expr("{op: In, values: [a]}"),
            &[
                "unknown field \"values\" in an expression (did you mean \"value\"?); known fields: op, value, type",
            ],
            &[],
            &[EXPR],
        ),
        c(
            "a rule without a name",
            rule("{labels: {a: b}}"),
            &["spec.rules[0].name is required"],
            &["rule name cannot be empty"],
            &["0: /spec/rules/0"],
        ),
        c(
            "a rule name that is a number",
            rule("{name: 1, labels: {a: b}}"),
            &[
                "spec.rules[0].name must be a string, got number 1 (quote it: \"1\")",
                "spec.rules[0].name is required",
            ],
            &["rule name cannot be empty"],
            &["0: /spec/rules/0/name"],
        ),
        c(
            "an unknown field in a rule",
            rule("{name: r, lables: {a: b}}"),
            &[
                "unknown field \"lables\" in a rule (did you mean \"labels\"?); known fields: name, labels, labelsTemplate, annotations, vars, varsTemplate, taints, extendedResources, matchFeatures, matchAny",
            ],
            &[],
            &["0: /spec/rules/0"],
        ),
        c(
            "a label value that YAML reads as a boolean",
            rule("{name: r, labels: {a: true}}"),
            &[
                "labels.a must be a string, got boolean true (quote the value: YAML reads unquoted true/false, yes/no, on/off, y/n as booleans)",
            ],
            &[],
            &["0: /spec/rules/0/labels/a"],
        ),
        c(
            "a label value that YAML reads as a number",
            rule("{name: r, labels: {a: 1}}"),
            &["labels.a must be a string, got number 1 (quote it: \"1\")"],
            &[],
            &["0: /spec/rules/0/labels/a"],
        ),
        c(
            "labels as a list",
            rule("{name: r, labels: [a]}"),
            &["labels must be a map, got list"],
            &[],
            &["0: /spec/rules/0/labels"],
        ),
        c(
            "a null annotation value",
            rule("{name: r, annotations: {a: null}}"),
            &["annotations.a must be a string, got null"],
            &[],
            &["0: /spec/rules/0/annotations/a"],
        ),
        c(
            "labelsTemplate as a list",
            rule("{name: r, labelsTemplate: [a]}"),
            &["labelsTemplate must be a string, got list"],
            &[],
            &["0: /spec/rules/0/labelsTemplate"],
        ),
        c(
            "a term without a feature",
            term("{matchExpressions: {}}"),
            &["matchFeatures[0].feature is required"],
            &[],
            &["0: /spec/rules/0/matchFeatures/0"],
        ),
        c(
            "an unknown field in a term",
            term("{feature: pci.device, matchExpression: {}}"),
            &[
                "unknown field \"matchExpression\" in a matchFeatures term (did you mean \"matchExpressions\"?); known fields: feature, matchExpressions, matchName",
            ],
            &[],
            &["0: /spec/rules/0/matchFeatures/0"],
        ),
        c(
            "matchExpressions as a list",
            term("{feature: pci.device, matchExpressions: [{op: Exists}]}"),
            &["matchFeatures[0].matchExpressions must be a map of element name to expression, got a list (the shape of a nodeSelector's matchExpressions, not NFD's); write: matchExpressions: {vendor: {op: In, value: [\"10de\"]}}"],
            &[],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions"],
        ),
        c(
            "matchFeatures as a map",
            rule("{name: r, labels: {a: b}, matchFeatures: {feature: pci.device}}"),
            &["matchFeatures must be a list, got map"],
            &[],
            &["0: /spec/rules/0/matchFeatures"],
        ),
        c(
            "a matchAny element without matchFeatures",
            rule("{name: r, labels: {a: b}, matchAny: [{}]}"),
            &["matchAny[0].matchFeatures is required"],
            &[],
            &["0: /spec/rules/0/matchAny/0"],
        ),
        c(
            "an unknown field in a matchAny element",
            rule("{name: r, labels: {a: b}, matchAny: [{matchFeatures: [], matchName: {op: Exists}}]}"),
            &[
                "unknown field \"matchName\" in matchAny[0]; known fields: matchFeatures",
            ],
            &[],
            &["0: /spec/rules/0/matchAny/0"],
        ),
        c(
            "a taint without an effect",
            rule("{name: r, taints: [{key: example.com/t}]}"),
            &["taints[0].effect is required"],
            &[],
            &["0: /spec/rules/0/taints/0"],
        ),
        c(
            "an unknown field in a taint",
            rule("{name: r, taints: [{key: example.com/t, effect: NoSchedule, operator: Exists}]}"),
            &[
                "unknown field \"operator\" in taints[0]; known fields: key, value, effect, timeAdded",
            ],
            &[],
            &["0: /spec/rules/0/taints/0"],
        ),
        c(
            "another apiVersion",
            HEAD.replace("v1alpha1", "v1beta1") + "    - {name: r, labels: {a: b}}\n",
            &[
                "unsupported apiVersion \"nfd.k8s-sigs.io/v1beta1\" (expected \"nfd.k8s-sigs.io/v1alpha1\")",
            ],
            &[],
            &["0: /apiVersion"],
        ),
        c(
            "another kind",
            HEAD.replace("kind: NodeFeatureRule", "kind: NodeFeature")
                + "    - {name: r, labels: {a: b}}\n",
            &["unsupported kind \"NodeFeature\" (expected \"NodeFeatureRule\")"],
            &[],
            &["0: /kind"],
        ),
        c(
            "no apiVersion",
            "kind: NodeFeatureRule\nmetadata: {name: case}\nspec: {rules: []}\n".into(),
            &["apiVersion is required (\"nfd.k8s-sigs.io/v1alpha1\")"],
            &[],
            &["0: "],
        ),
        c(
            "no metadata.name",
            HEAD.replace("{name: case}", "{namespace: x}") + "    - {name: r, labels: {a: b}}\n",
            &["metadata.name is required"],
            &[],
            &["0: /metadata"],
        ),
        c(
            "an empty metadata.name",
            HEAD.replace("{name: case}", "{name: \"\"}") + "    - {name: r, labels: {a: b}}\n",
            &["metadata.name is required"],
            &[],
            &["0: /metadata/name"],
        ),
        c(
            "no spec",
            "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: case}\n"
                .into(),
            &["spec is required"],
            &[],
            &["0: "],
        ),
        c(
            "no spec.rules",
            "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: case}\nspec: {}\n".into(),
            &["spec.rules is required"],
            &[],
            &["0: /spec"],
        ),
        c(
            "a null spec.rules",
            "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: case}\nspec: {rules: null}\n".into(),
            &["spec.rules must be a list, got null"],
            &[],
            &["0: /spec/rules"],
        ),
        c(
            "an unknown field in spec",
            "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: case}\nspec: {rules: [], rule: []}\n".into(),
            &["unknown field \"rule\" in spec (did you mean \"rules\"?); known fields: rules"],
            &[],
            &["0: /spec"],
        ),
        c(
            "an unknown top-level field",
            format!("{HEAD}    - {{name: r, labels: {{a: b}}}}\nstatus: {{}}\n"),
            &[
                "unknown field \"status\" in the object; known fields: apiVersion, kind, metadata, spec",
            ],
            &[],
            &["0: "],
        ),
        c(
            "a document that is a list",
            "- a\n- b\n".into(),
            &["a NodeFeatureRule document must be a map, got list"],
            &[],
            &["0: "],
        ),
        c(
            "a List whose items is a map",
            "apiVersion: v1\nkind: List\nitems: {}\n".into(),
            &["items must be a list, got map"],
            &[],
            &["0: /items"],
        ),
        c(
            "a List with an item that is not a NodeFeatureRule",
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: x}\n  data: {}\n".into(),
            &[
                "unknown field \"data\" in the object; known fields: apiVersion, kind, metadata, spec",
                "unsupported apiVersion \"v1\" (expected \"nfd.k8s-sigs.io/v1alpha1\")",
                "unsupported kind \"ConfigMap\" (expected \"NodeFeatureRule\")",
                "spec is required",
            ],
            &[],
            &["0: /items/0", "0: /items/0/apiVersion", "0: /items/0/kind"],
        ),
        // Taken by the loader, refused by `rules check`: they would fail at evaluation, or
        // never match.
        c(
            "Exists with values",
            expr("{op: Exists, value: [a]}"),
            &[],
            &["pci.device: class: Exists takes no values (has 1)"],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/value"],
        ),
        c(
            "IsFalse with values",
            expr("{op: IsFalse, value: [\"false\"]}"),
            &[],
            &["pci.device: class: IsFalse takes no values (has 1)"],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/value"],
        ),
        c(
            "In without values",
            expr("{op: In}"),
            &[],
            &["pci.device: class: In needs at least one value"],
            &[EXPR],
        ),
        c(
            "NotIn with an empty list",
            expr("{op: NotIn, value: []}"),
            &[],
            &["pci.device: class: NotIn needs at least one value"],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/value"],
        ),
        c(
            "Gt with two values",
            expr("{op: Gt, value: [\"1\", \"2\"]}"),
            &[],
            &["pci.device: class: Gt needs exactly one value (has 2)"],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/value"],
        ),
        c(
            "Le with a null value",
            expr("{op: Le, value: null}"),
            &[],
            &["pci.device: class: Le needs exactly one value (has 0)"],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/value"],
        ),
        c(
            "GtLt with one value",
            expr("{op: GtLt, value: [\"1\"]}"),
            &[],
            &["pci.device: class: GtLt needs exactly two values (has 1)"],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/value"],
        ),
        c(
            "Gt with a value that is not an integer",
            expr("{op: Gt, value: [\"1.5\"]}"),
            &[],
            &[
                "pci.device: class: Gt needs an integer, got \"1.5\" (add `type: version` to compare versions)",
            ],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/value/0"],
        ),
        c(
            "Ge with type version and a value that is not a version",
            expr("{op: Ge, value: [\"1.x\"], type: version}"),
            &[],
            &["pci.device: class: Ge needs a version, got \"1.x\": invalid semantic version"],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/value/0"],
        ),
        c(
            "a comparison with an unknown type",
            expr("{op: Lt, value: [\"1\"], type: semver}"),
            &[],
            &["pci.device: class: unknown type \"semver\" (the only type is \"version\")"],
            &["0: /spec/rules/0/matchFeatures/0/matchExpressions/class/type"],
        ),
        c(
            "matchName with values for Exists",
            term("{feature: kernel.loadedmodule, matchName: {op: Exists, value: [nvidia]}}"),
            &[],
            &["matchName: Exists takes no values (has 1)"],
            &["0: /spec/rules/0/matchFeatures/0/matchName"],
        ),
        c(
            "an empty rule name",
            rule("{name: \"\", labels: {a: b}}"),
            &[],
            &["rule name cannot be empty"],
            &["0: /spec/rules/0/name"],
        ),
        c(
            "a feature name without a domain",
            term("{feature: pcidevice}"),
            &[],
            &["invalid feature name \"pcidevice\" (not <domain>.<feature>)"],
            &["0: /spec/rules/0/matchFeatures/0/feature"],
        ),
        c(
            "a feature name of three parts",
            term("{feature: pci.device.class}"),
            &[],
            &["invalid feature name \"pci.device.class\" (not <domain>.<feature>)"],
            &["0: /spec/rules/0/matchFeatures/0/feature"],
        ),
        c(
            "a label value with a space",
            rule("{name: r, labels: {a: two words}}"),
            &[],
            &[
                "label \"feature.node.kubernetes.io/a\": invalid value \"two words\": a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            ],
            &["0: /spec/rules/0/labels/a"],
        ),
        c(
            "a label value of 64 characters",
            rule(&format!("{{name: r, labels: {{a: {}}}}}", "x".repeat(64))),
            &[],
            &[
                "label \"feature.node.kubernetes.io/a\": invalid value \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": must be no more than 63 characters (has 64)",
            ],
            &["0: /spec/rules/0/labels/a"],
        ),
        c(
            "a dynamic label value without an element",
            rule("{name: r, labels: {a: \"@gpu.node\"}}"),
            &[],
            &["dynamic value \"@gpu.node\" is not in the form '@domain.feature.element'"],
            &["0: /spec/rules/0/labels/a"],
        ),
        c(
            "a taint effect that does not exist",
            rule("{name: r, taints: [{key: example.com/t, effect: NoScheduled}]}"),
            &[],
            &[
                "taint \"example.com/t\": invalid taint effect \"NoScheduled\" (expected NoSchedule, PreferNoSchedule or NoExecute)",
            ],
            &["0: /spec/rules/0/taints/0/effect"],
        ),
        c(
            "a taint key without a prefix",
            rule("{name: r, taints: [{key: dedicated, effect: NoSchedule}]}"),
            &[],
            &["taint \"dedicated\": unprefixed keys are not allowed"],
            &["0: /spec/rules/0/taints/0/key"],
        ),
        c(
            "a taint value with a space",
            rule("{name: r, taints: [{key: example.com/t, value: two words, effect: NoSchedule}]}"),
            &[],
            &[
                "taint \"example.com/t\": invalid value \"two words\": a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            ],
            &["0: /spec/rules/0/taints/0/value"],
        ),
        c(
            "a label key with a space",
            rule("{name: r, labels: {\"a b\": c}}"),
            &[],
            &[
                "invalid label key \"feature.node.kubernetes.io/a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            ],
            &["0: /spec/rules/0/labels"],
        ),
        c(
            "a label key with two slashes",
            rule("{name: r, labels: {example.com/a/b: c}}"),
            &[],
            &[
                "invalid label key \"example.com/a/b\": a qualified name must be a name with an optional DNS subdomain prefix and one '/' (e.g. 'example.com/MyName')",
            ],
            &["0: /spec/rules/0/labels"],
        ),
        c(
            "an annotation in kubernetes.io",
            rule("{name: r, annotations: {kubernetes.io/a: b}}"),
            &[],
            &["annotation \"kubernetes.io/a\": namespace \"kubernetes.io\" is not allowed"],
            &["0: /spec/rules/0/annotations"],
        ),
        c(
            "an annotation value of 1025 characters",
            rule(&format!("{{name: r, annotations: {{a: {}}}}}", "x".repeat(1025))),
            &[],
            &[
                "annotation \"a\": invalid value: too long: feature annotations must not be longer than 1024 characters",
            ],
            &["0: /spec/rules/0/annotations/a"],
        ),
        c(
            "an extended resource that is not a quantity",
            rule("{name: r, extendedResources: {example.com/r: lots}}"),
            &[],
            &[
                "extended resource \"example.com/r\": invalid value \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ],
            &["0: /spec/rules/0/extendedResources/example.com~1r"],
        ),
        c(
            "an extended resource with a suffix that does not exist",
            rule("{name: r, extendedResources: {example.com/r: 4GB}}"),
            &[],
            &[
                "extended resource \"example.com/r\": invalid value \"4GB\": unable to parse quantity's suffix",
            ],
            &["0: /spec/rules/0/extendedResources/example.com~1r"],
        ),
        c(
            "an extended resource in a kubernetes.io sub-domain",
            rule("{name: r, extendedResources: {bad.kubernetes.io/r: \"1\"}}"),
            &[],
            &[
                "extended resource \"bad.kubernetes.io/r\": namespace \"bad.kubernetes.io\" is not allowed",
            ],
            &["0: /spec/rules/0/extendedResources"],
        ),
        c(
            "a taint key in a kubernetes.io sub-domain",
            rule("{name: r, taints: [{key: node.kubernetes.io/t, effect: NoSchedule}]}"),
            &[],
            &[
                "taint \"node.kubernetes.io/t\": namespace \"node.kubernetes.io\" is not allowed",
            ],
            &["0: /spec/rules/0/taints/0/key"],
        ),
    ]
}

/// Each document the loader or `rules check` refuses for a structural reason, or for a value
/// count, type or pattern, is refused by the schema, at the same place.
#[test]
fn the_schema_refuses_what_the_loader_refuses() {
    let v = validator();
    let cases = invalid_cases();
    let actual: Vec<_> = cases
        .iter()
        .map(|c| {
            let (load, check) = loader_errors(&c.text);
            (c.name, load, check, schema_errors(&v, &c.text))
        })
        .collect();
    let expected: Vec<_> = cases
        .iter()
        .map(|c| {
            let load: Vec<String> = c.load.iter().map(|s| s.to_string()).collect();
            let check = load
                .iter()
                .cloned()
                .chain(c.check.iter().map(|s| s.to_string()))
                .collect();
            let schema = c.schema.iter().map(|s| s.to_string()).collect();
            (c.name, load, check, schema)
        })
        .collect();
    assert_eq!(actual, expected);
    assert_eq!(cases.len(), 65);
}

/// What `rules check` refuses and a schema cannot say (a pattern's syntax, bounds in order, an
/// integer's range, a template): the schema takes these, and the editor leaves them to
/// `gpu-labeler rules check`.
#[test]
fn beyond_the_schema() {
    let v = validator();
    let long_prefix = format!("{}.example.com", "x".repeat(250));
    let cases: [(String, String); 5] = [
        (
            expr("{op: InRegexp, value: [\"(x\"]}"),
            "pci.device: class: invalid regexp \"(x\": missing closing ): `(x`".into(),
        ),
        (
            expr("{op: GtLt, value: [\"10\", \"1\"]}"),
            "pci.device: class: GtLt bounds are inverted: 10 is not less than 1".into(),
        ),
        (
            expr("{op: Gt, value: [\"9223372036854775808\"]}"),
            "pci.device: class: Gt needs an integer, got \"9223372036854775808\" (add `type: version` to compare versions)".into(),
        ),
        (
            rule("{name: r, labelsTemplate: \"{{ .x\"}"),
            "invalid template: unclosed action".into(),
        ),
        (
            rule(&format!("{{name: r, labels: {{{long_prefix}/a: b}}}}")),
            format!("invalid label key \"{long_prefix}/a\": prefix part must be no more than 253 characters"),
        ),
    ];
    let actual: Vec<_> = cases
        .iter()
        .map(|(text, _)| (loader_errors(text).1, schema_errors(&v, text)))
        .collect();
    let expected: Vec<_> = cases
        .iter()
        .map(|(_, message)| (vec![message.clone()], Vec::<String>::new()))
        .collect();
    assert_eq!(actual, expected);
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|s| s.as_str().expect("a string"))
        .collect()
}

/// The operators the loader admits, as its own error message lists them.
fn loader_ops() -> Vec<String> {
    let (load, _) = loader_errors(&expr("{op: NoSuchOp}"));
    let [message] = load.as_slice() else {
        panic!("one error, got {load:?}");
    };
    let (_, list) = message
        .split_once("; supported: ")
        .expect("the operator list");
    list.split(", ").map(str::to_string).collect()
}

#[test]
fn the_operators_are_the_loaders() {
    let s = schema();
    let op = &s["definitions"]["expression"]["properties"]["op"];
    assert_eq!(strings(&op["enum"]), loader_ops());
    assert_eq!(
        op["enumDescriptions"].as_array().map(Vec::len),
        Some(loader_ops().len())
    );
}

/// For every operator and 0 to 3 values: the schema takes the expression exactly when `rules
/// check` does (which compiles it, so expression.rs parses every operator the loader admits).
#[test]
fn value_counts_are_those_of_rules_check() {
    let v = validator();
    let mut by_schema = Vec::new();
    let mut by_check = Vec::new();
    for op in loader_ops() {
        for n in 0..=3 {
            let values: Vec<String> = (1..=n).map(|i| format!("\"{i}\"")).collect();
            let text = expr(&format!("{{op: {op}, value: [{}]}}", values.join(", ")));
            let (load, check) = loader_errors(&text);
            assert_eq!(load, Vec::<String>::new());
            by_check.push((op.clone(), n, check.is_empty()));
            by_schema.push((op.clone(), n, schema_errors(&v, &text).is_empty()));
        }
    }
    assert_eq!(by_schema, by_check);
    // Not vacuous: the counts each operator takes.
    let takes = |op: &str| -> Vec<usize> {
        by_check
            .iter()
            .filter(|(o, _, ok)| o == op && *ok)
            .map(|(_, n, _)| *n)
            .collect()
    };
    assert_eq!(
        ["Exists", "In", "Gt", "GtLt"].map(takes),
        [vec![0], vec![1, 2, 3], vec![1], vec![2]]
    );
}

/// Integers and versions of the comparisons: the schema's patterns take a value exactly when
/// `rules check` does.
#[test]
fn integer_and_version_patterns_are_those_of_rules_check() {
    let v = validator();
    let integers = [
        "0", "10", "-1", "+7", "007", "1.5", "1e3", " 1", "1 ", "", "0x10", "ten", "--1",
    ];
    let versions = [
        "1",
        "1.2",
        "1.2.3",
        "v1.2.3",
        "535.104.05",
        "6.8.0-rc1",
        "1.0.0-alpha.1",
        "1.0.0-0",
        "1.0.0-x-y",
        "1.0.0+build.7",
        "1.0.0-rc.1+build",
        "1.2.3.4",
        "V1.2",
        "1.",
        ".1",
        "1.x",
        "1.0.0-01",
        "1.0.0-",
        "1.0.0+",
        "1.0.0-a..b",
        "1.0.0+a+b",
        "vv1",
        "",
    ];
    let mut by_schema = Vec::new();
    let mut by_check = Vec::new();
    let cases = integers
        .iter()
        .map(|i| (*i, ""))
        .chain(versions.iter().map(|v| (*v, ", type: version")));
    for (value, ty) in cases {
        let text = expr(&format!(
            "{{op: Gt, value: [{}]{ty}}}",
            serde_json::to_string(value).unwrap()
        ));
        by_check.push((value, ty, loader_errors(&text).1.is_empty()));
        by_schema.push((value, ty, schema_errors(&v, &text).is_empty()));
    }
    assert_eq!(by_schema, by_check);
    let taken = by_check.iter().filter(|(_, _, ok)| *ok).count();
    assert_eq!(taken, 5 + 11);
}

#[test]
fn the_feature_names_are_the_catalogs() {
    let s = schema();
    let name = &s["definitions"]["featureName"];
    assert_eq!(strings(&name["anyOf"][0]["enum"]), catalog_names());
    // Completion offers the catalog; other names (NFD's) are taken, and `rules check` only warns.
    let v = validator();
    let text = term("{feature: cpu.cpuid, matchExpressions: {AVX: {op: Exists}}}");
    assert_eq!(
        (loader_errors(&text), schema_errors(&v, &text)),
        ((vec![], vec![]), vec![])
    );
}

/// A List as `kubectl get nodefeaturerules -o yaml` prints it: its own fields are not read.
#[test]
fn a_list_is_read_like_kubectl_prints_it() {
    let v = validator();
    let item = |name: &str| {
        format!(
            "- apiVersion: nfd.k8s-sigs.io/v1alpha1\n  kind: NodeFeatureRule\n  metadata: {{name: {name}, resourceVersion: \"7\"}}\n  spec:\n    rules:\n    - {{name: r, labels: {{a: b}}}}\n"
        )
    };
    let text = format!(
        "apiVersion: v1\nkind: List\nmetadata: {{resourceVersion: \"\"}}\nitems:\n{}{}",
        item("one"),
        item("two")
    );
    let (set, load) = RuleSet::load(vec![RuleSource {
        name: "list.yaml".into(),
        text: text.clone(),
    }]);
    assert_eq!(
        (load, set.rule_count(), schema_errors(&v, &text)),
        (vec![], 2, vec![])
    );
}

/// The top-level properties (what editors complete from) are a NodeFeatureRule's and a List's.
#[test]
fn the_top_level_properties_are_the_objects() {
    let s = schema();
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let d = &s["definitions"];
    let mut both: Vec<String> = keys(&d["nodeFeatureRule"]["properties"])
        .into_iter()
        .chain(keys(&d["list"]["properties"]))
        .collect();
    both.sort();
    both.dedup();
    assert_eq!(keys(&s["properties"]), both);
    assert_eq!(
        s["properties"]["spec"],
        d["nodeFeatureRule"]["properties"]["spec"]
    );
    assert_eq!(
        s["properties"]["items"]["items"],
        d["list"]["properties"]["items"]["items"]
    );
    let kinds = strings(&s["properties"]["kind"]["enum"]);
    let mut expected = strings(&d["nodeFeatureRule"]["properties"]["kind"]["enum"]);
    expected.extend(strings(&d["list"]["properties"]["kind"]["enum"]));
    assert_eq!(kinds, expected);
}
