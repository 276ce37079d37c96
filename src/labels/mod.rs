//! Labels: what rules and the built-in PCI labels produce, before a sink publishes them.
//!
//! The assembly floor: `evaluate_node` turns a `FeatureSet` into one `NodeOutput` from NFD's
//! built-in PCI labels (`pci`), the compatibility profiles (`gfd`) and the rules' output, each
//! validated by `crate::validate`.

use crate::config::Config;
use crate::features::FeatureSet;
use crate::output::{GpuHealth, LabelMap, NodeOutput};
use crate::rules::RuleSet;
use crate::validate;

pub mod explain;
pub mod gfd;
pub mod pci;

/// The result of turning features into labels, with everything worth reporting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluated {
    pub output: NodeOutput,
    /// Rules that failed at evaluation (they produced nothing; the others applied).
    pub errors: Vec<String>,
    /// Labels refused by validation or namespace policy, each naming its rule.
    pub rejected: Vec<String>,
    /// Informational notes (e.g. ignored `deviceLabelFields`).
    pub notes: Vec<String>,
    /// Worth a warning, though nothing was refused: a site rule that writes a built-in label.
    pub warnings: Vec<String>,
}

/// The built-in part of the program that writes `key`, in words (for `match`'s hints); rules
/// are described by `RuleSet::label_producers`.
pub fn builtin_producer(key: &str) -> Option<&'static str> {
    if let Some(rest) = key
        .strip_prefix(validate::FEATURE_NS)
        .and_then(|k| k.strip_prefix("/pci-"))
        && (rest.ends_with(".present") || rest.ends_with(".sriov.capable"))
    {
        return Some("NFD's built-in PCI labels write it from pci.device (class, vendor)");
    }
    let gfd = ["gpu.", "cuda.", "mig.", "gfd.", "vgpu."];
    key.strip_prefix("nvidia.com/")
        .is_some_and(|rest| gfd.iter().any(|p| rest.starts_with(p)))
        .then_some(
            "the nvidia-gfd profile writes it from NVML (profiles: [nvidia-gfd] in the config)",
        )
}

/// Features -> labels: NFD's built-in PCI labels, the labels of the compatibility profiles in
/// `profiles` (`nvidia-gfd`), then the rules (which win on the same key, as in nfd-master).
/// Pure: the same inputs always give the same output.
pub fn evaluate_node(features: &FeatureSet, config: &Config, rules: &RuleSet) -> Evaluated {
    let (pci_labels, mut notes) = pci::builtin_labels(features, &config.sources.pci);
    let mut labels = LabelMap::new();
    let mut rejected = Vec::new();
    // NFD's PCI source names its labels after the attribute values; from a snapshot these can be
    // anything, so they are validated like every other label (nfd-master does the same).
    for (key, value) in pci_labels {
        match validate::validate_label(&key, &value, &config.labels) {
            Ok(key) => {
                labels.insert(key, value);
            }
            Err(e) => rejected.push(format!(
                "label \"{}={value}\" from NFD's PCI source rejected: {e}",
                key.escape_debug()
            )),
        }
    }
    if config.profiles.contains(&crate::config::Profile::NvidiaGfd) {
        notes.extend(gfd::silent_because(features));
        // Profile labels obey the same namespace policy as rule labels (`denyLabelNs`).
        for (key, value) in gfd::labels(features, config) {
            match validate::validate_label(&key, &value, &config.labels) {
                Ok(key) => {
                    labels.insert(key, value);
                }
                Err(e) => rejected.push(format!(
                    "label \"{key}={value}\" from profile {:?} rejected: {e}",
                    gfd::PROFILE
                )),
            }
        }
    }
    let eval = rules.evaluate(features, &config.labels);
    labels.extend(eval.output.labels);
    rejected.extend(eval.rejected.iter().map(ToString::to_string));
    Evaluated {
        output: NodeOutput {
            labels,
            health: gpu_health(features),
            ..eval.output
        },
        errors: eval.errors.iter().map(ToString::to_string).collect(),
        rejected,
        notes,
        warnings: eval.warnings,
    }
}

/// The node's GPU health as the `gpu.node` feature says it (what the `GPUHealthy` condition
/// follows): the built-in `gpu.health` label says the same unless a rule overrides it.
pub fn gpu_health(features: &FeatureSet) -> Option<GpuHealth> {
    let node = crate::discover::gpu::GPU_NODE;
    let attr = |a: &str| features.attribute(node, a).map(str::to_string);
    // With GPUs missing the condition counts the healthy ones of those expected: `7 of 8`.
    let count = match crate::discover::missing::fault_of(features) {
        Some(_) => attr(crate::discover::missing::EXPECTED_COUNT).or_else(|| attr("count")),
        None => attr("count"),
    };
    Some(GpuHealth {
        health: attr("health")?,
        healthy: attr("healthy_count"),
        count,
        missing: attr(crate::discover::missing::MISSING),
    })
}
