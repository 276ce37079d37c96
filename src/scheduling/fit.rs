//! Whether a pod fits a node, exactly as kube-scheduler's filters decide it for the parts labels,
//! taints and capacity answer: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity
//! (`nodeSelector` and required `nodeAffinity`) and NodeResourcesFit (requests against
//! allocatable), in the scheduler's filter order, and the preferred terms' score
//! (`k8s.io/component-helpers/scheduling/corev1/nodeaffinity`, `pkg/scheduler/framework/plugins`).
//!
//! Not modelled: what other pods already use of the node, pod (anti-)affinity, topology spread,
//! volumes and ports. A node that fits here can still be full.

use super::objects::{NodeInfo, PodSpec, Quantity, Requirement, Taint, Term, Toleration};

/// The scheduler's filter plugins this models, in its filter order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Plugin {
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodeResourcesFit,
    DynamicResources,
}

impl Plugin {
    pub fn name(self) -> &'static str {
        match self {
            Plugin::NodeUnschedulable => "NodeUnschedulable",
            Plugin::NodeName => "NodeName",
            Plugin::TaintToleration => "TaintToleration",
            Plugin::NodeAffinity => "NodeAffinity",
            Plugin::NodeResourcesFit => "NodeResourcesFit",
            Plugin::DynamicResources => "DynamicResources",
        }
    }
}

/// Why one requirement did not match a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// The label is absent (`In`, `Exists`, `Gt`, `Lt`, a `nodeSelector` entry).
    Absent,
    /// Present with a value outside `values` (`In`, `nodeSelector`).
    NotIn(String),
    /// Present with a value inside `values` (`NotIn`).
    In(String),
    /// Present (`DoesNotExist`).
    Present(String),
    /// Present, an integer, on the wrong side (`Gt`, `Lt`).
    Compare(String),
    /// Present, not an integer (`Gt`, `Lt`).
    NotInteger(String),
    /// The requirement itself is invalid (the API server refuses it); it matches nothing.
    Invalid(String),
}

/// One reason a node does not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    Cordoned,
    NodeName(String),
    Taint(Taint),
    /// A `nodeSelector` entry.
    Selector {
        key: String,
        want: String,
        have: Option<String>,
    },
    /// `requiredDuringSchedulingIgnoredDuringExecution` without a `nodeSelectorTerm`: no node
    /// matches it (the API server refuses such a pod).
    NoTerms,
    /// A required term that did not match: its first requirement that did not (`None`: the
    /// term is empty and selects nothing). `index` counts from 1, of `terms`.
    Term {
        index: usize,
        terms: usize,
        failed: Option<(Requirement, bool, Miss)>,
    },
    Resource {
        name: String,
        need: Quantity,
        allocatable: Quantity,
    },
    /// A DRA claim that cannot be allocated here (src/scheduling/dra.rs), in words and in the
    /// scheduler's.
    Dra {
        claim: String,
        words: String,
        scheduler: String,
    },
}

impl Reason {
    pub fn plugin(&self) -> Plugin {
        match self {
            Reason::Cordoned => Plugin::NodeUnschedulable,
            Reason::NodeName(_) => Plugin::NodeName,
            Reason::Taint(_) => Plugin::TaintToleration,
            Reason::Selector { .. } | Reason::NoTerms | Reason::Term { .. } => Plugin::NodeAffinity,
            Reason::Resource { .. } => Plugin::NodeResourcesFit,
            Reason::Dra { .. } => Plugin::DynamicResources,
        }
    }

    /// The scheduler's own words for this reason, as its `FailedScheduling` event counts them.
    pub fn scheduler_text(&self) -> String {
        match self {
            Reason::Cordoned => "node(s) were unschedulable".into(),
            Reason::NodeName(_) => "node(s) didn't match the requested node name".into(),
            Reason::Taint(t) => format!("node(s) had untolerated taint {{{}: {}}}", t.key, t.value),
            Reason::Selector { .. } | Reason::NoTerms | Reason::Term { .. } => {
                "node(s) didn't match Pod's node affinity/selector".into()
            }
            Reason::Resource { name, .. } => format!("Insufficient {name}"),
            Reason::Dra { scheduler, .. } => scheduler.clone(),
        }
    }

    /// In plain words, with the values involved; `short` drops `feature.node.kubernetes.io/`
    /// from label keys.
    pub fn describe(&self, short: bool) -> String {
        let k = |key: &str| -> String {
            if short {
                short_key(key).to_string()
            } else {
                key.to_string()
            }
        };
        match self {
            Reason::Cordoned => "node is cordoned (spec.unschedulable)".into(),
            Reason::NodeName(n) => format!("the pod names node {n} (spec.nodeName)"),
            Reason::Taint(t) => {
                let value = if t.value.is_empty() {
                    String::new()
                } else {
                    format!("={}", t.value)
                };
                format!("taint {}{value}:{} not tolerated", t.key, t.effect)
            }
            Reason::Selector { key, want, have } => match have {
                None => format!("label {} absent (nodeSelector wants {want})", k(key)),
                Some(v) => format!("{}={v}, nodeSelector wants {want}", k(key)),
            },
            Reason::NoTerms => {
                "required node affinity has no nodeSelectorTerms: it selects no node".into()
            }
            Reason::Term {
                index,
                terms,
                failed,
            } => {
                let prefix = if *terms > 1 {
                    format!("term {index}/{terms}: ")
                } else {
                    String::new()
                };
                let Some((req, field, miss)) = failed else {
                    return format!("{prefix}an empty nodeSelectorTerm selects no node");
                };
                let what = match (*field, req.key.as_str()) {
                    (true, "metadata.name") => "node name".to_string(),
                    // Any other field is empty on a node (fields.Set has only the name).
                    (true, other) => format!("field {other}"),
                    (false, key) => k(key),
                };
                let list = format!("[{}]", req.values.join(", "));
                // A field other than the name is empty on a node.
                let shown = |v: &str| {
                    if v.is_empty() {
                        "\"\"".to_string()
                    } else {
                        v.to_string()
                    }
                };
                let one = req.values.first().map(String::as_str).unwrap_or_default();
                let text = match miss {
                    Miss::Absent => format!("label {what} absent"),
                    Miss::NotIn(v) if *field => format!("{what} {} is not in {list}", shown(v)),
                    Miss::In(v) if *field => format!("{what} {} is in {list}", shown(v)),
                    Miss::NotIn(v) => format!("{what}={v} is not in {list}"),
                    Miss::In(v) => format!("{what}={v} is in {list}"),
                    Miss::Present(v) => format!("label {what}={v} present (DoesNotExist)"),
                    Miss::Compare(v) => {
                        let op = if req.operator == "Gt" { ">" } else { "<" };
                        format!("{what}={v} is not {op} {one}")
                    }
                    Miss::NotInteger(v) => {
                        format!("{what}={v} is not an integer ({} {one})", req.operator)
                    }
                    Miss::Invalid(why) => format!("{what}: {why}"),
                };
                format!("{prefix}{text}")
            }
            Reason::Resource {
                name,
                need,
                allocatable,
            } => format!("needs {need} {name}, allocatable {allocatable}"),
            Reason::Dra { claim, words, .. } => format!("claim {claim}: {words}"),
        }
    }
}

/// A label key without `feature.node.kubernetes.io/` (the text output's form).
pub fn short_key(key: &str) -> &str {
    key.strip_prefix(crate::validate::FEATURE_NS)
        .and_then(|k| k.strip_prefix('/'))
        .unwrap_or(key)
}

/// How a pod fares on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fit {
    /// Every reason, in filter order (the scheduler stops at the first plugin that fails).
    pub reasons: Vec<Reason>,
    /// The sum of the weights of the preferred terms the node matches.
    pub score: i64,
}

impl Fit {
    pub fn fits(&self) -> bool {
        self.reasons.is_empty()
    }

    /// What the scheduler's event counts for this node: the reasons of the first plugin that
    /// failed (the first untolerated taint; every insufficient resource).
    pub fn scheduler_reasons(&self) -> Vec<String> {
        let Some(first) = self.reasons.first().map(Reason::plugin) else {
            return Vec::new();
        };
        let mut out: Vec<String> = Vec::new();
        for r in self.reasons.iter().filter(|r| r.plugin() == first) {
            let text = r.scheduler_text();
            if !out.contains(&text) {
                out.push(text);
            }
            if first == Plugin::TaintToleration {
                break;
            }
        }
        out
    }
}

/// Evaluates every filter (not stopping at the first) and the preferred score.
pub fn fit(pod: &PodSpec, node: &NodeInfo) -> Fit {
    let mut reasons = Vec::new();
    let unschedulable_taint = Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        value: String::new(),
        effect: "NoSchedule".into(),
    };
    if node.unschedulable && !tolerated(&pod.tolerations, &unschedulable_taint) {
        reasons.push(Reason::Cordoned);
    }
    if let Some(want) = &pod.node_name
        && *want != node.name
    {
        reasons.push(Reason::NodeName(want.clone()));
    }
    for t in &node.taints {
        if matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerated(&pod.tolerations, t)
        {
            reasons.push(Reason::Taint(t.clone()));
        }
    }
    for (key, want) in &pod.node_selector {
        match node.labels.get(key) {
            Some(v) if v == want => {}
            have => reasons.push(Reason::Selector {
                key: key.clone(),
                want: want.clone(),
                have: have.cloned(),
            }),
        }
    }
    if let Some(terms) = &pod.required {
        let misses: Vec<Option<_>> = terms.iter().map(|t| term_miss(t, node)).collect();
        // Terms are ORed: one that matches is enough; none at all matches no node.
        if terms.is_empty() {
            reasons.push(Reason::NoTerms);
        } else if !misses.iter().any(Option::is_none) {
            for (i, m) in misses.into_iter().enumerate() {
                reasons.push(Reason::Term {
                    index: i + 1,
                    terms: terms.len(),
                    failed: m.flatten(),
                });
            }
        }
    }
    for (name, need) in &pod.requests {
        if need.milli <= 0 {
            continue;
        }
        let have = node
            .allocatable
            .get(name)
            .cloned()
            .unwrap_or(Quantity { milli: 0 });
        if need.milli > have.milli {
            reasons.push(Reason::Resource {
                name: name.clone(),
                need: need.clone(),
                allocatable: have,
            });
        }
    }
    let score = pod
        .preferred
        .iter()
        .filter(|(_, t)| !t.is_empty() && term_miss(t, node).is_none())
        .map(|(w, _)| w)
        .sum();
    Fit { reasons, score }
}

/// `None` when the term matches; else `Some(None)` for an empty term, or the first requirement
/// that failed (and whether it is a field).
#[allow(clippy::option_option)]
fn term_miss(term: &Term, node: &NodeInfo) -> Option<Option<(Requirement, bool, Miss)>> {
    if term.is_empty() {
        return Some(None);
    }
    // A requirement that does not parse fails its whole term, wherever it stands in it
    // (nodeaffinity's parse errors), before any is matched.
    let invalid = term
        .expressions
        .iter()
        .map(|r| (r, false, requirement_invalid(r)))
        .chain(term.fields.iter().map(|r| (r, true, field_invalid(r))))
        .find_map(|(r, f, why)| why.map(|w| (r.clone(), f, Miss::Invalid(w))));
    if invalid.is_some() {
        return Some(invalid);
    }
    for r in &term.expressions {
        if let Some(miss) = label_miss(r, node.labels.get(&r.key).map(String::as_str)) {
            return Some(Some((r.clone(), false, miss)));
        }
    }
    // A node without a name has no fields, and its matchFields are not looked at.
    if node.name.is_empty() {
        return None;
    }
    for r in &term.fields {
        if let Some(miss) = field_miss(r, &node.name) {
            return Some(Some((r.clone(), true, miss)));
        }
    }
    None
}

/// Why `labels.NewRequirement` refuses a requirement (the scheduler's term then fails): an
/// operator it does not know, a key that is not a label key, a value that is not a label
/// value, values an operator does not take, or a `Gt`/`Lt` bound that is not one integer.
pub fn requirement_invalid(r: &Requirement) -> Option<String> {
    let values = &r.values;
    let op = r.operator.as_str();
    let shape = match op {
        "In" | "NotIn" if values.is_empty() => Some(format!("{op} needs at least one value")),
        "Exists" | "DoesNotExist" if !values.is_empty() => Some(format!("{op} takes no values")),
        "Gt" | "Lt" if values.len() != 1 || values[0].parse::<i64>().is_err() => Some(format!(
            "{op} needs exactly one integer value, not {values:?}"
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => None,
        other => Some(format!(
            "operator {other:?} is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt"
        )),
    };
    shape
        .or_else(|| {
            crate::validate::qualified_name(&r.key)
                .err()
                .map(|e| format!("{:?} is not a label key: {e}", r.key))
        })
        .or_else(|| {
            values.iter().find_map(|v| {
                crate::validate::label_value(v)
                    .err()
                    .map(|e| format!("{v:?} is not a label value: {e}"))
            })
        })
}

/// Why nodeaffinity refuses a `matchFields` requirement: `In` and `NotIn` only, with exactly
/// one value. Any key parses (only `metadata.name` is set on a node).
fn field_invalid(r: &Requirement) -> Option<String> {
    match r.operator.as_str() {
        "In" | "NotIn" if r.values.len() != 1 => {
            Some(format!("{} on a field needs exactly one value", r.operator))
        }
        "In" | "NotIn" => None,
        other => Some(format!("operator {other:?} on a field is not In or NotIn")),
    }
}

/// A label requirement, as `labels.NewRequirement` parses it and `Requirement.Matches`
/// decides it; `None` when it matches.
pub fn label_miss(r: &Requirement, have: Option<&str>) -> Option<Miss> {
    if let Some(why) = requirement_invalid(r) {
        return Some(Miss::Invalid(why));
    }
    let values = &r.values;
    match r.operator.as_str() {
        "In" => match have {
            None => Some(Miss::Absent),
            Some(v) if values.iter().any(|x| x == v) => None,
            Some(v) => Some(Miss::NotIn(v.to_string())),
        },
        "NotIn" => match have {
            Some(v) if values.iter().any(|x| x == v) => Some(Miss::In(v.to_string())),
            _ => None,
        },
        "Exists" => have.is_none().then_some(Miss::Absent),
        "DoesNotExist" => have.map(|v| Miss::Present(v.to_string())),
        "Gt" | "Lt" => {
            let bound: i64 = values[0].parse().unwrap_or_default();
            let Some(v) = have else {
                return Some(Miss::Absent);
            };
            let Ok(n) = v.parse::<i64>() else {
                return Some(Miss::NotInteger(v.to_string()));
            };
            let ok = if r.operator == "Gt" {
                n > bound
            } else {
                n < bound
            };
            (!ok).then(|| Miss::Compare(v.to_string()))
        }
        _ => None,
    }
}

/// A `matchFields` requirement, as nodeaffinity's field selector decides it over the node's
/// fields, which are only `metadata.name`: any other key reads as empty. `None` when it
/// matches.
fn field_miss(r: &Requirement, name: &str) -> Option<Miss> {
    if let Some(why) = field_invalid(r) {
        return Some(Miss::Invalid(why));
    }
    let have = if r.key == "metadata.name" { name } else { "" };
    match r.operator.as_str() {
        "In" => (r.values[0] != have).then(|| Miss::NotIn(have.to_string())),
        _ => (r.values[0] == have).then(|| Miss::In(have.to_string())),
    }
}

/// `Toleration.ToleratesTaint`: an empty effect tolerates every effect, an empty key (with
/// `Exists`) every key; `Equal` (the default) compares values, `Exists` does not.
fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        (t.effect.is_empty() || t.effect == taint.effect)
            && (t.key.is_empty() || t.key == taint.key)
            && match t.operator.as_str() {
                "" | "Equal" => t.value == taint.value,
                "Exists" => true,
                _ => false,
            }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
            pos: Default::default(),
        }
    }

    /// Kubernetes' documented semantics of each operator, with the label absent, and present
    /// with a value in, out of, or not comparable to the requirement.
    #[test]
    fn each_operator_as_kubernetes_documents_it() {
        type Case<'a> = (&'a str, &'a [&'a str], Option<&'a str>, Option<Miss>);
        let cases: &[Case] = &[
            ("In", &["a", "b"], Some("b"), None),
            ("In", &["a", "b"], Some("c"), Some(Miss::NotIn("c".into()))),
            ("In", &["a"], None, Some(Miss::Absent)),
            ("NotIn", &["a"], None, None),
            ("NotIn", &["a"], Some("b"), None),
            ("NotIn", &["a"], Some("a"), Some(Miss::In("a".into()))),
            ("Exists", &[], Some(""), None),
            ("Exists", &[], None, Some(Miss::Absent)),
            ("DoesNotExist", &[], None, None),
            (
                "DoesNotExist",
                &[],
                Some("x"),
                Some(Miss::Present("x".into())),
            ),
            ("Gt", &["40535"], Some("81559"), None),
            (
                "Gt",
                &["40535"],
                Some("40535"),
                Some(Miss::Compare("40535".into())),
            ),
            ("Gt", &["7"], Some("-1"), Some(Miss::Compare("-1".into()))),
            (
                "Gt",
                &["7"],
                Some("8.0"),
                Some(Miss::NotInteger("8.0".into())),
            ),
            ("Gt", &["7"], None, Some(Miss::Absent)),
            ("Lt", &["12"], Some("11"), None),
            ("Lt", &["12"], Some("12"), Some(Miss::Compare("12".into()))),
            (
                "Gt",
                &["7.5"],
                Some("8"),
                Some(Miss::Invalid(
                    "Gt needs exactly one integer value, not [\"7.5\"]".into(),
                )),
            ),
            (
                "In",
                &[],
                Some("8"),
                Some(Miss::Invalid("In needs at least one value".into())),
            ),
            (
                "Exists",
                &["x"],
                Some("8"),
                Some(Miss::Invalid("Exists takes no values".into())),
            ),
        ];
        for (op, values, have, want) in cases {
            assert_eq!(
                label_miss(&req("k", op, values), *have),
                *want,
                "{op} {values:?} on {have:?}"
            );
        }
    }

    /// The classes tests/scheduling_oracle.rs found against Kubernetes' nodeaffinity: a key or
    /// value `labels.NewRequirement` refuses fails its term (even where another requirement
    /// of it would already miss), a field other than `metadata.name` reads as empty, and no
    /// term at all selects no node.
    #[test]
    fn what_the_scheduler_cannot_parse_fails_and_no_term_selects_nothing() {
        let node = NodeInfo {
            name: "n1".into(),
            labels: [("k".to_string(), "5".to_string())].into(),
            ..NodeInfo::default()
        };
        let term = |exprs: Vec<Requirement>, fields: Vec<Requirement>| Term {
            expressions: exprs,
            fields,
            pos: Default::default(),
        };
        let pod = |terms: Vec<Term>| PodSpec {
            required: Some(terms),
            ..PodSpec::default()
        };
        let value_rule = "a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
        let cases: Vec<(PodSpec, Vec<Reason>)> = vec![
            (
                pod(vec![term(vec![req("k", "Gt", &["-1"])], vec![])]),
                vec![Reason::Term {
                    index: 1,
                    terms: 1,
                    failed: Some((
                        req("k", "Gt", &["-1"]),
                        false,
                        Miss::Invalid(format!("\"-1\" is not a label value: {value_rule}")),
                    )),
                }],
            ),
            (
                pod(vec![term(
                    vec![req("absent", "Exists", &[]), req("k", "In", &["5", "a/b"])],
                    vec![],
                )]),
                vec![Reason::Term {
                    index: 1,
                    terms: 1,
                    failed: Some((
                        req("k", "In", &["5", "a/b"]),
                        false,
                        Miss::Invalid(format!("\"a/b\" is not a label value: {value_rule}")),
                    )),
                }],
            ),
            (
                pod(vec![term(vec![req("-k", "DoesNotExist", &[])], vec![])]),
                vec![Reason::Term {
                    index: 1,
                    terms: 1,
                    failed: Some((
                        req("-k", "DoesNotExist", &[]),
                        false,
                        Miss::Invalid("\"-k\" is not a label key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".into()),
                    )),
                }],
            ),
            // `metadata.namespace` is empty on a node: NotIn [x] matches, In [x] does not.
            (
                pod(vec![term(vec![], vec![req("metadata.namespace", "NotIn", &["x"])])]),
                vec![],
            ),
            (
                pod(vec![term(vec![], vec![req("metadata.namespace", "In", &["x"])])]),
                vec![Reason::Term {
                    index: 1,
                    terms: 1,
                    failed: Some((
                        req("metadata.namespace", "In", &["x"]),
                        true,
                        Miss::NotIn(String::new()),
                    )),
                }],
            ),
            (pod(vec![]), vec![Reason::NoTerms]),
        ];
        for (p, want) in cases {
            assert_eq!(fit(&p, &node).reasons, want, "{p:?}");
        }
    }

    #[test]
    fn tolerations_match_as_the_api_defines() {
        let taint = Taint {
            key: "nvidia.com/gpu".into(),
            value: "present".into(),
            effect: "NoSchedule".into(),
        };
        let tol = |k: &str, op: &str, v: &str, e: &str| Toleration {
            key: k.into(),
            operator: op.into(),
            value: v.into(),
            effect: e.into(),
            seconds: None,
        };
        let cases = [
            (tol("nvidia.com/gpu", "Exists", "", "NoSchedule"), true),
            (tol("nvidia.com/gpu", "Exists", "", ""), true),
            (tol("", "Exists", "", ""), true),
            (tol("nvidia.com/gpu", "", "present", "NoSchedule"), true),
            (tol("nvidia.com/gpu", "Equal", "true", "NoSchedule"), false),
            (tol("nvidia.com/gpu", "Exists", "", "NoExecute"), false),
            (tol("amd.com/gpu", "Exists", "", ""), false),
        ];
        for (t, want) in cases {
            assert_eq!(tolerated(std::slice::from_ref(&t), &taint), want, "{t:?}");
        }
    }
}
