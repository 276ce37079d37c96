//! `gpu-labeler diff --template FILE`: the live nodes of a group against their template. A
//! node differs when a label of the template is missing or has another value, an extended
//! resource has another quantity in its allocatable, or a taint of the template is absent.
//! What a node has beyond the template (the kubelet's labels, other agents' labels) is not a
//! difference.

use serde::Serialize;

use super::Template;
use crate::scheduling::inventory::Short;
use crate::scheduling::objects::NodeInfo;

/// Where a difference is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Field {
    Label,
    Resource,
    Taint,
}

/// One difference of one node: the template's value and the node's (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    pub field: Field,
    pub key: String,
    pub template: Option<String>,
    pub node: Option<String>,
}

/// A node and what differs on it (empty: it matches).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeDiff {
    pub node: String,
    pub differences: Vec<Difference>,
}

/// Reads a template as `template -o json` writes it; an error names the file, line and column.
pub fn read_template(source: &str, text: &str) -> Result<Template, String> {
    serde_json::from_str(text).map_err(|e| {
        format!(
            "{source}:{}:{}: not a template as `template -o json` writes it: {e}",
            e.line(),
            e.column()
        )
    })
}

fn quantity(q: &str) -> Option<i128> {
    crate::validate::quantity_milli(q).ok()
}

/// Every node against the template, in the nodes' order.
pub fn diff(template: &Template, nodes: &[NodeInfo]) -> Vec<NodeDiff> {
    let resources: Vec<(&String, &String, Option<i128>)> = template
        .resources
        .iter()
        .map(|(k, v)| (k, v, quantity(v)))
        .collect();
    nodes
        .iter()
        .map(|n| {
            let mut d = Vec::new();
            for (k, v) in &template.labels {
                let got = n.labels.get(k);
                if got != Some(v) {
                    d.push(Difference {
                        field: Field::Label,
                        key: k.clone(),
                        template: Some(v.clone()),
                        node: got.cloned(),
                    });
                }
            }
            for (k, v, milli) in &resources {
                let got = n.allocatable.get(*k);
                if got.map(|q| Some(q.milli)) != Some(*milli) {
                    d.push(Difference {
                        field: Field::Resource,
                        key: (*k).clone(),
                        template: Some((*v).clone()),
                        node: got.map(ToString::to_string),
                    });
                }
            }
            for t in &template.taints {
                let on = n
                    .taints
                    .iter()
                    .find(|x| x.key == t.key && x.effect == t.effect);
                if on.is_none_or(|x| x.value != t.value) {
                    d.push(Difference {
                        field: Field::Taint,
                        key: format!("{}:{}", t.key, t.effect),
                        template: Some(t.value.clone()),
                        node: on.map(|x| x.value.clone()),
                    });
                }
            }
            NodeDiff {
                node: n.name.clone(),
                differences: d,
            }
        })
        .collect()
}

fn shown(v: &Option<String>) -> String {
    match v {
        Some(v) => format!("{v:?}"),
        None => "absent".to_string(),
    }
}

/// One line per difference, `node NAME: label KEY: template "8", node "7"`, then a summary.
/// The template's differences, then the fleet's own (`short`: the nodes with fewer GPUs than
/// most of their instance type, `scheduling::inventory::short_nodes`), each node named.
pub fn render_text(diffs: &[NodeDiff], short: &[Short]) -> String {
    let mut out = String::new();
    for n in diffs {
        for d in &n.differences {
            let field = match d.field {
                Field::Label => "label",
                Field::Resource => "resource",
                Field::Taint => "taint",
            };
            out.push_str(&format!(
                "node {}: {field} {}: template {}, node {}\n",
                n.node,
                d.key,
                shown(&d.template),
                shown(&d.node)
            ));
        }
    }
    let differ = diffs.iter().filter(|n| !n.differences.is_empty()).count();
    out.push_str(&format!(
        "{differ} of {} node(s) differ from the template\n",
        diffs.len()
    ));
    if !short.is_empty() {
        out.push_str(&format!(
            "{} node(s) with fewer GPUs than most of their instance type:\n",
            short.len()
        ));
        for s in short {
            out.push_str(&format!("  {}\n", s.describe()));
        }
    }
    out
}

/// `{"nodes": N, "differ": M, "differences": [{"node", "differences": [...]}]}`: only the nodes
/// that differ are listed.
pub fn render_json(diffs: &[NodeDiff], short: &[Short]) -> String {
    let differing: Vec<&NodeDiff> = diffs.iter().filter(|n| !n.differences.is_empty()).collect();
    let mut doc = serde_json::json!({
        "nodes": diffs.len(),
        "differ": differing.len(),
        "differences": differing,
    });
    // Only where the fleet has a node short of its instance type.
    if !short.is_empty() {
        doc["short"] = short
            .iter()
            .map(|s| {
                serde_json::json!({"node": s.node, "instance_type": s.instance_type,
                    "gpus": s.gpus, "usual": s.usual, "usual_nodes": s.usual_nodes,
                    "type_nodes": s.type_nodes})
            })
            .collect();
    }
    serde_json::to_string_pretty(&doc).expect("a diff always serialises") + "\n"
}

/// A label selector of equalities and existence (`key=value,key`): which nodes are the group's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector(Vec<(String, Option<String>)>);

impl Selector {
    pub fn parse(s: &str) -> Result<Selector, String> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = match part.split_once('=') {
                Some((k, v)) => (k.trim_end_matches('='), Some(v.to_string())),
                None => (part, None),
            };
            crate::validate::qualified_name(k).map_err(|e| format!("{part:?}: {e}"))?;
            if let Some(v) = &v {
                crate::validate::label_value(v).map_err(|e| format!("{part:?}: {e}"))?;
            }
            out.push((k.to_string(), v));
        }
        if out.is_empty() {
            return Err("empty: expected key=value or key, comma-separated".to_string());
        }
        Ok(Selector(out))
    }

    pub fn matches(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        self.0.iter().all(|(k, v)| match v {
            Some(v) => labels.get(k) == Some(v),
            None => labels.contains_key(k),
        })
    }
}
