//! `gpu-labeler diff` as an operator migrating from NFD and GFD meets it: the real binary against
//! Kubernetes' own API server (tests/kube-apiserver) and a Node (labels from kubelet, nfd-master, GFD and an earlier gpu-labeler,
//! with their managedFields), then the same Node as a file; the publish that follows does what
//! the diff said.

mod apiserver;
mod common;
mod kube;

use apiserver::*;
use kube::{KubeApiServer, Who};
use serde_json::json;

const NODE: &str = "gpu-node-1";

/// A Node as a cluster that ran NFD and GFD, and an older gpu-labeler, leaves it: on the test
/// API server built from Kubernetes' own code, each manager's labels set by its own requests,
/// under the shipped admission policy.
fn migrating_cluster() -> KubeApiServer {
    let server = KubeApiServer::with_shipped_node_policy();
    server.create_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    let path = format!("/api/v1/nodes/{NODE}");
    let merge = |manager: &str, labels: serde_json::Value| {
        server.admin_patch(manager, &path, &json!({"metadata": {"labels": labels}}));
    };
    merge(
        "nfd-master",
        json!({
            // NFD's vendor-only PCI label (the device plugin's chart selects on it).
            "feature.node.kubernetes.io/pci-10de.present": "true",
            // The same label and value as ours: shared.
            "feature.node.kubernetes.io/pci-0302_10de.present": "true",
            // Another value than ours: a conflict the sink will not force.
            "feature.node.kubernetes.io/gpu.count": "4",
        }),
    );
    merge(
        "gpu-feature-discovery",
        json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
    );
    let ours = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": {
        "feature.node.kubernetes.io/gpu.product": "H100",
        "feature.node.kubernetes.io/gpu.vendor": "nvidia",
        "feature.node.kubernetes.io/old-rule": "true",
    }}});
    let a = server.apply(&Who::agent(NODE), "gpu-labeler", &path, &ours, false);
    assert!(a.ok(), "{}", a.body);
    server
}

fn gpu_labeler(args: &[String]) -> (i32, String, String) {
    common::run(args).parts()
}

fn diff_args(extra: &[&str]) -> Vec<String> {
    let mut a = vec!["diff".to_string()];
    a.extend(fixture_args());
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// `diff` on the test cluster before the publish (docs/migrating.md shows it).
const BEFORE: &str = include_str!("fixtures/diff/gpu-node-1.diff.txt");

#[test]
fn diff_shows_what_the_node_sink_would_do_and_the_publish_does_it() {
    let server = migrating_cluster();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig(&Who::agent(NODE));
    let k = kubeconfig.to_str().unwrap();
    let from = server.requests().len();
    let live = diff_args(&["--kubeconfig", k, "--node-name", NODE]);
    let (code, stdout, stderr) = gpu_labeler(&live);
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (4, BEFORE, ""));
    // Reading is all diff does: one GET, no write.
    let requests: Vec<String> = server.requests()[from..]
        .iter()
        .map(|r| format!("{} {} {}", r.verb, r.uri, r.user_agent))
        .collect();
    assert_eq!(
        requests,
        [format!(
            "GET /api/v1/nodes/{NODE} gpu-labeler/{}",
            env!("CARGO_PKG_VERSION")
        )]
    );

    // The same Node saved by kubectl (with its managedFields) gives the same diff.
    let file = dir.path().join("node.json");
    std::fs::write(&file, server.node(NODE).to_string()).unwrap();
    let (code, stdout, _) = gpu_labeler(&diff_args(&["--node", file.to_str().unwrap()]));
    assert_eq!((code, stdout.as_str()), (4, BEFORE));

    // JSON for scripts: one row per key that is not ours alone and unchanged.
    let (code, stdout, _) = gpu_labeler(&diff_args(&[
        "--node",
        file.to_str().unwrap(),
        "-o",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let statuses: Vec<(String, String)> = common::string_pairs(&v["rows"], "/key", "/status")
        .into_iter()
        .map(|(k, s)| (k.to_string(), s.to_string()))
        .collect();
    let fnk = |k: &str| format!("feature.node.kubernetes.io/{k}");
    assert_eq!(code, 4);
    assert_eq!(v["node"], NODE);
    assert_eq!(v["managedFields"], true);
    assert_eq!(
        statuses,
        vec![
            (fnk("gpu-nvidia.count"), "add".into()),
            (fnk("gpu.count"), "conflict".into()),
            (fnk("gpu.count.expected"), "add".into()),
            (fnk("gpu.family"), "add".into()),
            (fnk("gpu.health"), "add".into()),
            (fnk("gpu.healthy.count"), "add".into()),
            (fnk("gpu.interconnect"), "add".into()),
            (fnk("gpu.numa.gpus.max"), "add".into()),
            (fnk("gpu.numa.nodes"), "add".into()),
            (fnk("gpu.pcie.roots"), "add".into()),
            (fnk("gpu.present"), "add".into()),
            (fnk("gpu.product"), "change".into()),
            (fnk("gpu.rdma.local"), "add".into()),
            (fnk("gpu.vendor"), "keep".into()),
            (fnk("gpu.vgpu.present"), "add".into()),
            (fnk("gpu.virtual"), "add".into()),
            (fnk("old-rule"), "remove".into()),
            (fnk("pci-0300_102b.present"), "add".into()),
            (fnk("pci-0302_10de.present"), "keep".into()),
            (fnk("pci-0302_10de.sriov.capable"), "add".into()),
            (fnk("pci-10de.present"), "foreign".into()),
            ("nvidia.com/gpu.product".into(), "foreign".into()),
        ]
    );

    // The publish does what the diff said: every add and change, the removal, the conflict
    // left to nfd-master, the others' labels untouched.
    let run = run_args(&kubeconfig, NODE, &["--oneshot"]);
    let mut run: Vec<String> = run
        .into_iter()
        .filter(|a| a != "--no-default-rules")
        .collect();
    run.push("--no-events".into());
    let (code, _, stderr) = gpu_labeler(&run);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        server.labels(NODE),
        map(&[
            ("kubernetes.io/hostname", NODE),
            ("feature.node.kubernetes.io/gpu-nvidia.count", "8"),
            ("feature.node.kubernetes.io/gpu.health", "ok"),
            ("feature.node.kubernetes.io/gpu.healthy.count", "8"),
            ("feature.node.kubernetes.io/gpu.count", "4"),
            ("feature.node.kubernetes.io/gpu.count.expected", "8"),
            ("feature.node.kubernetes.io/gpu.family", "hopper"),
            ("feature.node.kubernetes.io/gpu.interconnect", "nvlink"),
            ("feature.node.kubernetes.io/gpu.numa.gpus.max", "4"),
            ("feature.node.kubernetes.io/gpu.numa.nodes", "2"),
            ("feature.node.kubernetes.io/gpu.pcie.roots", "8"),
            ("feature.node.kubernetes.io/gpu.present", "true"),
            (
                "feature.node.kubernetes.io/gpu.product",
                "NVIDIA-H100-80GB-HBM3"
            ),
            ("feature.node.kubernetes.io/gpu.rdma.local", "true"),
            ("feature.node.kubernetes.io/gpu.vendor", "nvidia"),
            ("feature.node.kubernetes.io/gpu.vgpu.present", "false"),
            ("feature.node.kubernetes.io/gpu.virtual", "false"),
            ("feature.node.kubernetes.io/pci-0300_102b.present", "true"),
            ("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
            (
                "feature.node.kubernetes.io/pci-0302_10de.sriov.capable",
                "true"
            ),
            ("feature.node.kubernetes.io/pci-10de.present", "true"),
            ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
        ])
    );
    // After it, only the conflict still differs.
    let (code, stdout, _) = gpu_labeler(&live);
    assert_eq!(
        (code, stdout.as_str()),
        (
            4,
            "node gpu-node-1: 0 to add, 0 to change, 0 to remove, 1 in conflict, 18 unchanged; 2 written only by other managers\n\
             ! label feature.node.kubernetes.io/gpu.count=4: wanted 8, but field manager \"nfd-master\" owns it: not applied\n\
             = label feature.node.kubernetes.io/pci-0302_10de.present=true: also owned by \"nfd-master\"; stays when it stops writing it\n\
             ? label feature.node.kubernetes.io/pci-10de.present=true: written only by \"nfd-master\"; goes when it stops writing it\n\
             ? label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3: written only by \"gpu-feature-discovery\"; goes when it stops writing it\n"
        )
    );
}

/// `kubectl get node -o yaml` without `--show-managed-fields`: owners unknown, said once; a
/// Node that already carries everything exits 0; a file that is not a Node names itself.
#[test]
fn a_node_file_without_managed_fields_and_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let (_, labels, _) = gpu_labeler(&{
        let mut a = vec!["labels".to_string(), "-o".into(), "json".into()];
        a.extend(fixture_args());
        a
    });
    let labels: serde_json::Value = serde_json::from_str(&labels).unwrap();
    let file = dir.path().join("node.yaml");
    let mut yaml = format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {NODE}\n  labels:\n");
    for (k, v) in labels["labels"].as_object().unwrap() {
        yaml.push_str(&format!("    {k}: \"{}\"\n", v.as_str().unwrap()));
    }
    std::fs::write(&file, &yaml).unwrap();
    let (code, stdout, _) = gpu_labeler(&diff_args(&["--node", file.to_str().unwrap()]));
    assert_eq!(
        (code, stdout.as_str()),
        (
            0,
            "node gpu-node-1: 0 to add, 0 to change, 0 to remove, 0 in conflict, 19 unchanged; 0 written only by other managers\n\
             note: the Node has no managedFields (`kubectl get node NAME -o yaml --show-managed-fields`): no key is known to be owned, so none shows as removed or in conflict\n"
        )
    );
    let pod = dir.path().join("pod.yaml");
    std::fs::write(&pod, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n").unwrap();
    let (code, stdout, stderr) = gpu_labeler(&diff_args(&["--node", pod.to_str().unwrap()]));
    assert_eq!(
        (code, stdout.as_str(), stderr),
        (
            1,
            "",
            format!("error: {}: kind Pod, not Node\n", pod.display())
        )
    );
    let (code, _, stderr) = gpu_labeler(&diff_args(&[]));
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "error: diff needs a Node: --node FILE, or --node-name (NODE_NAME) to read it from the cluster\n"
        )
    );
}
