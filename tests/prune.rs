//! `gpu-labeler prune` as an uninstall or a sink switch meets it: the real binary against
//! Kubernetes' own API server (tests/kube-apiserver; the error cases against the suite's own,
//! which can be made to fail), with Nodes (labels from kubelet, nfd-master, GFD and gpu-labeler, one shared
//! with nfd-master) and NodeFeature objects (gpu-labeler's and nfd-worker's). It removes exactly
//! what gpu-labeler's field manager owns alone, keeps what another manager owns too, deletes
//! only gpu-labeler's NodeFeature, says so beforehand with `--dry-run`, and a second run finds
//! nothing to do.

mod apiserver;
mod common;
mod kube;

use std::collections::BTreeMap;

use apiserver::*;
use kube::{KubeApiServer, Who};
use serde_json::{Value, json};

const NS: &str = "gpu-labeler";

fn fnk(k: &str) -> String {
    format!("feature.node.kubernetes.io/{k}")
}

/// An empty NodeFeature of `node` in NS, as NFD's worker writes one.
fn nodefeature(node: &str) -> Value {
    json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
        "metadata": {"name": node, "namespace": NS,
                     "labels": {"nfd.node.kubernetes.io/node-name": node}},
        "spec": {"features": {}, "labels": {}},
    })
}

/// The NodeFeatures of the clusters below: gpu-node-1's written by gpu-labeler, gpu-node-2's
/// by NFD's worker.
const NODEFEATURE_OWNERS: [(&str, &str); 2] =
    [("gpu-node-1", "gpu-labeler"), ("gpu-node-2", "nfd-worker")];

fn cluster() -> FakeApiServer {
    let server = FakeApiServer::start();
    for n in ["cpu-node", "gpu-node-1", "gpu-node-2"] {
        server.add_node(n, &[("kubernetes.io/hostname", n)]);
    }
    server.merge_patch_labels(
        "gpu-node-1",
        "nfd-master",
        &[
            (&fnk("pci-10de.present"), Some("true")),
            (&fnk("pci-0302_10de.present"), Some("true")),
        ],
    );
    server.merge_patch_labels(
        "gpu-node-1",
        "gpu-feature-discovery",
        &[("nvidia.com/gpu.product", Some("NVIDIA-H100-80GB-HBM3"))],
    );
    let ours_1 = map(&[
        (&fnk("gpu.present"), "true"),
        (&fnk("gpu.product"), "NVIDIA-H100-80GB-HBM3"),
        (&fnk("pci-0302_10de.present"), "true"),
    ]);
    let ann = map(&[("feature.node.kubernetes.io/gpu.pool", "h100-a")]);
    let ours_2 = map(&[(&fnk("gpu.present"), "true")]);
    server.with(|s| {
        let n1 = s.nodes.get_mut("gpu-node-1").unwrap();
        n1.apply("gpu-labeler", &ours_1, &ann, false).unwrap();
        let n2 = s.nodes.get_mut("gpu-node-2").unwrap();
        n2.apply("gpu-labeler", &ours_2, &BTreeMap::new(), false)
            .unwrap();
        for (node, manager) in NODEFEATURE_OWNERS {
            s.nodefeatures.insert(
                (NS.to_string(), node.to_string()),
                NodeFeatureObj {
                    object: nodefeature(node),
                    manager: manager.to_string(),
                    resource_version: 1,
                },
            );
        }
    });
    server
}

fn gpu_labeler(args: &[&str]) -> (i32, String, String) {
    common::run(args).parts()
}

/// The prune's one list of the DRA device taints gpu-labeler wrote (docs/taints.md).
const DEVICE_TAINT_RULES: &str = "/apis/resource.k8s.io/v1beta2/devicetaintrules?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dgpu-labeler";

/// `prune --all-nodes --nodefeature-namespace gpu-labeler --dry-run` on the cluster of
/// [`real_cluster`] (docs/migrating.md shows it).
const PLAN: &str = include_str!("fixtures/prune/all-nodes.dry-run.txt");

/// The cluster of [`cluster`] on the test API server built from Kubernetes' own code, each
/// manager's keys set by its own requests (the managedFields are the real field manager's).
fn real_cluster() -> KubeApiServer {
    let s = KubeApiServer::start();
    s.create_namespace(NS);
    // The prune account runs under its own policy (deploy/prune), as shipped.
    s.add_policy(&kube::shipped_prune_policy());
    let admin = Who::admin();
    for n in ["cpu-node", "gpu-node-1", "gpu-node-2"] {
        s.create_node(n, &[("kubernetes.io/hostname", n)]);
    }
    let node = |n: &str| format!("/api/v1/nodes/{n}");
    let merge = |n: &str, manager: &str, labels: serde_json::Value| {
        s.admin_patch(manager, &node(n), &json!({"metadata": {"labels": labels}}));
    };
    merge(
        "gpu-node-1",
        "nfd-master",
        json!({fnk("pci-10de.present"): "true", fnk("pci-0302_10de.present"): "true"}),
    );
    merge(
        "gpu-node-1",
        "gpu-feature-discovery",
        json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
    );
    let apply = |n: &str, metadata: serde_json::Value| {
        let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": metadata});
        let a = s.apply(&admin, "gpu-labeler", &node(n), &body, false);
        assert!(a.ok(), "{}", a.body);
    };
    apply(
        "gpu-node-1",
        json!({"name": "gpu-node-1",
               "labels": {fnk("gpu.present"): "true", fnk("gpu.product"): "NVIDIA-H100-80GB-HBM3",
                          fnk("pci-0302_10de.present"): "true"},
               "annotations": {"feature.node.kubernetes.io/gpu.pool": "h100-a"}}),
    );
    apply(
        "gpu-node-2",
        json!({"name": "gpu-node-2", "labels": {fnk("gpu.present"): "true"}}),
    );
    for (n, manager) in NODEFEATURE_OWNERS {
        let object = nodefeature(n);
        let a = s.apply(&admin, manager, &kube::object_path(&object), &object, false);
        assert!(a.ok(), "{}", a.body);
    }
    s
}

/// Verb and URI of each request `prune` made, as the server logged them.
fn prune_requests(server: &KubeApiServer, from: usize) -> Vec<String> {
    server.requests()[from..]
        .iter()
        .filter(|r| r.user_agent.starts_with("gpu-labeler/"))
        .map(|r| format!("{} {}", r.verb, r.uri))
        .collect()
}

#[test]
fn prune_removes_what_gpu_labeler_alone_owns_and_nothing_else() {
    let server = real_cluster();
    let kubeconfig = server.kubeconfig(&Who::prune());
    let k = kubeconfig.to_str().unwrap();
    let all = ["prune", "--kubeconfig", k, "--all-nodes"];
    let with_nf = [&all[..], &["--nodefeature-namespace", NS]].concat();
    let before: Vec<_> = ["cpu-node", "gpu-node-1", "gpu-node-2"]
        .iter()
        .map(|n| server.labels(n))
        .collect();

    // The dry run reads, and writes nothing.
    let from = server.requests().len();
    let dry = [&with_nf[..], &["--dry-run"]].concat();
    let (code, stdout, stderr) = gpu_labeler(&dry);
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (4, PLAN, ""));
    let nf = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpu-labeler/nodefeatures";
    // Both runs list the nodes, ask which DRA version is served and list its DeviceTaintRules,
    // then read the CPU node and its NodeFeature.
    let listing = [
        "LIST /api/v1/nodes?limit=500".to_string(),
        "GET /apis/resource.k8s.io/v1".into(),
        "GET /apis/resource.k8s.io/v1beta2".into(),
        format!("LIST {DEVICE_TAINT_RULES}"),
        "GET /api/v1/nodes/cpu-node".into(),
        format!("GET {nf}/cpu-node"),
    ];
    let dry_requests = [
        "GET /api/v1/nodes/gpu-node-1".to_string(),
        format!("GET {nf}/gpu-node-1"),
        "GET /api/v1/nodes/gpu-node-2".into(),
        format!("GET {nf}/gpu-node-2"),
    ];
    assert_eq!(
        prune_requests(&server, from),
        [&listing[..], &dry_requests[..]].concat()
    );
    let unchanged: Vec<_> = ["cpu-node", "gpu-node-1", "gpu-node-2"]
        .iter()
        .map(|n| server.labels(n))
        .collect();
    assert_eq!(unchanged, before);

    // The prune does what the dry run said.
    let from = server.requests().len();
    let (code, stdout, stderr) = gpu_labeler(&with_nf);
    let done = PLAN
        .replace("would be removed", "removed")
        .replace("would stay", "stays")
        .replace("would be deleted", "deleted")
        .replace(" (dry run: nothing changed)", "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (0, done.as_str(), "")
    );
    let pruned = [
        "GET /api/v1/nodes/gpu-node-1".to_string(),
        "APPLY /api/v1/nodes/gpu-node-1?fieldManager=gpu-labeler".into(),
        format!("GET {nf}/gpu-node-1"),
        format!("DELETE {nf}/gpu-node-1"),
        "GET /api/v1/nodes/gpu-node-2".into(),
        "APPLY /api/v1/nodes/gpu-node-2?fieldManager=gpu-labeler".into(),
        format!("GET {nf}/gpu-node-2"),
    ];
    assert_eq!(
        prune_requests(&server, from),
        [&listing[..], &pruned[..]].concat()
    );
    assert_eq!(
        server.labels("gpu-node-1"),
        map(&[
            ("kubernetes.io/hostname", "gpu-node-1"),
            (&fnk("pci-0302_10de.present"), "true"),
            (&fnk("pci-10de.present"), "true"),
            ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
        ])
    );
    assert_eq!(
        server.labels("gpu-node-2"),
        map(&[("kubernetes.io/hostname", "gpu-node-2")])
    );
    assert_eq!(server.labels("cpu-node"), before[0]);
    let n1 = server.node("gpu-node-1");
    assert_eq!(n1["metadata"]["annotations"], serde_json::Value::Null);
    assert!(
        !server
            .label_owners("gpu-node-1")
            .keys()
            .any(|m| m.starts_with("gpu-labeler/"))
    );
    let left: Vec<(String, String)> = server.get(nf)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            (
                m["name"].as_str().unwrap().to_string(),
                m["managedFields"][0]["manager"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(left, vec![("gpu-node-2".into(), "nfd-worker".into())]);

    // Again: nothing of gpu-labeler's is left, and nothing is written.
    let from = server.requests().len();
    let (code, stdout, _) = gpu_labeler(&with_nf);
    assert_eq!(
        (code, stdout.as_str()),
        (
            0,
            "node cpu-node:\n  nothing of gpu-labeler's\n\
             node gpu-node-1:\n  nothing of gpu-labeler's\n\
             node gpu-node-2:\n  nothing of gpu-labeler's\n\
             3 node(s), 0 with something of gpu-labeler's\n"
        )
    );
    assert!(
        server.requests()[from..].iter().all(|r| !r.is_write()),
        "{:?}",
        prune_requests(&server, from)
    );
    let (code, stdout, _) = gpu_labeler(&[&all[..], &["--dry-run", "-o", "json"]].concat());
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(code, 0);
    assert_eq!(
        v,
        json!({"dryRun": true, "nodes": [
            {"node": "cpu-node", "keys": [], "nodeFeature": null, "error": null},
            {"node": "gpu-node-1", "keys": [], "nodeFeature": null, "error": null},
            {"node": "gpu-node-2", "keys": [], "nodeFeature": null, "error": null},
        ]})
    );
}

#[test]
fn prune_one_node_only_nodefeatures_and_the_errors() {
    let server = cluster();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &server.url());
    let k = kubeconfig.to_str().unwrap();
    let (code, stdout, stderr) = gpu_labeler(&[
        "prune",
        "--kubeconfig",
        k,
        "--node-name",
        "gone",
        "-o",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(code, 3);
    // The error where errors go, besides the report's own field.
    assert_eq!(
        stderr,
        "error: node gone: reading Node gone: 404 NotFound: nodes \"gone\" not found\n"
    );
    assert_eq!(
        v,
        json!({"dryRun": false, "nodes": [{"node": "gone", "keys": [], "nodeFeature": null,
            "error": "reading Node gone: 404 NotFound: nodes \"gone\" not found"}]})
    );
    // One Node by name, dry run, JSON: what the DaemonSet's own pod would take off its Node.
    let (code, stdout, _) = gpu_labeler(&[
        "prune",
        "--kubeconfig",
        k,
        "--node-name",
        "gpu-node-2",
        "--dry-run",
        "-o",
        "json",
    ]);
    assert_eq!(code, 4);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap(),
        json!({"dryRun": true, "nodes": [{"node": "gpu-node-2", "keys": [
            {"kind": "label", "key": fnk("gpu.present"), "value": "true"}],
            "nodeFeature": null, "error": null}]})
    );
    // Back from the nodefeature sink to the node sink: the objects go, the labels stay.
    let labels_before = server.labels("gpu-node-1");
    let (code, stdout, _) = gpu_labeler(&[
        "prune",
        "--kubeconfig",
        k,
        "--all-nodes",
        "--nodefeature-namespace",
        NS,
        "--nodefeatures-only",
    ]);
    assert_eq!(
        (code, stdout.as_str()),
        (
            0,
            "node cpu-node:\n  nothing of gpu-labeler's\n\
             node gpu-node-1:\n- nodefeature gpu-labeler/gpu-node-1: deleted\n\
             node gpu-node-2:\n  nothing of gpu-labeler's\n\
             3 node(s), 1 with something of gpu-labeler's\n"
        )
    );
    assert_eq!(server.labels("gpu-node-1"), labels_before);
    let left: Vec<(String, String)> = server.with(|s| s.nodefeatures.keys().cloned().collect());
    assert_eq!(left, vec![(NS.into(), "gpu-node-2".into())]);

    let (code, stdout, stderr) = gpu_labeler(&["prune", "--kubeconfig", k]);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            2,
            "",
            "error: prune needs --node-name (NODE_NAME) or --all-nodes\n"
        )
    );
}

fn yaml_docs(rel: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(repo().join(rel)).unwrap();
    text.split("\n---\n")
        .map(|d| serde_saphyr::from_str(d).unwrap_or_else(|e| panic!("{rel}: {e}")))
        .collect()
}

/// The shipped uninstall Job (deploy/prune), run with its own args and its own service account
/// on Kubernetes' own API server under its admission policy, where gpu-labeler also left a
/// taint and the `GPUHealthy` condition: it prunes the cluster, and the requests it makes are
/// exactly what its ClusterRole and Role grant (no more, no less).
#[test]
fn the_shipped_prune_job_needs_exactly_the_rbac_it_ships_with() {
    let job = yaml_docs("deploy/prune/job.yaml").remove(0);
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let mut args: Vec<String> = serde_json::from_value(container["args"].clone()).unwrap();
    let server = real_cluster();
    let admin = Who::admin();
    let taint = json!({"key": fnk("gpu-unhealthy"), "value": "true", "effect": "NoSchedule"});
    let a = server.merge_patch(
        &admin,
        "gpu-labeler",
        "/api/v1/nodes/gpu-node-2",
        &json!({"metadata": {"annotations": {
                    "gpu-labeler.feature.node.kubernetes.io/taints":
                        format!("{}=true:NoSchedule", fnk("gpu-unhealthy"))}},
                "spec": {"taints": [taint]}}),
    );
    assert!(a.ok(), "{}", a.body);
    let a = server.request(
        &admin,
        "PATCH",
        "/api/v1/nodes/gpu-node-2/status?fieldManager=gpu-labeler",
        Some((
            "application/strategic-merge-patch+json",
            &json!({"status": {"conditions": [{"type": "GPUHealthy", "status": "False"}]}}),
        )),
    );
    assert!(a.ok(), "{}", a.body);
    // A DRA device taint the agent wrote for one of the node's GPUs (publish.deviceTaints).
    let rule = json!({
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": "gpu-labeler-gpu-node-2-0000-3b-00-0",
            "labels": {
                "app.kubernetes.io/managed-by": "gpu-labeler",
                "gpu-labeler.feature.node.kubernetes.io/node": "gpu-node-2",
            },
        },
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "gpu-node-2", "device": "gpu-1"},
            "taint": {"key": fnk("gpu-unhealthy"), "value": "ecc", "effect": "NoSchedule"},
        },
    });
    let rule_path =
        "/apis/resource.k8s.io/v1beta2/devicetaintrules/gpu-labeler-gpu-node-2-0000-3b-00-0";
    let a = server.apply(&admin, "gpu-labeler", rule_path, &rule, false);
    assert!(a.ok(), "{}", a.body);
    // The Job's own account, under its own policy.
    let kubeconfig = server.kubeconfig(&Who::prune());
    args.push(format!("--kubeconfig={}", kubeconfig.display()));
    let from = server.requests().len();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, stderr) = gpu_labeler(&argv);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        server.labels("gpu-node-2"),
        map(&[("kubernetes.io/hostname", "gpu-node-2")])
    );
    let n2 = server.node("gpu-node-2");
    assert_eq!(
        (&n2["spec"]["taints"], &n2["status"]["conditions"]),
        (&serde_json::Value::Null, &serde_json::Value::Null),
        "{n2}"
    );
    // The device taint went with it.
    assert_eq!(
        server.get("/apis/resource.k8s.io/v1beta2/devicetaintrules")["items"],
        json!([])
    );
    let nf = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpu-labeler/nodefeatures";
    let left: Vec<String> = server.get(nf)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(left, vec!["gpu-node-2".to_string()]);

    // (namespace or "" for cluster scope, group, resource, verb) of each request.
    let used: std::collections::BTreeSet<(String, String, String, String)> = server.requests()
        [from..]
        .iter()
        .filter(|r| r.user_agent.starts_with("gpu-labeler/"))
        .map(|r| {
            let path = r.uri.split('?').next().unwrap();
            let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
            let s = |x: &str| x.to_string();
            let verb = match r.verb.as_str() {
                "APPLY" | "PATCH" => "patch",
                v => &v.to_lowercase(),
            };
            match &parts[..] {
                // API discovery: every authenticated user may read it (system:discovery).
                ["apis", _, _] => (s(""), s(""), s("(discovery)"), s(verb)),
                ["api", "v1", "nodes"] | ["api", "v1", "nodes", _] => {
                    (s(""), s(""), s("nodes"), s(verb))
                }
                ["apis", g, _, res] | ["apis", g, _, res, _] => (s(""), s(g), s(res), s(verb)),
                ["api", "v1", "nodes", _, sub] => (s(""), s(""), format!("nodes/{sub}"), s(verb)),
                ["apis", g, _, "namespaces", ns, res, _] => (s(ns), s(g), s(res), s(verb)),
                other => panic!("unexpected request {other:?}"),
            }
        })
        .collect();
    let mut granted = std::collections::BTreeSet::new();
    for d in yaml_docs("deploy/prune/rbac.yaml") {
        let ns = match d["kind"].as_str().unwrap() {
            "ClusterRole" => String::new(),
            "Role" => d["metadata"]["namespace"].as_str().unwrap().to_string(),
            _ => continue,
        };
        for rule in d["rules"].as_array().unwrap() {
            for g in rule["apiGroups"].as_array().unwrap() {
                for res in rule["resources"].as_array().unwrap() {
                    for v in rule["verbs"].as_array().unwrap() {
                        granted.insert((
                            ns.clone(),
                            g.as_str().unwrap().to_string(),
                            res.as_str().unwrap().to_string(),
                            v.as_str().unwrap().to_string(),
                        ));
                    }
                }
            }
        }
    }
    granted.insert((
        String::new(),
        String::new(),
        "(discovery)".into(),
        "get".into(),
    ));
    assert_eq!(used, granted);
}

const PRUNE_LABELS: &str = "gpu-labeler prune may only remove labels that gpu-labeler alone owns";
const PRUNE_ANNOTATIONS: &str =
    "gpu-labeler prune may only remove annotations that gpu-labeler alone owns";
const PRUNE_MANAGED: &str = "gpu-labeler prune may not change the managedFields of other managers, nor claim keys for gpu-labeler";
const PRUNE_TAINTS: &str = "gpu-labeler prune may only remove the taints in feature.node.kubernetes.io and its sub-domains that gpu-labeler's tracking annotation lists";
const PRUNE_CONDITION: &str =
    "gpu-labeler prune may only remove the GPUHealthy condition of a Node";
const PRUNE_SPEC: &str =
    "gpu-labeler prune never changes a Node's spec (but for removing its taints) or status";
const TRACKING: &str = "gpu-labeler.feature.node.kubernetes.io/taints";

/// The prune account's policy (deploy/prune/admission-policy.yaml) on Kubernetes' own API
/// server, each row a real request of the prune's token after the rows before it, on a Node
/// whose keys each manager set through its own requests: the kubelet's label and `Ready`, an
/// admin's taint, NFD's label (one shared with gpu-labeler) and NFD's taint in NFD's own
/// namespace, and gpu-labeler's labels, taint, `GPUHealthy` condition and a tracking annotation
/// that also lists the admin's taint (planted through the agent's token). Only what
/// gpu-labeler wrote, and that the agent may write, comes off; nothing is added or changed.
#[test]
fn the_prune_policy_admits_removing_ours_and_nothing_else() {
    let s = KubeApiServer::with_policy(&kube::shipped_prune_policy());
    let admin = Who::admin();
    s.create_node("n1", &[("kubernetes.io/hostname", "n1")]);
    s.create_node("n2", &[("kubernetes.io/hostname", "n2")]);
    let node = "/api/v1/nodes/n1";
    let status = "/api/v1/nodes/n1/status";
    let taint =
        |key: &str, value: &str| json!({"key": key, "value": value, "effect": "NoSchedule"});
    let admins = taint("dedicated", "ml");
    let nfds = taint(&fnk("nfd-taint"), "true");
    let ours = taint(&fnk("gpu-unhealthy"), "true");
    let ok = |a: kube::Answer| assert!(a.ok(), "{}", a.body);
    ok(s.merge_patch(
        &admin,
        "kubectl-taint",
        node,
        &json!({"spec": {"taints": [admins]}}),
    ));
    ok(s.merge_patch(
        &admin,
        "nfd-master",
        node,
        &json!({"metadata": {"labels": {fnk("pci-10de.present"): "true", fnk("gpu.shared"): "1"}},
                "spec": {"taints": [admins, nfds]}}),
    ));
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1",
        "labels": {fnk("gpu.present"): "true", fnk("gpu.shared"): "1"}}});
    ok(s.apply(&admin, "gpu-labeler", node, &body, false));
    ok(s.merge_patch(
        &admin,
        "gpu-labeler",
        node,
        &json!({"metadata": {"annotations": {TRACKING:
                    format!("{}=true:NoSchedule,dedicated=ml:NoSchedule", fnk("gpu-unhealthy"))}},
                "spec": {"taints": [admins, nfds, ours]}}),
    ));
    let smp = |who: &Who, manager: &str, path: &str, patch: Value| {
        s.request(
            who,
            "PATCH",
            &format!("{path}?fieldManager={manager}"),
            Some(("application/strategic-merge-patch+json", &patch)),
        )
    };
    // Each condition set by its own manager.
    let set_condition = |manager: &str, path: &str, condition: Value| {
        ok(smp(
            &admin,
            manager,
            path,
            json!({"status": {"conditions": [condition]}}),
        ))
    };
    set_condition(
        "kubelet",
        status,
        json!({"type": "Ready", "status": "True", "reason": "KubeletReady"}),
    );
    set_condition(
        "gpu-labeler",
        status,
        json!({"type": "GPUHealthy", "status": "False", "reason": "GPUsDegraded"}),
    );
    // n2's GPUHealthy is another tool's.
    set_condition(
        "gpu-health-checker",
        "/api/v1/nodes/n2/status",
        json!({"type": "GPUHealthy", "status": "False"}),
    );

    let managed = s.node("n1")["metadata"]["managedFields"].clone();
    // The kubelet's condition as the server holds it, to compare with at the end.
    let kubelets: Vec<Value> = s.node("n1")["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "Ready")
        .cloned()
        .collect();
    let without_kubelets: Vec<Value> = managed
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["manager"] != "kubelet")
        .cloned()
        .collect();
    let mut claimed = managed.clone();
    for m in claimed.as_array_mut().unwrap() {
        if m["manager"] == "gpu-labeler" && m["operation"] == "Apply" {
            m["fieldsV1"]["f:metadata"]["f:labels"]["f:kubernetes.io/hostname"] = json!({});
        }
    }
    let delete_condition =
        |t: &str| json!({"status": {"conditions": [{"type": t, "$patch": "delete"}]}});
    let prune = Who::prune();
    let merge = |patch: Value| s.merge_patch(&prune, "gpu-labeler", node, &patch);
    let rows: Vec<(&str, kube::Answer, Result<(), String>)> = vec![
        (
            "the admin's taint, which the planted annotation lists",
            merge(json!({"spec": {"taints": [nfds, ours]}})),
            Err(PRUNE_TAINTS.into()),
        ),
        (
            "NFD's taint, in NFD's namespace but not listed",
            merge(json!({"spec": {"taints": [admins, ours]}})),
            Err(PRUNE_TAINTS.into()),
        ),
        (
            "a taint added",
            merge(json!({"spec": {"taints": [admins, nfds, ours, taint(&fnk("x"), "1")]}})),
            Err(PRUNE_TAINTS.into()),
        ),
        (
            "the kubelet's label",
            merge(json!({"metadata": {"labels": {"kubernetes.io/hostname": null}}})),
            Err(PRUNE_LABELS.into()),
        ),
        (
            "a label gpu-labeler shares with NFD",
            merge(json!({"metadata": {"labels": {fnk("gpu.shared"): null}}})),
            Err(PRUNE_LABELS.into()),
        ),
        (
            "NFD's label",
            merge(json!({"metadata": {"labels": {fnk("pci-10de.present"): null}}})),
            Err(PRUNE_LABELS.into()),
        ),
        (
            "gpu-labeler's label changed",
            merge(json!({"metadata": {"labels": {fnk("gpu.present"): "false"}}})),
            Err(PRUNE_LABELS.into()),
        ),
        (
            "a label added in gpu-labeler's namespace",
            merge(json!({"metadata": {"labels": {fnk("gpu.count"): "8"}}})),
            Err(PRUNE_LABELS.into()),
        ),
        (
            "an annotation added",
            merge(json!({"metadata": {"annotations": {fnk("x"): "1"}}})),
            Err(PRUNE_ANNOTATIONS.into()),
        ),
        (
            "the kubelet's managedFields entry dropped",
            merge(json!({"metadata": {"managedFields": without_kubelets}})),
            Err(PRUNE_MANAGED.into()),
        ),
        (
            "the kubelet's label claimed for gpu-labeler",
            merge(json!({"metadata": {"managedFields": claimed}})),
            Err(PRUNE_MANAGED.into()),
        ),
        (
            "the spec",
            merge(json!({"spec": {"unschedulable": true}})),
            Err(PRUNE_SPEC.into()),
        ),
        (
            "the kubelet's Ready",
            smp(&prune, "gpu-labeler", status, delete_condition("Ready")),
            Err(PRUNE_CONDITION.into()),
        ),
        (
            "GPUHealthy changed, not removed",
            smp(&prune, "gpu-labeler", status,
                json!({"status": {"conditions": [{"type": "GPUHealthy", "status": "True"}]}})),
            Err(PRUNE_CONDITION.into()),
        ),
        (
            "status.declaredFeatures",
            smp(&prune, "gpu-labeler", status, json!({"status": {"declaredFeatures": ["X"]}})),
            Err(PRUNE_CONDITION.into()),
        ),
        (
            "another tool's GPUHealthy (n2)",
            smp(&prune, "gpu-labeler", "/api/v1/nodes/n2/status", delete_condition("GPUHealthy")),
            Err(PRUNE_MANAGED.into()),
        ),
        (
            "a Node created",
            s.request(&prune, "POST", "/api/v1/nodes", Some(("application/json",
                &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n3"}})))),
            Err("gpu-labeler prune only removes what gpu-labeler wrote on Nodes; it may not CREATE a Node".into()),
        ),
        (
            "a Node deleted",
            s.request(&prune, "DELETE", "/api/v1/nodes/n2", None),
            Err("gpu-labeler prune only removes what gpu-labeler wrote on Nodes; it may not DELETE a Node".into()),
        ),
        // What prune itself sends: its labels released (server-side apply of nothing), its
        // taint and annotation removed, its condition removed.
        (
            "the labels gpu-labeler alone owns",
            s.apply(&prune, "gpu-labeler", node,
                &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}), false),
            Ok(()),
        ),
        (
            "gpu-labeler's taint and tracking annotation",
            merge(json!({"metadata": {"annotations": {TRACKING: null}},
                         "spec": {"taints": [admins, nfds]}})),
            Ok(()),
        ),
        (
            "gpu-labeler's GPUHealthy",
            smp(&prune, "gpu-labeler", status, delete_condition("GPUHealthy")),
            Ok(()),
        ),
    ];
    let got: Vec<(&str, Result<(), String>)> =
        rows.iter().map(|(w, a, _)| (*w, a.decision())).collect();
    let want: Vec<(&str, Result<(), String>)> =
        rows.iter().map(|(w, _, e)| (*w, e.clone())).collect();
    assert_eq!(got, want);
    let n1 = s.node("n1");
    assert_eq!(
        (
            s.labels("n1"),
            &n1["metadata"]["annotations"],
            &n1["spec"]["taints"],
            &n1["status"]["conditions"],
        ),
        (
            map(&[
                ("kubernetes.io/hostname", "n1"),
                (&fnk("gpu.shared"), "1"),
                (&fnk("pci-10de.present"), "true"),
            ]),
            &Value::Null,
            &json!([admins, nfds]),
            &json!(kubelets),
        )
    );
}
