//! `match` against Kubernetes' own structured allocator: every case of
//! tests/dra-allocator-oracle/recorded.json (the examples of the NVIDIA, AMD and Intel DRA
//! drivers' docs, and the generator's random cases), with the verdict
//! `k8s.io/dynamic-resource-allocation/structured` gave it (its version and commit, the
//! generator's seed: the file's `provenance`), replayed through `match`'s own evaluation
//! (`report::match_fleet`, one pod naming the case's claims on the case's node). The verdicts
//! agree on every case: allocated, not allocatable, or the allocator's error; and where the case
//! has one pool (so upstream's order is the file's), on the devices each claim gets.
//!
//! tests/dra-allocator-oracle/README.md says how the file is made (CI has no source host, so
//! the recorded verdicts are what CI checks).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use gpu_labeler::scheduling::dra::Why;
use gpu_labeler::scheduling::{draobjects, objects, report};

fn recorded() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/dra-allocator-oracle/recorded.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `match`'s verdict on one case: `ok` with each claim's devices, `unschedulable`, or `error`.
fn replay(case: &Value) -> (String, Vec<Vec<String>>, String) {
    let mut items: Vec<Value> = Vec::new();
    for k in ["slices", "classes", "claims", "allocated"] {
        items.extend(case[k].as_array().unwrap().iter().cloned());
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let set = draobjects::read(&case["id"].to_string(), &list.to_string()).unwrap();
    let nodes = objects::read_nodes("node", &case["node"].to_string()).unwrap();
    let claims: Vec<Value> = case["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let name = &c["metadata"]["name"];
            json!({"name": name, "resourceClaimName": name})
        })
        .collect();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"resourceClaims": claims, "containers": [{"name": "c", "image": "x"}]}});
    let workloads = objects::read_workloads("pod", &pod.to_string()).unwrap();
    let producers = report::Producers {
        rules: Vec::new(),
        builtin: |_| None,
    };
    let reports = report::match_fleet(workloads, &nodes, &producers, &set);
    let v = &reports[0].dra[0];
    match v.first() {
        None => {
            let devices = v
                .claims
                .iter()
                .map(|c| c.requests.iter().flat_map(|r| r.devices.clone()).collect())
                .collect();
            ("ok".into(), devices, String::new())
        }
        Some((_, why @ (Why::Unpublished { .. } | Why::Error(_)))) => {
            ("error".into(), Vec::new(), why.describe())
        }
        Some((_, why)) => ("unschedulable".into(), Vec::new(), why.describe()),
    }
}

/// One (driver, pool) among the slices: upstream then takes devices in the file's order.
fn one_pool(case: &Value) -> bool {
    let pools: BTreeSet<(String, String)> = case["slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["spec"]["driver"].as_str().unwrap().to_string(),
                s["spec"]["pool"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    pools.len() == 1
}

#[test]
fn match_agrees_with_kubernetes_structured_allocator_on_every_recorded_case() {
    let file = recorded();
    let cases = file["cases"].as_array().unwrap();
    let verdicts = file["verdicts"].as_array().unwrap();
    assert_eq!(cases.len(), verdicts.len());
    // The brief's floor: at least 1,000 generated cases besides the drivers' examples.
    let generated = cases
        .iter()
        .filter(|c| c["id"].as_str().unwrap().starts_with("random "))
        .count();
    assert!(generated >= 1000, "{generated} generated cases");
    let mut disagree = Vec::new();
    for (case, want) in cases.iter().zip(verdicts) {
        assert_eq!(case["id"], want["id"]);
        let (verdict, devices, why) = replay(case);
        let want_verdict = want["verdict"].as_str().unwrap();
        let mut same = verdict == want_verdict;
        if same && verdict == "ok" && one_pool(case) {
            let want_devices: Vec<Vec<String>> =
                serde_json::from_value(want["devices"].clone()).unwrap_or_default();
            same = devices == want_devices;
        }
        if !same {
            disagree.push(format!(
                "{}: allocator {want_verdict} {} {}; match {verdict} {devices:?} {why}",
                case["id"], want["devices"], want["error"]
            ));
        }
    }
    assert!(
        disagree.is_empty(),
        "{} of {} cases disagree:\n{}",
        disagree.len(),
        cases.len(),
        disagree.join("\n")
    );
}
