//! The agent against a test API server built from Kubernetes' own code (tests/kube-apiserver):
//! the real request handlers, server-side apply field manager and ValidatingAdmissionPolicy
//! plugin, on etcd. What the suite's hand-written server (tests/apiserver) only imitates is
//! proven here against the real thing.

mod common;
mod kube;

use std::collections::BTreeMap;

use kube::{KubeApiServer, Who};
use serde_json::{Value, json};

fn node_apply(name: &str, labels: &[(&str, &str)]) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "labels": common::label_map(labels)}})
}

/// What the rest of the suite relies on of the server itself: server-side apply's ownership,
/// conflicts and removal, as the real field manager records them.
#[test]
fn the_test_server_has_kubernetes_own_apply_semantics() {
    let s = KubeApiServer::start();
    s.create_node("n1", &[("kubernetes.io/hostname", "n1")]);
    let admin = Who::admin();
    let path = "/api/v1/nodes/n1";
    let a = s.apply(
        &admin,
        "gpu-labeler",
        path,
        &node_apply(
            "n1",
            &[
                ("feature.node.kubernetes.io/a", "1"),
                ("feature.node.kubernetes.io/b", "1"),
            ],
        ),
        false,
    );
    assert!(a.ok(), "{}", a.body);
    // Another manager's different value: a conflict, with the real Status.
    let a = s.apply(
        &admin,
        "nfd-master",
        path,
        &node_apply("n1", &[("feature.node.kubernetes.io/a", "2")]),
        false,
    );
    assert_eq!(a.code, 409, "{}", a.body);
    assert_eq!(
        a.message(),
        "Apply failed with 1 conflict: conflict with \"gpu-labeler\": .metadata.labels.feature.node.kubernetes.io/a"
    );
    // The same value: shared ownership.
    let a = s.apply(
        &admin,
        "nfd-master",
        path,
        &node_apply("n1", &[("feature.node.kubernetes.io/a", "1")]),
        false,
    );
    assert!(a.ok(), "{}", a.body);
    // A key gpu-labeler stops applying goes unless another manager owns it too.
    let a = s.apply(&admin, "gpu-labeler", path, &node_apply("n1", &[]), false);
    assert!(a.ok(), "{}", a.body);
    assert_eq!(
        s.labels("n1"),
        common::label_map(&[
            ("feature.node.kubernetes.io/a", "1"),
            ("kubernetes.io/hostname", "n1")
        ])
    );
    let owners: BTreeMap<String, Vec<String>> = s.label_owners("n1");
    assert_eq!(
        owners,
        BTreeMap::from([
            (
                "kubelet/Update".to_string(),
                vec!["kubernetes.io/hostname".to_string()]
            ),
            (
                "nfd-master/Apply".to_string(),
                vec!["feature.node.kubernetes.io/a".to_string()]
            ),
        ])
    );
}

/// A policy whose expression does not compile is refused when it is created, with the admission
/// plugin's own compiler, as kube-apiserver refuses it: a typo in a shipped policy cannot hide
/// until the first request.
#[test]
fn a_policy_that_does_not_compile_is_refused_at_create() {
    let s = KubeApiServer::start();
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "broken"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["*"],
                "operations": ["UPDATE"], "resources": ["nodes"]}]},
            "variables": [{"name": "n", "expression": "object.metadata.name"}],
            "validations": [
                {"expression": "variables.n.size() > 0"},
                {"expression": "variables.n == 1 +"},
                {"expression": "'x'", "messageExpression": "1"},
            ],
        },
    });
    let a = s.apply(
        &Who::admin(),
        "kubectl",
        &kube::object_path(&policy),
        &policy,
        true,
    );
    assert_eq!(a.code, 422, "{}", a.body);
    let causes: Vec<String> = a.body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap().lines().next().unwrap()
            )
        })
        .collect();
    assert_eq!(
        causes,
        [
            "spec.validations[1].expression: Invalid value: \"variables.n == 1 +\": compilation failed: ERROR: <input>:1:19: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
            "spec.validations[2].expression: Invalid value: \"'x'\": must evaluate to bool but got string",
            "spec.validations[2].messageExpression: Invalid value: \"1\": must evaluate to string but got int",
        ]
    );
}
