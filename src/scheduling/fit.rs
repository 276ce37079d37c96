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
            Reason::Selector { .. } | Reason::Term { .. } => Plugin::NodeAffinity,
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
            Reason::Selector { .. } | Reason::Term { .. } => {
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
                let what = if *field {
                    "node name".to_string()
                } else {
                    k(&req.key)
                };
                let list = format!("[{}]", req.values.join(", "));
                let one = req.values.first().map(String::as_str).unwrap_or_default();
                let text = match miss {
                    Miss::Absent => format!("label {what} absent"),
                    Miss::NotIn(v) if *field => format!("node name {v} is not in {list}"),
                    Miss::In(v) if *field => format!("node name {v} is in {list}"),
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
        // Terms are ORed: one that matches is enough.
        if !misses.iter().any(Option::is_none) {
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
    for r in &term.expressions {
        if let Some(miss) = label_miss(r, node.labels.get(&r.key).map(String::as_str)) {
            return Some(Some((r.clone(), false, miss)));
        }
    }
    for r in &term.fields {
        if let Some(miss) = field_miss(r, &node.name) {
            return Some(Some((r.clone(), true, miss)));
        }
    }
    None
}

/// A label requirement, as `labels.Requirement.Matches` decides it; `None` when it matches.
pub fn label_miss(r: &Requirement, have: Option<&str>) -> Option<Miss> {
    let values = &r.values;
    let invalid = |why: &str| Some(Miss::Invalid(format!("{} {why}", r.operator)));
    match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => invalid("needs at least one value"),
        "Exists" | "DoesNotExist" if !values.is_empty() => invalid("takes no values"),
        "Gt" | "Lt" if values.len() != 1 || values[0].parse::<i64>().is_err() => {
            invalid("needs exactly one integer value")
        }
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
        other => Some(Miss::Invalid(format!(
            "operator {other:?} is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt"
        ))),
    }
}

/// A `matchFields` requirement: only `metadata.name` with `In` or `NotIn` exists.
fn field_miss(r: &Requirement, name: &str) -> Option<Miss> {
    if r.key != "metadata.name" {
        return Some(Miss::Invalid(format!(
            "matchFields supports only metadata.name, not {}",
            r.key
        )));
    }
    match r.operator.as_str() {
        "In" | "NotIn" if r.values.len() != 1 => Some(Miss::Invalid(format!(
            "{} on metadata.name needs exactly one value",
            r.operator
        ))),
        "In" => (r.values[0] != name).then(|| Miss::NotIn(name.to_string())),
        "NotIn" => (r.values[0] == name).then(|| Miss::In(name.to_string())),
        other => Some(Miss::Invalid(format!(
            "operator {other:?} on metadata.name is not In or NotIn"
        ))),
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
                Some(Miss::Invalid("Gt needs exactly one integer value".into())),
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
