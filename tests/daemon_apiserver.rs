//! The fake API server's own semantics (tests/apiserver): the daemon's tests are only as good as
//! the server they run against, so its server-side apply behaviour is pinned here over HTTP.

mod apiserver;

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
