//! Golden CLI tests of the rules engine: a snapshot and a rule file in, the exact `-o json` out
//! (labels, annotations, extended resources, taints), through the real binary. The expected
//! values are NFD's own (its e2e test expectations for these rule files, and Intel's documented
//! labels for its NodeFeatureRules; see tests/fixtures/rules/*/PROVENANCE.md).

use std::process::Command;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");

fn labels(snapshot: &str, rules: &str) -> (Value, String) {
    let out = Command::new(BIN)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["labels", "-o", "json", "--no-default-rules", "--features"])
        .arg(format!(
            "tests/fixtures/rules/features/{snapshot}.features.json"
        ))
        .arg("--rules")
        .arg(format!("tests/fixtures/rules/{rules}"))
        .env_remove("GPU_LABELER_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    (
        serde_json::from_slice(&out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Intel's rules on `machine`, `count` data-centre GPUs (class 0380) of device id `id`, of
/// `family` and `product`: the whole label set, and nothing on stderr.
fn assert_intel_data_centre_gpus(
    machine: &str,
    id: &str,
    count: &str,
    family: &str,
    product: &str,
) {
    let device = format!("gpu.intel.com/device-id.0380-{id}");
    assert_eq!(
        labels(machine, "intel/"),
        (
            json!({"labels": {
                "feature.node.kubernetes.io/pci-0380_8086.present": "true",
                format!("{device}.count"): count,
                format!("{device}.present"): "true",
                "gpu.intel.com/device.count": count,
                "gpu.intel.com/family": family,
                "gpu.intel.com/product": product,
                "intel.feature.node.kubernetes.io/gpu": "true"
            }}),
            String::new()
        )
    );
}

#[test]
fn nfd_e2e_taints() {
    assert_eq!(
        labels("nfd-fake", "nfd/e2e-nodefeaturerule-3.yaml"),
        (
            json!({"labels": {}, "taints": [
                {"key": "feature.node.kubernetes.io/fake-special-node", "value": "exists", "effect": "PreferNoSchedule"},
                {"key": "feature.node.kubernetes.io/fake-dedicated-node", "value": "true", "effect": "NoExecute"},
                {"key": "feature.node.kubernetes.io/performance-optimized-node", "value": "true", "effect": "NoExecute"}
            ]}),
            "".to_string()
        )
    );
}

#[test]
fn nfd_e2e_extended_resources_with_a_denied_namespace_reported() {
    assert_eq!(
        labels("nfd-fake", "nfd/e2e-nodefeaturerule-4.yaml"),
        (
            json!({"labels": {}, "extendedResources": {
                "feature.node.kubernetes.io/nons": "123",
                "vendor.feature.node.kubernetes.io/static": "123",
                "vendor.io/dynamic": "10"
            }}),
            "warning: extended resource \"bad.kubernetes.io/malo=999\" from rule \"e2e not allowed rule\" (NodeFeatureRule \"e2e-extened-resource-test\", tests/fixtures/rules/nfd/e2e-nodefeaturerule-4.yaml:29:7) rejected: namespace \"bad.kubernetes.io\" is not allowed\n".to_string()
        )
    );
}

#[test]
fn nfd_e2e_annotations() {
    assert_eq!(
        labels("nfd-fake", "nfd/e2e-nodefeaturerule-5.yaml"),
        (
            json!({"labels": {}, "annotations": {
                "custom.vendor.io/feature": "baz",
                "feature.node.kubernetes.io/defaul-ns-annotation": "foo",
                "feature.node.kubernetes.io/defaul-ns-annotation-2": "bar"
            }}),
            "warning: annotation \"kubernetes.io/feature=denied\" from rule \"e2e-annotation-test\" (NodeFeatureRule \"e2e-feature-annotations-test\", tests/fixtures/rules/nfd/e2e-nodefeaturerule-5.yaml:8:7) rejected: namespace \"kubernetes.io\" is not allowed\nwarning: annotation \"nfd.node.kubernetes.io/xyz=denied\" from rule \"e2e-annotation-test\" (NodeFeatureRule \"e2e-feature-annotations-test\", tests/fixtures/rules/nfd/e2e-nodefeaturerule-5.yaml:8:7) rejected: namespace \"nfd.node.kubernetes.io\" is not allowed\nwarning: annotation \"subns.kubernetes.io/blah=denied\" from rule \"e2e-annotation-test\" (NodeFeatureRule \"e2e-feature-annotations-test\", tests/fixtures/rules/nfd/e2e-nodefeaturerule-5.yaml:8:7) rejected: namespace \"subns.kubernetes.io\" is not allowed\n".to_string()
        )
    );
}

#[test]
fn intel_gpu_rules_on_a_flex_170() {
    assert_intel_data_centre_gpus("intel-flex170", "56c0", "1", "Flex_Series", "Flex_170");
}

#[test]
fn intel_gpu_rules_on_two_max_1550() {
    assert_intel_data_centre_gpus("intel-max1550-2x", "0bd5", "2", "Max_Series", "Max_1550");
}

#[test]
fn intel_gpu_rules_on_a_tigerlake_igpu() {
    assert_eq!(
        labels("intel-tigerlake-igpu", "intel/"),
        (
            json!({"labels": {
                "feature.node.kubernetes.io/pci-0300_8086.present": "true",
                "gpu.intel.com/device-id.0300-9a49.count": "1",
                "gpu.intel.com/device-id.0300-9a49.present": "true",
                "intel.feature.node.kubernetes.io/gpu": "true"
            }}),
            "".to_string()
        )
    );
}
