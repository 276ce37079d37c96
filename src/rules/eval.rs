//! Rule evaluation, as nfd-master runs a NodeFeatureRule (`nodefeaturerule.Execute` with
//! fail-fast, then `processNodeFeatureRule` and the label filtering of `refreshNodeFeatures`).
//!
//! One choice makes NFD's behaviour deterministic: NFD walks the expressions of a term in Go's
//! random map order and stops at the first that fails or errors, so an element that both fails
//! one expression and errors on another is sometimes an error and sometimes a plain mismatch.
//! Here a failing expression always wins over an erroring one on the same element (one of the
//! outcomes NFD can produce), so the same rules give the same result on every run.

use std::collections::{BTreeMap, HashMap};

use gtmpl_ng::Value;

use super::expression::{Expr, Input, Op};
use super::template::RuleTemplate;
use crate::features::{FeatureSet, Instance, Nil};
use crate::output::Taint;
use crate::yaml::document::Pos;

/// A rule, compiled.
#[derive(Debug)]
pub struct CompiledRule {
    pub name: String,
    pub pos: Pos,
    pub labels: Vec<(String, String)>,
    pub labels_template: Option<RuleTemplate>,
    pub vars: Vec<(String, String)>,
    pub vars_template: Option<RuleTemplate>,
    pub annotations: Vec<(String, String)>,
    pub extended_resources: Vec<(String, String)>,
    pub taints: Vec<Taint>,
    pub match_features: Vec<Term>,
    pub match_any: Vec<Vec<Term>>,
}

impl CompiledRule {
    fn has_templates(&self) -> bool {
        self.labels_template.is_some() || self.vars_template.is_some()
    }
}

/// A `matchFeatures` term, compiled.
#[derive(Debug)]
pub struct Term {
    /// As written (the template data uses its domain and feature parts as written).
    pub feature: String,
    pub pos: Pos,
    /// Lower-cased, as NFD looks features up.
    lookup: String,
    domain: String,
    name: String,
    pub exprs: Option<Vec<Expr>>,
    pub name_expr: Option<Expr>,
}

impl Term {
    pub fn new(feature: &str, pos: Pos, exprs: Option<Vec<Expr>>, name_expr: Option<Expr>) -> Term {
        let lookup = feature.to_lowercase();
        let (domain, name) = match feature.split_once('.') {
            Some((d, n)) => (d.to_string(), n.to_string()),
            None => (lookup.clone(), String::new()),
        };
        Term {
            feature: feature.to_string(),
            pos,
            lookup,
            domain,
            name,
            exprs,
            name_expr,
        }
    }
}

/// The features rules see: the node's, plus `rule.matched` as earlier rules fill it.
pub struct View<'f> {
    base: &'f FeatureSet,
    rule_matched: Option<BTreeMap<String, String>>,
}

pub const RULE_MATCHED: &str = "rule.matched";

impl<'f> View<'f> {
    pub fn new(base: &'f FeatureSet) -> View<'f> {
        View {
            base,
            rule_matched: base
                .attributes
                .get(RULE_MATCHED)
                .map(|a| a.elements.clone()),
        }
    }

    fn flags(&self, feature: &str) -> Option<&BTreeMap<String, Nil>> {
        self.base.flags.get(feature).map(|f| &f.elements)
    }

    pub fn attributes(&self, feature: &str) -> Option<&BTreeMap<String, String>> {
        if feature == RULE_MATCHED {
            self.rule_matched.as_ref()
        } else {
            self.base.attributes.get(feature).map(|a| &a.elements)
        }
    }

    fn instances(&self, feature: &str) -> Option<&'f [Instance]> {
        self.base
            .instances
            .get(feature)
            .map(|i| i.elements.as_slice())
    }

    /// Feeds a rule's output back for later rules, as nfd-master does after every rule that
    /// ran without error (matched or not; the feature exists from then on).
    pub fn insert_rule_matched(
        &mut self,
        labels: &BTreeMap<String, String>,
        vars: &BTreeMap<String, String>,
    ) {
        let m = self.rule_matched.get_or_insert_with(BTreeMap::new);
        m.extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        m.extend(vars.iter().map(|(k, v)| (k.clone(), v.clone())));
    }

    /// nfd-master's `getDynamicValue`: `@<domain>.<feature>.<element>` of an attribute feature.
    pub fn dynamic_value(&self, value: &str) -> Result<String, String> {
        let spec = value.strip_prefix('@').unwrap_or(value);
        let parts: Vec<&str> = spec.splitn(3, '.').collect();
        let [domain, feature, element] = parts.as_slice() else {
            return Err(format!(
                "value {value} is not in the form of '@domain.feature.element'"
            ));
        };
        let name = format!("{domain}.{feature}");
        let attrs = self
            .attributes(&name)
            .ok_or_else(|| format!("feature {name} not found"))?;
        attrs
            .get(*element)
            .cloned()
            .ok_or_else(|| format!("element {element} not found on feature {name}"))
    }
}

/// Per evaluation: the instances of each feature as columns, one per attribute a rule looks
/// at, built on first use. A column holds each distinct value once and, per instance, which one
/// it has, so an expression is evaluated once per distinct value (a node's 2,000 functions have
/// a dozen vendors and a few NUMA nodes), integers and versions parsed once per value, and the
/// instances are then matched by looking the outcomes up.
#[derive(Default)]
pub struct Index<'f> {
    columns: HashMap<String, HashMap<String, Column<'f>>>,
    /// Per expression of the term being matched: its outcome for each distinct value of its
    /// column, then for an absent attribute. Reused from term to term.
    outcomes: Vec<Vec<Outcome>>,
    /// The error messages the outcomes point to (cleared per term).
    errors: Vec<String>,
}

/// One attribute of one feature's instances.
struct Column<'f> {
    /// The distinct values, in order of first appearance.
    values: Vec<&'f str>,
    /// Per instance: its value's position in `values`, or `values.len()` when it has none.
    codes: Vec<u32>,
    /// The instances grouped by code, in instance order within each: those of code `c` are
    /// `order[starts[c]..starts[c + 1]]`. A rule that matches few instances looks at those.
    order: Vec<u32>,
    starts: Vec<u32>,
}

impl<'f> Column<'f> {
    fn new(key: &str, insts: &'f [Instance]) -> Column<'f> {
        let mut seen: HashMap<&'f str, u32> = HashMap::new();
        let mut values = Vec::new();
        let mut codes = Vec::with_capacity(insts.len());
        for inst in insts {
            codes.push(match inst.attributes.get(key) {
                Some(v) => *seen.entry(v.as_str()).or_insert_with(|| {
                    values.push(v.as_str());
                    (values.len() - 1) as u32
                }),
                None => u32::MAX,
            });
        }
        let absent = values.len() as u32;
        for c in &mut codes {
            if *c == u32::MAX {
                *c = absent;
            }
        }
        // A counting sort of the instances by code.
        let mut starts = vec![0u32; values.len() + 2];
        for &c in &codes {
            starts[c as usize + 1] += 1;
        }
        for k in 1..starts.len() {
            starts[k] += starts[k - 1];
        }
        let mut next = starts.clone();
        let mut order = vec![0u32; codes.len()];
        for (i, &c) in codes.iter().enumerate() {
            order[next[c as usize] as usize] = i as u32;
            next[c as usize] += 1;
        }
        Column {
            values,
            codes,
            order,
            starts,
        }
    }
}

/// An expression's outcome on one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    True,
    False,
    /// The message is `Index::errors[n]`.
    Error(u32),
}

impl<'f> Index<'f> {
    /// The columns of `feature` for the keys of `exprs`, built where missing.
    fn prepare(&mut self, feature: &str, exprs: &[Expr], insts: &'f [Instance]) {
        if !self.columns.contains_key(feature) {
            self.columns.insert(feature.to_string(), HashMap::new());
        }
        let cols = self.columns.get_mut(feature).expect("inserted above");
        for e in exprs {
            if !cols.contains_key(e.key.as_str()) {
                cols.insert(e.key.clone(), Column::new(&e.key, insts));
            }
        }
    }
}

/// One matched element, as NFD's `MatchedElement`: `{Name}` for a flag, `{Name, Value}` for
/// an attribute, the attributes for an instance.
#[derive(Debug, Clone, PartialEq)]
pub enum Elem<'a> {
    Name(&'a str),
    NameValue(&'a str, &'a str),
    Instance(&'a Instance),
}

impl Elem<'_> {
    fn sort_name(&self) -> &str {
        match self {
            Elem::Name(n) | Elem::NameValue(n, _) => n,
            Elem::Instance(_) => "",
        }
    }

    fn to_value(&self) -> Value {
        let obj = |pairs: &[(&str, &str)]| {
            Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), Value::from(*v)))
                    .collect(),
            )
        };
        match self {
            Elem::Name(n) => obj(&[("Name", n)]),
            Elem::NameValue(n, v) => obj(&[("Name", n), ("Value", v)]),
            Elem::Instance(i) => Value::Object(
                i.attributes
                    .iter()
                    .map(|(k, v)| (k.to_string(), Value::from(v.as_str())))
                    .collect(),
            ),
        }
    }
}

/// What an expression saw, for `explain`.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    Absent,
    Flag,
    Value(String),
}

impl Seen {
    fn of(input: Input<'_>) -> Seen {
        match input {
            Input::Absent => Seen::Absent,
            Input::Flag => Seen::Flag,
            Input::Value(v) => Seen::Value(v.to_string()),
        }
    }
}

/// One expression evaluated against one element set (the flags, the attributes, or one
/// instance).
#[derive(Debug, Clone, PartialEq)]
pub struct ExprTrace {
    pub expr: usize,
    /// `"flag"`, `"attribute"` or `"instance"`.
    pub source: &'static str,
    pub seen: Seen,
    pub outcome: Result<bool, String>,
    /// For an absent element: the present element whose name is closest (a likely typo).
    pub closest: Option<String>,
}

/// The name among `names` closest to an absent `key`, for `explain`.
fn closest_name<'a, S: AsRef<str> + ?Sized + 'a>(
    key: &str,
    input: Input<'_>,
    names: impl Iterator<Item = &'a S>,
) -> Option<String> {
    if input != Input::Absent {
        return None;
    }
    crate::names::closest(key, names.map(AsRef::as_ref)).map(str::to_string)
}

#[derive(Debug, Clone, PartialEq)]
pub struct InstanceTrace {
    pub index: usize,
    pub outcome: Result<bool, String>,
    pub exprs: Vec<ExprTrace>,
}

/// How one term went.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TermTrace {
    /// Which kinds the feature has: flags, attributes, instances (`None` when absent).
    pub flags: Option<usize>,
    pub attributes: Option<usize>,
    pub instances: Option<usize>,
    pub kv: Vec<ExprTrace>,
    /// The union of flags and attributes matched.
    pub kv_matched: bool,
    pub instance_results: Vec<InstanceTrace>,
    pub name_matches: Option<Result<Vec<String>, String>>,
    pub outcome: Option<Result<bool, String>>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct MatcherTrace {
    pub terms: Vec<TermTrace>,
    pub outcome: Option<Result<bool, String>>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuleTrace {
    /// One per `matchAny` element; `None` when NFD did not evaluate it.
    pub match_any: Vec<Option<MatcherTrace>>,
    pub match_features: Option<MatcherTrace>,
}

/// The matched elements by domain and feature: the data of a template.
type Matched<'a> = BTreeMap<&'a str, BTreeMap<&'a str, Vec<Elem<'a>>>>;

fn template_data(m: &Matched<'_>) -> Value {
    Value::Object(
        m.iter()
            .map(|(dom, feats)| {
                (
                    dom.to_string(),
                    Value::Object(
                        feats
                            .iter()
                            .map(|(nam, elems)| {
                                (
                                    nam.to_string(),
                                    Value::Array(elems.iter().map(Elem::to_value).collect()),
                                )
                            })
                            .collect(),
                    ),
                )
            })
            .collect(),
    )
}

/// What a matching rule produces, before namespacing and validation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuleOutput {
    pub labels: BTreeMap<String, String>,
    pub vars: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub extended_resources: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
}

/// Runs one rule: `Ok(None)` when it does not match, `Err` when it failed (it then produces
/// nothing). With a trace, every term and element is evaluated and recorded; the outcome is
/// the same.
pub fn execute_rule<'f>(
    rule: &CompiledRule,
    view: &View<'f>,
    index: &mut Index<'f>,
    mut trace: Option<&mut RuleTrace>,
) -> Result<Option<RuleOutput>, String> {
    let mut labels = BTreeMap::new();
    let mut vars = BTreeMap::new();
    if let Some(t) = trace.as_deref_mut() {
        t.match_any = vec![None; rule.match_any.len()];
    }
    if !rule.match_any.is_empty() {
        let mut any = false;
        for (i, terms) in rule.match_any.iter().enumerate() {
            let mut mt = trace.as_ref().map(|_| MatcherTrace::default());
            let result = match_terms(terms, view, index, rule.has_templates(), mt.as_mut());
            if let (Some(t), Some(mt)) = (trace.as_deref_mut(), mt) {
                t.match_any[i] = Some(mt);
            }
            let matched = result?;
            if let Some(m) = matched {
                any = true;
                if !rule.has_templates() {
                    break;
                }
                expand_templates(rule, &m, &mut labels, &mut vars)?;
            }
        }
        if !any {
            return Ok(None);
        }
    }
    if !rule.match_features.is_empty() {
        let mut mt = trace.as_ref().map(|_| MatcherTrace::default());
        let result = match_terms(
            &rule.match_features,
            view,
            index,
            rule.has_templates(),
            mt.as_mut(),
        );
        if let (Some(t), Some(mt)) = (trace, mt) {
            t.match_features = Some(mt);
        }
        let Some(m) = result? else {
            return Ok(None);
        };
        expand_templates(rule, &m, &mut labels, &mut vars)?;
    }
    labels.extend(rule.labels.iter().cloned());
    vars.extend(rule.vars.iter().cloned());
    Ok(Some(RuleOutput {
        labels,
        vars,
        annotations: rule.annotations.iter().cloned().collect(),
        extended_resources: rule.extended_resources.iter().cloned().collect(),
        taints: rule.taints.clone(),
    }))
}

fn expand_templates(
    rule: &CompiledRule,
    m: &Matched<'_>,
    labels: &mut BTreeMap<String, String>,
    vars: &mut BTreeMap<String, String>,
) -> Result<(), String> {
    if !rule.has_templates() {
        return Ok(());
    }
    let data = template_data(m);
    if let Some(t) = &rule.labels_template {
        labels.extend(t.expand(&data)?);
    }
    if let Some(t) = &rule.vars_template {
        vars.extend(t.expand(&data)?);
    }
    Ok(())
}

/// The terms of one matcher, all of which must match (NFD's `evaluateFeatureMatcher`).
/// `Ok(Some(elements))` on a match; the matched instances are listed only with `collect` (a
/// template reads them) or a trace.
pub fn match_terms<'a, 'f: 'a>(
    terms: &'a [Term],
    view: &'a View<'f>,
    index: &mut Index<'f>,
    collect: bool,
    mut trace: Option<&mut MatcherTrace>,
) -> Result<Option<Matched<'a>>, String> {
    let mut matched: Matched<'a> = BTreeMap::new();
    let mut outcome: Result<bool, String> = Ok(true);
    for term in terms {
        let mut tt = trace.as_ref().map(|_| TermTrace::default());
        let r = match_term(term, view, index, collect, tt.as_mut());
        if let (Some(t), Some(tt)) = (trace.as_deref_mut(), tt) {
            t.terms.push(tt);
        }
        match r {
            Ok(Some(elems)) => {
                matched
                    .entry(term.domain.as_str())
                    .or_default()
                    .entry(term.name.as_str())
                    .or_default()
                    .extend(elems);
            }
            Ok(None) => {
                if outcome == Ok(true) {
                    outcome = Ok(false);
                }
                if trace.is_none() {
                    break;
                }
            }
            Err(e) => {
                if outcome == Ok(true) {
                    outcome = Err(e);
                }
                if trace.is_none() {
                    break;
                }
            }
        }
    }
    if let Some(t) = trace {
        t.outcome = Some(outcome.clone());
    }
    match outcome {
        Ok(true) => Ok(Some(matched)),
        Ok(false) => Ok(None),
        Err(e) => Err(e),
    }
}

/// One term: NFD's `MatchMulti` (flags and attributes as a union, instances matched whole),
/// then `MatchNamesMulti` for `matchName`.
fn match_term<'a, 'f: 'a>(
    term: &'a Term,
    view: &'a View<'f>,
    index: &mut Index<'f>,
    collect: bool,
    mut trace: Option<&mut TermTrace>,
) -> Result<Option<Vec<Elem<'a>>>, String> {
    let flags = view.flags(&term.lookup);
    let attrs = view.attributes(&term.lookup);
    let insts = view.instances(&term.lookup);
    if let Some(t) = trace.as_deref_mut() {
        t.flags = flags.map(BTreeMap::len);
        t.attributes = attrs.map(BTreeMap::len);
        t.instances = insts.map(<[Instance]>::len);
    }
    let result = match_term_inner(
        term,
        flags,
        attrs,
        insts,
        index,
        collect,
        trace.as_deref_mut(),
    );
    if let Some(t) = trace {
        t.outcome = Some(result.as_ref().map(Option::is_some).map_err(Clone::clone));
    }
    result
}

fn match_term_inner<'a, 'f: 'a>(
    term: &'a Term,
    flags: Option<&'a BTreeMap<String, Nil>>,
    attrs: Option<&'a BTreeMap<String, String>>,
    insts: Option<&'f [Instance]>,
    index: &mut Index<'f>,
    collect: bool,
    mut trace: Option<&mut TermTrace>,
) -> Result<Option<Vec<Elem<'a>>>, String> {
    if flags.is_none() && attrs.is_none() && insts.is_none() {
        return Ok(None);
    }
    let mut matched = true;
    let mut elems = Vec::new();
    if let Some(exprs) = &term.exprs {
        let (kv_match, kv_elems) = match_flags_attrs(exprs, flags, attrs, trace.as_deref_mut())?;
        let (inst_match, inst_elems) =
            match_instances(term, exprs, insts, index, collect, trace.as_deref_mut())?;
        matched = kv_match || inst_match;
        if kv_match {
            elems = kv_elems;
        }
        elems.extend(inst_elems);
    }
    if matched && let Some(e) = &term.name_expr {
        let names = match_names(e, flags, attrs, insts);
        if let Some(t) = trace {
            t.name_matches = Some(names.as_ref().map_err(Clone::clone).map(|els| {
                els.iter()
                    .map(|el| match el {
                        Elem::Name(n) | Elem::NameValue(n, _) => n.to_string(),
                        Elem::Instance(i) => format!(
                            "instance with {}",
                            i.attributes.keys().cloned().collect::<Vec<_>>().join(",")
                        ),
                    })
                    .collect()
            }));
        }
        let names = names?;
        matched = !names.is_empty();
        elems.extend(names);
    }
    Ok(matched.then_some(elems))
}

/// The flag and attribute part of `MatchMulti`: each expression must match in the flags or in
/// the attributes; `DoesNotExist` must hold in both.
fn match_flags_attrs<'a>(
    exprs: &'a [Expr],
    flags: Option<&'a BTreeMap<String, Nil>>,
    attrs: Option<&'a BTreeMap<String, String>>,
    mut trace: Option<&mut TermTrace>,
) -> Result<(bool, Vec<Elem<'a>>), String> {
    let mut matched = flags.is_some() || attrs.is_some();
    let mut elems = Vec::new();
    let mut error: Option<String> = None;
    if matched {
        for (i, e) in exprs.iter().enumerate() {
            let (mut mk, mut mv, mut failed, mut errored) = (false, false, false, false);
            if let Some(keys) = flags {
                let input = if keys.contains_key(&e.key) {
                    Input::Flag
                } else {
                    Input::Absent
                };
                let r = e.eval(input);
                if trace.is_some() {
                    let hint = closest_name(&e.key, input, keys.keys());
                    record(&mut trace, i, "flag", input, &r, hint);
                }
                match r {
                    Ok(true) => {
                        mk = true;
                        elems.push(Elem::Name(e.key.as_str()));
                    }
                    Ok(false) => failed = e.op == Op::DoesNotExist,
                    Err(x) => {
                        errored = true;
                        error.get_or_insert(x);
                    }
                }
            }
            if !failed
                && !errored
                && let Some(values) = attrs
            {
                let input = values
                    .get(&e.key)
                    .map_or(Input::Absent, |v| Input::Value(v.as_str()));
                let r = e.eval(input);
                if trace.is_some() {
                    let hint = closest_name(&e.key, input, values.keys());
                    record(&mut trace, i, "attribute", input, &r, hint);
                }
                match r {
                    Ok(true) => {
                        mv = true;
                        let v = values.get(&e.key).map_or("", String::as_str);
                        elems.push(Elem::NameValue(e.key.as_str(), v));
                    }
                    Ok(false) => failed = e.op == Op::DoesNotExist,
                    Err(x) => {
                        errored = true;
                        error.get_or_insert(x);
                    }
                }
            }
            if errored {
                continue;
            }
            if failed || (!mk && !mv) {
                matched = false;
                if trace.is_none() {
                    break;
                }
            }
        }
    }
    if let Some(t) = trace {
        t.kv_matched = matched && error.is_none();
    }
    if !matched {
        return Ok((false, Vec::new()));
    }
    if let Some(e) = error {
        return Err(e);
    }
    elems.sort_by(|a, b| a.sort_name().cmp(b.sort_name()));
    Ok((true, elems))
}

fn record(
    trace: &mut Option<&mut TermTrace>,
    expr: usize,
    source: &'static str,
    input: Input<'_>,
    r: &Result<bool, String>,
    closest: Option<String>,
) {
    if let Some(t) = trace.as_deref_mut() {
        t.kv.push(ExprTrace {
            closest,
            expr,
            source,
            seen: Seen::of(input),
            outcome: r.clone(),
        });
    }
}

/// The instance part of `MatchMulti`: an instance matches when every expression matches on
/// it; an error on an instance that no expression rejects fails the whole term.
fn match_instances<'a, 'f: 'a>(
    term: &Term,
    exprs: &[Expr],
    insts: Option<&'f [Instance]>,
    index: &mut Index<'f>,
    collect: bool,
    mut trace: Option<&mut TermTrace>,
) -> Result<(bool, Vec<Elem<'a>>), String> {
    let Some(insts) = insts else {
        return Ok((false, Vec::new()));
    };
    if trace.is_none() {
        return match_columns(term, exprs, insts, index, collect);
    }
    let mut elems = Vec::new();
    let mut check = |i: usize, inst: &'f Instance| -> Result<(), String> {
        let mut error = None;
        let mut ok = true;
        let mut traces = Vec::new();
        for (n, e) in exprs.iter().enumerate() {
            let input = inst
                .attributes
                .get(e.key.as_str())
                .map_or(Input::Absent, |v| Input::Value(v.as_str()));
            let r = e.eval(input);
            if trace.is_some() {
                traces.push(ExprTrace {
                    expr: n,
                    source: "instance",
                    seen: Seen::of(input),
                    outcome: r.clone(),
                    closest: closest_name(&e.key, input, inst.attributes.keys()),
                });
            }
            match r {
                Ok(true) => {}
                Ok(false) => {
                    ok = false;
                    if trace.is_none() {
                        break;
                    }
                }
                Err(x) => {
                    error.get_or_insert(x);
                }
            }
        }
        let outcome = match (ok, error) {
            (false, _) => Ok(false),
            (true, Some(e)) => Err(e),
            (true, None) => Ok(true),
        };
        if let Some(t) = trace.as_deref_mut() {
            t.instance_results.push(InstanceTrace {
                index: i,
                outcome: outcome.clone(),
                exprs: traces,
            });
        }
        if outcome? {
            elems.push(Elem::Instance(inst));
        }
        Ok(())
    };
    let mut first_error = None;
    let mut run = |i: usize, inst: &'f Instance| {
        if let Err(e) = check(i, inst) {
            first_error.get_or_insert(e);
        }
    };
    insts.iter().enumerate().for_each(|(i, inst)| run(i, inst));
    if let Some(e) = first_error {
        return Err(e);
    }
    Ok((!elems.is_empty(), elems))
}

/// The instance part of `MatchMulti` without a trace, over the feature's columns: the same
/// outcome as looking at every instance. An instance matches when every expression is true on
/// it; it fails when one is false (a failure winning over an error, as everywhere here); else
/// an expression erred on it and the term fails with the first such error in instance order.
/// Without `collect` (no template needs the matched instances) it stops at the first match
/// when no instance can err, since the rest cannot change the outcome then.
fn match_columns<'a, 'f: 'a>(
    term: &Term,
    exprs: &[Expr],
    insts: &'f [Instance],
    index: &mut Index<'f>,
    collect: bool,
) -> Result<(bool, Vec<Elem<'a>>), String> {
    index.prepare(&term.lookup, exprs, insts);
    let Index {
        columns,
        outcomes,
        errors,
    } = index;
    let cols = &columns[term.lookup.as_str()];
    errors.clear();
    if outcomes.len() < exprs.len() {
        outcomes.resize_with(exprs.len(), Vec::new);
    }
    let mut codes: Vec<&[u32]> = Vec::with_capacity(exprs.len());
    let mut may_err = false;
    for (e, out) in exprs.iter().zip(outcomes.iter_mut()) {
        let col = &cols[e.key.as_str()];
        out.clear();
        let inputs = col
            .values
            .iter()
            .map(|v| Input::Value(v))
            .chain([Input::Absent]);
        for input in inputs {
            out.push(match e.eval(input) {
                Ok(true) => Outcome::True,
                Ok(false) => Outcome::False,
                Err(x) => {
                    errors.push(x);
                    may_err = true;
                    Outcome::Error((errors.len() - 1) as u32)
                }
            });
        }
        codes.push(&col.codes);
    }
    let outcomes = &outcomes[..exprs.len()];
    if !collect && !may_err && !exprs.is_empty() {
        let columns: Vec<&Column> = exprs.iter().map(|e| &cols[e.key.as_str()]).collect();
        return Ok((any_instance_true(outcomes, &columns), Vec::new()));
    }
    let mut matched = false;
    let mut elems = Vec::new();
    'instances: for (i, inst) in insts.iter().enumerate() {
        let mut error = None;
        for (out, codes) in outcomes.iter().zip(&codes) {
            match out[codes[i] as usize] {
                Outcome::True => {}
                Outcome::False => continue 'instances,
                Outcome::Error(n) => {
                    error.get_or_insert(n);
                }
            }
        }
        if let Some(n) = error {
            return Err(errors[n as usize].clone());
        }
        matched = true;
        if collect {
            elems.push(Elem::Instance(inst));
        } else if !may_err {
            break;
        }
    }
    Ok((matched, elems))
}

/// Whether one instance has every expression true, when no outcome is an error: the
/// instances of the expression true on the fewest are the candidates, each checked against the
/// others (a rule of `vendor In`, `device InRegexp` and `numa_node Gt` is true on a few dozen
/// of 2,000 functions, often on none).
fn any_instance_true(outcomes: &[Vec<Outcome>], columns: &[&Column]) -> bool {
    let true_count = |k: usize| -> usize {
        let (out, col) = (&outcomes[k], columns[k]);
        (0..out.len())
            .filter(|&c| out[c] == Outcome::True)
            .map(|c| (col.starts[c + 1] - col.starts[c]) as usize)
            .sum()
    };
    let counts: Vec<usize> = (0..outcomes.len()).map(true_count).collect();
    let Some((best, _)) = counts.iter().enumerate().min_by_key(|(_, n)| **n) else {
        return false;
    };
    let (out, col) = (&outcomes[best], columns[best]);
    for c in (0..out.len()).filter(|&c| out[c] == Outcome::True) {
        let members = &col.order[col.starts[c] as usize..col.starts[c + 1] as usize];
        for &i in members {
            let all = outcomes
                .iter()
                .zip(columns)
                .all(|(o, col)| o[col.codes[i as usize] as usize] == Outcome::True);
            if all {
                return true;
            }
        }
    }
    false
}

/// NFD's `MatchNamesMulti`: the expression applied to element names; instances match when
/// any of their attribute names does.
fn match_names<'a>(
    e: &Expr,
    flags: Option<&'a BTreeMap<String, Nil>>,
    attrs: Option<&'a BTreeMap<String, String>>,
    insts: Option<&'a [Instance]>,
) -> Result<Vec<Elem<'a>>, String> {
    let mut out = Vec::new();
    for k in flags.into_iter().flat_map(BTreeMap::keys) {
        if e.eval(Input::Value(k))? {
            out.push(Elem::Name(k.as_str()));
        }
    }
    for (k, v) in attrs.into_iter().flatten() {
        if e.eval(Input::Value(k))? {
            out.push(Elem::NameValue(k.as_str(), v.as_str()));
        }
    }
    out.sort_by(|a, b| a.sort_name().cmp(b.sort_name()));
    for inst in insts.into_iter().flatten() {
        let mut any = false;
        for k in inst.attributes.keys() {
            if e.eval(Input::Value(k))? {
                any = true;
            }
        }
        if any {
            out.push(Elem::Instance(inst));
        }
    }
    Ok(out)
}
