//! What `kubectl apply -k deploy/` installs, checked against the real binary and the policy's
//! own expressions (CI also renders every kustomization and validates it against the Kubernetes
//! schemas: `.ci/check_deploy.py`).
//!
//! - The DaemonSet's container, run as the kubelet would run it (its args, its env with the
//!   downward API filled in, its ConfigMaps mounted at their paths), labels its Node on the
//!   test API server with exactly the labels the README promises, plus the example site rule.
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

fn config_map(name: &str) -> BTreeMap<String, String> {
    let cm = docs("deploy/base/configmap.yaml")
        .into_iter()
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no ConfigMap {name}"));
    serde_json::from_value(cm["data"].clone()).unwrap()
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
    let server = FakeApiServer::start();
    server.add_node(NODE, &[("kubernetes.io/hostname", NODE)]);
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
    // The example site rule of the ConfigMap: every GPU has more than 64 GiB.
    expected.insert(
        "feature.node.kubernetes.io/gpu.class".into(),
        "large-memory".into(),
    );
    assert_eq!(server.labels(NODE), expected);
}

#[test]
fn the_shipped_configuration_and_rules_check_clean() {
    let dir = tempfile::tempdir().unwrap();
    mount_config_map("gpu-labeler-rules", dir.path());
    let run = common::run(["rules", "check", dir.path().to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "1 file(s) checked: 0 error(s), 0 warning(s)\n");
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

fn policy() -> Policy {
    let docs = docs("deploy/base/admission-policy.yaml");
    let vap = docs
        .iter()
        .find(|d| d["kind"] == "ValidatingAdmissionPolicy")
        .unwrap();
    let binding = docs
        .iter()
        .find(|d| d["kind"] == "ValidatingAdmissionPolicyBinding")
        .unwrap();
    assert_eq!(binding["spec"]["policyName"], vap["metadata"]["name"]);
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
    assert_eq!(rule["apiGroups"], json!([""]));
    let text = |v: &Value| v.as_str().unwrap().to_string();
    Policy {
        operations: strings(&rule["operations"]),
        resources: strings(&rule["resources"]),
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

fn eval(expr: &str, ctx: &cel_interpreter::Context) -> cel_interpreter::Value {
    let program = cel_interpreter::Program::compile(expr)
        .unwrap_or_else(|e| panic!("does not compile: {expr}: {e}"));
    program
        .execute(ctx)
        .unwrap_or_else(|e| panic!("evaluation error (the API server would deny): {expr}: {e}"))
}

/// Who asks for what: user, the node bound into the token, operation, subresource, the Node.
struct Request<'a> {
    user: &'a str,
    node_claim: Option<&'a str>,
    operation: &'a str,
    sub_resource: &'a str,
    name: &'a str,
}

/// The API server's decision for one request: `Ok` when admitted (or not matched), else the
/// denial's message.
fn admit(p: &Policy, r: &Request, object: Value, old_object: Value) -> Result<(), String> {
    let Request {
        user,
        node_claim,
        operation,
        sub_resource,
        name,
    } = *r;
    let resource = if sub_resource.is_empty() {
        "nodes".to_string()
    } else {
        format!("nodes/{sub_resource}")
    };
    if !p.operations.iter().any(|o| o == operation) || !p.resources.contains(&resource) {
        return Ok(());
    }
    let mut user_info = json!({"username": user});
    if let Some(node) = node_claim {
        user_info["extra"] = json!({"authentication.kubernetes.io/node-name": [node]});
    }
    let request = json!({
        "operation": operation, "name": name, "subResource": sub_resource, "userInfo": user_info,
    });
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

fn node(name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)], spec: Value) -> Value {
    json!({
        "metadata": {
            "name": name,
            "labels": apiserver::map(labels),
            "annotations": apiserver::map(annotations),
        },
        "spec": spec,
    })
}

#[test]
fn the_admission_policy_lets_the_agent_change_only_its_own_nodes_labels() {
    let p = policy();
    const SA: &str = "system:serviceaccount:gpu-labeler:gpu-labeler";
    let spec = json!({"podCIDR": "10.0.7.0/24"});
    let before = node(
        "n1",
        &[
            ("kubernetes.io/hostname", "n1"),
            ("team", "ml"),
            ("feature.node.kubernetes.io/gpu.count", "8"),
            ("feature.node.kubernetes.io/gpu.memory", "81559"),
        ],
        &[("node.alpha.kubernetes.io/ttl", "0")],
        spec.clone(),
    );
    // One row per request: who, the token's node, operation, subresource, the Node named in
    // the request, the object after the change; the decision.
    type Row = (
        &'static str,
        &'static str,
        Option<&'static str>,
        &'static str,
        &'static str,
        &'static str,
        Value,
        Result<(), &'static str>,
    );
    let own_labels = |extra: &[(&'static str, &'static str)]| {
        let mut labels = vec![
            ("kubernetes.io/hostname", "n1"),
            ("team", "ml"),
            ("feature.node.kubernetes.io/gpu.count", "8"),
            ("feature.node.kubernetes.io/gpu.memory", "81559"),
        ];
        labels.extend_from_slice(extra);
        labels
    };
    let ttl = [("node.alpha.kubernetes.io/ttl", "0")];
    // The usual request: the agent on n1 patches n1.
    let own = |what, object, expected| -> Row {
        (what, SA, Some("n1"), "UPDATE", "", "n1", object, expected)
    };
    let labels_denied = "gpu-labeler may only add, change or remove labels in its own namespaces";
    let rows: Vec<Row> = vec![
        own(
            "adds labels in its namespaces (sub-domains and nvidia.com too)",
            node(
                "n1",
                &own_labels(&[
                    ("feature.node.kubernetes.io/gpu.family", "hopper"),
                    ("gpu.feature.node.kubernetes.io/x", "1"),
                    ("profile.node.kubernetes.io/p", "1"),
                    ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
                ]),
                &ttl,
                spec.clone(),
            ),
            Ok(()),
        ),
        own(
            "changes and removes its own labels",
            node(
                "n1",
                &[
                    ("kubernetes.io/hostname", "n1"),
                    ("team", "ml"),
                    ("feature.node.kubernetes.io/gpu.count", "4"),
                ],
                &ttl,
                spec.clone(),
            ),
            Ok(()),
        ),
        (
            "another Node",
            SA,
            Some("n1"),
            "UPDATE",
            "",
            "n2",
            node("n2", &own_labels(&[]), &ttl, spec.clone()),
            Err("gpu-labeler may only change its own Node n1, not n2"),
        ),
        (
            "a token that names no node",
            SA,
            None,
            "UPDATE",
            "",
            "n1",
            node("n1", &own_labels(&[]), &ttl, spec.clone()),
            Err(
                "gpu-labeler may only change its own Node, and its token names no node (a token bound to the pod is needed)",
            ),
        ),
        own(
            "a label outside its namespaces",
            node(
                "n1",
                &own_labels(&[("node-role.kubernetes.io/control-plane", "")]),
                &ttl,
                spec.clone(),
            ),
            Err(labels_denied),
        ),
        own(
            "a look-alike namespace",
            node(
                "n1",
                &own_labels(&[("evilfeature.node.kubernetes.io/x", "1")]),
                &ttl,
                spec.clone(),
            ),
            Err(labels_denied),
        ),
        own(
            "a foreign label changed",
            node(
                "n1",
                &[
                    ("kubernetes.io/hostname", "n1"),
                    ("team", "infra"),
                    ("feature.node.kubernetes.io/gpu.count", "8"),
                    ("feature.node.kubernetes.io/gpu.memory", "81559"),
                ],
                &ttl,
                spec.clone(),
            ),
            Err(labels_denied),
        ),
        own(
            "a foreign label removed",
            node(
                "n1",
                &[
                    ("team", "ml"),
                    ("feature.node.kubernetes.io/gpu.count", "8"),
                    ("feature.node.kubernetes.io/gpu.memory", "81559"),
                ],
                &ttl,
                spec.clone(),
            ),
            Err(labels_denied),
        ),
        own(
            "an annotation outside its namespaces",
            node(
                "n1",
                &own_labels(&[]),
                &[
                    ("node.alpha.kubernetes.io/ttl", "0"),
                    ("example.com/a", "1"),
                ],
                spec.clone(),
            ),
            Err("gpu-labeler may only add, change or remove annotations in its own namespaces"),
        ),
        own(
            "a taint",
            node(
                "n1",
                &own_labels(&[]),
                &ttl,
                json!({"podCIDR": "10.0.7.0/24", "taints": [{"key": "x", "effect": "NoSchedule"}]}),
            ),
            Err("gpu-labeler never changes a Node's spec"),
        ),
        (
            "the status",
            SA,
            Some("n1"),
            "UPDATE",
            "status",
            "n1",
            node("n1", &own_labels(&[]), &ttl, spec.clone()),
            Err("gpu-labeler only patches Nodes; it may not UPDATE a Node (status)"),
        ),
        (
            "a deletion",
            SA,
            Some("n1"),
            "DELETE",
            "",
            "n1",
            Value::Null,
            Err("gpu-labeler only patches Nodes; it may not DELETE a Node"),
        ),
        (
            "anyone else is not concerned",
            "system:node:n1",
            None,
            "UPDATE",
            "",
            "n2",
            node("n2", &[("team", "x")], &[], json!({})),
            Ok(()),
        ),
    ];
    let mut wrong = Vec::new();
    for (what, user, claim, op, sub, name, object, expected) in rows {
        let old = if op == "DELETE" {
            before.clone()
        } else {
            let mut old = before.clone();
            old["metadata"]["name"] = json!(name);
            old
        };
        let old = if op == "CREATE" { Value::Null } else { old };
        let request = Request {
            user,
            node_claim: claim,
            operation: op,
            sub_resource: sub,
            name,
        };
        let got = admit(&p, &request, object, old);
        if got != expected.map_err(str::to_string) {
            wrong.push(format!("{what}: got {got:?}, expected {expected:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
