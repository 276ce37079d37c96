//! The agent against a test API server built from Kubernetes' own code (tests/kube-apiserver):
//! the real request handlers, server-side apply field manager and ValidatingAdmissionPolicy
//! plugin, on etcd. What the suite's hand-written server (tests/apiserver) only imitates is
//! proven here against the real thing.

mod common;
mod kube;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

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
    // Another manager applying `a` alone.
    let nfd_master_applies = |value: &str| {
        s.apply(
            &admin,
            "nfd-master",
            path,
            &node_apply("n1", &[("feature.node.kubernetes.io/a", value)]),
            false,
        )
    };
    // Its different value: a conflict, with the real Status.
    let a = nfd_master_applies("2");
    assert_eq!(a.code, 409, "{}", a.body);
    assert_eq!(
        a.message(),
        "Apply failed with 1 conflict: conflict with \"gpu-labeler\": .metadata.labels.feature.node.kubernetes.io/a"
    );
    // The same value: shared ownership.
    let a = nfd_master_applies("1");
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
    let a = s.admin_force_apply("kubectl", &policy);
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

// ---- resource.k8s.io (DRA), as tests/kube-apiserver serves it ----------------------------------

/// A driver's slice of one node's pool: its devices by name, each with a PCI bus id.
fn slice(name: &str, driver: &str, node: &str, devices: &[(&str, &str)]) -> Value {
    let devices: Vec<Value> = devices
        .iter()
        .map(|(device, bus)| {
            json!({"name": device,
                   "attributes": {"resource.kubernetes.io/pciBusID": {"string": bus}},
                   "capacity": {"memory": {"value": "80Gi"}}})
        })
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
           "metadata": {"name": name},
           "spec": {"driver": driver, "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices}})
}

const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";

/// The names of a list's items, in the server's order.
fn item_names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// An admin's two slices (n1's NVIDIA, n2's AMD) and a DeviceClass, as the DRA source of issue 45
/// reads them: a list by `spec.nodeName` (and `spec.driver`, `metadata.name`) has exactly the
/// matching slices, another field is refused with kube-apiserver's 400, and generation starts at
/// 1 and moves only when the spec does.
#[test]
fn resource_slices_are_selected_by_node_driver_and_name() {
    let s = KubeApiServer::start();
    let n1 = slice(
        "n1-gpu.nvidia.com",
        "gpu.nvidia.com",
        "n1",
        &[("gpu-0", "0000:9d:00.0"), ("gpu-1", "0000:a0:00.0")],
    );
    let n2 = slice(
        "n2-gpu.amd.com",
        "gpu.amd.com",
        "n2",
        &[("gpu-0", "0000:0c:00.0")],
    );
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                       "metadata": {"name": "gpu.nvidia.com"},
                       "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}});
    let admin = Who::admin();
    for object in [&n1, &n2, &class] {
        let a = s.apply(&admin, "kubectl", &kube::object_path(object), object, false);
        assert!(a.ok(), "{} {}", a.code, a.body);
    }
    assert_eq!(
        kube::object_path(&class),
        "/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com"
    );
    assert_eq!(
        s.get("/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com")["spec"],
        class["spec"]
    );
    let names = |selector: &str| item_names(&s.get(&format!("{SLICES}?fieldSelector={selector}")));
    assert_eq!(names("spec.nodeName=n1"), ["n1-gpu.nvidia.com"]);
    assert_eq!(names("spec.nodeName=n2"), ["n2-gpu.amd.com"]);
    assert_eq!(names("spec.nodeName=n3"), Vec::<String>::new());
    assert_eq!(names("spec.driver=gpu.amd.com"), ["n2-gpu.amd.com"]);
    assert_eq!(
        names("metadata.name=n1-gpu.nvidia.com"),
        ["n1-gpu.nvidia.com"]
    );
    assert_eq!(
        item_names(&s.get(SLICES)),
        ["n1-gpu.nvidia.com", "n2-gpu.amd.com"]
    );
    let a = s.request(
        &admin,
        "GET",
        &format!("{SLICES}?fieldSelector=spec.pool.name=n1"),
        None,
    );
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(a.message(), "field label not supported: spec.pool.name");

    // Generation: 1 at create; a driver re-applying its slice with one device fewer changes the
    // spec (the device list is atomic: the dropped device goes) and the generation; a label
    // does neither.
    let path = kube::object_path(&n1);
    assert_eq!(s.get(&path)["metadata"]["generation"], 1);
    let fewer = slice(
        "n1-gpu.nvidia.com",
        "gpu.nvidia.com",
        "n1",
        &[("gpu-0", "0000:9d:00.0")],
    );
    let a = s.apply(&admin, "kubectl", &path, &fewer, false);
    assert!(a.ok(), "{}", a.body);
    let got = s.get(&path);
    assert_eq!(got["metadata"]["generation"], 2);
    assert_eq!(got["spec"], fewer["spec"]);
    let a = s.merge_patch(
        &admin,
        "someone",
        &path,
        &json!({"metadata": {"labels": {"team": "a"}}}),
    );
    assert!(a.ok(), "{}", a.body);
    assert_eq!(s.get(&path)["metadata"]["generation"], 2);
}

/// The events of a watch's whole answer (one JSON object a line): type and object name.
fn watch_events(answer: &kube::Answer) -> Vec<(String, String)> {
    assert_eq!(answer.code, 200, "{}", answer.body);
    let text = match &answer.body {
        Value::String(text) => text.clone(),
        one => one.to_string(),
    };
    serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .map(|e| {
            let e = e.unwrap_or_else(|err| panic!("watch event: {err} in {text}"));
            (
                e["type"].as_str().unwrap().to_string(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

/// A watch with `spec.nodeName=n1`, open while slices of n1 and n2 come and go, sees n1's slice
/// added and deleted and nothing of n2's: the daemon's relabel on a slice change rests on this.
#[test]
fn a_watch_by_node_name_sees_only_that_nodes_slices() {
    let s = KubeApiServer::start();
    let admin = Who::admin();
    // From the list's resourceVersion, so that a change made before the watch is open is still
    // delivered; the watch ends by itself after 3 s.
    let rv = s.get(SLICES)["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let n1 = slice(
        "n1-gpu",
        "gpu.nvidia.com",
        "n1",
        &[("gpu-0", "0000:9d:00.0")],
    );
    let n2 = slice(
        "n2-gpu",
        "gpu.nvidia.com",
        "n2",
        &[("gpu-0", "0000:9d:00.0")],
    );
    let events = std::thread::scope(|scope| {
        let watch = scope.spawn(|| {
            s.request(
                &admin,
                "GET",
                &format!(
                    "{SLICES}?watch=1&fieldSelector=spec.nodeName=n1&resourceVersion={rv}&timeoutSeconds=3"
                ),
                None,
            )
        });
        for object in [&n1, &n2] {
            let a = s.apply(&admin, "kubectl", &kube::object_path(object), object, false);
            assert!(a.ok(), "{}", a.body);
        }
        s.delete(&kube::object_path(&n1));
        s.delete(&kube::object_path(&n2));
        watch.join().unwrap()
    });
    assert_eq!(
        watch_events(&events),
        [
            ("ADDED".to_string(), "n1-gpu".to_string()),
            ("DELETED".to_string(), "n1-gpu".to_string()),
        ]
    );
}

/// A DeviceTaintRule (resource.k8s.io/v1beta2, issue 46's sink) applied by field manager `x`:
/// read back with the spec as applied, `timeAdded` set by the server, generation 1 and `x`'s
/// fields in managedFields; another manager's different effect is a conflict; `x` changing it
/// moves the generation.
#[test]
fn a_device_taint_rule_is_applied_with_server_side_apply() {
    let s = KubeApiServer::start();
    let admin = Who::admin();
    let rule = |effect: &str| {
        json!({"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule",
               "metadata": {"name": "gpu-labeler-n1-0000-9d-00-0"},
               "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"},
                        "taint": {"key": "feature.node.kubernetes.io/gpu-unhealthy", "value": "xid",
                                  "effect": effect}}})
    };
    let path = kube::object_path(&rule("NoSchedule"));
    assert_eq!(
        path,
        "/apis/resource.k8s.io/v1beta2/devicetaintrules/gpu-labeler-n1-0000-9d-00-0"
    );
    let a = s.apply(&admin, "x", &path, &rule("NoSchedule"), false);
    assert!(a.ok(), "{} {}", a.code, a.body);
    let mut got = s.get(&path);
    assert_eq!(got["apiVersion"], "resource.k8s.io/v1beta2");
    assert_eq!(got["metadata"]["generation"], 1);
    let added = got["spec"]["taint"]
        .as_object_mut()
        .unwrap()
        .remove("timeAdded")
        .expect("timeAdded set by the server");
    assert!(
        serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>(
            added.clone()
        )
        .is_ok(),
        "timeAdded is not an RFC 3339 time: {added}"
    );
    assert_eq!(got["spec"], rule("NoSchedule")["spec"]);
    let managed: Vec<Value> = got["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            json!({"manager": m["manager"], "operation": m["operation"],
                   "apiVersion": m["apiVersion"], "fieldsV1": m["fieldsV1"]})
        })
        .collect();
    assert_eq!(
        managed,
        [
            json!({"manager": "x", "operation": "Apply", "apiVersion": "resource.k8s.io/v1beta2",
                "fieldsV1": {"f:spec": {
                    "f:deviceSelector": {"f:device": {}, "f:driver": {}, "f:pool": {}},
                    "f:taint": {"f:effect": {}, "f:key": {}, "f:value": {}}}}})
        ]
    );
    let a = s.apply(&admin, "y", &path, &rule("NoExecute"), false);
    assert_eq!(a.code, 409, "{}", a.body);
    assert_eq!(
        a.message(),
        "Apply failed with 1 conflict: conflict with \"x\": .spec.taint.effect"
    );
    let a = s.apply(&admin, "x", &path, &rule("NoExecute"), false);
    assert!(a.ok(), "{}", a.body);
    let got = s.get(&path);
    assert_eq!(got["metadata"]["generation"], 2);
    assert_eq!(got["spec"]["taint"]["effect"], "NoExecute");
}

/// Discovery has resource.k8s.io once, v1 preferred and v1beta2 beside it, each version with the
/// resources the server serves in it.
#[test]
fn discovery_lists_resource_k8s_io_v1_and_v1beta2() {
    let s = KubeApiServer::start();
    let group = json!({"kind": "APIGroup", "apiVersion": "v1", "name": "resource.k8s.io",
        "versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"},
                     {"groupVersion": "resource.k8s.io/v1beta2", "version": "v1beta2"}],
        "preferredVersion": {"groupVersion": "resource.k8s.io/v1", "version": "v1"}});
    assert_eq!(s.get("/apis/resource.k8s.io"), group);
    let groups: Vec<Value> = s.get("/apis")["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["name"] == "resource.k8s.io")
        .map(|g| {
            // where clients reach the group: the server's own address, not this test's matter
            let mut g = g.clone();
            g.as_object_mut()
                .unwrap()
                .remove("serverAddressByClientCIDRs");
            g
        })
        .collect();
    let mut listed = group.clone();
    let listed = listed.as_object_mut().unwrap();
    listed.remove("kind");
    listed.remove("apiVersion");
    assert_eq!(groups, [Value::Object(listed.clone())]);
    let resources = |gv: &str| -> Vec<String> {
        s.get(&format!("/apis/{gv}"))["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        resources("resource.k8s.io/v1"),
        [
            "deviceclasses",
            "resourceclaims",
            "resourceclaims/status",
            "resourceclaimtemplates",
            "resourceslices",
        ]
    );
    assert_eq!(
        resources("resource.k8s.io/v1beta2"),
        ["devicetaintrules", "devicetaintrules/status"]
    );
}

/// Whether the server counts an open watch of resourceslices (its own long-running request
/// gauge).
fn slice_watch_open(s: &KubeApiServer) -> bool {
    let metrics = s.get("/metrics");
    let text = metrics.as_str().unwrap_or_default();
    text.lines().any(|l| {
        l.starts_with("apiserver_longrunning_requests{")
            && l.contains("resource=\"resourceslices\"")
            && l.contains("verb=\"WATCH\"")
            && l.ends_with(" 1")
    })
}

/// SIGTERM with a watch open: the server is gone within its 3 s shutdown timeout (plus its
/// start-up of the shutdown), not after the 60 s request timeout it would otherwise wait for
/// the watch; a test stopping it is not held up by a daemon's open watch.
#[test]
fn the_server_stops_within_seconds_with_a_watch_open() {
    let s = KubeApiServer::start();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // Ended by the server's shutdown, not by its timeout: the outcome is not this test's.
            let _ = s.try_request(
                &Who::admin(),
                "GET",
                &format!("{SLICES}?watch=1&timeoutSeconds=300"),
                None,
            );
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while !slice_watch_open(&s) {
            assert!(
                Instant::now() < deadline,
                "the watch is not open after 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let took = s.terminate(Duration::from_secs(20));
        assert!(
            took.is_some_and(|t| t < Duration::from_secs(10)),
            "the server took {took:?} to stop (None: still running after 20 s)\n{}",
            s.log()
        );
    });
}

/// A ResourceClaim as kube's strategy keeps it: no status from a create or from the main
/// resource, no spec change through `/status`, and a spec that cannot change.
#[test]
fn a_resource_claim_keeps_status_and_spec_apart() {
    let s = KubeApiServer::start();
    s.create_namespace("default");
    let admin = Who::admin();
    let allocated = json!({"devices": [{"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0",
                                        "conditions": []}]});
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        "status": allocated});
    let path = kube::object_path(&claim);
    assert_eq!(
        path,
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c"
    );
    let a = s.apply(&admin, "kubectl", &path, &claim, false);
    assert!(a.ok(), "{} {}", a.code, a.body);
    let got = s.get(&path);
    assert_eq!(got["metadata"]["generation"], 1);
    assert_eq!(got["status"], json!({}));
    assert_eq!(got["spec"], claim["spec"]);
    // /status writes the status and leaves the spec as it is.
    let a = s.merge_patch(
        &admin,
        "scheduler",
        &format!("{path}/status"),
        &json!({"status": allocated,
                "spec": {"devices": {"requests": [{"name": "other", "exactly": {"deviceClassName": "x"}}]}}}),
    );
    assert!(a.ok(), "{} {}", a.code, a.body);
    let got = s.get(&path);
    assert_eq!(got["status"], allocated);
    assert_eq!(got["spec"], claim["spec"]);
    // The main resource keeps the status; its spec is immutable.
    let a = s.merge_patch(
        &admin,
        "someone",
        &path,
        &json!({"status": {"devices": []}}),
    );
    assert!(a.ok(), "{} {}", a.code, a.body);
    assert_eq!(s.get(&path)["status"], allocated);
    let a = s.merge_patch(
        &admin,
        "someone",
        &path,
        &json!({"spec": {"devices": {"requests": [{"name": "other", "exactly": {"deviceClassName": "x"}}]}}}),
    );
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.message(),
        r#"ResourceClaim.resource.k8s.io "c" is invalid: spec: Invalid value: {"devices":{"requests":[{"name":"other","exactly":{"deviceClassName":"x"}}]}}: field is immutable"#
    );
    assert_eq!(s.get(&path)["spec"], claim["spec"]);
}
