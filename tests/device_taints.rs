//! GPU faults as DRA device taints (`publish.deviceTaints`, #46) on the test API server built from
//! Kubernetes' own code (tests/kube-apiserver: `resource.k8s.io` with DeviceTaintRule v1beta2, the
//! real ValidatingAdmissionPolicy plugin) with the shipped policies: the real agent on a writable
//! copy of the Dell tree whose GPU 1's link width changes under it, NVIDIA's slice for the node.
//! Each fault makes exactly one rule for exactly that device within a scan; it goes within the
//! hold and a scan after the fault clears; a 1.5 s flap under the hold is one create and one
//! delete; a restarted agent keeps the rules without writing them; a rule someone else wrote is
//! never touched; forged writes with the agent's token are refused; `run --oneshot --sink stdout`
//! prints the rules it would apply.

mod apiserver;
mod common;
mod kube;

use std::time::{Duration, Instant};

use apiserver::{Agent, wait_for};
use common::{Tree, proc_fixture};
use kube::{KubeApiServer, Who, object_path, shipped_device_taint_policy};
use serde_json::{Value, json};

const NODE: &str = "n1";
const HOLD: Duration = Duration::from_secs(4);
const RULES: &str = "/apis/resource.k8s.io/v1beta2/devicetaintrules";
/// The Dell fixture's GPU 1 and NVIDIA's device for it (tests/fixtures/dra).
const GPU: &str = "0000:3b:00.0";
const RULE: &str = "gpu-labeler-n1-0000-3b-00-0";

/// `cmd` on the writable Dell tree with NVML off, then `extra`.
fn on_tree(cmd: &[&str], tree: &Tree, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    a.extend(common::discovery_arg_strings(
        tree.root(),
        &proc_fixture("dell-xe9680-8xh100"),
    ));
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// [`on_tree`] with NVIDIA's slice of node n1 as a `--dra` file written in `dir`, as n1.
fn on_tree_with_slices(cmd: &[&str], tree: &Tree, dir: &std::path::Path) -> Vec<String> {
    let dra = dir.join("dra.json");
    std::fs::write(
        &dra,
        json!({"kind": "List", "items": [common::dell_dra_slice(NODE)]}).to_string(),
    )
    .unwrap();
    on_tree(
        cmd,
        tree,
        &["--dra", dra.to_str().unwrap(), "--node-name", NODE],
    )
}

/// The Dell with GPU's link narrowed to x8: a `pcie-link` fault.
fn narrowed_dell() -> Tree {
    let tree = Tree::copy_of("dell-xe9680-8xh100");
    tree.write_attr(GPU, "current_link_width", b"8\n");
    tree
}

/// The agent's arguments: the writable tree, DRA read from the cluster, device taints on.
fn args(tree: &Tree, kubeconfig: &std::path::Path, config: &std::path::Path) -> Vec<String> {
    on_tree(
        &["run"],
        tree,
        &[
            "--no-default-rules",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--node-name",
            NODE,
            "--config",
            config.to_str().unwrap(),
            "--interval",
            "1s",
            "--no-events",
            "--listen",
            "127.0.0.1:0",
            "--publish-device-taints",
        ],
    )
}

fn config(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let text = format!(
        "sources:\n  health:\n    clearAfter: {}s\npublish:\n  deviceTaintEffects: {{pcie-link: NoSchedule}}\n{extra}",
        HOLD.as_secs()
    );
    common::write_in(dir, "config.yaml", &text)
}

/// A cluster with the shipped policies (the Node's, deploy/components/device-taints'), node n1 and NVIDIA's slice for its 8 GPUs.
fn cluster() -> KubeApiServer {
    let s = KubeApiServer::with_policy(&shipped_device_taint_policy(false));
    s.create_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    let slice = common::dell_dra_slice(NODE);
    s.admin_apply("gpu.nvidia.com", &slice);
    s
}

/// The DeviceTaintRules as (name, labels, annotations' gpu, spec less `timeAdded`).
fn rules(s: &KubeApiServer) -> Vec<Value> {
    let list = s.get(RULES);
    let mut out: Vec<Value> = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut r| {
            if let Some(t) = r["spec"]["taint"].as_object_mut() {
                t.remove("timeAdded");
            }
            json!({
                "name": r["metadata"]["name"],
                "labels": r["metadata"]["labels"],
                "gpu": r["metadata"]["annotations"]["gpu-labeler.feature.node.kubernetes.io/gpu"],
                "spec": r["spec"],
            })
        })
        .collect();
    out.sort_by_key(|r| r["name"].to_string());
    out
}

/// The rule the agent writes for GPU 1's narrowed link (the site made pcie-link NoSchedule).
fn link_rule() -> Value {
    json!({
        "name": RULE,
        "labels": {
            "app.kubernetes.io/managed-by": "gpu-labeler",
            "gpu-labeler.feature.node.kubernetes.io/node": NODE,
        },
        "gpu": GPU,
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-1"},
            "taint": {
                "key": "feature.node.kubernetes.io/gpu-unhealthy",
                "value": "pcie-link",
                "effect": "NoSchedule",
            },
        },
    })
}

/// The agent's writes of DeviceTaintRules: (verb, path).
fn rule_writes(s: &KubeApiServer) -> Vec<(String, String)> {
    s.requests()
        .into_iter()
        .filter(|r| r.user_agent.starts_with("gpu-labeler/") && r.is_write())
        .filter(|r| r.uri.contains("/devicetaintrules"))
        .map(|r| {
            (
                r.verb,
                r.uri.split('?').next().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn wait_rules(s: &KubeApiServer, agent: &Agent, want: &[Value]) -> Duration {
    let t = Instant::now();
    wait_for(Duration::from_secs(20), || (rules(s) == want).then_some(())).unwrap_or_else(|| {
        panic!(
            "rules never became {want:#?}, are {:#?}; log:\n{}",
            rules(s),
            agent.log_text()
        )
    });
    t.elapsed()
}

#[test]
fn a_fault_taints_exactly_its_device_holds_through_a_flap_and_goes_after_the_hold() {
    let s = cluster();
    let tree = Tree::copy_of("dell-xe9680-8xh100");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = s.kubeconfig(&Who::agent(NODE));
    let mut agent = Agent::start(&args(&tree, &kubeconfig, &config(dir.path(), "")), &[]);
    agent.wait_log("published to node", Duration::from_secs(20));
    assert_eq!(rules(&s), Vec::<Value>::new());

    let width = |w: &[u8]| tree.write_attr(GPU, "current_link_width", w);
    width(b"8\n");
    // Within a scan (1 s) and its write.
    let took = wait_rules(&s, &agent, &[link_rule()]);
    assert!(
        took <= Duration::from_secs(3),
        "tainted {took:?} after the fault"
    );

    // Up for 1.5 s, down for 1.5 s, for 9 s: never absent for the hold, so the rule stays.
    let start = Instant::now();
    let mut narrow = true;
    let mut flipped = Instant::now();
    let mut seen: Vec<Vec<Value>> = Vec::new();
    while start.elapsed() < Duration::from_secs(9) {
        if flipped.elapsed() >= Duration::from_millis(1500) {
            narrow = !narrow;
            width(if narrow { b"8\n" } else { b"16\n" });
            flipped = Instant::now();
        }
        let now = rules(&s);
        if !seen.contains(&now) {
            seen.push(now);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(seen, vec![vec![link_rule()]], "{}", agent.log_text());

    // Fixed for good: gone within the hold and a scan (1 s) after the fault was last seen.
    width(b"8\n");
    std::thread::sleep(Duration::from_millis(1500));
    width(b"16\n");
    let fixed = Instant::now();
    wait_rules(&s, &agent, &[]);
    let took = fixed.elapsed();
    assert!(
        took <= HOLD + Duration::from_secs(2),
        "untainted {took:?} after the fix (hold {HOLD:?}); log:\n{}",
        agent.log_text()
    );
    assert_eq!(agent.stop(), 0);
    // One create, one delete: the flap wrote nothing.
    assert_eq!(
        rule_writes(&s),
        vec![
            ("APPLY".to_string(), format!("{RULES}/{RULE}")),
            ("DELETE".to_string(), format!("{RULES}/{RULE}")),
        ]
    );
}

#[test]
fn a_restarted_agent_keeps_the_rules_without_writing_them_and_never_touches_anothers() {
    let s = cluster();
    let tree = narrowed_dell();
    // An admin's rule for GPU 2, under the name gpu-labeler would give it.
    let theirs = json!({
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "gpu-labeler-n1-0000-4c-00-0"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-2"},
            "taint": {"key": "example.com/maintenance", "value": "firmware", "effect": "NoSchedule"},
        },
    });
    s.admin_apply("kubectl", &theirs);
    let admin_rule = s.get(&object_path(&theirs));
    tree.write_attr("0000:4c:00.0", "current_link_width", b"4\n");

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = s.kubeconfig(&Who::agent(NODE));
    let args = args(&tree, &kubeconfig, &config(dir.path(), ""));
    let mut agent = Agent::start(&args, &[]);
    // Only GPU 1's rule is the agent's; GPU 2's name is taken by the admin's rule.
    let want = vec![
        link_rule(),
        json!({
            "name": "gpu-labeler-n1-0000-4c-00-0",
            "labels": null,
            "gpu": null,
            "spec": theirs["spec"],
        }),
    ];
    wait_rules(&s, &agent, &want);
    let not_ours = "device taints: DeviceTaintRule gpu-labeler-n1-0000-4c-00-0 exists and is \
                    not gpu-labeler's (owned by kubectl): left as it is";
    agent.wait_log(not_ours, Duration::from_secs(10));
    assert_eq!(agent.stop(), 0);
    let before = rule_writes(&s);
    assert_eq!(
        before,
        vec![("APPLY".to_string(), format!("{RULES}/{RULE}"))]
    );

    // Restarted: it reads the rules and writes none over 3 cycles.
    // (The Node has its labels: nothing is published; the rules were read when it says so.)
    let mut agent = Agent::start(&args, &[]);
    agent.wait_log(not_ours, Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(agent.stop(), 0);
    assert_eq!(rule_writes(&s), before);
    assert_eq!(rules(&s), want);
    // The admin's rule is exactly as it was.
    assert_eq!(s.get(&object_path(&theirs)), admin_rule);
}

/// Forged writes with the agent's token (a stolen token) against the shipped policy: only a rule
/// for one device of its own node's pool, with its own key and a permitted effect, named for its
/// node, and only its own rule changed or deleted.
#[test]
fn the_policy_refuses_every_forged_device_taint() {
    let s = cluster();
    let agent = Who::agent(NODE);
    let rule = |name: &str, selector: Value, key: &str, effect: &str| {
        json!({
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": name},
            "spec": {
                "deviceSelector": selector,
                "taint": {"key": key, "value": "ecc", "effect": effect},
            },
        })
    };
    let key = "feature.node.kubernetes.io/gpu-unhealthy";
    let one = |pool: &str| json!({"driver": "gpu.nvidia.com", "pool": pool, "device": "gpu-1"});
    let ok = rule(RULE, one(NODE), key, "NoSchedule");
    // Each probe waits for the policy to be in force first (it is read asynchronously).
    s.wait_enforced(|| {
        let r = rule(RULE, one("n2"), key, "NoSchedule");
        s.apply(&agent, "gpu-labeler", &object_path(&r), &r, false)
    });
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "another node's pool",
            rule(RULE, one("n2"), key, "NoSchedule"),
            "a gpu-labeler DeviceTaintRule selects one device (driver, pool, device) in its own node's pool",
        ),
        (
            "an empty selector",
            rule(RULE, json!({}), key, "NoSchedule"),
            "a gpu-labeler DeviceTaintRule selects one device (driver, pool, device) in its own node's pool",
        ),
        (
            "a whole pool",
            rule(
                RULE,
                json!({"driver": "gpu.nvidia.com", "pool": NODE}),
                key,
                "NoSchedule",
            ),
            "a gpu-labeler DeviceTaintRule selects one device (driver, pool, device) in its own node's pool",
        ),
        (
            "another key",
            rule(RULE, one(NODE), "example.com/drain", "NoSchedule"),
            "a gpu-labeler device taint's key is feature.node.kubernetes.io/gpu-unhealthy",
        ),
        (
            "NoExecute",
            rule(RULE, one(NODE), key, "NoExecute"),
            "a gpu-labeler device taint's effect is None or NoSchedule (NoExecute only where the site allows it)",
        ),
        (
            "another node's name",
            rule("gpu-labeler-n2-0000-3b-00-0", one(NODE), key, "NoSchedule"),
            "gpu-labeler may only write DeviceTaintRules named gpu-labeler-<its node>-...",
        ),
    ];
    let mut got = Vec::new();
    let mut want = Vec::new();
    for (what, body, message) in &cases {
        let a = s.apply(&agent, "gpu-labeler", &object_path(body), body, false);
        got.push((what.to_string(), a.denial()));
        want.push((what.to_string(), Some(message.to_string())));
    }
    assert_eq!(got, want);
    // Its own rule: allowed, then changed and deleted.
    let a = s.apply(&agent, "gpu-labeler", &object_path(&ok), &ok, false);
    assert!(a.ok(), "{}", a.body);
    let none = rule(RULE, one(NODE), key, "None");
    let a = s.apply(&agent, "gpu-labeler", &object_path(&none), &none, false);
    assert!(a.ok(), "{}", a.body);
    // Taken over by an admin: no longer the agent's to change or delete.
    s.admin_apply("kubectl", &ok);
    let mine = "gpu-labeler may only change or delete its own DeviceTaintRules (its node's pool, no other manager in the spec)";
    let a = s.apply(&agent, "gpu-labeler", &object_path(&none), &none, true);
    assert_eq!(a.denial(), Some(mine.to_string()));
    let a = s.request(&agent, "DELETE", &object_path(&ok), None);
    assert_eq!(a.denial(), Some(mine.to_string()));
    // Where the site allows NoExecute (deploy/components/device-taints-noexecute), it may.
    let s = KubeApiServer::with_policy(&shipped_device_taint_policy(true));
    let evict = rule(RULE, one(NODE), key, "NoExecute");
    s.wait_enforced(|| {
        let r = rule(RULE, one("n2"), key, "NoSchedule");
        s.apply(&agent, "gpu-labeler", &object_path(&r), &r, false)
    });
    let a = s.apply(&agent, "gpu-labeler", &object_path(&evict), &evict, false);
    assert!(a.ok(), "{}", a.body);
}

/// `run --oneshot --sink stdout` with `--dra FILE`: the labels' line, then each rule it would
/// apply, whole, one JSON object per line.
#[test]
fn the_stdout_sink_prints_the_rules_it_would_apply() {
    let (tree, dir) = (narrowed_dell(), tempfile::tempdir().unwrap());
    let mut run = on_tree_with_slices(&["run"], &tree, dir.path());
    run.extend(
        ["--oneshot", "--sink", "stdout", "--publish-device-taints"]
            .iter()
            .map(|s| s.to_string()),
    );
    let ran = common::run(&run);
    let out = ran.ok();
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut labels = on_tree_with_slices(&["labels"], &tree, dir.path());
    labels.extend(["-o".to_string(), "json".to_string()]);
    let want_labels: Value = serde_json::from_str(common::run(&labels).ok()).unwrap();
    assert_eq!(
        lines,
        vec![
            want_labels,
            json!({
                "apiVersion": "resource.k8s.io/v1beta2",
                "kind": "DeviceTaintRule",
                "metadata": {
                    "name": RULE,
                    "labels": {
                        "app.kubernetes.io/managed-by": "gpu-labeler",
                        "gpu-labeler.feature.node.kubernetes.io/node": NODE,
                    },
                    "annotations": {
                        "gpu-labeler.feature.node.kubernetes.io/gpu": GPU,
                        "gpu-labeler.feature.node.kubernetes.io/faults": "pcie-link (x8 of x16)",
                    },
                },
                "spec": {
                    "deviceSelector": {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-1"},
                    "taint": {
                        "key": "feature.node.kubernetes.io/gpu-unhealthy",
                        "value": "pcie-link",
                        "effect": "None",
                    },
                },
            }),
        ]
    );
}

/// `prune` (the uninstall) deletes the agent's rules for the node and nothing else: an admin's
/// rule under the node's label stays, and the prune account's own policy refuses deleting it.
#[test]
fn prune_deletes_the_agents_rules_and_only_those() {
    let s = cluster();
    s.add_policy(&kube::shipped_prune_policy());
    let agent = Who::agent(NODE);
    let mine = json!({
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": RULE,
            "labels": {"gpu-labeler.feature.node.kubernetes.io/node": NODE},
            "annotations": {"gpu-labeler.feature.node.kubernetes.io/gpu": GPU},
        },
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-1"},
            "taint": {"key": "feature.node.kubernetes.io/gpu-unhealthy", "value": "ecc", "effect": "NoSchedule"},
        },
    });
    s.wait_enforced(|| {
        let mut r = mine.clone();
        r["spec"]["deviceSelector"]["pool"] = json!("n2");
        s.apply(&agent, "gpu-labeler", &object_path(&r), &r, false)
    });
    let a = s.apply(&agent, "gpu-labeler", &object_path(&mine), &mine, false);
    assert!(a.ok(), "{}", a.body);
    // An admin's rule with the node's label and a name of the agent's form.
    let mut theirs = mine.clone();
    theirs["metadata"]["name"] = json!("gpu-labeler-n1-0000-4c-00-0");
    theirs["spec"]["deviceSelector"]["device"] = json!("gpu-2");
    s.admin_apply("kubectl", &theirs);
    let prune = s.kubeconfig(&Who::prune());
    let k = prune.to_str().unwrap();
    let args = ["prune", "--kubeconfig", k, "--node-name", NODE];
    let dry = common::run([&args[..], &["--dry-run"]].concat()).parts();
    let plan = "node n1:\n- devicetaintrule gpu-labeler-n1-0000-3b-00-0 (NoSchedule ecc): would be deleted\n\
                1 node(s), 1 with something of gpu-labeler's (dry run: nothing changed)\n";
    assert_eq!(dry, (4, plan.to_string(), String::new()));
    let done = common::run(args).parts();
    assert_eq!(
        done,
        (
            0,
            plan.replace("would be deleted", "deleted")
                .replace(" (dry run: nothing changed)", ""),
            String::new()
        )
    );
    let left: Vec<Value> = rules(&s).into_iter().map(|r| r["name"].clone()).collect();
    assert_eq!(left, vec![json!("gpu-labeler-n1-0000-4c-00-0")]);
    // The prune account may not delete the admin's rule itself.
    let a = s.request(&Who::prune(), "DELETE", &object_path(&theirs), None);
    assert_eq!(
        a.denial(),
        Some("gpu-labeler prune may only delete gpu-labeler's own DeviceTaintRules".to_string())
    );
}

/// `explain --label gpu.health` with the node's slices (`--dra`) names the device taint that
/// takes the faulty GPU out of DRA allocation.
#[test]
fn explain_names_the_device_taint_of_a_faulty_gpu() {
    let (tree, dir) = (narrowed_dell(), tempfile::tempdir().unwrap());
    let args = on_tree_with_slices(&["explain", "--label", "gpu.health"], &tree, dir.path());
    let ran = common::run(&args);
    let expected = common::explain_degraded(
        18,
        &[
            "gpu.node.health: 0000:3b:00.0: pcie-link (x8 of x16)",
            "dra: GPU 0000:3b:00.0 (gpu.nvidia.com n1/gpu-1) is tainted out by DeviceTaintRule gpu-labeler-n1-0000-3b-00-0: None pcie-link",
        ],
        "7",
    );
    assert_eq!(ran.ok(), expected);
}

/// `match` names the GPUs under a device taint: from a file with the Nodes and the cluster's
/// DeviceTaintRules beside them, and from the cluster itself.
#[test]
fn match_names_the_gpus_that_are_tainted_out() {
    let (dir, pod) = common::temp_file(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: train}\nspec:\n  containers: [{name: c, image: x}]\n",
    );
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}});
    let rule = |name: &str, device: &str, gpu: Option<&str>, effect: &str| {
        let mut r = json!({
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": name},
            "spec": {
                "deviceSelector": {"driver": "gpu.nvidia.com", "pool": NODE, "device": device},
                "taint": {"key": "feature.node.kubernetes.io/gpu-unhealthy", "value": "ecc", "effect": effect},
            },
        });
        if let Some(g) = gpu {
            r["metadata"]["annotations"] = json!({"gpu-labeler.feature.node.kubernetes.io/gpu": g});
        }
        r
    };
    let ours = rule(RULE, "gpu-1", Some(GPU), "NoSchedule");
    let info = rule("gpu-labeler-n1-0000-4c-00-0", "gpu-2", None, "None");
    // Another node's rule names nothing here.
    let mut other = rule(
        "gpu-labeler-n2-0000-3b-00-0",
        "gpu-1",
        Some(GPU),
        "NoSchedule",
    );
    other["spec"]["deviceSelector"]["pool"] = json!("n2");
    let nodes = dir.path().join("nodes.json");
    std::fs::write(
        &nodes,
        json!({"kind": "List", "items": [node, ours, info, other]}).to_string(),
    )
    .unwrap();
    let expected = "\
Pod train (POD:1:1)
NODE  FITS  REASON
n1    yes
1/1 nodes are available.
dra: n1: GPU 0000:3b:00.0 (gpu.nvidia.com n1/gpu-1) is tainted out of DRA allocation by DeviceTaintRule gpu-labeler-n1-0000-3b-00-0 (NoSchedule: feature.node.kubernetes.io/gpu-unhealthy=ecc)
dra: n1: device gpu.nvidia.com n1/gpu-2 carries the informational taint of DeviceTaintRule gpu-labeler-n1-0000-4c-00-0 (None: feature.node.kubernetes.io/gpu-unhealthy=ecc)
"
    .replace("POD", &pod.display().to_string());
    // `match POD` with the nodes from `source` (`--nodes FILE`, `--kubeconfig FILE`).
    let match_pod = |source: [&str; 2]| {
        common::run([&["match", pod.to_str().unwrap()], &source[..]].concat()).parts()
    };
    let from_file = match_pod(["--nodes", nodes.to_str().unwrap()]);
    assert_eq!(from_file, (0, expected.clone(), String::new()));

    // The cluster: the Node, and the rules applied by the admin.
    let s = KubeApiServer::start();
    s.create_node(NODE, &[]);
    for r in [&ours, &info, &other] {
        s.admin_apply("kubectl", r);
    }
    let admin = s.kubeconfig(&Who::admin());
    let from_cluster = match_pod(["--kubeconfig", admin.to_str().unwrap()]);
    assert_eq!(from_cluster, (0, expected, String::new()));
}
