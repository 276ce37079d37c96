//! `gpu-labeler run` with the `node` sink where a promise needs a server that misbehaves on
//! purpose (down at start, 500s, 409s, dropped connections, slow answers) or a record of each
//! request's body: a fault proxy (tests/apiserver in proxy mode) in front of Kubernetes' own API
//! server (tests/kube-apiserver) under the shipped admission policy, so that every request
//! without a fault meets the real semantics. The promises that need no fault are in
//! tests/daemon_kube.rs.

mod apiserver;
mod kube;
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use apiserver::*;
use kube::Who;
use support::{Cluster, NODE, WAIT, agent, kubelet_labels, published, wait_labels};

/// Kubernetes' own API server with our Node (kubelet's labels and one label from another
/// controller), and the fault proxy the agent talks to, on `port` (0: any).
fn cluster_on(port: u16) -> Cluster {
    let c = Cluster::new().proxied_on(port);
    c.merge_patch_labels("ops-controller", &[("team", Some("ml"))]);
    c
}

fn cluster() -> Cluster {
    cluster_on(0)
}

fn foreign() -> BTreeMap<String, String> {
    union(&[&kubelet_labels(), &map(&[("team", "ml")])])
}

#[test]
fn an_api_server_down_at_start_is_retried_until_it_answers() {
    let port = reserve_port();
    let s = agent().rules(&[("nvidia", "test.nvidia")]);
    let mut agent = s.start_at(&format!("http://127.0.0.1:{port}"));
    let addr = agent.health_addr();
    agent.wait_log("retrying in", WAIT);
    assert_eq!(get(addr, "/readyz").0, 503, "not ready before a publish");
    assert_eq!(get(addr, "/healthz").0, 200, "alive while retrying");
    assert!(agent.child_alive());

    let server = cluster_on(port);
    let want = published(&foreign(), &["test.nvidia"]);
    wait_labels(&server, &agent, &want);
    let ok = wait_for(WAIT, || (get(addr, "/readyz").0 == 200).then_some(()));
    assert!(ok.is_some());
    assert!(
        metric(addr, "gpu_labeler_publish_errors_total{reason=\"network\"}").unwrap_or(0.0) >= 1.0,
        "{}",
        get(addr, "/metrics").1
    );
}

#[test]
fn errors_500_conflicts_409_dropped_connections_and_slow_answers_are_retried() {
    let server = cluster();
    server.proxy().set_faults(Faults {
        drop: 1,
        error_500: 1,
        conflict_409: 1,
        slow: 1,
        // Longer than the 2 s request timeout of a 1 s interval.
        slow_for: Duration::from_secs(4),
        ..Faults::default()
    });
    let s = agent().rules(&[("nvidia", "test.nvidia")]);
    let mut agent = s.start(&server);
    let want = published(&foreign(), &["test.nvidia"]);
    let ok = wait_for(Duration::from_secs(60), || {
        (server.labels(NODE) == want).then_some(())
    });
    assert!(ok.is_some(), "log:\n{}", agent.log_text());
    // The agent's requests (the set-up merge patch aside).
    let faults: Vec<Option<&str>> = server
        .proxy()
        .requests()
        .iter()
        .filter(|r| !r.query.contains("ops-controller"))
        .map(|r| r.fault)
        .collect();
    assert_eq!(
        &faults[..4],
        &[Some("drop"), Some("500"), Some("409"), Some("slow")]
    );
    let addr = agent.health_addr();
    let m = |reason: &str| {
        metric(
            addr,
            &format!("gpu_labeler_publish_errors_total{{reason=\"{reason}\"}}"),
        )
    };
    assert_eq!(m("server"), Some(1.0));
    assert_eq!(m("conflict"), Some(1.0));
    assert_eq!(m("timeout"), Some(1.0));
    assert!(m("network").unwrap_or(0.0) >= 1.0);
    assert!(agent.child_alive());
}

#[test]
fn a_key_owned_by_another_manager_is_reported_and_the_rest_applied() {
    let server = cluster();
    // Another controller already set one of our keys to another value.
    let contested = "feature.node.kubernetes.io/pci-0302_10de.present";
    server.merge_patch_labels("ops-controller", &[(contested, Some("false"))]);
    // Without events: with the Node watch, the agent sees the takeover before it applies (and
    // never gets the 409 this test is about).
    let s = agent()
        .rules(&[("nvidia", "test.nvidia")])
        .args(&["--no-events"]);
    let agent = s.start(&server);
    let mut want = published(&foreign(), &["test.nvidia"]);
    want.insert(contested.to_string(), "false".to_string());
    wait_labels(&server, &agent, &want);
    agent.wait_log(
        &format!("label {contested} is owned by field manager \"ops-controller\""),
        WAIT,
    );
    let addr = agent.health_addr();
    let ok = wait_for(WAIT, || {
        (metric(addr, "gpu_labeler_label_conflicts_total") == Some(1.0)).then_some(())
    });
    assert!(ok.is_some(), "{}", get(addr, "/metrics").1);

    // The same conflict found by the API server on apply (the other controller took over one
    // of our keys after we read the Node): the rest is still applied.
    server.merge_patch_labels(
        "ops-controller",
        &[("feature.node.kubernetes.io/test.nvidia", Some("no"))],
    );
    s.rewrite_rules(&[("nvidia", "test.nvidia"), ("h100", "test.h100")]);
    want.insert("feature.node.kubernetes.io/test.nvidia".into(), "no".into());
    want.insert("feature.node.kubernetes.io/test.h100".into(), "true".into());
    wait_labels(&server, &agent, &want);
    agent.wait_log(
        "label feature.node.kubernetes.io/test.nvidia is owned by field manager \"ops-controller\"",
        WAIT,
    );
    let conflicts = server
        .proxy()
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.query.contains("gpu-labeler"))
        .count();
    assert_eq!(conflicts, 3, "first apply, then the 409 and its retry");
    // The real field manager's record: each contested key left to its owner.
    let keys = |ks: &[&str]| -> Vec<String> { ks.iter().map(|k| k.to_string()).collect() };
    assert_eq!(
        server.label_owners(NODE),
        BTreeMap::from([
            (
                "gpu-labeler/Apply".to_string(),
                keys(&[
                    "feature.node.kubernetes.io/pci-0300_102b.present",
                    "feature.node.kubernetes.io/pci-0302_10de.sriov.capable",
                    "feature.node.kubernetes.io/test.h100",
                ])
            ),
            (
                "kubelet/Update".to_string(),
                keys(&["kubernetes.io/hostname", "kubernetes.io/os"])
            ),
            (
                "ops-controller/Update".to_string(),
                keys(&[contested, "feature.node.kubernetes.io/test.nvidia", "team"])
            ),
        ])
    );
}

#[test]
fn an_invalid_rules_file_is_reported_and_the_last_good_rules_kept() {
    let server = cluster();
    let s = agent().rules(&[("nvidia", "test.nvidia")]);
    let agent = s.start_labelled(&server, &foreign());
    let want = s.expected(&foreign());
    let writes_before = writes(&server.proxy().requests()).len();

    // A ConfigMap-style update: a new file renamed over the old one.
    let tmp = s.dir().join("rules.yaml.new");
    std::fs::write(
        &tmp,
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: broken\nspec:\n  rules:\n    - name: bad\n      labels: {x: \"y\"}\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {op: Matches, value: [\"10de\"]}\n",
    )
    .unwrap();
    std::fs::rename(&tmp, s.rules_path()).unwrap();
    let line = agent.wait_log("keeping the last good rules", WAIT);
    assert!(line.contains("ERROR"), "{line}");
    let err = agent.wait_log("rules.yaml:", WAIT);
    assert!(
        err.contains(&format!("{}:12:", s.rules_path().display())),
        "file:line:column in {err:?}"
    );
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(server.labels(NODE), want);
    assert_eq!(writes(&server.proxy().requests()).len(), writes_before);
    // Reported once, not every cycle.
    let reports = agent
        .log()
        .iter()
        .filter(|l| l.contains("keeping the last good rules"))
        .count();
    assert_eq!(reports, 1, "{}", agent.log_text());
}

#[test]
fn sighup_reloads_at_once() {
    let server = cluster();
    // An hour's interval: nothing happens on its own within the test.
    let s = agent().rules(&[("nvidia", "test.nvidia")]).interval("1h");
    let mut agent = s.start(&server);
    agent.wait_log("first cycle in", WAIT);
    agent.signal("HUP");
    let one = published(&foreign(), &["test.nvidia"]);
    wait_labels(&server, &agent, &one);

    s.rewrite_rules(&[("nvidia", "test.nvidia"), ("h100", "test.h100")]);
    agent.signal("HUP");
    let two = union(&[&one, &rule_labels(&["test.h100"])]);
    wait_labels(&server, &agent, &two);
    assert_eq!(agent.stop(), 0);
}

#[test]
fn sigint_stops_cleanly_and_leaves_the_labels() {
    let server = cluster();
    let s = agent().rules(&[("nvidia", "test.nvidia")]);
    let mut agent = s.start_labelled(&server, &foreign());
    server.proxy().clear_requests();
    let want = s.expected(&foreign());
    agent.signal("INT");
    assert_eq!(agent.wait_exit(WAIT), 0);
    assert_eq!(server.labels(NODE), want);
    assert_eq!(
        writes(&server.proxy().requests()).len(),
        0,
        "no cleanup on exit"
    );
}

/// A rules ConfigMap caught half-way through kubelet's update (`..data` dangling for a moment)
/// is a reload error: the last good rules stay, so the site's labels stay on the Node; the
/// finished update is then loaded.
#[test]
fn a_configmap_caught_mid_swap_keeps_the_last_good_rules() {
    let server = cluster();
    let spec = agent();
    // The layout kubelet mounts: rules.yaml -> ..data/rules.yaml, ..data -> ..<timestamp>.
    let cm = spec.dir().join("rules");
    std::fs::create_dir_all(cm.join("..v1")).unwrap();
    std::fs::write(
        cm.join("..v1/rules.yaml"),
        rule_file(&[("nvidia", "test.nvidia")]),
    )
    .unwrap();
    std::os::unix::fs::symlink("..v1", cm.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/rules.yaml", cm.join("rules.yaml")).unwrap();
    let spec = spec.args(&["--rules", cm.to_str().unwrap()]);
    let agent = spec.start(&server);
    let want = published(&foreign(), &["test.nvidia"]);
    wait_labels(&server, &agent, &want);
    let addr = agent.health_addr();

    // Mid-swap: the old version is gone, the new link not yet in place.
    std::fs::remove_file(cm.join("..data")).unwrap();
    std::os::unix::fs::symlink("..v2", cm.join("..data")).unwrap();
    let counted = wait_for(WAIT, || {
        (metric(addr, "gpu_labeler_reload_errors_total")? >= 1.0).then_some(())
    });
    assert!(counted.is_some(), "{}", agent.log_text());
    agent.wait_log(
        &format!(
            "{}: cannot read rule file: No such file or directory",
            cm.join("rules.yaml").display()
        ),
        WAIT,
    );
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(server.labels(NODE), want, "site labels kept");

    // The swap completes with a new version.
    std::fs::create_dir(cm.join("..v2")).unwrap();
    std::fs::write(
        cm.join("..v2/rules.yaml"),
        rule_file(&[("nvidia", "test.nvidia"), ("h100", "test.h100")]),
    )
    .unwrap();
    let two = union(&[&want, &rule_labels(&["test.h100"])]);
    wait_labels(&server, &agent, &two);
}

/// A site rule that writes outside the namespaces the admission policy allows (`amd.com/*`)
/// is refused by the agent itself and reported with its file and line: the rest is applied,
/// where the API server would have refused the whole request.
#[test]
fn a_label_outside_the_allowed_namespaces_is_refused_alone() {
    // The shipped policy, through the real plugin.
    let server = cluster();
    let s = agent().rules(&[("nvidia", "test.nvidia"), ("amd", "amd.com/gpu.present")]);
    let agent = s.start(&server);
    let want = published(&foreign(), &["test.nvidia"]);
    wait_labels(&server, &agent, &want);
    agent.wait_log(
        &format!(
            "label \"amd.com/gpu.present=true\" from rule \"amd\" (NodeFeatureRule \"test-rules\", {}:14:7) rejected: namespace \"amd.com\" is not in labels.allowedNs [feature.node.kubernetes.io, *.feature.node.kubernetes.io, profile.node.kubernetes.io, *.profile.node.kubernetes.io] (the admission policy must allow it too)",
            s.rules_path().display()
        ),
        WAIT,
    );
    let refused = server
        .proxy()
        .requests()
        .iter()
        .filter(|r| r.body.contains("amd.com"))
        .count();
    assert_eq!(refused, 0, "never sent");

    // Widening both together: the config's allowedNs and the policy.
    server.kube.widen_node_policy(r"amd\.com/");
    server.kube.wait_admitted(
        &Who::agent(NODE),
        &format!("/api/v1/nodes/{NODE}"),
        &serde_json::json!({"apiVersion": "v1", "kind": "Node",
                            "metadata": {"name": NODE, "labels": {"amd.com/gpu.present": "true"}}}),
    );
    drop(agent);
    let s = s.config("labels:\n  allowedNs: [feature.node.kubernetes.io, amd.com]\n");
    let agent = s.start(&server);
    let mut wider = want.clone();
    wider.insert("amd.com/gpu.present".into(), "true".into());
    wait_labels(&server, &agent, &wider);
}
