//! The fake API server's own semantics (tests/apiserver): the daemon's tests are only as good as
//! the server they run against, so its server-side apply behaviour is pinned here over HTTP.

mod apiserver;
mod kube;

use apiserver::*;
use serde_json::{Value, json};

fn apply(server: &FakeApiServer, manager: &str, labels: Value, force: bool) -> (u16, Value) {
    let q = if force { "&force=true" } else { "" };
    let (code, body) = http(
        server.addr,
        "PATCH",
        &format!("/api/v1/nodes/n1?fieldManager={manager}{q}"),
        Some((
            "application/apply-patch+yaml",
            &json!({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "n1", "labels": labels}})
            .to_string(),
        )),
    )
    .unwrap();
    (code, serde_json::from_str(&body).unwrap())
}

fn server() -> FakeApiServer {
    let s = FakeApiServer::start();
    s.add_node("n1", &[("kubernetes.io/hostname", "n1")]);
    s
}

#[test]
fn get_shows_labels_managed_fields_and_resource_version() {
    let s = server();
    apply(&s, "a", json!({"x": "1"}), false);
    let (code, body) = http(s.addr, "GET", "/api/v1/nodes/n1", None).unwrap();
    assert_eq!(code, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["metadata"]["labels"],
        json!({"kubernetes.io/hostname": "n1", "x": "1"})
    );
    let mf: Vec<(String, String, Value)> = v["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap().to_string(),
                e["operation"].as_str().unwrap().to_string(),
                e["fieldsV1"].clone(),
            )
        })
        .collect();
    assert_eq!(
        mf,
        vec![
            (
                "a".into(),
                "Apply".into(),
                json!({"f:metadata": {"f:labels": {"f:x": {}}}})
            ),
            (
                "kubelet".into(),
                "Update".into(),
                json!({"f:metadata": {"f:labels": {"f:kubernetes.io/hostname": {}}}})
            ),
        ]
    );
    assert!(v["metadata"]["resourceVersion"].is_string());
    assert_eq!(
        http(s.addr, "GET", "/api/v1/nodes/nope", None).unwrap().0,
        404
    );
}

#[test]
fn a_key_no_longer_applied_is_removed_unless_someone_else_owns_it() {
    let s = server();
    apply(&s, "a", json!({"x": "1", "shared": "s"}), false);
    apply(&s, "b", json!({"shared": "s"}), false);
    apply(&s, "a", json!({}), false);
    assert_eq!(
        s.labels("n1"),
        map(&[("kubernetes.io/hostname", "n1"), ("shared", "s")])
    );
    apply(&s, "b", json!({}), false);
    assert_eq!(s.labels("n1"), map(&[("kubernetes.io/hostname", "n1")]));
}

#[test]
fn another_managers_key_with_another_value_is_a_conflict_unless_forced() {
    let s = server();
    s.merge_patch_labels("n1", "ops", &[("team", Some("ml"))]);
    let (code, body) = apply(&s, "a", json!({"team": "infra", "x": "1"}), false);
    assert_eq!(code, 409);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Apply failed with 1 conflict: conflict with \"ops\" using v1: .metadata.labels.team",
            "reason": "Conflict", "code": 409,
            "details": {"causes": [{"reason": "FieldManagerConflict",
                "message": "conflict with \"ops\" using v1", "field": ".metadata.labels.team"}]}})
    );
    assert_eq!(
        s.labels("n1"),
        map(&[("kubernetes.io/hostname", "n1"), ("team", "ml")]),
        "nothing applied"
    );
    // The same value is no conflict: shared ownership.
    assert_eq!(apply(&s, "a", json!({"team": "ml"}), false).0, 200);
    // Forced: taken over.
    assert_eq!(apply(&s, "a", json!({"team": "infra"}), true).0, 200);
    assert_eq!(s.labels("n1")["team"], "infra");
    assert_eq!(
        s.node("n1").applied_by("a"),
        ["team".to_string()].into_iter().collect()
    );
}

#[test]
fn resource_version_moves_on_change_only() {
    let s = server();
    apply(&s, "a", json!({"x": "1"}), false);
    let rv = s.node("n1").resource_version;
    apply(&s, "a", json!({"x": "1"}), false);
    assert_eq!(s.node("n1").resource_version, rv, "no-op apply");
    apply(&s, "a", json!({"x": "2"}), false);
    assert!(s.node("n1").resource_version > rv);
}

#[test]
fn merge_patch_takes_over_changed_keys_and_null_deletes() {
    let s = server();
    apply(&s, "a", json!({"x": "1", "y": "1"}), false);
    s.merge_patch_labels("n1", "ops", &[("x", Some("2")), ("y", None)]);
    assert_eq!(
        s.labels("n1"),
        map(&[("kubernetes.io/hostname", "n1"), ("x", "2")])
    );
    assert!(s.node("n1").applied_by("a").is_empty());
}

#[test]
fn injected_faults_come_in_order_and_are_recorded() {
    let s = server();
    s.set_faults(Faults {
        error_500: 1,
        conflict_409: 1,
        ..Faults::default()
    });
    assert_eq!(
        http(s.addr, "GET", "/api/v1/nodes/n1", None).unwrap().0,
        500
    );
    assert_eq!(
        http(s.addr, "GET", "/api/v1/nodes/n1", None).unwrap().0,
        409
    );
    assert_eq!(
        http(s.addr, "GET", "/api/v1/nodes/n1", None).unwrap().0,
        200
    );
    s.set_faults(Faults {
        drop: 1,
        ..Faults::default()
    });
    assert!(http(s.addr, "GET", "/api/v1/nodes/n1", None).map_or(true, |(c, _)| c == 0));
    let faults: Vec<Option<&str>> = s.requests().iter().map(|r| r.fault).collect();
    assert_eq!(faults, vec![Some("500"), Some("409"), None, Some("drop")]);
}

/// One step of the differential script: who does what to Node n1.
enum Step {
    Apply(&'static str, Value, bool),
    Merge(&'static str, Value),
}

/// What a step left: the answer's code and message, the labels, each manager's label keys
/// (`manager/Operation`), and whether the resourceVersion moved.
type Seen = (u16, String, Value, Vec<(String, Vec<String>)>, bool);

fn owners(node: &Value) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = node["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let keys = m["fieldsV1"]["f:metadata"]["f:labels"]
                .as_object()
                .map(|o| o.keys().filter(|k| *k != ".").cloned().collect())
                .unwrap_or_default();
            (
                format!(
                    "{}/{}",
                    m["manager"].as_str().unwrap(),
                    m["operation"].as_str().unwrap()
                ),
                keys,
            )
        })
        .filter(|(_, keys): &(String, Vec<String>)| !keys.is_empty())
        .collect();
    out.sort();
    out
}

/// The suite's server and Kubernetes' own (tests/kube-apiserver) given the same requests give
/// the same answers, labels, owners and resourceVersion moves: the fake's semantics, which the
/// benches and the event and health tests still rely on, are Kubernetes'.
#[test]
fn the_fake_answers_as_kubernetes_own_server_does() {
    let script = vec![
        Step::Apply("a", json!({"x": "1", "shared": "s"}), false),
        Step::Apply("b", json!({"shared": "s"}), false),
        Step::Apply("a", json!({"x": "1"}), false),
        Step::Apply("b", json!({"x": "2"}), false),
        Step::Apply("b", json!({"x": "2", "shared": "s"}), true),
        Step::Merge("c", json!({"x": null, "y": "3"})),
        Step::Apply("a", json!({"y": "3"}), false),
        Step::Apply("a", json!({"y": "4"}), false),
        Step::Apply("a", json!({"y": "3"}), false),
        Step::Apply("b", json!({"x": "9", "y": "9"}), false),
        Step::Apply("b", json!({}), false),
    ];
    // The fake.
    let fake = server();
    let mut from_fake: Vec<Seen> = Vec::new();
    let get_fake = || -> Value {
        serde_json::from_str(&http(fake.addr, "GET", "/api/v1/nodes/n1", None).unwrap().1).unwrap()
    };
    for step in &script {
        let rv = get_fake()["metadata"]["resourceVersion"].clone();
        let (code, body) = match step {
            Step::Apply(m, labels, force) => apply(&fake, m, labels.clone(), *force),
            Step::Merge(m, labels) => {
                let (code, body) = http(
                    fake.addr,
                    "PATCH",
                    &format!("/api/v1/nodes/n1?fieldManager={m}"),
                    Some((
                        "application/merge-patch+json",
                        &json!({"metadata": {"labels": labels}}).to_string(),
                    )),
                )
                .unwrap();
                (code, serde_json::from_str(&body).unwrap())
            }
        };
        let node = get_fake();
        let message = if code == 200 {
            String::new()
        } else {
            body["message"].as_str().unwrap_or_default().to_string()
        };
        from_fake.push((
            code,
            message,
            node["metadata"]["labels"].clone(),
            owners(&node),
            node["metadata"]["resourceVersion"] != rv,
        ));
    }
    // Kubernetes' own.
    let real = kube::KubeApiServer::start();
    real.create_node("n1", &[("kubernetes.io/hostname", "n1")]);
    let admin = kube::Who::admin();
    let mut from_real: Vec<Seen> = Vec::new();
    for step in &script {
        let rv = real.node("n1")["metadata"]["resourceVersion"].clone();
        let a = match step {
            Step::Apply(m, labels, force) => real.apply(
                &admin,
                m,
                "/api/v1/nodes/n1",
                &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": labels}}),
                *force,
            ),
            Step::Merge(m, labels) => real.merge_patch(&admin, m, "/api/v1/nodes/n1", &json!({"metadata": {"labels": labels}})),
        };
        let node = real.node("n1");
        let message = if a.code == 200 {
            String::new()
        } else {
            a.message()
        };
        from_real.push((
            a.code,
            message,
            node["metadata"]["labels"].clone(),
            owners(&node),
            node["metadata"]["resourceVersion"] != rv,
        ));
    }
    for (i, (f, r)) in from_fake.iter().zip(&from_real).enumerate() {
        assert_eq!(
            f, r,
            "step {i}: the fake (left) and Kubernetes (right) differ"
        );
    }
}
