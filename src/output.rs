//! What one evaluation produces for a node, before a sink publishes it: the vocabulary that the
//! rules, the label assembly and every sink share (so none of them owns it).

use std::collections::BTreeMap;

use serde::Serialize;

/// Label key -> value.
pub type LabelMap = BTreeMap<String, String>;

/// The NFD prefix that unprefixed label names receive.
pub const FEATURE_PREFIX: &str = "feature.node.kubernetes.io/";

/// The built-in labels of GPU health and count (rules/gpu.yaml): the condition is made from
/// them, and `match` names them.
pub const HEALTH_LABEL: &str = "feature.node.kubernetes.io/gpu.health";
pub const HEALTHY_COUNT_LABEL: &str = "feature.node.kubernetes.io/gpu.healthy.count";
pub const COUNT_LABEL: &str = "feature.node.kubernetes.io/gpu.count";

/// The taint the health component's rule sets while `gpu.health` is `degraded`
/// (deploy/components/health); `match` names it.
pub const HEALTH_TAINT: &str = "feature.node.kubernetes.io/gpu-unhealthy";

/// The most taints one rule set may ask for (the rules' taints beyond it are refused, naming the
/// rule): a Node's taints are one list every scheduler decision walks, and the tracking
/// annotation lists ours (64 taints of at most 253 + 1 + 63 + 63 + 16 bytes: under 26 KiB of
/// the 256 KiB a Node's annotations may hold together).
pub const MAX_TAINTS: usize = 64;

/// GPU health as the `gpu.node` feature says it (`health`, `healthy_count`, `count`), for the
/// `GPUHealthy` condition: not read back from the labels, which a site rule may override.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuHealth {
    /// `ok`, or `degraded` (the feature's `health`).
    pub health: String,
    pub healthy: Option<String>,
    pub count: Option<String>,
    /// How many GPUs the node should have and does not show (`gpu.node` `missing`).
    pub missing: Option<String>,
}

/// A taint as in a NodeFeatureRule (`key`, optional `value`, `effect`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    pub effect: String,
}

/// Everything one evaluation produces for the node. The JSON form is the `-o json` of docs/catalog.md#output:
/// `labels` always, the other three only when a rule produced them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodeOutput {
    pub labels: LabelMap,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(
        rename = "extendedResources",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub extended_resources: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// The node's GPU health from the `gpu.node` feature (`None`: no GPU health on this node),
    /// what the `GPUHealthy` condition says; not part of `-o json` (the labels say it there).
    #[serde(skip)]
    pub health: Option<GpuHealth>,
}
