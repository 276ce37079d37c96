//! NFD's own NodeFeatureRule files load and give NFD's results.
//!
//! The `e2e-*` rule files are evaluated over the features of NFD's `fake` source and compared
//! with what NFD's end-to-end test expects on the node; the `samples-*` files (NFD's built-in
//! labels written as rules) over a realistic node, including NFD's own PCI test machine, whose
//! PCI labels NFD documents. See tests/fixtures/rules/*/PROVENANCE.md.

use std::collections::BTreeMap;

use gpu_labeler::config::LabelPolicy;
use gpu_labeler::features::{FeatureSet, Instance, parse_snapshot};
use gpu_labeler::output::Taint;
use gpu_labeler::rules::{Evaluation, OutputKind, RuleSet, RuleSource, check};

const DIR: &str = "tests/fixtures/rules";

fn source(file: &str) -> RuleSource {
    let path = format!("{DIR}/{file}");
    RuleSource {
        text: std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
        name: path,
    }
}

fn load(files: &[&str]) -> RuleSet {
    let (set, errors) = RuleSet::load(files.iter().map(|f| source(f)).collect());
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors, Vec::<String>::new());
    set
}

fn eval(files: &[&str], features: &FeatureSet) -> Evaluation {
    load(files).evaluate(features, &LabelPolicy::default())
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn inst(pairs: &[(&str, &str)]) -> Instance {
    pairs.iter().map(|(k, v)| (*k, *v)).collect()
}

/// NFD's `fake` source with its default configuration (source/fake/fake.go).
fn fake_features() -> FeatureSet {
    let mut f = FeatureSet::default();
    for flag in ["flag_1", "flag_2", "flag_3"] {
        f.insert_flag("fake.flag", flag);
    }
    for (k, v) in [("attr_1", "true"), ("attr_2", "false"), ("attr_3", "10")] {
        f.insert_attribute("fake.attribute", k, v);
    }
    f.push_instance(
        "fake.instance",
        inst(&[
            ("name", "instance_1"),
            ("attr_1", "true"),
            ("attr_2", "false"),
            ("attr_3", "10"),
            ("attr_4", "foobar"),
        ]),
    );
    f.push_instance(
        "fake.instance",
        inst(&[
            ("name", "instance_2"),
            ("attr_1", "true"),
            ("attr_2", "true"),
            ("attr_3", "100"),
        ]),
    );
    f.push_instance("fake.instance", inst(&[("name", "instance_3")]));
    f
}

/// NFD's example and sample rule files (deploy/examples, deploy/samples).
const NFD_EXAMPLES: [&str; 11] = [
    "nfd/examples-nodefeaturerule.yaml",
    "nfd/samples-nodefeaturerule-cpu.yaml",
    "nfd/samples-nodefeaturerule-custom.yaml",
    "nfd/samples-nodefeaturerule-kernel.yaml",
    "nfd/samples-nodefeaturerule-local.yaml",
    "nfd/samples-nodefeaturerule-memory.yaml",
    "nfd/samples-nodefeaturerule-network.yaml",
    "nfd/samples-nodefeaturerule-pci.yaml",
    "nfd/samples-nodefeaturerule-storage.yaml",
    "nfd/samples-nodefeaturerule-system.yaml",
    "nfd/samples-nodefeaturerule-usb.yaml",
];

/// The labels of `files`' rules on `features`, which they evaluate without an error or a
/// refused output.
fn clean_labels(files: &[&str], features: &FeatureSet) -> BTreeMap<String, String> {
    let e = eval(files, features);
    assert_eq!((e.errors, e.rejected), (vec![], vec![]), "{files:?}");
    e.output.labels
}

const NS: &str = "feature.node.kubernetes.io/";

fn ns(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (format!("{NS}{k}"), v.to_string()))
        .collect()
}

/// NFD's e2e rule file 1's labels on its fake features.
const E2E_1_LABELS: [(&str, &str); 6] = [
    ("e2e-attribute-test-1", "true"),
    ("e2e-attribute-test-2", "true"),
    ("e2e-flag-test-1", "true"),
    ("e2e-flag-test-2", "true"),
    ("e2e-instance-test-1", "true"),
    ("e2e-instance-test-2", "true"),
];

#[test]
fn e2e_rules_1_give_nfds_labels() {
    assert_eq!(
        clean_labels(&["nfd/e2e-nodefeaturerule-1.yaml"], &fake_features()),
        ns(&E2E_1_LABELS)
    );
}

#[test]
fn e2e_rules_1_and_2_give_nfds_labels() {
    // matchAny, back-references to labels and vars of the other object, templates over
    // instances and attributes, a dynamic value from rule.matched.
    assert_eq!(
        clean_labels(
            &[
                "nfd/e2e-nodefeaturerule-2.yaml",
                "nfd/e2e-nodefeaturerule-1.yaml",
            ],
            &fake_features(),
        ),
        // Rule file 1's labels and file 2's.
        ns(&[
            &E2E_1_LABELS[..],
            &[
                ("dynamic-label", "true"),
                ("e2e-matchany-test-1", "true"),
                ("e2e-template-test-1-instance_1", "found"),
                ("e2e-template-test-1-instance_2", "found"),
                ("e2e-template-test-2-attr_2", "false"),
                ("e2e-template-test-2-attr_3", "10"),
            ],
        ]
        .concat())
    );
}

#[test]
fn e2e_rules_3_give_nfds_taints() {
    let e = eval(&["nfd/e2e-nodefeaturerule-3.yaml"], &fake_features());
    let taint = |k: &str, v: &str, eff: &str| Taint {
        key: format!("{NS}{k}"),
        value: v.into(),
        effect: eff.into(),
    };
    assert_eq!(
        e.output.taints,
        vec![
            taint("fake-special-node", "exists", "PreferNoSchedule"),
            taint("fake-dedicated-node", "true", "NoExecute"),
            taint("performance-optimized-node", "true", "NoExecute"),
        ]
    );
    assert_eq!(e.output.labels, map(&[]));
}

#[test]
fn e2e_rules_4_give_nfds_extended_resources() {
    let e = eval(&["nfd/e2e-nodefeaturerule-4.yaml"], &fake_features());
    assert_eq!(
        e.output.extended_resources,
        map(&[
            ("feature.node.kubernetes.io/nons", "123"),
            ("vendor.feature.node.kubernetes.io/static", "123"),
            ("vendor.io/dynamic", "10"),
        ])
    );
    let rejected: Vec<String> = e.rejected.iter().map(ToString::to_string).collect();
    assert_eq!(
        rejected,
        vec![
            "extended resource \"bad.kubernetes.io/malo=999\" from rule \"e2e not allowed rule\" (NodeFeatureRule \"e2e-extened-resource-test\", tests/fixtures/rules/nfd/e2e-nodefeaturerule-4.yaml:29:7) rejected: namespace \"bad.kubernetes.io\" is not allowed"
        ]
    );
}

#[test]
fn e2e_rules_5_give_nfds_annotations() {
    let e = eval(&["nfd/e2e-nodefeaturerule-5.yaml"], &fake_features());
    assert_eq!(
        e.output.annotations,
        map(&[
            ("custom.vendor.io/feature", "baz"),
            ("feature.node.kubernetes.io/defaul-ns-annotation", "foo"),
            ("feature.node.kubernetes.io/defaul-ns-annotation-2", "bar"),
        ])
    );
    let rejected: Vec<(OutputKind, String, String)> = e
        .rejected
        .iter()
        .map(|r| (r.kind, r.key.clone(), r.reason.clone()))
        .collect();
    assert_eq!(
        rejected,
        vec![
            (
                OutputKind::Annotation,
                "kubernetes.io/feature".to_string(),
                "namespace \"kubernetes.io\" is not allowed".to_string()
            ),
            (
                OutputKind::Annotation,
                "nfd.node.kubernetes.io/xyz".to_string(),
                "namespace \"nfd.node.kubernetes.io\" is not allowed".to_string()
            ),
            (
                OutputKind::Annotation,
                "subns.kubernetes.io/blah".to_string(),
                "namespace \"subns.kubernetes.io\" is not allowed".to_string()
            ),
        ]
    );
}

#[test]
fn e2e_rules_6_every_kind_of_output() {
    let e = eval(&["nfd/e2e-nodefeaturerule-6.yaml"], &fake_features());
    assert_eq!(
        e.output.labels,
        map(&[("e2e.feature.node.kubernetes.io/restricted-label-1", "true")])
    );
    assert_eq!(
        e.output.annotations,
        map(&[(
            "e2e.feature.node.kubernetes.io/restricted-annoation-1",
            "yes"
        )])
    );
    assert_eq!(
        e.output.extended_resources,
        map(&[("e2e.feature.node.kubernetes.io/restricted-er-1", "2")])
    );
    assert_eq!(
        e.output.taints,
        vec![Taint {
            key: "feature.node.kubernetes.io/fake-special-cpu".into(),
            value: "true".into(),
            effect: "PreferNoSchedule".into(),
        }]
    );
}

/// NFD's PCI test machine (real sysfs data) plus the kernel, CPU, system, memory, network,
/// storage, USB and local features a typical x86 node has.
fn insert_attributes(f: &mut FeatureSet, feature: &str, attributes: &[(&str, &str)]) {
    for &(k, v) in attributes {
        f.insert_attribute(feature, k, v);
    }
}

fn realistic_node() -> FeatureSet {
    let text = std::fs::read_to_string(format!("{DIR}/features/nfd-rootfs-1.features.json"))
        .expect("features fixture");
    let mut f = parse_snapshot(std::path::Path::new("nfd-rootfs-1.features.json"), &text)
        .expect("valid snapshot");
    for flag in ["AVX", "AVX2", "AVX512F", "SSE4", "SSE42", "CMOV"] {
        f.insert_flag("cpu.cpuid", flag);
    }
    f.insert_attribute("cpu.topology", "hardware_multithreading", "true");
    f.insert_attribute("cpu.topology", "socket_count", "2");
    for (k, v) in [("family", "6"), ("id", "85"), ("vendor_id", "Intel")] {
        f.insert_attribute("cpu.model", k, v);
    }
    f.insert_attribute("cpu.security", "sgx.enabled", "false");
    f.insert_attribute("cpu.security", "sgx.epc", "0");
    f.insert_attribute("cpu.pstate", "status", "active");
    insert_attributes(
        &mut f,
        "kernel.version",
        &[
            ("full", "5.15.0-91-generic"),
            ("major", "5"),
            ("minor", "15"),
            ("revision", "0"),
        ],
    );
    insert_attributes(
        &mut f,
        "kernel.config",
        &[
            ("NO_HZ", "y"),
            ("NO_HZ_IDLE", "y"),
            ("NO_HZ_FULL", "y"),
            ("PREEMPT", "y"),
            ("X86", "y"),
        ],
    );
    f.insert_attribute("kernel.selinux", "enabled", "false");
    for m in ["ib_uverbs", "rdma_ucm", "intel_qat", "vfio_pci"] {
        f.insert_flag("kernel.loadedmodule", m);
    }
    insert_attributes(
        &mut f,
        "system.osrelease",
        &[
            ("ID", "ubuntu"),
            ("VERSION_ID", "22.04"),
            ("VERSION_ID.major", "22"),
            ("VERSION_ID.minor", "04"),
            ("NAME", "Ubuntu"),
        ],
    );
    f.insert_attribute("memory.numa", "is_numa", "true");
    f.insert_attribute("memory.numa", "node_count", "2");
    f.push_instance(
        "network.device",
        inst(&[
            ("name", "eno1"),
            ("sriov_totalvfs", "32"),
            ("operstate", "up"),
        ]),
    );
    f.push_instance(
        "network.device",
        inst(&[("name", "eno2"), ("operstate", "down")]),
    );
    f.push_instance(
        "storage.block",
        inst(&[("name", "nvme0n1"), ("rotational", "0")]),
    );
    f.push_instance(
        "storage.block",
        inst(&[("name", "sda"), ("rotational", "1")]),
    );
    f.push_instance(
        "usb.device",
        inst(&[
            ("class", "ef"),
            ("vendor", "046b"),
            ("device", "ff10"),
            ("serial", "x"),
        ]),
    );
    f.push_instance(
        "usb.device",
        inst(&[("class", "09"), ("vendor", "1d6b"), ("device", "0002")]),
    );
    f.insert_attribute("local.label", "vendor.io/rack", "r12");
    f
}

#[test]
fn nfd_pci_sample_gives_nfds_builtin_pci_labels() {
    // NFD's ground truth for its built-in PCI labels on this machine.
    let e = eval(&["nfd/samples-nodefeaturerule-pci.yaml"], &realistic_node());
    assert_eq!(e.errors, vec![]);
    assert_eq!(
        e.output.labels,
        ns(&[
            ("pci-0300_1a03.present", "true"),
            ("pci-0b40_8086.present", "true"),
            ("pci-0b40_8086.sriov.capable", "true"),
        ])
    );
}

#[test]
fn all_nfd_samples_over_a_realistic_node() {
    let files = [&NFD_EXAMPLES[..], &["intel/node-feature-rules.yaml"]].concat();
    let set = load(&files);
    assert_eq!(set.rule_count(), 34);
    let e = set.evaluate(&realistic_node(), &LabelPolicy::default());
    let mut want = ns(&[
        ("cpu-cpuid.AVX", "true"),
        ("cpu-cpuid.AVX2", "true"),
        ("cpu-cpuid.AVX512F", "true"),
        ("cpu-hardware_multithreading", "true"),
        ("cpu-model.family", "6"),
        ("cpu-model.id", "85"),
        ("cpu-model.vendor_id", "Intel"),
        ("cpu-security.sgx.enabled", "false"),
        ("custom-rdma.available", "true"),
        ("kernel-config.NO_HZ", "true"),
        ("kernel-config.NO_HZ_FULL", "true"),
        ("kernel-config.NO_HZ_IDLE", "true"),
        ("kernel-config.PREEMPT", "true"),
        ("kernel-version.full", "5.15.0-91-generic"),
        ("kernel-version.major", "5"),
        ("kernel-version.minor", "15"),
        ("kernel-version.revision", "0"),
        ("memory-numa", "true"),
        ("network-sriov.capable", "true"),
        ("pci-0300_1a03.present", "true"),
        ("pci-0b40_8086.present", "true"),
        ("pci-0b40_8086.sriov.capable", "true"),
        ("storage-nonrotationaldisk", "true"),
        ("system-os_release.ID", "ubuntu"),
        ("system-os_release.VERSION_ID", "22.04"),
        ("system-os_release.VERSION_ID.major", "22"),
        ("system-os_release.VERSION_ID.minor", "04"),
        ("usb-ef_046b_ff10.present", "true"),
    ]);
    want.insert("vendor.io/rack".into(), "r12".into());
    // Intel's QuickAssist rule matches NFD's test machine: 8086:37c8 class 0b40 with intel_qat
    // and vfio_pci loaded.
    want.insert("intel.feature.node.kubernetes.io/qat".into(), "true".into());
    assert_eq!(e.output.labels, want);
    assert_eq!(
        e.output.extended_resources,
        map(&[("vendor.io/dynamic", "5"), ("vendor.io/static", "123")])
    );
    // NFD's own cstate/pstate sample ranges over .cpu.cstate and .cpu.pstate, but the data of a
    // matchAny element holds only the feature that element matched: with missingkey=error NFD
    // fails this rule too, and every other rule still applies.
    let failed: Vec<&str> = e.errors.iter().map(|x| x.rule.as_str()).collect();
    assert_eq!(
        failed,
        vec!["nfd built-in cpu-cstate and cpu-pstate labels"]
    );
    assert_eq!(
        e.errors[0].message,
        "failed to expand template at line 69, column 18: map has no entry for key \"cstate\""
    );
    assert_eq!(e.rejected, vec![]);
}

#[test]
fn nfd_files_check_clean_except_their_deliberate_errors() {
    let files = [
        &NFD_EXAMPLES[..],
        &[
            "nfd/e2e-nodefeaturerule-1.yaml",
            "nfd/e2e-nodefeaturerule-2.yaml",
            "nfd/e2e-nodefeaturerule-3.yaml",
            "nfd/e2e-nodefeaturerule-4.yaml",
            "nfd/e2e-nodefeaturerule-5.yaml",
            "nfd/e2e-nodefeaturerule-6.yaml",
        ],
    ]
    .concat();
    let sources: Vec<RuleSource> = files.iter().map(|f| source(f)).collect();
    let report = check(&sources, &[]);
    let p = "tests/fixtures/rules/nfd";
    assert_eq!(
        report.error_lines(),
        vec![
            format!(
                "{p}/e2e-nodefeaturerule-4.yaml:31:9: rule \"e2e not allowed rule\" (NodeFeatureRule \"e2e-extened-resource-test\"): extended resource \"bad.kubernetes.io/malo\": namespace \"bad.kubernetes.io\" is not allowed"
            ),
            format!(
                "{p}/e2e-nodefeaturerule-5.yaml:13:9: rule \"e2e-annotation-test\" (NodeFeatureRule \"e2e-feature-annotations-test\"): annotation \"kubernetes.io/feature\": namespace \"kubernetes.io\" is not allowed"
            ),
            format!(
                "{p}/e2e-nodefeaturerule-5.yaml:14:9: rule \"e2e-annotation-test\" (NodeFeatureRule \"e2e-feature-annotations-test\"): annotation \"subns.kubernetes.io/blah\": namespace \"subns.kubernetes.io\" is not allowed"
            ),
            format!(
                "{p}/e2e-nodefeaturerule-5.yaml:15:9: rule \"e2e-annotation-test\" (NodeFeatureRule \"e2e-feature-annotations-test\"): annotation \"nfd.node.kubernetes.io/xyz\": namespace \"nfd.node.kubernetes.io\" is not allowed"
            ),
        ]
    );
    assert_eq!(
        report.warning_lines(),
        vec![
            format!(
                "{p}/samples-nodefeaturerule-cpu.yaml:69:9: rule \"nfd built-in cpu-cstate and cpu-pstate labels\" (NodeFeatureRule \"nfd-builtin-cpu-features\"): the template reads .cpu.cstate, which is not in the data of matchAny[1]; the rule fails with a missing key whenever that element matches"
            ),
            format!(
                "{p}/samples-nodefeaturerule-cpu.yaml:69:9: rule \"nfd built-in cpu-cstate and cpu-pstate labels\" (NodeFeatureRule \"nfd-builtin-cpu-features\"): the template reads .cpu.pstate, which is not in the data of matchAny[0]; the rule fails with a missing key whenever that element matches"
            ),
            format!(
                "{p}/samples-nodefeaturerule-cpu.yaml:117:9: rule \"nfd built-in cpu-coprocessor labels\" (NodeFeatureRule \"nfd-builtin-cpu-features\"): the template reads .cpu.sst, which is not in the data of matchFeatures; the rule fails with a missing key whenever the rule matches"
            ),
        ]
    );
}

#[test]
fn rule_files_from_nfd_all_load() {
    let dir = std::fs::read_dir(format!("{DIR}/nfd")).expect("fixture dir");
    let mut files: Vec<String> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 17);
    let paths: Vec<std::path::PathBuf> = vec![format!("{DIR}/nfd").into()];
    let (sources, errors) = RuleSet::load_paths(&paths);
    assert_eq!(errors, vec![]);
    let names: Vec<String> = sources
        .iter()
        .map(|s| s.name.rsplit('/').next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(names, files);
    let (set, errors) = RuleSet::load(sources);
    assert_eq!(errors, vec![]);
    assert_eq!(set.rule_count(), 49);
}
