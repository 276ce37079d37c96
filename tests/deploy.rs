//! What `kubectl apply -k deploy/` installs, checked against the real binary and the policy's
//! own expressions (CI also renders every kustomization and validates it against the Kubernetes
//! schemas: `.ci/check_deploy.py`).
//!
//! - The DaemonSet's container, run as the kubelet would run it (its args, its env with the
//!   downward API filled in, its ConfigMaps mounted at their paths), labels its Node on the
//!   test API server with exactly the labels the README promises, plus the example-rules component's rule.
//! - The ValidatingAdmissionPolicy's CEL (matchConditions, variables, validations and messages,
//!   evaluated with the `cel-interpreter` crate) admits the agent's own patches and refuses a
//!   patch of another Node, of a foreign label or annotation, of the spec, and a token without
//!   a node.

mod apiserver;
mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use apiserver::{Agent, FakeApiServer, write_kubeconfig};
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
    // The Node as kubelet and NFD left it; the shipped Node policy's CEL decides each of the
    // agent's writes, as the API server would (with the node bound into the agent's token).
    let server = FakeApiServer::start();
    server.add_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    server.merge_patch_labels(
        NODE,
        "nfd-master",
        &[(
            "feature.node.kubernetes.io/cpu-model.vendor_id",
            Some("Intel"),
        )],
    );
    let policy = node_policy();
    server.with(|s| {
        s.admission = Some(apiserver::Admission(Box::new(move |before, after| {
            let request = Request {
                user: SA,
                node_claim: Some(NODE),
                operation: "UPDATE",
                resource: "nodes",
                name: NODE,
            };
            admit(&policy, &request, after.clone(), before.clone())
        })))
    });
    let kubeconfig = write_kubeconfig(root.path(), &server.url());
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
    let (code, body) = apiserver::http(
        server.addr,
        "PATCH",
        &format!("/api/v1/nodes/{NODE}?fieldManager=gpu-labeler&force=true"),
        Some((
            "application/apply-patch+yaml",
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE,
                    "labels": {"feature.node.kubernetes.io/cpu-model.vendor_id": "AMD"}}})
            .to_string(),
        )),
    )
    .unwrap();
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (code, body["message"].as_str().unwrap()),
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
// The admission policy.

struct Policy {
    operations: Vec<String>,
    resources: Vec<String>,
    match_conditions: Vec<String>,
    variables: Vec<(String, String)>,
    /// (expression, message or messageExpression)
    validations: Vec<(String, Message)>,
}

enum Message {
    Fixed(String),
    Expression(String),
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The ValidatingAdmissionPolicy `name` of these documents, with its Deny binding.
fn policy_of(docs: &[Value], name: &str) -> Policy {
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
    let spec = &vap["spec"];
    assert_eq!(spec["failurePolicy"], "Fail");
    let (rule,) = match spec["matchConstraints"]["resourceRules"]
        .as_array()
        .unwrap()
        .as_slice()
    {
        [r] => (r,),
        other => panic!("one resource rule expected, got {other:?}"),
    };
    let group = rule["apiGroups"][0].as_str().unwrap();
    let text = |v: &Value| v.as_str().unwrap().to_string();
    Policy {
        operations: strings(&rule["operations"]),
        resources: strings(&rule["resources"])
            .into_iter()
            .map(|r| {
                if group.is_empty() {
                    r
                } else {
                    format!("{group}/{r}")
                }
            })
            .collect(),
        match_conditions: spec["matchConditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| text(&c["expression"]))
            .collect(),
        variables: spec["variables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (text(&v["name"]), text(&v["expression"])))
            .collect(),
        validations: spec["validations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let message = match v["messageExpression"].as_str() {
                    Some(e) => Message::Expression(e.to_string()),
                    None => Message::Fixed(text(&v["message"])),
                };
                (text(&v["expression"]), message)
            })
            .collect(),
    }
}

fn node_policy() -> Policy {
    policy_of(
        &docs("deploy/base/admission-policy.yaml"),
        "gpu-labeler-own-node",
    )
}

/// The Node policy as deploy/components/nvidia-gfd patches it: its JSON patch (a `test` of the
/// variable's name, a `replace` of its expression) applied as kustomize applies it.
fn gfd_node_policy() -> Policy {
    let component = docs("deploy/components/nvidia-gfd/kustomization.yaml").remove(0);
    let patch = component["patches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["target"]["kind"] == "ValidatingAdmissionPolicy")
        .unwrap();
    let ops: Vec<Value> = serde_saphyr::from_str(patch["patch"].as_str().unwrap()).unwrap();
    let mut p = node_policy();
    let index = |path: &str| -> usize {
        path.strip_prefix("/spec/variables/")
            .and_then(|r| r.split('/').next())
            .and_then(|i| i.parse().ok())
            .unwrap_or_else(|| panic!("unexpected path {path}"))
    };
    for op in ops {
        let i = index(op["path"].as_str().unwrap());
        match (op["op"].as_str().unwrap(), op["path"].as_str().unwrap()) {
            ("test", path) if path.ends_with("/name") => {
                assert_eq!(op["value"].as_str().unwrap(), p.variables[i].0)
            }
            ("replace", path) if path.ends_with("/expression") => {
                p.variables[i].1 = op["value"].as_str().unwrap().to_string()
            }
            other => panic!("unexpected op {other:?}"),
        }
    }
    p
}

fn nodefeature_policy() -> Policy {
    policy_of(
        &docs("deploy/components/nodefeature/admission-policy.yaml"),
        "gpu-labeler-own-nodefeature",
    )
}

fn eval(expr: &str, ctx: &cel_interpreter::Context) -> cel_interpreter::Value {
    let program = cel_interpreter::Program::compile(expr)
        .unwrap_or_else(|e| panic!("does not compile: {expr}: {e}"));
    program
        .execute(ctx)
        .unwrap_or_else(|e| panic!("evaluation error (the API server would deny): {expr}: {e}"))
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

/// The API server's decision for one request: `Ok` when admitted (or not matched), else the
/// denial's message. `object` and `old_object` as the API server hands them to admission: the
/// whole objects, `managedFields` included (after and before the request's field manager ran).
fn admit(p: &Policy, r: &Request, object: Value, old_object: Value) -> Result<(), String> {
    if !p.operations.iter().any(|o| o == r.operation)
        || !p.resources.iter().any(|x| x == r.resource)
    {
        return Ok(());
    }
    let sub_resource = r.resource.split_once('/').map_or("", |(_, s)| s);
    let sub_resource = if r.resource.contains('.') {
        ""
    } else {
        sub_resource
    };
    let mut user_info = json!({"username": r.user});
    if let Some(node) = r.node_claim {
        user_info["extra"] = json!({"authentication.kubernetes.io/node-name": [node]});
    }
    // The admission plugin builds `request` from the AdmissionRequest with its empty fields
    // left out (`omitempty`): a main-resource request has no `subResource` key at all.
    let mut request = json!({"operation": r.operation, "userInfo": user_info});
    for (key, value) in [("name", r.name), ("subResource", sub_resource)] {
        if !value.is_empty() {
            request[key] = json!(value);
        }
    }
    let mut ctx = cel_interpreter::Context::default();
    ctx.add_variable("request", request).unwrap();
    ctx.add_variable("object", object).unwrap();
    ctx.add_variable("oldObject", old_object).unwrap();
    for c in &p.match_conditions {
        if eval(c, &ctx) != cel_interpreter::Value::Bool(true) {
            return Ok(());
        }
    }
    let mut variables: HashMap<String, cel_interpreter::Value> = HashMap::new();
    for (name, expr) in &p.variables {
        let v = eval(expr, &ctx);
        variables.insert(name.clone(), v);
        ctx.add_variable_from_value("variables", variables.clone());
    }
    for (expr, message) in &p.validations {
        if eval(expr, &ctx) != cel_interpreter::Value::Bool(true) {
            return Err(match message {
                Message::Fixed(m) => m.clone(),
                Message::Expression(e) => match eval(e, &ctx) {
                    cel_interpreter::Value::String(s) => s.to_string(),
                    other => panic!("message is not a string: {other:?}"),
                },
            });
        }
    }
    Ok(())
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
    fn to_json(&self, name: &str) -> Value {
        let mut managers: BTreeMap<&str, (Vec<String>, Vec<String>)> = BTreeMap::new();
        for (key, (_, owners)) in &self.labels {
            for o in owners {
                managers.entry(o).or_default().0.push(key.clone());
            }
        }
        for (key, (_, owners)) in &self.annotations {
            for o in owners {
                managers.entry(o).or_default().1.push(key.clone());
            }
        }
        let managed: Vec<Value> = managers
            .iter()
            .map(|(m, (labels, annotations))| {
                let mut meta = serde_json::Map::new();
                for (field, keys) in [("f:labels", labels), ("f:annotations", annotations)] {
                    if !keys.is_empty() {
                        let mut set: serde_json::Map<String, Value> =
                            keys.iter().map(|k| (format!("f:{k}"), json!({}))).collect();
                        set.insert(".".into(), json!({}));
                        meta.insert(field.into(), Value::Object(set));
                    }
                }
                json!({"manager": m, "operation": operation_of(m), "apiVersion": "v1",
                       "time": "2026-12-01T00:00:00Z", "fieldsType": "FieldsV1",
                       "fieldsV1": {"f:metadata": meta}})
            })
            .collect();
        let values = |m: &BTreeMap<String, (String, Vec<&str>)>| -> BTreeMap<String, String> {
            m.iter().map(|(k, (v, _))| (k.clone(), v.clone())).collect()
        };
        let mut meta = json!({
            "name": name, "uid": "7d3c5f0e", "resourceVersion": "4711",
            "labels": values(&self.labels), "annotations": values(&self.annotations),
            "managedFields": managed,
        });
        if !self.finalizers.is_empty() {
            meta["finalizers"] = json!(self.finalizers);
        }
        if !self.owner_references.is_empty() {
            meta["ownerReferences"] = json!(self.owner_references);
        }
        json!({"apiVersion": "v1", "kind": "Node", "metadata": meta,
               "spec": self.spec, "status": self.status})
    }

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

fn check_rows(p: &Policy, rows: Vec<Row>) {
    let mut wrong = Vec::new();
    for row in rows {
        let name = row.request.name;
        let old = match row.request.operation {
            "CREATE" => Value::Null,
            _ => row.before.to_json(name),
        };
        let object = row.after.map_or(Value::Null, |a| a.to_json(name));
        let got = admit(p, &row.request, object, old);
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
        own_node(
            "a taint",
            tainted,
            Err("gpu-labeler never changes a Node's spec or status"),
        ),
        own_node(
            "the status, through the main resource",
            status.clone(),
            Err("gpu-labeler never changes a Node's spec or status"),
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

/// Every key the profile writes on the fixtures (H100 through NVML, MIG in the mixed strategy,
/// time-slicing) is one the component's policy admits.
#[test]
fn the_gfd_component_admits_every_key_the_profile_writes() {
    let p = gfd_node_policy();
    let allowed = &p
        .variables
        .iter()
        .find(|(n, _)| n == "allowedKey")
        .unwrap()
        .1;
    let lib = common::fake_nvml_lib("nvidia_ml");
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config.yaml");
    let sharing = common::repo().join("tests/fixtures/sharing/time-slicing.yaml");
    std::fs::write(
        &config,
        format!(
            "profiles: [nvidia-gfd]\nmigStrategy: mixed\nsources:\n  sharing:\n    configFile: {}\n",
            sharing.display()
        ),
    )
    .unwrap();
    let mut keys = std::collections::BTreeSet::new();
    for fixture in [
        "h100-8x",
        "a100-pcie-40gb-mig-mixed",
        "h200-mig-me",
        "gb200-4x-clique",
    ] {
        let mut args = common::fixture_args(&["labels", "-o", "json"], "dell-xe9680-8xh100", &[]);
        args.retain(|a| a != "--no-nvml");
        args.extend(["--nvml-lib".into(), lib.clone().into_os_string()]);
        args.extend(["--config".into(), config.clone().into_os_string()]);
        let r = common::run_env(
            args,
            &[(
                "FAKE_NVML_FIXTURE",
                common::nvml_fixture(fixture).as_os_str(),
            )],
        );
        keys.extend(
            common::labels_of(r.ok())
                .into_keys()
                .filter(|k| k.starts_with("nvidia.com/")),
        );
    }
    assert!(keys.len() > 20, "{keys:?}");
    let mut ctx = cel_interpreter::Context::default();
    let refused: Vec<&String> = keys
        .iter()
        .filter(|k| {
            ctx.add_variable("k", k.as_str()).unwrap();
            eval(
                &format!("k.matches({allowed}) && ('f:' + k).matches({allowed})"),
                &ctx,
            ) != cel_interpreter::Value::Bool(true)
        })
        .collect();
    assert!(refused.is_empty(), "refused: {refused:?}");
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
    let mut wrong = Vec::new();
    for (what, request, object, old, expected) in cases {
        let got = admit(&p, &request, object, old);
        if got != expected.map_err(str::to_string) {
            wrong.push(format!("{what}: got {got:?}, expected {expected:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A site that installs into its own namespace (`namespace: my-gpu-ns`), as rendered by
/// `kubectl kustomize tests/fixtures/deploy/renamed-site` (.ci/check_deploy.py renders it again
/// and fails when this copy is stale): the service account moved, the policy still applies to
/// it and still refuses what it must.
#[test]
fn a_site_in_another_namespace_keeps_the_policy_in_force() {
    let rendered: Vec<Value> = docs("tests/fixtures/deploy/renamed-site.rendered.yaml")
        .into_iter()
        .filter(|d| !d.is_null())
        .collect();
    let sa = rendered
        .iter()
        .find(|d| d["kind"] == "ServiceAccount")
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
    let p = policy_of(&rendered, "gpu-labeler-own-node");
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
                Err("gpu-labeler never changes a Node's spec or status"),
            ),
        ],
    );
}
