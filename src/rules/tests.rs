//! Unit tests of rule loading and evaluation: scenarios in, whole outputs out.

use std::collections::BTreeMap;

use super::*;
use crate::config::LabelPolicy;
use crate::features::{FeatureSet, Instance};
use crate::output::{NodeOutput, Taint};

fn inst(pairs: &[(&str, &str)]) -> Instance {
    pairs.iter().map(|(k, v)| (*k, *v)).collect()
}

/// A node with one feature of each kind, plus a multi-type feature.
fn features() -> FeatureSet {
    let mut f = FeatureSet::default();
    f.insert_flag("test.flag", "f1");
    f.insert_flag("test.flag", "f2");
    for (k, v) in [
        ("num", "5"),
        ("enabled", "true"),
        ("disabled", "false"),
        ("str", "abc"),
        ("ver", "5.15.0-91-generic"),
    ] {
        f.insert_attribute("test.attr", k, v);
    }
    f.push_instance(
        "test.inst",
        inst(&[("name", "i0"), ("num", "5"), ("str", "abc")]),
    );
    f.push_instance(
        "test.inst",
        inst(&[("name", "i1"), ("num", "7"), ("str", "xyz"), ("extra", "1")]),
    );
    f.push_instance("test.inst", inst(&[("name", "i2")]));
    f.insert_flag("multi.feat", "k1");
    f.insert_attribute("multi.feat", "a1", "v1");
    f.push_instance("multi.feat", inst(&[("i1", "iv1")]));
    f
}

fn doc(name: &str, rules: &str) -> String {
    format!(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: {name}\nspec:\n  rules:\n{rules}"
    )
}

fn load(texts: &[(&str, String)]) -> RuleSet {
    let (set, errors) = RuleSet::load(
        texts
            .iter()
            .map(|(n, t)| RuleSource {
                name: n.to_string(),
                text: t.clone(),
            })
            .collect(),
    );
    assert_eq!(errors, vec![], "load errors");
    set
}

fn run(rules: &str, f: &FeatureSet) -> Evaluation {
    load(&[("t.yaml", doc("obj", rules))]).evaluate(f, &LabelPolicy::default())
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn fl(key: &str) -> String {
    format!("feature.node.kubernetes.io/{key}")
}

/// One rule, one term: `Some(true)` matched, `Some(false)` not, `None` failed.
fn outcome(feature: &str, key: &str, expr: &str) -> Option<bool> {
    let rules = format!(
        "    - name: r\n      labels: {{x: \"y\"}}\n      matchFeatures:\n        - feature: {feature}\n          matchExpressions:\n            {key}: {expr}\n"
    );
    let e = run(&rules, &features());
    match (e.errors.is_empty(), e.output.labels.is_empty()) {
        (false, _) => None,
        (true, false) => Some(true),
        (true, true) => Some(false),
    }
}

#[test]
fn operators_against_absent_flag_attribute_and_instances() {
    // (expression, on absent attribute key, on flag f1, on attribute, on instances)
    type Case = (
        &'static str,
        &'static str,
        Option<bool>,
        Option<bool>,
        Option<bool>,
        Option<bool>,
    );
    let cases: &[Case] = &[
        (
            "{op: In, value: [\"5\"]}",
            "num",
            Some(false),
            Some(false),
            Some(true),
            Some(true),
        ),
        (
            "{op: In, value: [\"6\"]}",
            "num",
            Some(false),
            Some(false),
            Some(false),
            Some(false),
        ),
        (
            "{op: NotIn, value: [\"5\"]}",
            "num",
            Some(false),
            Some(false),
            Some(false),
            Some(true),
        ),
        (
            "{op: InRegexp, value: [\"^ab\"]}",
            "str",
            Some(false),
            Some(false),
            Some(true),
            Some(true),
        ),
        (
            "{op: InRegexp, value: [\"(\"]}",
            "str",
            Some(false),
            Some(false),
            None,
            None,
        ),
        (
            "{op: Exists}",
            "num",
            Some(false),
            Some(true),
            Some(true),
            Some(true),
        ),
        (
            "{op: DoesNotExist}",
            "num",
            Some(true),
            Some(false),
            Some(false),
            Some(true),
        ),
        (
            "{op: Gt, value: [\"4\"]}",
            "num",
            Some(false),
            Some(false),
            Some(true),
            Some(true),
        ),
        (
            "{op: Gt, value: [\"6\"]}",
            "num",
            Some(false),
            Some(false),
            Some(false),
            Some(true),
        ),
        (
            "{op: Ge, value: [\"5\"]}",
            "num",
            Some(false),
            Some(false),
            Some(true),
            Some(true),
        ),
        (
            "{op: Lt, value: [\"5\"]}",
            "num",
            Some(false),
            Some(false),
            Some(false),
            Some(false),
        ),
        (
            "{op: Le, value: [\"5\"]}",
            "num",
            Some(false),
            Some(false),
            Some(true),
            Some(true),
        ),
        (
            "{op: GtLt, value: [\"4\", \"6\"]}",
            "num",
            Some(false),
            Some(false),
            Some(true),
            Some(true),
        ),
        (
            "{op: GeLe, value: [\"6\", \"7\"]}",
            "num",
            Some(false),
            Some(false),
            Some(false),
            Some(true),
        ),
        (
            "{op: GtLt, value: [\"6\", \"4\"]}",
            "num",
            Some(false),
            Some(false),
            None,
            None,
        ),
        (
            "{op: Gt, value: [\"1\"]}",
            "str",
            Some(false),
            Some(false),
            None,
            None,
        ),
        (
            "{op: Gt, value: [\"x\"]}",
            "num",
            Some(false),
            Some(false),
            None,
            None,
        ),
        (
            "{op: Gt, value: [\"5.14\"], type: version}",
            "ver",
            Some(false),
            Some(false),
            Some(true),
            Some(false),
        ),
        (
            "{op: IsTrue}",
            "enabled",
            Some(false),
            Some(false),
            Some(true),
            Some(false),
        ),
        (
            "{op: IsFalse}",
            "disabled",
            Some(false),
            Some(false),
            Some(true),
            Some(false),
        ),
    ];
    for (expr, key, absent, flag, attr, insts) in cases {
        assert_eq!(
            outcome("test.attr", "nosuchkey", expr),
            *absent,
            "absent: {expr}"
        );
        assert_eq!(outcome("test.flag", "f1", expr), *flag, "flag: {expr}");
        assert_eq!(outcome("test.attr", key, expr), *attr, "attribute: {expr}");
        assert_eq!(outcome("test.inst", key, expr), *insts, "instances: {expr}");
    }
}

#[test]
fn absent_feature_and_empty_expressions() {
    assert_eq!(outcome("no.such", "x", "{op: DoesNotExist}"), Some(false));
    assert_eq!(
        outcome("TEST.attr", "num", "{op: In, value: [\"5\"]}"),
        Some(true),
        "feature names are looked up lower-cased"
    );
    let rules = "    - name: r\n      labels: {x: \"y\"}\n      matchFeatures:\n        - feature: FEATURE\n          matchExpressions: {}\n";
    let mut f = features();
    f.instances.insert("empty.inst".into(), Default::default());
    for (feature, want) in [
        ("test.flag", true),
        ("test.attr", true),
        ("test.inst", true),
        ("empty.inst", false),
        ("no.such", false),
    ] {
        let e = run(&rules.replace("FEATURE", feature), &f);
        assert_eq!(e.output.labels.is_empty(), !want, "{feature}");
    }
    // No matchExpressions at all: the feature exists.
    let rules = "    - name: r\n      labels: {x: \"y\"}\n      matchFeatures:\n        - feature: FEATURE\n";
    for (feature, want) in [
        ("test.inst", true),
        ("empty.inst", true),
        ("no.such", false),
    ] {
        let e = run(&rules.replace("FEATURE", feature), &f);
        assert_eq!(e.output.labels.is_empty(), !want, "{feature}");
    }
}

#[test]
fn multi_type_features_are_a_union() {
    // Flags and attributes of one feature: an expression may match in either.
    assert_eq!(outcome("multi.feat", "k1", "{op: Exists}"), Some(true));
    assert_eq!(
        outcome("multi.feat", "a1", "{op: In, value: [\"v1\"]}"),
        Some(true)
    );
    assert_eq!(
        outcome("multi.feat", "i1", "{op: In, value: [\"iv1\"]}"),
        Some(true)
    );
    // DoesNotExist must hold in flags and attributes; an instance without the key still matches.
    assert_eq!(
        outcome("multi.feat", "k1", "{op: DoesNotExist}"),
        Some(true)
    );
    let rules = "    - name: r\n      labels: {x: \"y\"}\n      matchFeatures:\n        - feature: multi.feat\n          matchExpressions:\n            k1: {op: Exists}\n            a1: {op: Exists}\n";
    assert_eq!(
        run(rules, &features()).output.labels,
        labels(&[(&fl("x"), "y")])
    );
}

#[test]
fn instances_are_matched_whole() {
    // num=5 is i0 and str=xyz is i1: no single instance has both.
    let rules = "    - name: r\n      labels: {x: \"y\"}\n      matchFeatures:\n        - feature: test.inst\n          matchExpressions:\n            num: {op: In, value: [\"5\"]}\n            str: {op: In, value: [\"xyz\"]}\n";
    assert_eq!(run(rules, &features()).output.labels, labels(&[]));
    let rules = rules.replace("\"xyz\"", "\"abc\"");
    assert_eq!(
        run(&rules, &features()).output.labels,
        labels(&[(&fl("x"), "y")])
    );
}

#[test]
fn a_failing_expression_wins_over_an_erroring_one() {
    // On i0 `str Gt 1` errors, but `num In [7]` fails: i0 does not match, no error; i1 matches
    // `num` but errors on `str`: that is an error.
    let rules = "    - name: r\n      labels: {x: \"y\"}\n      matchFeatures:\n        - feature: test.inst\n          matchExpressions:\n            num: {op: In, value: [\"5\"]}\n            name: {op: Gt, value: [\"1\"]}\n";
    let e = run(rules, &features());
    assert_eq!(e.output.labels, labels(&[]));
    assert_eq!(e.errors.len(), 1);
    assert_eq!(e.errors[0].message, "not a number \"i0\"");
    let rules = rules.replace("\"5\"]}", "\"6\"]}");
    let e = run(&rules, &features());
    assert_eq!((e.output.labels.len(), e.errors.len()), (0, 0));
}

#[test]
fn match_any_and_match_features() {
    let rules = r#"    - name: any-of
      labels: {any: "yes"}
      matchAny:
        - matchFeatures:
            - feature: test.flag
              matchExpressions: {nope: {op: Exists}}
        - matchFeatures:
            - feature: test.flag
              matchExpressions: {f2: {op: Exists}}
    - name: any-and-all
      labels: {both: "yes"}
      matchAny:
        - matchFeatures:
            - feature: test.flag
              matchExpressions: {f1: {op: Exists}}
      matchFeatures:
        - feature: test.attr
          matchExpressions: {num: {op: In, value: ["6"]}}
    - name: none-of
      labels: {none: "yes"}
      matchAny:
        - matchFeatures:
            - feature: test.flag
              matchExpressions: {nope: {op: Exists}}
    - name: and
      labels: {and: "yes"}
      matchFeatures:
        - feature: test.flag
          matchExpressions: {f1: {op: Exists}}
        - feature: test.attr
          matchExpressions: {enabled: {op: IsTrue}}
"#;
    let e = run(rules, &features());
    assert_eq!(
        e.output.labels,
        labels(&[(&fl("and"), "yes"), (&fl("any"), "yes")])
    );
    assert_eq!(e.errors, vec![]);
}

#[test]
fn match_any_stops_at_the_first_match_without_templates() {
    // The second element would error, but NFD never evaluates it.
    let rules = r#"    - name: r
      labels: {x: "y"}
      matchAny:
        - matchFeatures:
            - feature: test.attr
              matchExpressions: {num: {op: In, value: ["5"]}}
        - matchFeatures:
            - feature: test.attr
              matchExpressions: {str: {op: Gt, value: ["1"]}}
"#;
    let e = run(rules, &features());
    assert_eq!(
        (e.output.labels, e.errors),
        (labels(&[(&fl("x"), "y")]), vec![])
    );
    // With a template every element is evaluated, and the error fails the rule.
    let e = run(
        &rules.replace(
            "      labels: {x: \"y\"}\n",
            "      labelsTemplate: \"x=y\"\n",
        ),
        &features(),
    );
    assert_eq!(e.output.labels, labels(&[]));
    assert_eq!(e.errors.len(), 1);
}

#[test]
fn match_name() {
    let rules = r#"    - name: flags
      labelsTemplate: "{{ range .test.flag }}flag-{{ .Name }}=true\n{{ end }}"
      matchFeatures:
        - feature: test.flag
          matchName: {op: In, value: ["f2", "zz"]}
    - name: attrs
      labelsTemplate: "{{ range .test.attr }}attr-{{ .Name }}={{ .Value }}\n{{ end }}"
      matchFeatures:
        - feature: test.attr
          matchName: {op: InRegexp, value: ["^n"]}
    - name: insts
      labelsTemplate: "{{ range .test.inst }}inst-{{ .name }}=found\n{{ end }}"
      matchFeatures:
        - feature: test.inst
          matchName: {op: In, value: ["extra"]}
    - name: nothing
      labels: {nothing: "true"}
      matchFeatures:
        - feature: test.attr
          matchName: {op: In, value: ["zz"]}
"#;
    let e = run(rules, &features());
    assert_eq!(
        e.output.labels,
        labels(&[
            (&fl("attr-num"), "5"),
            (&fl("flag-f2"), "true"),
            (&fl("inst-i1"), "found"),
        ])
    );
}

#[test]
fn templates_over_matched_elements_and_vars() {
    let rules = r#"    - name: r
      labelsTemplate: |
        {{ range .test.inst }}inst-{{ .name }}.num={{ .num }}
        {{ end }}count={{ len .test.inst }}
        attr={{ (index .test.attr 0).Value }}
      varsTemplate: "v={{ len .test.inst }}"
      matchFeatures:
        - feature: test.inst
          matchExpressions: {num: {op: Exists}}
        - feature: test.attr
          matchExpressions: {str: {op: Exists}}
    - name: uses-var
      labels: {var-seen: "@rule.matched.v"}
      matchFeatures:
        - feature: rule.matched
          matchExpressions: {v: {op: In, value: ["2"]}}
"#;
    let e = run(rules, &features());
    assert_eq!((e.errors.clone(), e.rejected.clone()), (vec![], vec![]));
    assert_eq!(
        e.output.labels,
        labels(&[
            (&fl("attr"), "abc"),
            (&fl("count"), "2"),
            (&fl("inst-i0.num"), "5"),
            (&fl("inst-i1.num"), "7"),
            (&fl("var-seen"), "2"),
        ])
    );
}

#[test]
fn static_label_overrides_template_and_invalid_values_are_rejected() {
    let rules = r#"    - name: r
      labels: {count: "static"}
      labelsTemplate: "count={{ len .test.inst }}\nbad=a b"
      matchFeatures:
        - feature: test.inst
"#;
    let e = run(rules, &features());
    assert_eq!(e.output.labels, labels(&[(&fl("count"), "static")]));
    assert_eq!(
        e.rejected
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "label \"feature.node.kubernetes.io/bad=a b\" from rule \"r\" (NodeFeatureRule \"obj\", t.yaml:7:7) rejected: invalid value \"a b\": a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ]
    );
}

#[test]
fn template_errors_fail_the_rule() {
    let rules = r#"    - name: missing-key
      labelsTemplate: "{{ range .test.inst }}x={{ .nosuch }}{{ end }}"
      matchFeatures:
        - feature: test.inst
          matchExpressions: {}
    - name: not-key-value
      labelsTemplate: "just text"
      matchFeatures:
        - feature: test.inst
    - name: parse-error
      labelsTemplate: "{{ range .test.inst }"
      matchFeatures:
        - feature: test.inst
    - name: parse-error-unmatched
      labelsTemplate: "{{ range .test.inst }"
      matchFeatures:
        - feature: no.such
    - name: fine
      labels: {fine: "true"}
"#;
    let e = run(rules, &features());
    assert_eq!(e.output.labels, labels(&[(&fl("fine"), "true")]));
    let failed: Vec<&str> = e.errors.iter().map(|x| x.rule.as_str()).collect();
    assert_eq!(failed, vec!["missing-key", "not-key-value", "parse-error"]);
    assert_eq!(
        e.errors[1].to_string(),
        "rule \"not-key-value\" (NodeFeatureRule \"obj\", t.yaml:12:7) failed: failed to expand template: missing value in expanded template line \"just text\", (format must be '<key>=<value>')"
    );
    // The position is the file's: line 17, where the template's text stands.
    assert_eq!(
        e.errors[2].to_string(),
        "rule \"parse-error\" (NodeFeatureRule \"obj\", t.yaml:16:7) failed: failed to parse template at line 17, column 44: unexpected } in operand"
    );
}

#[test]
fn back_references_follow_evaluation_order() {
    // Objects run in metadata.name order whatever the file order; rules in file order.
    let later = doc(
        "b-second",
        r#"    - name: uses-earlier
      labels: {chained: "true"}
      matchFeatures:
        - feature: rule.matched
          matchExpressions:
            first: {op: IsTrue}
            v1: {op: In, value: ["one"]}
            vendor.io/prefixed: {op: Exists}
"#,
    );
    let earlier = doc(
        "a-first",
        r#"    - name: produces
      labels: {first: "true", vendor.io/prefixed: "x"}
      vars: {v1: "one"}
      matchFeatures:
        - feature: test.flag
          matchExpressions: {f1: {op: Exists}}
    - name: sees-nothing-before-it
      labels: {too-early: "true"}
      matchFeatures:
        - feature: rule.matched
          matchExpressions: {chained: {op: Exists}}
"#,
    );
    let set = load(&[("b.yaml", later), ("a.yaml", earlier)]);
    let e = set.evaluate(&features(), &LabelPolicy::default());
    assert_eq!(
        e.output.labels,
        labels(&[
            (&fl("chained"), "true"),
            (&fl("first"), "true"),
            ("vendor.io/prefixed", "x")
        ])
    );
}

#[test]
fn rule_matched_exists_once_a_rule_ran() {
    let rules = r#"    - name: first
      labels: {a: "1"}
      matchFeatures:
        - feature: rule.matched
          matchExpressions: {x: {op: DoesNotExist}}
    - name: second
      labels: {b: "1"}
      matchFeatures:
        - feature: rule.matched
          matchExpressions: {x: {op: DoesNotExist}}
"#;
    // The first rule sees no rule.matched feature at all; after it ran (matched or not) the
    // feature exists, so DoesNotExist holds for the second.
    assert_eq!(
        run(rules, &features()).output.labels,
        labels(&[(&fl("b"), "1")])
    );
}

#[test]
fn dynamic_values() {
    let rules = r#"    - name: r
      labels:
        kernel: "@test.attr.ver"
        missing: "@test.attr.nosuch"
        nofeature: "@no.such.x"
        malformed: "@test.attr"
      extendedResources:
        vendor.io/num: "@test.attr.num"
        bad: "@test.attr.str"
"#;
    let e = run(rules, &features());
    assert_eq!(
        e.output.labels,
        labels(&[(&fl("kernel"), "5.15.0-91-generic")])
    );
    assert_eq!(
        e.output.extended_resources,
        labels(&[("vendor.io/num", "5")])
    );
    let reasons: Vec<(String, String)> = e
        .rejected
        .iter()
        .map(|r| (r.key.clone(), r.reason.clone()))
        .collect();
    assert_eq!(
        reasons,
        vec![
            (fl("malformed"), "value @test.attr is not in the form of '@domain.feature.element'".to_string()),
            (fl("missing"), "element nosuch not found on feature test.attr".to_string()),
            (fl("nofeature"), "feature no.such not found".to_string()),
            (fl("bad"), "invalid value \"abc\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".to_string()),
        ]
    );
}

#[test]
fn namespaces_and_policy() {
    let rules = r#"    - name: r
      labels:
        plain: "1"
        feature.node.kubernetes.io/plain: "2"
        sub.feature.node.kubernetes.io/a: "1"
        kubernetes.io/denied: "1"
        example.com/denied-by-config: "1"
        allowed.kubernetes.io/extra: "1"
"#;
    let set = load(&[("t.yaml", doc("obj", rules))]);
    let policy = LabelPolicy {
        extra_label_ns: vec!["allowed.kubernetes.io".into()],
        deny_label_ns: vec!["example.com".into()],
        allowed_ns: None,
        gfd_keys_only: false,
    };
    let e = set.evaluate(&features(), &policy);
    assert_eq!(
        e.output.labels,
        labels(&[
            ("allowed.kubernetes.io/extra", "1"),
            (&fl("plain"), "2"),
            ("sub.feature.node.kubernetes.io/a", "1"),
        ])
    );
    let rejected: Vec<String> = e
        .rejected
        .iter()
        .map(|r| format!("{}: {}", r.key, r.reason))
        .collect();
    assert_eq!(
        rejected,
        vec![
            "example.com/denied-by-config: namespace \"example.com\" is not allowed",
            "kubernetes.io/denied: namespace \"kubernetes.io\" is not allowed",
        ]
    );
}

#[test]
fn later_rules_override_earlier_labels() {
    let rules = r#"    - name: one
      labels: {x: "1", z: "1"}
    - name: two
      labels: {x: "2"}
"#;
    assert_eq!(
        run(rules, &features()).output.labels,
        labels(&[(&fl("x"), "2"), (&fl("z"), "1")])
    );
}

#[test]
fn annotations_extended_resources_and_taints() {
    let rules = r#"    - name: r
      annotations:
        note: "foo"
        custom.vendor.io/feature: "baz"
        nfd.node.kubernetes.io/xyz: "denied"
      extendedResources:
        nons: "123"
        bad.kubernetes.io/malo: "999"
      taints:
        - {key: feature.node.kubernetes.io/gpu, value: "true", effect: NoSchedule}
        - {key: vendor.io/x, effect: Sometimes}
        - {key: feature.node.kubernetes.io/gpu, value: "again", effect: NoSchedule}
"#;
    let e = run(rules, &features());
    assert_eq!(
        e.output.annotations,
        labels(&[("custom.vendor.io/feature", "baz"), (&fl("note"), "foo")])
    );
    assert_eq!(e.output.extended_resources, labels(&[(&fl("nons"), "123")]));
    assert_eq!(
        e.output.taints,
        vec![Taint {
            key: fl("gpu"),
            value: "again".into(),
            effect: "NoSchedule".into()
        }]
    );
    let rejected: Vec<String> = e
        .rejected
        .iter()
        .map(|r| format!("{} {}: {}", r.kind.as_str(), r.key, r.reason))
        .collect();
    assert_eq!(
        rejected,
        vec![
            "extended resource bad.kubernetes.io/malo: namespace \"bad.kubernetes.io\" is not allowed",
            "annotation nfd.node.kubernetes.io/xyz: namespace \"nfd.node.kubernetes.io\" is not allowed",
            "taint vendor.io/x: invalid taint effect \"Sometimes\" (expected NoSchedule, PreferNoSchedule or NoExecute)",
        ]
    );
}

#[test]
fn vars_are_not_labels() {
    let rules = "    - name: r\n      vars: {hidden: \"1\"}\n";
    let e = run(rules, &features());
    assert_eq!(e.output, NodeOutput::default());
}

#[test]
fn a_broken_object_does_not_stop_the_others() {
    let good = doc("good", "    - name: ok\n      labels: {ok: \"true\"}\n");
    let bad = format!(
        "{}\n---\n{}",
        doc(
            "bad",
            "    - name: typo\n      labels: {x: \"1\"}\n      matchFeatures:\n        - feature: test.attr\n          matchExpressions: {num: {op: Equal, value: [\"5\"]}}\n"
        ),
        doc(
            "also-good",
            "    - name: ok2\n      labels: {ok2: \"true\"}\n"
        )
    );
    let broken_yaml = "apiVersion: [\n".to_string();
    let (set, errors) = RuleSet::load(vec![
        RuleSource {
            name: "good.yaml".into(),
            text: good,
        },
        RuleSource {
            name: "bad.yaml".into(),
            text: bad,
        },
        RuleSource {
            name: "broken.yaml".into(),
            text: broken_yaml,
        },
    ]);
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(errors[0].starts_with("bad.yaml:11:40: rule \"typo\" (NodeFeatureRule \"bad\"): matchFeatures[0].matchExpressions.num.op: unknown operator \"Equal\""), "{}", errors[0]);
    assert!(
        errors[1].starts_with("broken.yaml:1:13: invalid YAML/JSON: unclosed bracket"),
        "{}",
        errors[1]
    );
    assert_eq!(set.rule_count(), 2);
    let e = set.evaluate(&features(), &LabelPolicy::default());
    assert_eq!(
        e.output.labels,
        labels(&[(&fl("ok"), "true"), (&fl("ok2"), "true")])
    );
}

#[test]
fn load_paths_reads_files_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("b.yaml"), "b").unwrap();
    std::fs::write(dir.path().join("a.yml"), "a").unwrap();
    std::fs::write(dir.path().join("c.json"), "c").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
    let missing = dir.path().join("missing.yaml");
    let (sources, errors) = RuleSet::load_paths(&[dir.path().to_path_buf(), missing.clone()]);
    let names: Vec<String> = sources
        .iter()
        .map(|s| {
            std::path::Path::new(&s.name)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(names, vec!["a.yml", "b.yaml", "c.json"]);
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]
            .to_string()
            .starts_with(&format!("{}: cannot read rule file: ", missing.display()))
    );
}

#[test]
fn explain_shows_values_and_reasons() {
    let rules = r#"    - name: gpu
      labels: {gpu: "true"}
      matchFeatures:
        - feature: test.inst
          matchExpressions:
            num: {op: Gt, value: ["6"]}
        - feature: test.flag
          matchExpressions:
            f1: {op: Exists}
            f3: {op: Exists}
"#;
    let set = load(&[("t.yaml", doc("obj", rules))]);
    let report = explain(&set, &features(), Some("gpu"));
    let want = r#"NodeFeatureRule "obj" (t.yaml)
  rule "gpu" (t.yaml:7:7): not matched
    matchFeatures (all terms must match): not matched
      term 1 (line 10): feature "test.inst" (3 instance(s)): matched
        instances: 1 of 3 matched
          test.inst[1]: matched: test.inst[1].num = "7": num Gt ["6"] -> yes
          test.inst[0]: no: test.inst[0].num = "5": num Gt ["6"] -> no
          test.inst[2]: no: test.inst[2].num: absent: num Gt ["6"] -> no (the element is absent)
      term 2 (line 13): feature "test.flag" (2 flag(s)): not matched
        test.flag.f1: flag present: f1 Exists -> yes
        test.flag.f3: no such flag: f3 Exists -> no
        flags/attributes: no match

1 rule(s): 0 matched, 1 did not match, 0 failed.
"#;
    assert_eq!(report, want);
    assert_eq!(
        explain(&set, &features(), Some("gpus")),
        "No rule named \"gpus\". Did you mean \"gpu\"?\nRules, in evaluation order:\n  obj/gpu\n"
    );
}

#[test]
fn explain_shows_output_and_rejections() {
    let rules = r#"    - name: r
      labels: {ok: "true", kubernetes.io/no: "x"}
      vars: {v: "1"}
"#;
    let set = load(&[("t.yaml", doc("obj", rules))]);
    let report = explain(&set, &features(), None);
    let want = r#"NodeFeatureRule "obj" (t.yaml)
  rule "r" (t.yaml:7:7): MATCHED
    no matchFeatures or matchAny: the rule always matches
    label feature.node.kubernetes.io/ok=true
    label kubernetes.io/no=x REJECTED: namespace "kubernetes.io" is not allowed
    var v=1 (rule.matched only)

1 rule(s): 1 matched, 0 did not match, 0 failed.
Labels: 1
  feature.node.kubernetes.io/ok=true
"#;
    assert_eq!(report, want);
}

#[test]
fn check_reports_everything_at_once() {
    let text = doc(
        "obj",
        r#"    - name: regex
      labels: {x: "1"}
      matchFeatures:
        - feature: pci.devise
          matchExpressions:
            class: {op: InRegexp, value: ["^03", "(("]}
    - name: numbers
      labels: {"bad key!": "1", z: "has space"}
      matchFeatures:
        - feature: gpu.device
          matchExpressions:
            memory_mib: {op: Gt, value: ["40GB"]}
            count: {op: GtLt, value: ["8", "2"]}
            uuid: {op: Exists, value: ["x"]}
    - name: templ
      labelsTemplate: "{{ range .gpu.device }}"
      matchFeatures:
        - feature: rule.matched
          matchExpressions: {nobody: {op: Exists}}
"#,
    );
    let report = check(
        &[RuleSource {
            name: "r.yaml".into(),
            text,
        }],
        &["pci.device", "gpu.device"],
    );
    assert_eq!(
        report.error_lines(),
        vec![
            "r.yaml:12:50: rule \"regex\" (NodeFeatureRule \"obj\"): pci.devise: class: invalid regexp \"((\": missing closing ): `((`",
            "r.yaml:18:42: rule \"numbers\" (NodeFeatureRule \"obj\"): gpu.device: memory_mib: Gt needs an integer, got \"40GB\"",
            "r.yaml:19:13: rule \"numbers\" (NodeFeatureRule \"obj\"): gpu.device: count: GtLt bounds are inverted: 8 is not less than 2",
            "r.yaml:20:40: rule \"numbers\" (NodeFeatureRule \"obj\"): gpu.device: uuid: Exists takes no values (has 1)",
            "r.yaml:22:47: rule \"templ\" (NodeFeatureRule \"obj\"): invalid template: unexpected EOF",
        ]
    );
    assert_eq!(
        report.warning_lines(),
        vec![
            "r.yaml:10:11: rule \"regex\" (NodeFeatureRule \"obj\"): unknown feature \"pci.devise\" (did you mean \"pci.device\"?); the term can never match",
            "r.yaml:19:13: rule \"numbers\" (NodeFeatureRule \"obj\"): gpu.device: count: gpu.device has no element \"count\"; the expression can never match",
            "r.yaml:14:16: rule \"numbers\" (NodeFeatureRule \"obj\"): invalid label key \"feature.node.kubernetes.io/bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character; rejected when the rule matches, the rule's other labels published",
            "r.yaml:14:33: rule \"numbers\" (NodeFeatureRule \"obj\"): label \"feature.node.kubernetes.io/z\": invalid value \"has space\": a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character; rejected when the rule matches, the rule's other labels published",
            "r.yaml:22:23: rule \"templ\" (NodeFeatureRule \"obj\"): the template reads .gpu.device, which is not in the data of matchFeatures; the rule fails with a missing key whenever the rule matches",
            "r.yaml:25:30: rule \"templ\" (NodeFeatureRule \"obj\"): rule.matched: no earlier rule produces \"nobody\"",
        ]
    );
}

#[test]
fn malformed_input_is_reported_not_a_panic() {
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let inputs = [
        String::new(),
        "---\n---\n".to_string(),
        "[]".to_string(),
        "42".to_string(),
        "null".to_string(),
        "spec: {rules: [null, 1, x]}".to_string(),
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: x}\nspec: {rules: [{name: r, matchFeatures: [{feature: a.b, matchExpressions: {k: null, j: {op: [1]}}}], matchAny: [{}, 3], taints: [{}, {key: 1}]}, {labels: [1]}]}".to_string(),
        "{\"a\": ".to_string(),
        "\t\tkey: [".to_string(),
        "a: &x [1, *x]\nb: *x".to_string(),
        deep,
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: x}\nspec:\n  rules:\n  - name: t\n    labelsTemplate: \"{{ range 100000000 }}x{{ end }}\"\n    matchFeatures: [{feature: test.attr}]\n  - name: u\n    labelsTemplate: \"{{ define \\\"a\\\" }}{{ template \\\"a\\\" }}{{ end }}{{ template \\\"a\\\" }}\"\n    matchFeatures: [{feature: test.attr}]\n".to_string(),
    ];
    for text in inputs {
        let src = vec![RuleSource {
            name: "m.yaml".into(),
            text: text.clone(),
        }];
        let (set, errors) = RuleSet::load(src.clone());
        let e = set.evaluate(&features(), &LabelPolicy::default());
        let _ = explain(&set, &features(), None);
        let report = check(&src, &["test.attr"]);
        // Every input is either empty (nothing to load) or reported.
        let reported = !errors.is_empty() || !report.errors.is_empty() || !e.errors.is_empty();
        let blank = text.trim().is_empty() || text.trim() == "---\n---" || text == "null";
        assert!(reported || blank || set.rule_count() == 0, "{text:?}");
    }
}

#[test]
fn runaway_templates_fail_their_rule() {
    let rules = "    - name: t\n      labelsTemplate: \"{{ range 100000000 }}x{{ end }}\"\n      matchFeatures: [{feature: test.attr}]\n    - name: u\n      labelsTemplate: \"{{ define \\\"a\\\" }}{{ template \\\"a\\\" }}{{ end }}{{ template \\\"a\\\" }}\"\n      matchFeatures: [{feature: test.attr}]\n    - name: ok\n      labels: {ok: \"true\"}\n";
    let e = run(rules, &features());
    let failed: Vec<&str> = e.errors.iter().map(|x| x.rule.as_str()).collect();
    assert_eq!(failed, vec!["t", "u"]);
    assert_eq!(e.output.labels, labels(&[(&fl("ok"), "true")]));
}

#[test]
fn rule_sets_can_be_shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<RuleSet>();
    send_sync::<Evaluation>();
}

#[test]
fn explain_suggests_the_element_a_typo_meant() {
    let rules = "    - name: typo\n      labels: {x: \"1\"}\n      matchFeatures:\n        - feature: test.attr\n          matchExpressions: {nmu: {op: Gt, value: [\"1\"]}}\n        - feature: test.inst\n          matchExpressions: {nam: {op: In, value: [\"i1\"]}}\n";
    let set = load(&[("t.yaml", doc("obj", rules))]);
    let want = r#"NodeFeatureRule "obj" (t.yaml)
  rule "typo" (t.yaml:7:7): not matched
    matchFeatures (all terms must match): not matched
      term 1 (line 10): feature "test.attr" (5 attribute(s)): not matched
        test.attr.nmu: absent (did you mean "num"?): nmu Gt ["1"] -> no (the element is absent)
        flags/attributes: no match
      term 2 (line 12): feature "test.inst" (3 instance(s)): not matched
        instances: 0 of 3 matched
          test.inst[0]: no: test.inst[0].nam: absent (did you mean "name"?): nam In ["i1"] -> no (the element is absent)
          test.inst[1]: no: test.inst[1].nam: absent (did you mean "name"?): nam In ["i1"] -> no (the element is absent)
          test.inst[2]: no: test.inst[2].nam: absent (did you mean "name"?): nam In ["i1"] -> no (the element is absent)

1 rule(s): 0 matched, 1 did not match, 0 failed.
"#;
    assert_eq!(explain(&set, &features(), Some("obj/typo")), want);
}

/// Issue 39, class 11: files load as the API server admits what `kubectl apply -f` sends. A
/// JSON object followed by `---` and YAML documents is split as kubectl's YAML-or-JSON decoder
/// splits it; an object whose name is not a DNS subdomain is refused (the API server's
/// `ValidateObjectMeta`), the others load; of two objects with one name, the later (in file
/// and path order) is the one a cluster keeps.
#[test]
fn files_load_as_kubectl_apply_leaves_the_cluster() {
    let label = |name: &str, value: &str| {
        doc(
            name,
            &format!("    - name: r-{name}\n      labels: {{{name}: \"{value}\"}}\n"),
        )
    };
    let json = r#"{"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureRule",
 "metadata": {"name": "first"},
 "spec": {"rules": [{"name": "r-first", "labels": {"first": "json"}}]}}
---
"#;
    let mixed = format!(
        "{json}{}\n---\n{}",
        label("second", "yaml"),
        label("Bad_Name", "x")
    );
    let sources = vec![
        RuleSource {
            name: "a.yaml".into(),
            text: format!("{}\n---\n{}", label("dup", "earlier"), label("kept", "a")),
        },
        RuleSource {
            name: "b.json".into(),
            text: mixed,
        },
        RuleSource {
            name: "c.yaml".into(),
            text: label("dup", "later"),
        },
    ];
    // `rules check` says which of the two is kept.
    let report = check(&sources, &[]);
    assert_eq!(
        report.warning_lines(),
        vec![
            "c.yaml:1:1: NodeFeatureRule \"dup\": another NodeFeatureRule named \"dup\" is in a.yaml; this one, the later, replaces it (as applying the files in order leaves it in a cluster)"
        ]
    );
    let (set, errors) = RuleSet::load(sources);
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        vec![
            "b.json:18:9: NodeFeatureRule \"Bad_Name\": invalid metadata.name \"Bad_Name\": must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character (e.g. 'example.com')"
        ]
    );
    let e = set.evaluate(&features(), &LabelPolicy::default());
    assert_eq!(
        e.output.labels,
        labels(&[
            (&fl("dup"), "later"),
            (&fl("first"), "json"),
            (&fl("kept"), "a"),
            (&fl("second"), "yaml"),
        ])
    );
}

#[test]
fn a_rule_asking_for_too_many_taints_is_refused_whole_and_the_next_rules_taints_kept() {
    let many: String = (0..70)
        .map(|i| {
            format!("        - {{key: feature.node.kubernetes.io/t{i}, effect: NoSchedule}}\n")
        })
        .collect();
    let text = doc(
        "bomb",
        &format!(
            "    - name: few\n      taints:\n        - {{key: feature.node.kubernetes.io/a, effect: NoSchedule}}\n      matchFeatures: []\n    - name: many\n      taints:\n{many}      matchFeatures: []\n    - name: health\n      taints:\n        - {{key: feature.node.kubernetes.io/gpu-unhealthy, value: \"true\", effect: NoSchedule}}\n      matchFeatures: []\n"
        ),
    );
    let e = load(&[("bomb.yaml", text)]).evaluate(&features(), &LabelPolicy::default());
    let t = |k: &str, v: &str| Taint {
        key: k.into(),
        value: v.into(),
        effect: "NoSchedule".into(),
    };
    assert_eq!(
        e.output.taints,
        vec![
            t("feature.node.kubernetes.io/a", ""),
            t("feature.node.kubernetes.io/gpu-unhealthy", "true")
        ]
    );
    assert_eq!(
        e.rejected
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "taint \"feature.node.kubernetes.io/t0=:NoSchedule\" from rule \"many\" (NodeFeatureRule \"bomb\", bomb.yaml:11:7) rejected: this rule's 70 taint(s), this one first, with the 1 of the rules before it, are more than the 64 taints a rule set may ask for: all of this rule's refused"
        ]
    );
}

#[test]
fn a_site_rule_writing_a_builtin_label_is_warned_of_once() {
    let builtin = doc(
        "gpu",
        "    - name: gpu health\n      labels: {gpu.health: \"@test.attr.str\"}\n      matchFeatures: []\n",
    );
    let site = doc(
        "site",
        "    - name: hide\n      labels: {gpu.health: ok, other: x}\n      matchFeatures: []\n",
    );
    let set = load(&[("builtin:rules/gpu.yaml", builtin), ("site.yaml", site)]);
    let e = set.evaluate(&features(), &LabelPolicy::default());
    let want = "writes feature.node.kubernetes.io/gpu.health, a label of the built-in rule \"gpu health\" (builtin:rules/gpu.yaml:7:7): its value replaces the built-in one (the GPUHealthy condition follows the gpu.node feature, not the label)";
    assert_eq!(
        e.warnings,
        vec![format!(
            "rule \"hide\" (NodeFeatureRule \"site\", site.yaml:7:7) {want}"
        )]
    );
    assert_eq!(
        e.output.labels.get("feature.node.kubernetes.io/gpu.health"),
        Some(&"ok".to_string())
    );
    assert_eq!(
        set.builtin_overrides()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![format!(
            "site.yaml:7:7: rule \"hide\" (NodeFeatureRule \"site\"): {want}"
        )]
    );
}
