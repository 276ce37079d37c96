//! Labels: what rules and the built-in PCI labels produce, before a sink publishes them.
//!
//! `NodeOutput` is the whole result of one evaluation. `pci` holds NFD's built-in PCI labels;
//! `validate` holds nfd-master's post-processing (prefixing, name/value validation, namespace
//! policy) and the sanitising of values this project derives itself.

use std::collections::BTreeMap;

use serde::Serialize;

pub mod pci;
pub mod validate;

/// Label key -> value.
pub type LabelMap = BTreeMap<String, String>;

/// The NFD prefix that unprefixed label names receive.
pub const FEATURE_PREFIX: &str = "feature.node.kubernetes.io/";

/// A taint as in a NodeFeatureRule (`key`, optional `value`, `effect`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    pub effect: String,
}

/// Everything one evaluation produces for the node. The JSON form is SPEC §2's `-o json`:
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
}
