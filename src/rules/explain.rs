//! `gpu-labeler explain`: why each rule did or did not produce its labels.
//!
//! The rule set is evaluated exactly as `evaluate` does (same order, same `rule.matched`
//! feedback, same post-processing with the default label policy), with every term and element
//! recorded. The report shows, per rule: matched or not; per term: whether the feature exists
//! and what kinds it has; per expression: the value it saw on each flag, attribute or instance
//! and the outcome (match, no match, error with the reason); and the labels the rule produced,
//! with any that were rejected or overridden by a later rule.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::eval::{CompiledRule, ExprTrace, MatcherTrace, RuleOutput, Seen, Term, TermTrace};
use super::expression::Expr;
use super::ruleset::{Evaluation, OutputKind, RuleRecord, RuleSet, namespaced};
use crate::config::LabelPolicy;
use crate::features::FeatureSet;
use crate::names::closest;
use crate::validate::{FEATURE_NS, add_namespace};

/// How many instances are listed per term before the rest is summarised.
const MAX_INSTANCES: usize = 20;

/// A human-readable report of how every rule (or only the rules named `rule`, by rule name or
/// `object/rule`) evaluates over the features.
pub fn explain(set: &RuleSet, features: &FeatureSet, rule: Option<&str>) -> String {
    let mut records = Vec::new();
    let eval = set.run(features, &LabelPolicy::default(), Some(&mut records));
    let mut out = String::new();
    let selected = |obj: &str, r: &str| match rule {
        None => true,
        Some(want) => want == r || want == format!("{obj}/{r}"),
    };
    let chosen: Vec<&RuleRecord> = records
        .iter()
        .filter(|rec| {
            let o = &set.objects[rec.object];
            selected(&o.name, &o.rules[rec.rule].name)
        })
        .collect();
    if chosen.is_empty() {
        match rule {
            Some(want) => {
                let names: Vec<String> = set
                    .objects
                    .iter()
                    .flat_map(|o| {
                        o.rules
                            .iter()
                            .map(move |r| format!("{}/{}", o.name, r.name))
                    })
                    .collect();
                let hint = closest(want, names.iter().map(String::as_str))
                    .or_else(|| {
                        closest(
                            want,
                            set.objects
                                .iter()
                                .flat_map(|o| o.rules.iter().map(|r| r.name.as_str())),
                        )
                    })
                    .map(|n| format!(" Did you mean {n:?}?"))
                    .unwrap_or_default();
                let _ = writeln!(out, "No rule named {want:?}.{hint}");
                if names.is_empty() {
                    let _ = writeln!(out, "No rules are loaded.");
                } else {
                    let _ = writeln!(out, "Rules, in evaluation order:");
                    for n in names {
                        let _ = writeln!(out, "  {n}");
                    }
                }
            }
            None => {
                let _ = writeln!(out, "No rules are loaded.");
            }
        }
        return out;
    }

    let winners = label_winners(&records);
    sections(&mut out, set, features, &chosen, &eval, &winners);
    let matched = chosen
        .iter()
        .filter(|r| matches!(r.result, Ok(Some(_))))
        .count();
    let failed = chosen.iter().filter(|r| r.result.is_err()).count();
    let _ = writeln!(
        out,
        "{} rule(s): {matched} matched, {} did not match, {failed} failed.",
        chosen.len(),
        chosen.len() - matched - failed
    );
    if rule.is_none() {
        let _ = writeln!(out, "Labels: {}", eval.output.labels.len());
        for (k, v) in &eval.output.labels {
            let _ = writeln!(out, "  {k}={v}");
        }
    }
    out
}

/// The rules that can give the label `key` (namespaced), explained as `explain` explains them,
/// evaluated with `policy`: those whose `labels` name it and those whose output holds it (empty
/// when none can). Second, `object/rule` of each rule with a `labelsTemplate` that did not
/// match: its keys are known only when it does.
pub fn explain_label_rules(
    set: &RuleSet,
    features: &FeatureSet,
    policy: &LabelPolicy,
    key: &str,
) -> (String, Vec<String>) {
    let mut records = Vec::new();
    let eval = set.run(features, policy, Some(&mut records));
    let mut templates = Vec::new();
    let chosen: Vec<&RuleRecord> = records
        .iter()
        .filter(|rec| {
            let obj = &set.objects[rec.object];
            let rule = &obj.rules[rec.rule];
            let map: BTreeMap<String, String> = rule.labels.iter().cloned().collect();
            let names = namespaced(&map, FEATURE_NS).iter().any(|(k, _)| k == key);
            let gave = match &rec.result {
                Ok(Some(o)) => namespaced(&o.labels, FEATURE_NS)
                    .iter()
                    .any(|(k, _)| k == key),
                _ => false,
            };
            if !names
                && !gave
                && rule.labels_template.is_some()
                && !matches!(rec.result, Ok(Some(_)))
            {
                templates.push(format!("{}/{}", obj.name, rule.name));
            }
            names || gave
        })
        .collect();
    let mut out = String::new();
    sections(
        &mut out,
        set,
        features,
        &chosen,
        &eval,
        &label_winners(&records),
    );
    (out, templates)
}

fn sections(
    out: &mut String,
    set: &RuleSet,
    features: &FeatureSet,
    chosen: &[&RuleRecord],
    eval: &Evaluation,
    winners: &BTreeMap<String, (usize, usize)>,
) {
    let mut current_object = None;
    for rec in chosen {
        let obj = &set.objects[rec.object];
        if current_object != Some(rec.object) {
            current_object = Some(rec.object);
            let _ = writeln!(out, "NodeFeatureRule {:?} ({})", obj.name, obj.source);
        }
        let rule = &obj.rules[rec.rule];
        let status = match &rec.result {
            Ok(Some(_)) => "MATCHED".to_string(),
            Ok(None) => "not matched".to_string(),
            Err(e) => {
                format!("FAILED: {e} (the rule produced nothing; the other rules still apply)")
            }
        };
        let _ = writeln!(
            out,
            "  rule {:?} ({}): {status}",
            rule.name,
            obj.location(rule)
        );
        explain_rule(out, rule, rec, features);
        if let Ok(Some(output)) = &rec.result {
            explain_output(out, (&obj.name, &rule.name), rec, output, eval, winners);
        }
        out.push('\n');
    }
}

/// For each namespaced label key, the record index of the rule whose value is the final one.
fn label_winners(records: &[RuleRecord]) -> BTreeMap<String, (usize, usize)> {
    let mut w = BTreeMap::new();
    for rec in records {
        if let Ok(Some(out)) = &rec.result {
            for k in namespaced(&out.labels, FEATURE_NS)
                .into_iter()
                .map(|(k, _)| k)
            {
                w.insert(k, (rec.object, rec.rule));
            }
        }
    }
    w
}

fn explain_rule(out: &mut String, rule: &CompiledRule, rec: &RuleRecord, features: &FeatureSet) {
    if rule.match_any.is_empty() && rule.match_features.is_empty() {
        let _ = writeln!(
            out,
            "    no matchFeatures or matchAny: the rule always matches"
        );
        return;
    }
    for (i, terms) in rule.match_any.iter().enumerate() {
        let _ = write!(out, "    matchAny[{i}] (one element must match): ");
        match rec.trace.match_any.get(i).and_then(Option::as_ref) {
            Some(mt) => explain_matcher(out, terms, mt, "      ", features),
            None => {
                let _ = writeln!(
                    out,
                    "not evaluated (an earlier matchAny element matched, or the rule failed)"
                );
            }
        }
    }
    if !rule.match_features.is_empty() {
        let _ = write!(out, "    matchFeatures (all terms must match): ");
        match &rec.trace.match_features {
            Some(mt) => explain_matcher(out, &rule.match_features, mt, "      ", features),
            None => {
                let _ = writeln!(
                    out,
                    "not evaluated (no matchAny element matched, or the rule failed)"
                );
            }
        }
    }
}

fn outcome_word(o: &Option<Result<bool, String>>) -> String {
    match o {
        Some(Ok(true)) => "matched".to_string(),
        Some(Ok(false)) | None => "not matched".to_string(),
        Some(Err(e)) => format!("error: {e}"),
    }
}

fn explain_matcher(
    out: &mut String,
    terms: &[Term],
    mt: &MatcherTrace,
    indent: &str,
    features: &FeatureSet,
) {
    let _ = writeln!(out, "{}", outcome_word(&mt.outcome));
    for (i, (term, tt)) in terms.iter().zip(&mt.terms).enumerate() {
        explain_term(out, i, term, tt, indent, features);
    }
}

fn explain_term(
    out: &mut String,
    i: usize,
    term: &Term,
    tt: &TermTrace,
    indent: &str,
    features: &FeatureSet,
) {
    let mut kinds = Vec::new();
    if let Some(n) = tt.flags {
        kinds.push(format!("{n} flag(s)"));
    }
    if let Some(n) = tt.attributes {
        kinds.push(format!("{n} attribute(s)"));
    }
    if let Some(n) = tt.instances {
        kinds.push(format!("{n} instance(s)"));
    }
    let at = if term.pos.is_known() {
        format!(" (line {})", term.pos.line)
    } else {
        String::new()
    };
    if kinds.is_empty() {
        let _ = writeln!(
            out,
            "{indent}term {}{at}: feature {:?}: not present on this node -> not matched",
            i + 1,
            term.feature
        );
        return;
    }
    let _ = writeln!(
        out,
        "{indent}term {}{at}: feature {:?} ({}): {}",
        i + 1,
        term.feature,
        kinds.join(", "),
        outcome_word(&tt.outcome)
    );
    let inner = format!("{indent}  ");
    if let Some(exprs) = &term.exprs {
        if exprs.is_empty() {
            let _ = writeln!(
                out,
                "{inner}matchExpressions is empty: matches when the feature has any element"
            );
        }
        if tt.flags.is_some() || tt.attributes.is_some() {
            for e in &tt.kv {
                if let Some(expr) = exprs.get(e.expr) {
                    let _ = writeln!(out, "{inner}{}", expr_line(&term.feature, expr, e, None));
                    // A gpu.node attribute derived from every GPU: why it is not there.
                    if matches!(e.seen, Seen::Absent)
                        && term.feature == crate::discover::gpu::GPU_NODE
                        && let Some(why) =
                            crate::discover::gpu::node_absent_because(features, &expr.key)
                    {
                        let _ = writeln!(out, "{inner}  ({}.{}: {why})", term.feature, expr.key);
                    }
                    // The node's health: which GPU has which fault.
                    if matches!(e.seen, Seen::Value(_))
                        && term.feature == crate::discover::gpu::GPU_NODE
                        && matches!(expr.key.as_str(), "health" | "healthy_count")
                        && let Some(why) = crate::discover::health::node_because(features)
                    {
                        let _ = writeln!(out, "{inner}  ({}.{}: {why})", term.feature, expr.key);
                        // Where a DRA driver publishes the faulty GPUs: the device taint that
                        // takes each out of allocation (docs/taints.md#device-taints).
                        for line in crate::dra::taints::explain_lines(features) {
                            let _ = writeln!(out, "{inner}  ({line})");
                        }
                    }
                }
            }
            if !exprs.is_empty() {
                let _ = writeln!(
                    out,
                    "{inner}flags/attributes: {}",
                    if tt.kv_matched {
                        "all expressions hold"
                    } else {
                        "no match"
                    }
                );
            }
        }
        if let Some(total) = tt.instances {
            explain_instances(out, term, exprs, tt, total, &inner);
        }
    }
    if let Some(e) = &term.name_expr {
        let _ = write!(out, "{inner}matchName {}: ", e.describe());
        match &tt.name_matches {
            None => {
                let _ = writeln!(out, "not evaluated (matchExpressions did not match)");
            }
            Some(Ok(names)) if names.is_empty() => {
                let _ = writeln!(out, "no element name matched -> not matched");
            }
            Some(Ok(names)) => {
                let _ = writeln!(out, "matched {}", names.join(", "));
            }
            Some(Err(err)) => {
                let _ = writeln!(out, "error: {err}");
            }
        }
    }
}

fn explain_instances(
    out: &mut String,
    term: &Term,
    exprs: &[Expr],
    tt: &TermTrace,
    total: usize,
    indent: &str,
) {
    let matched = tt
        .instance_results
        .iter()
        .filter(|r| r.outcome == Ok(true))
        .count();
    let errors = tt
        .instance_results
        .iter()
        .filter(|r| r.outcome.is_err())
        .count();
    let _ = writeln!(
        out,
        "{indent}instances: {matched} of {total} matched{}",
        if errors > 0 {
            format!(", {errors} with errors")
        } else {
            String::new()
        }
    );
    // Matches first, then errors, then the misses, each in instance order.
    let mut ordered: Vec<_> = tt.instance_results.iter().collect();
    ordered.sort_by_key(|r| match r.outcome {
        Ok(true) => 0,
        Err(_) => 1,
        Ok(false) => 2,
    });
    for r in ordered.iter().take(MAX_INSTANCES) {
        let (verdict, shown): (&str, Vec<&ExprTrace>) = match &r.outcome {
            Ok(true) => ("matched", r.exprs.iter().collect()),
            Ok(false) => (
                "no",
                r.exprs.iter().filter(|e| e.outcome != Ok(true)).collect(),
            ),
            Err(_) => (
                "error",
                r.exprs.iter().filter(|e| e.outcome.is_err()).collect(),
            ),
        };
        let parts: Vec<String> = shown
            .iter()
            .filter_map(|e| {
                exprs
                    .get(e.expr)
                    .map(|x| expr_line(&term.feature, x, e, Some(r.index)))
            })
            .collect();
        let _ = writeln!(
            out,
            "{indent}  {}[{}]: {verdict}: {}",
            term.feature,
            r.index,
            parts.join("; ")
        );
    }
    if ordered.len() > MAX_INSTANCES {
        let _ = writeln!(
            out,
            "{indent}  ... {} more instance(s) not shown",
            ordered.len() - MAX_INSTANCES
        );
    }
}

/// `pci.device[3].class = "0302": class In ["0300"] -> no`
fn expr_line(feature: &str, expr: &Expr, t: &ExprTrace, instance: Option<usize>) -> String {
    let place = match instance {
        Some(i) => format!("{feature}[{i}].{}", expr.key),
        None => format!("{feature}.{}", expr.key),
    };
    let hint = t
        .closest
        .as_ref()
        .map(|c| format!(" (did you mean {c:?}?)"))
        .unwrap_or_default();
    let seen = match (&t.seen, t.source) {
        (Seen::Absent, "flag") => format!("{place}: no such flag{hint}"),
        (Seen::Absent, _) => format!("{place}: absent{hint}"),
        (Seen::Flag, _) => format!("{place}: flag present"),
        (Seen::Value(v), _) => format!("{place} = {v:?}"),
    };
    let verdict = match &t.outcome {
        Ok(true) => "yes".to_string(),
        Ok(false) => match (&t.seen, t.source) {
            (Seen::Absent, _) if !matches!(expr.op, super::expression::Op::Exists) => {
                "no (the element is absent)".to_string()
            }
            (Seen::Flag, _) => {
                "no (a flag has no value; only Exists/DoesNotExist apply)".to_string()
            }
            _ => "no".to_string(),
        },
        Err(e) => format!("error: {e}"),
    };
    format!("{seen}: {} -> {verdict}", expr.describe())
}

fn explain_output(
    out: &mut String,
    (object, rule): (&str, &str),
    rec: &RuleRecord,
    output: &RuleOutput,
    eval: &Evaluation,
    winners: &BTreeMap<String, (usize, usize)>,
) {
    let me = (rec.object, rec.rule);
    let rejected = |kind: OutputKind, key: &str| {
        eval.rejected
            .iter()
            .find(|r| r.kind == kind && r.key == key && r.object == object && r.rule == rule)
    };
    let mut labels = namespaced(&output.labels, FEATURE_NS);
    labels.sort();
    if labels.is_empty()
        && output.vars.is_empty()
        && output.annotations.is_empty()
        && output.extended_resources.is_empty()
        && output.taints.is_empty()
    {
        let _ = writeln!(out, "    produced nothing");
        return;
    }
    for (k, v) in labels {
        let note = if winners.get(&k) != Some(&me) {
            " (overridden by a later rule)".to_string()
        } else if let Some(r) = rejected(OutputKind::Label, &k) {
            format!(" REJECTED: {}", r.reason)
        } else {
            match eval.output.labels.get(&k) {
                Some(fin) if *fin != v => format!(" (published as {k}={fin})"),
                _ => String::new(),
            }
        };
        let _ = writeln!(out, "    label {k}={v}{note}");
    }
    for (k, v) in &output.vars {
        let _ = writeln!(out, "    var {k}={v} (rule.matched only)");
    }
    for (k, v) in &output.annotations {
        let key = add_namespace(k, FEATURE_NS);
        let note = rejected(OutputKind::Annotation, &key)
            .map(|r| format!(" REJECTED: {}", r.reason))
            .unwrap_or_default();
        let _ = writeln!(out, "    annotation {key}={v}{note}");
    }
    for (k, v) in &output.extended_resources {
        let key = add_namespace(k, FEATURE_NS);
        let note = rejected(OutputKind::ExtendedResource, &key)
            .map(|r| format!(" REJECTED: {}", r.reason))
            .unwrap_or_default();
        let _ = writeln!(out, "    extended resource {key}={v}{note}");
    }
    for t in &output.taints {
        let note = rejected(OutputKind::Taint, &t.key)
            .map(|r| format!(" REJECTED: {}", r.reason))
            .unwrap_or_default();
        let _ = writeln!(out, "    taint {}={}:{}{note}", t.key, t.value, t.effect);
    }
}
