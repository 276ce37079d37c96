//! `gpu-labeler run` with the node sink against a test API server built from Kubernetes' own
//! code (tests/kube-apiserver), under the shipped admission policy, with the agent's token bound
//! to its node: each promise of docs/catalog.md#publishing met by the real field manager,
//! handlers, watch and admission plugin. (Faults are injected by tests/apiserver's server, which
//! can be made to misbehave: daemon_node.rs, daemon_recovery.rs.)

mod apiserver;
mod kube;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use apiserver::{fixture_pci_labels, map, rule_labels, union, wait_for};
use serde_json::json;
use support::{
    AgentSpec, Cluster, NODE, WAIT, agent, kubelet_labels, published, wait_labels, wait_ready,
};

const UA: &str = concat!("gpu-labeler/", env!("CARGO_PKG_VERSION"));

fn foreign() -> BTreeMap<String, String> {
    union(&[&kubelet_labels(), &map(&[("team", "ml")])])
}

/// The shipped policy; our Node as the kubelet registered it, and an admin's label.
fn cluster() -> Cluster {
    let c = Cluster::new();
    c.merge_patch_labels("kubectl-label", &[("team", Some("ml"))]);
    c
}

/// Starts the agent `spec` on a Node that has its labels: in its first 2.5 s it reads the
/// Node once and sends nothing else (its watch aside).
fn restart_reads_the_node_once(server: &Cluster, spec: &AgentSpec) {
    let before = agent_requests(server).len();
    let agent = spec.start(server);
    wait_ready(&agent);
    std::thread::sleep(Duration::from_millis(2500));
    let after: Vec<(String, String)> = agent_requests(server)[before..]
        .iter()
        .filter(|r| r.verb != "WATCH")
        .map(|r| (r.verb.clone(), r.uri.clone()))
        .collect();
    assert_eq!(
        after,
        [("GET".to_string(), format!("/api/v1/nodes/{NODE}"))]
    );
}

/// The agent's requests as the server logged them: (verb, URI) in order.
fn agent_requests(server: &Cluster) -> Vec<kube::Logged> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.user_agent == UA)
        .collect()
}

fn keys(m: &BTreeMap<String, String>) -> Vec<String> {
    m.keys().cloned().collect()
}

#[test]
fn applies_labels_as_gpu_labeler_once_and_reuses_its_connection() {
    let server = cluster();
    let s = agent().rules(&[("nvidia", "test.nvidia"), ("h100", "test.h100")]);
    let mut agent = s.start_labelled(&server, &foreign());
    let ours = s.expected(&BTreeMap::new());

    // The real field manager's record: the agent's Apply owns exactly its keys, the others'
    // entries are as they were.
    assert_eq!(
        server.label_owners(NODE),
        BTreeMap::from([
            ("gpu-labeler/Apply".to_string(), keys(&ours)),
            ("kubectl-label/Update".to_string(), vec!["team".to_string()]),
            ("kubelet/Update".to_string(), keys(&kubelet_labels())),
        ])
    );

    // Steady state: three more cycles at 1 s, no more reads or writes (the watch, open until
    // it ends, is logged by the server when it ends).
    std::thread::sleep(Duration::from_millis(3500));
    let calls = |reqs: &[kube::Logged]| -> Vec<(String, String, u16)> {
        reqs.iter()
            .filter(|r| r.verb != "WATCH")
            .map(|r| (r.verb.clone(), r.uri.clone(), r.code))
            .collect()
    };
    let node = format!("/api/v1/nodes/{NODE}");
    let apply = format!("{node}?fieldManager=gpu-labeler");
    assert_eq!(
        calls(&agent_requests(&server)),
        [
            ("GET".to_string(), node.clone(), 200),
            ("APPLY".to_string(), apply.clone(), 200)
        ]
    );
    // A change: one more apply, on the connection the first cycle opened.
    s.rewrite_rules(&[("nvidia", "test.nvidia")]);
    let ours = union(&[&fixture_pci_labels(), &rule_labels(&["test.nvidia"])]);
    wait_labels(&server, &agent, &union(&[&foreign(), &ours]));
    let reqs = agent_requests(&server);
    assert_eq!(
        calls(&reqs),
        [
            ("GET".to_string(), node, 200),
            ("APPLY".to_string(), apply.clone(), 200),
            ("APPLY".to_string(), apply, 200),
        ]
    );
    let connections: BTreeSet<&str> = reqs
        .iter()
        .filter(|r| r.verb != "WATCH")
        .map(|r| r.src.as_str())
        .collect();
    assert_eq!(connections.len(), 1, "{reqs:#?}");
    assert!(reqs.iter().all(|r| r.user_agent == UA));

    assert_eq!(agent.stop(), 0);
    assert_eq!(server.labels(NODE), union(&[&foreign(), &ours]));
}

#[test]
fn a_rule_removed_from_the_file_removes_its_label_and_its_ownership() {
    let server = cluster();
    let s = agent().rules(&[("nvidia", "test.nvidia"), ("h100", "test.h100")]);
    let agent = s.start_labelled(&server, &foreign());

    s.rewrite_rules(&[("nvidia", "test.nvidia")]);
    let one = union(&[&fixture_pci_labels(), &rule_labels(&["test.nvidia"])]);
    wait_labels(&server, &agent, &union(&[&foreign(), &one]));
    assert_eq!(server.label_owners(NODE)["gpu-labeler/Apply"], keys(&one));
    agent.wait_log("rules reloaded", WAIT);
    agent.wait_log("-feature.node.kubernetes.io/test.h100", WAIT);
}

#[test]
fn a_restart_with_nothing_changed_reads_the_node_once_and_writes_nothing() {
    let server = cluster();
    let s = agent().rules(&[("nvidia", "test.nvidia")]);
    let mut agent = s.start_labelled(&server, &foreign());
    assert_eq!(agent.stop(), 0);
    let want = s.expected(&foreign());
    let rv = server.node(NODE)["metadata"]["resourceVersion"].clone();
    restart_reads_the_node_once(&server, &s);
    assert_eq!(server.node(NODE)["metadata"]["resourceVersion"], rv);
    assert_eq!(server.labels(NODE), want);
}

/// The Node watch (field selector, resourceVersion, bookmarks) as the real server serves it: an
/// admin who removes one of the agent's labels sees it back within a second or two, not an
/// interval later.
#[test]
fn a_label_removed_by_someone_else_comes_back_through_the_watch() {
    let server = cluster();
    // An hour's interval: the first cycle at start, then only the watch brings a relabel.
    let agent = agent()
        .rules(&[("nvidia", "test.nvidia")])
        .interval("1h")
        .start(&server);
    let want = published(&foreign(), &["test.nvidia"]);
    wait_labels(&server, &agent, &want);
    let t = Instant::now();
    server.admin_patch(
        "kubectl-label",
        &format!("/api/v1/nodes/{NODE}"),
        &json!({"metadata": {"labels": {"feature.node.kubernetes.io/test.nvidia": null}}}),
    );
    wait_labels(&server, &agent, &want);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    agent.wait_log(
        "node gpu-node-1: some of our labels, taints or condition were removed or changed by someone else",
        WAIT,
    );
    // The server logs a watch when it ends: stop the agent.
    let mut agent = agent;
    assert_eq!(agent.stop(), 0);
    wait_for(WAIT, || {
        agent_requests(&server)
            .iter()
            .any(|r| r.verb == "WATCH")
            .then_some(())
    });
    let watches: Vec<String> = agent_requests(&server)
        .iter()
        .filter(|r| r.verb == "WATCH")
        .map(|r| {
            r.uri
                .split('&')
                .filter(|p| !p.starts_with("resourceVersion=") && !p.starts_with("timeoutSeconds="))
                .collect::<Vec<_>>()
                .join("&")
        })
        .collect();
    assert!(!watches.is_empty());
    for w in &watches {
        assert_eq!(
            w,
            "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dgpu-node-1&allowWatchBookmarks=true"
        );
    }
}

#[test]
fn a_label_no_longer_produced_is_removed_across_a_restart() {
    let server = cluster();
    let s = agent().rules(&[("nvidia", "test.nvidia"), ("h100", "test.h100")]);
    let mut agent = s.start_labelled(&server, &foreign());
    assert_eq!(agent.stop(), 0);

    s.rewrite_rules(&[("nvidia", "test.nvidia")]);
    let agent = s.start(&server);
    let one = union(&[&fixture_pci_labels(), &rule_labels(&["test.nvidia"])]);
    wait_labels(&server, &agent, &union(&[&foreign(), &one]));
    assert_eq!(server.label_owners(NODE)["gpu-labeler/Apply"], keys(&one));
}

/// A site that widened its config's allowedNs but not the policy: the real plugin denies the
/// apply, and the agent publishes what the shipped policy admits and reports the rest once,
/// instead of leaving the Node without any of its labels.
#[test]
fn a_policy_denial_costs_only_the_keys_it_refuses_reported_once() {
    let server = cluster();
    let agent = agent()
        .rules(&[("nvidia", "test.nvidia"), ("amd", "amd.com/gpu.present")])
        .config("labels:\n  allowedNs: [feature.node.kubernetes.io, amd.com]\n")
        .start(&server);
    let want = published(&foreign(), &["test.nvidia"]);
    wait_labels(&server, &agent, &want);
    std::thread::sleep(Duration::from_millis(3500));
    let line = "label amd.com/gpu.present left out: the API server's admission policy refused the apply that carried it (gpu-labeler may only add labels in its own namespaces, and change or remove only the labels it owns); the other keys are published";
    let reported: Vec<String> = agent
        .log()
        .into_iter()
        .filter(|l| l.contains("amd.com/gpu.present left out"))
        .collect();
    assert_eq!(reported, [format!(" WARN {line}")]);
    let applies: Vec<u16> = agent_requests(&server)
        .iter()
        .filter(|r| r.verb == "APPLY")
        .map(|r| r.code)
        .collect();
    assert_eq!(applies, [403, 200]);
    let addr = agent.health_addr();
    assert_eq!(
        apiserver::metric(addr, "gpu_labeler_label_refused_total"),
        Some(1.0)
    );
}

/// A node that just joined (autoscaling, a scale-from-zero pool) is labelled within 3 s of the
/// agent's start, whatever its interval (before: at a random point of the interval, up to a
/// minute, while its pods waited Pending); a restarted agent whose Node has its labels reads
/// it once and writes nothing.
#[test]
fn a_new_node_is_labelled_within_seconds_of_the_start_whatever_the_interval() {
    let server = cluster();
    let s = agent().rules(&[("nvidia", "test.nvidia")]).interval("60s");
    let want = published(&foreign(), &["test.nvidia"]);
    let started = Instant::now();
    let mut agent = s.start(&server);
    wait_labels(&server, &agent, &want);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "first labels after {took:?}");
    assert_eq!(agent.stop(), 0);
    restart_reads_the_node_once(&server, &s);
}
