//! `gpu-labeler rules check`: static, strict validation of rule files.
//!
//! Everything loading refuses (syntax, structure, operator names), plus what would only fail
//! at evaluation or silently never match: malformed expressions (value counts, regular
//! expressions, integer and version bounds, inverted ranges, unknown types), template parse
//! errors, feature names that are not `<domain>.<feature>`, invalid static labels,
//! annotations, extended resources and taints. Warnings: unknown feature names (against the
//! catalog), template functions this engine does not implement, `rule.matched` references no
//! earlier rule produces, labels in a namespace only `extraLabelNs` could allow, rules that
//! produce nothing, duplicate names. Every line names file, line, column and rule.

use std::collections::{BTreeMap, BTreeSet};

use super::expression::{Expr, Op, Severity};
use super::model::{ObjectSpec, RuleSpec, TermSpec};
use super::source::{RuleLoadError, RuleSource, read_source};
use super::template::RuleTemplate;
use crate::config::LabelPolicy;
use crate::gotmpl::engine::{heavy_actions, unsupported_functions};
use crate::gotmpl::limits::MAX_TEMPLATE_OUTPUT;
use crate::names::closest;
use crate::output::{FEATURE_PREFIX, Taint};
use crate::validate::{
    label_value, namespace, qualified_name, validate_annotation, validate_extended_resource,
    validate_label, validate_taint,
};
use crate::yaml::document::Pos;

/// The findings of `rules check`. `errors` non-empty means the files are invalid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub errors: Vec<RuleLoadError>,
    pub warnings: Vec<RuleLoadError>,
}

impl CheckReport {
    /// The errors as `rules check` prints them (`file:line:column: rule ...: message`).
    pub fn error_lines(&self) -> Vec<String> {
        self.errors.iter().map(ToString::to_string).collect()
    }

    /// The warnings as `rules check` prints them.
    pub fn warning_lines(&self) -> Vec<String> {
        self.warnings.iter().map(ToString::to_string).collect()
    }
}

struct Reporter<'a> {
    report: CheckReport,
    source: &'a str,
    object: Option<String>,
    rule: Option<String>,
}

impl Reporter<'_> {
    fn line(&self, pos: Pos, message: String) -> RuleLoadError {
        RuleLoadError {
            source: self.source.to_string(),
            line: pos.line,
            column: pos.column,
            object: self.object.clone(),
            rule: self.rule.clone(),
            message,
        }
    }

    fn error(&mut self, pos: Pos, message: impl Into<String>) {
        let l = self.line(pos, message.into());
        self.report.errors.push(l);
    }

    fn warning(&mut self, pos: Pos, message: impl Into<String>) {
        let l = self.line(pos, message.into());
        self.report.warnings.push(l);
    }
}

/// Checks rule files without features. `known_features` is the feature catalog (names such as
/// `pci.device`); when empty, feature names are not checked against it.
pub fn check(sources: &[RuleSource], known_features: &[&str]) -> CheckReport {
    let mut report = CheckReport::default();
    let mut all: Vec<(String, ObjectSpec)> = Vec::new();
    for src in sources {
        let (objects, errors) = read_source(src);
        report.errors.extend(errors);
        all.extend(objects.into_iter().map(|o| (src.name.clone(), o)));
    }
    all.sort_by(|a, b| a.1.name.cmp(&b.1.name));

    let mut seen_objects: BTreeMap<&str, &str> = BTreeMap::new();
    for (source, obj) in &all {
        let mut r = Reporter {
            report: std::mem::take(&mut report),
            source,
            object: Some(obj.name.clone()),
            rule: None,
        };
        if let Some(first) = seen_objects.insert(&obj.name, source) {
            r.warning(
                obj.pos,
                format!("another NodeFeatureRule named {:?} is in {first}; this one, the later, replaces it (as applying the files in order leaves it in a cluster)", obj.name),
            );
        }
        let mut names = BTreeSet::new();
        for rule in &obj.rules {
            r.rule = Some(rule.name.clone());
            if rule.name.is_empty() {
                r.error(rule.pos, "rule name cannot be empty");
            } else if !names.insert(rule.name.as_str()) {
                r.warning(
                    rule.pos,
                    format!("another rule in this object is also named {:?}", rule.name),
                );
            }
            check_rule(&mut r, rule, known_features);
        }
        report = r.report;
    }
    check_back_references(&mut report, &all);
    report
}

/// What becomes of a label that is not valid, said after why (a warning's last words).
pub const LABEL_REJECTED: &str =
    "; rejected when the rule matches, the rule's other labels published";

fn check_rule(r: &mut Reporter<'_>, rule: &RuleSpec, known: &[&str]) {
    let produces = !rule.labels.is_empty()
        || rule.labels_template.is_some()
        || !rule.vars.is_empty()
        || rule.vars_template.is_some()
        || !rule.annotations.is_empty()
        || !rule.taints.is_empty()
        || !rule.extended_resources.is_empty();
    if !produces {
        r.warning(rule.pos, "the rule produces nothing (no labels, vars, templates, annotations, taints or extended resources)");
    }
    let terms = rule
        .match_features
        .iter()
        .chain(rule.match_any.iter().flat_map(|m| m.terms.iter()));
    for term in terms {
        check_term(r, term, known);
    }
    for t in rule.labels_template.iter().chain(rule.vars_template.iter()) {
        let parsed = RuleTemplate::parse_at(&t.text, t.pos, t.origin);
        if let Some((at, e)) = parsed.parse_error() {
            r.error(at.unwrap_or(t.pos), e);
        }
        let refs = match parsed.field_typos() {
            Some((typos, refs)) => {
                for (at, m) in typos {
                    r.warning(
                        at.unwrap_or(t.pos),
                        format!("template: {m}; the rule fails with a missing key when it runs"),
                    );
                }
                refs
            }
            None => root_references(&t.text),
        };
        check_template_data(r, rule, &refs, t.pos);
        for a in heavy_actions(&t.text) {
            r.warning(
                t.pos,
                format!(
                    "template action {{{{ {} }}}} can write far more than labels carry; a template's output is cut at {} KiB and the rule then fails",
                    crate::validate::elide(&a, 60),
                    MAX_TEMPLATE_OUTPUT >> 10
                ),
            );
        }
        for f in unsupported_functions(&t.text) {
            r.warning(
                t.pos,
                format!("template function {f:?} is not supported by gpu-labeler; the rule will fail when it matches"),
            );
        }
    }
    let strict = LabelPolicy::default();
    for l in &rule.labels {
        let full = if l.key.contains('/') {
            l.key.clone()
        } else {
            format!("{FEATURE_PREFIX}{}", l.key)
        };
        // A label that is not a valid label is the API server's to admit (NFD's CRD does) and
        // nfd-master's to skip when the rule matches: `labels` and the agent reject it with a
        // warning and publish the rule's other labels, and so is it said here (an error under
        // --strict, for CI).
        if let Err(e) = qualified_name(&full) {
            r.warning(
                l.pos,
                format!("invalid label key {full:?}: {e}{LABEL_REJECTED}"),
            );
            continue;
        }
        if let Some(spec) = l.value.strip_prefix('@') {
            check_dynamic(r, l.pos, &l.value, spec, known);
        } else if let Err(e) = label_value(&l.value) {
            r.warning(
                l.pos,
                format!(
                    "label {full:?}: invalid value {:?}: {e}{LABEL_REJECTED}",
                    l.value
                ),
            );
            continue;
        }
        let probe = if l.value.starts_with('@') {
            "x"
        } else {
            l.value.as_str()
        };
        if let Err(e) = validate_label(&full, probe, &strict) {
            r.warning(
                l.pos,
                format!(
                    "label {full:?}: {e}; it is rejected unless {:?} is in extraLabelNs",
                    namespace(&full)
                ),
            );
        }
    }
    for a in &rule.annotations {
        if let Err(e) = validate_annotation(&a.key, &a.value) {
            r.error(a.pos, format!("annotation {:?}: {e}", a.key));
        }
    }
    for e in &rule.extended_resources {
        if let Some(spec) = e.value.strip_prefix('@') {
            check_dynamic(r, e.pos, &e.value, spec, known);
            if let Err(m) = validate_extended_resource(&e.key, "0") {
                r.error(e.pos, format!("extended resource {:?}: {m}", e.key));
            }
        } else if let Err(m) = validate_extended_resource(&e.key, &e.value) {
            r.error(e.pos, format!("extended resource {:?}: {m}", e.key));
        }
    }
    for t in &rule.taints {
        let taint = Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
        };
        if let Err(m) = validate_taint(&taint) {
            r.error(t.pos, format!("taint {:?}: {m}", t.key));
        }
    }
}

/// A template runs with the elements of one matcher (`matchFeatures`, or one `matchAny`
/// element) as data; a `.domain.feature` that matcher has no term for is a missing key, which
/// fails the rule.
fn check_template_data(r: &mut Reporter<'_>, rule: &RuleSpec, refs: &[(String, String)], pos: Pos) {
    let covers = |terms: &[TermSpec], d: &str, n: &str| {
        terms
            .iter()
            .any(|t| t.feature.split_once('.') == Some((d, n)))
    };
    let mut matchers: Vec<(String, &[TermSpec], &str)> = Vec::new();
    if !rule.match_features.is_empty() {
        matchers.push((
            "matchFeatures".to_string(),
            &rule.match_features,
            "the rule matches",
        ));
    }
    for (i, m) in rule.match_any.iter().enumerate() {
        matchers.push((format!("matchAny[{i}]"), &m.terms, "that element matches"));
    }
    for (d, n) in refs {
        for (name, terms, when) in &matchers {
            if !covers(terms, d, n) {
                r.warning(
                    pos,
                    format!("the template reads .{d}.{n}, which is not in the data of {name}; the rule fails with a missing key whenever {when}"),
                );
            }
        }
    }
}

/// `.domain.feature` field chains read from the template's data root (`.a.b` or `$.a.b`).
fn root_references(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after.find("}}").unwrap_or(after.len());
        let action = &after[..end];
        rest = &after[end..];
        let b = action.as_bytes();
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        let mut i = 0;
        while i < b.len() {
            let at_root = b[i] == b'.'
                && (i == 0 || !(ident(b[i - 1]) || b[i - 1] == b')' || b[i - 1] == b'.'));
            if at_root {
                let word = |from: usize| {
                    let mut j = from;
                    while j < b.len() && ident(b[j]) {
                        j += 1;
                    }
                    j
                };
                let e1 = word(i + 1);
                if e1 > i + 1 && e1 < b.len() && b[e1] == b'.' {
                    let e2 = word(e1 + 1);
                    if e2 > e1 + 1 {
                        let pair = (
                            action[i + 1..e1].to_string(),
                            action[e1 + 1..e2].to_string(),
                        );
                        if !out.contains(&pair) {
                            out.push(pair);
                        }
                    }
                    i = e2.max(e1);
                    continue;
                }
                i = e1.max(i + 1);
                continue;
            }
            i += 1;
        }
    }
    out
}

fn check_dynamic(r: &mut Reporter<'_>, pos: Pos, value: &str, spec: &str, known: &[&str]) {
    let parts: Vec<&str> = spec.splitn(3, '.').collect();
    if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
        r.error(
            pos,
            format!("dynamic value {value:?} is not in the form '@domain.feature.element'"),
        );
        return;
    }
    let feature = format!("{}.{}", parts[0], parts[1]);
    if !known.is_empty()
        && feature != super::eval::RULE_MATCHED
        && !known.contains(&feature.as_str())
    {
        r.warning(
            pos,
            format!(
                "dynamic value {value:?} reads unknown feature {feature:?}{}",
                suggest(&feature, known)
            ),
        );
    }
}

fn suggest(feature: &str, known: &[&str]) -> String {
    closest(feature, known.iter().copied())
        .map(|k| format!(" (did you mean {k:?}?)"))
        .unwrap_or_default()
}

fn check_term(r: &mut Reporter<'_>, term: &TermSpec, known: &[&str]) {
    let f = term.feature.as_str();
    if f.split('.').count() != 2 || f.split('.').any(str::is_empty) {
        r.error(
            term.pos,
            format!("invalid feature name {f:?} (not <domain>.<feature>)"),
        );
    } else if !known.is_empty()
        && f != super::eval::RULE_MATCHED
        && !known.contains(&f.to_lowercase().as_str())
    {
        r.warning(
            term.pos,
            format!(
                "unknown feature {f:?}{}; the term can never match",
                suggest(f, known)
            ),
        );
    }
    let exprs = term
        .match_expressions
        .iter()
        .flatten()
        .chain(term.match_name.iter());
    for spec in exprs {
        let Some(e) = Expr::compile(spec) else {
            continue;
        };
        let what = if spec.key.is_empty() {
            "matchName".to_string()
        } else {
            format!("{f}: {}", spec.key)
        };
        if !known.is_empty()
            && !spec.key.is_empty()
            && crate::features::catalog_has(f, &spec.key) == Some(false)
            && let Some(elements) = crate::features::catalog_elements(f)
        {
            r.warning(
                spec.pos,
                format!(
                    "{what}: {f} has no element {:?}{}; the expression can never match",
                    spec.key,
                    suggest(&spec.key, elements)
                ),
            );
        }
        for (pos, severity, message) in e.static_problems() {
            let pos = if pos.is_known() { pos } else { spec.pos };
            match severity {
                Severity::Error => r.error(pos, format!("{what}: {message}")),
                Severity::Warning => r.warning(pos, format!("{what}: {message}")),
            }
        }
    }
}

/// `rule.matched` keys that no earlier rule (in evaluation order) produces.
fn check_back_references(report: &mut CheckReport, all: &[(String, ObjectSpec)]) {
    // Evaluation order: objects by name (already sorted), rules in file order.
    let rules: Vec<(&str, &ObjectSpec, &RuleSpec)> = all
        .iter()
        .flat_map(|(s, o)| o.rules.iter().map(move |r| (s.as_str(), o, r)))
        .collect();
    let produced = |r: &RuleSpec| -> Vec<String> {
        r.labels
            .iter()
            .chain(r.vars.iter())
            .map(|e| e.key.clone())
            .collect()
    };
    for (i, (source, obj, rule)) in rules.iter().enumerate() {
        let earlier = &rules[..i];
        let opaque = earlier
            .iter()
            .any(|(_, _, r)| r.labels_template.is_some() || r.vars_template.is_some());
        if opaque {
            continue;
        }
        let terms = rule
            .match_features
            .iter()
            .chain(rule.match_any.iter().flat_map(|m| m.terms.iter()))
            .filter(|t| t.feature == super::eval::RULE_MATCHED);
        for term in terms {
            for e in term.match_expressions.iter().flatten() {
                if e.op == Op::DoesNotExist.as_str() {
                    continue;
                }
                if earlier.iter().any(|(_, _, r)| produced(r).contains(&e.key)) {
                    continue;
                }
                let later = rules[i + 1..]
                    .iter()
                    .find(|(_, _, r)| produced(r).contains(&e.key))
                    .map(|(_, o, r)| {
                        format!(
                            " (rule {:?} of NodeFeatureRule {:?} produces it, but runs later: objects run in metadata.name order, rules in file order)",
                            r.name, o.name
                        )
                    })
                    .unwrap_or_default();
                report.warnings.push(RuleLoadError {
                    source: source.to_string(),
                    line: e.pos.line,
                    column: e.pos.column,
                    object: Some(obj.name.clone()),
                    rule: Some(rule.name.clone()),
                    message: format!("rule.matched: no earlier rule produces {:?}{later}", e.key),
                });
            }
        }
    }
}
