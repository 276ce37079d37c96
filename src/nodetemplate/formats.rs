//! A template in each autoscaler's words (docs/autoscaling.md cites the source of each):
//!
//! - cluster-autoscaler on AWS: the Auto Scaling group tags `k8s.io/cluster-autoscaler/
//!   node-template/{label,resources,taint}/<name>` (`cloudprovider/aws/aws_manager.go`:
//!   `extractLabelsFromAsg`, `extractAllocatableResourcesFromAsg`, a quantity, and
//!   `extractTaintsFromAsg`, `<value>:<effect>`);
//! - cluster-autoscaler on GCE: the instance template's `kube-env` `AUTOSCALER_ENV_VARS`
//!   (`cloudprovider/gce/templates.go`: `node_labels`, `node_taints`, `extended_resources`,
//!   each `k=v,...`, a taint `key=value:Effect`);
//! - Cluster API: the MachineDeployment/MachineSet annotations
//!   `capacity.cluster-autoscaler.kubernetes.io/{labels,taints,gpu-count,gpu-type}`
//!   (`cloudprovider/clusterapi/clusterapi_utils.go`, `clusterapi_unstructured.go`: labels
//!   `k=v,...`; taints `key=value:Effect,...` or `key:Effect`; one GPU resource and its count);
//! - Karpenter: a NodePool (`karpenter.sh/v1`) whose `spec.template.metadata.labels` are the
//!   labels, and a NodeOverlay (`karpenter.sh/v1alpha1`) adding the GPUs to the pool's capacity.

use serde_json::{Value, json};

use super::Template;

/// AWS's limits on an Auto Scaling group's tags: 50 per group, a key of at most 128 characters.
pub const ASG_MAX_TAGS: usize = 50;
pub const ASG_MAX_KEY: usize = 128;

pub const CA_PREFIX: &str = "k8s.io/cluster-autoscaler/node-template/";
pub const CAPI_PREFIX: &str = "capacity.cluster-autoscaler.kubernetes.io/";

/// The most labels a NodePool's template may hold (its CRD's `maxProperties`).
pub const KARPENTER_MAX_LABELS: usize = 100;

/// A text and what is worth a warning about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    pub warnings: Vec<String>,
}

fn taint_value(t: &crate::output::Taint) -> String {
    format!("{}:{}", t.value, t.effect)
}

/// `key=value:Effect`, or `key:Effect` without a value (kubectl's taint syntax, which both the
/// GCE and the Cluster API readers parse).
fn taint_spec(t: &crate::output::Taint) -> String {
    if t.value.is_empty() {
        format!("{}:{}", t.key, t.effect)
    } else {
        format!("{}={}:{}", t.key, t.value, t.effect)
    }
}

fn yaml(v: &Value) -> String {
    serde_saphyr::to_string(v).expect("a template always serialises")
}

/// The cluster-autoscaler node-template tags of an Auto Scaling group, as a YAML map.
pub fn cluster_autoscaler(t: &Template) -> Rendered {
    let mut tags = serde_json::Map::new();
    for (k, v) in &t.labels {
        tags.insert(format!("{CA_PREFIX}label/{k}"), json!(v));
    }
    for (k, v) in &t.resources {
        tags.insert(format!("{CA_PREFIX}resources/{k}"), json!(v));
    }
    for taint in &t.taints {
        tags.insert(
            format!("{CA_PREFIX}taint/{}", taint.key),
            json!(taint_value(taint)),
        );
    }
    let mut warnings = Vec::new();
    if tags.len() > ASG_MAX_TAGS {
        warnings.push(format!(
            "{} node-template tags: an Auto Scaling group holds at most {ASG_MAX_TAGS} (with its other tags); keep the labels pods select on with --label-ns",
            tags.len()
        ));
    }
    for k in tags.keys().filter(|k| k.len() > ASG_MAX_KEY) {
        warnings.push(format!(
            "tag {k:?} is {} characters: AWS allows at most {ASG_MAX_KEY} in a tag key",
            k.len()
        ));
    }
    Rendered {
        text: yaml(&Value::Object(tags)),
        warnings,
    }
}

/// The `AUTOSCALER_ENV_VARS` line of a GCE instance template's `kube-env`.
pub fn cluster_autoscaler_gce(t: &Template) -> Rendered {
    let pairs = |m: &std::collections::BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut vars = Vec::new();
    if !t.labels.is_empty() {
        vars.push(format!("node_labels={}", pairs(&t.labels)));
    }
    if !t.taints.is_empty() {
        let taints: Vec<String> = t.taints.iter().map(taint_spec).collect();
        vars.push(format!("node_taints={}", taints.join(",")));
    }
    if !t.resources.is_empty() {
        vars.push(format!("extended_resources={}", pairs(&t.resources)));
    }
    Rendered {
        text: format!("AUTOSCALER_ENV_VARS: {}\n", vars.join(";")),
        warnings: Vec::new(),
    }
}

/// The GPU resources the annotations can say: Cluster API's reader takes one resource name
/// (`gpu-type`) and its count.
const GPU_RESOURCES: [&str; 4] = [
    "nvidia.com/gpu",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
];

/// The Cluster API capacity annotations, as a merge patch of a MachineDeployment or MachineSet.
pub fn cluster_api(t: &Template) -> Rendered {
    let mut ann = serde_json::Map::new();
    if !t.labels.is_empty() {
        let labels: Vec<String> = t.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        ann.insert(format!("{CAPI_PREFIX}labels"), json!(labels.join(",")));
    }
    if !t.taints.is_empty() {
        let taints: Vec<String> = t.taints.iter().map(taint_spec).collect();
        ann.insert(format!("{CAPI_PREFIX}taints"), json!(taints.join(",")));
    }
    let mut warnings = Vec::new();
    let gpus: Vec<(&String, &String)> = t
        .resources
        .iter()
        .filter(|(k, _)| GPU_RESOURCES.contains(&k.as_str()) || k.starts_with("nvidia.com/"))
        .collect();
    if let Some((name, count)) = gpus.first() {
        ann.insert(format!("{CAPI_PREFIX}gpu-count"), json!(count));
        ann.insert(format!("{CAPI_PREFIX}gpu-type"), json!(name));
    }
    let rest: Vec<&str> = t
        .resources
        .keys()
        .map(String::as_str)
        .filter(|k| gpus.first().is_none_or(|(n, _)| n.as_str() != *k))
        .collect();
    if !rest.is_empty() {
        warnings.push(format!(
            "Cluster API's annotations hold one GPU resource ({}); not said: {}",
            gpus.first().map(|(n, _)| n.as_str()).unwrap_or("none"),
            rest.join(", ")
        ));
    }
    Rendered {
        text: yaml(&json!({"metadata": {"annotations": Value::Object(ann)}})),
        warnings,
    }
}

/// What the Karpenter documents need beside the template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KarpenterOptions {
    /// The NodePool's name (and the NodeOverlay's).
    pub name: String,
    /// `group/kind/name` of the NodeClass.
    pub node_class: (String, String, String),
    /// `node.kubernetes.io/instance-type` values the pool is for.
    pub instance_types: Vec<String>,
}

/// A NodePool and a NodeOverlay (two YAML documents).
pub fn karpenter(t: &Template, o: &KarpenterOptions) -> Result<Rendered, String> {
    if t.labels.len() > KARPENTER_MAX_LABELS {
        return Err(format!(
            "{} labels: a NodePool's template holds at most {KARPENTER_MAX_LABELS} (its CRD's maxProperties); keep the labels pods select on with --label-ns",
            t.labels.len()
        ));
    }
    if let Some(k) = t
        .labels
        .keys()
        .find(|k| crate::validate::namespace(k).ends_with("karpenter.sh"))
    {
        return Err(format!(
            "label {k:?}: the karpenter.sh domain is Karpenter's own (its CRD refuses it)"
        ));
    }
    let mut requirements =
        vec![json!({"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]})];
    let mut warnings = Vec::new();
    if o.instance_types.is_empty() {
        warnings.push("no --instance-type: the NodePool may launch any instance type with these labels; name the types of this shape".to_string());
    } else {
        requirements.push(json!({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": o.instance_types}));
    }
    let mut spec = json!({
        "nodeClassRef": {"group": o.node_class.0, "kind": o.node_class.1, "name": o.node_class.2},
        "requirements": requirements,
    });
    if !t.taints.is_empty() {
        spec["taints"] = json!(t.taints);
    }
    let pool = json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": o.name},
        "spec": {"template": {"metadata": {"labels": t.labels}, "spec": spec}},
    });
    let mut text = yaml(&pool);
    if !t.resources.is_empty() {
        let overlay = json!({
            "apiVersion": "karpenter.sh/v1alpha1",
            "kind": "NodeOverlay",
            "metadata": {"name": o.name},
            "spec": {
                "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": [o.name]}],
                "capacity": t.resources,
            },
        });
        text.push_str("---\n");
        text.push_str(&yaml(&overlay));
    }
    Ok(Rendered { text, warnings })
}
