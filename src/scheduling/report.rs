//! `gpu-labeler match`: every workload against every node, the reasons in plain words and in
//! the scheduler's own, and hints for the labels this project writes.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::dra::{Dra, NodeVerdict, Why};
use super::draobjects::DraSet;
use super::fit::{Fit, Miss, Reason, fit, short_key};
use super::objects::{NodeInfo, Workload};
use crate::rules::LabelProducer;
use crate::validate::FEATURE_NS;

/// What writes the labels a workload may ask for: the loaded rules, and the built-in labels.
pub struct Producers {
    pub rules: Vec<LabelProducer>,
    /// Describes the built-in producer of a key, if any.
    pub builtin: fn(&str) -> Option<&'static str>,
}

impl Producers {
    /// Each producer of `key`, in words.
    fn describe(&self, key: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .rules
            .iter()
            .filter(|p| p.key == key)
            .map(|p| {
                let from = match p.value.strip_prefix('@') {
                    Some(attr) => format!("the value of {attr}"),
                    None => format!(
                        "\"{}\" when {} match(es)",
                        p.value,
                        if p.features.is_empty() {
                            "its terms".to_string()
                        } else {
                            p.features.join(", ")
                        }
                    ),
                };
                format!(
                    "rule {:?} of NodeFeatureRule {} ({}) writes {from}",
                    p.rule, p.object, p.location
                )
            })
            .collect();
        out.extend((self.builtin)(key).map(str::to_string));
        out
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|p| p.key.as_str())
    }
}

/// A hint about one label a workload asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    pub label: String,
    pub producers: Vec<String>,
    /// Where the nodes that miss stand (closest values, values seen, or a likely typo).
    pub near: String,
}

/// One workload against the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadReport {
    pub workload: Workload,
    pub nodes: Vec<(String, Fit)>,
    pub hints: Vec<Hint>,
    /// The nodes that fail only because of their GPUs' health (`gpu.health`,
    /// `gpu.healthy.count`, the health taint), each with what its labels say.
    pub health_only: Vec<(String, String)>,
    /// The nodes with devices under a DRA device taint, each device in words.
    pub device_taints: Vec<(String, Vec<String>)>,
    /// Per node (as `nodes`), the DRA allocator's verdict on each of the pod's claims; empty
    /// when the pod has none.
    pub dra: Vec<NodeVerdict>,
}

impl WorkloadReport {
    pub fn available(&self) -> usize {
        self.nodes.iter().filter(|(_, f)| f.fits()).count()
    }

    /// The scheduler's count: `0/40 nodes are available: 3 Insufficient nvidia.com/gpu, 37
    /// node(s) didn't match Pod's node affinity/selector.` (its reasons sorted as strings).
    pub fn summary(&self) -> String {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for (_, f) in &self.nodes {
            for r in f.scheduler_reasons() {
                *counts.entry(r).or_default() += 1;
            }
        }
        let mut reasons: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
        reasons.sort();
        let head = format!(
            "{}/{} nodes are available",
            self.available(),
            self.nodes.len()
        );
        if reasons.is_empty() {
            format!("{head}.")
        } else {
            format!("{head}: {}.", reasons.join(", "))
        }
    }
}

/// Evaluates every workload on every node; `dra`: the DRA objects (slices, classes, claims and
/// templates, of the cluster or `--dra` and of the workloads' file) the pods' claims are
/// allocated from.
pub fn match_fleet(
    workloads: Vec<Workload>,
    nodes: &[NodeInfo],
    producers: &Producers,
    dra: &DraSet,
) -> Vec<WorkloadReport> {
    let allocator = Dra::new(dra);
    workloads
        .into_iter()
        .map(|w| {
            let claims = super::dra::resolve::resolve(
                &w.pod.resource_claims,
                w.namespace.as_deref(),
                &[dra],
            );
            let mut verdicts = Vec::new();
            let fits: Vec<(String, Fit)> = nodes
                .iter()
                .map(|n| {
                    let mut f = fit(&w.pod, n);
                    if !claims.is_empty() {
                        let v = allocator.evaluate(n, &claims);
                        if let Some((c, why)) = v.first() {
                            // The request (or subrequest) it is of, where one is named.
                            let words =
                                match c.requests.iter().find(|r| r.why.as_ref() == Some(why)) {
                                    Some(r) => format!("request {}: {}", r.name, why.describe()),
                                    None => why.describe(),
                                };
                            f.reasons.push(Reason::Dra {
                                claim: c.name.clone(),
                                words,
                                scheduler: why.scheduler_text(
                                    c.source.split_once(' ').map_or(&c.name, |(_, n)| n),
                                ),
                            });
                        }
                        verdicts.push(v);
                    }
                    (n.name.clone(), f)
                })
                .collect();
            let hints = hints(&fits, producers);
            let health_only = nodes
                .iter()
                .zip(&fits)
                .filter(|(_, (_, f))| only_health(f))
                .map(|(n, _)| (n.name.clone(), health_words(n)))
                .collect();
            let device_taints = nodes
                .iter()
                .filter(|n| !n.device_taints.is_empty())
                .map(|n| {
                    let words = n.device_taints.iter().map(|t| t.describe()).collect();
                    (n.name.clone(), words)
                })
                .collect();
            WorkloadReport {
                workload: w,
                nodes: fits,
                hints,
                health_only,
                device_taints,
                dra: verdicts,
            }
        })
        .collect()
}

/// The labels of GPU health (rules/gpu.yaml).
fn is_health_label(key: &str) -> bool {
    key == crate::output::HEALTH_LABEL || key == crate::output::HEALTHY_COUNT_LABEL
}

/// A reason that is the node's GPU health: the health taint, or a health label the pod asks
/// for.
fn is_health(r: &Reason) -> bool {
    match r {
        Reason::Taint(t) => t.key == crate::output::HEALTH_TAINT,
        Reason::Selector { key, .. } => is_health_label(key),
        Reason::Term {
            failed: Some((req, _, _)),
            ..
        } => is_health_label(&req.key),
        _ => false,
    }
}

/// The node fails, and only because of its GPUs' health: with healthy GPUs it would fit.
pub fn only_health(f: &Fit) -> bool {
    !f.reasons.is_empty() && f.reasons.iter().all(is_health)
}

/// What a node's labels say of its GPUs' health: `gpu.health=degraded, 7 of 8 GPUs healthy`.
fn health_words(n: &NodeInfo) -> String {
    use crate::output::{COUNT_LABEL, HEALTH_LABEL, HEALTHY_COUNT_LABEL};
    let label = |k: &str| n.labels.get(k).map(String::as_str);
    let mut out = format!("gpu.health={}", label(HEALTH_LABEL).unwrap_or("(absent)"));
    if let (Some(h), Some(c)) = (label(HEALTHY_COUNT_LABEL), label(COUNT_LABEL)) {
        out.push_str(&format!(", {h} of {c} GPUs healthy"));
    }
    if let Some(t) = n
        .taints
        .iter()
        .find(|t| t.key == crate::output::HEALTH_TAINT)
    {
        out.push_str(&format!(", tainted {}={}:{}", t.key, t.value, t.effect));
    }
    out
}

/// What a failing node had for a label the workload asks for.
struct Seen<'a> {
    node: &'a str,
    operator: &'a str,
    bound: Option<i64>,
    miss: Miss,
}

fn hints(fits: &[(String, Fit)], producers: &Producers) -> Vec<Hint> {
    let mut by_key: BTreeMap<&str, Vec<Seen>> = BTreeMap::new();
    for (node, f) in fits {
        for r in &f.reasons {
            let (key, seen) = match r {
                Reason::Selector { key, have, .. } => (
                    key.as_str(),
                    Seen {
                        node,
                        operator: "=",
                        bound: None,
                        miss: have.clone().map_or(Miss::Absent, Miss::NotIn),
                    },
                ),
                Reason::Term {
                    failed: Some((req, false, miss)),
                    ..
                } => (
                    req.key.as_str(),
                    Seen {
                        node,
                        operator: &req.operator,
                        bound: req.values.first().and_then(|v| v.parse().ok()),
                        miss: miss.clone(),
                    },
                ),
                _ => continue,
            };
            by_key.entry(key).or_default().push(seen);
        }
    }
    let mut out = Vec::new();
    for (key, seen) in by_key {
        let described = producers.describe(key);
        let ours = key.starts_with(&format!("{FEATURE_NS}/")) || key.starts_with("nvidia.com/");
        if described.is_empty() && !ours {
            continue;
        }
        let near = if described.is_empty() {
            match closest_key(key, producers.keys()) {
                Some(k) => format!("no loaded rule writes this label; did you mean {k}?"),
                None => "no loaded rule writes this label".to_string(),
            }
        } else {
            near_misses(&seen)
        };
        out.push(Hint {
            label: key.to_string(),
            producers: described,
            near,
        });
    }
    out
}

/// The nodes closest to a `Gt`/`Lt` bound, or the values seen where another was wanted.
fn near_misses(seen: &[Seen]) -> String {
    let mut parts = Vec::new();
    let mut numeric: Vec<(i128, &str, &str)> = seen
        .iter()
        .filter_map(|s| match (&s.miss, s.bound) {
            (Miss::Compare(v), Some(b)) => {
                let n: i64 = v.parse().ok()?;
                let gap = (i128::from(b) - i128::from(n)).abs() + 1;
                Some((gap, s.node, v.as_str()))
            }
            _ => None,
        })
        .collect();
    numeric.sort();
    if !numeric.is_empty() {
        let op = seen.iter().find(|s| s.bound.is_some()).map(|s| s.operator);
        let bound = seen.iter().find_map(|s| s.bound).unwrap_or_default();
        let list: Vec<String> = numeric
            .iter()
            .take(3)
            .map(|(_, node, v)| format!("{node} ({v})"))
            .collect();
        let sign = if op == Some("Lt") { "<" } else { ">" };
        parts.push(format!("closest to {sign} {bound}: {}", list.join(", ")));
    }
    let mut values: BTreeMap<&str, usize> = BTreeMap::new();
    for s in seen {
        if let Miss::NotIn(v) | Miss::In(v) | Miss::Present(v) | Miss::NotInteger(v) = &s.miss {
            *values.entry(v).or_default() += 1;
        }
    }
    if !values.is_empty() {
        let mut list: Vec<(&str, usize)> = values.into_iter().collect();
        list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let shown: Vec<String> = list
            .iter()
            .take(5)
            .map(|(v, n)| format!("{v} ({n})"))
            .collect();
        parts.push(format!(
            "values on the nodes that miss: {}",
            shown.join(", ")
        ));
    }
    let absent = seen.iter().filter(|s| s.miss == Miss::Absent).count();
    if absent > 0 {
        parts.push(format!("absent on {absent} node(s)"));
    }
    parts.join("; ")
}

/// A key of the same namespace at edit distance 1 or 2 (a typo), the nearest first.
fn closest_key<'a>(key: &str, keys: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for k in keys {
        let d = crate::names::edit_distance(key, k);
        if d <= 2 && best.is_none_or(|(bd, bk)| (d, k) < (bd, bk)) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k)
}

fn title(w: &Workload) -> String {
    let name = match &w.namespace {
        Some(ns) => format!("{ns}/{}", w.name),
        None => w.name.clone(),
    };
    format!("{} {name} ({})", w.kind, w.location)
}

/// Left-aligned columns, two spaces apart, the last one unpadded.
pub fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The text report: per workload, a row per node (fits, and the first reason of a node that
/// does not), the scheduler's count, then the hints. Label keys in `feature.node.kubernetes.io/`
/// are shown without it.
pub fn render_text(reports: &[WorkloadReport]) -> String {
    let mut out = String::new();
    for (i, r) in reports.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&title(&r.workload));
        out.push('\n');
        let scored = !r.workload.pod.preferred.is_empty();
        let mut rows = vec![if scored {
            vec![
                "NODE".into(),
                "FITS".into(),
                "SCORE".into(),
                "REASON".into(),
            ]
        } else {
            vec!["NODE".into(), "FITS".into(), "REASON".into()]
        }];
        for (node, f) in &r.nodes {
            let mut row = vec![
                node.clone(),
                if f.fits() { "yes" } else { "no" }.to_string(),
            ];
            if scored {
                row.push(f.score.to_string());
            }
            let reason = match f.reasons.as_slice() {
                [] => String::new(),
                [one] => one.describe(true),
                [first, rest @ ..] => format!("{} (+{} more)", first.describe(true), rest.len()),
            };
            row.push(reason);
            rows.push(row);
        }
        out.push_str(&table(&rows));
        out.push_str(&r.summary());
        out.push('\n');
        for h in &r.hints {
            let mut line = format!("hint: {}: ", short_key(&h.label));
            if !h.producers.is_empty() {
                line.push_str(&h.producers.join("; "));
                if !h.near.is_empty() {
                    line.push_str("; ");
                }
            }
            line.push_str(&h.near);
            out.push_str(&line);
            out.push('\n');
        }
        for (node, words) in &r.health_only {
            out.push_str(&format!(
                "health: {node} fails only because of its GPUs' health ({words}); it fits once \
                 they are healthy\n"
            ));
        }
        for (node, devices) in &r.device_taints {
            for d in devices {
                out.push_str(&format!("dra: {node}: {d}\n"));
            }
        }
    }
    out
}

fn why_json(w: &Option<Why>) -> (Value, Value) {
    match w {
        Some(w) => (json!(w.code()), json!(w.describe())),
        None => (Value::Null, Value::Null),
    }
}

/// One node's DRA verdict: per claim, and per request the devices it got or why not.
fn dra_json(v: &NodeVerdict) -> Value {
    let claims: Vec<Value> = v
        .claims
        .iter()
        .map(|c| {
            let (code, reason) = why_json(&c.why);
            let requests: Vec<Value> = c
                .requests
                .iter()
                .map(|r| {
                    let (code, reason) = why_json(&r.why);
                    let mut v = json!({"request": r.name, "devices": r.devices, "code": code,
                           "reason": reason});
                    // A selector that matched no device: what each candidate device had.
                    if let Some(Why::Selector { seen, .. }) = &r.why {
                        v["candidates"] = seen
                            .iter()
                            .map(|(d, values)| json!({"device": d, "values": values}))
                            .collect();
                    }
                    v
                })
                .collect();
            json!({"name": c.name, "source": c.source, "allocatable": c.why.is_none(),
                   "code": code, "reason": reason, "requests": requests})
        })
        .collect();
    json!({"allocatable": v.fits(), "claims": claims})
}

/// Every reason of every node, for scripts.
pub fn render_json(reports: &[WorkloadReport]) -> String {
    let workloads: Vec<Value> = reports
        .iter()
        .map(|r| {
            let nodes: Vec<Value> = r
                .nodes
                .iter()
                .enumerate()
                .map(|(i, (name, f))| {
                    let reasons: Vec<Value> = f
                        .reasons
                        .iter()
                        .map(|x| {
                            json!({"plugin": x.plugin().name(), "reason": x.describe(false),
                                   "scheduler": x.scheduler_text()})
                        })
                        .collect();
                    let mut node = json!({"name": name, "fits": f.fits(), "score": f.score,
                           "reasons": reasons, "onlyGpuHealth": only_health(f)});
                    // Only for a pod with DRA claims.
                    if let Some(v) = r.dra.get(i) {
                        node["dra"] = dra_json(v);
                    }
                    node
                })
                .collect();
            let hints: Vec<Value> = r
                .hints
                .iter()
                .map(|h| json!({"label": h.label, "producers": h.producers, "near": h.near}))
                .collect();
            let tainted: serde_json::Map<String, Value> = r
                .device_taints
                .iter()
                .map(|(n, d)| (n.clone(), json!(d)))
                .collect();
            let mut out = json!({
                "kind": r.workload.kind,
                "name": r.workload.name,
                "namespace": r.workload.namespace,
                "location": r.workload.location,
                "available": r.available(),
                "total": r.nodes.len(),
                "summary": r.summary(),
                "nodes": nodes,
                "hints": hints,
            });
            // Only where a node has a device under a DRA device taint.
            if !tainted.is_empty() {
                out["deviceTaints"] = Value::Object(tainted);
            }
            out
        })
        .collect();
    serde_json::to_string_pretty(&json!({ "workloads": workloads })).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_is_within_two_edits_and_the_nearest_wins() {
        let keys = ["a/gpu.memory", "a/gpu.memory.max", "a/gpu.family"];
        assert_eq!(
            closest_key("a/gpu.memroy", keys.iter().copied()),
            Some("a/gpu.memory")
        );
        assert_eq!(closest_key("a/cpu.model", keys.iter().copied()), None);
        // A transposition is one edit (names::edit_distance).
        assert_eq!(
            closest_key("a/gpu.famliy", keys.iter().copied()),
            Some("a/gpu.family")
        );
    }
}
