//! Property tests (issue 8): what must hold for every node, not just the fixture machines.
//!
//! 1. Every label the project publishes is valid for Kubernetes, whatever the feature set holds
//!    (odd Unicode product names, long strings, slashes, garbage numbers, unknown vendors) and
//!    whatever simple rules an operator writes; every label that is refused is reported, never
//!    silently dropped (docs/catalog.md#post-processing). The validator here is written from the Kubernetes rules
//!    (apimachinery's `IsQualifiedName`, `IsDNS1123Subdomain`, `IsValidLabelValue`), not taken
//!    from `src/validate.rs`.
//! 2. Labels do not depend on the order devices are discovered: instance order in a feature set,
//!    and PCI addresses renamed among identical functions of the real fixture trees (so directory
//!    order differs) give the same whole label map.
//! 3. Snapshot -> labels equals discovery -> labels: for generated feature sets through JSON, YAML
//!    and a NodeFeature wrapping, and for every fixture machine through the real binary.
//! 4. The two matching paths agree (issue 20): evaluation over the instances' columns, which
//!    stops at the first match where nothing needs the list, gives the same labels, errors and
//!    refusals as the traced path `explain` takes, which looks at every instance and records it,
//!    on generated rules of every operator (malformed ones too) over instances whose values
//!    repeat, as real PCI functions do.
//!
//! Case counts are small (the machine has 2 cores); every comparison is of whole label maps.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use gpu_labeler::config::{Config, MigStrategy, Profile};
use gpu_labeler::default_rules;
use gpu_labeler::features::{FeatureSet, parse_snapshot};
use gpu_labeler::labels::{Evaluated, evaluate_node};
use gpu_labeler::rules::{RuleSet, RuleSource};
use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, TestCaseError, TestRunner};
use regex::Regex;

use common::*;

// ---------------------------------------------------------------------------------------------
// Kubernetes' rules, independently (k8s.io/apimachinery/pkg/util/validation).

/// `qualifiedNameFmt`: `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters.
fn k8s_name(s: &str) -> bool {
    let re = Regex::new(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").unwrap();
    s.len() <= 63 && re.is_match(s)
}

/// `IsDNS1123Subdomain`: at most 253 characters of dot-separated DNS-1123 labels.
fn k8s_dns_subdomain(s: &str) -> bool {
    let re =
        Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").unwrap();
    s.len() <= 253 && re.is_match(s)
}

/// `IsQualifiedName`: `[prefix/]name`.
fn k8s_qualified_name(key: &str) -> bool {
    match key.split('/').collect::<Vec<_>>().as_slice() {
        [name] => k8s_name(name),
        [prefix, name] => !prefix.is_empty() && k8s_dns_subdomain(prefix) && k8s_name(name),
        _ => false,
    }
}

/// `IsValidLabelValue`: empty, or at most 63 characters matching the name format.
fn k8s_label_value(v: &str) -> bool {
    v.is_empty() || k8s_name(v)
}

/// nfd-master's namespace policy with an empty config: `kubernetes.io` and `*.kubernetes.io` are
/// denied except `feature.node.kubernetes.io`, `profile.node.kubernetes.io` and their
/// sub-namespaces.
fn nfd_namespace_allowed(key: &str) -> bool {
    let ns = key.split_once('/').map(|(ns, _)| ns).unwrap_or("");
    if ns != "kubernetes.io" && !ns.ends_with(".kubernetes.io") {
        return true;
    }
    ["feature.node.kubernetes.io", "profile.node.kubernetes.io"]
        .iter()
        .any(|a| ns == *a || ns.ends_with(&format!(".{a}")))
}

/// A label the API server and nfd-master both accept.
fn publishable(key: &str, value: &str) -> bool {
    k8s_qualified_name(key) && k8s_label_value(value) && nfd_namespace_allowed(key)
}

#[test]
fn the_independent_validator_agrees_with_kubernetes_examples() {
    for ok in [
        "a",
        "feature.node.kubernetes.io/gpu.count",
        "nvidia.com/gpu.product",
        "x/A_b-c.D",
        &format!("{}/a", "a".repeat(253)),
        &"a".repeat(63),
    ] {
        assert!(k8s_qualified_name(ok), "{ok}");
    }
    for bad in [
        "",
        "/a",
        "a/",
        "a/b/c",
        "-a",
        "a-",
        "A.com/x",
        "a..b/x",
        "é",
        &format!("{}/a", "a".repeat(254)),
        &"a".repeat(64),
    ] {
        assert!(!k8s_qualified_name(bad), "{bad}");
    }
    for ok in ["", "a", "NVIDIA-H100-80GB-HBM3", "1.2_3-x", &"a".repeat(63)] {
        assert!(k8s_label_value(ok), "{ok}");
    }
    for bad in ["-", "a-", ".a", "a b", "a/b", "ä", &"a".repeat(64)] {
        assert!(!k8s_label_value(bad), "{bad}");
    }
    assert!(nfd_namespace_allowed("feature.node.kubernetes.io/x"));
    assert!(nfd_namespace_allowed("sub.feature.node.kubernetes.io/x"));
    assert!(nfd_namespace_allowed("x"));
    assert!(!nfd_namespace_allowed("kubernetes.io/x"));
    assert!(!nfd_namespace_allowed("node.kubernetes.io/x"));
    assert!(!nfd_namespace_allowed("xfeature.node.kubernetes.io/x"));
}

// ---------------------------------------------------------------------------------------------
// Generators.

/// Strings as they turn up in product names, driver versions and hand-written snapshots.
fn odd_text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => "[A-Za-z0-9]{1,12}",
        2 => "[A-Za-z0-9 ._/+()@:=-]{0,24}",
        2 => "\\PC{0,24}",
        1 => ".{60,90}",
        1 => prop::sample::select(vec![
            "NVIDIA H100 80GB HBM3".to_string(),
            "AMD Instinct MI210".to_string(),
            "Ä€漢字 / GPU".to_string(),
            " leading and trailing ".to_string(),
            "a/b/c".to_string(),
            "-x-".to_string(),
            "x".repeat(63),
            "x".repeat(64),
            format!("{}-", "y".repeat(62)),
            "1g.10gb+me".to_string(),
            "nul\u{0}byte".to_string(),
            "del\u{7f} c1\u{88} nel\u{85} nonchar\u{fffe}".to_string(),
            "new\nline=1".to_string(),
            String::new(),
        ]),
    ]
    .boxed()
}

/// A number, or sometimes something that should have been one.
fn number_text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => (0u64..200_000).prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => "-?[0-9]{1,3}",
        1 => odd_text(),
    ]
    .boxed()
}

fn hex4() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::sample::select(vec!["10de", "1002", "8086", "1da3", "1a03", "102b", "15b3"])
            .prop_map(str::to_string),
        2 => "[0-9a-f]{4}",
        1 => odd_text(),
    ]
    .boxed()
}

fn class_text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => prop::sample::select(vec!["0302", "0300", "0380", "1200", "0b40", "0200", "0604"])
            .prop_map(str::to_string),
        1 => "[0-9a-f]{4}",
        1 => prop::sample::select(vec!["03", "12zz", "0b40/x", "03 00", "0302\u{e9}"])
            .prop_map(str::to_string),
    ]
    .boxed()
}

fn bool_text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::sample::select(vec!["true", "false"]).prop_map(str::to_string),
        1 => odd_text(),
    ]
    .boxed()
}

/// Some of `attrs` (each present or not), as instance attributes.
fn some_attributes(
    attrs: Vec<(&'static str, BoxedStrategy<String>)>,
) -> BoxedStrategy<BTreeMap<String, String>> {
    let parts: Vec<BoxedStrategy<Option<(String, String)>>> = attrs
        .into_iter()
        .map(|(k, s)| prop::option::weighted(0.8, s.prop_map(move |v| (k.to_string(), v))).boxed())
        .collect();
    parts
        .prop_map(|kvs| kvs.into_iter().flatten().collect())
        .boxed()
}

fn gpu_device() -> BoxedStrategy<BTreeMap<String, String>> {
    let vendor = prop_oneof![
        4 => prop::sample::select(vec!["nvidia", "amd", "intel", "habana"]).prop_map(str::to_string),
        1 => hex4(),
    ];
    some_attributes(vec![
        ("vendor", vendor.boxed()),
        ("vendor_id", hex4()),
        ("device_id", hex4()),
        ("class", class_text()),
        ("product", odd_text()),
        ("memory_mib", number_text()),
        ("numa_node", number_text()),
        ("driver", odd_text()),
        ("is_vf", bool_text()),
        (
            "source",
            prop::sample::select(vec!["nvml", "sysfs"])
                .prop_map(str::to_string)
                .boxed(),
        ),
        ("uuid", odd_text()),
        ("compute_major", number_text()),
        ("compute_minor", number_text()),
        ("family", odd_text()),
        ("mig_capable", bool_text()),
        ("mig_enabled", bool_text()),
        ("vgpu", bool_text()),
        ("vgpu_capability", odd_text()),
        ("vgpu_host_driver_version", odd_text()),
        ("vgpu_host_driver_branch", odd_text()),
        ("gfx_target", odd_text()),
        ("simd_count", number_text()),
        ("cu_count", number_text()),
    ])
}

fn mig_profile_text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::sample::select(vec!["1g.10gb", "3g.40gb", "1g.18gb+me", "7g.80gb", "1c.3g.20gb"])
            .prop_map(str::to_string),
        1 => odd_text(),
    ]
    .boxed()
}

fn gpu_mig(gpus: usize) -> BoxedStrategy<BTreeMap<String, String>> {
    let parent = prop_oneof![
        4 => (0..gpus.max(1)).prop_map(|i| i.to_string()),
        1 => number_text(),
    ];
    some_attributes(vec![
        ("parent_index", parent.boxed()),
        ("profile", mig_profile_text()),
        ("memory_mib", number_text()),
        ("multiprocessors", number_text()),
        ("slices_gi", number_text()),
        ("slices_ci", number_text()),
        ("engines_copy", number_text()),
        ("engines_decoder", number_text()),
        ("engines_encoder", number_text()),
        ("engines_jpeg", number_text()),
        ("engines_ofa", number_text()),
    ])
}

fn pci_device() -> BoxedStrategy<BTreeMap<String, String>> {
    let sriov = prop::option::weighted(0.3, number_text());
    (
        class_text(),
        hex4(),
        hex4(),
        hex4(),
        hex4(),
        sriov,
        "[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]",
    )
        .prop_map(|(class, vendor, device, sv, sd, sriov, address)| {
            let mut a: BTreeMap<String, String> = [
                ("class", class),
                ("vendor", vendor),
                ("device", device),
                ("subsystem_vendor", sv),
                ("subsystem_device", sd),
                ("address", address),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            if let Some(n) = sriov {
                a.insert("sriov_totalvfs".into(), n);
            }
            a
        })
        .boxed()
}

/// `gpu.node` as discovery derives it or as a hand-written snapshot may carry it.
fn gpu_node() -> BoxedStrategy<BTreeMap<String, String>> {
    some_attributes(vec![
        ("count", number_text()),
        ("vendors", odd_text()),
        ("memory_mib_min", number_text()),
        ("memory_mib_max", number_text()),
        ("memory_mib_total", number_text()),
        ("homogeneous", bool_text()),
        (
            "nvml",
            prop::sample::select(vec!["ok", "unavailable", "error"])
                .prop_map(str::to_string)
                .boxed(),
        ),
        ("vendor", odd_text()),
        ("product", odd_text()),
        ("family", odd_text()),
        ("compute_major", number_text()),
        ("compute_minor", number_text()),
        ("driver_version", odd_text()),
        ("driver_major", number_text()),
        ("driver_minor", number_text()),
        ("cuda_major", number_text()),
        ("cuda_minor", number_text()),
        ("mig_capable", bool_text()),
        ("mig_enabled", bool_text()),
        ("vgpu_present", bool_text()),
        ("virtual", bool_text()),
        ("count_nvidia", number_text()),
        ("count_amd", number_text()),
    ])
}

fn sharing() -> BoxedStrategy<BTreeMap<String, String>> {
    let strategy = prop_oneof![
        3 => prop::sample::select(vec!["none", "time-slicing", "mps"]).prop_map(str::to_string),
        1 => odd_text(),
    ];
    (
        some_attributes(vec![
            ("strategy", strategy.boxed()),
            ("replicas", number_text()),
            ("rename_by_default", bool_text()),
        ]),
        prop::option::of((odd_text(), number_text())),
    )
        .prop_map(|(mut a, per)| {
            if let Some((resource, n)) = per {
                a.insert(format!("replicas.{resource}"), n);
            }
            a
        })
        .boxed()
}

/// A feature set shaped like discovery's: GPUs (with unique indices), their MIG devices, PCI
/// functions, the derived `gpu.node`, drivers, sharing, DMI and modules; values anything.
fn feature_set() -> BoxedStrategy<FeatureSet> {
    (0usize..5)
        .prop_flat_map(|n| {
            (
                prop::collection::vec(gpu_device(), n),
                prop::collection::vec(gpu_mig(n), 0..4),
                prop::collection::vec(pci_device(), 0..6),
                gpu_node(),
                prop::collection::btree_map(
                    prop::sample::select(vec!["nvidia", "cuda", "amdgpu", "i915"])
                        .prop_map(str::to_string),
                    odd_text(),
                    0..3,
                ),
                prop::option::weighted(0.5, sharing()),
                prop::option::of(odd_text()),
                prop::collection::btree_map(mig_profile_text(), number_text(), 0..3),
                prop::collection::btree_set("[a-z_]{1,8}", 0..3),
            )
        })
        .prop_map(
            |(gpus, migs, pcis, node, drivers, sharing, dmi_product, migprofiles, modules)| {
                let mut f = FeatureSet::default();
                for (i, mut g) in gpus.into_iter().enumerate() {
                    g.insert("index".into(), i.to_string());
                    f.push_instance("gpu.device", g.into_iter().collect());
                }
                for m in migs {
                    f.push_instance("gpu.mig", m.into_iter().collect());
                }
                for p in pcis {
                    f.push_instance("pci.device", p.into_iter().collect());
                }
                for (k, v) in node {
                    f.insert_attribute("gpu.node", k, v);
                }
                for (k, v) in drivers {
                    f.insert_attribute("gpu.driver", k, v);
                }
                for (k, v) in sharing.unwrap_or_default() {
                    f.insert_attribute("gpu.sharing", k, v);
                }
                if let Some(p) = dmi_product {
                    f.insert_attribute("system.dmiid", "product_name", p);
                }
                for (k, v) in migprofiles {
                    f.insert_attribute("gpu.migprofile", k, v);
                }
                for m in modules {
                    f.insert_flag("kernel.loadedmodule", m);
                }
                f
            },
        )
        .boxed()
}

/// The fields NFD accepts in `deviceLabelFields`, in NFD's order.
const PCI_FIELDS: [&str; 5] = [
    "class",
    "vendor",
    "device",
    "subsystem_vendor",
    "subsystem_device",
];

fn config() -> BoxedStrategy<Config> {
    (
        any::<bool>(),
        prop::sample::select(vec![
            MigStrategy::None,
            MigStrategy::Single,
            MigStrategy::Mixed,
        ]),
        prop::sample::subsequence(PCI_FIELDS.to_vec(), 0..=5),
    )
        .prop_map(|(gfd, mig, fields)| {
            let mut c = Config::default();
            if gfd {
                c.profiles.push(Profile::NvidiaGfd);
            }
            c.mig_strategy = mig;
            c.sources.pci.device_label_fields = fields.iter().map(|s| s.to_string()).collect();
            c
        })
        .boxed()
}

/// Label keys as operators write them, and as they should not.
fn label_key() -> BoxedStrategy<String> {
    prop_oneof![
        3 => "[a-z0-9][a-z0-9.-]{0,15}[a-z0-9]",
        2 => "[a-z]{1,8}\\.[a-z]{2,4}/[A-Za-z0-9][A-Za-z0-9._-]{0,20}",
        2 => odd_text(),
        1 => prop::sample::select(vec![
            "kubernetes.io/hostname".to_string(),
            "node.kubernetes.io/x".to_string(),
            "feature.node.kubernetes.io/gpu.present".to_string(),
            "sub.feature.node.kubernetes.io/y".to_string(),
            "profile.node.kubernetes.io/z".to_string(),
            "nvidia.com/gpu.product".to_string(),
            "gpu.count".to_string(),
            "UPPER.example.com/x".to_string(),
            "a/b/c".to_string(),
            "x".repeat(64),
            format!("{}/x", "d".repeat(254)),
        ]),
    ]
    .boxed()
}

/// Elements of `gpu.node` a dynamic `@` value may name.
const DYNAMIC: [&str; 4] = ["product", "count", "family", "no_such_element"];

fn label_value() -> BoxedStrategy<String> {
    prop_oneof![
        3 => "[A-Za-z0-9][A-Za-z0-9._-]{0,20}",
        3 => odd_text(),
        1 => prop::sample::select(DYNAMIC.to_vec()).prop_map(|e| format!("@gpu.node.{e}")),
    ]
    .boxed()
}

/// One generated rule: static labels (distinct keys in one rule), optionally also a template.
#[derive(Debug, Clone)]
struct GenRule {
    labels: BTreeMap<String, String>,
    template: Option<&'static str>,
}

/// Templates over the features; each matches `gpu.device` instances.
const TEMPLATES: [&str; 3] = [
    "{{ range .gpu.device }}gen.product-{{ .Attributes.index }}={{ .Attributes.product }}\n{{ end }}",
    "{{ range .gpu.device }}gen/{{ .Attributes.family }}=x\n{{ end }}",
    "{{ range .gpu.device }}{{ .Attributes.vendor }}.vendor={{ .Attributes.vendor_id }}\n{{ end }}",
];

fn gen_rules() -> BoxedStrategy<Vec<GenRule>> {
    let rule = (
        prop::collection::btree_map(label_key(), label_value(), 1..4),
        prop::option::weighted(0.3, prop::sample::select(TEMPLATES.to_vec())),
    )
        .prop_map(|(labels, template)| GenRule { labels, template });
    prop::collection::vec(rule, 0..4).boxed()
}

/// The generated object's name: after `gpu-labeler-gpu`, so its rules run last.
const GEN_OBJECT: &str = "zz-generated";

/// The rules as a JSON NodeFeatureRule (valid YAML too): rules without a template match always;
/// a template rule carries its labels in a second rule that matches always, so every static
/// label is produced whatever the features.
fn rule_file(rules: &[GenRule]) -> String {
    let mut out = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        out.push(serde_json::json!({"name": format!("gen-{i}"), "labels": r.labels}));
        if let Some(t) = r.template {
            out.push(serde_json::json!({
                "name": format!("gen-{i}-template"),
                "labelsTemplate": t,
                "matchFeatures": [{"feature": "gpu.device",
                                   "matchExpressions": {"index": {"op": "Exists"}}}],
            }));
        }
    }
    generated_object(out)
}

/// The generated rules as one NodeFeatureRule object, in JSON (valid YAML too).
fn generated_object(rules: Vec<serde_json::Value>) -> String {
    serde_json::json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": GEN_OBJECT},
        "spec": {"rules": rules},
    })
    .to_string()
}

fn load_rules(generated: Option<&str>) -> RuleSet {
    let mut sources = default_rules::sources();
    if let Some(text) = generated {
        sources.push(RuleSource {
            name: "generated.json".into(),
            text: text.to_string(),
        });
    }
    let (set, errors) = RuleSet::load(sources);
    assert!(errors.is_empty(), "rules load: {errors:?}");
    set
}

/// NFD's `addNsToMapKeys` over one rule's labels: unprefixed keys get the NFD namespace; a key
/// written both ways in one rule keeps the prefixed one.
fn namespaced(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in labels {
        if k.contains('/') {
            out.insert(k.clone(), v.clone());
        } else {
            let full = format!("{PREFIX}{k}");
            if !labels.contains_key(&full) {
                out.insert(full, v.clone());
            }
        }
    }
    out
}

/// The labels the generated rules produce last (later rules override earlier ones):
/// key -> (raw value, rule name).
fn generated_final(rules: &[GenRule]) -> BTreeMap<String, (String, String)> {
    let mut last = BTreeMap::new();
    for (i, r) in rules.iter().enumerate() {
        for (k, v) in namespaced(&r.labels) {
            last.insert(k, (v, format!("gen-{i}")));
        }
    }
    last
}

// ---------------------------------------------------------------------------------------------
// 1. Every label is valid; every refused label is reported.

/// What `labels` prints on stderr for an evaluation: errors and rejections, each one line.
fn reports(e: &Evaluated) -> Vec<&String> {
    e.errors.iter().chain(&e.rejected).collect()
}

fn check_valid_and_reported(
    features: &FeatureSet,
    config: &Config,
    rules: &[GenRule],
) -> Result<(), TestCaseError> {
    let text = rule_file(rules);
    let set = load_rules(Some(&text));
    let e = evaluate_node(features, config, &set);

    // Every published label is valid.
    for (k, v) in &e.output.labels {
        prop_assert!(
            publishable(k, v),
            "invalid label published: {k:?}={v:?}\nreports: {:#?}",
            reports(&e)
        );
    }
    // Reports escape the key and value (a newline cannot split the line).
    let rejected_prefix = |key: &str, raw: &str| {
        format!(
            "label \"{}={}\" from ",
            key.escape_debug(),
            raw.escape_debug()
        )
    };

    // Every static label of a generated rule is published with its value, or reported.
    for (key, (raw, rule)) in generated_final(rules) {
        let value = match raw.strip_prefix("@gpu.node.") {
            Some(element) => features.attribute("gpu.node", element).map(str::to_string),
            None => Some(raw.clone()),
        };
        let report = format!(
            "{}rule \"{rule}\" (NodeFeatureRule \"{GEN_OBJECT}\", ",
            rejected_prefix(&key, &raw)
        );
        match value {
            Some(v) if publishable(&key, &v) => {
                prop_assert_eq!(e.output.labels.get(&key), Some(&v), "label {}", key);
            }
            _ => {
                let n = e.rejected.iter().filter(|m| m.starts_with(&report)).count();
                prop_assert_eq!(
                    n,
                    1,
                    "{:?}={:?} is not published and not reported once as {:?}\nrejected: {:#?}",
                    key,
                    raw,
                    report,
                    e.rejected
                );
            }
        }
    }

    // Every label of NFD's PCI source is published or reported.
    let mut fields: Vec<&str> = PCI_FIELDS
        .iter()
        .copied()
        .filter(|f| {
            config
                .sources
                .pci
                .device_label_fields
                .iter()
                .any(|x| x == f)
        })
        .collect();
    if fields.is_empty() {
        fields = vec!["class", "vendor"];
    }
    let generated_keys: BTreeSet<String> = generated_final(rules).into_keys().collect();
    for dev in features.instances("pci.device") {
        let class = dev.get("class").unwrap_or_default();
        if !["03", "0b40", "12"].iter().any(|w| class.starts_with(w)) {
            continue;
        }
        let name: Vec<&str> = fields.iter().map(|f| dev.get(f).unwrap_or("")).collect();
        let mut keys = vec![format!("{PREFIX}pci-{}.present", name.join("_"))];
        if dev.get("sriov_totalvfs").is_some() {
            keys.push(format!("{PREFIX}pci-{}.sriov.capable", name.join("_")));
        }
        for key in keys {
            if generated_keys.contains(&key) {
                continue; // a generated rule wrote it: checked above
            }
            let published = e.output.labels.get(&key).map(String::as_str) == Some("true");
            let reported = e
                .rejected
                .iter()
                .any(|m| m.starts_with(&rejected_prefix(&key, "true")));
            prop_assert!(
                published != reported,
                "PCI label {:?}: published {}, reported {}\nrejected: {:#?}",
                key,
                published,
                reported,
                e.rejected
            );
            prop_assert_eq!(published, publishable(&key, "true"), "PCI label {}", key);
        }
    }

    // Every label of the shipped rules whose `gpu.node` element exists is published with that
    // value, reported as rejected, or its rule is reported as failed.
    let shipped: &[(&str, &str, &str)] = &[
        ("gpu.vendor", "vendor", "gpu vendor (single vendor)"),
        ("gpu-nvidia.count", "count_nvidia", "nvidia count"),
        ("gpu-amd.count", "count_amd", "amd count"),
        ("gpu.product", "product", "gpu product (all GPUs alike)"),
        (
            "gpu.memory",
            "memory_mib_min",
            "gpu memory (MiB, smallest GPU)",
        ),
        ("gpu.family", "family", "gpu family"),
        ("gpu.driver.version", "driver_version", "driver version"),
        ("gpu.cuda.major", "cuda_major", "cuda major"),
        ("gpu.mig.enabled", "mig_enabled", "mig enabled"),
        ("gpu.virtual", "virtual", "virtual gpu (vGPU or SR-IOV VF)"),
    ];
    for (label, element, rule) in shipped {
        let key = format!("{PREFIX}{label}");
        let Some(v) = features.attribute("gpu.node", element) else {
            continue;
        };
        if generated_keys.contains(&key) {
            continue;
        }
        let published = e.output.labels.get(&key) == Some(&v.to_string());
        let reported = e.rejected.iter().any(|m| {
            m.starts_with(&format!(
                "label \"{key}=@gpu.node.{element}\" from rule \"{rule}\""
            ))
        });
        let failed = e
            .errors
            .iter()
            .any(|m| m.starts_with(&format!("rule \"{rule}\"")));
        prop_assert!(
            published || reported || failed,
            "{key}={v:?}: neither published, reported nor failed\nreports: {:#?}",
            reports(&e)
        );
        prop_assert_eq!(published, publishable(&key, v), "{}={:?}", key, v);
    }
    Ok(())
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(PtConfig {
        cases,
        failure_persistence: None,
        ..PtConfig::default()
    })
}

#[test]
fn every_label_is_valid_for_kubernetes_and_every_refused_one_is_reported() {
    runner(48)
        .run(&(feature_set(), config(), gen_rules()), |(f, c, r)| {
            check_valid_and_reported(&f, &c, &r)
        })
        .unwrap();
}

/// Discovery's own derived values for odd product names: what `gpu.node` holds after a real
/// scan with NVML reporting these names (the fake NVML through the real dlopen path) is
/// sanitised, so the shipped rules always publish `gpu.product`.
#[test]
fn odd_product_names_from_nvml_give_valid_labels() {
    let names = [
        "NVIDIA H100 80GB HBM3",
        "Ä€漢字 / GPU",
        "  -- weird//name --  ",
        // NVML's name buffer holds 96 bytes: the longest name a driver can report.
        &"Very Long Product Name ".repeat(4),
        "a",
    ];
    for name in names {
        let dir = tempfile::tempdir().unwrap();
        nvidia_sysfs(
            dir.path(),
            &[("0000:3b:00.0", "0x2330"), ("0000:4c:00.0", "0x2330")],
        );
        let fixture = dir.path().join("nvml.json");
        let devices: Vec<serde_json::Value> = ["00000000:3B:00.0", "00000000:4C:00.0"]
            .iter()
            .map(|bus| {
                serde_json::json!({"name": name, "pci_bus_id": bus,
                    "memory_total_bytes": 85_520_809_984u64, "compute_capability": [9, 0],
                    "mig_mode": {"current": 0, "pending": 0}})
            })
            .collect();
        std::fs::write(
            &fixture,
            serde_json::json!({"driver_version": "535.161.08", "cuda_driver_version": 12020,
                               "devices": devices})
            .to_string(),
        )
        .unwrap();
        let config = dir.path().join("config.yaml");
        std::fs::write(&config, "profiles: [nvidia-gfd]\n").unwrap();
        let mut args: Vec<OsString> = vec!["labels".into(), "-o".into(), "json".into()];
        args.extend(discovery_args(dir.path(), Path::new("/nonexistent")));
        args.retain(|a| a != "--no-nvml");
        args.extend([
            "--nvml-lib".into(),
            fake_nvml_lib("nvidia_ml").into(),
            "--config".into(),
            config.into(),
        ]);
        let r = run_env(args, &[("FAKE_NVML_FIXTURE", fixture.as_os_str())]);
        assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{name:?}");
        let labels = labels_of(&r.stdout);
        for (k, v) in &labels {
            assert!(publishable(k, v), "{name:?}: {k}={v}");
        }
        // The product is always published, sanitised (and hashed past 63 characters).
        let product = &labels[&format!("{PREFIX}gpu.product")];
        assert!(!product.is_empty(), "{name:?}");
        assert!(
            labels.contains_key("nvidia.com/gpu.product"),
            "{name:?}: {labels:#?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Labels do not depend on discovery order.

/// The feature set with every instance list permuted by `seed`-driven shuffles.
fn permuted(f: &FeatureSet, perms: &[Vec<usize>]) -> FeatureSet {
    let mut out = f.clone();
    for (list, perm) in out.instances.values_mut().zip(perms) {
        let orig = list.elements.clone();
        list.elements = perm.iter().map(|&i| orig[i].clone()).collect();
    }
    out
}

/// Rules whose outcome does not depend on instance order: static labels, and matches on
/// instances.
fn order_free_rules() -> BoxedStrategy<String> {
    let rule = (
        prop::collection::btree_map(label_key(), "[a-z0-9]{1,6}", 1..3),
        prop::sample::select(vec!["gpu.device", "pci.device", "gpu.mig"]),
        prop::sample::select(vec!["vendor", "class", "profile", "product"]),
        prop::collection::vec(odd_text(), 1..3),
    );
    prop::collection::vec(rule, 0..4)
        .prop_map(|rules| {
            let rules: Vec<serde_json::Value> = rules
                .into_iter()
                .enumerate()
                .map(|(i, (labels, feature, attr, values))| {
                    serde_json::json!({"name": format!("r{i}"), "labels": labels,
                        "matchFeatures": [{"feature": feature,
                            "matchExpressions": {attr: {"op": "In", "value": values}}}]})
                })
                .collect();
            generated_object(rules)
        })
        .boxed()
}

fn with_permutations() -> BoxedStrategy<(FeatureSet, Vec<Vec<usize>>)> {
    feature_set()
        .prop_flat_map(|f| {
            let perms: Vec<BoxedStrategy<Vec<usize>>> = f
                .instances
                .values()
                .map(|l| {
                    Just((0..l.elements.len()).collect::<Vec<_>>())
                        .prop_shuffle()
                        .boxed()
                })
                .collect();
            (Just(f), perms)
        })
        .boxed()
}

/// Labels and everything reported, order-insensitive where the reports are concerned.
fn outcome(e: &Evaluated) -> (BTreeMap<String, String>, BTreeSet<String>) {
    (
        e.output.labels.clone(),
        e.errors.iter().chain(&e.rejected).cloned().collect(),
    )
}

#[test]
fn labels_do_not_depend_on_instance_order() {
    runner(48)
        .run(
            &(with_permutations(), config(), order_free_rules()),
            |((f, perms), c, rules)| {
                let set = load_rules(Some(&rules));
                let a = evaluate_node(&f, &c, &set);
                let b = evaluate_node(&permuted(&f, &perms), &c, &set);
                prop_assert_eq!(outcome(&a), outcome(&b));
                Ok(())
            },
        )
        .unwrap();
}

/// The functions of a fixture tree grouped by identity (vendor, device, class, subsystem ids):
/// functions within a group are interchangeable hardware.
fn identical_groups(root: &Path) -> Vec<Vec<String>> {
    let devices = root.join("bus/pci/devices");
    let mut groups: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for e in std::fs::read_dir(&devices).unwrap() {
        let e = e.unwrap();
        let bdf = e.file_name().to_string_lossy().into_owned();
        let id: Vec<String> = [
            "vendor",
            "device",
            "class",
            "subsystem_vendor",
            "subsystem_device",
        ]
        .iter()
        .map(|a| std::fs::read_to_string(e.path().join(a)).unwrap_or_default())
        .collect();
        groups.entry(id).or_default().push(bdf);
    }
    groups
        .into_values()
        .map(|mut g| {
            g.sort();
            g
        })
        .filter(|g| g.len() > 1)
        .collect()
}

/// A copy of `machine`'s tree in which the addresses of interchangeable functions are permuted
/// (every path component and symlink target renamed), so directory order differs.
fn renamed_copy(machine: &str, rename: &BTreeMap<String, String>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    // A name, or a symlink target: each `/`-separated component that is a renamed BDF.
    copy_tree_mapped(&sysfs_fixture(machine), dir.path(), &|s: &str| {
        s.split('/')
            .map(|c| rename.get(c).map_or(c, String::as_str))
            .collect::<Vec<_>>()
            .join("/")
    });
    dir
}

/// Every fixture tree: sysfs discovery only (NVML's bus ids would no longer match).
fn all_trees() -> impl Iterator<Item = &'static str> {
    MACHINES.into_iter().chain([
        "amd-mi210-8x",
        "amd-mi300x-cpx",
        "amd-vega10",
        "intel-tigerlake-igpu",
    ])
}

/// A config file with the GFD profile (mixed MIG strategy), so its labels are compared too.
fn gfd_config(dir: &Path) -> PathBuf {
    let p = dir.join("config.yaml");
    std::fs::write(&p, "profiles: [nvidia-gfd]\nmigStrategy: mixed\n").unwrap();
    p
}

/// `labels -o json` (default rules, GFD profile) of a tree: the label map and stderr.
fn cli_labels(root: &Path, machine: &str, config: &Path) -> (BTreeMap<String, String>, String) {
    let mut a: Vec<OsString> = vec!["labels".into(), "-o".into(), "json".into()];
    a.extend(discovery_args(root, &proc_fixture(machine)));
    a.extend(["--config".into(), config.into()]);
    let r = run(a);
    (labels_of(r.ok()), r.stderr)
}

#[test]
fn fixture_labels_do_not_depend_on_pci_address_order() {
    let cfg_dir = tempfile::tempdir().unwrap();
    let config = gfd_config(cfg_dir.path());
    let mut permuted_any = 0;
    for machine in all_trees() {
        let (expected, _) = cli_labels(&sysfs_fixture(machine), machine, &config);
        let groups = identical_groups(&sysfs_fixture(machine));
        if groups.is_empty() {
            continue;
        }
        permuted_any += 1;
        // Each group rotated by one: every interchangeable function moves to another address.
        let rename: BTreeMap<String, String> = groups
            .iter()
            .flat_map(|g| {
                let mut to = g.clone();
                to.rotate_left(1);
                g.iter().cloned().zip(to)
            })
            .collect();
        let tree = renamed_copy(machine, &rename);
        let (labels, _) = cli_labels(tree.path(), machine, &config);
        assert_eq!(labels, expected, "{machine} renamed {rename:?}");
    }
    assert!(
        permuted_any >= 5,
        "only {permuted_any} trees had interchangeable functions"
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Snapshot -> labels equals discovery -> labels.

/// The three snapshot forms `--features` accepts: JSON, YAML, and a whole NodeFeature (YAML).
fn snapshots(f: &FeatureSet) -> Vec<(&'static str, String)> {
    let spec: serde_json::Value = serde_json::from_str(&f.to_json()).unwrap();
    let nodefeature = serde_json::json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
        "metadata": {"name": "node-1", "namespace": "node-feature-discovery",
                     "labels": {"nfd.node.kubernetes.io/node-name": "node-1"}},
        "spec": {"features": spec, "labels": {}}});
    vec![
        ("snapshot.json", f.to_json()),
        ("snapshot.yaml", f.to_yaml()),
        ("nodefeature.json", nodefeature.to_string()),
        (
            "nodefeature.yaml",
            serde_saphyr::to_string(&nodefeature).unwrap(),
        ),
    ]
}

#[test]
fn generated_snapshots_read_back_to_the_same_features_and_labels() {
    let set = load_rules(None);
    runner(48)
        .run(&(feature_set(), config()), |(f, c)| {
            let direct = evaluate_node(&f, &c, &set);
            for (name, text) in snapshots(&f) {
                let back = parse_snapshot(Path::new(name), &text)
                    .map_err(|e| TestCaseError::fail(format!("{name}: {e}\n{text}")))?;
                prop_assert_eq!(&back, &f, "{} changed the features:\n{}", name, text);
                prop_assert_eq!(outcome(&evaluate_node(&back, &c, &set)), outcome(&direct));
            }
            Ok(())
        })
        .unwrap();
}

/// `features` in `format` of a discovery run, written to `dir/name`.
fn write_snapshot(
    dir: &Path,
    name: &str,
    args: &[OsString],
    format: &str,
    env: &[(&str, &std::ffi::OsStr)],
) -> PathBuf {
    let mut a: Vec<OsString> = vec!["features".into(), "-o".into(), format.into()];
    a.extend(args.iter().cloned());
    let r = run_env(a, env);
    let p = dir.join(name);
    std::fs::write(&p, r.ok()).unwrap();
    p
}

/// Discovery then labels, against snapshot then labels, for one machine's discovery flags.
fn assert_snapshot_round_trip(
    what: &str,
    discovery: &[OsString],
    env: &[(&str, &std::ffi::OsStr)],
) {
    let dir = tempfile::tempdir().unwrap();
    let config = gfd_config(dir.path());
    let labels = |source: Vec<OsString>, env: &[(&str, &std::ffi::OsStr)]| {
        let mut a: Vec<OsString> = vec!["labels".into(), "-o".into(), "json".into()];
        a.extend(source);
        a.extend(["--config".into(), config.clone().into()]);
        let r = run_env(a, env);
        (labels_of(r.ok()), r.code)
    };
    let (direct, _) = labels(discovery.to_vec(), env);

    let json = write_snapshot(dir.path(), "s.json", discovery, "json", env);
    let yaml = write_snapshot(dir.path(), "s.yaml", discovery, "yaml", env);
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let nf = dir.path().join("nf.yaml");
    std::fs::write(
        &nf,
        serde_saphyr::to_string(&serde_json::json!({
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
            "metadata": {"name": "n", "labels": {"nfd.node.kubernetes.io/node-name": "n"}},
            "spec": {"features": spec}}))
        .unwrap(),
    )
    .unwrap();
    let nf_json = dir.path().join("nf.json");
    std::fs::write(
        &nf_json,
        serde_json::json!({"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
            "metadata": {"name": "n"}, "spec": {"features": spec}})
        .to_string(),
    )
    .unwrap();
    for snap in [json, yaml, nf, nf_json] {
        // No discovery flags at all: the snapshot is the whole input.
        let (from_snapshot, _) = labels(vec!["--features".into(), snap.clone().into()], &[]);
        assert_eq!(from_snapshot, direct, "{what}: {}", snap.display());
    }
}

#[test]
fn every_fixture_machine_relabels_identically_from_its_snapshot() {
    for machine in all_trees() {
        let args = discovery_args(&sysfs_fixture(machine), &proc_fixture(machine));
        assert_snapshot_round_trip(machine, &args, &[]);
    }
}

#[test]
fn nvml_machines_relabel_identically_from_their_snapshots() {
    // (NVML fixture, sysfs tree: the Dell capture or a generated tree at the captured bus ids)
    let cases: [(&str, &[(&str, &str)]); 4] = [
        ("h100-8x", &[]),
        (
            "a100-pcie-40gb-mig-mixed",
            &[("0000:01:00.0", "0x20f1"), ("0000:41:00.0", "0x20f1")],
        ),
        ("h200-mig-me", &[]),
        ("workstation-titanv-rtx5880", &[]),
    ];
    for (fixture, gpus) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (root, proc) = if fixture == "h100-8x" {
            (
                sysfs_fixture("dell-xe9680-8xh100"),
                proc_fixture("dell-xe9680-8xh100"),
            )
        } else {
            nvidia_sysfs(dir.path(), gpus);
            (dir.path().to_path_buf(), PathBuf::from("/nonexistent"))
        };
        let mut args = discovery_args(&root, &proc);
        args.retain(|a| a != "--no-nvml");
        args.extend(["--nvml-lib".into(), fake_nvml_lib("nvidia_ml").into()]);
        let fixture_path = nvml_fixture(fixture);
        assert_snapshot_round_trip(
            fixture,
            &args,
            &[("FAKE_NVML_FIXTURE", fixture_path.as_os_str())],
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 4. The column path and the traced path agree.

/// Attribute values from small pools, so that instances share them.
fn pooled_value(key: &'static str) -> BoxedStrategy<String> {
    let pool: Vec<&str> = match key {
        "vendor" => vec!["8086", "10de", "1002", "15b3"],
        "device" => vec!["2330", "20b5", "0b40", "1a03", "abcd"],
        "numa_node" => vec!["0", "1", "-1", "3", "x"],
        "speed" => vec!["2.5", "8.0", "16.0", "v1.2.3", "fast"],
        _ => vec!["true", "false", "yes", ""],
    };
    prop::sample::select(pool).prop_map(str::to_string).boxed()
}

const KEYS: [&str; 5] = ["vendor", "device", "numa_node", "speed", "enabled"];

fn pooled_instances() -> BoxedStrategy<Vec<BTreeMap<String, String>>> {
    let instance = some_attributes(KEYS.iter().map(|k| (*k, pooled_value(k))).collect());
    prop::collection::vec(instance, 0..14).boxed()
}

/// One expression: mostly well formed for its operator, sometimes anything at all.
fn any_expression() -> BoxedStrategy<(String, serde_json::Value)> {
    let key = prop::sample::select(vec![
        "vendor",
        "device",
        "numa_node",
        "speed",
        "enabled",
        "missing",
    ]);
    let value = prop::sample::select(vec![
        "8086", "10de", "0", "1", "2", "-1", "8.0", "v1.2", "^20", "^(0b|1a)", "(", "true", "x",
    ]);
    let e = |op: &str, values: Vec<&str>| serde_json::json!({"op": op, "value": values});
    let well_formed = prop_oneof![
        (
            prop::sample::select(vec!["In", "NotIn"]),
            prop::collection::vec(
                prop::sample::select(vec!["8086", "10de", "2330", "0b40", "1", "true"]),
                1..3
            )
        )
            .prop_map(move |(op, v)| e(op, v)),
        prop::sample::select(vec!["Exists", "DoesNotExist", "IsTrue", "IsFalse"])
            .prop_map(move |op| e(op, vec![])),
        (
            prop::sample::select(vec!["Gt", "Ge", "Lt", "Le"]),
            prop::sample::select(vec!["-1", "0", "1", "2"])
        )
            .prop_map(move |(op, v)| e(op, vec![v])),
        prop::sample::select(vec!["^20", "^(0b|1a)", "8$", "^[0-9]+$"])
            .prop_map(move |v| e("InRegexp", vec![v])),
        Just(serde_json::json!({"op": "Gt", "value": ["v1.0"], "type": "version"})),
    ];
    let anything = (
        prop::sample::select(vec![
            "In",
            "NotIn",
            "InRegexp",
            "Exists",
            "DoesNotExist",
            "Gt",
            "Ge",
            "Lt",
            "Le",
            "GtLt",
            "GeLe",
            "IsTrue",
            "IsFalse",
        ]),
        prop::collection::vec(value, 0..3),
        prop::option::weighted(0.15, Just("version")),
    )
        .prop_map(|(op, values, ty)| {
            let mut x = serde_json::json!({"op": op, "value": values});
            if let Some(t) = ty {
                x["type"] = serde_json::json!(t);
            }
            x
        });
    (key, prop_oneof![6 => well_formed, 1 => anything])
        .prop_map(|(k, x)| (k.to_string(), x))
        .boxed()
}

/// Rules over `pci.device` (and sometimes the module flags): one to three terms of one to
/// three expressions, sometimes under `matchAny`, sometimes with a template over the matched
/// instances (which needs the whole list).
fn expression_rules() -> BoxedStrategy<String> {
    let term = (
        prop::sample::select(vec!["pci.device", "pci.device", "kernel.loadedmodule"]),
        prop::collection::vec(any_expression(), 1..4)
            .prop_map(|v| v.into_iter().collect::<BTreeMap<_, _>>()),
    )
        .prop_map(
            |(feature, exprs)| serde_json::json!({"feature": feature, "matchExpressions": exprs}),
        );
    let rule = (
        prop::collection::vec(term, 1..3),
        any::<bool>(),
        prop::option::weighted(0.3, Just(())),
    );
    prop::collection::vec(rule, 1..6)
        .prop_map(|rules| {
            let rules: Vec<serde_json::Value> = rules
                .into_iter()
                .enumerate()
                .map(|(i, (terms, any, template))| {
                    let mut r = serde_json::json!({"name": format!("r{i}"),
                        "labels": {format!("r{i}"): "true"}});
                    if any {
                        r["matchAny"] = terms
                            .iter()
                            .map(|t| serde_json::json!({"matchFeatures": [t]}))
                            .collect();
                    } else {
                        r["matchFeatures"] = serde_json::json!(terms);
                    }
                    if template.is_some() {
                        r["labelsTemplate"] = serde_json::json!(format!(
                            "{{{{ range .pci.device }}}}t{i}-{{{{ .vendor }}}}-{{{{ .numa_node }}}}=x\n{{{{ end }}}}"
                        ));
                    }
                    r
                })
                .collect();
            generated_object(rules)
        })
        .boxed()
}

#[test]
fn the_column_path_and_the_traced_path_give_the_same_outcome() {
    let features = (
        pooled_instances(),
        prop::collection::btree_set(prop::sample::select(vec!["nvidia", "x"]), 0..2),
    )
        .prop_map(|(insts, modules)| {
            let mut f = FeatureSet::default();
            for i in insts {
                f.push_instance("pci.device", i.into_iter().collect());
            }
            for m in modules {
                f.insert_flag("kernel.loadedmodule", m);
            }
            f
        });
    let policy = gpu_labeler::config::LabelPolicy::default();
    let matched = std::cell::Cell::new(0usize);
    let erred = std::cell::Cell::new(0usize);
    runner(400)
        .run(&(features, expression_rules()), |(f, rules)| {
            let (set, errors) = RuleSet::load(vec![RuleSource {
                name: "generated.json".into(),
                text: rules,
            }]);
            prop_assert!(errors.is_empty(), "rules load: {errors:?}");
            let fast = set.evaluate(&f, &policy);
            let traced = set.evaluate_traced(&f, &policy);
            // Cases, not labels: one case with many matches must not carry the count.
            matched.set(matched.get() + usize::from(!fast.output.labels.is_empty()));
            erred.set(erred.get() + usize::from(!fast.errors.is_empty()));
            prop_assert_eq!(&fast.output, &traced.output);
            prop_assert_eq!(&fast.errors, &traced.errors);
            prop_assert_eq!(&fast.rejected, &traced.rejected);
            Ok(())
        })
        .unwrap();
    // The generator reaches both outcomes often enough to mean something: counted over 400
    // random cases (no fixed seed), each outcome is seen in roughly a tenth of the cases or
    // more, so a bound of 20 cases is far below what any run gives and far above zero.
    let (matched, erred) = (matched.get(), erred.get());
    eprintln!("cases that matched: {matched}, cases that erred: {erred}");
    assert!(
        matched >= 20 && erred >= 20,
        "matched {matched}, erred {erred}"
    );
}
