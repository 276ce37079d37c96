//! What `kubectl apply -k deploy/` installs, checked against the real binary and the policy's
//! own expressions (CI also renders every kustomization and validates it against the Kubernetes
//! schemas: `.ci/check_deploy.py`).
//!
//! - The DaemonSet's container, run as the kubelet would run it (its args, its env with the
//!   downward API filled in, its ConfigMaps mounted at their paths), labels its Node on the
//!   test API server with exactly the labels the README promises, plus the example-rules component's rule.
//! - The ValidatingAdmissionPolicies, installed on a test API server built from Kubernetes' own
//!   code (tests/kube-apiserver: the real admission plugin, field manager and handlers), admit
//!   the agent's own writes and refuse a write of another Node, of a foreign label or
//!   annotation, of the spec, and a token without a node. Each row of the tables is a real
//!   request, by the agent's token or another user's, on a Node its managers made through
//!   their own requests (the managedFields are the real field manager's).

mod apiserver;
mod common;
mod kube;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use apiserver::Agent;
use kube::{KubeApiServer, Who};
use serde_json::{Value, json};

fn docs(rel: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(common::repo().join(rel)).unwrap();
    text.split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap_or_else(|e| panic!("{rel}: {e}")))
        .collect()
}

/// A ConfigMap of the base, with the example-rules component's keys merged in (its patch, as
/// kustomize applies it): the site this test deploys takes that component.
fn config_map(name: &str) -> BTreeMap<String, String> {
    let cm = docs("deploy/base/configmap.yaml")
        .into_iter()
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no ConfigMap {name}"));
    let mut data: BTreeMap<String, String> = serde_json::from_value(cm["data"].clone()).unwrap();
    for patch in docs("deploy/components/example-rules/rules.yaml") {
        if patch["metadata"]["name"] == name {
            let extra: BTreeMap<String, String> =
                serde_json::from_value(patch["data"].clone()).unwrap();
            data.extend(extra);
        }
    }
    data
}

/// Writes a ConfigMap's keys as files, as the kubelet mounts it.
fn mount_config_map(name: &str, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (key, text) in config_map(name) {
        std::fs::write(dir.join(key), text).unwrap();
    }
}

/// The fake NVML library's environment: it answers as `fixture` (tests/fixtures/nvml/).
fn fake_nvml_env(fixture: &str) -> [(&'static str, std::ffi::OsString); 1] {
    [(
        "FAKE_NVML_FIXTURE",
        common::nvml_fixture(fixture).into_os_string(),
    )]
}

/// One publish to node n1, its labels only (not DRA's: tests/daemon_dra.rs), no port taken.
const ONESHOT_N1: [&str; 7] = [
    "run",
    "--oneshot",
    "--no-dra",
    "--node-name",
    "n1",
    "--listen",
    "127.0.0.1:0",
];

#[test]
fn the_daemonset_as_deployed_labels_its_own_node() {
    const NODE: &str = "gpu-node-7";
    let ds = docs("deploy/base/agent/daemonset.yaml").remove(0);
    let pod = &ds["spec"]["template"]["spec"];
    let container = &pod["containers"][0];

    // The pod's filesystem: host paths and ConfigMaps where the manifest mounts them.
    let root = tempfile::tempdir().unwrap();
    let mut mounts: Vec<(String, PathBuf)> = Vec::new();
    for m in container["volumeMounts"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let at = m["mountPath"].as_str().unwrap().to_string();
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap();
        let local = if let Some(host) = volume["hostPath"]["path"].as_str() {
            // The node's /sys and /proc/modules: the Dell XE9680 fixture's.
            match host {
                "/sys" => common::sysfs_fixture(apiserver::MACHINE),
                "/proc/modules" => common::proc_fixture(apiserver::MACHINE).join("modules"),
                other => panic!("unexpected hostPath {other}"),
            }
        } else {
            let cm = volume["configMap"]["name"].as_str().unwrap();
            let dir = root.path().join(name);
            mount_config_map(cm, &dir);
            dir
        };
        assert!(local.exists(), "{local:?}");
        mounts.push((at, local));
    }
    // Longest mount path first, so /host/proc/modules is not taken for a file under /host/sys.
    mounts.sort_by_key(|(at, _)| std::cmp::Reverse(at.len()));
    let local_path = |p: &str| -> String {
        for (at, local) in &mounts {
            if let Some(rest) = p.strip_prefix(at.as_str()) {
                return format!("{}{rest}", local.display());
            }
        }
        // A directory above a file mount: --proc-root=/host/proc for /host/proc/modules.
        for (at, local) in &mounts {
            if let Some(rest) = at.strip_prefix(p)
                && rest.starts_with('/')
            {
                let local = local.display().to_string();
                return local[..local.len() - rest.len()].to_string();
            }
        }
        panic!("{p} is not under any mount");
    };
    let mut args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let a = a.as_str().unwrap();
            match a.split_once('=') {
                Some((flag @ ("--sysfs-root" | "--proc-root" | "--config" | "--rules"), p)) => {
                    format!("{flag}={}", local_path(p))
                }
                // Port 8080 may be taken on a test machine.
                Some(("--listen", _)) => "--listen=127.0.0.1:0".to_string(),
                _ => a.to_string(),
            }
        })
        .collect();

    // The environment the kubelet gives it: the downward API filled in.
    let mut env: Vec<(String, String)> = Vec::new();
    for e in container["env"].as_array().unwrap() {
        let value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            Some("spec.nodeName") => NODE.to_string(),
            Some("metadata.namespace") => ds["metadata"]["namespace"].as_str().unwrap().to_string(),
            Some(other) => panic!("unexpected fieldRef {other}"),
            None => e["value"].as_str().unwrap().to_string(),
        };
        env.push((e["name"].as_str().unwrap().to_string(), value));
    }
    assert_eq!(
        env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["NODE_NAME", "POD_NAMESPACE"]
    );

    // What the test adds: the API server (in a pod: the service account), the NVML library that
    // the NVIDIA runtime mounts (the fake one, with the Dell's 8x H100), the test's pci.ids, and
    // one cycle.
    // The Node as kubelet and NFD left it, on the test API server built from Kubernetes' own
    // code with the shipped Node policy: the real admission plugin decides each of the agent's
    // writes, made with a token bound to its node as the kubelet binds it.
    let server = server_with(&node_policy());
    let path = format!("/api/v1/nodes/{NODE}");
    server.create_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    let a = server.merge_patch(
        &Who::admin(),
        "nfd-master",
        &path,
        &json!({"metadata": {"labels": {"feature.node.kubernetes.io/cpu-model.vendor_id": "Intel"}}}),
    );
    assert!(a.ok(), "{}", a.body);
    let kubeconfig = server.kubeconfig(&Who::agent(NODE));
    args.extend([
        format!("--kubeconfig={}", kubeconfig.display()),
        format!(
            "--nvml-lib={}",
            common::fake_nvml_lib("nvidia_ml").display()
        ),
        format!("--pci-ids={}", common::pci_ids().display()),
        "--oneshot".to_string(),
    ]);
    let fixture = common::nvml_fixture("h100-8x");
    env.push((
        "FAKE_NVML_FIXTURE".into(),
        fixture.to_str().unwrap().to_string(),
    ));
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut agent = Agent::start(&args, &env_refs);
    assert_eq!(
        agent.wait_exit(Duration::from_secs(30)),
        0,
        "{}",
        agent.log_text()
    );

    let mut expected = common::h100_default_labels();
    expected.insert("kubernetes.io/hostname".into(), NODE.into());
    expected.insert(
        "feature.node.kubernetes.io/cpu-model.vendor_id".into(),
        "Intel".into(),
    );
    // The example-rules component's rule: every GPU has more than 64 GiB.
    expected.insert(
        "feature.node.kubernetes.io/gpu.class".into(),
        "large-memory".into(),
    );
    // The cluster serves resource.k8s.io and no DRA driver publishes the GPUs (docs/dra.md).
    for (k, v) in [("gpu.dra.coverage", "none"), ("gpu.dra.devices", "0")] {
        expected.insert(format!("feature.node.kubernetes.io/{k}"), v.into());
    }
    assert_eq!(server.labels(NODE), expected);

    // The site drops the example: the agent removes the label it owns, and the policy admits it.
    let rules_dir = mounts
        .iter()
        .find(|(at, _)| at.ends_with("/rules"))
        .map(|(_, local)| local.clone())
        .unwrap();
    std::fs::remove_file(rules_dir.join("example-gpu-classes.yaml")).unwrap();
    let mut agent = Agent::start(&args, &env_refs);
    assert_eq!(
        agent.wait_exit(Duration::from_secs(30)),
        0,
        "{}",
        agent.log_text()
    );
    expected.remove("feature.node.kubernetes.io/gpu.class");
    assert_eq!(server.labels(NODE), expected);

    // A stolen token's apply of NFD's own label is refused whole.
    let a = server.apply(
        &Who::agent(NODE),
        "gpu-labeler",
        &path,
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE,
                "labels": {"feature.node.kubernetes.io/cpu-model.vendor_id": "AMD"}}}),
        true,
    );
    assert_eq!(
        (a.code, a.message().as_str()),
        (
            403,
            "nodes \"gpu-node-7\" is forbidden: ValidatingAdmissionPolicy 'gpu-labeler-own-node' with binding 'gpu-labeler-own-node' denied request: gpu-labeler may only add labels in its own namespaces, and change or remove only the labels it owns"
        )
    );
    assert_eq!(server.labels(NODE), expected);
}

#[test]
fn the_shipped_configuration_and_rules_check_clean() {
    let dir = tempfile::tempdir().unwrap();
    mount_config_map("gpu-labeler-rules", dir.path());
    let run = common::run(["rules", "check", dir.path().to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "2 file(s) checked: 0 error(s), 0 warning(s)\n");
    mount_config_map("gpu-labeler-config", &dir.path().join("config"));
    let config = dir.path().join("config/config.yaml");
    gpu_labeler::config::Config::load(&config).expect("the example config loads");
}

// ---------------------------------------------------------------------------------------------
// The admission policy, as the real ValidatingAdmissionPolicy plugin of the test API server
// (tests/kube-apiserver) decides it.

/// The ValidatingAdmissionPolicy `name` of these documents and its Deny binding, as shipped.
fn policy_of(docs: &[Value], name: &str) -> Vec<Value> {
    let vap = docs
        .iter()
        .find(|d| d["kind"] == "ValidatingAdmissionPolicy" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no policy {name}"));
    let binding = docs
        .iter()
        .find(|d| {
            d["kind"] == "ValidatingAdmissionPolicyBinding" && d["spec"]["policyName"] == name
        })
        .unwrap_or_else(|| panic!("no binding of {name}"));
    assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
    assert_eq!(vap["spec"]["failurePolicy"], "Fail");
    vec![vap.clone(), binding.clone()]
}

fn node_policy() -> Vec<Value> {
    policy_of(
        &docs("deploy/base/admission-policy.yaml"),
        "gpu-labeler-own-node",
    )
}

/// The Node policy as deploy/components/nvidia-gfd patches it: its JSON patch (a `test` of the
/// variable's name, a `replace` of its expression) applied as kustomize applies it.
fn gfd_node_policy() -> Vec<Value> {
    patched_node_policy("nvidia-gfd")
}

/// The Node policy as a component's JSON patch changes it (`test` a variable's name, `replace`
/// its expression): nvidia-gfd's `allowedKey`, health-condition's `allowedConditionType`.
fn patched_node_policy(component: &str) -> Vec<Value> {
    policy_of(
        &kube::shipped_node_policy(Some(component)),
        "gpu-labeler-own-node",
    )
}

fn nodefeature_policy() -> Vec<Value> {
    policy_of(
        &docs("deploy/components/nodefeature/admission-policy.yaml"),
        "gpu-labeler-own-nodefeature",
    )
}

/// A test API server with `policy` installed and enforced.
fn server_with(policy: &[Value]) -> KubeApiServer {
    KubeApiServer::with_policy(policy)
}

/// Who asks for what: user, the node bound into the token, operation, resource (`nodes`,
/// `nodes/status`, `nfd.k8s-sigs.io/nodefeatures`), the object's name.
#[derive(Clone, Copy)]
struct Request<'a> {
    user: &'a str,
    node_claim: Option<&'a str>,
    operation: &'a str,
    resource: &'a str,
    name: &'a str,
}

impl Request<'_> {
    /// The token: a service account's bound to the node it claims, or another user's.
    fn who(&self) -> Who {
        if self.user.starts_with("system:serviceaccount:") {
            Who::service_account(self.user, self.node_claim)
        } else {
            Who::user(self.user)
        }
    }
}
const SA: &str = "system:serviceaccount:gpu-labeler:gpu-labeler";

/// A Node as the API server holds it: labels and annotations with their owners in
/// `managedFields` (FieldsV1: `f:metadata` -> `f:labels` -> `f:<key>`), spec and status.
#[derive(Clone)]
struct NodeState {
    /// key -> (value, owners)
    labels: BTreeMap<String, (String, Vec<&'static str>)>,
    annotations: BTreeMap<String, (String, Vec<&'static str>)>,
    finalizers: Vec<String>,
    owner_references: Vec<Value>,
    spec: Value,
    status: Value,
    /// The agent's request that made this state from the one before, when it is an apply or an
    /// update of labels; `None` for a state changed by hand (the request then sends the
    /// difference, and forged ownership as a `managedFields` of its own).
    op: Option<Op>,
}

#[derive(Clone)]
enum Op {
    Apply(Vec<(String, String)>),
    Update(Vec<(String, String)>, Vec<String>),
}

/// Each manager's operation, as the real field manager records it.
fn operation_of(manager: &str) -> &'static str {
    if manager == "gpu-labeler" || manager == "nfd-master" {
        "Apply"
    } else {
        "Update"
    }
}

impl NodeState {
    /// Server-side apply by gpu-labeler of exactly these labels (as the real field manager does
    /// it): each is set and owned by gpu-labeler; a label it owned and no longer applies loses its
    /// owner, and goes when nobody else owns it.
    fn apply(&self, labels: &[(&str, &str)]) -> NodeState {
        let mut next = self.clone();
        for (key, (_, owners)) in next.labels.iter_mut() {
            if !labels.iter().any(|(k, _)| k == key) {
                owners.retain(|o| *o != "gpu-labeler");
            }
        }
        next.labels.retain(|_, (_, owners)| !owners.is_empty());
        for (k, v) in labels {
            let entry = next
                .labels
                .entry(k.to_string())
                .or_insert_with(|| (v.to_string(), Vec::new()));
            entry.0 = v.to_string();
            if !entry.1.contains(&"gpu-labeler") {
                entry.1.push("gpu-labeler");
            }
        }
        next.op = Some(Op::Apply(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ));
        next
    }

    /// An Update (a PUT or merge patch) by gpu-labeler's token: the values as given; the field
    /// manager gives every changed or added key to the updater (here gpu-labeler) alone.
    fn update(&self, set: &[(&str, &str)], remove: &[&str]) -> NodeState {
        let mut next = self.clone();
        for (k, v) in set {
            let entry = next
                .labels
                .entry(k.to_string())
                .or_insert_with(|| (String::new(), Vec::new()));
            if entry.0 != *v || entry.1.is_empty() {
                entry.0 = v.to_string();
                entry.1 = vec!["gpu-labeler"];
            }
        }
        for k in remove {
            next.labels.remove(*k);
        }
        next.op = Some(Op::Update(
            set.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            remove.iter().map(|k| k.to_string()).collect(),
        ));
        next
    }
}

fn owned(pairs: &[(&str, &str, &[&'static str])]) -> BTreeMap<String, (String, Vec<&'static str>)> {
    pairs
        .iter()
        .map(|(k, v, o)| (k.to_string(), (v.to_string(), o.to_vec())))
        .collect()
}

/// A GPU node as it is next to NFD and the GPU Operator: kubelet's labels, NFD's, the GPU
/// Operator's, an admin's, and gpu-labeler's own (one of them also applied by nfd-master).
fn gpu_node() -> NodeState {
    NodeState {
        labels: owned(&[
            ("kubernetes.io/hostname", "n1", &["kubelet"]),
            ("team", "ml", &["kubectl-label"]),
            (
                "feature.node.kubernetes.io/cpu-model.vendor_id",
                "Intel",
                &["nfd-master"],
            ),
            (
                "feature.node.kubernetes.io/pci-0302_10de.present",
                "true",
                &["nfd-master", "gpu-labeler"],
            ),
            (
                "feature.node.kubernetes.io/gpu.count",
                "8",
                &["gpu-labeler"],
            ),
            (
                "feature.node.kubernetes.io/gpu.memory",
                "81559",
                &["gpu-labeler"],
            ),
            ("nvidia.com/gpu.deploy.driver", "true", &["gpu-operator"]),
            ("nvidia.com/mig.config", "all-disabled", &["gpu-operator"]),
        ]),
        annotations: owned(&[(
            "node.alpha.kubernetes.io/ttl",
            "0",
            &["kube-controller-manager"],
        )]),
        finalizers: Vec::new(),
        owner_references: Vec::new(),
        spec: json!({"podCIDR": "10.0.7.0/24"}),
        status: json!({"allocatable": {"nvidia.com/gpu": "8"}}),
        op: None,
    }
}

/// gpu-labeler's own labels on the node, as it applies them each cycle.
const OURS: &[(&str, &str)] = &[
    ("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
    ("feature.node.kubernetes.io/gpu.count", "8"),
    ("feature.node.kubernetes.io/gpu.memory", "81559"),
];

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut v = OURS.to_vec();
    v.extend_from_slice(extra);
    v
}

const LABELS_DENIED: &str = "gpu-labeler may only add labels in its own namespaces, and change or remove only the labels it owns";
const TAINTS_DENIED: &str = "gpu-labeler may only add, change or remove taints in feature.node.kubernetes.io and its sub-domains";
const SPEC_DENIED: &str = "gpu-labeler never changes a Node's spec (but for its taints) or status";
const MANAGED_DENIED: &str = "gpu-labeler may not change the managedFields of other managers, nor claim keys outside its namespaces";

/// One request of the table: what it is, who sends it, the Node before and after; the decision.
struct Row {
    what: &'static str,
    request: Request<'static>,
    before: NodeState,
    after: Option<NodeState>,
    expected: Result<(), &'static str>,
}

fn own_node(what: &'static str, after: NodeState, expected: Result<(), &'static str>) -> Row {
    Row {
        what,
        request: Request {
            user: SA,
            node_claim: Some("n1"),
            operation: "UPDATE",
            resource: "nodes",
            name: "n1",
        },
        before: gpu_node(),
        after: Some(after),
        expected,
    }
}

/// Puts `state` on the server as its managers made it, each through its own requests as the
/// admin (the policy concerns only gpu-labeler's service accounts): kubelet creates the Node and
/// its status, an `Apply` manager applies its keys, an `Update` manager merge-patches them.
fn put_node(s: &KubeApiServer, name: &str, state: &NodeState) {
    let admin = Who::admin();
    let path = format!("/api/v1/nodes/{name}");
    s.delete(&path);
    let owned_by = |m: &BTreeMap<String, (String, Vec<&'static str>)>, manager: &str| {
        m.iter()
            .filter(|(_, (_, owners))| owners.contains(&manager))
            .map(|(k, (v, _))| (k.clone(), json!(v)))
            .collect::<serde_json::Map<String, Value>>()
    };
    let mut meta = json!({"name": name, "labels": owned_by(&state.labels, "kubelet")});
    if !state.finalizers.is_empty() {
        meta["finalizers"] = json!(state.finalizers);
    }
    if !state.owner_references.is_empty() {
        meta["ownerReferences"] = json!(state.owner_references);
    }
    let a = s.request(
        &admin,
        "POST",
        "/api/v1/nodes?fieldManager=kubelet",
        Some((
            "application/json",
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": state.spec}),
        )),
    );
    assert!(a.ok(), "create {name}: {}", a.body);
    let a = s.merge_patch(
        &admin,
        "kubelet",
        &format!("{path}/status"),
        &json!({"status": state.status}),
    );
    assert!(a.ok(), "status of {name}: {}", a.body);
    let mut managers: Vec<&str> = state
        .labels
        .values()
        .chain(state.annotations.values())
        .flat_map(|(_, owners)| owners.iter().copied())
        .filter(|m| *m != "kubelet")
        .collect();
    managers.sort();
    managers.dedup();
    for m in managers {
        let meta = json!({"name": name, "labels": owned_by(&state.labels, m),
                          "annotations": owned_by(&state.annotations, m)});
        let a = if operation_of(m) == "Apply" {
            s.apply(
                &admin,
                m,
                &path,
                &json!({"apiVersion": "v1", "kind": "Node", "metadata": meta}),
                false,
            )
        } else {
            s.merge_patch(&admin, m, &path, &json!({"metadata": meta}))
        };
        assert!(a.ok(), "{m}'s keys on {name}: {}", a.body);
    }
}

/// The managedFields of the Node on the server with the ownership of `before` changed to that
/// of `after` (a key taken from or given to a manager), as a stolen token would forge them.
fn forged_managed_fields(
    s: &KubeApiServer,
    name: &str,
    before: &NodeState,
    after: &NodeState,
) -> Value {
    let mut managed = s.node(name)["metadata"]["managedFields"].clone();
    let entries = managed.as_array_mut().unwrap();
    for (field, b, a) in [
        ("f:labels", &before.labels, &after.labels),
        ("f:annotations", &before.annotations, &after.annotations),
    ] {
        let keys: std::collections::BTreeSet<&String> = b.keys().chain(a.keys()).collect();
        for key in keys {
            let was: Vec<&str> = b.get(key).map(|(_, o)| o.clone()).unwrap_or_default();
            let now: Vec<&str> = a.get(key).map(|(_, o)| o.clone()).unwrap_or_default();
            for m in was.iter().filter(|m| !now.contains(m)) {
                for e in entries.iter_mut().filter(|e| e["manager"] == *m) {
                    if let Some(set) = e["fieldsV1"]["f:metadata"][field].as_object_mut() {
                        set.remove(&format!("f:{key}"));
                    }
                }
            }
            for m in now.iter().filter(|m| !was.contains(m)) {
                let i = match entries.iter().position(|e| e["manager"] == *m) {
                    Some(i) => i,
                    None => {
                        entries.push(json!({"manager": m, "operation": operation_of(m), "apiVersion": "v1",
                                            "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}));
                        entries.len() - 1
                    }
                };
                let meta = &mut entries[i]["fieldsV1"]["f:metadata"];
                if meta[field].is_null() {
                    meta[field] = json!({".": {}});
                }
                meta[field][format!("f:{key}")] = json!({});
            }
        }
    }
    managed
}

/// Sends the row's request as its user: the agent's apply or update of labels, a create, a
/// delete, a status change, or the difference between the states as a merge patch (forged
/// ownership as managedFields built from the server's own).
fn send(s: &KubeApiServer, row: &Row) -> kube::Answer {
    let r = row.request;
    let who = r.who();
    let path = format!("/api/v1/nodes/{}", r.name);
    let label_values = |st: &NodeState| -> serde_json::Map<String, Value> {
        st.labels
            .iter()
            .map(|(k, (v, _))| (k.clone(), json!(v)))
            .collect()
    };
    match (r.operation, r.resource) {
        ("CREATE", "nodes") => {
            let meta = json!({"name": r.name, "labels": label_values(row.after.as_ref().unwrap())});
            s.request(
                &who,
                "POST",
                "/api/v1/nodes?fieldManager=gpu-labeler",
                Some((
                    "application/json",
                    &json!({"apiVersion": "v1", "kind": "Node", "metadata": meta}),
                )),
            )
        }
        ("DELETE", "nodes") => s.request(&who, "DELETE", &path, None),
        ("UPDATE", "nodes/status") => s.merge_patch(
            &who,
            "gpu-labeler",
            &format!("{path}/status"),
            &json!({"status": row.after.as_ref().unwrap().status}),
        ),
        ("UPDATE", "nodes") => {
            let after = row.after.as_ref().unwrap();
            match &after.op {
                Some(Op::Apply(labels)) => {
                    let labels: serde_json::Map<String, Value> =
                        labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": r.name, "labels": labels}});
                    s.apply(&who, "gpu-labeler", &path, &body, true)
                }
                Some(Op::Update(set, remove)) => {
                    let mut labels: serde_json::Map<String, Value> =
                        set.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                    labels.extend(remove.iter().map(|k| (k.clone(), Value::Null)));
                    s.merge_patch(
                        &who,
                        "gpu-labeler",
                        &path,
                        &json!({"metadata": {"labels": labels}}),
                    )
                }
                None => {
                    let b = &row.before;
                    let mut meta = serde_json::Map::new();
                    let values = |m: &BTreeMap<String, (String, Vec<&'static str>)>| -> BTreeMap<String, String> {
                        m.iter().map(|(k, (v, _))| (k.clone(), v.clone())).collect()
                    };
                    if values(&after.annotations) != values(&b.annotations) {
                        meta.insert("annotations".into(), json!(values(&after.annotations)));
                    }
                    if values(&after.labels) != values(&b.labels) {
                        meta.insert("labels".into(), json!(values(&after.labels)));
                    }
                    let owners = |m: &BTreeMap<String, (String, Vec<&'static str>)>| -> Vec<(String, Vec<&'static str>)> {
                        m.iter().map(|(k, (_, o))| (k.clone(), o.clone())).collect()
                    };
                    if meta.is_empty()
                        && (owners(&after.labels) != owners(&b.labels)
                            || owners(&after.annotations) != owners(&b.annotations))
                    {
                        meta.insert(
                            "managedFields".into(),
                            forged_managed_fields(s, r.name, b, after),
                        );
                    }
                    if after.finalizers != b.finalizers {
                        meta.insert("finalizers".into(), json!(after.finalizers));
                    }
                    if after.owner_references != b.owner_references {
                        meta.insert("ownerReferences".into(), json!(after.owner_references));
                    }
                    let mut patch = json!({"metadata": meta});
                    if after.spec != b.spec {
                        patch["spec"] = after.spec.clone();
                    }
                    if after.status != b.status {
                        patch["status"] = after.status.clone();
                    }
                    s.merge_patch(&who, "gpu-labeler", &path, &patch)
                }
            }
        }
        other => panic!("no request for {other:?}"),
    }
}

/// Each row on the real server: the Node put as its managers made it, then the row's request
/// as its user, decided by the real admission plugin with `policy` installed.
fn check_rows(policy: &[Value], rows: Vec<Row>) {
    let s = server_with(policy);
    let mut wrong = Vec::new();
    for row in rows {
        put_node(&s, "n1", &row.before);
        put_node(&s, "n2", &row.before);
        s.delete("/api/v1/nodes/n9");
        let got = send(&s, &row).decision();
        if row.request.resource == "nodes" && row.request.operation == "UPDATE" {
            // (The server also shows the zero values of the status' other fields.)
            let status = &s.node(row.request.name)["status"]["allocatable"];
            assert_eq!(
                status, &row.before.status["allocatable"],
                "{}: the status changed",
                row.what
            );
        }
        if got != row.expected.map_err(str::to_string) {
            wrong.push(format!(
                "{}: got {got:?}, expected {:?}",
                row.what, row.expected
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every request a stolen token could send to a Node, and the agent's own: what the policy as
/// shipped (deploy/base) admits and refuses.
#[test]
fn the_node_policy_admits_the_agents_own_writes_and_nothing_else() {
    let n = gpu_node;
    let mut finalized = n();
    finalized.finalizers = vec!["example.com/never".into()];
    let mut orphaned = n();
    orphaned.owner_references =
        vec![json!({"apiVersion": "v1", "kind": "Node", "name": "gone", "uid": "0000"})];
    let mut tainted = n();
    tainted.spec["taints"] = json!([{"key": "x", "effect": "NoSchedule"}]);
    // The taints of a rule (publish.taints, docs/taints.md): NFD's taint namespace only.
    let mut rule_tainted = n();
    rule_tainted.spec["taints"] = json!([
        {"key": "feature.node.kubernetes.io/gpu-unhealthy", "value": "true", "effect": "NoSchedule"}
    ]);
    let mut cordoned = n();
    cordoned.spec["unschedulable"] = json!(true);
    let mut status = n();
    status.status["allocatable"]["nvidia.com/gpu"] = json!("0");
    // Ownership forged in one request, used in the next: the first is harmless (NFD still owns
    // its label), the second refused.
    let mut claimed = n();
    claimed
        .labels
        .get_mut("feature.node.kubernetes.io/cpu-model.vendor_id")
        .unwrap()
        .1
        .push("gpu-labeler");
    let mut stripped = n();
    stripped
        .labels
        .get_mut("feature.node.kubernetes.io/cpu-model.vendor_id")
        .unwrap()
        .1 = vec!["gpu-labeler"];
    let mut claimed_outside = n();
    claimed_outside
        .labels
        .get_mut("nvidia.com/mig.config")
        .unwrap()
        .1
        .push("gpu-labeler");
    let mut annotated = n();
    annotated
        .annotations
        .insert("example.com/a".into(), ("1".into(), vec!["gpu-labeler"]));
    let other = |what, req: Request<'static>, after: Option<NodeState>, expected| Row {
        what,
        request: req,
        before: n(),
        after,
        expected,
    };
    let req = |user, claim, operation, resource, name| Request {
        user,
        node_claim: claim,
        operation,
        resource,
        name,
    };
    let rows = vec![
        own_node(
            "adds labels in its namespaces (and sub-domains)",
            n().apply(&with(&[
                ("feature.node.kubernetes.io/gpu.family", "hopper"),
                ("gpu.feature.node.kubernetes.io/x", "1"),
                ("profile.node.kubernetes.io/p", "1"),
            ])),
            Ok(()),
        ),
        own_node(
            "changes and removes its own labels",
            n().apply(&[
                ("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
                ("feature.node.kubernetes.io/gpu.count", "4"),
            ]),
            Ok(()),
        ),
        own_node(
            "applies a label NFD already has, with NFD's value (co-owned)",
            n().apply(&with(&[(
                "feature.node.kubernetes.io/cpu-model.vendor_id",
                "Intel",
            )])),
            Ok(()),
        ),
        own_node(
            "stops applying a co-owned label (NFD keeps it)",
            n().apply(&[
                ("feature.node.kubernetes.io/gpu.count", "8"),
                ("feature.node.kubernetes.io/gpu.memory", "81559"),
            ]),
            Ok(()),
        ),
        own_node(
            "re-applies the same labels (no change)",
            n().apply(OURS),
            Ok(()),
        ),
        own_node(
            "GFD's nvidia.com keys without the nvidia-gfd component",
            n().apply(&with(&[(
                "nvidia.com/gpu.product",
                "NVIDIA-H100-80GB-HBM3",
            )])),
            Err(LABELS_DENIED),
        ),
        own_node(
            "a label outside its namespaces",
            n().apply(&with(&[("node-role.kubernetes.io/control-plane", "")])),
            Err(LABELS_DENIED),
        ),
        own_node(
            "a look-alike namespace",
            n().apply(&with(&[("evilfeature.node.kubernetes.io/x", "1")])),
            Err(LABELS_DENIED),
        ),
        own_node(
            "an admin's label changed",
            n().update(&[("team", "infra")], &[]),
            Err(LABELS_DENIED),
        ),
        own_node(
            "kubelet's label removed",
            n().update(&[], &["kubernetes.io/hostname"]),
            Err(LABELS_DENIED),
        ),
        own_node(
            "NFD's own label changed, inside the allowed namespace",
            n().update(
                &[("feature.node.kubernetes.io/cpu-model.vendor_id", "AMD")],
                &[],
            ),
            Err(LABELS_DENIED),
        ),
        own_node(
            "NFD's own label removed",
            n().update(&[], &["feature.node.kubernetes.io/cpu-model.vendor_id"]),
            Err(LABELS_DENIED),
        ),
        own_node(
            "a label it shares with NFD changed",
            n().update(
                &[("feature.node.kubernetes.io/pci-0302_10de.present", "false")],
                &[],
            ),
            Err(LABELS_DENIED),
        ),
        own_node(
            "the GPU Operator's driver switched off",
            n().update(&[("nvidia.com/gpu.deploy.driver", "false")], &[]),
            Err(LABELS_DENIED),
        ),
        own_node(
            "the GPU Operator's MIG layout changed",
            n().update(&[("nvidia.com/mig.config", "all-1g.10gb")], &[]),
            Err(LABELS_DENIED),
        ),
        own_node(
            "the GPU Operator's workload type set",
            n().update(&[("nvidia.com/gpu.workload.config", "vm-passthrough")], &[]),
            Err(LABELS_DENIED),
        ),
        own_node(
            "claims NFD's label (NFD still owns it)",
            claimed.clone(),
            Ok(()),
        ),
        Row {
            what: "then changes the claimed label",
            before: claimed.clone(),
            after: Some(claimed.update(
                &[("feature.node.kubernetes.io/cpu-model.vendor_id", "AMD")],
                &[],
            )),
            expected: Err(LABELS_DENIED),
            ..own_node("", n(), Ok(()))
        },
        own_node("strips NFD of its label", stripped, Err(MANAGED_DENIED)),
        own_node(
            "claims the GPU Operator's label",
            claimed_outside,
            Err(MANAGED_DENIED),
        ),
        own_node(
            "an annotation outside its namespaces",
            annotated,
            Err(
                "gpu-labeler may only add annotations in its own namespaces, and change or remove only the annotations it owns",
            ),
        ),
        own_node(
            "a finalizer (the Node could never be deleted)",
            finalized,
            Err("gpu-labeler never changes a Node's finalizers or ownerReferences"),
        ),
        own_node(
            "an owner that does not exist (the garbage collector would delete the Node)",
            orphaned,
            Err("gpu-labeler never changes a Node's finalizers or ownerReferences"),
        ),
        own_node("a taint", tainted, Err(TAINTS_DENIED)),
        own_node(
            "a taint in feature.node.kubernetes.io",
            rule_tainted,
            Ok(()),
        ),
        own_node("a cordon", cordoned, Err(SPEC_DENIED)),
        // The API server drops a status change sent to the main resource before admission
        // (the Node strategy keeps the old status), so the policy sees no change to refuse;
        // check_rows checks that the status stayed as it was.
        own_node(
            "the status, through the main resource (dropped by the server)",
            status.clone(),
            Ok(()),
        ),
        other(
            "the status subresource",
            req(SA, Some("n1"), "UPDATE", "nodes/status", "n1"),
            Some(status),
            Err("gpu-labeler only patches Nodes; it may not UPDATE a Node (status)"),
        ),
        other(
            "a deletion",
            req(SA, Some("n1"), "DELETE", "nodes", "n1"),
            None,
            Err("gpu-labeler only patches Nodes; it may not DELETE a Node"),
        ),
        other(
            "a new Node",
            req(SA, Some("n1"), "CREATE", "nodes", "n9"),
            Some(n()),
            Err("gpu-labeler only patches Nodes; it may not CREATE a Node"),
        ),
        other(
            "another Node",
            req(SA, Some("n1"), "UPDATE", "nodes", "n2"),
            Some(n().apply(OURS)),
            Err("gpu-labeler may only change its own Node n1, not n2"),
        ),
        other(
            "a token that names no node",
            req(SA, None, "UPDATE", "nodes", "n1"),
            Some(n().apply(OURS)),
            Err(
                "gpu-labeler may only change its own Node, and its token names no node (a token bound to the pod is needed)",
            ),
        ),
        other(
            "installed in another namespace: still in force",
            req(
                "system:serviceaccount:my-gpu-ns:gpu-labeler",
                Some("n1"),
                "UPDATE",
                "nodes",
                "n1",
            ),
            Some(n().update(&[("nvidia.com/gpu.deploy.driver", "false")], &[])),
            Err(LABELS_DENIED),
        ),
        other(
            "kubelet is not concerned",
            req("system:node:n1", None, "UPDATE", "nodes", "n1"),
            Some(n().update(&[("team", "x")], &[])),
            Ok(()),
        ),
        other(
            "another service account is not concerned",
            req(
                "system:serviceaccount:gpu-labeler:gpu-labeler-x",
                None,
                "UPDATE",
                "nodes",
                "n2",
            ),
            Some(n().update(&[("team", "x")], &[])),
            Ok(()),
        ),
    ];
    check_rows(&node_policy(), rows);
}

/// With deploy/components/nvidia-gfd: exactly the keys the nvidia-gfd profile writes are added;
/// the GPU Operator's own stay out of reach.
#[test]
fn with_the_gfd_component_the_profiles_keys_and_only_those() {
    let n = gpu_node;
    let gfd: Vec<(&str, &str)> = vec![
        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
        ("nvidia.com/gpu.count", "8"),
        ("nvidia.com/gpu.memory", "81559"),
        ("nvidia.com/gpu.family", "hopper"),
        ("nvidia.com/gpu.compute.major", "9"),
        ("nvidia.com/gpu.compute.minor", "0"),
        ("nvidia.com/gpu.machine", "PowerEdge-XE9680"),
        ("nvidia.com/gpu.mode", "compute"),
        ("nvidia.com/gpu.replicas", "1"),
        ("nvidia.com/gpu.sharing-strategy", "none"),
        ("nvidia.com/cuda.driver-version.full", "535.161.08"),
        ("nvidia.com/cuda.driver.major", "535"),
        ("nvidia.com/cuda.runtime-version.major", "12"),
        ("nvidia.com/cuda.runtime.minor", "2"),
        ("nvidia.com/mig.capable", "true"),
        ("nvidia.com/mig.strategy", "mixed"),
        ("nvidia.com/mps.capable", "false"),
        ("nvidia.com/vgpu.present", "false"),
        ("nvidia.com/mig-1g.10gb.count", "7"),
        ("nvidia.com/mig-1g.10gb.me.engines.jpeg", "1"),
        ("nvidia.com/mig-3g.40gb.slices.gi", "3"),
        ("nvidia.com/gfd.timestamp", "1733788800"),
    ];
    let mut rows = vec![own_node("GFD's keys", n().apply(&with(&gfd)), Ok(()))];
    for key in [
        "nvidia.com/gpu.deploy.driver",
        "nvidia.com/mig.config",
        "nvidia.com/gpu.workload.config",
        "nvidia.com/gpu.present",
        "nvidia.com/gpu.product.evil",
    ] {
        let what: &'static str = Box::leak(format!("{key} stays out of reach").into_boxed_str());
        rows.push(own_node(
            what,
            n().update(&[(key, "x")], &[]),
            Err(LABELS_DENIED),
        ));
    }
    check_rows(&gfd_node_policy(), rows);
}

/// Every key the profile writes on the fixtures (H100 through NVML, MIG in the mixed and the
/// single strategy, uniform and mixed MIG layouts, time-slicing) is one the component's policy admits: the agent itself runs
/// `run --oneshot` with the profile against the real server, as its own node's token, and its
/// Node ends up with exactly the labels `labels` prints.
#[test]
fn the_gfd_component_admits_every_key_the_profile_writes() {
    let s = server_with(&gfd_node_policy());
    let tmp = tempfile::tempdir().unwrap();
    let sharing = common::repo().join("tests/fixtures/sharing/time-slicing.yaml");
    let kubeconfig = s.kubeconfig(&Who::agent("n1"));
    let mut keys = std::collections::BTreeSet::new();
    let mut wrong = Vec::new();
    for strategy in ["mixed", "single", "none"] {
        let config = tmp.path().join(format!("config-{strategy}.yaml"));
        std::fs::write(
            &config,
            format!(
                "profiles: [nvidia-gfd]\nmigStrategy: {strategy}\nsources:\n  sharing:\n    configFile: {}\n",
                sharing.display()
            ),
        )
        .unwrap();
        for fixture in [
            "h100-8x",
            "a100-pcie-40gb-mig-mixed",
            "h200-mig-me",
            "a100-80gb-mig-4x1g",
            "a100-40gb-mig-ci",
            "gb200-4x-clique",
        ] {
            let args = |command: &[&str]| with_nvml(command, &[("--config", &config)]);
            let env = fake_nvml_env(fixture);
            let printed =
                common::labels_of(common::run_env(args(&["labels", "-o", "json"]), &env).ok());
            s.delete("/api/v1/nodes/n1");
            s.create_node("n1", &[]);
            // What the profile writes, not DRA's labels (tests/daemon_dra.rs).
            let mut run = args(&ONESHOT_N1);
            run.extend(["--kubeconfig".into(), kubeconfig.clone().into_os_string()]);
            let r = common::run_env(run, &env);
            let on_node = s.labels("n1");
            if r.code != 0 || on_node != printed {
                wrong.push(format!(
                    "{fixture}, migStrategy {strategy}: exit {}, on the Node but not printed {:?}, printed but not on the Node {:?}\n{}",
                    r.code,
                    on_node.keys().filter(|k| !printed.contains_key(*k)).collect::<Vec<_>>(),
                    printed.keys().filter(|k| !on_node.contains_key(*k)).collect::<Vec<_>>(),
                    r.stderr.lines().filter(|l| l.contains("denied")).take(1).collect::<String>(),
                ));
            }
            keys.extend(printed.into_keys().filter(|k| k.starts_with("nvidia.com/")));
        }
    }
    assert!(keys.len() > 30, "{keys:?}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `COMMAND` on the Dell 8x H100 fixture through the fake NVML library, plus `flags`.
fn with_nvml(command: &[&str], flags: &[(&str, &Path)]) -> Vec<std::ffi::OsString> {
    let mut args = common::fixture_args(command, "dell-xe9680-8xh100", &[]);
    args.retain(|a| a != "--no-nvml");
    args.extend([
        "--nvml-lib".into(),
        common::fake_nvml_lib("nvidia_ml").into_os_string(),
    ]);
    for (flag, value) in flags {
        args.extend([flag.into(), value.as_os_str().to_os_string()]);
    }
    args
}

/// A site rule's `nvidia.com` key that is not one of GFD's costs only that key under the
/// profile: the agent leaves it out and says why, and the rest of its labels reach the Node
/// through the real admission plugin (before, the whole apply was refused).
#[test]
fn a_site_key_the_gfd_policy_refuses_costs_only_that_key() {
    let s = server_with(&gfd_node_policy());
    s.create_node("n1", &[]);
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config.yaml");
    std::fs::write(&config, "profiles: [nvidia-gfd]\n").unwrap();
    let rules = tmp.path().join("rules.yaml");
    std::fs::write(
        &rules,
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: site}\nspec:\n  rules:\n    - name: site\n      labels: {nvidia.com/gpu.deploy.driver: \"false\", site.ok: \"true\"}\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions: {vendor: {op: In, value: [\"10de\"]}}\n",
    )
    .unwrap();
    let args = |command: &[&str]| with_nvml(command, &[("--config", &config), ("--rules", &rules)]);
    let env = fake_nvml_env("h100-8x");
    // What the policy refuses, not DRA's labels (tests/daemon_dra.rs).
    let mut run = args(&ONESHOT_N1);
    run.extend([
        "--kubeconfig".into(),
        s.kubeconfig(&Who::agent("n1")).into_os_string(),
    ]);
    let r = common::run_env(run, &env);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut expected =
        common::labels_of(common::run_env(args(&["labels", "-o", "json"]), &env).ok());
    assert_eq!(
        expected.remove("nvidia.com/gpu.deploy.driver"),
        Some("false".into())
    );
    assert_eq!(
        expected
            .get("feature.node.kubernetes.io/site.ok")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(s.labels("n1"), expected);
    let refused: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("nvidia.com/gpu.deploy.driver"))
        .collect();
    assert_eq!(refused.len(), 1, "{}", r.stderr);
    assert_eq!(
        refused[0],
        format!(
            " WARN label \"nvidia.com/gpu.deploy.driver=false\" from rule \"site\" (NodeFeatureRule \"site\", {}:6:7) rejected: \"nvidia.com/gpu.deploy.driver\" is not a key the nvidia-gfd profile writes (the nvidia-gfd component's admission policy admits only those)",
            rules.display()
        )
    );
}

/// The policies the tables above run through the real plugin are every policy deploy/ can
/// install: the base's and the nodefeature component's ValidatingAdmissionPolicies, and the
/// components that change a policy, nvidia-gfd (its `allowedKey`) and health-condition (its
/// `allowedConditionType`, tested in tests/taints.rs); every overlay is the base
/// plus components. The uninstall Job's own policy (deploy/prune) is tested in tests/prune.rs. The Helm chart (deploy/helm: Go templates, not YAML) is left out here: its
/// policies are these, `the_helm_charts_policies_are_the_tested_ones`.
#[test]
fn the_tested_policies_are_every_policy_deploy_installs() {
    let mut defines = Vec::new();
    let mut patches = Vec::new();
    let mut walk = vec![common::repo().join("deploy")];
    while let Some(dir) = walk.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p != common::repo().join("deploy/helm") {
                    walk.push(p);
                }
                continue;
            }
            let Some(ext) = p.extension().and_then(|x| x.to_str()) else {
                continue;
            };
            if ext != "yaml" {
                continue;
            }
            let rel = p
                .strip_prefix(common::repo())
                .unwrap()
                .display()
                .to_string();
            let text = std::fs::read_to_string(&p).unwrap();
            for doc in text.split("\n---\n") {
                let Ok(v) = serde_saphyr::from_str::<Value>(doc) else {
                    continue;
                };
                if v["kind"] == "ValidatingAdmissionPolicy" {
                    defines.push(rel.clone());
                }
                for patch in v["patches"].as_array().into_iter().flatten() {
                    if patch["target"]["kind"] == "ValidatingAdmissionPolicy" {
                        patches.push(rel.clone());
                    }
                }
            }
        }
    }
    defines.sort();
    patches.sort();
    assert_eq!(
        (defines, patches),
        (
            vec![
                "deploy/base/admission-policy.yaml".to_string(),
                "deploy/components/device-taints/admission-policy.yaml".to_string(),
                "deploy/components/nodefeature/admission-policy.yaml".to_string(),
                "deploy/prune/admission-policy.yaml".to_string(),
                "deploy/prune/admission-policy.yaml".to_string(),
            ],
            vec![
                "deploy/components/device-taints-noexecute/kustomization.yaml".to_string(),
                "deploy/components/health-condition/kustomization.yaml".to_string(),
                "deploy/components/nvidia-gfd/kustomization.yaml".to_string()
            ]
        )
    );
    for overlay in ["deploy/overlays/nvidia", "deploy/overlays/nodefeature"] {
        let k = docs(&format!("{overlay}/kustomization.yaml")).remove(0);
        assert_eq!(k["resources"], json!(["../../base"]), "{overlay}");
    }
}

/// One list: the nvidia-gfd component's `allowedKey` is NFD's namespaces and then exactly the
/// keys the agent filters `nvidia.com` with under the profile (`GFD_KEYS`).
#[test]
fn the_gfd_components_keys_are_the_agents_keys() {
    let p = gfd_node_policy();
    let allowed = p[0]["spec"]["variables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "allowedKey")
        .unwrap()["expression"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        allowed,
        format!(
            "r'^(f:)?(([a-z0-9]([-a-z0-9]*[a-z0-9])?\\.)*(feature|profile)\\.node\\.kubernetes\\.io/|{}$)'",
            gpu_labeler::config::GFD_KEYS
        )
    );
}

fn nodefeature(name: &str, node_label: &str, labels: &[(&str, &str)], owner: &str) -> Value {
    json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
        "metadata": {
            "name": name, "namespace": "gpu-labeler",
            "labels": {"nfd.node.kubernetes.io/node-name": node_label},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": owner, "uid": "7d3c5f0e"}],
        },
        "spec": {"features": {"flags": {}, "attributes": {}, "instances": {}},
                 "labels": apiserver::map(labels)},
    })
}

/// The nodefeature overlay's policy: the agent writes its own node's NodeFeature, nothing else.
#[test]
fn the_nodefeature_policy_keeps_the_agent_to_its_own_nodes_object() {
    let p = nodefeature_policy();
    let ours = [("feature.node.kubernetes.io/gpu.count", "8")];
    let nf = |op| Request {
        user: SA,
        node_claim: Some("n1"),
        operation: op,
        resource: "nfd.k8s-sigs.io/nodefeatures",
        name: "n1",
    };
    let mut extra_label = nodefeature("n1", "n1", &ours, "n1");
    extra_label["metadata"]["labels"]["team"] = json!("x");
    let mut finalizer = nodefeature("n1", "n1", &ours, "n1");
    finalizer["metadata"]["finalizers"] = json!(["example.com/never"]);
    // What, the request, the object after and before, the decision.
    type Case<'a> = (&'a str, Request<'a>, Value, Value, Result<(), &'a str>);
    let cases: Vec<Case> = vec![
        (
            "creates its own",
            nf("CREATE"),
            nodefeature("n1", "n1", &ours, "n1"),
            Value::Null,
            Ok(()),
        ),
        (
            "patches its own",
            nf("UPDATE"),
            nodefeature(
                "n1",
                "n1",
                &[("feature.node.kubernetes.io/gpu.count", "4")],
                "n1",
            ),
            nodefeature("n1", "n1", &ours, "n1"),
            Ok(()),
        ),
        (
            "another node's object",
            Request {
                name: "n2",
                ..nf("CREATE")
            },
            nodefeature("n2", "n2", &ours, "n2"),
            Value::Null,
            Err("gpu-labeler may only write the NodeFeature of its own Node n1, not n2"),
        ),
        (
            "its own object naming another node (nfd-master would label n2)",
            nf("CREATE"),
            nodefeature("n1", "n2", &ours, "n1"),
            Value::Null,
            Err(
                "a NodeFeature of gpu-labeler carries exactly one label, nfd.node.kubernetes.io/node-name=n1",
            ),
        ),
        (
            "another label on the object",
            nf("CREATE"),
            extra_label,
            Value::Null,
            Err(
                "a NodeFeature of gpu-labeler carries exactly one label, nfd.node.kubernetes.io/node-name=n1",
            ),
        ),
        (
            "a GPU Operator label through NFD",
            nf("UPDATE"),
            nodefeature(
                "n1",
                "n1",
                &[("nvidia.com/gpu.deploy.driver", "false")],
                "n1",
            ),
            nodefeature("n1", "n1", &ours, "n1"),
            Err("gpu-labeler may only publish labels in its own namespaces"),
        ),
        (
            "owned by another node",
            nf("CREATE"),
            nodefeature("n1", "n1", &ours, "n2"),
            Value::Null,
            Err("gpu-labeler's NodeFeature is owned by its own Node only, and has no finalizers"),
        ),
        (
            "a finalizer",
            nf("CREATE"),
            finalizer,
            Value::Null,
            Err("gpu-labeler's NodeFeature is owned by its own Node only, and has no finalizers"),
        ),
        (
            "a deletion",
            nf("DELETE"),
            Value::Null,
            nodefeature("n1", "n1", &ours, "n1"),
            Err("gpu-labeler only creates and patches its NodeFeature; it may not DELETE one"),
        ),
        (
            "a token that names no node",
            Request {
                node_claim: None,
                ..nf("CREATE")
            },
            nodefeature("n1", "n1", &ours, "n1"),
            Value::Null,
            Err(
                "gpu-labeler may only write its own node's NodeFeature, and its token names no node (a token bound to the pod is needed)",
            ),
        ),
        (
            "installed in another namespace: still in force",
            Request {
                user: "system:serviceaccount:nfd-sites:gpu-labeler",
                ..nf("CREATE")
            },
            nodefeature("n1", "n2", &ours, "n1"),
            Value::Null,
            Err(
                "a NodeFeature of gpu-labeler carries exactly one label, nfd.node.kubernetes.io/node-name=n1",
            ),
        ),
    ];
    let s = server_with(&p);
    let mut wrong = Vec::new();
    for (what, request, object, old, expected) in cases {
        for name in ["n1", "n2"] {
            s.delete(&format!(
                "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpu-labeler/nodefeatures/{name}"
            ));
        }
        if !old.is_null() {
            let a = s.admin_force_apply("gpu-labeler", &old);
            assert!(a.ok(), "{what}: {}", a.body);
        }
        let path = format!(
            "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpu-labeler/nodefeatures/{}",
            request.name
        );
        // The agent applies its object (a create when there is none); a deletion is a DELETE.
        let answer = match request.operation {
            "DELETE" => s.request(&request.who(), "DELETE", &path, None),
            _ => s.apply(&request.who(), "gpu-labeler", &path, &object, true),
        };
        let got = answer.decision();
        if got != expected.map_err(str::to_string) {
            wrong.push(format!("{what}: got {got:?}, expected {expected:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The Helm chart's admission policies (deploy/helm/gpu-labeler, as .ci/check_helm.py renders
/// it into tests/fixtures/deploy/helm/ and fails when a copy is stale) are the ones the tables
/// above run through the real plugin, Helm's labels aside: the defaults' Node policy,
/// `profiles: [nvidia-gfd]`'s, `health.condition`'s, and `sink: nodefeature`'s NodeFeature
/// policy; each rendering installs that policy and no other, and its prune hook deploy/prune's
/// policy (tests/prune.rs), Helm's hook annotations aside.
#[test]
fn the_helm_charts_policies_are_the_tested_ones() {
    let unlabelled = |mut p: Vec<Value>| {
        for d in &mut p {
            let meta = d["metadata"].as_object_mut().unwrap();
            meta.remove("labels");
            meta.remove("annotations");
        }
        p
    };
    let is_hook = |d: &Value| !d["metadata"]["annotations"]["helm.sh/hook"].is_null();
    for (fixture, name, tested) in [
        ("defaults", "gpu-labeler-own-node", node_policy()),
        ("nvidia-gfd", "gpu-labeler-own-node", gfd_node_policy()),
        (
            "health-condition",
            "gpu-labeler-own-node",
            patched_node_policy("health-condition"),
        ),
        (
            "nodefeature",
            "gpu-labeler-own-nodefeature",
            nodefeature_policy(),
        ),
    ] {
        let rendered = docs(&format!(
            "tests/fixtures/deploy/helm/{fixture}.rendered.yaml"
        ));
        assert_eq!(
            unlabelled(policy_of(&rendered, name)),
            unlabelled(tested),
            "{fixture}"
        );
        let installed: Vec<(&Value, bool)> = rendered
            .iter()
            .filter(|d| d["kind"] == "ValidatingAdmissionPolicy")
            .map(|d| (&d["metadata"]["name"], is_hook(d)))
            .collect();
        assert_eq!(
            installed,
            [
                (&json!(name), false),
                (&json!("gpu-labeler-prune"), true),
                (&json!("gpu-labeler-prune-device-taints"), true)
            ],
            "{fixture}"
        );
        for prune in ["gpu-labeler-prune", "gpu-labeler-prune-device-taints"] {
            assert_eq!(
                unlabelled(policy_of(&rendered, prune)),
                unlabelled(policy_of(&kube::shipped_prune_policy(), prune)),
                "{fixture}"
            );
        }
    }
}

/// A site that installs into its own namespace (`namespace: my-gpu-ns`), as rendered by
/// `kubectl kustomize tests/fixtures/deploy/renamed-site` (.ci/check_deploy.py renders it again
/// and fails when this copy is stale): the service account moved, the policy still applies to
/// it and still refuses what it must.
#[test]
fn a_site_in_another_namespace_keeps_the_policy_in_force() {
    site_keeps_the_policy_in_force(
        "tests/fixtures/deploy/renamed-site.rendered.yaml",
        "gpu-labeler-own-node",
    );
}

/// The same with the Helm chart: `helm install site deploy/helm/gpu-labeler -n my-gpu-ns`
/// (tests/fixtures/deploy/helm/renamed-site.rendered.yaml, from .ci/check_helm.py), whose
/// objects and service account are named `site-gpu-labeler`: the policy follows the service
/// account's name and namespace.
#[test]
fn a_helm_release_in_another_namespace_keeps_the_policy_in_force() {
    site_keeps_the_policy_in_force(
        "tests/fixtures/deploy/helm/renamed-site.rendered.yaml",
        "site-gpu-labeler-own-node",
    );
}

/// The policy `policy` of the rendering `path` admits the agent's own writes and refuses
/// others', as the service account that rendering installs.
fn site_keeps_the_policy_in_force(path: &str, policy: &str) {
    let rendered: Vec<Value> = docs(path).into_iter().filter(|d| !d.is_null()).collect();
    // The agents' (the chart's prune hook has its own, a post-delete hook).
    let sa = rendered
        .iter()
        .find(|d| {
            d["kind"] == "ServiceAccount" && d["metadata"]["annotations"]["helm.sh/hook"].is_null()
        })
        .unwrap();
    assert_eq!(sa["metadata"]["namespace"], "my-gpu-ns");
    let user: &'static str = Box::leak(
        format!(
            "system:serviceaccount:{}:{}",
            sa["metadata"]["namespace"].as_str().unwrap(),
            sa["metadata"]["name"].as_str().unwrap()
        )
        .into_boxed_str(),
    );
    let p = policy_of(&rendered, policy);
    let n = gpu_node;
    let as_site = |what, after, expected| Row {
        request: Request {
            user,
            ..own_node("", n(), Ok(())).request
        },
        ..own_node(what, after, expected)
    };
    check_rows(
        &p,
        vec![
            as_site(
                "its own labels",
                n().apply(&with(&[(
                    "feature.node.kubernetes.io/gpu.family",
                    "hopper",
                )])),
                Ok(()),
            ),
            as_site(
                "the GPU Operator's driver switched off",
                n().update(&[("nvidia.com/gpu.deploy.driver", "false")], &[]),
                Err(LABELS_DENIED),
            ),
            as_site(
                "a taint",
                {
                    let mut t = n();
                    t.spec["taints"] = json!([{"key": "x", "effect": "NoSchedule"}]);
                    t
                },
                Err(TAINTS_DENIED),
            ),
        ],
    );
}

/// The prune hook of `helm install site ... -n my-gpu-ns` (its service account
/// `site-gpu-labeler-prune`) is confined by the chart's copy of deploy/prune's policy, which
/// follows that name: on the real plugin it may remove the label gpu-labeler alone owns, and
/// not the kubelet's.
#[test]
fn a_helm_releases_prune_hook_is_confined_by_its_policy() {
    let rendered: Vec<Value> = docs("tests/fixtures/deploy/helm/renamed-site.rendered.yaml")
        .into_iter()
        .filter(|d| !d.is_null())
        .collect();
    let s = KubeApiServer::with_policy(&policy_of(&rendered, "site-gpu-labeler-prune"));
    s.create_node("n1", &[("kubernetes.io/hostname", "n1")]);
    let ours = "feature.node.kubernetes.io/gpu.present";
    let body = json!({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": "n1", "labels": {ours: "true"}}});
    let a = s.apply(
        &Who::admin(),
        "gpu-labeler",
        "/api/v1/nodes/n1",
        &body,
        false,
    );
    assert!(a.ok(), "{}", a.body);
    let hook = Who::service_account(
        "system:serviceaccount:my-gpu-ns:site-gpu-labeler-prune",
        None,
    );
    let remove = |key: &str| {
        s.merge_patch(
            &hook,
            "gpu-labeler",
            "/api/v1/nodes/n1",
            &json!({"metadata": {"labels": {key: null}}}),
        )
        .decision()
    };
    assert_eq!(
        (remove("kubernetes.io/hostname"), remove(ours)),
        (
            Err("gpu-labeler prune may only remove labels that gpu-labeler alone owns".into()),
            Ok(())
        )
    );
}
