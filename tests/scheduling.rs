//! `gpu-labeler match` and `gpu-labeler inventory` (docs/scheduling.md, "Why is my pod Pending?").
//!
//! The fleet (`tests/fixtures/scheduling/nodes.json`, shaped as `kubectl get nodes -o json`) is
//! eight nodes whose `feature.node.kubernetes.io/*` labels are the real output of `labels` on
//! the fixtures of this repository; `the_fleet_carries_the_fixtures_real_labels` holds the file
//! to that (`UPDATE_GOLDEN=1` rewrites it). Its taints, cordon and allocatable are those kubelet,
//! the node controller and the device plugins write (PROVENANCE.md there). The workloads are the
//! docs/scheduling.md's and the public examples of NVIDIA's, AMD's and Intel's device plugins.

mod apiserver;
mod common;
mod kube;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn dir() -> PathBuf {
    common::repo().join("tests/fixtures/scheduling")
}

/// How one node of the fleet is discovered.
enum Tree {
    /// A captured sysfs tree (tests/fixtures/sysfs/NAME).
    Machine(&'static str),
    /// A kernel-layout tree with one NVIDIA function per address and device id.
    Nvidia(&'static [(&'static str, &'static str)]),
}

struct Spec {
    name: &'static str,
    tree: Tree,
    nvml: Option<&'static str>,
    /// A device-plugin sharing file (tests/fixtures/sharing/).
    sharing: Option<&'static str>,
    taints: &'static [(&'static str, &'static str, &'static str)],
    unschedulable: bool,
    allocatable: &'static [(&'static str, &'static str)],
}

const RTX4090: &[(&str, &str)] = &[
    ("0000:01:00.0", "0x2684"),
    ("0000:21:00.0", "0x2684"),
    ("0000:41:00.0", "0x2684"),
    ("0000:61:00.0", "0x2684"),
    ("0000:81:00.0", "0x2684"),
    ("0000:a1:00.0", "0x2684"),
    ("0000:c1:00.0", "0x2684"),
    ("0000:e1:00.0", "0x2684"),
];

/// The two DGX H100 nodes' allocatable (one cordoned, the other not).
const DGX_H100_ALLOCATABLE: &[(&str, &str)] = &[
    ("cpu", "224"),
    ("memory", "2113244160Ki"),
    ("nvidia.com/gpu", "8"),
    ("pods", "110"),
];

/// Allocatable as kubelet reports it for each machine (cpu, memory, pods), plus the device
/// plugin's resources.
const FLEET: &[Spec] = &[
    Spec {
        name: "dgx-h100-01",
        tree: Tree::Machine("dell-xe9680-8xh100"),
        nvml: Some("h100-8x"),
        sharing: None,
        taints: &[],
        unschedulable: false,
        allocatable: DGX_H100_ALLOCATABLE,
    },
    Spec {
        name: "dgx-h100-02",
        tree: Tree::Machine("dell-xe9680-8xh100"),
        nvml: Some("h100-8x"),
        sharing: None,
        taints: &[("node.kubernetes.io/unschedulable", "", "NoSchedule")],
        unschedulable: true,
        allocatable: DGX_H100_ALLOCATABLE,
    },
    Spec {
        name: "a100-mig-01",
        tree: Tree::Nvidia(&[("0000:01:00.0", "0x20b2")]),
        nvml: Some("a100-80gb-mig-4x1g"),
        sharing: None,
        taints: &[("nvidia.com/gpu", "present", "NoSchedule")],
        unschedulable: false,
        allocatable: &[
            ("cpu", "96"),
            ("memory", "1056496432Ki"),
            ("nvidia.com/mig-1g.20gb", "4"),
            ("pods", "110"),
        ],
    },
    Spec {
        name: "mi210-01",
        tree: Tree::Machine("amd-mi210-8x"),
        nvml: None,
        sharing: None,
        taints: &[],
        unschedulable: false,
        allocatable: &[
            ("amd.com/gpu", "8"),
            ("cpu", "128"),
            ("memory", "1056496432Ki"),
            ("pods", "110"),
        ],
    },
    Spec {
        name: "rtx4090-01",
        tree: Tree::Nvidia(RTX4090),
        nvml: Some("rtx4090-8x"),
        sharing: Some("time-slicing.yaml"),
        taints: &[],
        unschedulable: false,
        allocatable: &[
            ("cpu", "64"),
            ("memory", "527813812Ki"),
            ("nvidia.com/gpu", "80"),
            ("pods", "110"),
        ],
    },
    Spec {
        name: "ws-mixed-01",
        // The capture prints no PCI addresses: NVML alone, as on a host without its tree.
        tree: Tree::Nvidia(&[]),
        nvml: Some("workstation-titanv-rtx5880"),
        sharing: None,
        taints: &[],
        unschedulable: false,
        allocatable: &[
            ("cpu", "32"),
            ("memory", "263895556Ki"),
            ("nvidia.com/gpu", "2"),
            ("pods", "110"),
        ],
    },
    Spec {
        name: "cpu-01",
        tree: Tree::Machine("this-vm"),
        nvml: None,
        sharing: None,
        taints: &[],
        unschedulable: false,
        allocatable: &[("cpu", "2"), ("memory", "8029732Ki"), ("pods", "110")],
    },
    Spec {
        name: "control-plane-01",
        tree: Tree::Machine("this-vm"),
        nvml: None,
        sharing: None,
        taints: &[("node-role.kubernetes.io/control-plane", "", "NoSchedule")],
        unschedulable: false,
        allocatable: &[("cpu", "2"), ("memory", "8029732Ki"), ("pods", "110")],
    },
];

/// `labels -o json` of one node of the fleet: the real output on its fixtures.
fn discovered_labels(spec: &Spec) -> BTreeMap<String, String> {
    let tmp = tempfile::tempdir().unwrap();
    let (sysfs, proc) = match spec.tree {
        Tree::Machine(m) => (common::sysfs_fixture(m), common::proc_fixture(m)),
        Tree::Nvidia(gpus) => {
            let root = tmp.path().join("sys");
            common::nvidia_sysfs(&root, gpus);
            (root, tmp.path().join("proc.absent"))
        }
    };
    let mut args: Vec<OsString> = vec!["labels".into(), "-o".into(), "json".into()];
    args.extend(common::discovery_args(&sysfs, &proc));
    let mut env: Vec<(&str, OsString)> = Vec::new();
    if let Some(fixture) = spec.nvml {
        args.retain(|a| a != "--no-nvml");
        args.push("--nvml-lib".into());
        args.push(common::fake_nvml_lib("nvidia_ml").into());
        env.push(("FAKE_NVML_FIXTURE", common::nvml_fixture(fixture).into()));
    }
    if let Some(sharing) = spec.sharing {
        let config = tmp.path().join("config.yaml");
        let file = common::repo().join("tests/fixtures/sharing").join(sharing);
        std::fs::write(
            &config,
            format!("sources:\n  sharing:\n    configFile: {}\n", file.display()),
        )
        .unwrap();
        args.push("--config".into());
        args.push(config.into());
    }
    let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    common::labels_of(common::run_env(args, &env).ok())
}

/// The fleet as `kubectl get nodes -o json` prints it.
fn fleet_json() -> Value {
    let items: Vec<Value> = FLEET
        .iter()
        .map(|spec| {
            let mut labels: BTreeMap<String, String> = [
                ("beta.kubernetes.io/arch", "amd64"),
                ("beta.kubernetes.io/os", "linux"),
                ("kubernetes.io/arch", "amd64"),
                ("kubernetes.io/hostname", spec.name),
                ("kubernetes.io/os", "linux"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            if spec.name.starts_with("control-plane") {
                labels.insert(
                    "node-role.kubernetes.io/control-plane".into(),
                    String::new(),
                );
            }
            labels.extend(discovered_labels(spec));
            let taints: Vec<Value> = spec
                .taints
                .iter()
                .map(|(k, v, e)| common::taint(k, v, e))
                .collect();
            let mut node_spec = json!({});
            if !taints.is_empty() {
                node_spec["taints"] = json!(taints);
            }
            if spec.unschedulable {
                node_spec["unschedulable"] = json!(true);
            }
            let allocatable: BTreeMap<&str, &str> = spec.allocatable.iter().copied().collect();
            json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": spec.name, "labels": labels},
                "spec": node_spec,
                "status": {"allocatable": allocatable, "capacity": allocatable},
            })
        })
        .collect();
    json!({"apiVersion": "v1", "items": items, "kind": "List",
           "metadata": {"resourceVersion": ""}})
}

#[test]
fn the_fleet_carries_the_fixtures_real_labels() {
    let want = serde_json::to_string_pretty(&fleet_json()).unwrap() + "\n";
    common::check_golden_in(&dir(), "nodes.json", &want);
}

fn nodes() -> PathBuf {
    dir().join("nodes.json")
}

/// `gpu-labeler ARGS` (with the fixture's pci.ids irrelevant here: no discovery).
fn gl(args: &[&OsStr]) -> common::Run {
    common::run_env(args, &[] as &[(&str, &OsStr)])
}

fn match_args(workload: &Path, extra: &[&str]) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![
        "match".into(),
        workload.into(),
        "--nodes".into(),
        nodes().into(),
    ];
    a.extend(extra.iter().map(OsString::from));
    a
}

fn run_match(workload: &Path, extra: &[&str]) -> common::Run {
    let a = match_args(workload, extra);
    gl(&a.iter().map(OsString::as_os_str).collect::<Vec<_>>())
}

/// The golden output of `match` on a workload of tests/fixtures/scheduling/ (`NAME.yaml` ->
/// `NAME.match.txt`), whole, and its exit code.
fn golden(name: &str, code: i32) {
    let r = run_match(&dir().join(format!("{name}.yaml")), &[]);
    let out = r
        .stdout
        .replace(&dir().display().to_string(), "tests/fixtures/scheduling");
    assert_eq!((r.code, r.stderr.as_str()), (code, ""), "{name}");
    common::check_golden_in(&dir(), &format!("{name}.match.txt"), &out);
}

#[test]
fn the_readme_pod_fits_one_node_and_each_other_says_why() {
    golden("train", 0);
}

#[test]
fn nvidias_device_plugin_example_fits_every_node_that_allocates_nvidia_gpus() {
    golden("nvidia-gpu-pod", 0);
}

#[test]
fn amds_examples_fit_the_mi210_node() {
    golden("amd-alexnet-gpu", 0);
    golden("amd-vllm-deployment", 0);
}

#[test]
fn intels_job_fits_no_node_and_the_count_is_the_schedulers() {
    golden("intel-gpu-job", 1);
}

#[test]
fn preferred_terms_node_names_and_typos() {
    golden("mixed", 1);
}

#[test]
fn json_gives_every_reason_of_every_node() {
    let r = run_match(&dir().join("train.yaml"), &["-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let w = &v["workloads"][0];
    assert_eq!(
        (w["available"].clone(), w["total"].clone()),
        (json!(1), json!(8))
    );
    // The cordoned H100 node misses on one thing; the control plane on a taint and on both
    // labels; every reason is there, the plugin and the scheduler's words with it.
    let node = |name: &str| {
        w["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .unwrap()["reasons"]
            .clone()
    };
    assert_eq!(
        node("dgx-h100-02"),
        json!([{"plugin": "NodeUnschedulable", "reason": "node is cordoned (spec.unschedulable)",
                "scheduler": "node(s) were unschedulable"},
               {"plugin": "TaintToleration",
                "reason": "taint node.kubernetes.io/unschedulable:NoSchedule not tolerated",
                "scheduler": "node(s) had untolerated taint {node.kubernetes.io/unschedulable: }"}])
    );
    assert_eq!(
        node("control-plane-01"),
        json!([{"plugin": "TaintToleration",
                "reason": "taint node-role.kubernetes.io/control-plane:NoSchedule not tolerated",
                "scheduler": "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"},
               {"plugin": "NodeAffinity",
                "reason": "label feature.node.kubernetes.io/gpu.memory absent",
                "scheduler": "node(s) didn't match Pod's node affinity/selector"},
               {"plugin": "NodeResourcesFit", "reason": "needs 8 nvidia.com/gpu, allocatable 0",
                "scheduler": "Insufficient nvidia.com/gpu"}])
    );
}

#[test]
fn the_inventory_of_the_fleet() {
    let a: Vec<OsString> = vec!["inventory".into(), "--nodes".into(), nodes().into()];
    let r = gl(&a.iter().map(OsString::as_os_str).collect::<Vec<_>>());
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    common::check_golden_in(&dir(), "inventory.txt", &r.stdout);
}

/// The pod of docs/scheduling.md is the fixture's (tests/docs.rs runs `match` on it and holds
/// the page's output block to what it prints).
#[test]
fn the_docs_pod_is_the_fixtures() {
    let page = std::fs::read_to_string(common::repo().join("docs/scheduling.md")).unwrap();
    let pod = std::fs::read_to_string(dir().join("train.yaml")).unwrap();
    let yaml = page
        .split_once("```yaml\n")
        .unwrap()
        .1
        .split_once("```")
        .unwrap()
        .0;
    assert_eq!(yaml, pod);
}

#[test]
fn bad_input_names_the_file_line_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        (
            "service.yaml",
            "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n",
            "service.yaml:2:7: kind: Service is not a workload (a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob)",
        ),
        (
            "broken.yaml",
            "kind: Pod\nspec:\n  nodeSelector: {a: [\n",
            "broken.yaml:3:21: unclosed bracket '['",
        ),
        (
            "weight.yaml",
            "kind: Pod\nmetadata: {name: p}\nspec:\n  affinity:\n    nodeAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n        - weight: 0\n          preference: {matchExpressions: [{key: a, operator: Exists}]}\n  containers: []\n",
            "weight.yaml:7:19: spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be an integer from 1 to 100",
        ),
    ];
    for (name, text, want) in cases {
        let path = tmp.path().join(name);
        std::fs::write(&path, text).unwrap();
        let r = run_match(&path, &[]);
        let shown = r.stderr.replace(&format!("{}/", tmp.path().display()), "");
        assert_eq!(
            (r.code, shown.as_str(), r.stdout.as_str()),
            (1, format!("error: {want}\n").as_str(), ""),
            "{name}"
        );
    }
    // A node list that is not one.
    let pod = dir().join("train.yaml");
    let a: Vec<OsString> = vec![
        "match".into(),
        pod.clone().into(),
        "--nodes".into(),
        pod.into(),
    ];
    let r = gl(&a.iter().map(OsString::as_os_str).collect::<Vec<_>>());
    assert_eq!(
        (r.code, r.stderr.replace(&dir().display().to_string(), "D")),
        (
            1,
            "error: D/train.yaml:2:7: kind: Pod is not a Node or a list of Nodes (kubectl get nodes -o json)\n".to_string()
        )
    );
}

/// What the API server refuses in the fields scheduling reads (checked against Kubernetes' own
/// validation by tests/scheduling_oracle.rs) is not answered node by node: such a pod is never
/// created. `match` names every refused field, with its file, line and column. Before, each of
/// these pods was matched, and `match` said which nodes it fits.
#[test]
fn what_the_api_server_refuses_is_named_not_matched() {
    let tmp = tempfile::tempdir().unwrap();
    const VALUE_RULE: &str = "a valid label value must be an empty string or consist of \
        alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
        character";
    const NAME_RULE: &str = "name part must consist of alphanumeric characters, '-', '_' or \
        '.', and must start and end with an alphanumeric character";
    const REQ: &str = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    let cases: &[(&str, &str, Vec<String>)] = &[
        // An In value that is not a label value: the scheduler's term would fail on every node.
        (
            "in-value.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: trainer}\nspec:\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n          - matchExpressions:\n              - {key: feature.node.kubernetes.io/gpu.family, operator: In, values: [hopper, \"ampere/80gb\"]}\n  containers: [{name: c, image: busybox}]\n",
            vec![format!(
                "in-value.yaml:10:93: {REQ}[0].matchExpressions[0].values[1]: \"ampere/80gb\": {VALUE_RULE} (the API server refuses Pod trainer)"
            )],
        ),
        // Label keys that are not label keys, in nodeSelector and in a term.
        (
            "key.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      nodeSelector:\n        \"nvidia.com/gpu product\": H100\n      affinity:\n        nodeAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n            nodeSelectorTerms:\n              - matchExpressions:\n                  - {key: \"-gpu.count\", operator: Exists}\n      containers: [{name: c, image: busybox}]\n",
            vec![
                format!(
                    "key.yaml:8:9: spec.template.spec.nodeSelector: key \"nvidia.com/gpu product\": {NAME_RULE} (the API server refuses Deployment web)"
                ),
                format!(
                    "key.yaml:14:27: spec.template.{REQ}[0].matchExpressions[0].key: \"-gpu.count\": {NAME_RULE} (the API server refuses Deployment web)"
                ),
            ],
        ),
        // A Gt bound that is an integer but not a label value.
        (
            "bound.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: big-memory}\nspec:\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n          - matchExpressions:\n              - key: feature.node.kubernetes.io/gpu.memory\n                operator: Gt\n                values: [\"-1\"]\n  containers: [{name: c, image: busybox}]\n",
            vec![format!(
                "bound.yaml:12:26: {REQ}[0].matchExpressions[0].values[0]: \"-1\": {VALUE_RULE} (the API server refuses Pod big-memory)"
            )],
        ),
        // No term at all: before, every node fitted.
        (
            "no-terms.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: anywhere}\nspec:\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms: []\n  containers: [{name: c, image: busybox}]\n",
            vec![format!(
                "no-terms.yaml:8:28: {REQ}: required: there must be at least one node selector term (the API server refuses Pod anywhere)"
            )],
        ),
        // A field other than metadata.name, and a toleration refused twice.
        (
            "field.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: pinned}\nspec:\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n          - matchFields:\n              - {key: metadata.labels, operator: In, values: [dgx-h100-01]}\n  tolerations:\n    - {operator: Equal, value: \"yes\", effect: NoSchedule, tolerationSeconds: 60}\n  containers: [{name: c, image: busybox}]\n",
            vec![
                format!(
                    "field.yaml:10:23: {REQ}[0].matchFields[0].key: \"metadata.labels\": not a valid field selector key (only metadata.name) (the API server refuses Pod pinned)"
                ),
                "field.yaml:12:18: spec.tolerations[0].operator: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\" (the API server refuses Pod pinned)".to_string(),
                "field.yaml:12:47: spec.tolerations[0].effect: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set (the API server refuses Pod pinned)".to_string(),
            ],
        ),
    ];
    for (name, text, want) in cases {
        let path = tmp.path().join(name);
        std::fs::write(&path, text).unwrap();
        let r = run_match(&path, &[]);
        let shown = r.stderr.replace(&format!("{}/", tmp.path().display()), "");
        let want: String = want.iter().map(|l| format!("error: {l}\n")).collect();
        assert_eq!(
            (r.code, shown.as_str(), r.stdout.as_str()),
            (1, want.as_str(), ""),
            "{name}"
        );
    }
}

/// A `Gt` bound that is a label value but not an integer is accepted by the API server and never
/// scheduled: the scheduler cannot parse the term, on any node.
#[test]
fn a_bound_that_is_not_an_integer_fits_no_node() {
    let (tmp, path) = common::temp_file(
        "half.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: half}\nspec:\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n          - matchExpressions:\n              - {key: feature.node.kubernetes.io/gpu.count, operator: Gt, values: [\"7.5\"]}\n  containers: [{name: c, image: busybox}]\n",
    );
    let r = run_match(&path, &[]);
    let want = "\
Pod half (half.yaml:1:1)
NODE              FITS  REASON
dgx-h100-01       no    gpu.count: Gt needs exactly one integer value, not [\"7.5\"]
dgx-h100-02       no    node is cordoned (spec.unschedulable) (+2 more)
a100-mig-01       no    taint nvidia.com/gpu=present:NoSchedule not tolerated (+1 more)
mi210-01          no    gpu.count: Gt needs exactly one integer value, not [\"7.5\"]
rtx4090-01        no    gpu.count: Gt needs exactly one integer value, not [\"7.5\"]
ws-mixed-01       no    gpu.count: Gt needs exactly one integer value, not [\"7.5\"]
cpu-01            no    gpu.count: Gt needs exactly one integer value, not [\"7.5\"]
control-plane-01  no    taint node-role.kubernetes.io/control-plane:NoSchedule not tolerated (+1 more)
0/8 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 1 node(s) had untolerated taint {nvidia.com/gpu: present}, 1 node(s) were unschedulable, 5 node(s) didn't match Pod's node affinity/selector.
hint: gpu.count: rule \"gpu present and count\" of NodeFeatureRule gpu-labeler-gpu (builtin:rules/gpu.yaml:12:7) writes the value of gpu.node.count
";
    assert_eq!(
        (
            r.code,
            r.stderr.as_str(),
            r.stdout
                .replace(&format!("{}/", tmp.path().display()), "")
                .as_str()
        ),
        (1, "", want)
    );
}

/// The cluster path: nodes listed from Kubernetes' own API server (tests/kube-apiserver; 500 a
/// page, read-only; then the DeviceTaintRules), and the same answer as from the file; installed as a kubectl plugin
/// (`kubectl gpu-labeler ...`).
#[test]
fn the_cluster_path_lists_nodes_page_by_page_as_a_kubectl_plugin() {
    let server = kube::KubeApiServer::start();
    let admin = kube::Who::admin();
    let fleet: Value = serde_json::from_str(&std::fs::read_to_string(nodes()).unwrap()).unwrap();
    let put = |name: &str, labels: &Value, spec: &Value, status: &Value| {
        let node = json!({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": name, "labels": labels}, "spec": spec});
        let a = server.request(
            &admin,
            "POST",
            "/api/v1/nodes?fieldManager=kubelet",
            Some(("application/json", &node)),
        );
        assert!(a.ok(), "{name}: {}", a.body);
        let path = format!("/api/v1/nodes/{name}/status");
        let a = server.merge_patch(&admin, "kubelet", &path, &json!({"status": status}));
        assert!(a.ok(), "{name}: {}", a.body);
    };
    // 501 nodes: the fleet, then CPU nodes, so that the list takes two pages.
    for item in fleet["items"].as_array().unwrap() {
        let name = item["metadata"]["name"].as_str().unwrap();
        put(
            name,
            &item["metadata"]["labels"],
            &item["spec"],
            &item["status"],
        );
    }
    for i in 0..493 {
        put(
            &format!("zz-cpu-{i:03}"),
            &json!({"kubernetes.io/os": "linux"}),
            &json!({}),
            &json!({"allocatable": {"cpu": "2", "pods": "110"}}),
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig(&kube::Who::user("an-operator"));
    let from = server.requests().len();
    let plugin = tmp.path().join("kubectl-gpu_labeler");
    std::os::unix::fs::symlink(common::binary(), &plugin).unwrap();
    let out = std::process::Command::new(&plugin)
        .arg("inventory")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    let want = std::fs::read_to_string(dir().join("inventory.txt"))
        .unwrap()
        .replace(
            "6 node(s) with GPUs, 2 without",
            "6 node(s) with GPUs, 495 without",
        );
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            String::from_utf8_lossy(&out.stdout).into_owned()
        ),
        (Some(0), String::new(), want)
    );
    // Two pages: the first of 500, the second from the server's continue token.
    let reqs: Vec<(String, String, Vec<String>)> = server.requests()[from..]
        .iter()
        .map(|r| {
            let (path, query) = r.uri.split_once('?').unwrap_or((&r.uri, ""));
            let params = query
                .split('&')
                .map(|p| p.split_once('=').map_or(p, |(k, _)| k).to_string())
                .collect();
            (r.verb.clone(), path.to_string(), params)
        })
        .collect();
    assert_eq!(
        reqs,
        [
            (
                "LIST".into(),
                "/api/v1/nodes".into(),
                vec!["limit".to_string()]
            ),
            (
                "LIST".into(),
                "/api/v1/nodes".into(),
                vec!["limit".to_string(), "continue".to_string()]
            ),
            // The DRA device taints on the nodes' GPUs: v1 (not served for the kind in 1.36),
            // then v1beta2.
            (
                "LIST".into(),
                "/apis/resource.k8s.io/v1/devicetaintrules".into(),
                vec![String::new()]
            ),
            (
                "LIST".into(),
                "/apis/resource.k8s.io/v1beta2/devicetaintrules".into(),
                vec![String::new()]
            ),
        ]
    );
    // `match` against the cluster gives what it gives against the file, but for the 493 nodes
    // more (none of which fits the pod of docs/scheduling.md).
    let out = std::process::Command::new(&plugin)
        .args(["match", "-o", "json"])
        .arg(dir().join("train.yaml"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let from_file: Value =
        serde_json::from_str(&run_match(&dir().join("train.yaml"), &["-o", "json"]).stdout)
            .unwrap();
    let fits = |v: &Value| -> Vec<String> {
        v["workloads"][0]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["fits"] == true)
            .map(|n| n["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(fits(&v), fits(&from_file));
    assert_eq!(v["workloads"][0]["total"], json!(501));
}
