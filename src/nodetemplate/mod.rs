//! Scale-from-zero templates (`gpu-labeler template`, docs/autoscaling.md): what a node of one
//! shape will carry before it exists, from one captured node's features: its labels (the same
//! evaluation as `labels`), the extended resources its vendor's device plugin advertises, and
//! the rules' taints; written for cluster-autoscaler, Cluster API and Karpenter (`formats`),
//! and as the ResourceSlices its DRA driver would publish (`slices`). `diff` holds live nodes
//! against a template.
//!
//! Labels that differ from node to node of one shape are classified here, not by name lists:
//! the evaluation runs again on features changed in one respect (every GPU healthy, every GPU
//! degraded, another node name and other GPU UUIDs), and what moves with the change belongs to
//! that class (`PerNode`).

pub mod diff;
pub mod formats;
pub mod slices;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::config::Config;
use crate::dra;
use crate::features::{FeatureSet, Text};
use crate::labels::{self, gfd};
use crate::output::{LabelMap, NodeOutput, Taint};
use crate::rules::RuleSet;

const GPU_DEVICE: &str = "gpu.device";
const GPU_NODE: &str = "gpu.node";

/// What a node of the captured node's shape carries (`template -o json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Template {
    pub labels: LabelMap,
    /// Extended resource -> quantity: the vendors' device plugins' GPUs, and the rules'
    /// `extendedResources`.
    #[serde(default)]
    pub resources: BTreeMap<String, String>,
    #[serde(default)]
    pub taints: Vec<Taint>,
}

/// How labels that differ per node are written (`--per-node`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PerNode {
    /// As a fresh node of the shape has them: every GPU healthy (so that a pod selecting
    /// `gpu.health=ok` can scale a group up from zero), no timestamps, nothing derived from
    /// the node's name or its GPUs' UUIDs.
    #[default]
    Healthy,
    /// Left out: the health-derived labels too.
    LeaveOut,
    /// As the captured node has them: exactly `labels`.
    Keep,
}

impl PerNode {
    pub const ALL: [PerNode; 3] = [PerNode::Healthy, PerNode::LeaveOut, PerNode::Keep];

    pub fn name(self) -> &'static str {
        match self {
            PerNode::Healthy => "healthy",
            PerNode::LeaveOut => "leave-out",
            PerNode::Keep => "keep",
        }
    }
}

/// Why a label is not the same on every node of one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Its name says it is a time (`gfd.timestamp`).
    Timestamp,
    /// It moves with the GPUs' health.
    Health,
    /// It moves with the node's name or its GPUs' UUIDs.
    Identity,
}

/// The labels of `output` (from `features`) that differ per node, with why. `node_name` is the
/// captured node's name when known (`--node-name`).
pub fn per_node_labels(
    features: &FeatureSet,
    config: &Config,
    rules: &RuleSet,
    output: &NodeOutput,
    node_name: Option<&str>,
) -> BTreeMap<String, Class> {
    let mut out = BTreeMap::new();
    for key in output.labels.keys() {
        let name = key.rsplit('/').next().unwrap_or(key);
        if name.to_ascii_lowercase().ends_with("timestamp") {
            out.insert(key.clone(), Class::Timestamp);
        }
    }
    let healthy = evaluate(&with_health(features, true), config, rules);
    let degraded = evaluate(&with_health(features, false), config, rules);
    for key in moved(&output.labels, &healthy.labels)
        .into_iter()
        .chain(moved(&healthy.labels, &degraded.labels))
    {
        out.entry(key).or_insert(Class::Health);
    }
    let other = evaluate(&with_other_identity(features, node_name), config, rules);
    for key in moved(&output.labels, &other.labels) {
        out.entry(key).or_insert(Class::Identity);
    }
    if let Some(n) = node_name.filter(|n| !n.is_empty()) {
        for (k, v) in &output.labels {
            if replace_token(v, n, "x").is_some() || replace_token(k, n, "x").is_some() {
                out.entry(k.clone()).or_insert(Class::Identity);
            }
        }
    }
    out
}

/// `text` with each whole-token occurrence of `name` replaced (a token: not preceded or
/// followed by a letter or digit, so that node `n1` is not found in `gen1`); `None` when there
/// is none.
fn replace_token(text: &str, name: &str, with: &str) -> Option<String> {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let mut out = String::new();
    let mut rest = text;
    let mut found = false;
    while let Some(i) = rest.find(name) {
        let before = if out.is_empty() && i == 0 {
            None
        } else {
            rest[..i]
                .chars()
                .next_back()
                .or_else(|| out.chars().next_back())
        };
        let after = rest[i + name.len()..].chars().next();
        out.push_str(&rest[..i]);
        if alnum(before) || alnum(after) {
            out.push_str(name);
        } else {
            out.push_str(with);
            found = true;
        }
        rest = &rest[i + name.len()..];
    }
    out.push_str(rest);
    found.then_some(out)
}

/// The template of the node whose evaluation (`labels`' own) is `output`.
pub fn template(
    features: &FeatureSet,
    config: &Config,
    rules: &RuleSet,
    output: &NodeOutput,
    node_name: Option<&str>,
    mode: PerNode,
) -> Template {
    if mode == PerNode::Keep {
        return Template {
            labels: output.labels.clone(),
            resources: resources(features, config, output),
            taints: output.taints.clone(),
        };
    }
    let per_node = per_node_labels(features, config, rules, output, node_name);
    let healthy_features = with_health(features, true);
    let healthy = evaluate(&healthy_features, config, rules);
    let mut labels = healthy.labels.clone();
    labels.retain(|k, _| match per_node.get(k) {
        None => true,
        Some(Class::Health) => mode == PerNode::Healthy,
        Some(Class::Timestamp | Class::Identity) => false,
    });
    Template {
        labels,
        resources: resources(&healthy_features, config, &healthy),
        taints: healthy.taints,
    }
}

fn evaluate(features: &FeatureSet, config: &Config, rules: &RuleSet) -> NodeOutput {
    labels::evaluate_node(features, config, rules).output
}

/// Keys present in one map and not the other, or with another value.
fn moved(a: &LabelMap, b: &LabelMap) -> Vec<String> {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// The features with every GPU healthy (`ok`), or every GPU degraded by a fault.
fn with_health(features: &FeatureSet, healthy: bool) -> FeatureSet {
    let mut f = features.clone();
    // A snapshot without health facts (taken before they existed) stays as it is.
    let has_health = f.attribute(GPU_NODE, "health").is_some()
        || f.instances(GPU_DEVICE)
            .iter()
            .any(|g| g.get("health").is_some());
    if !has_health {
        return f;
    }
    let mut count = 0usize;
    if let Some(gpus) = f.instances.get_mut(GPU_DEVICE) {
        for g in &mut gpus.elements {
            count += 1;
            let kept: Vec<(Text, Text)> = g
                .attributes
                .iter()
                .filter(|(k, _)| k.as_str() != "health" && !k.starts_with("health_"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            g.attributes = kept.into_iter().collect();
            if healthy {
                g.attributes.insert("health".into(), "ok".into());
            } else {
                g.attributes.insert("health".into(), "xid".into());
                g.attributes
                    .insert("health_xid".into(), "79 (template probe)".into());
            }
        }
    }
    if f.attribute(GPU_NODE, "health").is_some() {
        let (health, ok) = if healthy {
            ("ok", count)
        } else {
            ("degraded", 0)
        };
        f.insert_attribute(GPU_NODE, "health", health);
        f.insert_attribute(GPU_NODE, "healthy_count", ok.to_string());
    }
    f
}

/// The features of another node of the same shape: another name where the captured one
/// appears, and other GPU and MIG UUIDs.
fn with_other_identity(features: &FeatureSet, node_name: Option<&str>) -> FeatureSet {
    const OTHER: &str = "gpu-labeler-template-probe";
    let mut f = features.clone();
    let rename = |v: &str| -> Option<String> {
        replace_token(v, node_name.filter(|n| !n.is_empty())?, OTHER)
    };
    for feature in f.attributes.values_mut() {
        for v in feature.elements.values_mut() {
            if let Some(r) = rename(v) {
                *v = r;
            }
        }
    }
    for (name, feature) in f.instances.iter_mut() {
        for (i, inst) in feature.elements.iter_mut().enumerate() {
            let changed: Vec<(Text, Text)> = inst
                .attributes
                .iter()
                .filter_map(|(k, v)| {
                    if k.as_str() == "uuid" || k.as_str() == "parent_uuid" {
                        return Some((k.clone(), format!("{OTHER}-{name}-{i}").into()));
                    }
                    rename(v).map(|r| (k.clone(), r.into()))
                })
                .collect();
            inst.attributes.extend(changed);
        }
    }
    f
}

/// The extended resources a node of this shape advertises: each vendor's device plugin's
/// GPUs (none for a vendor whose GPUs its DRA driver publishes: then the GPUs are claimed
/// through ResourceSlices), and the rules' `extendedResources`.
pub fn resources(
    features: &FeatureSet,
    config: &Config,
    output: &NodeOutput,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let gpus = features.instances(GPU_DEVICE);
    let by_dra = |driver: &str| {
        features
            .instances(dra::DRA_DEVICE)
            .iter()
            .any(|d| d.get("driver") == Some(driver) && d.get("gpu").is_some_and(|g| !g.is_empty()))
    };
    let of = |vendor: &'static str| gpus.iter().filter(move |g| g.get("vendor") == Some(vendor));
    // NVIDIA (k8s-device-plugin): what GFD labels for each resource is what the plugin
    // advertises: `<resource>.count` devices times `<resource>.replicas` (time-slicing, MPS),
    // renamed `<resource>.shared` when the sharing config says `renameByDefault`.
    if !by_dra("gpu.nvidia.com") && of("nvidia").next().is_some() {
        let gfd = gfd::labels(features, config);
        let renamed = features
            .attribute("gpu.sharing", "rename_by_default")
            .is_some_and(|v| v == "true");
        let mut any = false;
        for (key, count) in &gfd {
            let Some(res) = key
                .strip_prefix("nvidia.com/")
                .and_then(|k| k.strip_suffix(".count"))
                .filter(|r| *r == "gpu" || r.starts_with("mig-"))
            else {
                continue;
            };
            let count: u64 = count.parse().unwrap_or(0);
            let replicas: u64 = gfd
                .get(&format!("nvidia.com/{res}.replicas"))
                .and_then(|r| r.parse().ok())
                .unwrap_or(1);
            if count == 0 || replicas == 0 {
                continue;
            }
            let name = if replicas > 1 && renamed {
                format!("nvidia.com/{res}.shared")
            } else {
                format!("nvidia.com/{res}")
            };
            out.insert(name, (count * replicas).to_string());
            any = true;
        }
        // Without NVML there is no GFD view: the plugin's default, one device per GPU.
        if !any {
            out.insert("nvidia.com/gpu".into(), of("nvidia").count().to_string());
        }
    }
    // AMD (ROCm/k8s-device-plugin, its default `single` naming): one `amd.com/gpu` per GPU,
    // or per partition of a partitioned GPU.
    if !by_dra("gpu.amd.com") {
        let n: usize = of("amd")
            .map(|g| amd_partitions(g.get("compute_partition").unwrap_or("")))
            .sum();
        if n > 0 {
            out.insert("amd.com/gpu".into(), n.to_string());
        }
    }
    // Intel (intel-device-plugins-for-kubernetes, gpu plugin): one resource per kernel driver,
    // `gpu.intel.com/i915` or `gpu.intel.com/xe`, one device per GPU (`-shared-dev-num` 1).
    if !by_dra("gpu.intel.com") {
        for driver in ["i915", "xe"] {
            let n = of("intel")
                .filter(|g| g.get("driver") == Some(driver))
                .count();
            if n > 0 {
                out.insert(format!("gpu.intel.com/{driver}"), n.to_string());
            }
        }
    }
    out.extend(output.extended_resources.clone());
    out
}

/// The devices the AMD plugin makes of one GPU in a compute partition mode (an MI300X has 8
/// XCDs: CPX is 8 partitions).
pub fn amd_partitions(mode: &str) -> usize {
    match mode.to_ascii_uppercase().as_str() {
        "DPX" => 2,
        "TPX" => 3,
        "QPX" => 4,
        "CPX" => 8,
        _ => 1,
    }
}

/// Keeps only the labels in `namespaces` (`*.x`: the sub-domains of `x`).
pub fn keep_namespaces(t: &mut Template, namespaces: &[String]) {
    t.labels.retain(|k, _| {
        let ns = crate::validate::namespace(k);
        namespaces
            .iter()
            .any(|p| crate::validate::namespace_matches(ns, p))
    });
}

/// `template -o json`.
pub fn render_json(t: &Template) -> String {
    serde_json::to_string_pretty(t).expect("a template always serialises") + "\n"
}

#[cfg(test)]
mod tests;
