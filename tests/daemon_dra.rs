//! The daemon's DRA source on the test API server built from Kubernetes' own code, which serves
//! `resource.k8s.io` (tests/kube-apiserver): `gpu-labeler run` lists and watches its own node's
//! ResourceSlices (field selector `spec.nodeName`), and relabels within 2 s of a slice appearing
//! or going; another node's slice changes nothing. A cluster without DRA (the fake API server,
//! which serves no `resource.k8s.io`) gives no DRA labels, said once.

mod apiserver;
mod common;
mod kube;
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use kube::object_path;
use serde_json::{Value, json};
use support::Cluster;

const NODE: &str = "n1";

/// What `labels` gives on the daemon's inputs with these DRA objects (`None`: no `--dra`), and
/// the kubelet's label.
fn want(dir: &std::path::Path, objects: Option<Vec<Value>>) -> BTreeMap<String, String> {
    let mut args: Vec<String> = vec!["labels".into(), "-o".into(), "json".into()];
    args.extend(apiserver::fixture_args());
    if let Some(items) = objects {
        let path = dir.join("dra.json");
        std::fs::write(&path, json!({"kind": "List", "items": items}).to_string()).unwrap();
        args.extend([
            "--dra".into(),
            path.display().to_string(),
            "--node-name".into(),
            NODE.into(),
        ]);
    }
    let mut labels = common::labels_of(common::run(&args).ok());
    labels.insert("kubernetes.io/hostname".into(), NODE.into());
    labels
}

/// Waits up to 20 s for the Node's labels to be `want`; how long that took.
fn wait_labels(
    s: &impl support::NodeLabels,
    agent: &apiserver::Agent,
    want: &BTreeMap<String, String>,
) -> Duration {
    support::wait_labels_of(s, NODE, support::WAIT, agent, want)
}

/// The agent on NODE with the shipped rules and the DRA source.
fn with_dra() -> support::AgentSpec {
    support::agent().node(NODE).default_rules().dra()
}

#[test]
fn the_daemon_relabels_within_2_s_of_its_nodes_slice_appearing_or_going() {
    let s = Cluster::named(NODE, &[("kubernetes.io/hostname", NODE)]);
    let dir = tempfile::tempdir().unwrap();
    // The interval far longer than the bound: only the slice watch can relabel in time.
    let agent = with_dra().interval("60s").start(&s);

    // DRA served, no slice yet: none of the 8 GPUs is covered.
    let none = want(dir.path(), Some(vec![]));
    assert_eq!(
        (
            none.get("feature.node.kubernetes.io/gpu.dra.coverage"),
            none.get("feature.node.kubernetes.io/gpu.dra.devices")
        ),
        (Some(&"none".to_string()), Some(&"0".to_string()))
    );
    wait_labels(&s, &agent, &none);

    // Another node's slice: nothing changes for this one.
    let other = common::dell_dra_slice("n2");
    s.admin_apply("gpu.nvidia.com", &other);

    // NVIDIA's kubelet plugin publishes this node's GPUs.
    let ours = common::dell_dra_slice(NODE);
    let complete = want(dir.path(), Some(vec![ours.clone()]));
    assert_eq!(
        complete.get("feature.node.kubernetes.io/gpu.dra.coverage"),
        Some(&"complete".to_string())
    );
    s.admin_apply("gpu.nvidia.com", &ours);
    let took = wait_labels(&s, &agent, &complete);
    assert!(
        took <= Duration::from_secs(2),
        "relabelled {took:?} after the slice appeared"
    );

    // The driver goes away and its slice with it.
    s.delete(&object_path(&ours));
    let took = wait_labels(&s, &agent, &none);
    assert!(
        took <= Duration::from_secs(2),
        "relabelled {took:?} after the slice went"
    );
    let mut agent = agent;
    assert_eq!(agent.stop(), 0, "{}", agent.log_text());
    // The DRA objects are read, never written.
    let writes: Vec<String> = s
        .requests()
        .into_iter()
        .filter(|r| r.user_agent.starts_with("gpu-labeler/") && r.is_write())
        .map(|r| r.uri)
        .filter(|u| u.contains("resource.k8s.io"))
        .collect();
    assert_eq!(writes, Vec::<String>::new());
}

/// A cluster that serves no `resource.k8s.io` (the fake API server): no DRA facts, no DRA
/// label, and the agent says so once.
#[test]
fn without_dra_in_the_cluster_there_is_no_dra_label_and_it_is_said_once() {
    let server = apiserver::FakeApiServer::start();
    server.add_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    let dir = tempfile::tempdir().unwrap();
    let mut agent = with_dra().start_fake(&server);
    wait_labels(&server, &agent, &want(dir.path(), None));
    // A few cycles on: still said once.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(agent.stop(), 0);
    let log = agent.log_text();
    assert_eq!(agent.count_lines("no resource.k8s.io"), 1, "{log}");
}
