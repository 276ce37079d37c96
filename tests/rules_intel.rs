//! Intel's GPU NodeFeatureRules (intel-device-plugins-for-kubernetes) load unchanged and give
//! the labels Intel documents, and the labels a real Tiger Lake node carried.
//! See tests/fixtures/rules/intel/PROVENANCE.md and tests/fixtures/rules/features/PROVENANCE.md.

use std::collections::BTreeMap;
use std::path::Path;

use gpu_labeler::config::LabelPolicy;
use gpu_labeler::features::{FeatureSet, parse_snapshot};
use gpu_labeler::rules::{RuleSet, RuleSource, check, explain};

const DIR: &str = "tests/fixtures/rules";

/// Intel's two rule files.
fn intel_sources() -> Vec<RuleSource> {
    [
        "intel/node-feature-rules.yaml",
        "intel/platform-labeling-rules.yaml",
    ]
    .iter()
    .map(|f| {
        let path = format!("{DIR}/{f}");
        RuleSource {
            text: std::fs::read_to_string(&path).expect("fixture"),
            name: path,
        }
    })
    .collect()
}

fn intel_rules() -> RuleSet {
    let (set, errors) = RuleSet::load(intel_sources());
    assert_eq!(errors, vec![]);
    assert_eq!(set.rule_count(), 17);
    set
}

fn node(name: &str) -> FeatureSet {
    let path = format!("{DIR}/features/{name}.features.json");
    let text = std::fs::read_to_string(&path).expect("fixture");
    parse_snapshot(Path::new(&path), &text).expect("valid snapshot")
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The labels of Intel's rules on `machine`'s features, which they evaluate without an error
/// or a refused output.
fn clean_labels(machine: &str) -> BTreeMap<String, String> {
    let e = intel_rules().evaluate(&node(machine), &LabelPolicy::default());
    assert_eq!((e.errors, e.rejected), (vec![], vec![]), "{machine}");
    e.output.labels
}

/// The whole label set of a node with `count` Intel data-centre GPUs (class 0380) of device
/// id `id`, of `family` and `product`.
fn data_centre_gpu_labels(
    id: &str,
    count: &str,
    family: &str,
    product: &str,
) -> BTreeMap<String, String> {
    let device = format!("gpu.intel.com/device-id.0380-{id}");
    map(&[
        (&format!("{device}.count"), count),
        (&format!("{device}.present"), "true"),
        ("gpu.intel.com/device.count", count),
        ("gpu.intel.com/family", family),
        ("gpu.intel.com/product", product),
        ("intel.feature.node.kubernetes.io/gpu", "true"),
    ])
}

#[test]
fn tiger_lake_igpu_gets_the_labels_a_real_node_had() {
    // The two gpu.intel.com/device-id labels are exactly those captured on the node
    // (intel-device-plugins-for-kubernetes PR 1539).
    assert_eq!(
        clean_labels("intel-tigerlake-igpu"),
        map(&[
            ("gpu.intel.com/device-id.0300-9a49.count", "1"),
            ("gpu.intel.com/device-id.0300-9a49.present", "true"),
            ("intel.feature.node.kubernetes.io/gpu", "true"),
        ])
    );
}

#[test]
fn flex_170_gets_the_documented_labels() {
    assert_eq!(
        clean_labels("intel-flex170"),
        data_centre_gpu_labels("56c0", "1", "Flex_Series", "Flex_170")
    );
}

#[test]
fn two_max_1550_get_the_documented_labels() {
    assert_eq!(
        clean_labels("intel-max1550-2x"),
        data_centre_gpu_labels("0bd5", "2", "Max_Series", "Max_1550")
    );
}

#[test]
fn without_a_gpu_driver_only_the_pci_rules_match() {
    let mut f = node("intel-tigerlake-igpu");
    f.flags.clear();
    let e = intel_rules().evaluate(&f, &LabelPolicy::default());
    assert_eq!(
        e.output.labels,
        map(&[
            ("gpu.intel.com/device-id.0300-9a49.count", "1"),
            ("gpu.intel.com/device-id.0300-9a49.present", "true"),
        ])
    );
    let report = explain(&intel_rules(), &f, Some("intel.gpu"));
    let want = r#"NodeFeatureRule "intel-dp-devices" (tests/fixtures/rules/intel/node-feature-rules.yaml)
  rule "intel.gpu" (tests/fixtures/rules/intel/node-feature-rules.yaml:52:7): not matched
    matchAny[0] (one element must match): not matched
      term 1 (line 62): feature "kernel.loadedmodule": not present on this node -> not matched
    matchAny[1] (one element must match): not matched
      term 1 (line 66): feature "kernel.enabledmodule": not present on this node -> not matched
    matchAny[2] (one element must match): not matched
      term 1 (line 70): feature "kernel.loadedmodule": not present on this node -> not matched
    matchAny[3] (one element must match): not matched
      term 1 (line 74): feature "kernel.enabledmodule": not present on this node -> not matched
    matchFeatures (all terms must match): not evaluated (no matchAny element matched, or the rule failed)

1 rule(s): 0 matched, 1 did not match, 0 failed.
"#;
    assert_eq!(report, want);
}

#[test]
fn explain_names_the_instance_and_the_value() {
    let report = explain(
        &intel_rules(),
        &node("intel-tigerlake-igpu"),
        Some("intel-gpu-platform-labeling/intel.gpu.flex.170"),
    );
    let want = r#"NodeFeatureRule "intel-gpu-platform-labeling" (tests/fixtures/rules/intel/platform-labeling-rules.yaml)
  rule "intel.gpu.flex.170" (tests/fixtures/rules/intel/platform-labeling-rules.yaml:112:5): not matched
    matchFeatures (all terms must match): not matched
      term 1 (line 117): feature "pci.device" (2 instance(s)): not matched
        instances: 0 of 2 matched
          pci.device[0]: no: pci.device[0].class = "0600": class In ["0380"] -> no; pci.device[0].device = "9a14": device In ["56c0"] -> no
          pci.device[1]: no: pci.device[1].class = "0300": class In ["0380"] -> no; pci.device[1].device = "9a49": device In ["56c0"] -> no

1 rule(s): 0 matched, 1 did not match, 0 failed.
"#;
    assert_eq!(report, want);
}

#[test]
fn intel_rules_check_clean_against_the_feature_catalog() {
    let sources = intel_sources();
    let report = check(
        &sources,
        &["pci.device", "kernel.loadedmodule", "gpu.device"],
    );
    assert_eq!(report.error_lines(), Vec::<String>::new());
    // Features gpu-labeler does not discover (NFD's kernel.enabledmodule, cpu.*, kernel.config)
    // are reported once per term, with the closest known name.
    let p = "tests/fixtures/rules/intel/node-feature-rules.yaml";
    let enabled = |pos: &str, rule: &str| {
        format!(
            "{p}:{pos}: rule \"{rule}\" (NodeFeatureRule \"intel-dp-devices\"): unknown feature \"kernel.enabledmodule\" (did you mean \"kernel.loadedmodule\"?); the term can never match"
        )
    };
    let sgx = |pos: &str, f: &str| {
        format!(
            "{p}:{pos}: rule \"intel.sgx\" (NodeFeatureRule \"intel-dp-devices\"): unknown feature \"{f}\"; the term can never match"
        )
    };
    assert_eq!(
        report.warning_lines(),
        vec![
            enabled("66:13", "intel.gpu"),
            enabled("74:13", "intel.gpu"),
            enabled("109:13", "intel.qat"),
            sgx("119:11", "cpu.cpuid"),
            sgx("123:11", "cpu.security"),
            sgx("126:11", "kernel.config"),
            format!(
                "{p}:117:9: rule \"intel.sgx\" (NodeFeatureRule \"intel-dp-devices\"): dynamic value \"@cpu.security.sgx.epc\" reads unknown feature \"cpu.security\""
            ),
            enabled("148:13", "intel.npu"),
        ]
    );
}
