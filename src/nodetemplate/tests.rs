use std::collections::BTreeMap;

use super::*;
use crate::features::Instance;
use crate::rules::RuleSource;

/// Two H100s, the second with an XID fault: `gpu.node` says so, as discovery writes it.
fn degraded_node() -> FeatureSet {
    let mut f = FeatureSet::default();
    for (i, (health, uuid)) in [("ok", "GPU-aaaa"), ("xid", "GPU-bbbb")]
        .into_iter()
        .enumerate()
    {
        let mut g: Vec<(&str, String)> = vec![
            ("index", i.to_string()),
            ("address", format!("0000:1{i}:00.0")),
            ("vendor", "nvidia".into()),
            ("vendor_id", "10de".into()),
            ("device_id", "2330".into()),
            ("class", "0302".into()),
            ("product", "NVIDIA H100 80GB HBM3".into()),
            ("health", health.into()),
            ("uuid", uuid.into()),
        ];
        if health == "xid" {
            g.push(("health_xid", "79".into()));
        }
        f.push_instance("gpu.device", Instance::from_iter(g));
    }
    for (k, v) in [
        ("count", "2"),
        ("count_nvidia", "2"),
        ("vendor", "nvidia"),
        ("health", "degraded"),
        ("healthy_count", "1"),
    ] {
        f.insert_attribute("gpu.node", k, v);
    }
    f
}

/// The shipped rules and a site rule whose labels are a timestamp, a GPU's UUID and the count.
fn rules() -> RuleSet {
    let mut sources = crate::default_rules::sources();
    sources.push(RuleSource {
        name: "site.yaml".into(),
        text: r#"apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata:
  name: site
spec:
  rules:
    - name: "site"
      labels:
        example.com/scan.timestamp: "1765000000"
        example.com/gpus: "@gpu.node.count"
      matchFeatures:
        - feature: gpu.node
          matchExpressions:
            count: {op: Exists}
    - name: "uuids"
      labelsTemplate: |
        {{ range .gpu.device }}example.com/gpu-{{ .index }}.uuid={{ .uuid }}
        {{ end }}
      matchFeatures:
        - feature: gpu.device
          matchExpressions:
            uuid: {op: Exists}
"#
        .into(),
    });
    let (set, errors) = RuleSet::load(sources);
    assert_eq!(errors, vec![]);
    set
}

fn config() -> Config {
    let mut c = Config::default();
    c.labels.extra_label_ns = vec!["example.com".into()];
    c
}

#[test]
fn each_per_node_label_is_classified_by_what_moves_it() {
    let f = degraded_node();
    let (config, rules) = (config(), rules());
    let out = labels::evaluate_node(&f, &config, &rules).output;
    let classes = per_node_labels(&f, &config, &rules, &out, None);
    assert_eq!(
        classes,
        BTreeMap::from([
            ("example.com/gpu-0.uuid".to_string(), Class::Identity),
            ("example.com/gpu-1.uuid".to_string(), Class::Identity),
            ("example.com/scan.timestamp".to_string(), Class::Timestamp),
            (
                "feature.node.kubernetes.io/gpu.health".to_string(),
                Class::Health
            ),
            (
                "feature.node.kubernetes.io/gpu.healthy.count".to_string(),
                Class::Health
            ),
        ])
    );
}

#[test]
fn the_default_template_is_a_healthy_node_without_the_identity_and_time_labels() {
    let f = degraded_node();
    let (config, rules) = (config(), rules());
    let out = labels::evaluate_node(&f, &config, &rules).output;
    let healthy = labels::evaluate_node(&with_health(&f, true), &config, &rules).output;
    let t = template(&f, &config, &rules, &out, None, PerNode::Healthy);
    let mut want = healthy.labels.clone();
    want.remove("example.com/gpu-0.uuid");
    want.remove("example.com/gpu-1.uuid");
    want.remove("example.com/scan.timestamp");
    assert_eq!(t.labels, want);
    assert_eq!(
        t.labels.get("feature.node.kubernetes.io/gpu.health"),
        Some(&"ok".to_string())
    );
    assert_eq!(
        t.labels.get("feature.node.kubernetes.io/gpu.healthy.count"),
        Some(&"2".to_string())
    );
    assert_eq!(
        t.resources,
        BTreeMap::from([("nvidia.com/gpu".to_string(), "2".to_string())])
    );
    // Left out: the health labels too; kept: `labels` exactly.
    let left = template(&f, &config, &rules, &out, None, PerNode::LeaveOut);
    want.remove("feature.node.kubernetes.io/gpu.health");
    want.remove("feature.node.kubernetes.io/gpu.healthy.count");
    assert_eq!(left.labels, want);
    let kept = template(&f, &config, &rules, &out, None, PerNode::Keep);
    assert_eq!(kept.labels, out.labels);
}

#[test]
fn a_label_carrying_the_node_name_is_an_identity_label() {
    let mut f = degraded_node();
    f.insert_attribute("system.dmiid", "product_name", "gpu-node-17");
    let mut sources = crate::default_rules::sources();
    sources.push(RuleSource {
        name: "site.yaml".into(),
        text: "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: site\nspec:\n  rules:\n    - name: \"host\"\n      labels:\n        example.com/host: \"@system.dmiid.product_name\"\n      matchFeatures:\n        - feature: system.dmiid\n          matchExpressions:\n            product_name: {op: Exists}\n".into(),
    });
    let (rules, errors) = RuleSet::load(sources);
    assert_eq!(errors, vec![]);
    let config = config();
    let out = labels::evaluate_node(&f, &config, &rules).output;
    let classes = per_node_labels(&f, &config, &rules, &out, Some("gpu-node-17"));
    assert_eq!(
        classes.get("example.com/host"),
        Some(&Class::Identity),
        "{classes:?}"
    );
    assert_eq!(
        per_node_labels(&f, &config, &rules, &out, None).get("example.com/host"),
        None
    );
}

#[test]
fn device_plugin_resources_per_vendor() {
    let mut f = FeatureSet::default();
    for (vendor, driver, cp) in [
        ("amd", "amdgpu", "CPX"),
        ("amd", "amdgpu", "SPX"),
        ("intel", "i915", ""),
        ("intel", "xe", ""),
        ("intel", "", ""),
    ] {
        f.push_instance(
            "gpu.device",
            Instance::from_iter([
                ("vendor", vendor),
                ("driver", driver),
                ("compute_partition", cp),
            ]),
        );
    }
    let r = resources(&f, &Config::default(), &NodeOutput::default());
    assert_eq!(
        r,
        BTreeMap::from([
            ("amd.com/gpu".to_string(), "9".to_string()),
            ("gpu.intel.com/i915".to_string(), "1".to_string()),
            ("gpu.intel.com/xe".to_string(), "1".to_string()),
        ])
    );
    // GPUs their DRA driver publishes are claimed through slices, not the plugin's resource.
    f.push_instance(
        "dra.device",
        Instance::from_iter([("driver", "gpu.amd.com"), ("gpu", "0000:05:00.0")]),
    );
    let r = resources(&f, &Config::default(), &NodeOutput::default());
    assert_eq!(r.get("amd.com/gpu"), None);
}

#[test]
fn quantities_are_written_as_apimachinery_writes_them() {
    assert_eq!(slices::bytes_quantity(81559 << 20), "81559Mi");
    assert_eq!(slices::bytes_quantity(80 << 30), "80Gi");
    assert_eq!(slices::bytes_quantity(0), "0");
    assert_eq!(slices::bytes_quantity(1000), "1000");
}

#[test]
fn a_node_name_is_found_as_a_whole_token_only() {
    assert_eq!(replace_token("n1", "n1", "x"), Some("x".into()));
    assert_eq!(
        replace_token("pool-n1.a", "n1", "x"),
        Some("pool-x.a".into())
    );
    assert_eq!(replace_token("gen1", "n1", "x"), None);
    assert_eq!(replace_token("n1n1 n1", "n1", "x"), Some("n1n1 x".into()));
    assert_eq!(replace_token("n10", "n1", "x"), None);
}

#[test]
fn only_the_labels_of_the_namespaces_asked_for_are_kept() {
    let mut t = Template {
        labels: BTreeMap::from([
            ("nvidia.com/gpu.count".to_string(), "8".to_string()),
            (
                "feature.node.kubernetes.io/gpu.count".to_string(),
                "8".to_string(),
            ),
            ("gpu.example.com/x".to_string(), "1".to_string()),
            ("plain".to_string(), "1".to_string()),
        ]),
        ..Template::default()
    };
    keep_namespaces(
        &mut t,
        &["nvidia.com".to_string(), "*.example.com".to_string()],
    );
    assert_eq!(
        t.labels,
        BTreeMap::from([
            ("gpu.example.com/x".to_string(), "1".to_string()),
            ("nvidia.com/gpu.count".to_string(), "8".to_string()),
        ])
    );
}
