//! A loaded rule set: objects compiled once (regular expressions, templates), evaluated over a
//! node's features in `metadata.name` order, the output post-processed as nfd-master does it
//! (namespaces, dynamic `@` values, validation, the namespace policy).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::eval::{self, CompiledRule, Index, RuleOutput, RuleTrace, Term, View};
use super::expression::{Compiler, Expr};
use super::model;
use super::source::{
    RULE_DIR_DEPTH, RuleLoadError, RuleSource, read_objects, rule_files_and_skipped,
};
use super::template::RuleTemplate;
use crate::config::LabelPolicy;
use crate::features::FeatureSet;
use crate::output::{MAX_TAINTS, NodeOutput, Taint};
use crate::validate::{
    FEATURE_NS, validate_annotation, validate_extended_resource, validate_label, validate_taint,
};
use crate::yaml::document::Pos;

/// A rule that failed while being evaluated; it produced nothing, the others still applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRuntimeError {
    pub object: String,
    pub rule: String,
    /// `file:line:column` of the rule.
    pub location: String,
    pub message: String,
}

impl fmt::Display for RuleRuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rule {:?} (NodeFeatureRule {:?}, {}) failed: {}",
            self.rule, self.object, self.location, self.message
        )
    }
}

impl std::error::Error for RuleRuntimeError {}

/// What kind of output a rejection refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OutputKind {
    Label,
    Annotation,
    ExtendedResource,
    Taint,
}

impl OutputKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OutputKind::Label => "label",
            OutputKind::Annotation => "annotation",
            OutputKind::ExtendedResource => "extended resource",
            OutputKind::Taint => "taint",
        }
    }
}

/// A label (or annotation, extended resource, taint) that a rule produced and post-processing
/// refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedLabel {
    pub kind: OutputKind,
    /// The key after namespacing (`feature.node.kubernetes.io/` added when it had none).
    pub key: String,
    pub value: String,
    pub object: String,
    pub rule: String,
    /// `file:line:column` of the rule.
    pub location: String,
    pub reason: String,
}

impl fmt::Display for RejectedLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Escaped like the reason's `{:?}`, so that a newline or a control character in a
        // refused label cannot split or garble the log line that reports it.
        write!(
            f,
            "{} \"{}={}\" from rule {:?} (NodeFeatureRule {:?}, {}) rejected: {}",
            self.kind.as_str(),
            crate::validate::elide(&self.key, 320).escape_debug(),
            crate::validate::elide(&self.value, 100).escape_debug(),
            self.rule,
            self.object,
            self.location,
            self.reason
        )
    }
}

/// A rule that writes a label (`RuleSet::label_producers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelProducer {
    pub key: String,
    /// As written: a value, or `@feature.attribute` for the attribute's value.
    pub value: String,
    pub object: String,
    pub rule: String,
    /// `file:line:column` of the rule.
    pub location: String,
    /// The features its `matchFeatures` / `matchAny` terms name.
    pub features: Vec<String>,
}

/// The result of evaluating a rule set over a node's features.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    /// Post-processed: namespaced, dynamic values resolved, validated, policy applied.
    pub output: NodeOutput,
    pub errors: Vec<RuleRuntimeError>,
    pub rejected: Vec<RejectedLabel>,
    /// A site rule that writes a label of the built-in rules (its value replaces the
    /// built-in's), once per rule and key.
    pub warnings: Vec<String>,
}

/// Where the rules shipped in the binary say they come from (`default_rules`).
pub const BUILTIN_SOURCE_PREFIX: &str = "builtin:";

/// The warning for a rule of the site's that writes a label of the built-in rules.
fn builtin_override(key: &str, builtin: &str, builtin_at: &str) -> String {
    format!(
        "writes {key}, a label of the built-in rule {builtin:?} ({builtin_at}): its value replaces the built-in one (the GPUHealthy condition follows the gpu.node feature, not the label)"
    )
}

/// A `NodeFeatureRule` object, compiled.
#[derive(Debug)]
pub(crate) struct CompiledObject {
    pub name: String,
    pub source: String,
    pub rules: Vec<CompiledRule>,
}

impl CompiledObject {
    pub(super) fn location(&self, rule: &CompiledRule) -> String {
        location(&self.source, rule.pos)
    }
}

fn location(source: &str, pos: Pos) -> String {
    if pos.is_known() {
        format!("{source}:{}:{}", pos.line, pos.column)
    } else {
        source.to_string()
    }
}

/// Loaded and compiled NodeFeatureRules, in evaluation order.
#[derive(Debug, Default)]
pub struct RuleSet {
    pub(super) objects: Vec<CompiledObject>,
}

/// What one rule did during an evaluation (for `explain`).
pub(crate) struct RuleRecord {
    pub object: usize,
    pub rule: usize,
    pub trace: RuleTrace,
    pub result: Result<Option<RuleOutput>, String>,
}

impl RuleSet {
    /// Loads rule files the way NFD's API server admits `NodeFeatureRule` objects (structure,
    /// types, operator names). All problems of all sources are returned; an object with a
    /// problem is left out, every other object loads.
    pub fn load(sources: Vec<RuleSource>) -> (RuleSet, Vec<RuleLoadError>) {
        let mut objects = Vec::new();
        let mut errors = Vec::new();
        let mut compiler = Compiler::default();
        for src in &sources {
            let (objs, errs) = load_source(src, &mut compiler);
            objects.extend(objs);
            errors.extend(errs);
        }
        // Stable: objects with the same name keep their load order. Of two objects with one
        // name the later replaces the earlier, as `kubectl apply` of the files in this order
        // leaves the cluster with the later one.
        objects.sort_by(|a: &CompiledObject, b| a.name.cmp(&b.name));
        objects.reverse();
        objects.dedup_by(|later, earlier| later.name == earlier.name);
        objects.reverse();
        (RuleSet { objects }, errors)
    }

    /// Reads rule files: each path is a file, or a directory whose `*.yaml`, `*.yml` and
    /// `*.json` files (subdirectories included) are read in path order. Errors name the path.
    pub fn load_paths(paths: &[PathBuf]) -> (Vec<RuleSource>, Vec<RuleLoadError>) {
        let mut sources = Vec::new();
        let mut errors = Vec::new();
        let read_err = |path: &Path, what: &str, e: std::io::Error| RuleLoadError {
            source: path.display().to_string(),
            line: 0,
            column: 0,
            object: None,
            rule: None,
            message: format!("cannot {what}: {e}"),
        };
        for path in paths {
            let files = if path.is_dir() {
                match rule_files_and_skipped(path) {
                    Ok((files, skipped)) if !skipped.is_empty() => {
                        // Said, not left out quietly; the files above them are read.
                        for dir in skipped {
                            errors.push(RuleLoadError {
                                message: format!(
                                    "not read: more than {RULE_DIR_DEPTH} directories below {}",
                                    path.display()
                                ),
                                ..read_err(&dir, "", std::io::Error::other(""))
                            });
                        }
                        if files.is_empty() {
                            continue;
                        }
                        files
                    }
                    // A directory that names no rule file is a mistake, or a ConfigMap caught
                    // half-way through an update: either way not "no rules".
                    Ok((files, _)) if files.is_empty() => {
                        errors.push(RuleLoadError {
                            message: "no rule files here (*.yaml, *.yml, *.json)".into(),
                            ..read_err(path, "", std::io::Error::other(""))
                        });
                        continue;
                    }
                    Ok((files, _)) => files,
                    Err(e) => {
                        errors.push(read_err(path, "read directory", e));
                        continue;
                    }
                }
            } else {
                vec![path.clone()]
            };
            // Every listed entry is read: a dangling link (a ConfigMap's `..data` mid-swap), a
            // FIFO or a directory named `*.yaml` is an error, not a file quietly skipped.
            for file in files {
                match crate::sysfs::read_regular_text(&file, crate::sysfs::MAX_INPUT_BYTES) {
                    Ok(text) => sources.push(RuleSource {
                        name: file.display().to_string(),
                        text,
                    }),
                    Err(e) => errors.push(read_err(&file, "read rule file", e)),
                }
            }
        }
        (sources, errors)
    }

    /// The number of rules (over all objects).
    pub fn rule_count(&self) -> usize {
        self.objects.iter().map(|o| o.rules.len()).sum()
    }

    /// The `NodeFeatureRule` objects in evaluation order, with their rule names.
    pub fn objects(&self) -> Vec<(&str, Vec<&str>)> {
        self.objects
            .iter()
            .map(|o| {
                (
                    o.name.as_str(),
                    o.rules.iter().map(|r| r.name.as_str()).collect(),
                )
            })
            .collect()
    }

    /// Every label key a rule writes as written (not from a `labelsTemplate`), namespaced as
    /// nfd-master namespaces it, with the rule that writes it and the features it matches on.
    /// The names of every rule, in evaluation order (objects by name, rules in file order).
    pub fn rule_names(&self) -> Vec<&str> {
        self.objects
            .iter()
            .flat_map(|o| o.rules.iter().map(|r| r.name.as_str()))
            .collect()
    }

    pub fn label_producers(&self) -> Vec<LabelProducer> {
        let mut out = Vec::new();
        for o in &self.objects {
            for r in &o.rules {
                let map: BTreeMap<String, String> = r.labels.iter().cloned().collect();
                let mut features: Vec<String> = r
                    .match_features
                    .iter()
                    .chain(r.match_any.iter().flatten())
                    .map(|t| t.feature.clone())
                    .collect();
                features.dedup();
                for (key, value) in namespaced(&map, crate::validate::FEATURE_NS) {
                    out.push(LabelProducer {
                        key,
                        value,
                        object: o.name.clone(),
                        rule: r.name.clone(),
                        location: o.location(r),
                        features: features.clone(),
                    });
                }
            }
        }
        out
    }

    /// Evaluates every rule over the features, as nfd-master does, and post-processes the
    /// output with the label policy.
    pub fn evaluate(&self, features: &FeatureSet, policy: &LabelPolicy) -> Evaluation {
        self.run(features, policy, None)
    }

    /// As `evaluate`, along the path `explain` takes: every term and every instance looked at
    /// and recorded, none skipped. The same outcome by contract; the property tests hold the
    /// two paths to it.
    pub fn evaluate_traced(&self, features: &FeatureSet, policy: &LabelPolicy) -> Evaluation {
        let mut records = Vec::new();
        self.run(features, policy, Some(&mut records))
    }

    pub(crate) fn run(
        &self,
        features: &FeatureSet,
        policy: &LabelPolicy,
        mut records: Option<&mut Vec<RuleRecord>>,
    ) -> Evaluation {
        let mut view = View::new(features);
        let mut index = Index::default();
        let mut eval = Evaluation::default();
        // key -> (value, (object, rule)); later rules override earlier ones, as maps.Copy.
        let mut labels: BTreeMap<String, (String, (usize, usize))> = BTreeMap::new();
        let mut annotations: BTreeMap<String, (String, (usize, usize))> = BTreeMap::new();
        let mut resources: BTreeMap<String, (String, (usize, usize))> = BTreeMap::new();
        let mut taints: Vec<(Taint, (usize, usize))> = Vec::new();
        let builtin = self.builtin_labels();
        for (oi, obj) in self.objects.iter().enumerate() {
            for (ri, rule) in obj.rules.iter().enumerate() {
                let mut trace = records.as_ref().map(|_| RuleTrace::default());
                let result = eval::execute_rule(rule, &view, &mut index, trace.as_mut());
                match &result {
                    Err(message) => {
                        let err = RuleRuntimeError {
                            object: obj.name.clone(),
                            rule: rule.name.clone(),
                            location: obj.location(rule),
                            message: message.clone(),
                        };
                        eval.errors.push(err);
                    }
                    Ok(out) => {
                        let empty = RuleOutput::default();
                        let out_ref = out.as_ref().unwrap_or(&empty);
                        if let Some(out) = out {
                            let who = (oi, ri);
                            for (k, v) in namespaced(&out.labels, FEATURE_NS) {
                                if let Some(&(bo, br)) = builtin.get(&k)
                                    && !obj.source.starts_with(BUILTIN_SOURCE_PREFIX)
                                {
                                    let b = &self.objects[bo];
                                    let w = format!(
                                        "rule {:?} (NodeFeatureRule {:?}, {}) {}",
                                        rule.name,
                                        obj.name,
                                        obj.location(rule),
                                        builtin_override(
                                            &k,
                                            &b.rules[br].name,
                                            &b.location(&b.rules[br]),
                                        )
                                    );
                                    if !eval.warnings.contains(&w) {
                                        eval.warnings.push(w);
                                    }
                                }
                                labels.insert(k, (v, who));
                            }
                            for (k, v) in namespaced(&out.annotations, FEATURE_NS) {
                                annotations.insert(k, (v, who));
                            }
                            for (k, v) in namespaced(&out.extended_resources, FEATURE_NS) {
                                resources.insert(k, (v, who));
                            }
                            taints.extend(out.taints.iter().map(|t| (t.clone(), who)));
                        }
                        view.insert_rule_matched(&out_ref.labels, &out_ref.vars);
                    }
                }
                if let (Some(r), Some(trace)) = (records.as_deref_mut(), trace) {
                    r.push(RuleRecord {
                        object: oi,
                        rule: ri,
                        trace,
                        result,
                    });
                }
            }
        }

        let reject = |eval: &mut Evaluation,
                      kind,
                      key: &str,
                      value: &str,
                      who: (usize, usize),
                      reason: String| {
            let obj = &self.objects[who.0];
            let rule = &obj.rules[who.1];
            let r = RejectedLabel {
                kind,
                key: key.to_string(),
                value: value.to_string(),
                object: obj.name.clone(),
                rule: rule.name.clone(),
                location: obj.location(rule),
                reason,
            };
            eval.rejected.push(r);
        };
        let resolve = |value: &str| -> Result<String, String> {
            if value.starts_with('@') {
                view.dynamic_value(value)
            } else {
                Ok(value.to_string())
            }
        };
        for (key, (value, who)) in labels {
            match resolve(&value).and_then(|v| validate_label(&key, &v, policy).map(|k| (k, v))) {
                Ok((k, v)) => {
                    eval.output.labels.insert(k, v);
                }
                Err(reason) => reject(&mut eval, OutputKind::Label, &key, &value, who, reason),
            }
        }
        for (key, (value, who)) in resources {
            match resolve(&value).and_then(|v| validate_extended_resource(&key, &v).map(|k| (k, v)))
            {
                Ok((k, v)) => {
                    eval.output.extended_resources.insert(k, v);
                }
                Err(reason) => reject(
                    &mut eval,
                    OutputKind::ExtendedResource,
                    &key,
                    &value,
                    who,
                    reason,
                ),
            }
        }
        for (key, (value, who)) in annotations {
            match validate_annotation(&key, &value) {
                Ok(k) => {
                    eval.output.annotations.insert(k, value);
                }
                Err(reason) => reject(&mut eval, OutputKind::Annotation, &key, &value, who, reason),
            }
        }
        // A rule's valid taints go together or not at all: a rule whose taints would take the
        // rule set past MAX_TAINTS is refused whole, in one report (a rule asking for thousands
        // cannot crowd out the health taint of a rule after it).
        let mut rest = taints.as_slice();
        while let Some((_, who)) = rest.first() {
            let who = *who;
            let n = rest.iter().take_while(|(_, w)| *w == who).count();
            let (group, after) = rest.split_at(n);
            rest = after;
            let mut valid: Vec<&Taint> = Vec::new();
            for (taint, _) in group {
                match validate_taint(taint) {
                    Ok(()) => valid.push(taint),
                    Err(reason) => {
                        let value = format!("{}:{}", taint.value, taint.effect);
                        reject(
                            &mut eval,
                            OutputKind::Taint,
                            &taint.key,
                            &value,
                            who,
                            reason,
                        )
                    }
                }
            }
            let same = |a: &Taint, b: &Taint| a.key == b.key && a.effect == b.effect;
            let mut new: Vec<&Taint> = Vec::new();
            for t in &valid {
                if !eval.output.taints.iter().any(|o| same(o, t)) && !new.iter().any(|o| same(o, t))
                {
                    new.push(t);
                }
            }
            let before = eval.output.taints.len();
            if before + new.len() > MAX_TAINTS {
                let first = valid[0];
                let value = format!("{}:{}", first.value, first.effect);
                let reason = format!(
                    "this rule's {} taint(s), this one first, with the {before} of the rules before it, are more than the {MAX_TAINTS} taints a rule set may ask for: all of this rule's refused",
                    valid.len()
                );
                reject(
                    &mut eval,
                    OutputKind::Taint,
                    &first.key,
                    &value,
                    who,
                    reason,
                );
                continue;
            }
            for taint in valid {
                // A node cannot carry two taints with the same key and effect: the later
                // one wins.
                eval.output.taints.retain(|t| !same(t, taint));
                eval.output.taints.push(taint.clone());
            }
        }
        eval
    }

    /// The site's rules that write a label of the built-in rules (their literal `labels`; a
    /// template's keys are known only when it runs, and `evaluate` says those): `rules check`'s
    /// warnings, at the site rule.
    pub fn builtin_overrides(&self) -> Vec<RuleLoadError> {
        let builtin = self.builtin_labels();
        let mut out = Vec::new();
        for obj in &self.objects {
            if obj.source.starts_with(BUILTIN_SOURCE_PREFIX) {
                continue;
            }
            for rule in &obj.rules {
                let keys: BTreeMap<String, String> = rule.labels.iter().cloned().collect();
                for (k, _) in namespaced(&keys, FEATURE_NS) {
                    let Some(&(bo, br)) = builtin.get(&k) else {
                        continue;
                    };
                    let b = &self.objects[bo];
                    out.push(RuleLoadError {
                        source: obj.source.clone(),
                        line: rule.pos.line,
                        column: rule.pos.column,
                        object: Some(obj.name.clone()),
                        rule: Some(rule.name.clone()),
                        message: builtin_override(&k, &b.rules[br].name, &b.location(&b.rules[br])),
                    });
                }
            }
        }
        out
    }

    /// The label keys the built-in rules write (their `labels`, namespaced), each with the
    /// first rule that writes it.
    fn builtin_labels(&self) -> BTreeMap<String, (usize, usize)> {
        let mut out = BTreeMap::new();
        for (oi, obj) in self.objects.iter().enumerate() {
            if !obj.source.starts_with(BUILTIN_SOURCE_PREFIX) {
                continue;
            }
            for (ri, rule) in obj.rules.iter().enumerate() {
                for (k, _) in &rule.labels {
                    let key = if k.contains('/') {
                        k.clone()
                    } else {
                        format!("{FEATURE_NS}/{k}")
                    };
                    out.entry(key).or_insert((oi, ri));
                }
            }
        }
        out
    }
}

/// nfd-master's `addNsToMapKeys`: unprefixed keys get the namespace; a key given both ways in
/// one rule keeps the prefixed one.
pub(super) fn namespaced(map: &BTreeMap<String, String>, ns: &str) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(map.len());
    for (k, v) in map {
        if k.contains('/') {
            out.push((k.clone(), v.clone()));
        } else {
            let full = format!("{ns}/{k}");
            if !map.contains_key(&full) {
                out.push((full, v.clone()));
            }
        }
    }
    out
}

/// Parses, admits and compiles one source, each object as soon as it is read: the specs of
/// one document are held at a time, not the whole file's.
fn load_source(
    src: &RuleSource,
    compiler: &mut Compiler,
) -> (Vec<CompiledObject>, Vec<RuleLoadError>) {
    let mut objects = Vec::new();
    let problems = read_objects(src, &mut |o| {
        if o.admitted {
            objects.push(compile_object(&o, &src.name, compiler));
        }
    });
    (objects, problems)
}

pub(crate) fn compile_object(
    spec: &model::ObjectSpec,
    source: &str,
    compiler: &mut Compiler,
) -> CompiledObject {
    CompiledObject {
        name: spec.name.clone(),
        source: source.to_string(),
        rules: spec
            .rules
            .iter()
            .map(|r| compile_rule(r, compiler))
            .collect(),
    }
}

fn compile_terms(terms: &[model::TermSpec], compiler: &mut Compiler) -> Vec<Term> {
    terms
        .iter()
        .map(|t| {
            Term::new(
                &t.feature,
                t.pos,
                t.match_expressions.as_ref().map(|es| {
                    es.iter()
                        .filter_map(|e| Expr::compile_with(e, compiler))
                        .collect()
                }),
                t.match_name
                    .as_ref()
                    .and_then(|e| Expr::compile_with(e, compiler)),
            )
        })
        .collect()
}

fn compile_rule(r: &model::RuleSpec, compiler: &mut Compiler) -> CompiledRule {
    let pairs = |entries: &[model::Entry]| -> Vec<(String, String)> {
        entries
            .iter()
            .map(|e| (e.key.clone(), e.value.clone()))
            .collect()
    };
    CompiledRule {
        name: r.name.clone(),
        pos: r.pos,
        labels: pairs(&r.labels),
        labels_template: r
            .labels_template
            .as_ref()
            .map(|t| RuleTemplate::parse_at(&t.text, t.pos, t.origin)),
        vars: pairs(&r.vars),
        vars_template: r
            .vars_template
            .as_ref()
            .map(|t| RuleTemplate::parse_at(&t.text, t.pos, t.origin)),
        annotations: pairs(&r.annotations),
        extended_resources: pairs(&r.extended_resources),
        taints: r
            .taints
            .iter()
            .map(|t| Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: t.effect.clone(),
            })
            .collect(),
        match_features: compile_terms(&r.match_features, compiler),
        match_any: r
            .match_any
            .iter()
            .map(|m| compile_terms(&m.terms, compiler))
            .collect(),
    }
}
