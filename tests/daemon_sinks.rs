//! `gpu-labeler run` with the other sinks (`nodefeature`, `features-file`, `stdout`) and the
//! modes `--oneshot` and `--dry-run`, end to end with the real binary.

mod apiserver;
mod common;
mod kube;
mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use apiserver::*;
use serde_json::{Value, json};
use support::{NODE, WAIT, agent, fake_server};

/// `gpu-labeler <command> <fixture args> ARGS`: stdout, asserting success.
fn gpu_labeler(command: &str, args: &[&str]) -> String {
    let mut a = vec![command.to_string()];
    a.extend(fixture_args());
    a.extend(args.iter().map(|s| s.to_string()));
    common::run(a).ok().to_string()
}

fn nodefeature(server: &FakeApiServer, ns: &str) -> Option<Value> {
    server.with(|s| {
        s.nodefeatures
            .get(&(ns.to_string(), NODE.to_string()))
            .map(|o| o.object.clone())
    })
}

/// On Kubernetes' own API server (tests/kube-apiserver) under the nodefeature component's
/// admission policy, with the agent's token bound to its node.
#[test]
fn nodefeature_sink_writes_nfds_object_once_and_reads_it_after_a_restart() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("deploy/components/nodefeature/admission-policy.yaml"),
    )
    .unwrap();
    let policy: Vec<Value> = text
        .split("\n---\n")
        .map(|d| serde_saphyr::from_str(d).unwrap())
        .collect();
    let server = kube::KubeApiServer::with_policy(&policy);
    server.create_namespace("gpu-system");
    server.create_node(NODE, &[]);
    let kc = server.kubeconfig(&kube::Who::agent(NODE));
    let spec = agent()
        .rules(&[("nvidia", "test.nvidia")])
        .args(&["--sink", "nodefeature"])
        .env("POD_NAMESPACE", "gpu-system");
    let mut agent = spec.start_with(&kc);
    let path = format!("/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpu-system/nodefeatures/{NODE}");
    let get = |path: &str| {
        let a = server.request(&kube::Who::admin(), "GET", path, None);
        a.ok().then_some(a.body)
    };
    let obj = wait_for(WAIT, || get(&path));
    let obj = obj.unwrap_or_else(|| panic!("no NodeFeature; log:\n{}", agent.log_text()));

    let features: Value = serde_json::from_str(&gpu_labeler("features", &["-o", "json"])).unwrap();
    let labels = union(&[&fixture_pci_labels(), &rule_labels(&["test.nvidia"])]);
    let uid = server.node(NODE)["metadata"]["uid"].clone();
    let m = &obj["metadata"];
    assert_eq!(
        json!({"apiVersion": obj["apiVersion"], "kind": obj["kind"],
               "metadata": {"name": m["name"], "namespace": m["namespace"], "labels": m["labels"],
                            "ownerReferences": m["ownerReferences"]},
               "spec": obj["spec"]}),
        json!({
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
            "kind": "NodeFeature",
            "metadata": {
                "name": NODE,
                "namespace": "gpu-system",
                "labels": {"nfd.node.kubernetes.io/node-name": NODE},
                // Owned by the Node, not the pod: replacing the pod never removes it.
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": uid}]
            },
            "spec": {"features": features, "labels": labels}
        })
    );
    // The agent's Apply owns it (the real field manager's record).
    let managers: Vec<(&str, &str)> = m["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap(),
                e["operation"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(managers, [("gpu-labeler", "Apply")]);
    // The Node itself is not touched.
    assert_eq!(server.labels(NODE), BTreeMap::new());

    std::thread::sleep(Duration::from_millis(3000));
    let ua = format!("gpu-labeler/{}", env!("CARGO_PKG_VERSION"));
    let calls = || -> Vec<(String, String)> {
        server
            .requests()
            .iter()
            .filter(|r| r.user_agent == ua && r.verb != "WATCH")
            .map(|r| (r.verb.clone(), r.uri.clone()))
            .collect()
    };
    let node_path = format!("/api/v1/nodes/{NODE}");
    assert_eq!(
        calls(),
        vec![
            ("GET".to_string(), node_path.clone()),
            ("GET".to_string(), path.clone()),
            (
                "APPLY".to_string(),
                format!("{path}?fieldManager=gpu-labeler")
            )
        ]
    );
    assert_eq!(agent.stop(), 0);

    // Restart, nothing changed: one read, no write.
    let before = calls().len();
    let agent = spec.start_with(&kc);
    agent.wait_log("first cycle in", WAIT);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        calls()[before..],
        [("GET".to_string(), node_path), ("GET".to_string(), path)]
    );
}

#[test]
fn oneshot_publishes_once_and_exits_0_and_nodefeature_defaults_to_nfds_namespace() {
    let server = fake_server(&[]);
    let mut agent = agent()
        .args(&["--sink", "nodefeature", "--oneshot"])
        .start_fake(&server);
    assert_eq!(agent.wait_exit(WAIT), 0, "{}", agent.log_text());
    let obj = nodefeature(&server, "node-feature-discovery").expect("object");
    assert_eq!(obj["spec"]["labels"], json!(fixture_pci_labels()));
}

#[test]
fn oneshot_exits_3_when_the_api_server_never_answers() {
    let port = reserve_port();
    let mut agent = agent()
        .args(&["--oneshot"])
        .start_at(&format!("http://127.0.0.1:{port}"));
    assert_eq!(agent.wait_exit(Duration::from_secs(40)), 3);
    let log = agent.log_text();
    assert!(log.contains("publishing failed after 4 attempts"), "{log}");
}

#[test]
fn oneshot_publishes_to_the_node() {
    let server = fake_server(&[("kubernetes.io/hostname", NODE)]);
    let mut agent = agent().args(&["--oneshot"]).start_fake(&server);
    assert_eq!(agent.wait_exit(WAIT), 0, "{}", agent.log_text());
    assert_eq!(
        server.labels(NODE),
        union(&[
            &map(&[("kubernetes.io/hostname", NODE)]),
            &fixture_pci_labels()
        ])
    );
}

#[test]
fn dry_run_logs_the_diff_and_writes_nothing() {
    let server = fake_server(&[("kubernetes.io/hostname", NODE)]);
    let agent = agent().args(&["--dry-run"]).start_fake(&server);
    let line = agent.wait_log("dry run", WAIT);
    let diff: Vec<String> = fixture_pci_labels()
        .iter()
        .map(|(k, v)| format!("+{k}={v}"))
        .collect();
    assert!(line.ends_with(&diff.join(" ")), "{line}");
    std::thread::sleep(Duration::from_millis(2500));
    let methods: Vec<String> = server.requests().iter().map(|r| r.method.clone()).collect();
    assert_eq!(methods, vec!["GET"]);
    assert_eq!(
        server.labels(NODE),
        map(&[("kubernetes.io/hostname", NODE)])
    );
    // The diff is logged once, not every cycle.
    assert_eq!(
        agent.log().iter().filter(|l| l.contains("dry run")).count(),
        1
    );
}

#[test]
fn features_file_is_written_atomically_only_on_change_and_kept_on_exit() {
    let spec = agent().rules(&[("nvidia", "test.nvidia")]);
    let out_dir = spec.dir().join("features.d");
    std::fs::create_dir(&out_dir).unwrap();
    let file = out_dir.join("gpu-labeler");
    let spec = spec.args(&["--sink", "features-file", "--features-file"]);
    let spec = spec.args(&[file.to_str().unwrap()]);
    let rules = spec.rules_path().to_str().unwrap();
    let mut agent = spec.start_local();
    // What `labels -o features-file` says of the rules as they are now.
    let expected = || {
        gpu_labeler(
            "labels",
            &[
                "-o",
                "features-file",
                "--no-default-rules",
                "--rules",
                rules,
            ],
        )
    };
    let content = wait_for(WAIT, || std::fs::read_to_string(&file).ok());
    let content = content.unwrap_or_else(|| panic!("no file; log:\n{}", agent.log_text()));
    assert_eq!(content, expected());
    let inode = std::fs::metadata(&file).unwrap().ino();

    // Steady state: the very same file (no rewrite).
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(std::fs::metadata(&file).unwrap().ino(), inode);

    // A change: a new file renamed over the old one, no temporary left behind.
    spec.rewrite_rules(&[("nvidia", "test.nvidia"), ("h100", "test.h100")]);
    let changed = wait_for(WAIT, || {
        std::fs::read_to_string(&file)
            .ok()
            .filter(|c| c.contains("test.h100"))
    })
    .expect("rewritten");
    let expected = expected();
    assert_eq!(changed, expected);
    assert_ne!(
        std::fs::metadata(&file).unwrap().ino(),
        inode,
        "renamed, not rewritten in place"
    );
    let names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["gpu-labeler"]);

    assert_eq!(agent.stop(), 0);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        expected,
        "kept on exit"
    );
}

#[test]
fn stdout_prints_on_change_only() {
    let spec = agent()
        .rules(&[("nvidia", "test.nvidia")])
        .args(&["--sink", "stdout"]);
    let mut agent = spec.start_local();
    agent.wait_log("published to stdout", WAIT);
    spec.rewrite_rules(&[("nvidia", "test.nvidia"), ("h100", "test.h100")]);
    agent.wait_log("+feature.node.kubernetes.io/test.h100=true", WAIT);
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(agent.stop(), 0);
    let lines: Vec<Value> = agent
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        vec![
            json!({"labels": union(&[&fixture_pci_labels(), &rule_labels(&["test.nvidia"])])}),
            json!({"labels": union(&[
                &fixture_pci_labels(),
                &rule_labels(&["test.nvidia", "test.h100"])
            ])}),
        ]
    );
}

#[test]
fn an_invalid_config_is_reported_and_the_last_good_one_kept() {
    let server = fake_server(&[]);
    let spec = agent().config("sources:\n  pci:\n    deviceLabelFields: [class, vendor, device]\n");
    let config = spec.config_path();
    let agent = spec.start_fake(&server);
    let with_device: BTreeMap<String, String> = [
        "feature.node.kubernetes.io/pci-0300_102b_0536.present",
        "feature.node.kubernetes.io/pci-0302_10de_2330.present",
        "feature.node.kubernetes.io/pci-0302_10de_2330.sriov.capable",
    ]
    .iter()
    .map(|k| (k.to_string(), "true".to_string()))
    .collect();
    support::wait_labels(&server, &agent, &with_device);

    std::fs::write(
        &config,
        "sources:\n  pci:\n    deviceLabelFeilds: [class]\n",
    )
    .unwrap();
    let err = agent.wait_log("keeping the last good config", WAIT);
    assert!(
        err.contains(&format!("invalid config {}:3:", config.display())),
        "{err}"
    );
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(server.labels(NODE), with_device);

    // Fixed again: back to the defaults, the device-specific labels go.
    std::fs::write(&config, "").unwrap();
    let ok = wait_for(WAIT, || {
        (server.labels(NODE) == fixture_pci_labels()).then_some(())
    });
    assert!(ok.is_some(), "{:#?}", server.labels(NODE));
}

#[test]
fn the_node_sink_needs_a_node_name() {
    let spec = agent();
    let mut args = spec.command_line(&write_kubeconfig(spec.dir(), "http://127.0.0.1:1"));
    // Without `--node-name NODE`.
    let at = args.iter().position(|a| a == "--node-name").unwrap();
    args.drain(at..=at + 1);
    let mut agent = Agent::start(&args, &[]);
    // How the command was invoked: the usage code.
    assert_eq!(agent.wait_exit(WAIT), 2);
    assert_eq!(
        agent.log_text().trim_end(),
        "error: --node-name (or NODE_NAME) is required for --sink node"
    );
}
